package synth

import (
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"

	"github.com/llmserve/llmserve/gguf"
)

// The values of the tensors synth writes: the model's, a LoRA adapter's and
// a projector's, each tensor's drawn from its own generator.

// weights returns the function that writes the data of t. Vectors (the
// norm weights) are all 1. Matrix elements are uniform in ±1/√(row length),
// so every matrix-vector product keeps its input's scale and activations
// stay finite through any depth; each tensor has its own generator, seeded
// with seed and its name, so its values do not depend on the other tensors
// or on the dtype (a Q8_0 file holds the quantized values of the F32 one).
func weights(t gguf.TensorInfo, seed uint64) func(io.Writer) error {
	return func(w io.Writer) error {
		if len(t.Shape) == 1 {
			return writeRows(w, t, constant(1))
		}
		return writeRows(w, t, uniform(tensorRNG(seed, t.Name, 0), float32(1/math.Sqrt(float64(t.Shape[0])))))
	}
}

// loraWeights writes t's elements (F32) uniform in ±bound, from t's
// generator (tensorRNG).
func loraWeights(t gguf.TensorInfo, seed uint64, bound float32) func(io.Writer) error {
	return func(w io.Writer) error {
		return writeRows(w, t, uniform(tensorRNG(seed, t.Name, 0x10ca), bound))
	}
}

// projectorWeights returns the function that writes t's data, drawn from
// t's generator (tensorRNG).
func projectorWeights(t projectorTensor, seed uint64) func(io.Writer) error {
	return func(w io.Writer) error {
		var bound float32
		switch t.fill {
		case fillOne:
			return writeRows(w, t.TensorInfo, constant(1))
		case fillZero:
			return writeRows(w, t.TensorInfo, constant(0))
		case fillMatrix:
			bound = float32(1 / math.Sqrt(float64(t.Shape[0])))
		case fillConv:
			bound = float32(1 / math.Sqrt(float64(t.Shape[0]*t.Shape[1]*t.Shape[2])))
		case fillConv1d:
			bound = float32(1 / math.Sqrt(float64(t.Shape[0]*t.Shape[1])))
		case fillSmall:
			bound = 0.02
		}
		return writeRows(w, t.TensorInfo, uniform(tensorRNG(seed, t.Name, 0x3a9c), bound))
	}
}

// tensorRNG is the generator of one tensor's values: seeded with seed and
// the tensor's name, so that its values depend on neither the other tensors
// nor the dtype (a Q8_0 file holds the quantized values of the F32 one).
// salt tells the files synth writes apart (a model, its LoRA adapters, its
// projector), which may hold tensors of the same name.
func tensorRNG(seed uint64, name string, salt uint64) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()^salt))
}

// uniform fills a row with values uniform in ±bound drawn from rng.
func uniform(rng *rand.Rand, bound float32) func(row []float32) {
	return func(row []float32) {
		for i := range row {
			row[i] = (2*rng.Float32() - 1) * bound
		}
	}
}

// constant fills a row with v.
func constant(v float32) func(row []float32) {
	return func(row []float32) {
		for i := range row {
			row[i] = v
		}
	}
}

// writeRows writes t's data, row by row (its first dimension is a row) as
// t.Type, each row filled by fill.
func writeRows(w io.Writer, t gguf.TensorInfo, fill func(row []float32)) error {
	row := make([]float32, t.Shape[0])
	var buf []byte
	for range t.Elements() / t.Shape[0] {
		fill(row)
		var err error
		if buf, err = writeRow(w, buf, row, t.Type); err != nil {
			return err
		}
	}
	return nil
}
