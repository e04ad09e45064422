package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

// v2Do sends a request with optional extra headers and returns status,
// headers and body.
func (s *server) v2Do(t *testing.T, method, path string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

// v2Error checks that raw is {"error": "<non-empty>"} and returns the
// message.
func v2Error(t *testing.T, raw []byte) string {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", raw, err)
	}
	msg, ok := e["error"].(string)
	if !ok || msg == "" || len(e) != 1 {
		t.Fatalf("error body %s is not {\"error\": \"...\"}", raw)
	}
	return msg
}

type v2Tensor struct {
	Name       string         `json:"name"`
	Datatype   string         `json:"datatype"`
	Shape      []int64        `json:"shape"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Data       any            `json:"data,omitempty"`
}

type v2InferResponse struct {
	ModelName    string     `json:"model_name"`
	ModelVersion string     `json:"model_version"`
	ID           string     `json:"id"`
	Outputs      []v2Tensor `json:"outputs"`
}

func (r *v2InferResponse) output(t *testing.T, name string) v2Tensor {
	t.Helper()
	for _, o := range r.Outputs {
		if o.Name == name {
			return o
		}
	}
	t.Fatalf("no output %q in %+v", name, r.Outputs)
	return v2Tensor{}
}

func textInput(prompts ...string) v2Tensor {
	return v2Tensor{Name: "text_input", Datatype: "BYTES", Shape: []int64{int64(len(prompts))}, Data: prompts}
}

// v2Generate runs a greedy V2 generate and returns text_output.
func (s *server) v2Generate(t *testing.T, prompt string, maxTokens int) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"text_input": prompt, "parameters": map[string]any{"max_tokens": maxTokens, "temperature": 0}})
	code, _, raw := s.v2Do(t, "POST", "/v2/models/stories260K/generate", b, nil)
	if code != 200 {
		t.Fatalf("generate: %d %s", code, raw)
	}
	var out struct {
		TextOutput string `json:"text_output"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.TextOutput
}

// v2GenerateStream runs generate_stream and returns the events' data.
func (s *server) v2GenerateStream(t *testing.T, ctx context.Context, body map[string]any) []map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/v2/models/stories260K/generate_stream", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("generate_stream: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	var events []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		if data == "[DONE]" {
			t.Fatal("generate_stream sent [DONE]")
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		events = append(events, ev)
	}
	return events
}

func TestV2Metadata(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	code, _, raw := s.v2Do(t, "GET", "/v2", nil, nil)
	var sm struct {
		Name       string   `json:"name"`
		Version    string   `json:"version"`
		Extensions []string `json:"extensions"`
	}
	if code != 200 || json.Unmarshal(raw, &sm) != nil || sm.Name != "llmserve" || sm.Version == "" ||
		!strings.Contains(strings.Join(sm.Extensions, ","), "binary_tensor_data") {
		t.Fatalf("GET /v2: %d %s", code, raw)
	}
	for _, base := range []string{"/v2/models/stories260K", "/v2/models/stories260K/versions/1"} {
		code, _, raw := s.v2Do(t, "GET", base, nil, nil)
		var mm struct {
			Name     string     `json:"name"`
			Versions []string   `json:"versions"`
			Platform string     `json:"platform"`
			Inputs   []v2Tensor `json:"inputs"`
			Outputs  []v2Tensor `json:"outputs"`
		}
		if code != 200 || json.Unmarshal(raw, &mm) != nil || mm.Name != "stories260K" || mm.Platform != "llama.cpp" ||
			len(mm.Versions) != 1 || mm.Versions[0] != "1" {
			t.Fatalf("GET %s: %d %s", base, code, raw)
		}
		if in := mm.Inputs[0]; in.Name != "text_input" || in.Datatype != "BYTES" || in.Shape[0] != -1 {
			t.Fatalf("GET %s: first input %+v", base, in)
		}
		if out := mm.Outputs[0]; out.Name != "text_output" || out.Datatype != "BYTES" || out.Shape[0] != -1 {
			t.Fatalf("GET %s: first output %+v", base, out)
		}
		code, _, raw = s.v2Do(t, "GET", base+"/ready", nil, nil)
		if code != 200 || string(raw) != `{"name":"stories260K","ready":true}`+"\n" {
			t.Fatalf("GET %s/ready: %d %s", base, code, raw)
		}
	}
}

