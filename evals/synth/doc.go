// Package synth writes dummy-weight GGUF models with the shapes of real
// ones: `llmserve synth`. It is vLLM's --load-format dummy for llama.cpp:
// serving speed depends on a model's shape (widths, depth, heads, vocabulary,
// weight type), not on its weight values, so a file of pseudo-random weights
// of SmolLM2-135M's shape measures what SmolLM2-135M would, on any machine,
// with nothing downloaded. The models produce garbage text. Use them for
// throughput and latency only, never to judge output quality, and never
// assert generated text against them.
//
// # What it owns
//
// The table of shapes, the weights (deterministic, seeded), their binary
// layout in each dtype, the GGUF metadata llama.cpp's "llama" and "qwen3"
// loaders need, and a small GGUF codec (gguf*.go). It is pure Go: it
// neither links nor imports llama.cpp. The codec is ours rather than
// github.com/ollama/ollama/fs/ggml's WriteGGUF because that package needs
// golang.org/x/sync, which is not in go.mod, and because its writer
// rejects GGUF types a tokenizer may carry (8-, 16- and 64-bit scalars,
// uint8 arrays such as tokenizer.ggml.precompiled_charsmap); llama.cpp
// checks every key's type strictly, so a copy must keep them all. (Tests
// cannot use ollama's readers either: importing fs/gguf, even from a test,
// makes `go mod tidy` want golang.org/x/sync too.) The codec is checked
// against llama.cpp's own: given the metadata and tensors of a header
// llama.cpp wrote (testdata/), it writes the same bytes.
//
// # Usage
//
//	llmserve synth --shape smollm2-135m --dtype q8_0 \
//	    --vocab ggml-vocab-llama-spm.gguf -o smollm2-135m-q8_0.gguf
//	llmserve serve --model smollm=smollm2-135m-q8_0.gguf
//	llmserve bench --max-concurrency 16 --num-prompts 64 ...
//
// or from Go:
//
//	s, _ := synth.LookupShape("smollm2-135m")
//	sum, err := synth.Write("model.gguf", synth.Options{
//		Shape: s, DType: synth.Q8_0, VocabPath: "ggml-vocab-llama-spm.gguf", Seed: 1,
//	})
//
// # Shapes
//
// All in the table are llama.cpp's "llama" architecture (RMSNorm, RoPE,
// grouped-query attention, SwiGLU feed-forward):
//
//	name          embd  layers  heads  kv heads  ff    context  rope theta  tied   real vocab  shape of
//	stories260k   64    5       8      4         172   512      10000       false  512         karpathy/tinyllamas stories260K
//	smollm2-135m  576   30      9      3         1536  8192     100000      true   49152       HuggingFaceTB/SmolLM2-135M
//	llama-1b      2048  16      32     8         8192  131072   500000      true   128256      meta-llama/Llama-3.2-1B (without its llama3 RoPE scaling)
//
// RMS epsilon is 1e-5 for all. With their real vocabularies the parameter
// counts are exactly the real models' (134,515,008 for SmolLM2-135M,
// 1,235,814,400 for Llama-3.2-1B, 292,800 for stories260K's GGUF); a test
// checks it. SmolLM2-135M in Q8_0 is the standard benchmark model.
//
// # Qwen3 and rerankers (from Go only)
//
// A Shape with Arch "qwen3" is llama.cpp's Qwen3 architecture: the llama
// tensors plus, in each block, blk.N.attn_q_norm.weight and
// attn_k_norm.weight (RMSNorm weights of one head's size, all 1), and
// qwen3.* hyperparameter keys instead of llama.*. Options.RerankLabels
// makes it a reranker (a cross-encoder): qwen3.pooling_type = 4 (rank),
// qwen3.classifier.output_labels = the labels (e.g. ["yes", "no"]) and a
// classifier head cls.output.weight of [embd, labels], so that llama.cpp's
// rank pooling returns one softmaxed score per label for a sequence's last
// token. Options.RerankTemplate writes tokenizer.chat_template.rerank, the
// prompt llama.cpp's server (and llmserve's /v1/rerank) formats a pair
// with. Its scores are meaningless (dummy weights); the tests use it to
// check the rerank path against itself. The command offers the table's
// llama shapes only.
//
// # The vocabulary
//
// The tokenizer is copied from a GGUF file given with --vocab: every
// tokenizer.* key, with its exact GGUF type. A vocabulary-only file
// (llama.cpp's models/ggml-vocab-*.gguf) or any model file will do. Its
// token count sets the rows of token_embd.weight and of the output layer, so
// it changes the model's largest matmul: with ggml-vocab-llama-spm.gguf
// (32000 tokens) the SmolLM2 shape has 124.6M parameters and 127 MiB in
// Q8_0; with a vocabulary of about SmolLM2's own 49152 tokens (gpt-2's
// 50257, say) it has about the real 134.5M and 145 MB. The command prints
// the ratio when the two differ. To pair the stories260k shape with its
// real 512-token vocabulary, give the stories260K GGUF itself as --vocab.
//
// # The weights
//
// Each tensor has its own PCG generator seeded with --seed and the hash of
// the tensor's name. Matrix elements are uniform in ±1/√(row length), which
// keeps every matrix-vector product at its input's scale, so activations
// stay finite at any depth and sampling sees ordinary logits. Norm weights
// are 1. Matrices are written in the chosen dtype: F32, F16 (IEEE half,
// round to nearest even) or Q8_0 (ggml's block_q8_0: a half scale
// d = max|x|/127 and 32 int8 quants, computed as quantize_row_q8_0_ref
// does); norm weights are always F32, as llama.cpp's converter writes them.
// A Q8_0 file thus holds the quantized values of the F32 file of the same
// seed. A matrix whose rows are not whole 32-element blocks (stories260k's
// ffn_down, rows of 172) is written F16 instead, as llama.cpp's quantizer
// does for k-quants (its plain Q8_0 refuses such a model); the command
// lists them. The same options give the same file,
// byte for byte.
//
// # The file
//
// GGUF version 3, alignment 32. Metadata: general.architecture=llama (or
// qwen3, whose keys below are qwen3.* instead),
// general.type, general.name, general.description (says the weights are
// dummy), general.file_type (0, 1 or 7), general.quantization_version=2 for
// Q8_0, then llama.vocab_size, context_length, embedding_length,
// block_count, feed_forward_length, rope.dimension_count,
// attention.head_count, attention.head_count_kv (uint32), rope.freq_base and
// attention.layer_norm_rms_epsilon (float32), for a reranker
// pooling_type (uint32) and classifier.output_labels (strings), then the
// tokenizer (and the rerank template). Tensors: token_embd.weight; for each
// block blk.N.attn_norm, attn_q, attn_k, attn_v, attn_output, (qwen3:
// attn_k_norm, attn_q_norm,) ffn_norm, ffn_gate, ffn_up, ffn_down;
// output_norm.weight; output.weight unless the shape ties it to
// token_embd; cls.output.weight for a reranker. Write writes to a
// temporary file beside the target and renames it into place.
//
// # LoRA adapters
//
// WriteLoRA (llmserve synth lora) writes a LoRA adapter for any base GGUF
// in the layout llama.cpp's convert_lora_to_gguf.py writes:
// general.type=adapter, adapter.type=lora, adapter.lora.alpha (float32),
// the base's general.architecture, and F32 tensors <weight>.lora_a
// [n_in, rank] and <weight>.lora_b [rank, n_out] for every weight of the
// target kinds (attn_q ... ffn_down by default), uniform pseudo-random
// values seeded by the seed and the tensor's name. WriteMerged writes the
// base with W + scale·alpha/rank·B·A in place of each adapted weight (F32),
// the model the adapter is equivalent to: engine/llamacpp's tests hold
// llama.cpp's adapter path to it (lora.go has the layout's arithmetic).
//
// # What the caller must guarantee
//
// Nothing beyond a readable vocabulary and a writable directory: Write
// validates the shape (heads dividing the width, KV heads dividing heads)
// and the vocabulary (a tokenizer model, a non-empty token list, per-token
// arrays of the same length). Disk space is the caller's: llama-1b in F32
// is 4 to 5 GB.
package synth
