//go:build cgo

package tensorgraph

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llmserve/llmserve/engine/graph"
)

// FuzzGraphOps builds small graphs of the supported operators from the
// fuzzer's bytes, as graph.FuzzCheck does: whatever graph.Check accepts
// must build and run on ggml and agree with graph.Eval.
func FuzzGraphOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("Transpose perm 0 2 1"))
	f.Add([]byte{30, 0, 5, 1, 200, 3, 7, 2, 9, 0, 1, 4, 250, 6, 1, 1})
	f.Fuzz(randomGraphAgrees)
}

// TestGraphOpsRandom runs FuzzGraphOps' check on seeded random bytes
// (fuzzing this package rebuilds llama.cpp instrumented, which takes
// long): 20000 graphs, of which about 750 pass Check.
func TestGraphOpsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for i := range 20000 {
		data := make([]byte, 24)
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		if !t.Run(fmt.Sprint(i), func(t *testing.T) { randomGraphAgrees(t, data) }) {
			t.Fatalf("bytes %v", data)
		}
	}
}

func randomGraphAgrees(t *testing.T, data []byte) {
	{
		next := func() int64 {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int64(int8(b))
		}
		pick := func(n int) int { return int(uint64(next()+128) % uint64(n)) }
		names := []string{"x", "ids", "ki", "kf", "ks", "v0", "v1"}
		g := &graph.Graph{
			Inputs: []graph.Value{
				{Name: "x", DType: graph.F32, Shape: []int64{graph.Batch, 2, 3}},
				{Name: "ids", DType: graph.I64, Shape: []int64{graph.Batch, 3}},
			},
			Consts: []graph.Const{
				{Name: "ki", DType: graph.I64, Shape: []int64{3}, I64: []int64{next() % 4, next() % 4, next() % 4}},
				{Name: "kf", DType: graph.F32, Shape: []int64{2, 3}, F32: []float32{1, -2, 3, 0.5, 0, -1}},
				{Name: "ks", DType: graph.I64, Shape: []int64{}, I64: []int64{next() % 4}},
			},
		}
		for i := range 2 {
			op := graph.Ops[pick(len(graph.Ops))]
			ins := make([]string, 1+pick(3))
			for j := range ins {
				ins[j] = names[pick(3+2+i)]
			}
			if pick(2) == 0 { // mostly the previous result or an input first
				ins[0] = []string{"x", "ids", "v0"}[pick(2+i)]
			}
			attrs := map[string]graph.Attr{}
			for range pick(3) {
				key := []string{"axis", "axes", "perm", "to", "keepdims", "value", "alpha", "starts", "ends"}[pick(9)]
				switch pick(3) {
				case 0:
					attrs[key] = graph.Attr{Kind: graph.AttrInt, Int: next() % 4}
				case 1:
					attrs[key] = graph.Attr{Kind: graph.AttrInts, Ints: []int64{next() % 4, next() % 4}}
				default:
					attrs[key] = graph.Attr{Kind: graph.AttrFloat, Float: float32(next())}
				}
			}
			// Every node is named "n": ONNX does not require unique
			// names, so nothing may be keyed by them.
			g.Nodes = append(g.Nodes, graph.Node{Name: "n", Op: op, Inputs: ins, Outputs: []string{names[5+i]}, Attrs: attrs})
		}
		g.Outputs = []graph.Value{{Name: "v1"}}
		c, err := graph.Check(g, next()%20)
		if err != nil {
			return
		}
		t.Logf("graph %+v consts %d", c.Nodes, len(c.Consts))
		m, err := LoadGraph(c, GraphOptions{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		x := []float32{1, 2, 3, 4, 5, 6, -1, -2, -3, 0, 0.5, 9}
		ids := []int64{0, 1, 1, 1, 0, 1}
		for _, rows := range []int{1, 2} {
			want, err := graph.Eval(c, map[string]*graph.Dense{
				"x":   {Shape: []int64{int64(rows), 2, 3}, F32: x[:6*rows]},
				"ids": {Shape: []int64{int64(rows), 3}, I64: ids[:3*rows]},
			})
			if err != nil {
				return
			}
			got, err := m.RunInputs(context.Background(), rows, []GraphInput{{F32: x[:6*rows]}, {I64: ids[:3*rows]}})
			if err != nil {
				t.Fatalf("rows %d: %v (graph.Eval ran)", rows, err)
			}
			w := want["v1"]
			if len(got[0].F32) != len(w.F32) || len(got[0].I64) != len(w.I64) {
				t.Fatalf("rows %d: %d+%d values, want %d+%d", rows, len(got[0].F32), len(got[0].I64), len(w.F32), len(w.I64))
			}
			for i := range w.I64 {
				if got[0].I64[i] != w.I64[i] {
					t.Fatalf("rows %d: out[%d] = %d, want %d", rows, i, got[0].I64[i], w.I64[i])
				}
			}
			for i := range w.F32 {
				g, r := float64(got[0].F32[i]), float64(w.F32[i])
				if math.IsNaN(r) || math.IsInf(r, 0) || math.Abs(r) > 1e30 {
					continue
				}
				if d := math.Abs(g - r); !(d <= 1e-4*max(1, math.Abs(r))) {
					t.Fatalf("rows %d: out[%d] = %v, reference %v (%v)", rows, i, g, r, c.Nodes)
				}
			}
		}
	}
}
