package responses

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/media"
)

// mediaHandler mounts the Responses routes over the models with opts.
func mediaHandler(opts openai.Options, models ...openai.Model) http.Handler {
	r := chi.NewRouter()
	Mount(r, openai.New(openaitest.NewBackend(models...), opts), Options{})
	return r
}

// errorBody decodes an OpenAI error response and checks that it has
// exactly the four members.
func errorBody(t *testing.T, body []byte) errorInfo {
	t.Helper()
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("error body is not JSON: %v\n%s", err, body)
	}
	if len(raw) != 1 || raw["error"] == nil {
		t.Fatalf("error body must be {\"error\":{...}}: %s", body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Errorf("error object lacks %q: %s", k, body)
		}
	}
	var e errorResponse
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	return e.Error
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// errorInfo is OpenAI's error object, as the Responses API writes it.
type errorInfo struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// TestMediaPrompt checks that the Responses API's media parts reach PrepareMedia as
// items in prompt order, named by their field, with media.Marker in their
// place in the rendered prompt, and that the tokens and spans it returns
// are the request's prompt.
func TestMediaPrompt(t *testing.T) {
	type want struct {
		kind  media.Kind
		data  []byte
		param string
	}
	tests := []struct {
		name, path, body string
		items            []want
		// in is a piece the rendered prompt must contain.
		in string
	}{
		{"responses input_image", "/v1/responses",
			`{"model":"test-model","instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"what"},{"type":"input_image","image_url":"` + openaitest.DataURL("image/png", openaitest.PNG) + `","detail":"high"}]}]}`,
			[]want{{media.Image, openaitest.PNG, "input[0].content[1]"}}, "what\n" + media.Marker},
		{"responses input_audio", "/v1/responses",
			`{"model":"test-model","input":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"` + openaitest.B64(openaitest.MP3) + `","format":"mp3"}},{"type":"input_text","text":"transcribe"}]}]}`,
			[]want{{media.Audio, openaitest.MP3, "input[0].content[0]"}}, media.Marker + "\ntranscribe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewMediaModel(t)
			rec := openaitest.Do(t, mediaHandler(openai.Options{}, m), m.Model, http.MethodPost, tt.path, tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if m.PrepareCalls != 1 {
				t.Fatalf("PrepareMedia called %d times", m.PrepareCalls)
			}
			if !strings.Contains(m.Prompt, tt.in) || strings.Count(m.Prompt, media.Marker) != len(tt.items) {
				t.Errorf("prompt %q: want %d markers and %q", m.Prompt, len(tt.items), tt.in)
			}
			if !m.BOS {
				t.Error("addSpecial = false; the ChatML template writes no BOS, so the model must add it")
			}
			if len(m.Items) != len(tt.items) {
				t.Fatalf("items %+v, want %+v", m.Items, tt.items)
			}
			for i, w := range tt.items {
				if it := m.Items[i]; it.Kind != w.kind || string(it.Data) != string(w.data) || it.Param != w.param {
					t.Errorf("item %d: %s %q %s, want %s %q %s", i, it.Kind, it.Data, it.Param, w.kind, w.data, w.param)
				}
			}
			reqs := m.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests submitted", len(reqs))
			}
			if !slices.Equal(reqs[0].Prompt, m.Toks) || len(reqs[0].Media) != len(tt.items) {
				t.Errorf("request prompt %v media %v, want PrepareMedia's %v %v", reqs[0].Prompt, reqs[0].Media, m.Toks, m.Spans)
			}
			for i, s := range reqs[0].Media {
				if s.Offset != m.Spans[i].Offset || s.Rows != openaitest.MediaRows || reqs[0].Prompt[s.Offset] >= 0 {
					t.Errorf("span %d: %+v", i, s)
				}
			}
		})
	}
}

