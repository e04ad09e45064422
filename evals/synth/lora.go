package synth

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/llmserve/llmserve/float16"
	"github.com/llmserve/llmserve/gguf"
)

// LoRA adapters
//
// WriteLoRA writes a LoRA adapter for a base GGUF model in the layout
// llama.cpp's convert_lora_to_gguf.py writes: general.type "adapter",
// adapter.type "lora", adapter.lora.alpha, the base's
// general.architecture, and for every adapted weight W of shape
// [n_in, n_out] (ggml order) the pair W.lora_a of shape [n_in, rank] and
// W.lora_b of shape [rank, n_out], both F32. llama.cpp computes an adapted
// product as W·x + s·B·(A·x) with s = scale·alpha/rank, where A is lora_a
// as a rank×n_in matrix (its rows are ggml rows) and B is lora_b as an
// n_out×rank one. WriteMerged writes the base with every adapted W
// replaced by W + s·B·A (F32), the model the adapter is equivalent to, so
// a test can hold llama.cpp's adapter path to an independent computation.

// DefaultLoRATargets are the weights adapted when LoRAOptions.Targets is
// empty: every attention and feed-forward projection of every block.
var DefaultLoRATargets = []string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}

// LoRAOptions says what adapter WriteLoRA writes.
type LoRAOptions struct {
	// Base is the GGUF model the adapter is for: its architecture and the
	// shapes of its weights.
	Base string
	// Rank is the adapter's rank (default 4); Alpha its adapter.lora.alpha
	// (default Rank, so that the scale alpha/rank is 1).
	Rank  int
	Alpha float32
	// Targets are the weight kinds adapted, such as "attn_q" for
	// blk.N.attn_q.weight and "output" for output.weight
	// (DefaultLoRATargets when empty).
	Targets []string
	// Seed seeds the pseudo-random weights: adapters of different seeds
	// differ.
	Seed uint64
	// Strength scales B (default 1): with alpha = rank, B·A then changes a
	// weight by about as much as the weight itself.
	Strength float32
}

// LoRASummary describes a written adapter.
type LoRASummary struct {
	Path         string
	Architecture string
	Rank         int
	Alpha        float32
	// Adapted are the base weights the adapter changes.
	Adapted []string
	Bytes   int64
}

// WriteLoRA writes the adapter o describes to path.
func WriteLoRA(path string, o LoRAOptions) (sum LoRASummary, err error) {
	if o.Rank == 0 {
		o.Rank = 4
	}
	if o.Rank < 1 {
		return sum, fmt.Errorf("LoRA rank %d < 1", o.Rank)
	}
	if o.Alpha == 0 {
		o.Alpha = float32(o.Rank)
	}
	if o.Strength == 0 {
		o.Strength = 1
	}
	if len(o.Targets) == 0 {
		o.Targets = DefaultLoRATargets
	}
	base, err := readGGUFFile(o.Base)
	if err != nil {
		return sum, err
	}
	arch, _ := base.Lookup("general.architecture")
	archName, ok := arch.(string)
	if !ok || archName == "" {
		return sum, fmt.Errorf("%s: no general.architecture", o.Base)
	}
	var tensors []gguf.Tensor
	rank := uint64(o.Rank)
	for _, t := range base.Tensors {
		if !loraTarget(t.Name, o.Targets) {
			continue
		}
		if len(t.Shape) != 2 {
			return sum, fmt.Errorf("%s: %s has %d dimensions, a LoRA adapts matrices", o.Base, t.Name, len(t.Shape))
		}
		nIn, nOut := t.Shape[0], t.Shape[1]
		a := gguf.TensorInfo{Name: t.Name + ".lora_a", Shape: []uint64{nIn, rank}, Type: gguf.F32}
		b := gguf.TensorInfo{Name: t.Name + ".lora_b", Shape: []uint64{rank, nOut}, Type: gguf.F32}
		tensors = append(tensors,
			gguf.Tensor{TensorInfo: a, Write: loraWeights(a, o.Seed, float32(1/math.Sqrt(float64(nIn))))},
			gguf.Tensor{TensorInfo: b, Write: loraWeights(b, o.Seed, o.Strength*float32(1/math.Sqrt(float64(rank))))})
		sum.Adapted = append(sum.Adapted, t.Name)
	}
	if len(tensors) == 0 {
		return sum, fmt.Errorf("%s: no weight matches the targets %s", o.Base, strings.Join(o.Targets, ","))
	}
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: archName},
		{Key: "general.type", Value: "adapter"},
		{Key: "general.name", Value: "llmserve synth LoRA"},
		{Key: "adapter.type", Value: "lora"},
		{Key: "adapter.lora.alpha", Value: o.Alpha},
	}
	n, err := writeGGUFFile(path, kvs, tensors)
	if err != nil {
		return sum, err
	}
	return LoRASummary{Path: path, Architecture: archName, Rank: o.Rank, Alpha: o.Alpha, Adapted: sum.Adapted, Bytes: n}, nil
}

