// Package inferencepb is the generated Go code of Triton's
// inference.GRPCInferenceService (proto/grpc_service.proto and the
// model_config.proto it imports), a wire-compatible superset of the Open
// Inference Protocol's gRPC service that adds ModelStreamInfer and the
// repository RPCs. The proto files are Triton's, unchanged
// (proto/SOURCE.md says from where); nothing here is written by hand. The
// messages of model_config.proto (ModelConfig and the DataType enum) are
// generated once, in proto/tritonconfigpb, which the model repository
// reads config.pbtxt with; protoc maps the import onto that package.
//
// Regenerate with `make proto`: it installs the pinned protoc-gen-go and
// protoc-gen-go-grpc and runs the go:generate line below, which needs
// protoc (Debian's protobuf-compiler). The generated files are committed,
// so building needs none of them.
package inferencepb

//go:generate protoc -I proto -I ../tritonconfigpb/proto --go_out=. --go_opt=paths=source_relative --go_opt=Mgrpc_service.proto=github.com/llmserve/llmserve/proto/inferencepb --go_opt=Mmodel_config.proto=github.com/llmserve/llmserve/proto/tritonconfigpb --go-grpc_out=. --go-grpc_opt=paths=source_relative --go-grpc_opt=Mgrpc_service.proto=github.com/llmserve/llmserve/proto/inferencepb --go-grpc_opt=Mmodel_config.proto=github.com/llmserve/llmserve/proto/tritonconfigpb grpc_service.proto
