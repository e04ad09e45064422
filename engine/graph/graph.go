package graph

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Batch marks the batch dimension in a shape.
const Batch = -1

// MaxRank is the most dimensions a value may have (ggml's limit).
const MaxRank = 4

// MaxRowElements bounds the elements of one row (one batch entry) of any
// value, so that shapes in a damaged or hostile file cannot overflow
// sizes or ask for unbounded memory per request.
const MaxRowElements = 1 << 28

// DType is an element type.
type DType uint8

// The element types.
const (
	F32 DType = iota + 1
	I64
)

func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case I64:
		return "I64"
	}
	return fmt.Sprintf("DType(%d)", d)
}

// Value is a named graph input or output.
type Value struct {
	Name  string
	DType DType
	Shape []int64 // Shape[0] is Batch
}

// Const is a constant initializer: F32 holds float data, I64 integer data
// (Reshape's shape); exactly one is non-nil for a non-empty constant.
type Const struct {
	Name  string
	DType DType
	Shape []int64
	F32   []float32
	I64   []int64
}

// Elements is the number of elements the shape holds.
func (c *Const) Elements() int64 { return elements(c.Shape) }

// AttrKind says which field of an Attr is set.
type AttrKind uint8

// The attribute kinds.
const (
	AttrInt AttrKind = iota + 1
	AttrFloat
	AttrString
	AttrInts
	AttrFloats
	AttrStrings
)

// Attr is one node attribute.
type Attr struct {
	Kind    AttrKind
	Int     int64
	Float   float32
	String  string
	Ints    []int64
	Floats  []float32
	Strings []string
}

// Node is one operator application. Inputs name values (graph inputs,
// constants or outputs of earlier nodes); an empty name is an omitted
// optional input. Nodes are in topological order.
type Node struct {
	Name    string
	Op      string
	Inputs  []string
	Outputs []string
	Attrs   map[string]Attr
}

// Graph is a whole model.
type Graph struct {
	Inputs  []Value
	Outputs []Value
	Consts  []Const
	Nodes   []Node
}

// Ops lists the supported operators of the default domain, sorted (the
// CNN operators of opFiles join them at init). Shape, ConstantOfShape,
// Equal and Constant compute only at load time: Check folds every node
// whose inputs are constants (or the shape of a batched value) into a
// constant (see Fold).
var Ops = []string{
	"Add", "ArgMax", "Cast", "Clip", "Concat", "Constant", "ConstantOfShape",
	"Div", "Equal", "Erf", "Expand", "Flatten", "Gather", "Gelu", "Gemm",
	"HardSigmoid", "Identity", "LayerNormalization", "LeakyRelu", "MatMul",
	"Mul", "Pow", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Shape",
	"Sigmoid", "Slice", "Softmax", "Sqrt", "Squeeze", "Sub", "Tanh",
	"Transpose", "Unsqueeze", "Where",
}

// BatchDim is the element of a folded shape value (the output of Shape on
// a batched value, and what Gather, Slice, Concat and the like make of
// it) that stands for the batch size, unknown until run time. Reshape
// reads it as 0 (copy the batch) in its first entry, and Expand as the
// batch; anything that would compute with it fails the load.
const BatchDim int64 = math.MinInt64

// ErrUnsupported is the Err of an *Error for an operator or attribute
// value the runtime does not implement.
var ErrUnsupported = errors.New("not supported")

