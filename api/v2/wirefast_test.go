package v2

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/api/v2/infer"
)

// marshalled is what encoding/json writes for w with binary_data_size =
// sizes[i] merged into output i's parameters (sizes[i] < 0: none): what
// appendHead must write.
func marshalled(t testing.TB, w wireResponse, sizes []int64) []byte {
	outs := slices.Clone(w.Outputs) // nil stays nil, empty stays empty
	for i := range outs {
		if i < len(sizes) && sizes[i] >= 0 {
			p := maps.Clone(outs[i].Parameters)
			if p == nil {
				p = infer.Parameters{}
			}
			p[paramBinarySize] = sizes[i]
			outs[i].Parameters = p
		}
	}
	w.Outputs = outs
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkHead: appendHead writes what encoding/json writes, or declines.
// It reports whether appendHead took w.
func checkHead(t testing.TB, w wireResponse, sizes []int64, mustTake bool) bool {
	t.Helper()
	got, ok := appendHead(nil, &w, sizes)
	if !ok {
		if mustTake {
			t.Fatalf("appendHead declined %+v", w)
		}
		return false
	}
	if want := marshalled(t, w, sizes); string(got) != string(want) {
		t.Fatalf("appendHead wrote\n%s\nencoding/json\n%s", got, want)
	}
	return true
}

func TestAppendHead(t *testing.T) {
	out := func(name string, shape []int64, p infer.Parameters) wireTensorOut {
		return wireTensorOut{Name: name, Datatype: "FP32", Shape: shape, Parameters: p}
	}
	for _, c := range []struct {
		name  string
		w     wireResponse
		sizes []int64
		take  bool
	}{
		{"two binary outputs", wireResponse{ModelName: "gbt", ModelVersion: "1", Outputs: []wireTensorOut{out("label", []int64{1}, nil), out("probabilities", []int64{1, 3}, nil)}}, []int64{8, 12}, true},
		{"no outputs", wireResponse{ModelName: "m"}, nil, true},
		{"empty outputs", wireResponse{ModelName: "m", Outputs: []wireTensorOut{}}, nil, true},
		{"id and parameters", wireResponse{ModelName: "m", ID: "req-1", Parameters: infer.Parameters{"z": int64(-3), "a": true, "m": "x y", "u": uint64(1 << 63)}, Outputs: []wireTensorOut{out("o", nil, nil)}}, []int64{-1}, true},
		{"size over a parameter of the same name", wireResponse{ModelName: "m", Outputs: []wireTensorOut{out("o", []int64{}, infer.Parameters{paramBinarySize: int64(1), "a": int64(2), "zz": false})}}, []int64{0}, true},
		{"a parameter named binary_data_size, no size", wireResponse{ModelName: "m", Outputs: []wireTensorOut{out("o", []int64{2}, infer.Parameters{paramBinarySize: int64(7)})}}, []int64{-1}, true},
		{"html characters", wireResponse{ModelName: "a<b>&c", Outputs: []wireTensorOut{out("o", []int64{1}, nil)}}, []int64{4}, false},
		{"non-ASCII", wireResponse{ModelName: "modèle", Outputs: []wireTensorOut{out("o", []int64{1}, nil)}}, []int64{4}, false},
		{"a float parameter", wireResponse{ModelName: "m", Parameters: infer.Parameters{"t": 0.5}}, nil, false},
		{"JSON data", wireResponse{ModelName: "m", Outputs: []wireTensorOut{{Name: "o", Datatype: "FP32", Shape: []int64{1}, Data: []float32{1.5}}}}, []int64{-1}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if took := checkHead(t, c.w, c.sizes, c.take); took != c.take {
				t.Fatalf("appendHead took it: %v, want %v", took, c.take)
			}
		})
	}
	// Random responses of plain and other strings and parameter values.
	rng := rand.New(rand.NewPCG(1, 2))
	// Mostly what appendHead takes, now and then what it must decline.
	plain, odd := []string{"", "a", "label", "x_y-z.1", "~", "probabilities"}, []string{"é", "<", "a\"b", "tab\t", "\u2028", "\x7f"}
	str := func() string {
		if rng.IntN(40) == 0 {
			return odd[rng.IntN(len(odd))]
		}
		return plain[rng.IntN(len(plain))]
	}
	vals := []any{int64(0), int64(-1), int64(1) << 40, uint64(3), true, false, "s", int(7)}
	val := func() any {
		if rng.IntN(40) == 0 {
			return []any{1.25, "<s>", nil}[rng.IntN(3)]
		}
		return vals[rng.IntN(len(vals))]
	}
	taken := 0
	for range 2000 {
		w := wireResponse{ModelName: str(), ModelVersion: str(), ID: str()}
		params := func() infer.Parameters {
			if rng.IntN(3) == 0 {
				return nil
			}
			p := infer.Parameters{}
			for range rng.IntN(4) {
				p[str()] = val()
			}
			if rng.IntN(4) == 0 {
				p[paramBinarySize] = int64(rng.IntN(100))
			}
			return p
		}
		w.Parameters = params()
		var sizes []int64
		if rng.IntN(5) > 0 {
			w.Outputs = []wireTensorOut{}
			for range rng.IntN(4) {
				var shape []int64
				if rng.IntN(4) > 0 {
					shape = []int64{}
					for range rng.IntN(3) {
						shape = append(shape, int64(rng.IntN(300))-1)
					}
				}
				w.Outputs = append(w.Outputs, wireTensorOut{Name: str(), Datatype: "INT64", Shape: shape, Parameters: params()})
				sizes = append(sizes, int64(rng.IntN(50))-10)
			}
		}
		if checkHead(t, w, sizes, false) {
			taken++
		}
	}
	if taken < 1000 {
		t.Fatalf("appendHead took %d of 2000 random responses: the comparison hardly ran", taken)
	}
}

