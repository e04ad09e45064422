// Package tritonpb is the generated Go code of the TensorRT Inference
// Server's original (v1) API, release v1.2.0: the gRPC service
// nvidia.inferenceserver.GRPCService (proto/src/core/grpc_service.proto)
// and the messages it and the HTTP routes share (api.proto:
// InferRequestHeader and InferResponseHeader; request_status.proto;
// server_status.proto; model_config.proto). The proto files are NVIDIA's,
// unchanged (proto/SOURCE.md says from where), kept under src/core/ because
// they import each other by that path; the proto package stays
// nvidia.inferenceserver, so clients generated from the official files
// work unchanged. Nothing here is written by hand. It sits on the ground
// floor with the other generated packages (proto/), below api/tritonv1
// that serves it and api/ that mounts it.
//
// Regenerate with `make proto`: it installs the pinned protoc-gen-go and
// protoc-gen-go-grpc and runs the go:generate line below, which needs
// protoc (Debian's protobuf-compiler). The generated files are committed,
// so building needs none of them.
package tritonpb

//go:generate protoc -I proto --go_out=. --go_opt=module=github.com/llmserve/llmserve/proto/tritonpb --go-grpc_out=. --go-grpc_opt=module=github.com/llmserve/llmserve/proto/tritonpb --go_opt=Msrc/core/api.proto=github.com/llmserve/llmserve/proto/tritonpb --go-grpc_opt=Msrc/core/api.proto=github.com/llmserve/llmserve/proto/tritonpb --go_opt=Msrc/core/grpc_service.proto=github.com/llmserve/llmserve/proto/tritonpb --go-grpc_opt=Msrc/core/grpc_service.proto=github.com/llmserve/llmserve/proto/tritonpb --go_opt=Msrc/core/model_config.proto=github.com/llmserve/llmserve/proto/tritonpb --go-grpc_opt=Msrc/core/model_config.proto=github.com/llmserve/llmserve/proto/tritonpb --go_opt=Msrc/core/request_status.proto=github.com/llmserve/llmserve/proto/tritonpb --go-grpc_opt=Msrc/core/request_status.proto=github.com/llmserve/llmserve/proto/tritonpb --go_opt=Msrc/core/server_status.proto=github.com/llmserve/llmserve/proto/tritonpb --go-grpc_opt=Msrc/core/server_status.proto=github.com/llmserve/llmserve/proto/tritonpb src/core/api.proto src/core/grpc_service.proto src/core/model_config.proto src/core/request_status.proto src/core/server_status.proto