// loraTarget reports whether the weight name is of one of the target
// kinds.
func loraTarget(name string, targets []string) bool {
	for _, k := range targets {
		if name == k+".weight" || (strings.HasPrefix(name, "blk.") && strings.HasSuffix(name, "."+k+".weight")) {
			return true
		}
	}
	return false
}

// WriteMerged writes to path the model base with the LoRA adapter merged
// at scale (1 as llama.cpp applies an adapter by default): every adapted
// weight W becomes W + scale·alpha/rank·B·A, in F32; everything else is
// copied as it is.
func WriteMerged(path, base, adapter string, scale float32) error {
	bf, bData, err := loadGGUF(base)
	if err != nil {
		return err
	}
	af, aData, err := loadGGUF(adapter)
	if err != nil {
		return err
	}
	if v, _ := af.Lookup("adapter.type"); v != "lora" {
		return fmt.Errorf("%s: adapter.type is %v, not lora", adapter, v)
	}
	alpha, _ := af.Lookup("adapter.lora.alpha")
	alphaF, _ := alpha.(float32)
	pairs := map[string][2]*gguf.TensorInfo{}
	for i := range af.Tensors {
		t := &af.Tensors[i]
		name, part := strings.TrimSuffix(t.Name, ".lora_a"), 0
		if name == t.Name {
			name, part = strings.TrimSuffix(t.Name, ".lora_b"), 1
		}
		p := pairs[name]
		p[part] = t
		pairs[name] = p
	}
	var kvs []gguf.KV
	for _, e := range bf.KVs {
		if e.Key != "general.alignment" {
			kvs = append(kvs, e)
		}
	}
	var tensors []gguf.Tensor
	for _, t := range bf.Tensors {
		raw, err := bf.TensorData(bData, t)
		if err != nil {
			return fmt.Errorf("%s: %w", base, err)
		}
		p, ok := pairs[t.Name]
		if !ok {
			tensors = append(tensors, t.WithData(raw))
			continue
		}
		delete(pairs, t.Name)
		if p[0] == nil || p[1] == nil || p[0].Type != gguf.F32 || p[1].Type != gguf.F32 {
			return fmt.Errorf("%s: %s needs an F32 lora_a and lora_b", adapter, t.Name)
		}
		w, err := toF32(t, raw)
		if err != nil {
			return fmt.Errorf("%s: %w", base, err)
		}
		ra, err := af.TensorData(aData, *p[0])
		if err != nil {
			return err
		}
		rb, err := af.TensorData(aData, *p[1])
		if err != nil {
			return err
		}
		nIn, nOut, rank := int(t.Shape[0]), int(t.Shape[1]), int(p[0].Shape[1])
		if len(t.Shape) != 2 || int(p[0].Shape[0]) != nIn || int(p[1].Shape[0]) != rank || int(p[1].Shape[1]) != nOut {
			return fmt.Errorf("%s: %s: lora_a %v and lora_b %v do not fit %v", adapter, t.Name, p[0].Shape, p[1].Shape, t.Shape)
		}
		a, b := f32s(ra), f32s(rb)
		s := scale
		if alphaF != 0 {
			s = scale * alphaF / float32(rank)
		}
		for i := range nOut {
			for k := range nIn {
				var d float32
				for j := range rank {
					d += b[i*rank+j] * a[j*nIn+k]
				}
				w[i*nIn+k] += s * d
			}
		}
		mt := gguf.TensorInfo{Name: t.Name, Shape: t.Shape, Type: gguf.F32}
		merged := appendF32(nil, w)
		tensors = append(tensors, mt.WithData(merged))
	}
	if len(pairs) > 0 {
		names := make([]string, 0, len(pairs))
		for n := range pairs {
			names = append(names, n)
		}
		slices.Sort(names)
		return fmt.Errorf("%s: %s not in the base model %s", adapter, strings.Join(names, ", "), base)
	}
	_, err = writeGGUFFile(path, kvs, tensors)
	return err
}

// loadGGUF reads the whole GGUF file at path: its header, and its bytes
// for File.TensorData.
func loadGGUF(path string) (*gguf.File, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := gguf.Decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, data, nil
}

// readGGUFFile reads the header of the GGUF file at path, and nothing past
// it.
func readGGUFFile(path string) (*gguf.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read only
	g, err := gguf.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// toF32 decodes t's data.
func toF32(t gguf.TensorInfo, raw []byte) ([]float32, error) {
	switch t.Type {
	case gguf.F32:
		return f32s(raw), nil
	case gguf.F16:
		out := make([]float32, len(raw)/2)
		for i := range out {
			out[i] = float16.ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
		return out, nil
	case gguf.Q8_0:
		return dequantQ8_0(raw), nil
	}
	return nil, fmt.Errorf("tensor %q: cannot merge into type %v", t.Name, t.Type)
}

func f32s(raw []byte) []float32 {
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}