// TestV2UnknownModelAndVersion: every route answers 404 with a message
// for an unknown model and for a version other than 1.
func TestV2UnknownModelAndVersion(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	body := []byte(`{"text_input":"hi","inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["hi"]}]}`)
	for _, base := range []string{"/v2/models/nope", "/v2/models/nope/versions/1", "/v2/models/stories260K/versions/2", "/v2/models/stories260K/versions/latest"} {
		for _, r := range []struct{ method, suffix string }{
			{"GET", ""}, {"GET", "/ready"}, {"POST", "/infer"}, {"POST", "/generate"}, {"POST", "/generate_stream"},
		} {
			var b []byte
			if r.method == "POST" {
				b = body
			}
			code, _, raw := s.v2Do(t, r.method, base+r.suffix, b, nil)
			if code != 404 {
				t.Errorf("%s %s: %d %s, want 404", r.method, base+r.suffix, code, raw)
				continue
			}
			msg := v2Error(t, raw)
			if !strings.Contains(msg, "nope") && !strings.Contains(msg, "version") {
				t.Errorf("%s %s: message %q names neither the model nor the version", r.method, base+r.suffix, msg)
			}
		}
	}
}

func TestV2InferText(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	want := s.v2Generate(t, "Once upon a time", 12)
	if want == "" {
		t.Fatal("empty greedy text")
	}
	body, _ := json.Marshal(map[string]any{
		"id":         "req-42",
		"parameters": map[string]any{"temperature": 0},
		"inputs": []any{
			textInput("Once upon a time", "Once upon a time"),
			v2Tensor{Name: "max_tokens", Datatype: "UINT8", Shape: []int64{1}, Data: []int{12}},
		},
		"outputs": []any{map[string]any{"name": "text_output"}, map[string]any{"name": "finish_reason"}, map[string]any{"name": "num_output_tokens"}},
	})
	code, _, raw := s.v2Do(t, "POST", "/v2/models/stories260K/versions/1/infer", body, nil)
	if code != 200 {
		t.Fatalf("infer: %d %s", code, raw)
	}
	var resp v2InferResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.ID != "req-42" || resp.ModelName != "stories260K" || resp.ModelVersion != "1" || len(resp.Outputs) != 3 {
		t.Fatalf("infer answer %s", raw)
	}
	text := resp.output(t, "text_output")
	if text.Datatype != "BYTES" || len(text.Shape) != 1 || text.Shape[0] != 2 {
		t.Fatalf("text_output %+v", text)
	}
	data := text.Data.([]any)
	if data[0] != want || data[1] != want {
		t.Fatalf("text_output %q, want %q twice", data, want)
	}
	if fr := resp.output(t, "finish_reason").Data.([]any); fr[0] != "length" {
		t.Fatalf("finish_reason %v", fr)
	}
	if n := resp.output(t, "num_output_tokens"); n.Datatype != "INT32" || n.Data.([]any)[0] != float64(12) {
		t.Fatalf("num_output_tokens %+v", n)
	}

	// Sampling as tensors of other numeric datatypes, and the Triton vLLM
	// backend's sampling_parameters JSON.
	body, _ = json.Marshal(map[string]any{"inputs": []any{
		textInput("Once upon a time"),
		v2Tensor{Name: "sampling_parameters", Datatype: "BYTES", Shape: []int64{1}, Data: []string{`{"max_tokens": 12, "temperature": 0.9}`}},
		v2Tensor{Name: "temperature", Datatype: "FP16", Shape: []int64{1}, Data: []float64{0}},
		v2Tensor{Name: "seed", Datatype: "INT64", Shape: []int64{1}, Data: []int{7}},
	}})
	code, _, raw = s.v2Do(t, "POST", "/v2/models/stories260K/infer", body, nil)
	if code != 200 {
		t.Fatalf("infer: %d %s", code, raw)
	}
	resp = v2InferResponse{}
	_ = json.Unmarshal(raw, &resp)
	if got := resp.output(t, "text_output").Data.([]any)[0]; got != want {
		t.Fatalf("text_output %q, want %q", got, want)
	}

	// Triton vLLM backend's return_* flags add outputs.
	body, _ = json.Marshal(map[string]any{"parameters": map[string]any{"max_tokens": 12, "temperature": 0}, "inputs": []any{
		textInput("Once upon a time"),
		v2Tensor{Name: "return_finish_reason", Datatype: "BOOL", Shape: []int64{1}, Data: []bool{true}},
		v2Tensor{Name: "return_cumulative_logprob", Datatype: "BOOL", Shape: []int64{1}, Data: []bool{true}},
	}})
	code, _, raw = s.v2Do(t, "POST", "/v2/models/stories260K/infer", body, nil)
	resp = v2InferResponse{}
	if code != 200 || json.Unmarshal(raw, &resp) != nil || len(resp.Outputs) != 3 {
		t.Fatalf("return flags: %d %s", code, raw)
	}
	if fr := resp.output(t, "finish_reason").Data.([]any)[0]; fr != "length" {
		t.Fatalf("finish_reason %v", fr)
	}
	if lp := resp.output(t, "cumulative_logprob"); lp.Datatype != "FP32" || lp.Data.([]any)[0].(float64) >= 0 {
		t.Fatalf("cumulative_logprob %+v", lp)
	}
}

