package graph

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// The node modes of a TreeEnsemble.
const (
	TreeLeaf uint8 = iota
	TreeLEQ
	TreeLT
	TreeGTE
	TreeGT
	TreeEQ
	TreeNEQ
)

var treeModes = map[string]uint8{
	"LEAF": TreeLeaf, "BRANCH_LEQ": TreeLEQ, "BRANCH_LT": TreeLT, "BRANCH_GTE": TreeGTE,
	"BRANCH_GT": TreeGT, "BRANCH_EQ": TreeEQ, "BRANCH_NEQ": TreeNEQ,
}

// The aggregate functions of a TreeEnsembleRegressor.
const (
	AggSum uint8 = iota
	AggAverage
	AggMin
	AggMax
)

var aggregates = map[string]uint8{"SUM": AggSum, "AVERAGE": AggAverage, "MIN": AggMin, "MAX": AggMax}

// maxTreeNodes bounds a tree ensemble's nodes and weights, so that
// indices fit an int32.
const maxTreeNodes = 1 << 30

// TreeEnsemble is a TreeEnsembleClassifier or TreeEnsembleRegressor node,
// checked and flattened into arrays indexed by node (the form the ggml
// executor copies into C memory). Node i is a branch (Mode[i] not
// TreeLeaf): the row goes to True[i] when x[Feature[i]] compares with
// Threshold[i] as the mode says, or when it is NaN and MissingTrue[i] is
// 1, else to False[i]; or a leaf, with the weights WeightFirst[i] to
// WeightFirst[i]+WeightCount[i]-1, each adding WeightValue to the score
// of target (class) WeightTarget. Roots are the trees' first nodes.
//
// Row follows ONNX Runtime's TreeEnsemble kernels, with its quirks: the
// scores are float32 summed tree by tree; a one-target regressor uses the
// first weight of each leaf; a classifier with two classes and weights
// for one of them (BinaryCase) writes the other class's score as 1 - s
// (weights all positive) or from -s, and a target no leaf reached scores
// 0.
type TreeEnsemble struct {
	Classifier bool
	Features   int64
	Targets    int64   // regressor targets or classifier classes
	Labels     []int64 // a classifier's classlabels_int64s
	BinaryCase bool
	// AllPositive: every class weight is >= 0 (a classifier).
	AllPositive bool
	Aggregate   uint8 // AggSum for a classifier
	Post        uint8
	Base        []float32

	Feature     []int32
	Threshold   []float32
	Mode        []uint8
	MissingTrue []uint8
	True, False []int32
	WeightFirst []int32
	WeightCount []int32

	WeightTarget []int32
	WeightValue  []float32
	Roots        []int32
}

