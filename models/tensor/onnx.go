package tensor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/engine/graph"
	"github.com/llmserve/llmserve/proto/onnxpb"
)

// onnxOpset is the default-domain opset EncodeONNX declares.
const onnxOpset = 17

// onnxMaxIR and onnxMaxOpset are the newest IR version and default-domain
// opset (both ONNX 1.18's) DecodeONNX reads: the supported operators mean
// the same up to them (later opsets before 23 only add types). A newer
// file may use semantics this loader does not know, so it fails the load
// rather than running with the wrong ones.
const (
	onnxMaxIR    = 11
	onnxMaxOpset = 23
)

// maxElements bounds a constant's element count (8 GiB of F32), so that a
// damaged dims field cannot make the reader allocate without bound before
// it sees the data is missing.
const maxElements = 1 << 31

// DecodeONNX reads an ONNX model (a serialized ModelProto) into a graph,
// with the default domain's opset version (0 when the model names none).
// Errors are *graph.Error.
func DecodeONNX(data []byte) (*graph.Graph, int64, error) {
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		return nil, 0, &graph.Error{Err: fmt.Errorf("not an ONNX model: %w", err)}
	}
	if v := m.GetIrVersion(); v > onnxMaxIR {
		return nil, 0, &graph.Error{Err: fmt.Errorf("the ONNX model has IR version %d; this loader reads IR versions up to %d (ONNX 1.18)", v, onnxMaxIR)}
	}
	var opset, mlOpset int64
	for _, o := range m.GetOpsetImport() {
		switch o.GetDomain() {
		case "", "ai.onnx":
			if v := o.GetVersion(); v > onnxMaxOpset {
				return nil, 0, &graph.Error{Err: fmt.Errorf("the ONNX model imports opset %d of the default domain; this loader knows opsets up to %d (ONNX 1.18)", v, onnxMaxOpset)}
			}
			opset = o.GetVersion()
		case onnxMLDomain:
			mlOpset = o.GetVersion()
		}
	}
	gp := m.GetGraph()
	if gp == nil {
		return nil, 0, &graph.Error{Err: errors.New("the ONNX model has no graph")}
	}
	g := &graph.Graph{}
	inits := map[string]bool{}
	for _, t := range gp.GetInitializer() {
		c, err := onnxConst(t)
		if err != nil {
			return nil, 0, &graph.Error{Err: err}
		}
		inits[c.Name] = true
		g.Consts = append(g.Consts, c)
	}
	for _, vi := range gp.GetInput() {
		if inits[vi.GetName()] {
			continue // IR < 4 lists initializers as inputs too
		}
		v, err := onnxValue(vi, true)
		if err != nil {
			return nil, 0, &graph.Error{Err: err}
		}
		g.Inputs = append(g.Inputs, v)
	}
	for _, vi := range gp.GetOutput() {
		v, err := onnxValue(vi, false)
		if err != nil {
			return nil, 0, &graph.Error{Err: err}
		}
		g.Outputs = append(g.Outputs, v)
	}
	for i, np := range gp.GetNode() {
		n := graph.Node{Name: np.GetName(), Op: np.GetOpType(), Inputs: np.GetInput(), Outputs: np.GetOutput()}
		if n.Name == "" {
			n.Name = fmt.Sprintf("#%d", i)
		}
		if err := onnxDomain(np, mlOpset); err != nil {
			return nil, 0, &graph.Error{Node: n.Name, Op: np.GetDomain() + ":" + n.Op, Err: err}
		}
		if n.Op == "Constant" {
			// Exporters (PyTorch's for Reshape's shape) put constants in
			// Constant nodes as well as in initializers.
			c, err := onnxConstantNode(np)
			if err != nil {
				return nil, 0, &graph.Error{Node: n.Name, Op: n.Op, Err: err}
			}
			g.Consts = append(g.Consts, c)
			continue
		}
		if np.GetDomain() != onnxMLDomain && !slices.Contains(graph.Ops, n.Op) {
			return nil, 0, &graph.Error{Node: n.Name, Op: n.Op, Err: graph.ErrUnsupported}
		}
		n.Attrs = map[string]graph.Attr{}
		for _, a := range np.GetAttribute() {
			at, err := onnxAttr(a)
			if err != nil {
				return nil, 0, &graph.Error{Node: n.Name, Op: n.Op, Err: err}
			}
			n.Attrs[a.GetName()] = at
		}
		g.Nodes = append(g.Nodes, n)
	}
	return g, opset, nil
}

