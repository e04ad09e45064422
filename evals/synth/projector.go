package synth

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/llmserve/llmserve/gguf"
)

// Multimodal projectors
//
// WriteProjector writes an "mmproj" GGUF, the file llama.cpp's libmtmd
// (mtmd_init_from_file, clip.cpp) loads beside a text model: a SigLIP-style
// vision transformer and SmolVLM's "idefics3" projector (pixel shuffle by
// the scale factor, then one linear map to the text model's width). The
// layout is that of llama.cpp's convert_hf_to_gguf.py for SmolVLM; doc.go
// lists the keys and tensors. An audio shape (projector_audio.go) gives a
// Whisper encoder and Qwen2-Audio's qwen2a projector instead.

// ProjectorShape is the shape of a vision encoder and its idefics3
// projector, or (Projector "qwen2a") of a Whisper-style audio encoder and
// its qwen2a projector (projector_audio.go).
type ProjectorShape struct {
	Name string
	// Projector is clip.projector_type: "idefics3" (vision; "" means it)
	// or "qwen2a" (audio).
	Projector string
	// ImageSize is the side of one tile in pixels (clip.vision.image_size)
	// and PatchSize the side of a patch: a tile is (ImageSize/PatchSize)²
	// patches, the encoder's sequence length.
	ImageSize, PatchSize int
	// Embd is the encoder's width, FF its feed-forward width, Layers its
	// depth and Heads its attention heads.
	Embd, FF, Layers, Heads int
	// ScaleFactor is the pixel shuffle's factor per side: ScaleFactor²
	// neighbouring patches become one token of width Embd·ScaleFactor².
	ScaleFactor int
	// PreprocImageSize is clip.vision.preproc_image_size, the longest edge
	// an image is resized to before it is cut into tiles of ImageSize
	// (rounding each side up to a whole tile); the tiles follow a global
	// image of the whole picture resized to one tile. 0 writes no key:
	// llama.cpp then encodes the global image only.
	PreprocImageSize int
	// NMel is an audio encoder's mel bins (clip.audio.num_mel_bins), the
	// first conv1d's input channels, and Positions its position
	// embeddings' rows: at least the 1500 of one 30-s window of 3000 mel
	// frames after the stride-2 conv1d. Vision shapes leave both 0.
	NMel, Positions int
	// Eps is the layer norms' epsilon.
	Eps float32
	// Of names the real model the shape is taken from.
	Of string
}

// TokensPerTile is the number of embeddings the projector gives for one
// tile (or the global image); 0 for an audio shape.
func (s ProjectorShape) TokensPerTile() int {
	if s.IsAudio() || s.PatchSize <= 0 || s.ScaleFactor <= 0 {
		return 0
	}
	side := s.ImageSize / s.PatchSize / s.ScaleFactor
	return side * side
}

// Tiles is the number of images llama.cpp's idefics3 preprocessing
// encodes for a picture of w×h pixels: the global image plus the tiles
// (mirrors clip.cpp's clip_image_preprocess for PROJECTOR_TYPE_IDEFICS3).
func (s ProjectorShape) Tiles(w, h int) int {
	if s.PreprocImageSize <= 0 || w <= 0 || h <= 0 {
		return 1
	}
	scale := min(float32(s.PreprocImageSize)/float32(w), float32(s.PreprocImageSize)/float32(h))
	tiles := func(n int) int {
		return int(math.Ceil(float64(float32(n) * scale / float32(s.ImageSize))))
	}
	return 1 + tiles(w)*tiles(h)
}