// binaryBody builds a binary-extension body: the JSON header, then data.
func binaryBody(t *testing.T, header any, data ...[]byte) ([]byte, map[string]string) {
	js, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	body := append([]byte(nil), js...)
	for _, d := range data {
		body = append(body, d...)
	}
	return body, map[string]string{"Inference-Header-Content-Length": strconv.Itoa(len(js)), "Content-Type": "application/octet-stream"}
}

func bytesElems(vals ...string) []byte {
	var out []byte
	for _, v := range vals {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	return out
}

func TestV2InferBinary(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	want := s.v2Generate(t, "Once upon a time", 10)

	maxTok := binary.LittleEndian.AppendUint32(nil, 10)
	temp := binary.LittleEndian.AppendUint32(nil, math.Float32bits(0))
	in := bytesElems("Once upon a time")
	body, hdr := binaryBody(t, map[string]any{
		"inputs": []any{
			v2Tensor{Name: "text_input", Datatype: "BYTES", Shape: []int64{1}, Parameters: map[string]any{"binary_data_size": len(in)}},
			v2Tensor{Name: "max_tokens", Datatype: "INT32", Shape: []int64{1}, Parameters: map[string]any{"binary_data_size": 4}},
			v2Tensor{Name: "temperature", Datatype: "FP32", Shape: []int64{1}, Parameters: map[string]any{"binary_data_size": 4}},
		},
		"outputs": []any{
			map[string]any{"name": "text_output", "parameters": map[string]any{"binary_data": true}},
			map[string]any{"name": "num_input_tokens"},
		},
	}, in, maxTok, temp)
	code, h, raw := s.v2Do(t, "POST", "/v2/models/stories260K/infer", body, hdr)
	if code != 200 {
		t.Fatalf("binary infer: %d %s", code, raw)
	}
	n, err := strconv.Atoi(h.Get("Inference-Header-Content-Length"))
	if err != nil || n > len(raw) || h.Get("Content-Length") != strconv.Itoa(len(raw)) {
		t.Fatalf("headers %v, body %d bytes", h, len(raw))
	}
	var resp v2InferResponse
	if err := json.Unmarshal(raw[:n], &resp); err != nil {
		t.Fatalf("header %q: %v", raw[:n], err)
	}
	out := resp.output(t, "text_output")
	size := int(out.Parameters["binary_data_size"].(float64))
	if out.Data != nil || size != len(raw)-n {
		t.Fatalf("text_output %+v with %d binary bytes", out, len(raw)-n)
	}
	if got := raw[n:]; !bytes.Equal(got, bytesElems(want)) {
		t.Fatalf("binary text_output %q, want %q", got, bytesElems(want))
	}
	if nin := resp.output(t, "num_input_tokens"); nin.Data == nil {
		t.Fatalf("num_input_tokens should be JSON: %+v", nin)
	}

	// binary_data_output: every output binary.
	body, _ = json.Marshal(map[string]any{"parameters": map[string]any{"binary_data_output": true, "max_tokens": 10, "temperature": 0}, "inputs": []any{textInput("Once upon a time")}})
	code, h, raw = s.v2Do(t, "POST", "/v2/models/stories260K/infer", body, nil)
	n, _ = strconv.Atoi(h.Get("Inference-Header-Content-Length"))
	if code != 200 || n == 0 || !bytes.Equal(raw[n:], bytesElems(want)) {
		t.Fatalf("binary_data_output: %d %q", code, raw)
	}

	// The raw binary request: header length 0, the body is the one input.
	code, h, raw = s.v2Do(t, "POST", "/v2/models/stories260K/infer", []byte("Once upon a time"), map[string]string{"Inference-Header-Content-Length": "0"})
	n, _ = strconv.Atoi(h.Get("Inference-Header-Content-Length"))
	if code != 200 || n == 0 || h.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("raw binary request: %d %v %q", code, h, raw)
	}
}

