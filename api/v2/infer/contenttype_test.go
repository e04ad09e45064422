package infer

import (
	"strings"
	"testing"

	"github.com/llmserve/llmserve/oip"
)

func bytesInput(name, ct string, vals ...string) *Tensor {
	t := NewBytesTensor(name, []int64{int64(len(vals))}, nil)
	for _, v := range vals {
		t.Bytes = append(t.Bytes, []byte(v))
	}
	if ct != "" {
		t.Parameters = Parameters{ParamContentType: ct}
	}
	return t
}

// TestContentTypes: each content type at the levels MLServer allows, as
// its codecs shape requests, and every refusal naming what is at fault.
func TestContentTypes(t *testing.T) {
	cases := []struct {
		name    string
		req     *Request
		wantErr string   // "" when it passes
		want    []string // the first input's elements after ApplyContentTypes
	}{
		{"str", &Request{Inputs: []*Tensor{bytesInput("foo", "str", "bar", "bar2")}}, "", []string{"bar", "bar2"}},
		{"str invalid utf-8", &Request{Inputs: []*Tensor{bytesInput("foo", "str", "ok", "\xff\xfe")}}, `input "foo": element 1 is not valid UTF-8`, nil},
		{"str on FP32", &Request{Inputs: []*Tensor{NewFP32Tensor("x", []int64{1}, []float32{1})}, Parameters: nil}, "", nil},
		{"str input on FP32", &Request{Inputs: []*Tensor{{Name: "x", Datatype: oip.FP32, Shape: []int64{1}, Raw: make([]byte, 4), Parameters: Parameters{ParamContentType: "str"}}}}, `input "x": content type str takes datatype BYTES, got FP32`, nil},
		{"request str", &Request{Parameters: Parameters{ParamContentType: "str"}, Inputs: []*Tensor{bytesInput("foo", "", "bar", "bar2"), NewInt32Tensor("max_tokens", []int64{1}, []int32{4})}}, "", []string{"bar", "bar2"}},
		{"request str invalid", &Request{Parameters: Parameters{ParamContentType: "str"}, Inputs: []*Tensor{bytesInput("foo", "", "\xc3")}}, `input "foo": element 0 is not valid UTF-8`, nil},
		{"input wins over request", &Request{Parameters: Parameters{ParamContentType: "str"}, Inputs: []*Tensor{bytesInput("foo", "base64", "UHl0aG9uIGlzIGZ1bg==")}}, "", []string{"Python is fun"}},
		{"base64", &Request{Inputs: []*Tensor{bytesInput("foo", "base64", "UHl0aG9uIGlzIGZ1bg==", "")}}, "", []string{"Python is fun", ""}},
		{"base64 bad", &Request{Inputs: []*Tensor{bytesInput("foo", "base64", "UHl0aG9uIGlzIGZ1bg==", "not base64!")}}, `input "foo": element 1 is not valid base64`, nil},
		{"base64 unpadded", &Request{Inputs: []*Tensor{bytesInput("foo", "base64", "UHk")}}, `element 0 is not valid base64`, nil},
		{"request base64", &Request{Parameters: Parameters{ParamContentType: "base64"}, Inputs: []*Tensor{bytesInput("foo", "", "aGk=")}}, `content type "base64" applies to inputs, not to a whole request`, nil},
		{"datetime", &Request{Inputs: []*Tensor{bytesInput("foo", "datetime", "2022-01-11T11:00:00", "2022-01-11", "2024-02-29 23:59:59.123456+05:30", "2022-01-11T11:00Z")}}, "", []string{"2022-01-11T11:00:00", "2022-01-11", "2024-02-29 23:59:59.123456+05:30", "2022-01-11T11:00Z"}},
		{"datetime bad day", &Request{Inputs: []*Tensor{bytesInput("foo", "datetime", "2023-02-29")}}, `input "foo": element 0 ("2023-02-29") is not an ISO 8601 date or date-time`, nil},
		{"datetime junk", &Request{Inputs: []*Tensor{bytesInput("foo", "datetime", "yesterday")}}, `element 0 ("yesterday") is not an ISO 8601`, nil},
		{"np", &Request{Inputs: []*Tensor{{Name: "foo", Datatype: oip.INT32, Shape: []int64{2, 2}, Raw: make([]byte, 16), Parameters: Parameters{ParamContentType: "np"}}}}, "", nil},
		{"request np", &Request{Parameters: Parameters{ParamContentType: "np"}, Inputs: []*Tensor{NewFP32Tensor("x", []int64{2}, []float32{1, 2})}}, "", nil},
		{"pd", &Request{Parameters: Parameters{ParamContentType: "pd"}, Inputs: []*Tensor{bytesInput("First Name", "str", "Joanne", "Michael"), NewInt32Tensor("Age", []int64{2}, []int32{34, 22})}}, "", []string{"Joanne", "Michael"}},
		{"pd rows differ", &Request{Parameters: Parameters{ParamContentType: "pd"}, Inputs: []*Tensor{bytesInput("A", "", "a1", "a2"), bytesInput("B", "", "b1")}}, `input "B": the request's content type is pd, so every input is a column of the same table, but it has 1 rows`, nil},
		{"pd scalar", &Request{Parameters: Parameters{ParamContentType: "pd"}, Inputs: []*Tensor{{Name: "A", Datatype: oip.BOOL, Shape: []int64{}, Raw: []byte{1}}}}, `input "A": the request's content type is pd`, nil},
		{"pd on an input", &Request{Inputs: []*Tensor{bytesInput("A", "pd", "a")}}, `input "A": content type pd applies to a whole request`, nil},
		{"unknown on input", &Request{Inputs: []*Tensor{bytesInput("A", "img", "a")}}, `input "A": unknown content type "img"; known content types: base64, datetime, np, pd, str`, nil},
		{"unknown on request", &Request{Parameters: Parameters{ParamContentType: "arrow"}, Inputs: []*Tensor{bytesInput("A", "", "a")}}, `the request: unknown content type "arrow"; known content types: base64, datetime, np, pd, str`, nil},
		{"not a string", &Request{Inputs: []*Tensor{{Name: "A", Datatype: oip.BYTES, Shape: []int64{0}, Parameters: Parameters{ParamContentType: int64(3)}}}}, `input "A": parameter content_type must be a string, got 3`, nil},
		{"output str", &Request{Inputs: []*Tensor{bytesInput("A", "", "a")}, Outputs: []RequestedOutput{{Name: "y", Parameters: Parameters{ParamContentType: "str"}}}}, "", []string{"a"}},
		{"output datetime", &Request{Inputs: []*Tensor{bytesInput("A", "", "a")}, Outputs: []RequestedOutput{{Name: "y", Parameters: Parameters{ParamContentType: "datetime"}}}}, `output "y": content type "datetime" decodes inputs; an output can be base64, np, str`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(tc.req)
			err := CheckContentTypes(tc.req)
			if got := snapshot(tc.req); got != before {
				t.Errorf("CheckContentTypes changed the request: %q, was %q", got, before)
			}
			apply := applyContentTypes(tc.req)
			for _, e := range []error{err, apply} {
				switch {
				case tc.wantErr == "" && e != nil:
					t.Fatalf("unexpected error: %v", e)
				case tc.wantErr != "" && (e == nil || !strings.Contains(e.Error(), tc.wantErr)):
					t.Fatalf("error %v, want one containing %q", e, tc.wantErr)
				case e != nil && AsError(e).Code != Invalid:
					t.Fatalf("error kind %v, want Invalid", AsError(e).Code)
				}
			}
			if tc.want != nil {
				var got []string
				for _, b := range tc.req.Inputs[0].Bytes {
					got = append(got, string(b))
				}
				if strings.Join(got, "|") != strings.Join(tc.want, "|") {
					t.Errorf("elements %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func snapshot(r *Request) string {
	var b strings.Builder
	for _, t := range r.Inputs {
		b.WriteString(t.Name + ":" + string(t.Raw))
		for _, e := range t.Bytes {
			b.WriteString("|" + string(e))
		}
	}
	return b.String()
}

func TestCheckContentTypesKnownExtra(t *testing.T) {
	r := &Request{Inputs: []*Tensor{bytesInput("img", "pillow_image", "\x89PNG")}}
	if err := CheckContentTypes(r); err == nil {
		t.Fatal("an unknown content type passed")
	}
	if err := CheckContentTypes(r, "pillow_image"); err != nil {
		t.Fatalf("a content type the caller knows: %v", err)
	}
	// The known ones are still checked.
	r.Inputs = append(r.Inputs, bytesInput("b", "base64", "!"))
	if err := CheckContentTypes(r, "pillow_image"); err == nil || !strings.Contains(err.Error(), `input "b": element 0 is not valid base64`) {
		t.Fatalf("err = %v", err)
	}
}

func TestEncodeResponse(t *testing.T) {
	req := &Request{
		Parameters: Parameters{ParamContentType: ContentPandas},
		Outputs:    []RequestedOutput{{Name: "raw", Parameters: Parameters{ParamContentType: ContentBase64}}, {Name: "n"}},
	}
	resp := &Response{Parameters: Parameters{"triton_final_response": true}, Outputs: []*Tensor{
		NewBytesTensor("text", []int64{1}, [][]byte{[]byte("hi")}),
		NewBytesTensor("raw", []int64{1}, [][]byte{[]byte("Python is fun")}),
		NewInt32Tensor("n", []int64{1}, []int32{3}),
		NewFP32Tensor("x", []int64{1, 1}, []float32{1}),
		{Name: "own", Datatype: oip.BYTES, Shape: []int64{1}, Bytes: [][]byte{[]byte("{}")}, Parameters: Parameters{ParamContentType: "pd_json"}},
		{Name: "own64", Datatype: oip.BYTES, Shape: []int64{1}, Bytes: [][]byte{[]byte("aGk=")}, Parameters: Parameters{ParamContentType: "base64"}},
	}}
	if err := EncodeResponse(req, resp); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"text": "str", "raw": "base64", "n": "np", "x": "np", "own": "pd_json", "own64": "base64"}
	for _, o := range resp.Outputs {
		if got := o.Parameters[ParamContentType]; got != want[o.Name] {
			t.Errorf("output %s content_type %v, want %s", o.Name, got, want[o.Name])
		}
	}
	if got := string(resp.Outputs[1].Bytes[0]); got != "UHl0aG9uIGlzIGZ1bg==" {
		t.Errorf("base64 output %q", got)
	}
	if got := string(resp.Outputs[5].Bytes[0]); got != "aGk=" {
		t.Errorf("an output the model encoded as base64 was encoded again: %q", got)
	}
	if resp.Parameters[ParamContentType] != ContentPandas || resp.Parameters["triton_final_response"] != true {
		t.Errorf("response parameters %v", resp.Parameters)
	}
	bad := &Request{Outputs: []RequestedOutput{{Name: "n", Parameters: Parameters{ParamContentType: ContentStr}}}}
	err := EncodeResponse(bad, &Response{Outputs: []*Tensor{NewInt32Tensor("n", []int64{1}, []int32{3})}})
	if err == nil || !strings.Contains(err.Error(), `output "n" has datatype INT32; content type str takes BYTES`) {
		t.Errorf("str on INT32: %v", err)
	}
}

func TestCollapseColumn(t *testing.T) {
	c := NewInt32Tensor("max_tokens", []int64{3}, []int32{4, 4, 4})
	if err := collapseColumn(c); err != nil || c.Len() != 1 || c.Shape[0] != 1 {
		t.Fatalf("equal column: %v %v", err, c.Shape)
	}
	d := NewInt32Tensor("max_tokens", []int64{2}, []int32{4, 5})
	if err := collapseColumn(d); err == nil || !strings.Contains(err.Error(), "different values on rows 0 and 1") {
		t.Fatalf("different values: %v", err)
	}
}

func TestISO8601(t *testing.T) {
	good := []string{
		"2022-01-11", "2022-01-11T11", "2022-01-11T11:00", "2022-01-11T11:00:00", "2022-01-11t11:00:00",
		"2022-01-11 11:00:00.5", "2022-01-11T11:00:00,123456789", "2022-01-11T11:00:00Z", "2022-01-11T11:00:00+05:30",
		"2022-01-11T11:00:00-0800", "2022-01-11T11:00:00+01", "2022-01-11T11:00:00+01:00:30", "2000-02-29", "0001-01-01",
	}
	for _, s := range good {
		if err := checkISO8601(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	bad := []string{
		"", "2022", "2022-1-11", "2022/01/11", "2022-13-01", "2022-00-10", "2022-04-31", "1900-02-29", "0000-01-01",
		"2022-01-11T", "2022-01-11T24:00", "2022-01-11T11:60", "2022-01-11T11:00:61", "2022-01-11T1", "2022-01-11T11:0",
		"2022-01-11T11:00:00.", "2022-01-11T11:00:00.1234567890", "2022-01-11T11:00:00+5", "2022-01-11T11:00:00+05:3",
		"2022-01-11T11:00:00 UTC", "2022-01-11X11:00", "2022-01-11T11:00:00+24:00", "2022-01-11T11:00:00Zjunk",
	}
	for _, s := range bad {
		if err := checkISO8601(s); err == nil {
			t.Errorf("%q passed", s)
		}
	}
}

// FuzzContentTypes: whatever a client sends as a BYTES element and a
// content type, checking and decoding never panic, agree with each
// other, and only refuse with Invalid; decoded base64 re-encodes to the
// input.
func FuzzContentTypes(f *testing.F) {
	for _, s := range []struct{ ct, elem string }{
		{"str", "héllo"}, {"str", "\xff"}, {"base64", "UHl0aG9uIGlzIGZ1bg=="}, {"base64", "UHk"}, {"base64", "a=b="},
		{"datetime", "2022-01-11T11:00:00"}, {"datetime", "2022-01-11T11:00:00.123+05:30"}, {"datetime", "2022-02-30"},
		{"np", "x"}, {"pd", "x"}, {"", "x"}, {"img", "x"},
	} {
		f.Add(s.ct, s.elem, false)
		f.Add(s.ct, s.elem, true)
	}
	f.Fuzz(func(t *testing.T, ct, elem string, requestLevel bool) {
		in := NewBytesTensor("in", []int64{1}, [][]byte{[]byte(elem)})
		r := &Request{Inputs: []*Tensor{in}}
		if requestLevel {
			r.Parameters = Parameters{ParamContentType: ct}
		} else {
			in.Parameters = Parameters{ParamContentType: ct}
		}
		checkErr := CheckContentTypes(r)
		if string(in.Bytes[0]) != elem {
			t.Fatal("CheckContentTypes changed the element")
		}
		applyErr := applyContentTypes(r)
		if (checkErr == nil) != (applyErr == nil) {
			t.Fatalf("check %v, apply %v", checkErr, applyErr)
		}
		if applyErr != nil {
			if AsError(applyErr).Code != Invalid {
				t.Fatalf("error kind %v", AsError(applyErr).Code)
			}
			return
		}
		if ct == ContentBase64 && !requestLevel {
			re := NewBytesTensor("out", []int64{1}, [][]byte{in.Bytes[0]})
			if err := EncodeResponse(&Request{Outputs: []RequestedOutput{{Name: "out", Parameters: Parameters{ParamContentType: ContentBase64}}}}, &Response{Outputs: []*Tensor{re}}); err != nil {
				t.Fatal(err)
			}
			if string(re.Bytes[0]) != elem {
				t.Fatalf("base64 %q decoded and encoded again is %q", elem, re.Bytes[0])
			}
		}
		if ct == ContentDatetime && !requestLevel && len(elem) < 10 {
			t.Fatalf("datetime %q (shorter than a date) passed", elem)
		}
	})
}

// TestLLMDecoderAppliesContentTypes: the LLM's decoder applies the
// request's content types (a base64 prompt is its bytes), once, so the
// protocols do not.
func TestLLMDecoderAppliesContentTypes(t *testing.T) {
	r := &Request{Inputs: []*Tensor{bytesInput(InputText, ContentBase64, "aGVsbG8=")}}
	lr, err := DecodeLLM(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(lr.Prompts) != 1 || lr.Prompts[0] != "hello" {
		t.Fatalf("prompts %q, want [hello]", lr.Prompts)
	}
}