// Validate checks that the shape is one llama.cpp can run.
func (s ProjectorShape) Validate() error {
	switch s.Projector {
	case "", projIdefics3:
	case projQwen2A:
		return s.validateAudio()
	default:
		return fmt.Errorf("projector shape %q: unknown projector type %q (idefics3 or qwen2a)", s.Name, s.Projector)
	}
	switch {
	case s.ImageSize <= 0 || s.PatchSize <= 0 || s.ImageSize%s.PatchSize != 0:
		return fmt.Errorf("projector shape %q: image size %d is not a positive multiple of the patch size %d", s.Name, s.ImageSize, s.PatchSize)
	case s.ScaleFactor < 2 || (s.ImageSize/s.PatchSize)%s.ScaleFactor != 0:
		// clip.cpp asserts a factor > 1 (build_patch_merge_permute).
		return fmt.Errorf("projector shape %q: scale factor %d must be > 1 and divide the %d patches per side", s.Name, s.ScaleFactor, s.ImageSize/s.PatchSize)
	case s.Embd <= 0 || s.FF <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.Embd%s.Heads != 0:
		return fmt.Errorf("projector shape %q: width %d, feed-forward %d, %d layers, %d heads (heads must divide the width)", s.Name, s.Embd, s.FF, s.Layers, s.Heads)
	case s.FF == s.Embd:
		// clip.cpp swaps ffn_up and ffn_down when ffn_down's rows are
		// Embd long (legacy files): an FF equal to Embd would be swapped.
		return fmt.Errorf("projector shape %q: feed-forward width equal to the width is ambiguous to llama.cpp", s.Name)
	case s.PreprocImageSize < 0:
		return fmt.Errorf("projector shape %q: negative preprocessing size", s.Name)
	}
	return nil
}

// projectorShapes are the shapes `synth mmproj --shape` offers.
var projectorShapes = []ProjectorShape{
	// Tiny, for tests: 8×8 patches per tile, 16 tokens per tile, one tile
	// and the global image per picture (32 tokens), about 0.2 M parameters.
	{Name: "tiny", ImageSize: 64, PatchSize: 8, Embd: 64, FF: 256, Layers: 2, Heads: 4,
		ScaleFactor: 2, PreprocImageSize: 64, Eps: 1e-6, Of: "nothing (tests)"},
	// HuggingFaceTB/SmolVLM-256M-Instruct's vision tower (SigLIP base,
	// patch 16, 512 px) and connector; see doc.go for the sources.
	{Name: "smolvlm-256m", ImageSize: 512, PatchSize: 16, Embd: 768, FF: 3072, Layers: 12, Heads: 12,
		ScaleFactor: 4, PreprocImageSize: 2048, Eps: 1e-6, Of: "HuggingFaceTB/SmolVLM-256M-Instruct"},
	// Tiny audio, for tests: Whisper's 128 mel bins and 1500 positions
	// (libmtmd encodes whole 30-s windows, whatever the clip's length),
	// 32 wide, one layer: 750 tokens per window, about 0.08 M parameters.
	// Attention over the window's 1500 positions dominates its cost, so
	// width and depth are kept at the least (doc.go has timings).
	{Name: "tiny-audio", Projector: projQwen2A, NMel: 128, Positions: 1500, Embd: 32, FF: 128, Layers: 1, Heads: 2,
		Eps: 1e-5, Of: "nothing (tests); Qwen2-Audio's layout"},
}

// ProjectorShapes returns the table of projector shapes.
func ProjectorShapes() []ProjectorShape { return slices.Clone(projectorShapes) }

// LookupProjectorShape returns the projector shape called name.
func LookupProjectorShape(name string) (ProjectorShape, error) {
	return lookup(projectorShapes, func(s ProjectorShape) string { return s.Name }, "projector shape", name)
}

// ProjectorOptions says what WriteProjector writes.
type ProjectorOptions struct {
	// Shape is the encoder's shape (see ProjectorShapes).
	Shape ProjectorShape
	// NEmbd is the text model's width, the projector's output width
	// (clip.vision.projection_dim, or clip.audio.projection_dim). When 0
	// it is read from Base.
	NEmbd int
	// Base is a GGUF text model whose <arch>.embedding_length gives NEmbd.
	Base string
	// DType is the type of the weight matrices: F32 (default) or F16.
	// Embeddings, norms and biases are always F32.
	DType DType
	// Seed picks the pseudo-random weights; the same options give the same
	// file, byte for byte.
	Seed uint64
}

// ProjectorSummary describes a written projector.
type ProjectorSummary struct {
	Path  string
	Shape ProjectorShape
	// NEmbd is the projector's output width.
	NEmbd int
	// Params is the number of weights, Bytes the file's size.
	Params int64
	Bytes  int64
}