// Error is a graph that cannot be executed: Node and Op name the node at
// fault (empty for a graph-level problem).
type Error struct {
	Node string
	Op   string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Err == ErrUnsupported && e.Op != "": //nolint:errorlint // the operator itself, not a wrapped cause
		return fmt.Sprintf("node %q: operator %s is not supported (supported: %s) (ai.onnx.ml: %s)", e.Node, e.Op, strings.Join(Ops, ", "), strings.Join(MLOps, ", "))
	case e.Node != "":
		return fmt.Sprintf("node %q (%s): %v", e.Node, e.Op, e.Err)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

func elements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// Attribute accessors with ONNX defaults.

// Int returns attribute name as an int, or def when absent.
func (n *Node) Int(name string, def int64) int64 {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrInt {
		return a.Int
	}
	return def
}

// Float returns attribute name as a float, or def when absent.
func (n *Node) Float(name string, def float32) float32 {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrFloat {
		return a.Float
	}
	return def
}

// Str returns attribute name as a string, or def when absent.
func (n *Node) Str(name, def string) string {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrString {
		return a.String
	}
	return def
}

// Info is what Check learned about a value.
type Info struct {
	DType DType
	Shape []int64 // dimension 0 is Batch for batched values
	// Batched is false for constants and values computed from constants
	// only.
	Batched bool
	// Const is the constant's data when the value is an initializer.
	Const *Const
}

// Checked is a validated graph with every value's Info and the opset
// semantics resolved (Softmax's legacy mode).
type Checked struct {
	*Graph
	Values map[string]*Info
	// Opset is the default-domain operator set version (0: latest).
	Opset int64
}

// Check validates g (names defined before use, shapes compatible,
// operators and attributes supported, constants' data matching their
// shapes) and infers every value's shape, filling in the DType and Shape
// of g.Outputs. opset is the ONNX default-domain opset version, 0 for the
// latest.
//
// Check folds constants in g: a node whose inputs are all constants, or
// a Shape of a batched value, is computed now (by Eval's code) and
// replaced by a constant it appends to g.Consts, so the Reshape targets
// and transposed weights exporters compute in the graph reach the
// executor as constants. The batch size is not known at load time: in a
// folded shape it is BatchDim.
func Check(g *Graph, opset int64) (*Checked, error) {
	c := &Checked{Graph: g, Values: map[string]*Info{}, Opset: opset}
	if len(g.Inputs) == 0 {
		return nil, &Error{Err: errors.New("graph has no inputs")}
	}
	if len(g.Outputs) == 0 {
		return nil, &Error{Err: errors.New("graph has no outputs")}
	}
	for i := range g.Consts {
		k := &g.Consts[i]
		if k.Name == "" {
			return nil, &Error{Err: errors.New("constant with no name")}
		}
		if len(k.Shape) > MaxRank {
			return nil, &Error{Err: fmt.Errorf("constant %q: %d dimensions, at most %d", k.Name, len(k.Shape), MaxRank)}
		}
		total := int64(1)
		for _, d := range k.Shape {
			if d < 0 || (d > 0 && total > (1<<31)/d) {
				return nil, &Error{Err: fmt.Errorf("constant %q: bad shape %v", k.Name, k.Shape)}
			}
			total *= d
		}
		n := k.Elements()
		switch k.DType {
		case F32:
			if int64(len(k.F32)) != n || k.I64 != nil {
				return nil, &Error{Err: fmt.Errorf("constant %q: shape %v holds %d elements, data has %d", k.Name, k.Shape, n, len(k.F32))}
			}
		case I64:
			if int64(len(k.I64)) != n || k.F32 != nil {
				return nil, &Error{Err: fmt.Errorf("constant %q: shape %v holds %d elements, data has %d", k.Name, k.Shape, n, len(k.I64))}
			}
		default:
			return nil, &Error{Err: fmt.Errorf("constant %q: element type %v is not supported", k.Name, k.DType)}
		}
		if _, dup := c.Values[k.Name]; dup {
			return nil, &Error{Err: fmt.Errorf("constant %q defined twice", k.Name)}
		}
		c.Values[k.Name] = &Info{DType: k.DType, Shape: k.Shape, Const: k}
	}
	for _, in := range g.Inputs {
		if err := checkIO(in); err != nil {
			return nil, err
		}
		if in.DType != F32 && in.DType != I64 {
			return nil, &Error{Err: fmt.Errorf("input %q: element type %v is not supported (F32 and I64 are)", in.Name, in.DType)}
		}
		if _, dup := c.Values[in.Name]; dup {
			return nil, &Error{Err: fmt.Errorf("input %q defined twice", in.Name)}
		}
		c.Values[in.Name] = &Info{DType: in.DType, Shape: in.Shape, Batched: true}
	}
	kept := g.Nodes[:0:0]
	for i := range g.Nodes {
		n := &g.Nodes[i]
		folded, err := c.inferNode(n)
		if err != nil {
			var ge *Error
			if errors.As(err, &ge) {
				return nil, err
			}
			return nil, &Error{Node: n.Name, Op: n.Op, Err: err}
		}
		if !folded {
			kept = append(kept, *n)
		}
	}
	g.Nodes = kept
	for i, out := range g.Outputs {
		info, ok := c.Values[out.Name]
		if !ok {
			return nil, &Error{Err: fmt.Errorf("output %q is not computed by the graph", out.Name)}
		}
		if !info.Batched {
			return nil, &Error{Err: fmt.Errorf("output %q does not depend on an input", out.Name)}
		}
		if len(out.Shape) != 0 {
			if err := checkIO(out); err != nil {
				return nil, err
			}
			if !sameShape(out.Shape, info.Shape) {
				return nil, &Error{Err: fmt.Errorf("output %q: declared shape %v, computed %v", out.Name, out.Shape, info.Shape)}
			}
		}
		if out.DType != 0 && out.DType != info.DType {
			return nil, &Error{Err: fmt.Errorf("output %q: declared %v, computed %v", out.Name, out.DType, info.DType)}
		}
		g.Outputs[i].DType = info.DType
		g.Outputs[i].Shape = slices.Clone(info.Shape)
	}
	return c, nil
}

// sameShape compares declared and inferred shapes; a declared -1 past the
// batch matches anything.
func sameShape(declared, inferred []int64) bool {
	if len(declared) != len(inferred) {
		return false
	}
	for i := range declared {
		if declared[i] != inferred[i] && declared[i] != Batch {
			return false
		}
	}
	return true
}

func checkIO(v Value) error {
	if v.Name == "" {
		return &Error{Err: errors.New("input or output with no name")}
	}
	if len(v.Shape) < 1 || len(v.Shape) > MaxRank {
		return &Error{Err: fmt.Errorf("%q: shape %v must have 1 to %d dimensions, the first the batch", v.Name, v.Shape, MaxRank)}
	}
	if v.Shape[0] != Batch {
		return &Error{Err: fmt.Errorf("%q: first dimension %d must be the batch (-1)", v.Name, v.Shape[0])}
	}
	n := int64(1)
	for _, d := range v.Shape[1:] {
		if d < 1 || d > MaxRowElements {
			return &Error{Err: fmt.Errorf("%q: dimension %d in %v must be fixed and positive", v.Name, d, v.Shape)}
		}
		if n *= d; n > MaxRowElements {
			return &Error{Err: fmt.Errorf("%q: shape %v has more than %d elements per row", v.Name, v.Shape, MaxRowElements)}
		}
	}
	return nil
}