// TestV2BadInput: each bad request is a 400 or 404 with a message, never
// a 500 or a hang.
func TestV2BadInput(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	good := bytesElems("Once upon a time")
	hdrBody := func(header string, data []byte) ([]byte, map[string]string) {
		b, h := binaryBody(t, json.RawMessage(header), data)
		return b, h
	}
	truncBody, truncHdr := hdrBody(`{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":40}}]}`, good)
	extraBody, extraHdr := hdrBody(`{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]},{"name":"max_tokens","datatype":"INT32","shape":[1],"parameters":{"binary_data_size":4}}]}`, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	badElem, badElemHdr := hdrBody(`{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]}`, []byte{9, 0, 0, 0, 'a', 'b'})
	cases := []struct {
		name, path string
		body       string
		raw        []byte
		hdr        map[string]string
		code       int
		want       string
	}{
		{name: "not JSON", body: `{"inputs":`, code: 400, want: "JSON"},
		{name: "no inputs", body: `{"inputs":[]}`, code: 400, want: "inputs"},
		{name: "shape and data length differ", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[2],"data":["a"]}]}`, code: 400, want: "2 elements"},
		{name: "nested data of the wrong size", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[2,2],"data":[["a","b"],["c"]]}]}`, code: 400, want: "elements"},
		{name: "negative dim", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[-1],"data":["a"]}]}`, code: 400, want: "negative"},
		{name: "huge shape", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[4294967296,4294967296],"data":["a"]}]}`, code: 400, want: "elements"},
		{name: "wrong datatype for text_input", body: `{"inputs":[{"name":"text_input","datatype":"INT32","shape":[1],"data":[1]}]}`, code: 400, want: "BYTES"},
		{name: "unknown datatype", body: `{"inputs":[{"name":"text_input","datatype":"STRING","shape":[1],"data":["a"]}]}`, code: 400, want: "datatype"},
		{name: "data not of the datatype", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]},{"name":"max_tokens","datatype":"INT32","shape":[1],"data":[1.5]}]}`, code: 400, want: "INT32"},
		{name: "UINT8 overflow", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]},{"name":"max_tokens","datatype":"UINT8","shape":[1],"data":[300]}]}`, code: 400, want: "UINT8"},
		{name: "wrong datatype for temperature", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]},{"name":"temperature","datatype":"BYTES","shape":[1],"data":["hot"]}]}`, code: 400, want: "temperature"},
		{name: "unknown input", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]},{"name":"image","datatype":"FP32","shape":[1],"data":[1]}]}`, code: 400, want: "image"},
		{name: "missing text_input", body: `{"inputs":[{"name":"max_tokens","datatype":"INT32","shape":[1],"data":[1]}]}`, code: 400, want: "text_input"},
		{name: "unknown output", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]}],"outputs":[{"name":"logits"}]}`, code: 400, want: "logits"},
		{name: "no data", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1]}]}`, code: 400, want: "no data"},
		{name: "temperature out of range", body: `{"parameters":{"temperature":-1},"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]}]}`, code: 400, want: "temperature"},
		{name: "max_tokens zero", body: `{"parameters":{"max_tokens":0},"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]}]}`, code: 400, want: "max_tokens"},
		{name: "max_tokens beyond the context", body: `{"parameters":{"max_tokens":100000},"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]}]}`, code: 400, want: "context"},
		{name: "stream on infer", body: `{"parameters":{"stream":true},"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]}]}`, code: 400, want: "generate_stream"},
		{name: "empty prompt", body: `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":[""]}]}`, code: 400, want: "empty"},
		{name: "header length not a number", raw: good, hdr: map[string]string{"Inference-Header-Content-Length": "x"}, code: 400, want: "Inference-Header-Content-Length"},
		{name: "header length beyond the body", raw: good, hdr: map[string]string{"Inference-Header-Content-Length": "1000"}, code: 400, want: "Inference-Header-Content-Length"},
		{name: "header cut inside the JSON", raw: []byte(`{"inputs":[]}`), hdr: map[string]string{"Inference-Header-Content-Length": "5"}, code: 400, want: "JSON"},
		{name: "truncated binary body", raw: truncBody, hdr: truncHdr, code: 400, want: "truncated"},
		{name: "binary data left over", raw: extraBody, hdr: extraHdr, code: 400, want: "add up"},
		{name: "BYTES element cut", raw: badElem, hdr: badElemHdr, code: 400, want: "bytes"},
		{name: "generate without text_input", path: "/v2/models/stories260K/generate", body: `{"parameters":{}}`, code: 400, want: "text_input"},
		{name: "generate with text_input a number", path: "/v2/models/stories260K/generate", body: `{"text_input":1}`, code: 400, want: "text_input"},
		{name: "generate with top_p out of range", path: "/v2/models/stories260K/generate", body: `{"text_input":"a","parameters":{"top_p":2}}`, code: 400, want: "top_p"},
		{name: "generate with parameters an array", path: "/v2/models/stories260K/generate", body: `{"text_input":"a","parameters":[1]}`, code: 400, want: "parameters"},
		{name: "generate_stream with a bad parameter", path: "/v2/models/stories260K/generate_stream", body: `{"text_input":"a","max_tokens":"many"}`, code: 400, want: "max_tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			if path == "" {
				path = "/v2/models/stories260K/infer"
			}
			b := c.raw
			if b == nil {
				b = []byte(c.body)
			}
			code, _, raw := s.v2Do(t, "POST", path, b, c.hdr)
			if code != c.code {
				t.Fatalf("%d %s, want %d", code, raw, c.code)
			}
			if msg := v2Error(t, raw); !strings.Contains(msg, c.want) {
				t.Fatalf("message %q does not mention %q", msg, c.want)
			}
		})
	}
}

