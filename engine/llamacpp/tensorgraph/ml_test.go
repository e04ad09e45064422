//go:build cgo

package tensorgraph

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine/graph"
)

// mlCase is one ai.onnx.ml node on the input "x" [batch, features], with
// the outputs named "out0", "out1", ...
type mlCase struct {
	name     string
	op       string
	features int64
	outputs  int
	attrs    map[string]graph.Attr
}

func ints(v ...int64) graph.Attr     { return graph.Attr{Kind: graph.AttrInts, Ints: v} }
func floats(v ...float32) graph.Attr { return graph.Attr{Kind: graph.AttrFloats, Floats: v} }
func str(s string) graph.Attr        { return graph.Attr{Kind: graph.AttrString, String: s} }
func integer(i int64) graph.Attr     { return graph.Attr{Kind: graph.AttrInt, Int: i} }

func randFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// randomTrees writes trees of the given depth over features columns:
// branches of random modes (or mode) with thresholds on a grid of 0.5, so
// that inputs (on the same grid) hit the EQ and LEQ/LT boundaries; each
// leaf votes for one or two targets.
func randomTrees(rng *rand.Rand, trees, depth int, features, targets int64, mode string, prefix string) map[string]graph.Attr {
	modes := []string{"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"}
	var treeIDs, nodeIDs, featureIDs, trueIDs, falseIDs, missing, wTrees, wNodes, wIDs []int64
	var values, weights []float32
	var nodeModes []string
	for t := range trees {
		inner := 1<<depth - 1
		for node := range 1<<(depth+1) - 1 {
			treeIDs = append(treeIDs, int64(t))
			nodeIDs = append(nodeIDs, int64(node))
			missing = append(missing, rng.Int64N(2))
			if node < inner {
				m := mode
				if m == "" {
					m = modes[rng.IntN(len(modes))]
				}
				nodeModes = append(nodeModes, m)
				featureIDs = append(featureIDs, rng.Int64N(features))
				values = append(values, float32(rng.IntN(7)-3)*0.5)
				trueIDs = append(trueIDs, int64(2*node+1))
				falseIDs = append(falseIDs, int64(2*node+2))
				continue
			}
			nodeModes = append(nodeModes, "LEAF")
			featureIDs = append(featureIDs, 0)
			values = append(values, 0)
			trueIDs = append(trueIDs, 0)
			falseIDs = append(falseIDs, 0)
			for range 1 + rng.IntN(2) {
				wTrees = append(wTrees, int64(t))
				wNodes = append(wNodes, int64(node))
				wIDs = append(wIDs, rng.Int64N(targets))
				weights = append(weights, float32(rng.NormFloat64()*0.3))
			}
		}
	}
	return map[string]graph.Attr{
		"nodes_treeids": ints(treeIDs...), "nodes_nodeids": ints(nodeIDs...), "nodes_featureids": ints(featureIDs...),
		"nodes_values": floats(values...), "nodes_modes": {Kind: graph.AttrStrings, Strings: nodeModes},
		"nodes_truenodeids": ints(trueIDs...), "nodes_falsenodeids": ints(falseIDs...),
		"nodes_missing_value_tracks_true": ints(missing...),
		prefix + "treeids":                ints(wTrees...), prefix + "nodeids": ints(wNodes...),
		prefix + "ids": ints(wIDs...), prefix + "weights": floats(weights...),
	}
}

func with(a map[string]graph.Attr, kv ...any) map[string]graph.Attr {
	for i := 0; i < len(kv); i += 2 {
		a[kv[i].(string)] = kv[i+1].(graph.Attr)
	}
	return a
}

