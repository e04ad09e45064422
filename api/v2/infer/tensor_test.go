package infer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/oip"
	"github.com/llmserve/llmserve/scheduler"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestJSONDataEveryDatatype(t *testing.T) {
	cases := []struct {
		dt    Datatype
		shape []int64
		data  string
		want  any // JSONData
		raw   []byte
	}{
		{oip.BOOL, []int64{2, 2}, `[[true, false], [false, true]]`, []bool{true, false, false, true}, []byte{1, 0, 0, 1}},
		{oip.UINT8, nil, `[0, 255]`, []uint64{0, 255}, []byte{0, 255}},
		{oip.UINT16, nil, `[1, 65535]`, []uint64{1, 65535}, []byte{1, 0, 255, 255}},
		{oip.UINT32, []int64{1, 1}, `[[4294967295]]`, []uint64{4294967295}, []byte{255, 255, 255, 255}},
		{oip.UINT64, nil, `[18446744073709551615]`, []uint64{math.MaxUint64}, bytes.Repeat([]byte{255}, 8)},
		{oip.INT8, nil, `[-128, 127]`, []int64{-128, 127}, []byte{0x80, 0x7f}},
		{oip.INT16, nil, `[-2]`, []int64{-2}, []byte{0xfe, 0xff}},
		{oip.INT32, []int64{2, 2}, `[[1, 2], [3, -4]]`, []int64{1, 2, 3, -4}, []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0xfc, 0xff, 0xff, 0xff}},
		{oip.INT64, nil, `[-9223372036854775808]`, []int64{math.MinInt64}, []byte{0, 0, 0, 0, 0, 0, 0, 0x80}},
		{oip.FP16, nil, `[1, -2, 0.5]`, []float32{1, -2, 0.5}, []byte{0, 0x3c, 0, 0xc0, 0, 0x38}},
		{oip.FP32, nil, `[1.5, -0.25]`, []float32{1.5, -0.25}, []byte{0, 0, 0xc0, 0x3f, 0, 0, 0x80, 0xbe}},
		{oip.FP64, nil, `[1e300]`, []float64{1e300}, nil},
		{oip.BYTES, []int64{2, 2}, `[["a", ""], ["héllo", "x"]]`, []string{"a", "", "héllo", "x"}, nil},
	}
	for _, c := range cases {
		t.Run(string(c.dt), func(t *testing.T) {
			tt := &Tensor{Name: "x", Datatype: c.dt, Shape: c.shape}
			if err := tt.SetJSONData([]byte(c.data)); err != nil {
				t.Fatal(err)
			}
			if c.shape == nil {
				tt.Shape = []int64{int64(tt.Len())}
			}
			if err := tt.Check(); err != nil {
				t.Fatal(err)
			}
			if got := tt.JSONData(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("JSONData %#v, want %#v", got, c.want)
			}
			if c.raw != nil && !bytes.Equal(tt.Raw, c.raw) {
				t.Fatalf("raw % x, want % x", tt.Raw, c.raw)
			}
			// The binary form round-trips.
			back := &Tensor{Name: "x", Datatype: c.dt, Shape: tt.Shape}
			if err := back.SetBinary(tt.Binary()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.JSONData(), c.want) {
				t.Fatalf("binary round trip %#v", back.JSONData())
			}
		})
	}
}

func TestJSONDataErrors(t *testing.T) {
	cases := []struct {
		dt         Datatype
		data, want string
	}{
		{oip.INT32, `[1.5]`, "INT32"},
		{oip.INT8, `[128]`, "INT8"},
		{oip.UINT8, `[-1]`, "UINT8"},
		{oip.UINT64, `[18446744073709551616]`, "UINT64"},
		{oip.FP32, `[1e39]`, "FP32"},
		{oip.FP16, `[70000]`, "FP16"},
		{oip.FP32, `["1"]`, "number"},
		{oip.BOOL, `[1]`, "true or false"},
		{oip.BYTES, `[1]`, "string"},
		{oip.INT32, `{"a":1}`, "array"},
		{oip.INT32, `[[1], {"a":1}]`, "object"},
		{oip.INT32, `[[1], 2]`, "data[1] is a value"},
		{oip.INT32, `[null]`, "null"},
		{oip.INT32, `[1] [2]`, "after"},
		{oip.INT32, `[1`, "JSON"},
		{oip.INT32, strings.Repeat("[", 100) + "1" + strings.Repeat("]", 100), "deep"},
	}
	for _, c := range cases {
		tt := &Tensor{Datatype: c.dt, Shape: []int64{2, 1}}
		err := tt.SetJSONData([]byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: error %v, want one mentioning %q", c.dt, c.data, err, c.want)
		}
	}
}