func TestV2Generate(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ref := stories260k.ReferenceGreedy()
	text := s.v2Generate(t, ref.Prompt, 20)
	if !strings.HasPrefix(ref.GeneratedText, text) || text == "" {
		t.Fatalf("generate %q is not a prefix of the reference %q", text, ref.GeneratedText)
	}

	// Details: finish_reason and one logprob per token.
	b, _ := json.Marshal(map[string]any{"id": "g1", "text_input": ref.Prompt, "max_tokens": 5, "parameters": map[string]any{"temperature": 0, "details": true}})
	code, _, raw := s.v2Do(t, "POST", "/v2/models/stories260K/versions/1/generate", b, nil)
	var resp struct {
		ID, ModelName, ModelVersion, TextOutput string
		Details                                 struct {
			FinishReason string `json:"finish_reason"`
			Logprobs     []struct {
				ID      int32   `json:"id"`
				Text    string  `json:"text"`
				Logprob float64 `json:"logprob"`
				Special bool    `json:"special"`
			} `json:"logprobs"`
		}
	}
	if code != 200 || json.Unmarshal(raw, &resp) != nil {
		t.Fatalf("generate details: %d %s", code, raw)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if m["id"] != "g1" || m["model_name"] != "stories260K" || m["model_version"] != "1" ||
		resp.Details.FinishReason != "length" || len(resp.Details.Logprobs) != 5 {
		t.Fatalf("generate details: %s", raw)
	}
	for i, tok := range resp.Details.Logprobs {
		if tok.ID != ref.GeneratedTokens[i] || tok.Logprob > 0 || tok.Special {
			t.Fatalf("token %d: %+v, want id %d", i, tok, ref.GeneratedTokens[i])
		}
	}

	// A stop string inside the greedy text ends it there.
	stop := strings.Fields(text)[2]
	b, _ = json.Marshal(map[string]any{"text_input": ref.Prompt, "parameters": map[string]any{"temperature": 0, "max_tokens": 20, "stop": []string{stop}, "details": true}})
	code, _, raw = s.v2Do(t, "POST", "/v2/models/stories260K/generate", b, nil)
	_ = json.Unmarshal(raw, &m)
	if code != 200 || m["text_output"] != text[:strings.Index(text, stop)] || m["details"].(map[string]any)["finish_reason"] != "stop_sequence" {
		t.Fatalf("generate with stop %q: %d %s", stop, code, raw)
	}
}

func TestV2GenerateStream(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	want := s.v2Generate(t, "Once upon a time", 20)
	events := s.v2GenerateStream(t, context.Background(), map[string]any{"id": "s1", "text_input": "Once upon a time", "parameters": map[string]any{"max_tokens": 20, "temperature": 0, "details": true}})
	var got strings.Builder
	for i, ev := range events {
		if ev["id"] != "s1" || ev["model_name"] != "stories260K" || ev["model_version"] != "1" {
			t.Fatalf("event %d: %v", i, ev)
		}
		got.WriteString(ev["text_output"].(string))
		d := ev["details"].(map[string]any)
		if fr, ok := d["finish_reason"]; ok != (i == len(events)-1) || (ok && fr != "length") {
			t.Fatalf("event %d of %d: details %v", i, len(events), d)
		}
	}
	if got.String() != want || len(events) != 20 {
		t.Fatalf("%d deltas concatenate to %q, want %q in 20", len(events), got.String(), want)
	}
}

// TestV2GenerateStreamCancel: a client that goes away frees its sequence.
func TestV2GenerateStreamCancel(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{MaxModelLen: 512})
	ctx, cancel := context.WithCancel(context.Background())
	b, _ := json.Marshal(map[string]any{"text_input": "Once upon a time", "parameters": map[string]any{"max_tokens": 400, "ignore_eos": true}})
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/v2/models/stories260K/generate_stream", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no first event")
	}
	s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 1 })
	cancel()
	resp.Body.Close()
	s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 0 })
}