func mlCases() []mlCase {
	rng := rand.New(rand.NewPCG(21, 21))
	trees := func(n int, targets int64, kv ...any) map[string]graph.Attr {
		return with(randomTrees(rng, n, 3, 6, targets, "", "target_"), append([]any{"n_targets", integer(targets)}, kv...)...)
	}
	classTrees := func(n int, classes, voters int64, kv ...any) map[string]graph.Attr {
		labels := make([]int64, classes)
		for i := range labels {
			labels[i] = 10 * int64(i+1) // labels that are not the indices
		}
		return with(randomTrees(rng, n, 3, 6, voters, "", "class_"), append([]any{"classlabels_int64s", ints(labels...)}, kv...)...)
	}
	positive := func(a map[string]graph.Attr) map[string]graph.Attr {
		w := a["class_weights"].Floats
		for i := range w {
			w[i] = float32(math.Abs(float64(w[i])))
		}
		return a
	}
	linear := func(targets int64, kv ...any) map[string]graph.Attr {
		return with(map[string]graph.Attr{"coefficients": floats(randFloats(rng, int(targets*5))...), "intercepts": floats(randFloats(rng, int(targets))...)}, kv...)
	}
	// Trees whose branches share one mode take the branch-free walk
	// (treeWalk); "" above mixes the modes, which it does not take.
	oneMode := func(mode string, n int, targets int64, kv ...any) map[string]graph.Attr {
		return with(randomTrees(rng, n, 3, 6, targets, mode, "target_"), append([]any{"n_targets", integer(targets)}, kv...)...)
	}
	// Two trees with leaves at depths 1, 2 and 3: the walk steps the rows
	// that reach a leaf early on the spot.
	unbalanced := map[string]graph.Attr{
		"nodes_treeids":    ints(0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1),
		"nodes_nodeids":    ints(0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6),
		"nodes_featureids": ints(0, 0, 1, 0, 0, 2, 0, 3, 0, 4, 0, 0),
		"nodes_values":     floats(0, 0, 0.5, 0, 0, -0.25, 0, 0.25, 0, 1, 0, 0),
		"nodes_modes": {Kind: graph.AttrStrings, Strings: []string{"BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF",
			"BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF"}},
		"nodes_truenodeids":               ints(1, 0, 3, 0, 0, 1, 0, 3, 0, 5, 0, 0),
		"nodes_falsenodeids":              ints(2, 0, 4, 0, 0, 2, 0, 4, 0, 6, 0, 0),
		"nodes_missing_value_tracks_true": ints(1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0),
		"target_treeids":                  ints(0, 0, 0, 1, 1, 1, 1),
		"target_nodeids":                  ints(1, 3, 4, 1, 3, 5, 6),
		"target_ids":                      ints(0, 0, 0, 0, 0, 0, 0),
		"target_weights":                  floats(1, 2, 3, 10, 20, 30, 40),
		"n_targets":                       integer(1),
	}
	return []mlCase{
		{"scaler", "Scaler", 4, 1, map[string]graph.Attr{"offset": floats(randFloats(rng, 4)...), "scale": floats(randFloats(rng, 4)...)}},
		{"scaler-one-value", "Scaler", 3, 1, map[string]graph.Attr{"offset": floats(0.5), "scale": floats(2)}},
		{"normalizer-max", "Normalizer", 5, 1, map[string]graph.Attr{"norm": str("MAX")}},
		{"normalizer-l1", "Normalizer", 5, 1, map[string]graph.Attr{"norm": str("L1")}},
		{"normalizer-l2", "Normalizer", 5, 1, map[string]graph.Attr{"norm": str("L2")}},
		{"zipmap", "ZipMap", 3, 1, map[string]graph.Attr{"classlabels_int64s": ints(0, 1, 2)}},
		{"linreg", "LinearRegressor", 5, 1, linear(1)},
		{"linreg-probit", "LinearRegressor", 5, 1, linear(1, "post_transform", str("PROBIT"))},
		{"linreg-3-softmax", "LinearRegressor", 5, 1, linear(3, "targets", integer(3), "post_transform", str("SOFTMAX"))},
		{"linreg-2-no-intercepts", "LinearRegressor", 5, 1, with(linear(2, "targets", integer(2)), "intercepts", floats())},
		{"linclass-softmax", "LinearClassifier", 5, 2, linear(4, "classlabels_ints", ints(3, 1, 4, 1), "post_transform", str("SOFTMAX"))},
		{"linclass-logistic", "LinearClassifier", 5, 2, linear(3, "classlabels_ints", ints(0, 1, 2), "post_transform", str("LOGISTIC"))},
		{"linclass-softmax-zero", "LinearClassifier", 5, 2, linear(3, "classlabels_ints", ints(0, 1, 2), "post_transform", str("SOFTMAX_ZERO"))},
		{"linclass-binary", "LinearClassifier", 5, 2, linear(1, "classlabels_ints", ints(-7, 7), "post_transform", str("LOGISTIC"))},
		{"linclass-one-score", "LinearClassifier", 5, 2, linear(1)},
		{"trees-sum", "TreeEnsembleRegressor", 6, 1, trees(20, 1, "base_values", floats(0.5))},
		{"trees-average", "TreeEnsembleRegressor", 6, 1, trees(7, 1, "aggregate_function", str("AVERAGE"), "base_values", floats(0.25))},
		{"trees-min", "TreeEnsembleRegressor", 6, 1, trees(7, 1, "aggregate_function", str("MIN"))},
		{"trees-max-probit", "TreeEnsembleRegressor", 6, 1, trees(7, 1, "aggregate_function", str("MAX"), "post_transform", str("PROBIT"))},
		{"trees-2-targets-sum", "TreeEnsembleRegressor", 6, 1, trees(9, 2, "base_values", floats(1, -1))},
		{"trees-3-targets-average-softmax", "TreeEnsembleRegressor", 6, 1, trees(9, 3, "aggregate_function", str("AVERAGE"), "post_transform", str("SOFTMAX"))},
		{"trees-3-targets-min", "TreeEnsembleRegressor", 6, 1, trees(5, 3, "aggregate_function", str("MIN"), "base_values", floats(1, 2, 3))},
		{"trees-2-targets-max-logistic", "TreeEnsembleRegressor", 6, 1, trees(5, 2, "aggregate_function", str("MAX"), "post_transform", str("LOGISTIC"))},
		{"treeclass-binary-logistic", "TreeEnsembleClassifier", 6, 2, classTrees(30, 2, 1, "post_transform", str("LOGISTIC"), "base_values", floats(0.1))},
		{"treeclass-binary-positive", "TreeEnsembleClassifier", 6, 2, positive(classTrees(10, 2, 1, "post_transform", str("LOGISTIC")))},
		{"treeclass-binary-no-base", "TreeEnsembleClassifier", 6, 2, classTrees(10, 2, 1)},
		{"treeclass-binary-two-voters", "TreeEnsembleClassifier", 6, 2, classTrees(10, 2, 2, "base_values", floats(0.3, 0.3), "post_transform", str("LOGISTIC"))},
		{"treeclass-multiclass-softmax", "TreeEnsembleClassifier", 6, 2, classTrees(24, 4, 4, "post_transform", str("SOFTMAX"), "base_values", floats(0.1, 0.2, 0.3, 0.4))},
		{"treeclass-multiclass-partial", "TreeEnsembleClassifier", 6, 2, classTrees(3, 5, 3, "post_transform", str("SOFTMAX_ZERO"))},
		{"trees-one-mode-leq", "TreeEnsembleRegressor", 6, 1, oneMode("BRANCH_LEQ", 20, 1, "base_values", floats(0.5))},
		{"trees-one-mode-lt-3-targets", "TreeEnsembleRegressor", 6, 1, oneMode("BRANCH_LT", 9, 3, "post_transform", str("SOFTMAX"))},
		{"trees-one-mode-gte-min", "TreeEnsembleRegressor", 6, 1, oneMode("BRANCH_GTE", 7, 1, "aggregate_function", str("MIN"))},
		{"trees-one-mode-gt-average", "TreeEnsembleRegressor", 6, 1, oneMode("BRANCH_GT", 7, 2, "aggregate_function", str("AVERAGE"))},
		{"trees-one-mode-eq", "TreeEnsembleRegressor", 6, 1, oneMode("BRANCH_EQ", 7, 1)},
		{"trees-one-mode-neq-max", "TreeEnsembleRegressor", 6, 1, oneMode("BRANCH_NEQ", 7, 1, "aggregate_function", str("MAX"))},
		{"trees-unbalanced-leq", "TreeEnsembleRegressor", 6, 1, unbalanced},
		{"treeclass-one-mode-leq-softmax", "TreeEnsembleClassifier", 6, 2, with(randomTrees(rng, 12, 3, 6, 3, "BRANCH_LEQ", "class_"),
			"classlabels_int64s", ints(10, 20, 30), "post_transform", str("SOFTMAX"))},
	}
}