// TestJSONDataNestedShape: nested data must nest as the shape says; flat
// data is row-major whatever the shape.
func TestJSONDataNestedShape(t *testing.T) {
	cases := []struct {
		shape []int64
		data  string
		want  string // "" when accepted
	}{
		{[]int64{2, 3}, `[1, 2, 3, 4, 5, 6]`, ""},
		{[]int64{2, 3}, `[[1, 2, 3], [4, 5, 6]]`, ""},
		{[]int64{1, 2, 2}, `[[[1, 2], [3, 4]]]`, ""},
		{[]int64{2, 0}, `[[], []]`, ""},
		{[]int64{0, 3}, `[]`, ""},
		{[]int64{2, 3}, `[[1, 2], [3, 4], [5, 6]]`, "data[0] has 2 elements, but dimension 1 of shape [2 3] is 3"},
		{[]int64{2, 3}, `[[1, 2, 3], [4, 5]]`, "data[1] has 2 elements, but dimension 1 of shape [2 3] is 3"},
		{[]int64{2, 3}, `[[1, 2, 3], [4, 5, 6], [7, 8, 9]]`, "data has 3 elements, but dimension 0 of shape [2 3] is 2"},
		{[]int64{2, 3}, `[[1, 2, 3], 4, 5, 6]`, "data[1] is a value where shape [2 3] needs an array of 3"},
		{[]int64{2, 3}, `[1, 2, 3, [4, 5, 6]]`, "data[3] is an array, but data's first element is not"},
		{[]int64{6}, `[[1, 2, 3], [4, 5, 6]]`, "data[0] is an array, but shape [6] has only 1 dimension(s)"},
		{[]int64{2, 1, 2}, `[[[1, 2]], [[3, [4]]]]`, "data[1][0][1] is an array"},
		{[]int64{2, 2, 2}, `[[[1, 2], [3, 4]], [[5, 6], [7]]]`, "data[1][1] has 1 elements, but dimension 2 of shape [2 2 2] is 2"},
	}
	for _, c := range cases {
		tt := &Tensor{Datatype: oip.FP32, Shape: c.shape}
		err := tt.SetJSONData([]byte(c.data))
		if c.want == "" {
			if err != nil {
				t.Errorf("%v %s: %v", c.shape, c.data, err)
			} else if err := tt.Check(); err != nil {
				t.Errorf("%v %s: Check: %v", c.shape, c.data, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %s: error %v, want one containing %q", c.shape, c.data, err, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		t    Tensor
		want string
	}{
		{Tensor{Datatype: oip.INT32, Shape: []int64{2}, Raw: make([]byte, 4)}, "2 elements but the data has 1"},
		{Tensor{Datatype: oip.INT32, Shape: []int64{1}, Raw: make([]byte, 5)}, "needs 4 bytes"},
		{Tensor{Datatype: oip.BOOL, Shape: []int64{1}, Raw: []byte{2}}, "0 or 1"},
		{Tensor{Datatype: oip.BYTES, Shape: []int64{3, 1}, Bytes: [][]byte{nil}}, "3 elements"},
		{Tensor{Datatype: oip.FP32, Shape: []int64{-1}}, "negative"},
		{Tensor{Datatype: oip.FP32, Shape: []int64{1 << 20, 1 << 20}}, "more than"},
		{Tensor{Datatype: "BF16", Shape: []int64{1}}, "not a V2 datatype"},
	}
	for _, c := range cases {
		if err := c.t.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.t, err, c.want)
		}
	}
	ok := Tensor{Datatype: oip.FP64, Shape: []int64{0, 3}}
	if err := ok.Check(); err != nil {
		t.Errorf("empty tensor: %v", err)
	}
}

func TestDecodeBytes(t *testing.T) {
	vals := [][]byte{[]byte("ab"), {}, []byte("\x00\xff")}
	enc := EncodeBytes(vals)
	got, err := DecodeBytes(enc)
	if err != nil || len(got) != 3 || !bytes.Equal(got[0], vals[0]) || len(got[1]) != 0 || !bytes.Equal(got[2], vals[2]) {
		t.Fatalf("%q %v", got, err)
	}
	for _, bad := range [][]byte{{1, 0}, {5, 0, 0, 0, 'a'}, {0xff, 0xff, 0xff, 0xff}} {
		if _, err := DecodeBytes(bad); err == nil {
			t.Errorf("% x decoded", bad)
		}
	}
}

func TestDecodeParameters(t *testing.T) {
	p, err := DecodeParameters([]byte(`{"a": 1, "b": 1.5, "c": "s", "d": true, "e": null, "stop": ["x", "y"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Parameters{"a": int64(1), "b": 1.5, "c": "s", "d": true, "stop": []string{"x", "y"}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("%#v", p)
	}
	for _, bad := range []string{`[1]`, `{"a": {}}`, `{"a": [1]}`, `{"a": 1e999}`} {
		if _, err := DecodeParameters([]byte(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
	if _, _, err := p.Int64("c"); err == nil {
		t.Error("a string read as an integer")
	}
	if _, _, err := p.Bool("a"); err == nil {
		t.Error("a number read as a bool")
	}
}

func TestAsError(t *testing.T) {
	if e := AsError(fmt.Errorf("head: %w", scheduler.ErrNoWorker)); e.Code != Unavailable || e.RetryAfter <= 0 || !strings.Contains(e.Msg, "no healthy worker") || strings.Contains(e.Msg, "shutting down") {
		t.Errorf("no worker: %+v", e)
	}
	if e := AsError(errors.New("secret internals")); e.Code != Internal || strings.Contains(e.Msg, "secret") {
		t.Fatalf("%+v", e)
	}
}

// FuzzSetJSONData: any bytes as any datatype's data either fail with an
// error or give elements whose JSON form decodes back to the same bytes.
func FuzzSetJSONData(f *testing.F) {
	f.Add(uint8(0), []byte(`[true, [false]]`))
	f.Add(uint8(7), []byte(`[[1, 2], [3, -4]]`))
	f.Add(uint8(9), []byte(`[1.5, 65504]`))
	f.Add(uint8(12), []byte(`["a", ["b"]]`))
	f.Add(uint8(9), []byte(`[1, null]`))
	f.Add(uint8(12), []byte(`"bare"`))
	f.Fuzz(func(t *testing.T, di uint8, data []byte) {
		dt := oip.Datatypes[int(di)%len(oip.Datatypes)]
		tt := &Tensor{Datatype: dt}
		if err := tt.SetJSONData(data); err != nil {
			return
		}
		js, err := json.Marshal(tt.JSONData())
		if err != nil {
			if dt == oip.BYTES {
				return
			}
			t.Fatalf("marshal %v: %v", tt.JSONData(), err)
		}
		back := &Tensor{Datatype: dt}
		if err := back.SetJSONData(js); err != nil {
			t.Fatalf("%s: %s does not decode back: %v", dt, js, err)
		}
		if dt != oip.BYTES && !bytes.Equal(back.Raw, tt.Raw) {
			t.Fatalf("%s: % x became % x", dt, tt.Raw, back.Raw)
		}
	})
}

// FuzzDecodeBytes: the BYTES binary form decodes or fails, and what
// decodes encodes back to the same bytes.
func FuzzDecodeBytes(f *testing.F) {
	f.Add(EncodeBytes([][]byte{[]byte("ab"), nil}))
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		vals, err := DecodeBytes(raw)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeBytes(vals), raw) {
			t.Fatalf("% x round-trips to % x", raw, EncodeBytes(vals))
		}
	})
}

// TestJSONDataNonFinite: NaN and ±Inf in FP data are the strings "NaN",
// "Infinity" and "-Infinity" both ways (encoding/json cannot write them as
// numbers); other strings are still refused for FP types.
func TestJSONDataNonFinite(t *testing.T) {
	for _, dt := range []Datatype{oip.FP16, oip.FP32, oip.FP64} {
		in := &Tensor{Datatype: dt, Shape: []int64{4}}
		if err := in.SetJSONData([]byte(`["NaN", "Infinity", "-Infinity", 2]`)); err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		b, err := json.Marshal(in.JSONData())
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if string(b) != `["NaN","Infinity","-Infinity",2]` {
			t.Fatalf("%s: %s", dt, b)
		}
		if err := in.SetJSONData([]byte(`["nan"]`)); err == nil || !strings.Contains(err.Error(), `"Infinity"`) {
			t.Fatalf("%s: \"nan\" accepted, or an error that does not list the strings: %v", dt, err)
		}
	}
	in := &Tensor{Datatype: oip.INT32, Shape: []int64{1}}
	if err := in.SetJSONData([]byte(`["NaN"]`)); err == nil {
		t.Fatal(`"NaN" accepted for INT32`)
	}
}

// TestJSONDataMLServerForms: null is NaN in a float tensor
// (docs/user-guide/content-type.md of MLServer), and a bare string is the
// one element of a BYTES tensor of shape [1] (its content-type example).
func TestJSONDataMLServerForms(t *testing.T) {
	for _, dt := range []Datatype{oip.FP16, oip.FP32, oip.FP64} {
		in := &Tensor{Datatype: dt, Shape: []int64{3}}
		if err := in.SetJSONData([]byte(`[1, null, 2]`)); err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if v, _ := in.Float(1); !math.IsNaN(v) {
			t.Fatalf("%s: null read as %v, want NaN", dt, v)
		}
		if v, _ := in.Float(2); v != 2 {
			t.Fatalf("%s: element 2 is %v", dt, v)
		}
	}
	s := &Tensor{Datatype: oip.BYTES, Shape: []int64{1}}
	if err := s.SetJSONData([]byte(`"hello world 😁"`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil || len(s.Bytes) != 1 || string(s.Bytes[0]) != "hello world 😁" {
		t.Fatalf("bare string: %q, check %v", s.Bytes, err)
	}
	for _, c := range []struct {
		dt    Datatype
		shape []int64
		data  string
		want  string
	}{
		{oip.BYTES, []int64{2}, `"ab"`, "shape [2] has 2"},
		{oip.BYTES, []int64{1}, `"a" "b"`, "after its string"},
		{oip.FP32, []int64{1}, `"1"`, "array"},
		{oip.INT32, []int64{1}, `[null]`, "null"},
		{oip.BYTES, []int64{1}, `[null]`, "null"},
	} {
		tt := &Tensor{Datatype: c.dt, Shape: c.shape}
		if err := tt.SetJSONData([]byte(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v %s: error %v, want one mentioning %q", c.dt, c.shape, c.data, err, c.want)
		}
	}
}
