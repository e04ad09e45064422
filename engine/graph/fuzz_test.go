package graph

import (
	"testing"
)

// FuzzCheck builds small graphs of the supported operators from the
// fuzzer's bytes (operator, inputs, integer attributes and constants):
// Check must reject or accept them without panicking, and Eval must run
// what Check accepts.
func FuzzCheck(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("Transpose perm 0 2 1"))
	f.Add([]byte{30, 0, 5, 1, 200, 3, 7, 2, 9, 0, 1, 4, 250, 6, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
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
		g := &Graph{
			Inputs: []Value{
				{Name: "x", DType: F32, Shape: []int64{Batch, 2, 3}},
				{Name: "ids", DType: I64, Shape: []int64{Batch, 3}},
			},
			Consts: []Const{
				{Name: "ki", DType: I64, Shape: []int64{3}, I64: []int64{next(), next(), next()}},
				{Name: "kf", DType: F32, Shape: []int64{2, 3}, F32: []float32{1, -2, 3, 0.5, 0, -1}},
				{Name: "ks", DType: I64, Shape: []int64{}, I64: []int64{next()}},
			},
		}
		for i := range 2 {
			op := Ops[pick(len(Ops))]
			ins := make([]string, pick(5))
			for j := range ins {
				ins[j] = names[pick(3+2+i)]
			}
			attrs := map[string]Attr{}
			for range pick(3) {
				key := []string{"axis", "axes", "perm", "to", "keepdims", "value", "alpha", "starts", "ends"}[pick(9)]
				switch pick(3) {
				case 0:
					attrs[key] = Attr{Kind: AttrInt, Int: next()}
				case 1:
					attrs[key] = Attr{Kind: AttrInts, Ints: []int64{next(), next()}}
				default:
					attrs[key] = Attr{Kind: AttrFloat, Float: float32(next())}
				}
			}
			g.Nodes = append(g.Nodes, Node{Name: "n", Op: op, Inputs: ins, Outputs: []string{names[5+i]}, Attrs: attrs})
		}
		g.Outputs = []Value{{Name: "v1"}}
		c, err := Check(g, next()%20)
		if err != nil {
			return
		}
		x := &Dense{Shape: []int64{2, 2, 3}, F32: []float32{1, 2, 3, 4, 5, 6, -1, -2, -3, 0, 0.5, 9}}
		ids := &Dense{Shape: []int64{2, 3}, I64: []int64{0, 1, 2, 1, 0, 2}}
		_, _ = Eval(c, map[string]*Dense{"x": x, "ids": ids})
	})
}