// onnxMLDomain is the domain of the classic machine-learning operators
// (scikit-learn's, XGBoost's and LightGBM's exports); onnxMaxMLOpset is
// the newest of its opsets the loader reads: from 1 to 3 the supported
// operators (graph.MLOps) mean the same (3 adds only the double
// *_as_tensor attributes, which fail the load); ai.onnx.ml opset 4
// changed LabelEncoder and 5 replaced the tree ensembles.
const (
	onnxMLDomain   = "ai.onnx.ml"
	onnxMaxMLOpset = 3
)

// onnxDomain accepts a node of the default domain, or one of graph.MLOps
// in ai.onnx.ml (whose opset mlOpset must be known); other domains are
// unsupported.
func onnxDomain(np *onnxpb.NodeProto, mlOpset int64) error {
	switch np.GetDomain() {
	case "", "ai.onnx":
		if slices.Contains(graph.MLOps, np.GetOpType()) {
			return fmt.Errorf("operator %s belongs to the %s domain, not the default one", np.GetOpType(), onnxMLDomain)
		}
		return nil
	case onnxMLDomain:
		if mlOpset < 1 || mlOpset > onnxMaxMLOpset {
			return fmt.Errorf("the model imports opset %d of %s; this loader reads opsets 1 to %d: %w", mlOpset, onnxMLDomain, onnxMaxMLOpset, graph.ErrUnsupported)
		}
		if !slices.Contains(graph.MLOps, np.GetOpType()) {
			return graph.ErrUnsupported
		}
		return nil
	}
	return graph.ErrUnsupported
}

// onnxConstantNode is the constant a Constant node defines, from its value
// (a tensor), value_float(s) or value_int(s) attribute.
func onnxConstantNode(np *onnxpb.NodeProto) (graph.Const, error) {
	if len(np.GetOutput()) != 1 || len(np.GetAttribute()) != 1 {
		return graph.Const{}, errors.New("a Constant node needs one output and one attribute")
	}
	name, a := np.GetOutput()[0], np.GetAttribute()[0]
	switch a.GetName() {
	case "value":
		if a.GetT() == nil {
			return graph.Const{}, errors.New("attribute value holds no tensor")
		}
		c, err := onnxConst(a.GetT())
		c.Name = name
		return c, err
	case "value_float":
		return graph.Const{Name: name, DType: graph.F32, Shape: []int64{}, F32: []float32{a.GetF()}}, nil
	case "value_floats":
		return graph.Const{Name: name, DType: graph.F32, Shape: []int64{int64(len(a.GetFloats()))}, F32: a.GetFloats()}, nil
	case "value_int":
		return graph.Const{Name: name, DType: graph.I64, Shape: []int64{}, I64: []int64{a.GetI()}}, nil
	case "value_ints":
		return graph.Const{Name: name, DType: graph.I64, Shape: []int64{int64(len(a.GetInts()))}, I64: a.GetInts()}, nil
	}
	return graph.Const{}, fmt.Errorf("attribute %s: %w", a.GetName(), graph.ErrUnsupported)
}

func onnxAttr(a *onnxpb.AttributeProto) (graph.Attr, error) {
	typ := a.GetType()
	if typ == onnxpb.AttributeProto_UNDEFINED { // before IR 2 the type was implied
		switch {
		case len(a.GetInts()) > 0:
			typ = onnxpb.AttributeProto_INTS
		case len(a.GetFloats()) > 0:
			typ = onnxpb.AttributeProto_FLOATS
		case len(a.GetStrings()) > 0:
			typ = onnxpb.AttributeProto_STRINGS
		case len(a.GetS()) > 0:
			typ = onnxpb.AttributeProto_STRING
		case a.GetF() != 0:
			typ = onnxpb.AttributeProto_FLOAT
		default:
			typ = onnxpb.AttributeProto_INT
		}
	}
	switch typ {
	case onnxpb.AttributeProto_STRINGS:
		strs := make([]string, len(a.GetStrings()))
		for i, b := range a.GetStrings() {
			strs[i] = string(b)
		}
		return graph.Attr{Kind: graph.AttrStrings, Strings: strs}, nil
	case onnxpb.AttributeProto_INT:
		return graph.Attr{Kind: graph.AttrInt, Int: a.GetI()}, nil
	case onnxpb.AttributeProto_FLOAT:
		return graph.Attr{Kind: graph.AttrFloat, Float: a.GetF()}, nil
	case onnxpb.AttributeProto_STRING:
		return graph.Attr{Kind: graph.AttrString, String: string(a.GetS())}, nil
	case onnxpb.AttributeProto_INTS:
		return graph.Attr{Kind: graph.AttrInts, Ints: a.GetInts()}, nil
	case onnxpb.AttributeProto_FLOATS:
		return graph.Attr{Kind: graph.AttrFloats, Floats: a.GetFloats()}, nil
	case onnxpb.AttributeProto_TENSOR:
		// A one-element tensor (ConstantOfShape's value) is read as a
		// FLOAT or INT attribute.
		if t := a.GetT(); t != nil {
			c, err := onnxConst(t)
			if err == nil && c.Elements() == 1 {
				if c.DType == graph.I64 {
					return graph.Attr{Kind: graph.AttrInt, Int: c.I64[0]}, nil
				}
				return graph.Attr{Kind: graph.AttrFloat, Float: c.F32[0]}, nil
			}
		}
	}
	return graph.Attr{}, fmt.Errorf("attribute %q of type %v: %w", a.GetName(), typ, graph.ErrUnsupported)
}