func (tc mlCase) graph() *graph.Graph {
	g := &graph.Graph{
		Inputs: []graph.Value{{Name: "x", DType: graph.F32, Shape: []int64{graph.Batch, tc.features}}},
		Nodes:  []graph.Node{{Name: tc.name, Op: tc.op, Inputs: []string{"x"}, Attrs: tc.attrs}},
	}
	for i := range tc.outputs {
		name := []string{"out0", "out1"}[i]
		g.Nodes[0].Outputs = append(g.Nodes[0].Outputs, name)
		g.Outputs = append(g.Outputs, graph.Value{Name: name})
	}
	return g
}

// TestTreeWalk checks the branch-free walk's arrays: each root's depth,
// leaves leading to themselves, and no walk for mixed modes.
func TestTreeWalk(t *testing.T) {
	var unbalanced, mixed map[string]graph.Attr
	for _, tc := range mlCases() {
		switch tc.name {
		case "trees-unbalanced-leq":
			unbalanced = tc.attrs
		case "trees-sum":
			mixed = tc.attrs
		}
	}
	te, err := graph.ParseTreeEnsemble(&graph.Node{Op: "TreeEnsembleRegressor", Attrs: unbalanced}, 6)
	if err != nil {
		t.Fatal(err)
	}
	w := treeWalk(te)
	if w == nil || w.mode != 1 || !slices.Equal(w.Depth, []int32{2, 3}) {
		t.Fatalf("walk %+v, want mode 1 (BRANCH_LEQ) and depths [2 3]", w)
	}
	for i, m := range te.Mode {
		if m == 0 && (w.True[i] != int32(i) || w.False[i] != int32(i) || w.Feature[i] != 0) {
			t.Errorf("leaf %d leads to %d/%d, reads feature %d", i, w.True[i], w.False[i], w.Feature[i])
		}
	}
	te, err = graph.ParseTreeEnsemble(&graph.Node{Op: "TreeEnsembleRegressor", Attrs: mixed}, 6)
	if err != nil {
		t.Fatal(err)
	}
	if w := treeWalk(te); w != nil {
		t.Errorf("mixed modes: walk %+v, want none", w)
	}
}

