package graph

import (
	"errors"
	"fmt"
	"math"
)

// The ai.onnx.ml operators follow ONNX Runtime's CPU kernels, quirks
// included, since models are exported for it and judged against it:
// scores are float32 as there (a linear model's dot products are summed
// in float64 and rounded once, within ONNX Runtime's own float rounding
// of its GEMM), and where the specification is vague (a binary
// classifier with one class of weights, which post_transform a
// one-target model applies) the result is ONNX Runtime's. Every
// operator takes a [batch, features] input.

// MLOps lists the supported operators of the ai.onnx.ml domain (ml.go
// says how each is computed).
var MLOps = []string{
	"LinearClassifier", "LinearRegressor", "Normalizer", "Scaler",
	"TreeEnsembleClassifier", "TreeEnsembleRegressor", "ZipMap",
}

// The post_transform values of the ai.onnx.ml operators.
const (
	PostNone uint8 = iota
	PostLogistic
	PostSoftmax
	PostSoftmaxZero
	PostProbit
)

var postTransforms = map[string]uint8{
	"NONE": PostNone, "LOGISTIC": PostLogistic, "SOFTMAX": PostSoftmax,
	"SOFTMAX_ZERO": PostSoftmaxZero, "PROBIT": PostProbit,
}

func postTransform(n *Node) (uint8, error) {
	s := n.Str("post_transform", "NONE")
	p, ok := postTransforms[s]
	if !ok {
		return 0, unsupportedAttr("post_transform=%q", s)
	}
	return p, nil
}

// matrixInput is input 0 of an ai.onnx.ml operator: F32 [batch, columns].
func (c *Checked) matrixInput(n *Node) (*Info, error) {
	x, err := c.floatInput(n, 0)
	if err != nil {
		return nil, err
	}
	if len(x.Shape) != 2 {
		return nil, fmt.Errorf("input %q has shape %v; the operator takes [batch, features]: %w", n.Inputs[0], x.Shape, ErrUnsupported)
	}
	return x, nil
}

func same(x *Info) []*Info { return []*Info{{DType: F32, Shape: x.Shape, Batched: x.Batched}} }

// exp32 is expf: float32 in, float32 out.
func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }

// Logistic is ONNX Runtime's ComputeLogistic, in float32.
func Logistic(x float32) float32 {
	v := 1 / (1 + exp32(-float32(math.Abs(float64(x)))))
	if x < 0 {
		return 1 - v
	}
	return v
}

// Probit is ONNX Runtime's ComputeProbit: sqrt(2) * ErfInv(2x - 1) with
// its float32 approximation of ErfInv.
func Probit(x float32) float32 {
	x = 2*x - 1
	sgn := float32(1)
	if x < 0 {
		sgn = -1
	}
	x = (1 - x) * (1 + x)
	lg := float32(math.Log(float64(x)))
	v := 2/(float32(math.Pi)*0.147) + 0.5*lg
	v2 := 1 / float32(0.147) * lg
	v3 := -v + float32(math.Sqrt(float64(v*v-v2)))
	return float32(math.Sqrt2) * (sgn * float32(math.Sqrt(float64(v3))))
}

// transformScores applies post to one row of two or more scores, as ONNX
// Runtime's write_scores does.
func transformScores(post uint8, s []float32) {
	switch post {
	case PostLogistic:
		for j, v := range s {
			s[j] = Logistic(v)
		}
	case PostProbit:
		for j, v := range s {
			s[j] = Probit(v)
		}
	case PostSoftmax, PostSoftmaxZero:
		m := float32(-math.MaxFloat32)
		for _, v := range s {
			if v > m {
				m = v
			}
		}
		expNeg := exp32(-m)
		var sum float32
		for j, v := range s {
			if post == PostSoftmaxZero && v <= 1e-7 && v >= -1e-7 {
				s[j] = v * expNeg
				continue
			}
			s[j] = exp32(v - m)
			sum += s[j]
		}
		for j := range s {
			s[j] /= sum
		}
	}
}

// Scaler: y = (x - offset) * scale, offset and scale of one value or one
// per column.

func inferScaler(c *Checked, n *Node) ([]*Info, error) {
	x, err := c.matrixInput(n)
	if err != nil {
		return nil, err
	}
	off, sc := attrFloats(n, "offset"), attrFloats(n, "scale")
	if len(sc) == 0 || len(sc) != len(off) {
		return nil, fmt.Errorf("attributes scale (%d values) and offset (%d) must be non-empty and of one length", len(sc), len(off))
	}
	if int64(len(sc)) != x.Shape[1] && len(sc) != 1 {
		return nil, fmt.Errorf("attributes scale and offset have %d values; the input has %d columns", len(sc), x.Shape[1])
	}
	return same(x), nil
}