// WriteProjector writes the projector o describes to path.
func WriteProjector(path string, o ProjectorOptions) (sum ProjectorSummary, err error) {
	s := o.Shape
	if err := s.Validate(); err != nil {
		return sum, err
	}
	if o.DType == "" {
		o.DType = F32
	}
	if o.DType != F32 && o.DType != F16 {
		return sum, fmt.Errorf("projector dtype %s: only f32 and f16", o.DType)
	}
	if o.NEmbd == 0 && o.Base != "" {
		if o.NEmbd, err = baseEmbd(o.Base); err != nil {
			return sum, err
		}
	}
	if o.NEmbd <= 0 {
		return sum, errors.New("projector: no text model width (give NEmbd or Base)")
	}
	var kvs []gguf.KV
	var plan []projectorTensor
	if s.IsAudio() {
		kvs, plan = audioMetadata(s, o), audioPlan(s, o.NEmbd, o.DType.tensorType())
	} else {
		kvs, plan = projectorMetadata(s, o), projectorPlan(s, o.NEmbd, o.DType.tensorType())
	}
	var tensors []gguf.Tensor
	var params int64
	for _, t := range plan {
		tensors = append(tensors, gguf.Tensor{TensorInfo: t.TensorInfo, Write: projectorWeights(t, o.Seed)})
		params += int64(t.Elements())
	}
	n, err := writeGGUFFile(path, kvs, tensors)
	if err != nil {
		return sum, err
	}
	return ProjectorSummary{Path: path, Shape: s, NEmbd: o.NEmbd, Params: params, Bytes: n}, nil
}

// baseEmbd reads <general.architecture>.embedding_length from a GGUF file.
func baseEmbd(path string) (int, error) {
	f, err := readGGUFFile(path)
	if err != nil {
		return 0, err
	}
	arch, _ := f.Lookup("general.architecture")
	a, ok := arch.(string)
	if !ok || a == "" {
		return 0, fmt.Errorf("%s: no general.architecture", path)
	}
	v, _ := f.Lookup(a + ".embedding_length")
	switch v := v.(type) {
	case uint32:
		return int(v), nil
	case int32:
		return int(v), nil
	case uint64:
		return int(v), nil
	case int64:
		return int(v), nil
	}
	return 0, fmt.Errorf("%s: no integer %s.embedding_length", path, a)
}

// generalMetadata is the general.* keys of a projector file, vision or
// audio.
func generalMetadata(s ProjectorShape, o ProjectorOptions) []gguf.KV {
	return []gguf.KV{
		{Key: "general.architecture", Value: "clip"},
		{Key: "general.type", Value: "mmproj"},
		{Key: "general.name", Value: "llmserve synth mmproj " + s.Name},
		{Key: "general.description", Value: fmt.Sprintf("dummy weights (seed %d) in the shape of %s; its output is garbage", o.Seed, s.Of)},
		{Key: "general.file_type", Value: o.DType.fileType()},
	}
}

// projectorMetadata is the file's metadata, the keys clip.cpp reads for a
// vision encoder with an idefics3 projector.
func projectorMetadata(s ProjectorShape, o ProjectorOptions) []gguf.KV {
	u := func(n int) uint32 { return uint32(n) }
	kvs := append(generalMetadata(s, o), []gguf.KV{
		{Key: "clip.has_vision_encoder", Value: true},
		{Key: "clip.projector_type", Value: "idefics3"},
		{Key: "clip.vision.projection_dim", Value: u(o.NEmbd)},
		{Key: "clip.vision.image_size", Value: u(s.ImageSize)},
		{Key: "clip.vision.patch_size", Value: u(s.PatchSize)},
		{Key: "clip.vision.embedding_length", Value: u(s.Embd)},
		{Key: "clip.vision.feed_forward_length", Value: u(s.FF)},
		{Key: "clip.vision.block_count", Value: u(s.Layers)},
		{Key: "clip.vision.attention.head_count", Value: u(s.Heads)},
		{Key: "clip.vision.image_mean", Value: []float32{0.5, 0.5, 0.5}},
		{Key: "clip.vision.image_std", Value: []float32{0.5, 0.5, 0.5}},
		{Key: "clip.vision.attention.layer_norm_epsilon", Value: s.Eps},
		{Key: "clip.vision.projector.scale_factor", Value: u(s.ScaleFactor)},
		{Key: "clip.use_gelu", Value: true},
	}...)
	if s.PreprocImageSize > 0 {
		kvs = append(kvs, gguf.KV{Key: "clip.vision.preproc_image_size", Value: u(s.PreprocImageSize)})
	}
	return kvs
}