// TestGraphMLOps runs every ai.onnx.ml operator through ggml (the C
// kernels of ml.go) and compares it with graph.Eval: the same
// float32 operations, so the same bits (expf and exp may differ in the
// last bit). The inputs are on a grid of 0.25 with NaNs, to hit the
// trees' boundaries and missing-value branches; 37 rows split among the
// threads.
func TestGraphMLOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range mlCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, m := loadGraph(t, tc.graph(), 0)
			for _, rows := range []int{1, 3, 37} {
				x := make([]float32, int64(rows)*tc.features)
				for i := range x {
					x[i] = float32(rng.IntN(17)-8) * 0.25
					if rng.IntN(20) == 0 && tc.op != "Scaler" && tc.op != "Normalizer" {
						x[i] = float32(math.NaN())
					}
				}
				if rows == 3 && tc.op == "Normalizer" {
					clear(x[:tc.features]) // a zero row is copied
				}
				want, err := graph.Eval(c, map[string]*graph.Dense{"x": {Shape: []int64{int64(rows), tc.features}, F32: x}})
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.Run(context.Background(), rows, [][]float32{x})
				if err != nil {
					t.Fatal(err)
				}
				for o, out := range c.Outputs {
					w := want[out.Name]
					if w.I64 != nil {
						for i := range w.I64 {
							if got[o].I64[i] != w.I64[i] {
								t.Fatalf("rows %d: %s[%d] = %d, want %d", rows, out.Name, i, got[o].I64[i], w.I64[i])
							}
						}
						continue
					}
					if len(got[o].F32) != len(w.F32) {
						t.Fatalf("rows %d: %s has %d values, want %d", rows, out.Name, len(got[o].F32), len(w.F32))
					}
					for i := range w.F32 {
						g, r := float64(got[o].F32[i]), float64(w.F32[i])
						if math.IsNaN(g) != math.IsNaN(r) || math.Abs(g-r) > 1e-6*max(1, math.Abs(r)) {
							t.Fatalf("rows %d: %s[%d] = %v, reference %v", rows, out.Name, i, g, r)
						}
					}
				}
			}
		})
	}
}

