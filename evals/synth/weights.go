package synth

import (
	"hash/fnv"
	"io"
	"math/rand/v2"
)

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
// t.typ, each row filled by fill.
func writeRows(w io.Writer, t tensorInfo, fill func(row []float32)) error {
	row := make([]float32, t.shape[0])
	var buf []byte
	for range t.elements() / t.shape[0] {
		fill(row)
		var err error
		if buf, err = writeRow(w, buf, row, t.typ); err != nil {
			return err
		}
	}
	return nil
}
