package tensor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/llmserve/llmserve/engine/graph"
	"github.com/llmserve/llmserve/gguf"
)

// The GGUF layout of a graph (general.architecture "llmserve.graph") is
// documented in doc.go. The container is package gguf's; this file maps a
// graph onto its key-values and tensors and back.

const (
	ggufArch   = "llmserve.graph"
	ggufPrefix = "llmserve.graph."

	maxGGUFCount = 1 << 20
)

// EncodeGGUF writes g as a GGUF graph with the given default-domain opset
// (0 for the latest).
func EncodeGGUF(g *graph.Graph, opset int64) ([]byte, error) {
	kv := func(key string, v any) gguf.KV { return gguf.KV{Key: key, Value: v} }
	kvs := []gguf.KV{
		kv("general.architecture", ggufArch),
		kv(ggufPrefix+"opset", opset),
	}
	var names []string
	for _, in := range g.Inputs {
		names = append(names, in.Name)
		kvs = append(kvs, kv(ggufPrefix+"input."+in.Name+".shape", slices.Clone(in.Shape)))
		if in.DType == graph.I64 {
			kvs = append(kvs, kv(ggufPrefix+"input."+in.Name+".dtype", in.DType.String()))
		}
	}
	kvs = append(kvs, kv(ggufPrefix+"inputs", names))
	names = nil
	for _, out := range g.Outputs {
		names = append(names, out.Name)
		if out.DType != 0 {
			kvs = append(kvs, kv(ggufPrefix+"output."+out.Name+".dtype", out.DType.String()))
		}
		if out.Shape != nil {
			kvs = append(kvs, kv(ggufPrefix+"output."+out.Name+".shape", slices.Clone(out.Shape)))
		}
	}
	kvs = append(kvs, kv(ggufPrefix+"outputs", names))
	kvs = append(kvs, kv(ggufPrefix+"node_count", uint32(len(g.Nodes))))
	for i, n := range g.Nodes {
		p := fmt.Sprintf("%snode.%d.", ggufPrefix, i)
		kvs = append(kvs, kv(p+"name", n.Name), kv(p+"op", n.Op), kv(p+"inputs", nonNil(n.Inputs)), kv(p+"outputs", nonNil(n.Outputs)))
		for _, name := range sortedKeys(n.Attrs) {
			a := n.Attrs[name]
			var v any
			switch a.Kind {
			case graph.AttrInt:
				v = a.Int
			case graph.AttrFloat:
				v = a.Float
			case graph.AttrString:
				v = a.String
			case graph.AttrInts:
				v = nonNil(a.Ints)
			case graph.AttrFloats:
				v = nonNil(a.Floats)
			case graph.AttrStrings:
				v = nonNil(a.Strings)
			default:
				return nil, fmt.Errorf("node %q: attribute %q has no kind", n.Name, name)
			}
			kvs = append(kvs, kv(p+"attr."+name, v))
		}
	}
	var scalars []string
	for _, k := range g.Consts {
		if len(k.Shape) == 0 {
			scalars = append(scalars, k.Name)
		}
	}
	kvs = append(kvs, kv(ggufPrefix+"scalars", nonNil(scalars)))

	tensors := make([]gguf.Tensor, len(g.Consts))
	for i, k := range g.Consts {
		typ := gguf.F32
		if k.DType == graph.I64 {
			typ = gguf.I64
		}
		var raw []byte
		for _, v := range k.F32 {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
		for _, v := range k.I64 {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
		}
		tensors[i] = gguf.TensorInfo{Name: k.Name, Shape: ggmlDims(k.Shape), Type: typ}.WithData(raw)
	}
	b, err := gguf.Encode(kvs, tensors)
	if err != nil {
		return nil, err
	}
	// A graph file ends at a multiple of the alignment, as llama.cpp's
	// writer pads after every tensor (gguf.Write does not after the last).
	return append(b, make([]byte, gguf.AlignUp(int64(len(b)), gguf.Alignment)-int64(len(b)))...), nil
}

// widen reads an int32 or int32 array (as other GGUF writers may store a
// graph's integers) as the int64 ones this file's keys hold.
func widen(v any) any {
	switch v := v.(type) {
	case int32:
		return int64(v)
	case []int32:
		w := make([]int64, len(v))
		for i, x := range v {
			w[i] = int64(x)
		}
		return w
	}
	return v
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ggmlDims is a numpy shape in ggml order (fastest first); a scalar is [1].
func ggmlDims(shape []int64) []uint64 {
	if len(shape) == 0 {
		return []uint64{1}
	}
	d := make([]uint64, len(shape))
	for i, n := range shape {
		d[len(shape)-1-i] = uint64(n)
	}
	return d
}

// DecodeGGUF reads a GGUF graph (general.architecture "llmserve.graph")
// into a graph and its opset. Errors are *graph.Error.
func DecodeGGUF(data []byte) (*graph.Graph, int64, error) {
	g, opset, err := decodeGGUF(data)
	if err != nil {
		var ge *graph.Error
		if !errors.As(err, &ge) {
			err = &graph.Error{Err: err}
		}
		return nil, 0, err
	}
	return g, opset, nil
}

func decodeGGUF(data []byte) (*graph.Graph, int64, error) {
	f, err := gguf.Decode(data)
	if err != nil {
		return nil, 0, err
	}
	kv := make(map[string]any, len(f.KVs))
	for _, e := range f.KVs {
		kv[e.Key] = widen(e.Value)
	}
	if a, _ := kv["general.architecture"].(string); a != ggufArch {
		return nil, 0, fmt.Errorf("GGUF general.architecture is %q, not %q: not a tensor graph", a, ggufArch)
	}
	strs := func(key string) ([]string, error) {
		v, ok := kv[key].([]string)
		if !ok {
			return nil, fmt.Errorf("GGUF key %s is missing or not a string array", key)
		}
		return v, nil
	}
	str := func(key string) (string, error) {
		v, ok := kv[key].(string)
		if !ok {
			return "", fmt.Errorf("GGUF key %s is missing or not a string", key)
		}
		return v, nil
	}
	opset, _ := kv[ggufPrefix+"opset"].(int64)
	g := &graph.Graph{}
	inputs, err := strs(ggufPrefix + "inputs")
	if err != nil {
		return nil, 0, err
	}
	for _, name := range inputs {
		shape, ok := kv[ggufPrefix+"input."+name+".shape"].([]int64)
		if !ok {
			return nil, 0, fmt.Errorf("GGUF key %sinput.%s.shape is missing or not an int64 array", ggufPrefix, name)
		}
		v := graph.Value{Name: name, DType: graph.F32, Shape: shape}
		switch dt, _ := kv[ggufPrefix+"input."+name+".dtype"].(string); dt {
		case "", "F32":
		case "I64":
			v.DType = graph.I64
		default:
			return nil, 0, fmt.Errorf("GGUF key %sinput.%s.dtype is %q; F32 or I64", ggufPrefix, name, dt)
		}
		g.Inputs = append(g.Inputs, v)
	}
	outputs, err := strs(ggufPrefix + "outputs")
	if err != nil {
		return nil, 0, err
	}
	for _, name := range outputs {
		v := graph.Value{Name: name}
		switch dt, _ := kv[ggufPrefix+"output."+name+".dtype"].(string); dt {
		case "F32":
			v.DType = graph.F32
		case "I64":
			v.DType = graph.I64
		}
		if shape, ok := kv[ggufPrefix+"output."+name+".shape"].([]int64); ok {
			v.Shape = shape
		}
		g.Outputs = append(g.Outputs, v)
	}
	count, ok := kv[ggufPrefix+"node_count"].(uint32)
	if !ok || count > maxGGUFCount {
		return nil, 0, fmt.Errorf("GGUF key %snode_count is missing or implausible", ggufPrefix)
	}
	attrs := map[int]map[string]graph.Attr{}
	for key, v := range kv {
		rest, ok := strings.CutPrefix(key, ggufPrefix+"node.")
		if !ok {
			continue
		}
		idx, name, ok := strings.Cut(rest, ".attr.")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= int(count) {
			return nil, 0, fmt.Errorf("GGUF key %s names no node", key)
		}
		var a graph.Attr
		switch v := v.(type) {
		case int64:
			a = graph.Attr{Kind: graph.AttrInt, Int: v}
		case float32:
			a = graph.Attr{Kind: graph.AttrFloat, Float: v}
		case string:
			a = graph.Attr{Kind: graph.AttrString, String: v}
		case []int64:
			a = graph.Attr{Kind: graph.AttrInts, Ints: v}
		case []float32:
			a = graph.Attr{Kind: graph.AttrFloats, Floats: v}
		case []string:
			a = graph.Attr{Kind: graph.AttrStrings, Strings: v}
		default:
			return nil, 0, fmt.Errorf("GGUF key %s: attribute of type %T", key, v)
		}
		if attrs[i] == nil {
			attrs[i] = map[string]graph.Attr{}
		}
		attrs[i][name] = a
	}
	for i := range int(count) {
		p := fmt.Sprintf("%snode.%d.", ggufPrefix, i)
		n := graph.Node{Attrs: attrs[i]}
		if n.Attrs == nil {
			n.Attrs = map[string]graph.Attr{}
		}
		if n.Name, err = str(p + "name"); err != nil {
			return nil, 0, err
		}
		if n.Op, err = str(p + "op"); err != nil {
			return nil, 0, err
		}
		if !slices.Contains(graph.Ops, n.Op) && !slices.Contains(graph.MLOps, n.Op) {
			return nil, 0, &graph.Error{Node: n.Name, Op: n.Op, Err: graph.ErrUnsupported}
		}
		if n.Inputs, err = strs(p + "inputs"); err != nil {
			return nil, 0, err
		}
		if n.Outputs, err = strs(p + "outputs"); err != nil {
			return nil, 0, err
		}
		g.Nodes = append(g.Nodes, n)
	}
	scalars, _ := kv[ggufPrefix+"scalars"].([]string)
	for _, t := range f.Tensors {
		k := graph.Const{Name: t.Name}
		n := uint64(1)
		for _, d := range t.Shape {
			if d > maxElements || (d > 0 && n > maxElements/d) {
				return nil, 0, fmt.Errorf("GGUF tensor %q is implausibly large", k.Name)
			}
			n *= d
			k.Shape = append(k.Shape, int64(d))
		}
		slices.Reverse(k.Shape)
		if slices.Contains(scalars, k.Name) {
			if n != 1 {
				return nil, 0, fmt.Errorf("GGUF tensor %q is listed as a scalar but holds %d elements", k.Name, n)
			}
			k.Shape = []int64{}
		}
		switch t.Type {
		case gguf.F32:
			k.DType = graph.F32
		case gguf.I64:
			k.DType = graph.I64
		default:
			return nil, 0, fmt.Errorf("GGUF tensor %q has ggml type %d (F32 and I64 are supported)", k.Name, uint32(t.Type))
		}
		p, err := f.TensorData(data, t)
		if err != nil {
			return nil, 0, err
		}
		if k.DType == graph.F32 {
			k.F32 = make([]float32, n)
			for i := range k.F32 {
				k.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
			}
		} else {
			k.I64 = make([]int64, n)
			for i := range k.I64 {
				k.I64[i] = int64(binary.LittleEndian.Uint64(p[8*i:]))
			}
		}
		g.Consts = append(g.Consts, k)
	}
	return g, opset, nil
}
