package graph

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
	"Clip":               {inferActivation, evalActivation},
	"LeakyRelu":          {inferActivation, evalActivation},
	"HardSigmoid":        {inferActivation, evalActivation},
	// ai.onnx.ml (ml.go, trees.go)
	"Scaler":                 {inferScaler, evalScaler},
	"Normalizer":             {inferNormalizer, evalNormalizer},
	"ZipMap":                 {inferZipMap, evalZipMap},
	"LinearRegressor":        {inferLinear, evalLinear},
	"LinearClassifier":       {inferLinear, evalLinear},
	"TreeEnsembleRegressor":  {inferTrees, evalTrees},
	"TreeEnsembleClassifier": {inferTrees, evalTrees},
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
