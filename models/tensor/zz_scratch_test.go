package tensor

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/llmserve/llmserve/engine/graph"
)

func TestScratchCorpusEval(t *testing.T) {
	root := os.Getenv("CORPUS")
	if root == "" {
		t.Skip()
	}
	var inputs map[string]map[string]struct {
		Shape []int64
		Data  []any
	}
	var expected map[string]map[string]struct {
		Shape []int64
		Data  []any
	}
	b, _ := os.ReadFile(root + "/inputs.json")
	json.Unmarshal(b, &inputs)
	b, _ = os.ReadFile(root + "/expected.json")
	json.Unmarshal(b, &expected)
	num := func(v any) float64 {
		if s, ok := v.(string); ok && s == "NaN" {
			return math.NaN()
		}
		return v.(float64)
	}
	for name, ins := range inputs {
		data, _ := os.ReadFile(root + "/repo/" + name + "/1/model.onnx")
		g, opset, err := DecodeONNX(data)
		if err != nil {
			t.Logf("%s: decode: %v", name, err)
			continue
		}
		c, err := graph.Check(g, opset)
		if err != nil {
			t.Logf("%s: check: %v", name, err)
			continue
		}
		feeds := map[string]*graph.Dense{}
		for k, v := range ins {
			d := &graph.Dense{Shape: v.Shape}
			for _, x := range v.Data {
				d.F32 = append(d.F32, float32(num(x)))
			}
			feeds[k] = d
		}
		outs, err := graph.Eval(c, feeds)
		if err != nil {
			t.Errorf("%s: eval: %v", name, err)
			continue
		}
		for oname, want := range expected[name] {
			got := outs[oname]
			worst := 0.0
			for i, w := range want.Data {
				var gv float64
				if got.I64 != nil {
					gv = float64(got.I64[i])
				} else {
					gv = float64(got.F32[i])
				}
				wv := num(w)
				d := math.Abs(gv-wv) / math.Max(math.Abs(wv), 1e-1)
				if math.IsNaN(gv) != math.IsNaN(wv) {
					d = 1
				}
				worst = math.Max(worst, d)
				if d > 1e-5 {
					t.Errorf("%s %s[%d]: got %v want %v", name, oname, i, gv, wv)
				}
			}
			t.Logf("%s %s: worst rel %.3g", name, oname, worst)
		}
	}
}
