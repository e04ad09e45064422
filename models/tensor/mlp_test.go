package tensor

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// knownMLP is a 4-5-3 classifier with fixed weights.
func knownMLP() *MLP {
	return &MLP{
		Layers: []Layer{
			{
				Weights: [][]float32{
					{0.5, -0.25, 0.125, 1, -1},
					{-0.75, 0.5, 0.25, -0.5, 0.3},
					{0.1, 0.2, -0.3, 0.4, -0.5},
					{1.5, -1.25, 0.75, -0.125, 0.6},
				},
				Bias:       []float32{0.1, -0.2, 0.3, 0, 0.05},
				Activation: "relu",
			},
			{
				Weights: [][]float32{
					{0.3, -0.6, 0.9},
					{-0.2, 0.4, -0.8},
					{0.7, 0.1, -0.1},
					{-0.5, 0.25, 0.5},
					{0.05, -0.9, 0.45},
				},
				Bias: []float32{0.01, 0.02, -0.03},
			},
		},
		Softmax: true,
		ArgMax:  true,
	}
}

func randomRows(rng *rand.Rand, rows, cols int) []float32 {
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// writeModel writes data to a file in a test directory.
func writeModel(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func openMLP(t testing.TB, m *MLP) Executor {
	t.Helper()
	data, err := m.ONNX()
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(writeModel(t, "mlp.onnx", data), Options{Threads: 2, Parts: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func run(t testing.TB, e Executor, x []float32, rows int) []Tensor {
	t.Helper()
	cols := int(e.Inputs()[0].Shape[1])
	out, err := e.Run(context.Background(), []Tensor{{Name: "input", DType: FP32, Shape: []int64{int64(rows), int64(cols)}, F32: x}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func closeTo(a, b float32) bool {
	return math.Abs(float64(a)-float64(b)) <= 1e-5*max(1, math.Abs(float64(b)))
}

func TestONNXMLPMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random, err := RandomMLP([]int{784, 256, 128, 10}, 7, true, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    *MLP
		rows int
	}{
		{"known-1", knownMLP(), 1},
		{"known-9", knownMLP(), 9},
		{"784-256-128-10", random, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := openMLP(t, tc.m)
			x := randomRows(rng, tc.rows, tc.m.Inputs())
			want, labels := tc.m.Forward(x, tc.rows)
			out := run(t, e, x, tc.rows)
			if len(out) != 2 || out[0].Name != "output" || out[1].Name != "label" || out[1].DType != INT64 {
				t.Fatalf("outputs %+v", out)
			}
			for i := range want {
				if !closeTo(out[0].F32[i], want[i]) {
					t.Fatalf("output[%d] = %v, reference %v", i, out[0].F32[i], want[i])
				}
			}
			for r := range labels {
				if out[1].I64[r] != labels[r] {
					t.Errorf("label[%d] = %d, reference %d", r, out[1].I64[r], labels[r])
				}
			}
			if got := out[0].Shape; got[0] != int64(tc.rows) || got[1] != int64(tc.m.Outputs()) {
				t.Errorf("output shape %v", got)
			}
		})
	}
}

// TestBatchInvariance: row i of a batch is bit-identical to the same row
// run alone or in a batch of another size (what the adaptive batcher
// relies on).
func TestBatchInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sizes := range [][]int{{784, 256, 128, 10}, {13, 7, 5}, {64, 32, 3}} {
		m, err := RandomMLP(sizes, 11, false, false)
		if err != nil {
			t.Fatal(err)
		}
		e := openMLP(t, m)
		// 100 rows: a Run cut in parts (Options.Parts, SplitRows) gives
		// the rows the batches of other sizes give.
		const n = 100
		x := randomRows(rng, n, sizes[0])
		full := run(t, e, x, n)[0].F32
		nOut := sizes[len(sizes)-1]
		for _, rows := range []int{1, 2, 7, 31, 64} {
			for start := 0; start+rows <= n; start += rows {
				got := run(t, e, x[start*sizes[0]:(start+rows)*sizes[0]], rows)[0].F32
				for i, v := range got {
					if w := full[start*nOut+i]; math.Float32bits(v) != math.Float32bits(w) {
						t.Fatalf("sizes %v: batch of %d at row %d: element %d = %v, in the batch of %d %v", sizes, rows, start, i, v, n, w)
					}
				}
			}
		}
	}
}