// TestGraphMLChecks: malformed ai.onnx.ml nodes fail graph.Check.
func TestGraphMLChecks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cyclic := randomTrees(rng, 1, 1, 6, 1, "BRANCH_LEQ", "target_")
	cyclic["nodes_truenodeids"].Ints[0] = 0 // itself
	loop := randomTrees(rng, 1, 2, 6, 1, "BRANCH_LEQ", "target_")
	loop["nodes_falsenodeids"].Ints[1] = 0 // back to the root
	bad := randomTrees(rng, 1, 1, 6, 1, "BRANCH_LEQ", "target_")
	bad["nodes_featureids"].Ints[0] = 6
	for _, tc := range []struct {
		name string
		c    mlCase
	}{
		{"self-branch", mlCase{"t", "TreeEnsembleRegressor", 6, 1, with(cyclic, "n_targets", integer(1))}},
		{"cycle", mlCase{"t", "TreeEnsembleRegressor", 6, 1, with(loop, "n_targets", integer(1))}},
		{"feature-out-of-range", mlCase{"t", "TreeEnsembleRegressor", 6, 1, with(bad, "n_targets", integer(1))}},
		{"no-targets", mlCase{"t", "TreeEnsembleRegressor", 6, 1, randomTrees(rng, 1, 1, 6, 1, "", "target_")}},
		{"string-labels", mlCase{"l", "LinearClassifier", 2, 2, map[string]graph.Attr{"coefficients": floats(1, 2, 3, 4), "intercepts": floats(0, 0),
			"classlabels_strings": {Kind: graph.AttrStrings, Strings: []string{"a", "b"}}}}},
		{"coefficients", mlCase{"l", "LinearRegressor", 3, 1, map[string]graph.Attr{"coefficients": floats(1, 2)}}},
		{"zipmap-labels", mlCase{"z", "ZipMap", 3, 1, map[string]graph.Attr{"classlabels_int64s": ints(0, 1)}}},
		{"norm", mlCase{"n", "Normalizer", 3, 1, map[string]graph.Attr{"norm": str("L3")}}},
		{"as-tensor", mlCase{"t", "TreeEnsembleRegressor", 6, 1, with(randomTrees(rng, 1, 1, 6, 1, "", "target_"), "n_targets", integer(1),
			"base_values_as_tensor", graph.Attr{Kind: graph.AttrFloat, Float: 1})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := graph.Check(tc.c.graph(), 0); err == nil {
				t.Error("Check accepted the graph")
			}
		})
	}
}

// TestGraphSameNodeNames: nodes may share a name (ONNX does not forbid
// it); each keeps its own parameters.
func TestGraphSameNodeNames(t *testing.T) {
	g := &graph.Graph{
		Inputs:  []graph.Value{{Name: "x", DType: graph.F32, Shape: []int64{graph.Batch, 2}}},
		Outputs: []graph.Value{{Name: "z"}},
		Nodes: []graph.Node{
			{Name: "n", Op: "Scaler", Inputs: []string{"x"}, Outputs: []string{"y"}, Attrs: map[string]graph.Attr{"offset": floats(1), "scale": floats(2)}},
			{Name: "n", Op: "Scaler", Inputs: []string{"y"}, Outputs: []string{"z"}, Attrs: map[string]graph.Attr{"offset": floats(0, 3), "scale": floats(10, 100)}},
		},
	}
	_, m := loadGraph(t, g, 0)
	got, err := m.Run(context.Background(), 1, [][]float32{{2, 4}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{20, 300}; got[0].F32[0] != want[0] || got[0].F32[1] != want[1] {
		t.Errorf("got %v, want %v", got[0].F32, want)
	}
}

// BenchmarkGraphTrees: a 300-tree depth-6 ensemble (a typical gradient
// boosting model) over 32 features, by batch size.
func BenchmarkGraphTrees(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	attrs := with(randomTrees(rng, 300, 6, 32, 1, "BRANCH_LT", "target_"), "n_targets", integer(1))
	tc := mlCase{"trees", "TreeEnsembleRegressor", 32, 1, attrs}
	_, m := loadGraph(b, tc.graph(), 0)
	for _, rows := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			x := randFloats(rng, rows*32)
			for b.Loop() {
				if _, err := m.Run(context.Background(), rows, [][]float32{x}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
