package tensor

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// BenchmarkMLP runs the benchmark's 784-256-128-10 MLP at two batch sizes
// and thread counts.
func BenchmarkMLP(b *testing.B) {
	m, err := RandomMLP([]int{784, 256, 128, 10}, 1, true, true)
	if err != nil {
		b.Fatal(err)
	}
	data, err := m.ONNX()
	if err != nil {
		b.Fatal(err)
	}
	for _, threads := range []int{1, 2} {
		e, err := Load("mlp", data, Options{Threads: threads})
		if err != nil {
			b.Fatal(err)
		}
		for _, rows := range []int{1, 32} {
			x := randomRows(rand.New(rand.NewPCG(1, 1)), rows, 784)
			in := []Tensor{{Name: "input", DType: FP32, Shape: []int64{int64(rows), 784}, F32: x}}
			b.Run(fmt.Sprintf("threads=%d/batch=%d", threads, rows), func(b *testing.B) {
				for b.Loop() {
					if _, err := e.Run(context.Background(), in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		e.Close()
	}
}

// BenchmarkCNNFile runs an ONNX file named by LLMSERVE_BENCH_ONNX (the
// corpus's cnn: scripts/onnx-corpus/corpus.py) on one input of [rows,
// 1, 28, 28] at 1, 32 and 256 rows; it is skipped without the variable.
// Besides the mean it reports min-µs/row, the fastest Run's time a row:
// on a machine others share, the mean moves with their load, the fastest
// of a few hundred Runs much less.
func BenchmarkCNNFile(b *testing.B) {
	path := os.Getenv("LLMSERVE_BENCH_ONNX")
	if path == "" {
		b.Skip("LLMSERVE_BENCH_ONNX names no file")
	}
	e, err := Open(path, Options{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	spec := e.Inputs()[0]
	for _, rows := range []int{1, 32, 256} {
		shape := append([]int64{int64(rows)}, spec.Shape[1:]...)
		t := Tensor{Name: spec.Name, DType: FP32, Shape: shape}
		t.F32 = randomRows(rand.New(rand.NewPCG(1, 1)), rows, int(t.Elements())/rows)
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			fastest := time.Duration(math.MaxInt64)
			for b.Loop() {
				start := time.Now()
				if _, err := e.Run(context.Background(), []Tensor{t}); err != nil {
					b.Fatal(err)
				}
				fastest = min(fastest, time.Since(start))
			}
			b.ReportMetric(float64(fastest.Nanoseconds())/1e3/float64(rows), "min-µs/row")
		})
	}
}