// ParseTreeEnsemble checks a tree ensemble node for an input of features
// columns.
func ParseTreeEnsemble(n *Node, features int64) (*TreeEnsemble, error) {
	t := &TreeEnsemble{Classifier: n.Op == "TreeEnsembleClassifier", Features: features, Base: attrFloats(n, "base_values")}
	for _, name := range []string{"base_values_as_tensor", "nodes_values_as_tensor", "nodes_hitrates_as_tensor", "class_weights_as_tensor", "target_weights_as_tensor"} {
		if hasAttr(n, name) {
			return nil, unsupportedAttr("%s (double precision)", name)
		}
	}
	var err error
	if t.Post, err = postTransform(n); err != nil {
		return nil, err
	}
	prefix := "target_"
	if t.Classifier {
		prefix = "class_"
		if len(attrStrings(n, "classlabels_strings")) > 0 {
			return nil, unsupportedAttr("classlabels_strings (string labels; the served label is INT64)")
		}
		t.Labels = attrInts(n, "classlabels_int64s")
		t.Targets = int64(len(t.Labels))
		if t.Targets < 2 {
			return nil, fmt.Errorf("%d classlabels_int64s: a classifier needs two classes or more", t.Targets)
		}
	} else {
		t.Targets = n.Int("n_targets", 0)
		agg := n.Str("aggregate_function", "SUM")
		var ok bool
		if t.Aggregate, ok = aggregates[agg]; !ok {
			return nil, fmt.Errorf("attribute aggregate_function=%q is not SUM, AVERAGE, MIN or MAX", agg)
		}
	}
	if t.Targets < 1 || t.Targets > MaxRowElements {
		return nil, fmt.Errorf("%d targets or classes", t.Targets)
	}

	treeIDs, nodeIDs := attrInts(n, "nodes_treeids"), attrInts(n, "nodes_nodeids")
	featureIDs, values, modes := attrInts(n, "nodes_featureids"), attrFloats(n, "nodes_values"), attrStrings(n, "nodes_modes")
	trueIDs, falseIDs := attrInts(n, "nodes_truenodeids"), attrInts(n, "nodes_falsenodeids")
	missing := attrInts(n, "nodes_missing_value_tracks_true")
	nn := len(treeIDs)
	if nn == 0 || nn > maxTreeNodes {
		return nil, fmt.Errorf("%d nodes", nn)
	}
	for name, l := range map[string]int{"nodes_nodeids": len(nodeIDs), "nodes_featureids": len(featureIDs), "nodes_values": len(values),
		"nodes_modes": len(modes), "nodes_truenodeids": len(trueIDs), "nodes_falsenodeids": len(falseIDs)} {
		if l != nn {
			return nil, fmt.Errorf("attribute %s has %d values, nodes_treeids %d", name, l, nn)
		}
	}
	type key struct{ tree, node int64 }
	index := make(map[key]int32, nn)
	t.Feature, t.Threshold, t.Mode = make([]int32, nn), values, make([]uint8, nn)
	t.MissingTrue, t.True, t.False = make([]uint8, nn), make([]int32, nn), make([]int32, nn)
	t.WeightFirst, t.WeightCount = make([]int32, nn), make([]int32, nn)
	for i := range nn {
		k := key{treeIDs[i], nodeIDs[i]}
		if _, dup := index[k]; dup {
			return nil, fmt.Errorf("node %d of tree %d is defined twice", k.node, k.tree)
		}
		index[k] = int32(i)
		m, ok := treeModes[modes[i]]
		if !ok {
			return nil, unsupportedAttr("nodes_modes %q", modes[i])
		}
		t.Mode[i] = m
		if featureIDs[i] < 0 || featureIDs[i] >= features {
			return nil, fmt.Errorf("node %d of tree %d reads feature %d; the input has %d", k.node, k.tree, featureIDs[i], features)
		}
		t.Feature[i] = int32(featureIDs[i])
		if i < len(missing) && missing[i] == 1 {
			t.MissingTrue[i] = 1
		}
		if i == 0 || treeIDs[i] != treeIDs[i-1] {
			t.Roots = append(t.Roots, int32(i))
		}
	}
	for i := range nn {
		if t.Mode[i] == TreeLeaf {
			continue
		}
		for _, c := range []struct {
			id  int64
			dst *int32
		}{{trueIDs[i], &t.True[i]}, {falseIDs[i], &t.False[i]}} {
			j, ok := index[key{treeIDs[i], c.id}]
			if !ok || j == int32(i) {
				return nil, fmt.Errorf("node %d of tree %d branches to node %d, which is missing or itself", nodeIDs[i], treeIDs[i], c.id)
			}
			*c.dst = j
		}
	}
	if err := t.checkAcyclic(); err != nil {
		return nil, err
	}

	wTrees, wNodes := attrInts(n, prefix+"treeids"), attrInts(n, prefix+"nodeids")
	wIDs, wValues := attrInts(n, prefix+"ids"), attrFloats(n, prefix+"weights")
	nw := len(wIDs)
	if len(wTrees) != nw || len(wNodes) != nw || len(wValues) != nw || nw > maxTreeNodes {
		return nil, fmt.Errorf("attributes %[1]streeids, %[1]snodeids, %[1]sids and %[1]sweights have %d, %d, %d and %d values", prefix, len(wTrees), len(wNodes), nw, len(wValues))
	}
	order := make([]int, nw)
	for i := range order {
		order[i] = i
	}
	// ONNX Runtime sorts the weights by tree and node (then position).
	slices.SortFunc(order, func(a, b int) int {
		if wTrees[a] != wTrees[b] {
			return cmpInt64(wTrees[a], wTrees[b])
		}
		if wNodes[a] != wNodes[b] {
			return cmpInt64(wNodes[a], wNodes[b])
		}
		return a - b
	})
	classes := map[int64]bool{}
	t.AllPositive = true
	for _, w := range order {
		classes[wIDs[w]] = true
		if wValues[w] < 0 {
			t.AllPositive = false
		}
		i, ok := index[key{wTrees[w], wNodes[w]}]
		if !ok {
			return nil, fmt.Errorf("a weight is for node %d of tree %d, which is missing", wNodes[w], wTrees[w])
		}
		if t.Mode[i] != TreeLeaf {
			continue // ONNX Runtime ignores weights on branches (old onnxmltools wrote them)
		}
		if wIDs[w] < 0 || wIDs[w] >= t.Targets {
			return nil, fmt.Errorf("a weight is for target %d of %d", wIDs[w], t.Targets)
		}
		if t.WeightCount[i] == 0 {
			t.WeightFirst[i] = int32(len(t.WeightValue))
		}
		t.WeightCount[i]++
		t.WeightTarget = append(t.WeightTarget, int32(wIDs[w]))
		t.WeightValue = append(t.WeightValue, wValues[w])
	}
	for i := range nn {
		if t.Mode[i] == TreeLeaf && t.WeightCount[i] == 0 {
			return nil, fmt.Errorf("leaf %d of tree %d has no weight", nodeIDs[i], treeIDs[i])
		}
	}
	t.BinaryCase = t.Classifier && t.Targets == 2 && len(classes) == 1
	return t, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkAcyclic fails when a branch leads back to a node on its own path,
// where a row would never reach a leaf.
func (t *TreeEnsemble) checkAcyclic() error {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]uint8, len(t.Mode))
	type step struct {
		node int32
		exit bool
	}
	var stack []step
	for _, r := range t.Roots {
		stack = append(stack[:0], step{r, false})
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch {
			case s.exit:
				state[s.node] = done
				continue
			case state[s.node] == done:
				continue
			case state[s.node] == onPath:
				return errors.New("a tree has a cycle")
			}
			state[s.node] = onPath
			stack = append(stack, step{s.node, true})
			if t.Mode[s.node] != TreeLeaf {
				stack = append(stack, step{t.True[s.node], false}, step{t.False[s.node], false})
			}
		}
	}
	return nil
}

