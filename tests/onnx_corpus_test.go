package tests

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// The ONNX corpus: models in the shapes PyTorch, scikit-learn and XGBoost
// exports write, made outside the project's code by
// scripts/onnx-corpus/corpus.py (Debian's python3-onnx), with references
// computed by ONNX Runtime (scripts/onnx-corpus/reference.cjs, the
// onnxruntime-node npm package). TestONNXCorpus serves them from a model
// repository and compares every model over V2 REST, V2 gRPC and KServe V1
// with ONNX Runtime, and each row sent alone with the same row in the
// batch.

// corpusTolerance is how far an FP32 output may be from ONNX Runtime's:
// relative 1e-5, with an absolute floor of 1e-6 for values near zero
// (where a relative bound asks for more than float32 carries after the
// sums both runtimes do in their own order).
const corpusTolerance, corpusFloor = 1e-5, 1e-6

// corpusInput is one input of inputs.json.
type corpusInput struct {
	Datatype string            `json:"datatype"`
	Shape    []int64           `json:"shape"`
	Data     []json.RawMessage `json:"data"`
}

// corpusOutput is one output of expected.json (or of a server's answer,
// decoded the same way): FP32 values with NaN as NaN, INT64 as float64.
type corpusOutput struct {
	Shape []int64
	Data  []float64
	Int   bool
}

