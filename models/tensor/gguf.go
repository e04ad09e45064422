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
)

// The GGUF layout of a graph (general.architecture "llmserve.graph") is
// documented in doc.go. gguf.go reads and writes it with a small codec of
// its own: evals/synth's GGUF codec is unexported, built around synth's
// LLM weight types, and reads headers from a stream; a graph needs I64
// tensors and reads a whole client-supplied file from memory with every
// length checked against what is left.

const (
	ggufMagic     = "GGUF"
	ggufVersion   = 3
	ggufAlignment = 32
	ggufArch      = "llmserve.graph"
	ggufPrefix    = "llmserve.graph."

	// GGUF metadata value types (gguf_type).
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufString  = 8
	ggufArray   = 9
	ggufUint64  = 10
	ggufInt64   = 11

	// ggml tensor types.
	ggmlF32 = 0
	ggmlI64 = 27

	maxGGUFCount = 1 << 20
)

// EncodeGGUF writes g as a GGUF graph with the given default-domain opset
// (0 for the latest).
func EncodeGGUF(g *graph.Graph, opset int64) ([]byte, error) {
	type kv struct {
		key string
		val any
	}
	kvs := []kv{
		{"general.architecture", ggufArch},
		{ggufPrefix + "opset", opset},
	}
	var names []string
	for _, in := range g.Inputs {
		names = append(names, in.Name)
		kvs = append(kvs, kv{ggufPrefix + "input." + in.Name + ".shape", slices.Clone(in.Shape)})
		if in.DType == graph.I64 {
			kvs = append(kvs, kv{ggufPrefix + "input." + in.Name + ".dtype", in.DType.String()})
		}
	}
	kvs = append(kvs, kv{ggufPrefix + "inputs", names})
	names = nil
	for _, out := range g.Outputs {
		names = append(names, out.Name)
		if out.DType != 0 {
			kvs = append(kvs, kv{ggufPrefix + "output." + out.Name + ".dtype", out.DType.String()})
		}
		if out.Shape != nil {
			kvs = append(kvs, kv{ggufPrefix + "output." + out.Name + ".shape", slices.Clone(out.Shape)})
		}
	}
	kvs = append(kvs, kv{ggufPrefix + "outputs", names})
	kvs = append(kvs, kv{ggufPrefix + "node_count", uint32(len(g.Nodes))})
	for i, n := range g.Nodes {
		p := fmt.Sprintf("%snode.%d.", ggufPrefix, i)
		kvs = append(kvs, kv{p + "name", n.Name}, kv{p + "op", n.Op}, kv{p + "inputs", nonNil(n.Inputs)}, kv{p + "outputs", nonNil(n.Outputs)})
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
			kvs = append(kvs, kv{p + "attr." + name, v})
		}
	}
	var scalars []string
	for _, k := range g.Consts {
		if len(k.Shape) == 0 {
			scalars = append(scalars, k.Name)
		}
	}
	kvs = append(kvs, kv{ggufPrefix + "scalars", nonNil(scalars)})

	le := binary.LittleEndian
	b := []byte(ggufMagic)
	b = le.AppendUint32(b, ggufVersion)
	b = le.AppendUint64(b, uint64(len(g.Consts)))
	b = le.AppendUint64(b, uint64(len(kvs)))
	str := func(b []byte, s string) []byte { return append(le.AppendUint64(b, uint64(len(s))), s...) }
	for _, e := range kvs {
		b = str(b, e.key)
		switch v := e.val.(type) {
		case string:
			b = str(le.AppendUint32(b, ggufString), v)
		case uint32:
			b = le.AppendUint32(le.AppendUint32(b, ggufUint32), v)
		case int64:
			b = le.AppendUint64(le.AppendUint32(b, ggufInt64), uint64(v))
		case float32:
			b = le.AppendUint32(le.AppendUint32(b, ggufFloat32), math.Float32bits(v))
		case []string:
			b = le.AppendUint64(le.AppendUint32(le.AppendUint32(b, ggufArray), ggufString), uint64(len(v)))
			for _, s := range v {
				b = str(b, s)
			}
		case []int64:
			b = le.AppendUint64(le.AppendUint32(le.AppendUint32(b, ggufArray), ggufInt64), uint64(len(v)))
			for _, x := range v {
				b = le.AppendUint64(b, uint64(x))
			}
		case []float32:
			b = le.AppendUint64(le.AppendUint32(le.AppendUint32(b, ggufArray), ggufFloat32), uint64(len(v)))
			for _, x := range v {
				b = le.AppendUint32(b, math.Float32bits(x))
			}
		}
	}
	var offset uint64
	for _, k := range g.Consts {
		b = str(b, k.Name)
		dims := ggmlDims(k.Shape)
		b = le.AppendUint32(b, uint32(len(dims)))
		for _, d := range dims {
			b = le.AppendUint64(b, uint64(d))
		}
		typ, size := uint32(ggmlF32), uint64(4*len(k.F32))
		if k.DType == graph.I64 {
			typ, size = ggmlI64, uint64(8*len(k.I64))
		}
		b = le.AppendUint32(b, typ)
		b = le.AppendUint64(b, offset)
		offset += alignUp(size)
	}
	b = append(b, make([]byte, int(alignUp(uint64(len(b))))-len(b))...)
	for _, k := range g.Consts {
		start := len(b)
		for _, v := range k.F32 {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
		for _, v := range k.I64 {
			b = le.AppendUint64(b, uint64(v))
		}
		b = append(b, make([]byte, int(alignUp(uint64(len(b)-start)))-(len(b)-start))...)
	}
	return b, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func alignUp(n uint64) uint64 { return (n + ggufAlignment - 1) / ggufAlignment * ggufAlignment }

// ggmlDims is a numpy shape in ggml order (fastest first); a scalar is [1].
func ggmlDims(shape []int64) []int64 {
	if len(shape) == 0 {
		return []int64{1}
	}
	d := slices.Clone(shape)
	slices.Reverse(d)
	return d
}

// ggufReader reads a GGUF file held in memory; every length is checked
// against the bytes left.
type ggufReader struct {
	b   []byte
	off uint64
}

var errTruncated = errors.New("GGUF file is truncated")

func (r *ggufReader) take(n uint64) ([]byte, error) {
	if n > uint64(len(r.b))-r.off {
		return nil, errTruncated
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

func (r *ggufReader) u32() (uint32, error) {
	p, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (r *ggufReader) u64() (uint64, error) {
	p, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

func (r *ggufReader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	p, err := r.take(n)
	return string(p), err
}

func (r *ggufReader) scalar(t uint32) (any, error) {
	switch t {
	case ggufUint32:
		return r.u32()
	case ggufInt32:
		v, err := r.u32()
		return int64(int32(v)), err
	case ggufFloat32:
		v, err := r.u32()
		return math.Float32frombits(v), err
	case ggufUint64:
		return r.u64()
	case ggufInt64:
		v, err := r.u64()
		return int64(v), err
	case ggufString:
		return r.str()
	case 0, 1, 2, 3, 7: // uint8, int8, uint16, int16, bool
		size := map[uint32]uint64{0: 1, 1: 1, 2: 2, 3: 2, 7: 1}[t]
		p, err := r.take(size)
		if err != nil {
			return nil, err
		}
		var v uint64
		for i := len(p) - 1; i >= 0; i-- {
			v = v<<8 | uint64(p[i])
		}
		return v, nil
	case 12: // float64
		v, err := r.u64()
		return math.Float64frombits(v), err
	}
	return nil, fmt.Errorf("unknown GGUF value type %d", t)
}

func (r *ggufReader) value() (any, error) {
	t, err := r.u32()
	if err != nil {
		return nil, err
	}
	if t != ggufArray {
		return r.scalar(t)
	}
	et, err := r.u32()
	if err != nil {
		return nil, err
	}
	n, err := r.u64()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.b))-r.off { // every element takes at least a byte
		return nil, errTruncated
	}
	switch et {
	case ggufString:
		s := make([]string, 0, n)
		for range n {
			v, err := r.str()
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case ggufInt64, ggufInt32:
		s := make([]int64, 0, n)
		for range n {
			v, err := r.scalar(et)
			if err != nil {
				return nil, err
			}
			s = append(s, v.(int64))
		}
		return s, nil
	case ggufFloat32:
		s := make([]float32, 0, n)
		for range n {
			v, err := r.u32()
			if err != nil {
				return nil, err
			}
			s = append(s, math.Float32frombits(v))
		}
		return s, nil
	}
	for range n { // other arrays: skipped
		if et == ggufArray {
			return nil, errors.New("nested GGUF arrays are not supported")
		}
		if _, err := r.scalar(et); err != nil {
			return nil, err
		}
	}
	return nil, nil
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
	r := &ggufReader{b: data}
	if p, err := r.take(4); err != nil || string(p) != ggufMagic {
		return nil, 0, errors.New("not a GGUF file")
	}
	version, err := r.u32()
	if err != nil {
		return nil, 0, err
	}
	if version != 2 && version != 3 {
		return nil, 0, fmt.Errorf("unsupported GGUF version %d", version)
	}
	nTensors, err := r.u64()
	if err != nil {
		return nil, 0, err
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, 0, err
	}
	if nTensors > maxGGUFCount || nKV > maxGGUFCount {
		return nil, 0, fmt.Errorf("implausible GGUF counts: %d tensors, %d key-values", nTensors, nKV)
	}
	kv := map[string]any{}
	for range nKV {
		key, err := r.str()
		if err != nil {
			return nil, 0, err
		}
		v, err := r.value()
		if err != nil {
			return nil, 0, fmt.Errorf("GGUF key %q: %w", key, err)
		}
		kv[key] = v
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
	type info struct {
		k      graph.Const
		typ    uint32
		offset uint64
	}
	var infos []info
	for range nTensors {
		var t info
		if t.k.Name, err = r.str(); err != nil {
			return nil, 0, err
		}
		nd, err := r.u32()
		if err != nil {
			return nil, 0, err
		}
		if nd == 0 || nd > graph.MaxRank {
			return nil, 0, fmt.Errorf("GGUF tensor %q has %d dimensions", t.k.Name, nd)
		}
		n := uint64(1)
		for range nd {
			d, err := r.u64()
			if err != nil {
				return nil, 0, err
			}
			if d > maxElements || (d > 0 && n > maxElements/d) {
				return nil, 0, fmt.Errorf("GGUF tensor %q is implausibly large", t.k.Name)
			}
			n *= d
			t.k.Shape = append(t.k.Shape, int64(d))
		}
		slices.Reverse(t.k.Shape)
		if slices.Contains(scalars, t.k.Name) {
			if n != 1 {
				return nil, 0, fmt.Errorf("GGUF tensor %q is listed as a scalar but holds %d elements", t.k.Name, n)
			}
			t.k.Shape = []int64{}
		}
		if t.typ, err = r.u32(); err != nil {
			return nil, 0, err
		}
		if t.offset, err = r.u64(); err != nil {
			return nil, 0, err
		}
		infos = append(infos, t)
	}
	align := uint64(ggufAlignment)
	if a, ok := kv["general.alignment"].(uint32); ok {
		if a == 0 || a&(a-1) != 0 {
			return nil, 0, fmt.Errorf("general.alignment %d is not a power of two", a)
		}
		align = uint64(a)
	}
	start := (r.off + align - 1) / align * align
	for _, t := range infos {
		k := t.k
		n := uint64(k.Elements())
		size := 4 * n
		switch t.typ {
		case ggmlF32:
			k.DType = graph.F32
		case ggmlI64:
			k.DType, size = graph.I64, 8*n
		default:
			return nil, 0, fmt.Errorf("GGUF tensor %q has ggml type %d (F32 and I64 are supported)", k.Name, t.typ)
		}
		if t.offset > uint64(len(data)) || start > uint64(len(data))-t.offset || size > uint64(len(data))-start-t.offset {
			return nil, 0, fmt.Errorf("GGUF tensor %q: data past the end of the file", k.Name)
		}
		p := data[start+t.offset : start+t.offset+size]
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