// FuzzAppendHead: whatever the names and values, appendHead writes what
// encoding/json writes, or declines.
func FuzzAppendHead(f *testing.F) {
	f.Add("gbt", "1", "", "label", "k", int64(3), "v", int64(8), true)
	f.Add("a<b", "", "id", "o\"", "binary_data_size", int64(-1), "é", int64(0), false)
	f.Fuzz(func(t *testing.T, model, version, id, output, key string, n int64, sv string, size int64, flag bool) {
		w := wireResponse{ModelName: model, ModelVersion: version, ID: id, Parameters: infer.Parameters{key: n, "flag": flag},
			Outputs: []wireTensorOut{{Name: output, Datatype: "FP32", Shape: []int64{n, size}, Parameters: infer.Parameters{key: sv}}}}
		checkHead(t, w, []int64{size}, false)
	})
}

// headSeeds are JSON headers: what clients send, and what decodeHead must
// leave to encoding/json.
var headSeeds = []struct {
	text string
	take bool // decodeHead decodes it, else leaves it to encoding/json
}{
	{`{"inputs":[{"datatype":"FP32","name":"input","parameters":{"binary_data_size":3136},"shape":[1,1,28,28]}],"parameters":{"binary_data_output":true}}`, true},
	{` { "id" : "r1" , "inputs" : [ { "name" : "x" , "shape" : [ 2 , -1 ] , "datatype" : "INT64" , "data" : [ [1, 2], [3, 4] ] } ] , "outputs" : [ { "name" : "y" , "parameters" : { "binary_data" : false } } ] } `, true},
	{`{"inputs":[{"name":"x","shape":[],"datatype":"BYTES","data":["a\"b","\u00e9"]}],"outputs":[]}`, true},
	{`{"inputs":[]}`, true},
	{`{"id":null,"parameters":null,"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":null,"parameters":{}}]}`, true},
	{`{"INPUTS":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}`, false},
	{`{"inputs":[{"name":"x","shape":[1.0],"datatype":"FP32","data":[1]}]}`, false},
	{`{"inputs":[{"name":"x","shape":[1e2],"datatype":"FP32","data":[1]}]}`, false},
	{`{"inputs":[{"name":"x","shape":[99999999999999999999],"datatype":"FP32"}]}`, false},
	{`{"inputs":[{"name":"x\u0041","shape":[1],"datatype":"FP32"}]}`, false},
	{`{"inputs":[{"name":"x","name":"y","shape":[1],"datatype":"FP32"}]}`, false},
	{`{"inputs":null}`, false},
	{`{"inputs":[{"name":null,"shape":[1],"datatype":"FP32"}]}`, false},
	{`{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","extra":1}]}`, false},
	{`{"inputs":[{"name":"x","shape":[1],"datatype":"FP32"}]} trailing`, false},
	{`{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":{"a":[1,{"b":"}]"}],"c":"\\"}}]}`, true},
	{`[1,2]`, false},
	{``, false},
}

// checkDecodeHead: whatever decodeHead takes, it decodes as encoding/json
// does. It reports whether decodeHead took b.
func checkDecodeHead(t testing.TB, b []byte) bool {
	t.Helper()
	var got wireRequest
	if !decodeHead(b, &got) {
		return false
	}
	var want wireRequest
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("decodeHead took %q, which encoding/json refuses: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeHead(%q) =\n%#v\nencoding/json:\n%#v", b, got, want)
	}
	return true
}

func TestDecodeHead(t *testing.T) {
	for _, c := range headSeeds {
		if took := checkDecodeHead(t, []byte(c.text)); took != c.take {
			t.Errorf("decodeHead took %q: %v, want %v", c.text, took, c.take)
		}
	}
}

func FuzzDecodeHead(f *testing.F) {
	for _, c := range headSeeds {
		f.Add([]byte(c.text))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeHead(t, b) })
}