// TestMediaErrors checks that every bad media input of a Responses request is a 400 whose param
// and message name the field at fault.
func TestMediaErrors(t *testing.T) {
	tests := []struct {
		name, path, body string
		opts             openai.Options
		// model changes the served model.
		model      func(*openaitest.MediaModel) openai.Model
		param, msg string
	}{
		{name: "responses data without a colon", path: "/v1/responses", body: `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_image","image_url":"data"}]}]}`,
			param: "input[0].content[0].image_url", msg: "must be base64"},
		{name: "responses bytes mismatch", path: "/v1/responses",
			body:  `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_image","image_url":"` + openaitest.DataURL("image/webp", openaitest.PNG) + `"}]}]}`,
			param: "input[0].content[0].image_url", msg: "declares image/webp but the data is a PNG image"},
		{name: "responses image in a function output", path: "/v1/responses",
			body:  `{"model":"test-model","input":[{"type":"function_call","call_id":"c","name":"f"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"` + openaitest.DataURL("image/png", openaitest.PNG) + `"}]}]}`,
			param: "input[1].output[0].type", msg: "input_text parts only"},
		{name: "responses marker in text", path: "/v1/responses",
			body:  `{"model":"test-model","instructions":"x","input":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"input_text","text":"a ` + media.Marker + `"},{"type":"input_image","image_url":"` + openaitest.DataURL("image/png", openaitest.PNG) + `"}]}]}`,
			param: "input[1].content[0]", msg: "Remove it"},
		{name: "responses marker in instructions", path: "/v1/responses",
			body:  `{"model":"test-model","instructions":"` + media.Marker + `","input":[{"role":"user","content":[{"type":"input_image","image_url":"` + openaitest.DataURL("image/png", openaitest.PNG) + `"}]}]}`,
			param: "instructions", msg: "Remove it"},
		{name: "responses audio format", path: "/v1/responses",
			body:  `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"` + openaitest.B64(openaitest.WAV) + `","format":"flac"}}]}]}`,
			param: "input[0].content[0].input_audio.format", msg: "'wav' or 'mp3'"},
		{name: "responses audio data mismatch", path: "/v1/responses",
			body:  `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"` + openaitest.B64(openaitest.PNG) + `","format":"wav"}}]}]}`,
			param: "input[0].content[0].input_audio.data", msg: "the format is wav but the data is a PNG image"},
		{name: "responses file_id", path: "/v1/responses",
			body:  `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`,
			param: "input[0].content[0].file_id", msg: "no Files API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewMediaModel(t)
			var served openai.Model = m
			if tt.model != nil {
				served = tt.model(m)
			}
			path := tt.path
			if path == "" {
				path = "/v1/chat/completions"
			}
			rec := openaitest.Do(t, mediaHandler(tt.opts, served), m.Model, http.MethodPost, path, tt.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			e := errorBody(t, rec.Body.Bytes())
			if str(e.Param) != tt.param || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("param %q message %q, want %q and %q", str(e.Param), e.Message, tt.param, tt.msg)
			}
			if len(m.Requests()) != 0 {
				t.Error("a request was submitted")
			}
		})
	}
}

// TestMediaFetchOtherAPIs fetches the image URL of a Responses
// input_image.
func TestMediaFetchOtherAPIs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(openaitest.PNG) }))
	defer srv.Close()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	opts := openai.Options{Media: openai.MediaOptions{AllowedDomains: []string{"127.0.0.1"}, Transport: tr}}
	for _, tt := range []struct{ path, body, param string }{
		{"/v1/responses", `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_image","image_url":"` + srv.URL + `/a.png"}]}]}`, "input[0].content[0]"},
	} {
		m := openaitest.NewMediaModel(t)
		rec := openaitest.Do(t, mediaHandler(opts, m), m.Model, http.MethodPost, tt.path, tt.body)
		if rec.Code != http.StatusOK || len(m.Items) != 1 || string(m.Items[0].Data) != string(openaitest.PNG) || m.Items[0].Param != tt.param {
			t.Errorf("%s: status %d, items %+v: %s", tt.path, rec.Code, m.Items, rec.Body)
		}
	}
}

// TestMediaConversation continues a stored response whose input had an
// image: the image goes to the model again, named previous_response_id.
func TestMediaConversation(t *testing.T) {
	m := openaitest.NewMediaModel(t)
	h := mediaHandler(openai.Options{}, m)
	rec := openaitest.Do(t, h, m.Model, http.MethodPost, "/v1/responses",
		`{"model":"test-model","input":[{"role":"user","content":[{"type":"input_image","image_url":"`+openaitest.DataURL("image/png", openaitest.PNG)+`","detail":"low"},{"type":"input_text","text":"what?"}]}]}`)
	var first struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &first); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	items := openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+first.ID+"/input_items", "")
	if !strings.Contains(items.Body.String(), `{"detail":"low","image_url":"data:image/png;base64,`) || strings.Contains(items.Body.String(), `"text":""`) {
		t.Errorf("input items: %s", items.Body)
	}
	rec = openaitest.Do(t, h, m.Model, http.MethodPost, "/v1/responses", `{"model":"test-model","previous_response_id":"`+first.ID+`","input":"and now?"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if len(m.Items) != 1 || m.Items[0].Param != "previous_response_id" || string(m.Items[0].Data) != string(openaitest.PNG) ||
		!strings.Contains(m.Prompt, media.Marker+"\nwhat?") || !strings.Contains(m.Prompt, "and now?") {
		t.Errorf("PrepareMedia got %q, %+v", m.Prompt, m.Items)
	}
}

// TestMediaCountTokens counts a prompt with an image, media positions
// included, without generating.
func TestMediaCountTokens(t *testing.T) {
	for _, tt := range []struct{ path, body string }{
		{"/v1/responses/input_tokens", `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_image","image_url":"` + openaitest.DataURL("image/png", openaitest.PNG) + `"}]}]}`},
	} {
		m := openaitest.NewMediaModel(t)
		rec := openaitest.Do(t, mediaHandler(openai.Options{}, m), m.Model, http.MethodPost, tt.path, tt.body)
		var resp struct {
			InputTokens int `json:"input_tokens"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tt.path, rec.Code, rec.Body)
		}
		if resp.InputTokens != len(m.Toks) || len(m.Items) != 1 || len(m.Requests()) != 0 {
			t.Errorf("%s: input_tokens %d, want %d; items %d", tt.path, resp.InputTokens, len(m.Toks), len(m.Items))
		}
	}
}