func evalScaler(_ *Checked, n *Node, in []*Dense) ([]*Dense, error) {
	x := in[0]
	off, sc := attrFloats(n, "offset"), attrFloats(n, "scale")
	cols := x.Shape[1]
	y := make([]float32, len(x.F32))
	for i, v := range x.F32 {
		j := int64(i) % cols
		if len(sc) == 1 {
			j = 0
		}
		y[i] = (v - off[j]) * sc[j]
	}
	return []*Dense{{Shape: x.Shape, F32: y}}, nil
}

// Normalizer: each row divided by its maximum (MAX), the sum of its
// absolute values (L1) or its Euclidean norm (L2); a row whose norm is 0
// is copied.

// The Normalizer norms.
const (
	NormMax uint8 = iota
	NormL1
	NormL2
)

// NormKind is a Normalizer node's norm.
func NormKind(n *Node) (uint8, error) {
	switch s := n.Str("norm", "MAX"); s {
	case "MAX":
		return NormMax, nil
	case "L1":
		return NormL1, nil
	case "L2":
		return NormL2, nil
	default:
		return 0, unsupportedAttr("norm=%q", s)
	}
}

func inferNormalizer(c *Checked, n *Node) ([]*Info, error) {
	x, err := c.matrixInput(n)
	if err != nil {
		return nil, err
	}
	if _, err := NormKind(n); err != nil {
		return nil, err
	}
	return same(x), nil
}

func evalNormalizer(_ *Checked, n *Node, in []*Dense) ([]*Dense, error) {
	x := in[0]
	norm, _ := NormKind(n)
	cols := x.Shape[1]
	y := make([]float32, len(x.F32))
	for r := range int64(len(x.F32)) / cols {
		NormalizeRow(norm, x.F32[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols])
	}
	return []*Dense{{Shape: x.Shape, F32: y}}, nil
}

// NormalizeRow is ONNX Runtime's Normalizer on one row, in float32.
func NormalizeRow(norm uint8, x, y []float32) {
	var d float32
	switch norm {
	case NormMax:
		d = -math.MaxFloat32
		for _, v := range x {
			if d < v { // std::max(d, v)
				d = v
			}
		}
	case NormL1:
		for _, v := range x {
			d += float32(math.Abs(float64(v)))
		}
	case NormL2:
		for _, v := range x {
			d += v * v
		}
	}
	if d == 0 {
		copy(y, x)
		return
	}
	for j, v := range x {
		switch norm {
		case NormL2:
			y[j] = float32(math.Sqrt(float64(v * v / d)))
			if v < 0 {
				y[j] = -y[j]
			}
		default:
			y[j] = v / d
		}
	}
}

// ZipMap turns [batch, classes] scores into one map per row, class label
// to score. The served graph has no sequence or map values (V2 carries
// tensors only), so its output is its input tensor, under its own name;
// the class labels are the columns, in order.

func inferZipMap(c *Checked, n *Node) ([]*Info, error) {
	x, err := c.matrixInput(n)
	if err != nil {
		return nil, err
	}
	ints, strs := attrInts(n, "classlabels_int64s"), attrStrings(n, "classlabels_strings")
	if (len(ints) == 0) == (len(strs) == 0) {
		return nil, errors.New("exactly one of the attributes classlabels_int64s and classlabels_strings must be set")
	}
	if k := int64(max(len(ints), len(strs))); k != x.Shape[1] {
		return nil, fmt.Errorf("%d class labels for %d columns", k, x.Shape[1])
	}
	return same(x), nil
}

func evalZipMap(_ *Checked, _ *Node, in []*Dense) ([]*Dense, error) {
	return []*Dense{in[0]}, nil
}

// Linear is a LinearRegressor or LinearClassifier node, checked: scores
// = x · Coefᵀ + Intercepts, then the classifier's label and the
// post_transform.
type Linear struct {
	Classifier bool
	Features   int64
	Targets    int64     // score columns computed (classes of a classifier)
	Coef       []float32 // [Targets][Features]
	Intercepts []float32 // nil: none (a regressor's intercepts of the wrong length are ignored, as ONNX Runtime does)
	Post       uint8
	// Labels are a classifier's classlabels_ints; with one target the
	// label is Labels[1] for a positive score, else Labels[0] (1 and 0
	// when Labels does not hold two).
	Labels []int64
	// SecondClass: a one-target classifier with two labels outputs two
	// score columns, 1 - s and s (ONNX Runtime applies no
	// post_transform then).
	SecondClass bool
}

// Outputs is the number of score columns a row gets.
func (l *Linear) Outputs() int64 {
	if l.SecondClass {
		return 2
	}
	return l.Targets
}