// buildCorpus runs the two scripts into dir and returns the inputs, the
// references and the line corpus.py prints (the models and operators).
func buildCorpus(t *testing.T, dir string) (map[string]map[string]corpusInput, map[string]map[string]corpusOutput, string) {
	t.Helper()
	python := "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import onnx, numpy").Run(); err != nil {
		t.Fatalf("%s cannot import onnx and numpy (%v): run `make python-deps` (Debian's python3-onnx and python3-numpy)", python, err)
	}
	node, modules := nodeModules(t, "onnxruntime-node")
	out, err := exec.Command(python, "../scripts/onnx-corpus/corpus.py", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("corpus.py: %v\n%s", err, out)
	}
	summary := strings.TrimSpace(string(out))
	ref := exec.Command(node, "../scripts/onnx-corpus/reference.cjs", dir)
	ref.Env = append(os.Environ(), "NODE_PATH="+modules)
	if b, err := ref.CombinedOutput(); err != nil {
		t.Fatalf("reference.cjs: %v\n%s", err, b)
	}
	var inputs map[string]map[string]corpusInput
	readJSON(t, filepath.Join(dir, "inputs.json"), &inputs)
	var raw map[string]map[string]struct {
		Shape []int64           `json:"shape"`
		Data  []json.RawMessage `json:"data"`
	}
	readJSON(t, filepath.Join(dir, "expected.json"), &raw)
	expected := map[string]map[string]corpusOutput{}
	for m, outs := range raw {
		expected[m] = map[string]corpusOutput{}
		for name, o := range outs {
			expected[m][name] = corpusOutput{Shape: o.Shape, Data: jsonFloats(t, o.Data)}
		}
	}
	return inputs, expected, summary
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// jsonFloats reads numbers and the strings "NaN", "Infinity", "-Infinity".
func jsonFloats(t *testing.T, data []json.RawMessage) []float64 {
	t.Helper()
	out, err := parseFloats(data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func parseFloats(data []json.RawMessage) ([]float64, error) {
	out := make([]float64, len(data))
	for i, d := range data {
		var s string
		if json.Unmarshal(d, &s) == nil {
			switch s {
			case "NaN":
				out[i] = math.NaN()
			case "Infinity":
				out[i] = math.Inf(1)
			case "-Infinity":
				out[i] = math.Inf(-1)
			default:
				return nil, fmt.Errorf("element %d: the string %q is not a number", i, s)
			}
			continue
		}
		if err := json.Unmarshal(d, &out[i]); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return out, nil
}

// rows returns the input with only rows [a, b).
func (in corpusInput) rows(a, b int) corpusInput {
	per := len(in.Data) / int(in.Shape[0])
	out := in
	out.Shape = append([]int64{int64(b - a)}, in.Shape[1:]...)
	out.Data = in.Data[a*per : b*per]
	return out
}

func subset(inputs map[string]corpusInput, a, b int) map[string]corpusInput {
	out := map[string]corpusInput{}
	for k, v := range inputs {
		out[k] = v.rows(a, b)
	}
	return out
}

// corpusREST sends the inputs over V2 REST JSON.
func corpusREST(s *repoServer, model string, inputs map[string]corpusInput) (map[string]corpusOutput, error) {
	var ins []any
	for _, name := range slices.Sorted(mapsKeys(inputs)) {
		in := inputs[name]
		ins = append(ins, map[string]any{"name": name, "datatype": in.Datatype, "shape": in.Shape, "data": in.Data})
	}
	body, _ := json.Marshal(map[string]any{"inputs": ins})
	code, _, b, err := postTensor(s.URL+"/v2/models/"+model+"/infer", "application/json", nil, body)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, httpError(code, b)
	}
	var resp struct {
		Outputs []struct {
			Name     string            `json:"name"`
			Datatype string            `json:"datatype"`
			Shape    []int64           `json:"shape"`
			Data     []json.RawMessage `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return nil, err
	}
	out := map[string]corpusOutput{}
	for _, o := range resp.Outputs {
		data, err := parseFloats(o.Data)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		if o.Datatype == "FP32" {
			toFloat32(data)
		}
		out[o.Name] = corpusOutput{Shape: o.Shape, Data: data, Int: o.Datatype == "INT64"}
	}
	return out, nil
}

// toFloat32 rounds JSON's shortest decimal forms back to the float32
// values they print.
func toFloat32(data []float64) {
	for i, v := range data {
		data[i] = float64(float32(v))
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// corpusGRPC sends the inputs over V2 gRPC as raw_input_contents.
func corpusGRPC(s *repoServer, model string, inputs map[string]corpusInput) (map[string]corpusOutput, error) {
	req := &pb.ModelInferRequest{ModelName: model}
	for _, name := range slices.Sorted(mapsKeys(inputs)) {
		in := inputs[name]
		req.Inputs = append(req.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: name, Datatype: in.Datatype, Shape: in.Shape})
		var b []byte
		for _, d := range in.Data {
			if in.Datatype == "INT64" {
				var v int64
				if err := json.Unmarshal(d, &v); err != nil {
					return nil, err
				}
				b = binary.LittleEndian.AppendUint64(b, uint64(v))
				continue
			}
			v, err := parseFloats([]json.RawMessage{d})
			if err != nil {
				return nil, err
			}
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v[0])))
		}
		req.RawInputContents = append(req.RawInputContents, b)
	}
	resp, err := s.grpc.ModelInfer(context.Background(), req)
	if err != nil {
		return nil, err
	}
	out := map[string]corpusOutput{}
	for i, o := range resp.GetOutputs() {
		raw := resp.GetRawOutputContents()[i]
		co := corpusOutput{Shape: o.GetShape()}
		switch o.GetDatatype() {
		case "FP32":
			for j := 0; j+4 <= len(raw); j += 4 {
				co.Data = append(co.Data, float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[j:]))))
			}
		case "INT64":
			co.Int = true
			for j := 0; j+8 <= len(raw); j += 8 {
				co.Data = append(co.Data, float64(int64(binary.LittleEndian.Uint64(raw[j:]))))
			}
		default:
			return nil, fmt.Errorf("output %q: datatype %s", o.GetName(), o.GetDatatype())
		}
		out[o.GetName()] = co
	}
	return out, nil
}

// corpusV1 sends the inputs as KServe V1 instances and returns the
// predictions flattened per output.
func corpusV1(s *repoServer, model string, inputs map[string]corpusInput) (map[string]corpusOutput, error) {
	names := slices.Sorted(mapsKeys(inputs))
	n := int(inputs[names[0]].Shape[0])
	instances := make([]any, n)
	for i := range n {
		row := map[string]any{}
		for _, name := range names {
			in := inputs[name].rows(i, i+1)
			row[name] = nestRaw(in.Data, in.Shape[1:])
		}
		if len(names) == 1 {
			instances[i] = row[names[0]]
		} else {
			instances[i] = row
		}
	}
	body, _ := json.Marshal(map[string]any{"instances": instances})
	code, _, b, err := postTensor(s.URL+"/v1/models/"+model+":predict", "application/json", nil, body)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, httpError(code, b)
	}
	var resp struct {
		Predictions []json.RawMessage `json:"predictions"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return nil, err
	}
	out := map[string]corpusOutput{}
	for _, p := range resp.Predictions {
		var obj map[string]json.RawMessage
		if json.Unmarshal(p, &obj) != nil {
			obj = map[string]json.RawMessage{"": p}
		}
		for name, v := range obj {
			o := out[name]
			o.Data = append(o.Data, flattenJSON(v)...)
			out[name] = o
		}
	}
	for _, o := range out {
		toFloat32(o.Data) // INT64 labels are small integers: exact either way
	}
	return out, nil
}

func nestRaw(flat []json.RawMessage, shape []int64) any {
	if len(shape) == 0 {
		return flat[0]
	}
	n := int(shape[0])
	per := len(flat) / max(n, 1)
	out := make([]any, n)
	for i := range n {
		out[i] = nestRaw(flat[i*per:(i+1)*per], shape[1:])
	}
	return out
}

func flattenJSON(v json.RawMessage) []float64 {
	var arr []json.RawMessage
	if json.Unmarshal(v, &arr) == nil {
		var out []float64
		for _, e := range arr {
			out = append(out, flattenJSON(e)...)
		}
		return out
	}
	f, err := parseFloats([]json.RawMessage{v})
	if err != nil {
		return []float64{math.NaN()} // compareCorpus reports it
	}
	return f
}

// compareCorpus checks got against ONNX Runtime's want; it returns the
// largest relative difference seen.
func compareCorpus(t *testing.T, what string, got, want map[string]corpusOutput) float64 {
	t.Helper()
	worst := 0.0
	for name, w := range want {
		g, ok := got[name]
		if !ok && len(got) == 1 && len(want) == 1 {
			for _, only := range got {
				g, ok = only, true
			}
		}
		if !ok {
			t.Errorf("%s: no output %q (got %v)", what, name, slices.Sorted(mapsKeys(got)))
			continue
		}
		if g.Shape != nil && !slices.Equal(g.Shape, w.Shape) {
			t.Errorf("%s: output %q has shape %v, ONNX Runtime %v", what, name, g.Shape, w.Shape)
			continue
		}
		if len(g.Data) != len(w.Data) {
			t.Errorf("%s: output %q has %d values, ONNX Runtime %d", what, name, len(g.Data), len(w.Data))
			continue
		}
		for i := range w.Data {
			a, b := g.Data[i], w.Data[i]
			if math.IsNaN(a) && math.IsNaN(b) || a == b {
				continue
			}
			d := math.Abs(a - b)
			rel := d / math.Max(math.Abs(b), 1e-30)
			if d > corpusFloor {
				worst = math.Max(worst, rel)
			}
			if g.Int || d > corpusFloor && rel > corpusTolerance {
				t.Errorf("%s: output %q[%d] = %v, ONNX Runtime %v (relative difference %.3g)", what, name, i, a, b, rel)
				return worst
			}
		}
	}
	return worst
}

func sameBits(a, b map[string]corpusOutput) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || len(x.Data) != len(y.Data) {
			return false
		}
		for i := range x.Data {
			if math.Float64bits(x.Data[i]) != math.Float64bits(y.Data[i]) && !(math.IsNaN(x.Data[i]) && math.IsNaN(y.Data[i])) {
				return false
			}
		}
	}
	return true
}

// concatRows joins per-row answers into one batch's.
func concatRows(parts []map[string]corpusOutput) map[string]corpusOutput {
	out := map[string]corpusOutput{}
	for _, p := range parts {
		for k, v := range p {
			o := out[k]
			o.Data = append(o.Data, v.Data...)
			o.Int = v.Int
			out[k] = o
		}
	}
	return out
}

func TestONNXCorpus(t *testing.T) {
	dir := t.TempDir()
	inputs, expected, summary := buildCorpus(t, dir)
	t.Logf("corpus: %s", summary)
	if m := regexp.MustCompile(`^(\d+) models, (\d+) operators`).FindStringSubmatch(summary); m == nil || m[1] != fmt.Sprint(len(inputs)) {
		t.Fatalf("corpus.py printed %q; want the count of models (%d) and operators", summary, len(inputs))
	}
	s := startRepoServer(t, filepath.Join(dir, "repo"), false)
	idx := s.index(t)
	for _, model := range slices.Sorted(mapsKeys(inputs)) {
		t.Run(model, func(t *testing.T) {
			if e := idx[model]; e["state"] != "READY" {
				t.Fatalf("not loaded: %v", e)
			}
			in, want := inputs[model], expected[model]
			rest, err := corpusREST(s, model, in)
			if err != nil {
				t.Fatalf("V2 REST: %v", err)
			}
			worst := compareCorpus(t, "V2 REST", rest, want)
			grpc, err := corpusGRPC(s, model, in)
			if err != nil {
				t.Fatalf("V2 gRPC: %v", err)
			}
			compareCorpus(t, "V2 gRPC", grpc, want)
			if !sameBits(rest, grpc) {
				t.Errorf("V2 gRPC and V2 REST differ")
			}
			v1, err := corpusV1(s, model, in)
			if err != nil {
				t.Fatalf("KServe V1: %v", err)
			}
			if len(want) == 1 {
				for k := range want {
					v1 = map[string]corpusOutput{k: v1[""]}
				}
			}
			compareCorpus(t, "KServe V1", v1, want)
			// Each row alone equals its row of the batch, bit for bit.
			n := int(in[slices.Sorted(mapsKeys(in))[0]].Shape[0])
			var alone []map[string]corpusOutput
			for i := range n {
				o, err := corpusREST(s, model, subset(in, i, i+1))
				if err != nil {
					t.Fatalf("row %d alone: %v", i, err)
				}
				alone = append(alone, o)
			}
			if joined := concatRows(alone); !sameBits(stripShapes(rest), joined) {
				t.Errorf("rows sent alone differ from the batch of %d", n)
			}
			t.Logf("%d rows; V2 REST, V2 gRPC and KServe V1 within %g of ONNX Runtime (largest relative difference %.2g); rows alone bit-identical to the batch", n, corpusTolerance, worst)
		})
	}
}

func stripShapes(m map[string]corpusOutput) map[string]corpusOutput {
	out := map[string]corpusOutput{}
	for k, v := range m {
		v.Shape = nil
		out[k] = v
	}
	return out
}