func onnxValue(vi *onnxpb.ValueInfoProto, input bool) (graph.Value, error) {
	v := graph.Value{Name: vi.GetName()}
	tt := vi.GetType().GetTensorType()
	if tt == nil {
		if input {
			return v, fmt.Errorf("input %q is not a tensor", v.Name)
		}
		return v, nil
	}
	switch onnxpb.TensorProto_DataType(tt.GetElemType()) {
	case onnxpb.TensorProto_FLOAT:
		v.DType = graph.F32
	case onnxpb.TensorProto_INT64:
		v.DType = graph.I64
	default:
		return v, fmt.Errorf("%q has element type %v: only FLOAT and INT64 are supported", v.Name, onnxpb.TensorProto_DataType(tt.GetElemType()))
	}
	if tt.GetShape() == nil {
		if input {
			return v, fmt.Errorf("input %q has no shape", v.Name)
		}
		return v, nil
	}
	for i, d := range tt.GetShape().GetDim() {
		switch {
		case i == 0:
			// The first dimension is the batch, whatever the file says.
			v.Shape = append(v.Shape, graph.Batch)
		case d.GetDimParam() != "" || d.GetDimValue() <= 0:
			if input {
				return v, fmt.Errorf("input %q: dimension %d is not fixed (only the first, the batch, may vary)", v.Name, i)
			}
			v.Shape = append(v.Shape, graph.Batch)
		default:
			v.Shape = append(v.Shape, d.GetDimValue())
		}
	}
	if input && len(v.Shape) == 0 {
		return v, fmt.Errorf("input %q is a scalar; it needs a batch dimension", v.Name)
	}
	return v, nil
}

func onnxConst(t *onnxpb.TensorProto) (graph.Const, error) {
	c := graph.Const{Name: t.GetName(), Shape: t.GetDims()}
	if c.Shape == nil {
		c.Shape = []int64{}
	}
	if t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		return c, fmt.Errorf("initializer %q: external data is not supported", c.Name)
	}
	n := int64(1)
	for _, d := range c.Shape {
		if d < 0 || (d > 0 && n > maxElements/d) {
			return c, fmt.Errorf("initializer %q: bad dims %v", c.Name, c.Shape)
		}
		n *= d
	}
	raw := t.GetRawData()
	var err error
	switch onnxpb.TensorProto_DataType(t.GetDataType()) {
	case onnxpb.TensorProto_FLOAT:
		c.DType = graph.F32
		c.F32, err = constData(c, n, raw, t.GetFloatData(), "float_data", 4, func(b []byte) float32 {
			return math.Float32frombits(binary.LittleEndian.Uint32(b))
		})
	case onnxpb.TensorProto_INT64:
		c.DType = graph.I64
		c.I64, err = constData(c, n, raw, t.GetInt64Data(), "int64_data", 8, func(b []byte) int64 {
			return int64(binary.LittleEndian.Uint64(b))
		})
	default:
		return c, fmt.Errorf("initializer %q: data type %v is not supported (FLOAT and INT64 are)", c.Name, onnxpb.TensorProto_DataType(t.GetDataType()))
	}
	return c, err
}

// constData is the n elements of initializer c: read from raw_data (size
// little-endian bytes each, decoded by decode) when it has any, or when
// the tensor is empty and so is the typed field; the typed field (named
// field in errors) otherwise. Either must hold exactly n elements.
func constData[T any](c graph.Const, n int64, raw []byte, typed []T, field string, size int64, decode func([]byte) T) ([]T, error) {
	if len(raw) > 0 || (n == 0 && len(typed) == 0) {
		if int64(len(raw)) != size*n {
			return nil, fmt.Errorf("initializer %q: dims %v need %d bytes, raw_data has %d", c.Name, c.Shape, size*n, len(raw))
		}
		vals := make([]T, n)
		for i := range vals {
			vals[i] = decode(raw[size*int64(i):])
		}
		return vals, nil
	}
	if int64(len(typed)) != n {
		return nil, fmt.Errorf("initializer %q: dims %v hold %d elements, %s has %d", c.Name, c.Shape, n, field, len(typed))
	}
	return typed, nil
}

