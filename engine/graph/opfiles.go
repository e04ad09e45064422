package graph

import (
	"errors"
	"fmt"
	"slices"
)

// opFile is an operator defined in a file of its own (conv.go, ml.go)
// rather than in the switches of infer.go and eval.go: its shape
// inference and its reference evaluation, each giving one value per
// output (an operator may have several: LinearClassifier's label and
// scores).
type opFile struct {
	infer func(c *Checked, n *Node) ([]*Info, error)
	eval  func(c *Checked, n *Node, in []*Dense) ([]*Dense, error)
}

// opFiles holds the operators defined in their own files, by name.
var opFiles = map[string]opFile{
	// CNN (conv.go)
	"Conv":               {inferConv, evalConv},
	"BatchNormalization": {inferBatchNorm, evalBatchNorm},
	"MaxPool":            {inferPool, evalPool},
	"AveragePool":        {inferPool, evalPool},
	"GlobalAveragePool":  {inferPool, evalPool},
	// ai.onnx.ml (ml.go, trees.go)
	"Scaler":                 {inferScaler, evalScaler},
	"Normalizer":             {inferNormalizer, evalNormalizer},
	"ZipMap":                 {inferZipMap, evalZipMap},
	"LinearRegressor":        rowModelOp(ParseLinear),
	"LinearClassifier":       rowModelOp(ParseLinear),
	"TreeEnsembleRegressor":  rowModelOp(ParseTreeEnsemble),
	"TreeEnsembleClassifier": rowModelOp(ParseTreeEnsemble),
}

// init adds the default-domain operators of opFiles to Ops (MLOps lists
// the ai.onnx.ml ones), in order.
func init() {
	for op := range opFiles {
		if !slices.Contains(MLOps, op) && !slices.Contains(Ops, op) {
			Ops = append(Ops, op)
		}
	}
	slices.Sort(Ops)
}

// inferFileNode infers the outputs of a node whose operator is in
// opFiles and records them in c.Values; an output name left empty is
// not computed. Such an operator computes from the batch only: it has no
// constant folding.
func (c *Checked) inferFileNode(n *Node, f opFile) error {
	if !slices.ContainsFunc(n.Outputs, func(s string) bool { return s != "" }) {
		return errors.New("node has no output")
	}
	outs, err := f.infer(c, n)
	if err != nil {
		return err
	}
	if len(n.Outputs) > len(outs) {
		return fmt.Errorf("%d outputs: the operator has at most %d", len(n.Outputs), len(outs))
	}
	for i, out := range outs {
		if i >= len(n.Outputs) || n.Outputs[i] == "" {
			continue
		}
		if !out.Batched {
			return fmt.Errorf("the node computes from constants only: %w (fold constants when exporting)", ErrUnsupported)
		}
		if len(out.Shape) > MaxRank {
			return fmt.Errorf("result has %d dimensions, at most %d", len(out.Shape), MaxRank)
		}
		if len(out.Shape) == 0 || out.Shape[0] != Batch {
			return fmt.Errorf("result shape %v does not keep the batch first", out.Shape)
		}
		if n := elements(out.Shape[1:]); n < 1 || n > MaxRowElements {
			return fmt.Errorf("result shape %v has %d elements per row (1 to %d allowed)", out.Shape, n, MaxRowElements)
		}
		if _, dup := c.Values[n.Outputs[i]]; dup {
			return fmt.Errorf("output %q is defined twice", n.Outputs[i])
		}
		c.Values[n.Outputs[i]] = out
	}
	return nil
}

// attrInts, attrFloats and attrStrings return a list attribute, nil
// when absent.
func attrInts(n *Node, name string) []int64 {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrInts {
		return a.Ints
	}
	return nil
}

func attrFloats(n *Node, name string) []float32 {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrFloats {
		return a.Floats
	}
	return nil
}

func attrStrings(n *Node, name string) []string {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrStrings {
		return a.Strings
	}
	return nil
}

// hasAttr reports whether the node sets attribute name.
func hasAttr(n *Node, name string) bool {
	_, ok := n.Attrs[name]
	return ok
}

// FileOp reports whether op is computed by an operator of opFiles (the
// CNN and ai.onnx.ml files), which the executor builds with its own
// kernels too.
func FileOp(op string) bool {
	_, ok := opFiles[op]
	return ok
}
