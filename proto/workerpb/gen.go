// Package workerpb is the generated Go code of worker.proto, the internal
// gRPC service llmserve.worker.v1.Worker that `llmserve worker` (and
// `serve`, for KV pulls) exposes to a head and to peer workers. The proto
// file is the service's documentation; nothing else here is written by
// hand. Regenerate with `make proto` (needs protoc); the generated files
// are committed.
package workerpb

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative worker.proto