// projectorTensor is a tensor of the projector and how its values are
// drawn.
type projectorTensor struct {
	gguf.TensorInfo
	fill fillKind
}

// fillKind says how a tensor's values are drawn.
type fillKind int

const (
	fillMatrix fillKind = iota // uniform in ±1/√(row length)
	fillOne                    // all 1 (norm weights)
	fillZero                   // all 0 (norm biases)
	fillSmall                  // uniform in ±0.02 (linear biases, position embeddings)
	fillConv                   // uniform in ±1/√(patch²·3): the patch embedding's kernel
	fillConv1d                 // uniform in ±1/√(kernel·in channels): an audio conv1d kernel
)

// projectorPlan lists the tensors in file order, with their ggml shapes
// (row length first).
func projectorPlan(s ProjectorShape, nEmbd int, mt gguf.TensorType) []projectorTensor {
	e, ff, p := uint64(s.Embd), uint64(s.FF), uint64(s.PatchSize)
	patches := uint64(s.ImageSize/s.PatchSize) * uint64(s.ImageSize/s.PatchSize)
	var ts tensorPlan
	add := ts.add
	// A conv2d kernel [kw, kh, in channels, out channels]; llama.cpp's
	// converter keeps the embeddings F32.
	add("v.patch_embd.weight", fillConv, gguf.F32, p, p, 3, e)
	add("v.patch_embd.bias", fillSmall, gguf.F32, e)
	add("v.position_embd.weight", fillSmall, gguf.F32, e, patches)
	ts.encoder("v", s.Layers, e, ff, mt, true)
	sf := uint64(s.ScaleFactor)
	add("mm.model.fc.weight", fillMatrix, mt, e*sf*sf, uint64(nEmbd))
	return ts
}

// tensorPlan lists a projector's tensors in file order.
type tensorPlan []projectorTensor

func (p *tensorPlan) add(name string, fill fillKind, typ gguf.TensorType, shape ...uint64) {
	*p = append(*p, projectorTensor{gguf.TensorInfo{Name: name, Shape: shape, Type: typ}, fill})
}

// encoder adds a transformer encoder's blocks and its final norm, under
// clip's names with prefix ("v" for vision, "a" for audio): per block
// attention q, k, v and out (matrices of type mt, each with a bias but k
// without one unless kBias: Whisper's has none), ln1, the feed-forward up
// and down, ln2; then post_ln.
func (p *tensorPlan) encoder(prefix string, layers int, e, ff uint64, mt gguf.TensorType, kBias bool) {
	for i := range layers {
		b := fmt.Sprintf("%s.blk.%d.", prefix, i)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			p.add(b+n+".weight", fillMatrix, mt, e, e)
			if n != "attn_k" || kBias {
				p.add(b+n+".bias", fillSmall, gguf.F32, e)
			}
		}
		p.add(b+"ln1.weight", fillOne, gguf.F32, e)
		p.add(b+"ln1.bias", fillZero, gguf.F32, e)
		p.add(b+"ffn_up.weight", fillMatrix, mt, e, ff)
		p.add(b+"ffn_up.bias", fillSmall, gguf.F32, ff)
		p.add(b+"ffn_down.weight", fillMatrix, mt, ff, e)
		p.add(b+"ffn_down.bias", fillSmall, gguf.F32, e)
		p.add(b+"ln2.weight", fillOne, gguf.F32, e)
		p.add(b+"ln2.bias", fillZero, gguf.F32, e)
	}
	p.add(prefix+".post_ln.weight", fillOne, gguf.F32, e)
	p.add(prefix+".post_ln.bias", fillZero, gguf.F32, e)
}
