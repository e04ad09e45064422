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
// layout in each dtype, and the GGUF metadata llama.cpp's "llama" and "qwen3"
// loaders need. It is pure Go: it neither links nor imports llama.cpp. The
// GGUF container itself is the project's codec, package gguf; synth checks
// it against llama.cpp's own: given the metadata and tensors of a header
// llama.cpp wrote (testdata/), gguf.Write writes the same bytes.
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
// (llama.cpp's models/ggml-vocab-*.gguf) or any model file will do.
// --chat-template FILE (Options.ChatTemplate) writes that Jinja template as
// tokenizer.chat_template in place of the vocabulary's (most vocabulary
// files have none), e.g. one that renders tools, so that llmserve and
// llama-server format an agent's requests the same way from one file
// (`llmserve bench agent`); --reasoning writes its own and excludes it. The
// vocabulary's token count sets the rows of token_embd.weight and of the output layer, so
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
// # Vision projectors
//
// WriteProjector (llmserve synth mmproj) writes a multimodal projector
// ("mmproj") GGUF, what llama.cpp's libmtmd (mtmd_init_from_file) loads
// beside a text model: a SigLIP-style vision transformer and SmolVLM's
// idefics3 projector, with pseudo-random weights, so that image chat runs
// end to end without a real vision model (what the model says about an
// image is garbage). clip.cpp at ec98e2002 is the ground truth for the
// layout.
//
//	llmserve synth mmproj --base stories260K-f32.gguf --base-out stories260K-img.gguf -o mm.gguf
//	llama-mtmd-cli -m stories260K-img.gguf --mmproj mm.gguf --image img.png \
//	    -p Describe -n 16 --temp 0 --chat-template chatml
//
// The output width (clip.vision.projection_dim and the columns of
// mm.model.fc.weight) is the text model's n_embd: --n-embd, or --base
// whose <arch>.embedding_length is read. Keys: general.architecture=clip,
// general.type=mmproj, general.name, general.description,
// general.file_type (0 or 1), clip.has_vision_encoder=true,
// clip.projector_type=idefics3, clip.use_gelu=true, and clip.vision.*:
// projection_dim, image_size, patch_size, embedding_length,
// feed_forward_length, block_count, attention.head_count (uint32),
// image_mean and image_std ([0.5 0.5 0.5], float32 arrays),
// attention.layer_norm_epsilon (float32), projector.scale_factor and
// preproc_image_size (uint32). Tensors, ggml shapes (row length first),
// with E the width, F the feed-forward width, P the patch side, N the
// patches per tile, S the scale factor and D the output width:
// v.patch_embd.weight [P P 3 E] (a conv2d kernel) and .bias [E],
// v.position_embd.weight [E N]; for each block v.blk.I.attn_q, attn_k,
// attn_v, attn_out (.weight [E E], .bias [E]), ln1 and ln2 (.weight,
// .bias [E]), ffn_up (.weight [E F], .bias [F]), ffn_down (.weight [F E],
// .bias [E]); v.post_ln.weight and .bias [E]; mm.model.fc.weight
// [E·S² D]. Matrices (attention, feed-forward, fc) are F32 or, with
// --dtype f16, F16; everything else is F32, as llama.cpp's converter
// keeps the embeddings. Values: matrices uniform in ±1/√(row length), the
// patch kernel in ±1/√(3P²), biases and position embeddings in ±0.02,
// norm weights 1 and norm biases 0; each tensor has its own generator
// seeded with --seed and the tensor's name, so the same options give the
// same bytes (a test pins the tiny projector's checksum).
//
// Shapes (--shape):
//
//	name          image  patch  width  ff    layers  heads  scale  preproc  tokens/tile  params
//	tiny          64     8      64     256   2       4      2      64       16           132928 (D=64)
//	smolvlm-256m  512    16     768    3072  12      12     4      2048     64           93510912 (D=576)
//
// smolvlm-256m is HuggingFaceTB/SmolVLM-256M-Instruct's vision tower and
// connector: a SigLIP base encoder with 512-pixel tiles of 16-pixel
// patches, 768 wide, 12 layers of 12 heads, feed-forward 3072 (SigLIP-B's
// config), pixel shuffle 4 (64 tokens per tile, as the model card says:
// "64 visual tokens to encode image patches of size 512×512"), layer norm
// epsilon 1e-6 (SigLIP's), image mean and std 0.5. With D = 576
// (SmolLM2-135M's width) it has 93.5M parameters, the card's "93M
// encoder". Not checked against the model's own files: the
// preprocessing's longest edge 2048 (4×512, transformers'
// SmolVLMImageProcessor default; llama.cpp writes the model's
// size.longest_edge there) and whether its config sets
// layer_norm_eps. tiny is ours, for tests: 16 tokens per tile, and one
// 64×64 tile encodes in about 7 ms on one CPU core. smolvlm-256m takes
// 12 to 18 s per 512×512 tile on one (shared) core: with stories260K, a
// 64×64 picture became 17 images and a prompt of 1366 tokens (244 s), which
// needs llama-mtmd-cli -c 2048 (stories260K's own context is 512: "failed
// to find a memory slot").
//
// Image tokens. llama.cpp's idefics3 preprocessing resizes a picture of
// w×h so that its longest edge is preproc (keeping the aspect ratio), rounds
// each side up to whole tiles, cuts it into tiles, and adds a global image
// (the whole picture squashed into one tile) after them: 1 +
// ⌈w·r/image⌉·⌈h·r/image⌉ images with r = preproc/max(w, h)
// (ProjectorShape.Tiles), each giving tokens/tile embeddings. With the
// tiny shape (preproc = image = 64) every picture, of any size, is one
// tile plus the global image: 32 image tokens. smolvlm-256m: a 64×64 or
// 2048×2048 picture gives 16 tiles + 1 = 17 images, 1088 tokens; 1024×768,
// 13 images, 832 tokens.
//
// The text model's vocabulary. libmtmd frames the idefics3 tiles with
// text tokens and looks up three of them by their exact text ("\n\n",
// "<fake_token_around_image>", "<global-img>", and "\n" between rows of
// tiles); SmolVLM's vocabulary has them, but in one without them (such as
// stories260K's) it puts token id -1 in the prompt and llama_decode fails
// ("invalid token[0] = -1"). WriteWithImageTokens (--base-out) writes a
// copy of the base with the missing ones appended as user-defined tokens,
// with zero rows in token_embd.weight and output.weight; everything else is
// the base's. The prompt llama-mtmd-cli then evaluates for "<__media__>"
// with the tiny shape is: the text before the marker,
// "<fake_token_around_image><row_1_col_1>" (parsed as text), the tile's 16
// embeddings, "\n\n<fake_token_around_image><global-img>", the global
// image's 16 embeddings, "<fake_token_around_image>", then the text after.
//
// testdata/mmproj/golden.json records one such llama-mtmd-cli run
// (stories260K with the image tokens, the tiny projector of seed 1,
// testdata/mmproj/gradient-64.png, greedy): the command, the prompt with
// its media marker, every prompt chunk's token ids, and the 16 generated
// token ids and text; testdata/mmproj/mtmd_ids.cpp is the small libmtmd
// program that printed the ids. The tests regenerate both model files
// from the seed and check their checksums against the golden's, so a
// later test can hold llmserve's image path to llama.cpp's, token for
// token, without committed model files.
//
// # Audio projectors
//
// With an audio shape (--shape tiny-audio) WriteProjector writes an audio
// "mmproj" instead, for llama-mtmd-cli --audio and input_audio chat parts:
// a Whisper-style encoder and Qwen2-Audio's "qwen2a" projector, in the
// layout convert_hf_to_gguf.py writes for Qwen2-Audio
// (WhisperEncoderModel) and clip.cpp builds (clip_graph_whisper_enc).
// Of the audio projectors libmtmd runs at ec98e2002 (init_audio accepts
// qwen2a, ultravox and voxtral; it aborts on glma), qwen2a has the
// smallest projector (one linear map with bias) and no frame stacking.
// Ultravox and voxtral stack frames, and with their real models' stack
// factors, 8 and 4, clip_n_output_tokens and the graph disagree by one row
// for a 3000-frame window: llama-mtmd-cli aborts ("clip_image_batch_encode:
// expected output 187 tokens, got 188"; tried with throwaway files of our
// layout). A voxtral factor dividing 750 (5: 150 tokens a window) runs,
// but is no real model's.
//
//	llmserve synth mmproj --shape tiny-audio --base stories260K-f32.gguf \
//	    --base-out stories260K-audio.gguf -o mm-audio.gguf
//	llama-mtmd-cli -m stories260K-audio.gguf --mmproj mm-audio.gguf \
//	    --audio clip.wav -p Describe -n 16 --temp 0 --chat-template chatml -c 1024
//
// Keys: general.* as for vision, clip.has_vision_encoder=false,
// clip.has_audio_encoder=true, clip.projector_type=qwen2a, and
// clip.audio.*: projection_dim, embedding_length, feed_forward_length,
// block_count, attention.head_count, num_mel_bins (uint32),
// attention.layer_norm_epsilon (float32). No stack factor (qwen2a reads
// none) and no clip.use_gelu (clip.cpp fixes GELU (erf) for audio).
// Tensors, with E the width, F the feed-forward width, M the mel bins, T
// the positions and D the output width: a.conv1d.1.weight [3 M E] and
// a.conv1d.2.weight [3 E E] (conv1d kernels, always F16 as the converter
// forces them; the second has stride 2), a.conv1d.1.bias and
// a.conv1d.2.bias [1 E] (unsqueezed, so they broadcast over the frames),
// a.position_embd.weight [E T]; for each block a.blk.I.attn_q, attn_v,
// attn_out (.weight [E E], .bias [E]), attn_k.weight [E E] (Whisper's k
// has no bias; clip.cpp asserts there is none), ln1, ln2, ffn_up,
// ffn_down as for vision; a.post_ln.weight and .bias [E] (after the
// average pool); mm.a.fc.weight [E D] and mm.a.fc.bias [D]. Values as for
// vision; a conv1d kernel is uniform in ±1/√(3·in channels).
//
//	name        mel  positions  width  ff   layers  heads  tokens/30s  params
//	tiny-audio  128  1500       32     128  1       2      750         78272 (D=64)
//
// The front end is Whisper's, fixed by libmtmd for every audio
// projector: 16 kHz, 400-sample windows, a hop of 160, 30-s windows of
// 3000 mel frames, each its own audio chunk of 3000/2/2 = 750 embeddings
// (the stride-2 conv, then the average pool). The mel bins are the file's
// (libmtmd builds the filter bank for any count); 128 is Whisper-large-v3's
// and Qwen2-Audio's. libmtmd pads a clip shorter than 31 s with zeros to
// 31 s and keeps only whole windows, counting frames on the padded clip
// alone, so any clip of up to 60 s is one window and 750 tokens
// (AudioChunks). With stories260K that makes a prompt longer than its
// 512-token context: llama-mtmd-cli needs -c 1024 (at 512 it aborts on
// GGML_ASSERT(n_tokens_all <= cparams.n_batch)). The window's 1500
// positions are fixed, so attention over them dominates the encoder's
// cost whatever the clip: tiny-audio encodes a window in about 0.55 s on
// one core of this (loaded, shared) machine, a 64-wide 2-layer shape took
// 2.4 to 4 s, 64 wide with one layer about 1.2 s; stories260K then
// decodes the 799-token prompt in 1.2 to 1.9 s.
//
// libmtmd puts "<|audio_bos|>" before a qwen2a chunk and "<|audio_eos|>"
// after it, tokenized as text with special tokens parsed: a vocabulary
// without them gets them spelled out in ordinary pieces (no failure, unlike
// idefics3's lookups). WriteWithAudioTokens (--base-out with an audio
// shape) adds them as user-defined tokens, as WriteWithImageTokens does
// for images, so that each is one token as in Qwen2-Audio (512 and 513 in
// stories260K).
//
// testdata/mmproj/golden-audio.json records the llama-mtmd-cli run above
// with stories260K and the tiny-audio projector of seed 1 on
// testdata/mmproj/sweep-1s.wav (one second of a 200 Hz to 2 kHz sine
// sweep, 16 kHz mono 16-bit PCM, written by the tests' sweepWAV): the
// prompt chunks (16 text tokens ending in <|audio_bos|>, 750 audio
// tokens, 33 text tokens opening with <|audio_eos|>), the 16 generated ids
// and the text, with mtmd_ids.cpp's ids. The tests regenerate the files
// and check them against its checksums.
//
// # What the caller must guarantee
//
// Nothing beyond a readable vocabulary and a writable directory: Write
// validates the shape (heads dividing the width, KV heads dividing heads)
// and the vocabulary (a tokenizer model, a non-empty token list, per-token
// arrays of the same length). Disk space is the caller's: llama-1b in F32
// is 4 to 5 GB.
package synth