// ParseLinear checks a LinearRegressor or LinearClassifier node for an
// input of features columns.
func ParseLinear(n *Node, features int64) (*Linear, error) {
	l := &Linear{Classifier: n.Op == "LinearClassifier", Features: features, Coef: attrFloats(n, "coefficients")}
	var err error
	if l.Post, err = postTransform(n); err != nil {
		return nil, err
	}
	icpt := attrFloats(n, "intercepts")
	if l.Classifier {
		if len(attrStrings(n, "classlabels_strings")) > 0 {
			return nil, unsupportedAttr("classlabels_strings (string labels; the served label is INT64)")
		}
		l.Targets = int64(len(icpt)) // ONNX Runtime's class count
		l.Intercepts = icpt
		l.Labels = attrInts(n, "classlabels_ints")
		if l.Targets == 1 {
			l.SecondClass = len(l.Labels) == 2
			if l.SecondClass && l.Post == PostProbit {
				return nil, unsupportedAttr("post_transform=PROBIT on a binary classifier with one score")
			}
		} else if int64(len(l.Labels)) != l.Targets {
			return nil, fmt.Errorf("%d classlabels_ints for %d classes (intercepts)", len(l.Labels), l.Targets)
		}
	} else {
		l.Targets = n.Int("targets", 1)
		if int64(len(icpt)) == l.Targets {
			l.Intercepts = icpt
		}
	}
	if l.Targets < 1 || l.Targets > MaxRowElements {
		return nil, fmt.Errorf("%d targets", l.Targets)
	}
	if int64(len(l.Coef)) != l.Targets*features {
		return nil, fmt.Errorf("%d coefficients for %d targets of %d features", len(l.Coef), l.Targets, features)
	}
	return l, nil
}

func (l *Linear) classifies() bool { return l.Classifier }

// Row computes one row: z gets Outputs() scores; the label is a
// classifier's.
func (l *Linear) Row(x, z []float32) int64 {
	s := z[:l.Targets]
	if l.SecondClass {
		s = z[1:2]
	}
	for j := range l.Targets {
		var acc float64
		for k, v := range x {
			acc += float64(v) * float64(l.Coef[j*l.Features+int64(k)])
		}
		if l.Intercepts != nil {
			acc += float64(l.Intercepts[j])
		}
		s[j] = float32(acc)
	}
	var label int64
	if l.Classifier {
		if l.Targets == 1 {
			label = 0
			if s[0] > 0 {
				label = 1
			}
			if len(l.Labels) == 2 {
				label = l.Labels[label]
			}
		} else {
			best := 0
			for j := 1; j < len(s); j++ {
				if s[j] > s[best] {
					best = j
				}
			}
			label = l.Labels[best]
		}
	}
	switch {
	case l.SecondClass:
		z[0] = 1 - z[1]
	case l.Targets == 1:
		// One score: ONNX Runtime applies PROBIT only.
		if l.Post == PostProbit {
			s[0] = Probit(s[0])
		}
	default:
		transformScores(l.Post, s)
	}
	return label
}

// rowModel is an ai.onnx.ml model that maps each row of its [N, C] input
// on its own: Linear, TreeEnsemble.
type rowModel interface {
	// Outputs is the number of score columns a row gets.
	Outputs() int64
	// Row computes one row's scores into z and returns its label.
	Row(x, z []float32) int64
	// classifies says whether the operator outputs the labels.
	classifies() bool
}

// rowModelOp is the shape inference and evaluation of the operators whose
// model parse checks for an input of features columns: their output is
// the [N, Outputs()] scores, after the [N] labels for a classifier.
func rowModelOp[M rowModel](parse func(n *Node, features int64) (M, error)) opFile {
	infer := func(c *Checked, n *Node) ([]*Info, error) {
		x, err := c.matrixInput(n)
		if err != nil {
			return nil, err
		}
		m, err := parse(n, x.Shape[1])
		if err != nil {
			return nil, err
		}
		scores := &Info{DType: F32, Shape: []int64{Batch, m.Outputs()}, Batched: x.Batched}
		if !m.classifies() {
			return []*Info{scores}, nil
		}
		return []*Info{{DType: I64, Shape: []int64{Batch}, Batched: x.Batched}, scores}, nil
	}
	eval := func(_ *Checked, n *Node, in []*Dense) ([]*Dense, error) {
		x := in[0]
		rows, cols := x.Shape[0], x.Shape[1]
		m, err := parse(n, cols)
		if err != nil {
			return nil, err
		}
		k := m.Outputs()
		z := make([]float32, rows*k)
		labels := make([]int64, rows)
		for r := range rows {
			labels[r] = m.Row(x.F32[r*cols:(r+1)*cols], z[r*k:(r+1)*k])
		}
		scores := &Dense{Shape: []int64{rows, k}, F32: z}
		if !m.classifies() {
			return []*Dense{scores}, nil
		}
		return []*Dense{{Shape: []int64{rows}, I64: labels}, scores}, nil
	}
	return opFile{infer, eval}
}
