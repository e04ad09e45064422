package anthropic

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

// mediaHandler mounts the Messages routes over the models with opts.
func mediaHandler(opts openai.Options, models ...openai.Model) http.Handler {
	r := chi.NewRouter()
	Mount(r, openai.New(openaitest.NewBackend(models...), opts), Options{})
	return r
}

// TestMediaPrompt checks that the Messages API's image blocks reach PrepareMedia as
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
		{"anthropic base64 image, merged turns", "/v1/messages",
			`{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + openaitest.B64(openaitest.PNG) + `"}}]},` +
				`{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"` + openaitest.B64(openaitest.JPEG) + `"}},{"type":"text","text":"twice"}]}]}`,
			[]want{{media.Image, openaitest.PNG, "messages[0].content[1]"}, {media.Image, openaitest.JPEG, "messages[1].content[0]"}}, "look\n" + media.Marker + "\n" + media.Marker + "\ntwice"},
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

// TestMessagesMediaErrors checks the Messages API's image errors: each
// names the block's field in Anthropic's message.
func TestMessagesMediaErrors(t *testing.T) {
	img := func(source string) string {
		return `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image","source":` + source + `}]}]}`
	}
	tests := []struct{ name, body, msg string }{
		{"no source", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, "messages[0].content[0].source: Field required"},
		{"media_type not an image", img(`{"type":"base64","media_type":"text/plain","data":"` + openaitest.B64(openaitest.PNG) + `"}`), "messages[0].content[1].source.media_type"},
		{"bytes not the media_type", img(`{"type":"base64","media_type":"image/jpeg","data":"` + openaitest.B64(openaitest.PNG) + `"}`), "messages[0].content[1].source.data: the data URL declares image/jpeg but the data is a PNG image"},
		{"gif", img(`{"type":"base64","media_type":"image/gif","data":"` + openaitest.B64(openaitest.GIF) + `"}`), "messages[0].content[1].source.data"},
		{"bad base64", img(`{"type":"base64","media_type":"image/png","data":"%%%"}`), "messages[0].content[1].source.data is not valid base64"},
		{"file source", img(`{"type":"file","file_id":"f"}`), "messages[0].content[1].source.type"},
		{"url not allowed", img(`{"type":"url","url":"https://example.com/a.png"}`), "messages[0].content[1].source.url: this server fetches no image URLs"},
		{"image from the assistant", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + openaitest.B64(openaitest.PNG) + `"}}]}]}`, "messages[1].content[0]: image blocks are accepted only in a user message's content"},
		{"marker in text", `{"model":"test-model","max_tokens":5,"system":"s","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text","text":"` + media.Marker + `"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + openaitest.B64(openaitest.PNG) + `"}}]}]}`, "messages[2].content[0].text holds the text"},
		{"marker in system", `{"model":"test-model","max_tokens":5,"system":"` + media.Marker + `","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + openaitest.B64(openaitest.PNG) + `"}}]}]}`, "system holds the text"},
		{"image in system", `{"model":"test-model","max_tokens":5,"system":[{"type":"image","source":{}}],"messages":[{"role":"user","content":"x"}]}`, "system[0]: image blocks are accepted only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewMediaModel(t)
			rec := openaitest.Do(t, mediaHandler(openai.Options{}, m), m.Model, http.MethodPost, "/v1/messages", tt.body)
			var e messagesErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusBadRequest || e.Error.Type != "invalid_request_error" {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if !strings.Contains(e.Error.Message, tt.msg) {
				t.Errorf("message %q, want %q", e.Error.Message, tt.msg)
			}
		})
	}
}

// TestMediaFetchOtherAPIs fetches the image URL of an Anthropic url
// source.
func TestMediaFetchOtherAPIs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(openaitest.PNG) }))
	defer srv.Close()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	opts := openai.Options{Media: openai.MediaOptions{AllowedDomains: []string{"127.0.0.1"}, Transport: tr}}
	for _, tt := range []struct{ path, body, param string }{
		{"/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"` + srv.URL + `/a.png"}}]}]}`, "messages[0].content[0]"},
	} {
		m := openaitest.NewMediaModel(t)
		rec := openaitest.Do(t, mediaHandler(opts, m), m.Model, http.MethodPost, tt.path, tt.body)
		if rec.Code != http.StatusOK || len(m.Items) != 1 || string(m.Items[0].Data) != string(openaitest.PNG) || m.Items[0].Param != tt.param {
			t.Errorf("%s: status %d, items %+v: %s", tt.path, rec.Code, m.Items, rec.Body)
		}
	}
}

// TestMediaCountTokens counts a prompt with an image, media positions
// included, without generating.
func TestMediaCountTokens(t *testing.T) {
	for _, tt := range []struct{ path, body string }{
		{"/v1/messages/count_tokens", `{"model":"test-model","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + openaitest.B64(openaitest.PNG) + `"}}]}]}`},
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