// EncodeONNX writes g as an ONNX model (IR version 8, default-domain opset
// 17, ai.onnx.ml opset 3 for graph.MLOps nodes): initializers in
// raw_data, inputs and outputs with a symbolic first dimension named
// "batch".
func EncodeONNX(g *graph.Graph) ([]byte, error) {
	gp := &onnxpb.GraphProto{Name: "llmserve"}
	for _, k := range g.Consts {
		t := &onnxpb.TensorProto{Name: k.Name, Dims: k.Shape}
		switch k.DType {
		case graph.F32:
			t.DataType = int32(onnxpb.TensorProto_FLOAT)
			t.RawData = make([]byte, 4*len(k.F32))
			for i, v := range k.F32 {
				binary.LittleEndian.PutUint32(t.RawData[4*i:], math.Float32bits(v))
			}
		case graph.I64:
			t.DataType = int32(onnxpb.TensorProto_INT64)
			t.RawData = make([]byte, 8*len(k.I64))
			for i, v := range k.I64 {
				binary.LittleEndian.PutUint64(t.RawData[8*i:], uint64(v))
			}
		default:
			return nil, fmt.Errorf("constant %q: element type %v", k.Name, k.DType)
		}
		gp.Initializer = append(gp.Initializer, t)
	}
	value := func(v graph.Value) *onnxpb.ValueInfoProto {
		elem := onnxpb.TensorProto_FLOAT
		if v.DType == graph.I64 {
			elem = onnxpb.TensorProto_INT64
		}
		tt := &onnxpb.TypeProto_Tensor{ElemType: int32(elem)}
		if v.Shape != nil {
			tt.Shape = &onnxpb.TensorShapeProto{}
			for i, d := range v.Shape {
				dim := &onnxpb.TensorShapeProto_Dimension{}
				if i == 0 || d < 0 {
					dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}
				} else {
					dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}
				}
				tt.Shape.Dim = append(tt.Shape.Dim, dim)
			}
		}
		return &onnxpb.ValueInfoProto{Name: v.Name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: tt}}}
	}
	for _, v := range g.Inputs {
		gp.Input = append(gp.Input, value(v))
	}
	for _, v := range g.Outputs {
		gp.Output = append(gp.Output, value(v))
	}
	ml := false
	for _, n := range g.Nodes {
		np := &onnxpb.NodeProto{Name: n.Name, OpType: n.Op, Input: n.Inputs, Output: n.Outputs}
		if slices.Contains(graph.MLOps, n.Op) {
			np.Domain, ml = onnxMLDomain, true
		}
		for _, name := range sortedKeys(n.Attrs) {
			a := n.Attrs[name]
			ap := &onnxpb.AttributeProto{Name: name}
			switch a.Kind {
			case graph.AttrInt:
				ap.Type, ap.I = onnxpb.AttributeProto_INT, a.Int
			case graph.AttrFloat:
				ap.Type, ap.F = onnxpb.AttributeProto_FLOAT, a.Float
			case graph.AttrString:
				ap.Type, ap.S = onnxpb.AttributeProto_STRING, []byte(a.String)
			case graph.AttrInts:
				ap.Type, ap.Ints = onnxpb.AttributeProto_INTS, a.Ints
			case graph.AttrFloats:
				ap.Type, ap.Floats = onnxpb.AttributeProto_FLOATS, a.Floats
			case graph.AttrStrings:
				ap.Type = onnxpb.AttributeProto_STRINGS
				for _, s := range a.Strings {
					ap.Strings = append(ap.Strings, []byte(s))
				}
			default:
				return nil, fmt.Errorf("node %q: attribute %q has no kind", n.Name, name)
			}
			np.Attribute = append(np.Attribute, ap)
		}
		gp.Node = append(gp.Node, np)
	}
	m := &onnxpb.ModelProto{
		IrVersion:    8,
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: "", Version: onnxOpset}},
		ProducerName: "llmserve",
		Graph:        gp,
	}
	if ml {
		m.OpsetImport = append(m.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: onnxMLDomain, Version: onnxMaxMLOpset})
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
