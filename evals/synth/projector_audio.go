package synth

import (
	"fmt"

	"github.com/llmserve/llmserve/gguf"
)

// Audio projectors
//
// An audio shape (Projector "qwen2a") is what llama.cpp's
// convert_hf_to_gguf.py writes for Qwen2-Audio's audio tower and
// projector and what clip.cpp at ec98e2002 builds as
// clip_graph_whisper_enc: a Whisper encoder (two conv1d with GELU, the
// second of stride 2; position embeddings; pre-norm transformer blocks
// with biased q, v and output, an unbiased k; a 2-wide average pool;
// a final layer norm) and one linear map with bias to the text model's
// width. Of libmtmd's audio projectors at this commit it has the smallest
// projector and no frame stacking (ultravox, voxtral and glma stack
// frames). libmtmd frames its audio with "<|audio_bos|>" and
// "<|audio_eos|>", tokenized as text: WriteWithAudioTokens adds them to a
// vocabulary that lacks them.

const (
	projIdefics3 = "idefics3"
	projQwen2A   = "qwen2a"
)

// Qwen2AudioTokens are the texts libmtmd's qwen2a path puts before and
// after an audio input's embeddings (mtmd.cpp, init_audio). It tokenizes
// them with special tokens parsed, so a vocabulary without them gets
// them spelled out in ordinary pieces rather than refused; with them
// added (WriteWithAudioTokens) each is one token, as in Qwen2-Audio's.
var Qwen2AudioTokens = []string{"<|audio_bos|>", "<|audio_eos|>"}

// Whisper's audio front end as libmtmd fixes it for every audio
// projector (clip.cpp, load_hparams): 16 kHz, a hop of 160 samples, a
// window of 400, and 30-s windows of 3000 mel frames.
const (
	AudioSampleRate    = 16000
	audioHop           = 160
	audioWindow        = 400
	audioChunkFrames   = 3000
	audioChunkSeconds  = 30
	audioChunkTokens   = audioChunkFrames / 2 / 2 // conv1d stride 2, then the average pool
	audioChunkPosition = audioChunkFrames / 2
)

// IsAudio reports whether the shape is an audio encoder.
func (s ProjectorShape) IsAudio() bool { return s.Projector == projQwen2A }

// AudioChunks is the number of 30-s windows libmtmd encodes for n samples
// of 16 kHz audio, each one audio chunk of TokensPerAudioChunk
// embeddings (mirrors mtmd-audio.cpp at ec98e2002: audio shorter than
// 31 s is padded with zeros to 31 s; the log-mel spectrogram has
// (n-400)/160+1 frames; whole windows of 3000 frames are kept, the rest
// dropped). Any clip of up to 60 s is one chunk: the frames are counted
// on the clip alone, and a second window needs 6000.
func AudioChunks(n int) int {
	if n <= 0 {
		return 0
	}
	n = max(n, AudioSampleRate*(audioChunkSeconds+1))
	frames := (n-audioWindow)/audioHop + 1
	return frames / audioChunkFrames
}

// TokensPerAudioChunk is the number of embeddings an audio shape gives for
// one 30-s window: 3000 mel frames, halved by the stride-2 conv1d and
// again by the average pool (750); 0 for a vision shape.
func (s ProjectorShape) TokensPerAudioChunk() int {
	if !s.IsAudio() {
		return 0
	}
	return audioChunkTokens
}

func (s ProjectorShape) validateAudio() error {
	switch {
	case s.NMel <= 0:
		return fmt.Errorf("projector shape %q: %d mel bins", s.Name, s.NMel)
	case s.Positions < audioChunkPosition:
		// clip.cpp asserts position_embd's rows cover a window's 1500.
		return fmt.Errorf("projector shape %q: %d positions, fewer than a 30-s window's %d", s.Name, s.Positions, audioChunkPosition)
	case s.Embd <= 0 || s.FF <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.Embd%s.Heads != 0:
		return fmt.Errorf("projector shape %q: width %d, feed-forward %d, %d layers, %d heads (heads must divide the width)", s.Name, s.Embd, s.FF, s.Layers, s.Heads)
	case s.ImageSize != 0 || s.PatchSize != 0 || s.ScaleFactor != 0 || s.PreprocImageSize != 0:
		return fmt.Errorf("projector shape %q: an audio shape has no image fields", s.Name)
	}
	return nil
}

// audioMetadata is the file's metadata, the keys clip.cpp reads for an
// audio encoder with a qwen2a projector.
func audioMetadata(s ProjectorShape, o ProjectorOptions) []gguf.KV {
	u := func(n int) uint32 { return uint32(n) }
	return append(generalMetadata(s, o), []gguf.KV{
		{Key: "clip.has_vision_encoder", Value: false},
		{Key: "clip.has_audio_encoder", Value: true},
		{Key: "clip.projector_type", Value: projQwen2A},
		{Key: "clip.audio.projection_dim", Value: u(o.NEmbd)},
		{Key: "clip.audio.embedding_length", Value: u(s.Embd)},
		{Key: "clip.audio.feed_forward_length", Value: u(s.FF)},
		{Key: "clip.audio.block_count", Value: u(s.Layers)},
		{Key: "clip.audio.attention.head_count", Value: u(s.Heads)},
		{Key: "clip.audio.attention.layer_norm_epsilon", Value: s.Eps},
		{Key: "clip.audio.num_mel_bins", Value: u(s.NMel)},
	}...)
}

// audioPlan lists an audio shape's tensors in file order, with their ggml
// shapes (row length first).
func audioPlan(s ProjectorShape, nEmbd int, mt gguf.TensorType) []projectorTensor {
	e, ff := uint64(s.Embd), uint64(s.FF)
	var ts tensorPlan
	add := ts.add
	// conv1d kernels [kernel, in channels, out channels], F16 as the
	// converter forces them; biases [1, out channels] (the converter
	// unsqueezes them so that they broadcast over the frames).
	add("a.conv1d.1.weight", fillConv1d, gguf.F16, 3, uint64(s.NMel), e)
	add("a.conv1d.1.bias", fillSmall, gguf.F32, 1, e)
	add("a.conv1d.2.weight", fillConv1d, gguf.F16, 3, e, e)
	add("a.conv1d.2.bias", fillSmall, gguf.F32, 1, e)
	add("a.position_embd.weight", fillSmall, gguf.F32, e, uint64(s.Positions))
	ts.encoder("a", s.Layers, e, ff, mt, false) // Whisper's k projection has no bias
	add("mm.a.fc.weight", fillMatrix, mt, e, uint64(nEmbd))
	add("mm.a.fc.bias", fillSmall, gguf.F32, uint64(nEmbd))
	return ts
}
