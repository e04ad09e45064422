package tensor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
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