// Outputs is the number of score columns a row gets.
func (t *TreeEnsemble) Outputs() int64 { return t.Targets }

func (t *TreeEnsemble) classifies() bool { return t.Classifier }

// leaf walks one tree from root for row x.
func (t *TreeEnsemble) leaf(i int32, x []float32) int32 {
	for t.Mode[i] != TreeLeaf {
		v, th := x[t.Feature[i]], t.Threshold[i]
		var c bool
		switch t.Mode[i] {
		case TreeLEQ:
			c = v <= th
		case TreeLT:
			c = v < th
		case TreeGTE:
			c = v >= th
		case TreeGT:
			c = v > th
		case TreeEQ:
			c = v == th
		case TreeNEQ:
			c = v != th
		}
		if c || (t.MissingTrue[i] != 0 && math.IsNaN(float64(v))) {
			i = t.True[i]
		} else {
			i = t.False[i]
		}
	}
	return i
}

// Row computes one row x: z gets Outputs() scores; the label is a
// classifier's.
func (t *TreeEnsemble) Row(x, z []float32) int64 {
	clear(z)
	nTrees := float32(len(t.Roots))
	if !t.Classifier && t.Targets == 1 {
		var s float32
		has := false
		for _, r := range t.Roots {
			w := t.WeightValue[t.WeightFirst[t.leaf(r, x)]]
			switch {
			case t.Aggregate == AggSum || t.Aggregate == AggAverage:
				s += w
			case !has || (t.Aggregate == AggMin && w < s) || (t.Aggregate == AggMax && w > s):
				s = w
			}
			has = true
		}
		var origin float32
		if len(t.Base) == 1 {
			origin = t.Base[0]
		}
		switch {
		case t.Aggregate == AggSum:
			s += origin
		case t.Aggregate == AggAverage:
			s = s/nTrees + origin
		case has:
			s += origin
		default:
			s = origin
		}
		if t.Post == PostProbit {
			s = Probit(s)
		}
		z[0] = s
		return 0
	}
	n := int(t.Targets)
	score, has := make([]float32, n), make([]bool, n)
	for _, r := range t.Roots {
		l := t.leaf(r, x)
		for k := t.WeightFirst[l]; k < t.WeightFirst[l]+t.WeightCount[l]; k++ {
			j, w := t.WeightTarget[k], t.WeightValue[k]
			switch {
			case t.Aggregate == AggSum || t.Aggregate == AggAverage:
				score[j] += w
			case !has[j] || (t.Aggregate == AggMin && w < score[j]) || (t.Aggregate == AggMax && w > score[j]):
				score[j] = w
			}
			has[j] = true
		}
	}
	if !t.Classifier {
		useBase := len(t.Base) == n
		for j := range n {
			var b float32
			if useBase {
				b = t.Base[j]
			}
			switch t.Aggregate {
			case AggSum:
				score[j] += b
			case AggAverage:
				score[j] = score[j]/nTrees + b
			default:
				v := b
				if has[j] {
					v += score[j]
				}
				score[j] = v
			}
		}
		writeScores(score, has, t.Post, z, -1)
		return 0
	}
	if n > 2 {
		for k := 0; k < len(t.Base) && k < n; k++ {
			if !has[k] {
				has[k], score[k] = true, t.Base[k]
			} else {
				score[k] += t.Base[k]
			}
		}
		best := 0
		for j := range n {
			if has[j] && (!has[best] || score[j] > score[best]) {
				best = j
			}
		}
		writeScores(score, has, t.Post, z, -1)
		return t.Labels[best]
	}
	// Two classes.
	second, size := -1, 2
	switch len(t.Base) {
	case 2:
		if has[1] {
			score[1] = t.Base[1] + score[0]
			score[0] = -score[1]
		} else {
			score[1] += t.Base[1]
			score[0] += t.Base[0]
		}
	case 1:
		score[0] += t.Base[0]
		if !has[1] {
			size = 1
		}
	case 0:
		second = 3
		if !has[1] {
			size = 1
		}
	}
	var pos float32
	switch {
	case size == 2 && has[1]:
		pos = score[1]
	case has[0]:
		pos = score[0]
	}
	var label int64
	switch {
	case t.BinaryCase && t.AllPositive && pos > 0.5:
		second, label = 0, t.Labels[1]
	case t.BinaryCase && t.AllPositive:
		second, label = 1, t.Labels[0]
	case t.BinaryCase && pos > 0:
		second, label = 2, t.Labels[1]
	case t.BinaryCase:
		second, label = 3, t.Labels[0]
	case pos > 0:
		label = 1 // ONNX Runtime's positive_label_, not a class label
	}
	writeScores(score[:size], has[:size], t.Post, z, second)
	return label
}

// writeScores is ONNX Runtime's write_scores: a score no tree reached is
// 0; one score of a binary classifier becomes two as second says.
func writeScores(score []float32, has []bool, post uint8, z []float32, second int) {
	for j := range score {
		if !has[j] {
			score[j] = 0
		}
	}
	if len(score) >= 2 {
		copy(z, score)
		transformScores(post, z[:len(score)])
		return
	}
	s := score[0]
	switch {
	case post == PostProbit:
		z[0] = Probit(s)
	case second == 0 || second == 1:
		z[0], z[1] = 1-s, s
	case (second == 2 || second == 3) && post == PostLogistic:
		z[0], z[1] = Logistic(-s), Logistic(s)
	case second == 2 || second == 3:
		z[0], z[1] = -s, s
	default:
		z[0] = s
	}
}
