// Package gguf reads and writes the GGUF container, llama.cpp's model file
// format (gguf.h), version 3: the one codec of the project, used by the
// synthetic model writer (evals/synth) and by tensor models
// (models/tensor's "llmserve.graph" files).
//
// # What it owns
//
// The container and nothing inside it: the header (magic "GGUF", a uint32
// version, uint64 tensor and key-value counts), the typed metadata values
// ([KV]: the 12 scalar types of gguf_type and arrays of them, each value
// keeping the exact Go type it was read with, since llama.cpp checks value
// types strictly), the tensor infos ([TensorInfo]: name, dimensions in ggml
// order, ggml type, offset) and the alignment of the tensor data
// (general.alignment, 32 by default). Everything is little-endian.
//
// The codec is ours rather than github.com/ollama/ollama/fs/ggml's
// WriteGGUF because that package needs golang.org/x/sync, which is not in
// go.mod, and because its writer rejects GGUF types a tokenizer may carry
// (8-, 16- and 64-bit scalars, uint8 arrays such as
// tokenizer.ggml.precompiled_charsmap); llama.cpp checks every key's type
// strictly, so a copy must keep them all. (Tests cannot use ollama's readers
// either: importing fs/gguf, even from a test, makes `go mod tidy` want
// golang.org/x/sync too.)
//
// It must not know any model's layout: which keys an architecture needs,
// which tensors it has, what a graph is. Those belong to the packages that
// write or read a kind of model. It imports nothing of the project, so any
// package may import it.
//
// # Reading
//
// [Decode] reads a file held in memory, such as one a client uploaded:
// every length (string, array, count, tensor data) is checked against the
// bytes left before anything is allocated, so damaged or hostile input
// gives an error, never a panic or an allocation beyond the input's size.
// [Read] reads the same from a stream (a model file of gigabytes whose
// header is all that is wanted): it reads nothing past the tensor infos and
// grows strings and arrays with the data actually present, not with the
// declared lengths. Both accept versions 2 and 3 (version 1 used 32-bit
// lengths), reject nested arrays and more than 4 dimensions
// (GGML_MAX_DIMS), and return [ErrNotGGUF] for input without the magic and
// [ErrTruncated] for input that ends inside the header. [File.TensorData]
// slices one tensor's data out of a file in memory, bounds-checked.
// Errors name the key or tensor they are about.
//
// # Writing
//
// [Write] writes a version 3 file to a stream, [Encode] into memory: the
// key-values and tensor infos in the order given, then each tensor's data
// at the next multiple of 32 bytes from the start of the data section, with
// no padding after the last one. A [Tensor] writes its own data (synth
// generates gigabytes of weights row by row; [TensorInfo.WithData] is one
// already in memory). Write computes the offsets and checks that each
// tensor wrote exactly [TensorInfo.Size] bytes. For the same metadata and
// tensors its header is byte for byte llama.cpp's (evals/synth tests this
// on a file llama.cpp wrote).
//
// # Tests
//
// FuzzDecode feeds any bytes to both readers: no panic, the same result
// from both, tensor data sliced within the input, and metadata that
// encodes back to itself. Its seed corpus is in testdata/fuzz.
package gguf
