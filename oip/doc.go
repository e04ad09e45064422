// Package oip is the Open Inference Protocol's data model that both of its
// sides share: the protocols that speak it (api/v2 and its infer and grpc
// packages, api/kservev1, api/tritonv1) and the runtimes that serve it
// (models/tensor, models/runtime). It is pure Go and imports nothing of
// the server's, so a protocol package can name a tensor model's inputs
// without linking the model's runtime (models/tensor reaches llama.cpp
// through cgo; api/v2 builds with CGO_ENABLED=0).
//
// It holds:
//
//   - Datatype and the ONE table of the protocol's datatypes
//     (datatype.go): each one's element size, the Go type that holds an
//     element, NumPy's dtype name (MLServer's codecs and the Python
//     runtime name them so), Triton's model configuration type and the
//     gRPC protocol's typed contents field. Every size, name and Triton
//     type in the server comes from here.
//   - Spec and Tensor (tensor.go): what a tensor model declares of each
//     input and output, and the typed values (FP32 or INT64) it computes
//     on. The wire forms (JSON, raw bytes, protobuf contents) are the
//     protocols'; these are what they decode into for a tensor model.
package oip
