// Package tritonconfigpb is the generated Go code of Triton's model
// configuration, inference.ModelConfig (proto/model_config.proto): the
// text protobuf a Triton model repository keeps in each model's
// config.pbtxt, and the answer of Triton's model configuration extension
// (GET /v2/models/{m}/config, gRPC ModelConfig). The proto file is
// NVIDIA's, unchanged (proto/SOURCE.md says from where, proto/LICENSE is
// its licence); nothing here is written by hand.
//
// It sits on the ground floor so that the model repository (models/)
// reads config.pbtxt with the same type the protocols (api/) answer with;
// proto/inferencepb imports it for ModelConfigResponse. The file
// registers as "model_config.proto", the path grpc_service.proto imports.
//
// Regenerate with `make proto`: it installs the pinned protoc-gen-go and
// runs the go:generate line below, which needs protoc (Debian's
// protobuf-compiler). The generated file is committed, so building needs
// neither.
package tritonconfigpb

//go:generate protoc -I proto --go_out=. --go_opt=paths=source_relative --go_opt=Mmodel_config.proto=github.com/llmserve/llmserve/proto/tritonconfigpb model_config.proto
