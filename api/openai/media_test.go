package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/media"
)

// mediaHandler mounts the OpenAI routes over the models with opts.
func mediaHandler(opts Options, models ...Model) http.Handler {
	r := chi.NewRouter()
	Mount(r, openaitest.NewBackend(models...), opts)
	return r
}

// chatUser is a chat body whose one user message has the parts.
func chatUser(parts ...string) string {
	return `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`
}

func textPart(s string) string { return fmt.Sprintf(`{"type":"text","text":%q}`, s) }

func imagePartJSON(url string) string {
	return fmt.Sprintf(`{"type":"image_url","image_url":{"url":%q,"detail":"low"}}`, url)
}

func audioPart(data, format string) string {
	return fmt.Sprintf(`{"type":"input_audio","input_audio":{"data":%q,"format":%q}}`, data, format)
}

// TestMediaPrompt checks that chat's media parts reach PrepareMedia as
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
		{"chat image between texts", "/v1/chat/completions",
			chatUser(textPart("a"), imagePartJSON(openaitest.DataURL("image/png", openaitest.PNG)), textPart("b")),
			[]want{{media.Image, openaitest.PNG, "messages[0].content[1]"}}, "user\na\n" + media.Marker + "\nb<|im_end|>"},
		{"chat image_url as a string, jpeg, webp", "/v1/chat/completions",
			chatUser(`{"type":"image_url","image_url":"`+openaitest.DataURL("image/jpeg", openaitest.JPEG)+`"}`, imagePartJSON(openaitest.DataURL("image/webp", openaitest.WebP))),
			[]want{{media.Image, openaitest.JPEG, "messages[0].content[0]"}, {media.Image, openaitest.WebP, "messages[0].content[1]"}}, media.Marker + "\n" + media.Marker},
		{"chat audio wav and mp3", "/v1/chat/completions",
			chatUser(audioPart(openaitest.B64(openaitest.WAV), "wav"), textPart("what is said?"), audioPart(openaitest.B64(openaitest.MP3), "mp3")),
			[]want{{media.Audio, openaitest.WAV, "messages[0].content[0]"}, {media.Audio, openaitest.MP3, "messages[0].content[2]"}}, media.Marker + "\nwhat is said?\n" + media.Marker},
		{"chat media in several messages", "/v1/chat/completions",
			`{"model":"test-model","messages":[{"role":"system","content":"s"},{"role":"user","content":[` + imagePartJSON(openaitest.DataURL("image/png", openaitest.PNG)) + `]},` +
				`{"role":"assistant","content":"ok"},{"role":"user","content":[` + textPart("and") + `,` + imagePartJSON(openaitest.DataURL("image/jpg", openaitest.JPEG)) + `]}]}`,
			[]want{{media.Image, openaitest.PNG, "messages[1].content[0]"}, {media.Image, openaitest.JPEG, "messages[3].content[1]"}}, "user\nand\n" + media.Marker},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewMediaModel(t)
			rec := openaitest.Do(t, mediaHandler(Options{}, m), m.Model, http.MethodPost, tt.path, tt.body)
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
			if tt.path == "/v1/chat/completions" {
				var resp chatCompletion
				if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
					t.Fatal(err)
				}
				if resp.Usage.PromptTokens != len(m.Toks) {
					t.Errorf("prompt_tokens %d, want %d (media positions included)", resp.Usage.PromptTokens, len(m.Toks))
				}
			}
		})
	}
}

// TestMediaErrors checks that every bad media input is a 400 whose param
// and message name the field at fault.
func TestMediaErrors(t *testing.T) {
	png := imagePartJSON(openaitest.DataURL("image/png", openaitest.PNG))
	tests := []struct {
		name, path, body string
		opts             Options
		// model changes the served model.
		model      func(*openaitest.MediaModel) Model
		param, msg string
	}{
		{name: "gif", body: chatUser(imagePartJSON(openaitest.DataURL("image/gif", openaitest.GIF))),
			param: "messages[0].content[0].image_url.url", msg: "PNG, JPEG or WebP"},
		{name: "declared png, bytes jpeg", body: chatUser(textPart("x"), imagePartJSON(openaitest.DataURL("image/png", openaitest.JPEG))),
			param: "messages[0].content[1].image_url.url", msg: "declares image/png but the data is a JPEG image"},
		{name: "declared bmp", body: chatUser(imagePartJSON(openaitest.DataURL("image/bmp", openaitest.PNG))),
			param: "messages[0].content[0].image_url.url", msg: "image/bmp are not supported"},
		{name: "not an image type", body: chatUser(imagePartJSON(openaitest.DataURL("text/plain", openaitest.PNG))),
			param: "messages[0].content[0].image_url.url", msg: "not an image"},
		{name: "not an image", body: chatUser(imagePartJSON(openaitest.DataURL("image/png", []byte("hello there")))),
			param: "messages[0].content[0].image_url.url", msg: "text/plain"},
		{name: "bad base64", body: chatUser(imagePartJSON("data:image/png;base64,!!!!")),
			param: "messages[0].content[0].image_url.url", msg: "not valid base64"},
		{name: "data URL not base64", body: chatUser(imagePartJSON("data:image/png,abc")),
			param: "messages[0].content[0].image_url.url", msg: "must be base64"},
		{name: "data without a colon", body: chatUser(imagePartJSON("dAtA")),
			param: "messages[0].content[0].image_url.url", msg: "must be base64"},
		{name: "ftp URL", body: chatUser(imagePartJSON("ftp://example.com/a.png")),
			param: "messages[0].content[0].image_url.url", msg: "scheme"},
		{name: "no url", body: chatUser(`{"type":"image_url","image_url":{}}`),
			param: "messages[0].content[0].image_url.url", msg: "required"},
		{name: "bad detail", body: chatUser(`{"type":"image_url","image_url":{"url":"` + openaitest.DataURL("image/png", openaitest.PNG) + `","detail":"max"}}`),
			param: "messages[0].content[0].image_url.detail", msg: "auto, low or high"},
		{name: "http URL without allowed domains", body: chatUser(imagePartJSON("https://example.com/a.png")),
			param: "messages[0].content[0].image_url.url", msg: "--allowed-media-domains"},
		{name: "audio format ogg", body: chatUser(audioPart(openaitest.B64(openaitest.WAV), "ogg")),
			param: "messages[0].content[0].input_audio.format", msg: "'wav' or 'mp3'"},
		{name: "audio without data", body: chatUser(`{"type":"input_audio","input_audio":{"format":"wav"}}`),
			param: "messages[0].content[0].input_audio.data", msg: "required"},
		{name: "audio wav holding mp3", body: chatUser(audioPart(openaitest.B64(openaitest.MP3), "wav")),
			param: "messages[0].content[0].input_audio.data", msg: "the format is wav but the data is MP3 audio"},
		{name: "too many", body: chatUser(png, png, textPart("x"), png), opts: Options{Media: MediaOptions{MaxPerPrompt: 2}},
			param: "messages[0].content[3]", msg: "at most 2 are accepted per prompt (--max-media-per-prompt)"},
		{name: "media refused", body: chatUser(png), opts: Options{Media: MediaOptions{MaxPerPrompt: -1}},
			param: "messages[0].content[0]", msg: "takes no images or audio"},
		{name: "too large", body: chatUser(imagePartJSON(openaitest.DataURL("image/png", append(openaitest.PNG, make([]byte, 100)...)))), opts: Options{Media: MediaOptions{MaxBytes: 64}},
			param: "messages[0].content[0].image_url.url", msg: "more than the limit of 64 bytes per image or audio clip (--max-media-bytes)"},
		{name: "audio too large", body: chatUser(audioPart(openaitest.B64(append(openaitest.WAV, make([]byte, 100)...)), "wav")), opts: Options{Media: MediaOptions{MaxBytes: 64}},
			param: "messages[0].content[0].input_audio.data", msg: "--max-media-bytes"},
		{name: "text-only model", body: chatUser(textPart("x"), png), model: func(m *openaitest.MediaModel) Model { return m.Model },
			param: "messages[0].content[1]", msg: "reads text only: the model has no multimodal projector (start it with --mmproj)"},
		{name: "projector without audio", body: chatUser(png, audioPart(openaitest.B64(openaitest.WAV), "wav")),
			model: func(m *openaitest.MediaModel) Model { m.Reads = map[media.Kind]bool{media.Image: true}; return m },
			param: "messages[0].content[1]", msg: "this model's projector does not read audio"},
		{name: "projector not loaded", body: chatUser(png),
			model: func(m *openaitest.MediaModel) Model { m.Reads = nil; return m },
			param: "messages[0].content[0]", msg: "--mmproj"},
		{name: "marker in user text", body: chatUser(textPart("see "+media.Marker), png),
			param: "messages[0].content[0]", msg: "marks where an image or audio clip goes"},
		{name: "marker in a string content", body: `{"model":"test-model","messages":[{"role":"system","content":"` + media.Marker + `"},{"role":"user","content":[` + png + `]}]}`,
			param: "messages[0].content", msg: "Remove it"},
		{name: "template drops the media", body: `{"model":"test-model","messages":[{"role":"user","content":[` + png + `]}],"chat_template":"{% for m in messages %}x{% endfor %}"}`,
			param: "messages", msg: "rendered 0 places for images and audio, not the 1"},
		{name: "marker in the template", body: `{"model":"test-model","messages":[{"role":"user","content":[` + png + `]}],"chat_template":"` + media.Marker + `{% for m in messages %}{{ m.content }}{% endfor %}"}`,
			param: "messages", msg: "rendered 2 places for images and audio, not the 1"},
		{name: "prompt_logprobs", body: `{"model":"test-model","prompt_logprobs":1,"messages":[{"role":"user","content":[` + png + `]}]}`,
			param: "prompt_logprobs", msg: "not supported for prompts with images or audio"},
		{name: "truncation would cut media", body: `{"model":"test-model","truncate_prompt_tokens":2,"messages":[{"role":"user","content":[` + png + `]}]}`,
			param: "truncate_prompt_tokens", msg: "cut into them"},
		{name: "model cannot read the item", body: chatUser(textPart("x"), png),
			model: func(m *openaitest.MediaModel) Model {
				m.Err = &media.Error{Param: "messages[0].content[1]", Err: fmt.Errorf("the image could not be decoded")}
				return m
			},
			param: "messages[0].content[1]", msg: "messages[0].content[1]: the image could not be decoded"},
		{name: "tokenize", path: "/tokenize", body: `{"model":"test-model","messages":[{"role":"user","content":[` + png + `]}]}`,
			param: "messages[0].content[0]", msg: "/tokenize does not take images or audio"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewMediaModel(t)
			var served Model = m
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

// TestMediaBodyLimit checks that a body too large for the limit is a 413
// that says so, not a truncated image, and that the default limit holds
// one item of the most bytes in base64.
func TestMediaBodyLimit(t *testing.T) {
	m := openaitest.NewMediaModel(t)
	body := chatUser(imagePartJSON(openaitest.DataURL("image/png", append(openaitest.PNG, make([]byte, 4000)...))))
	rec := openaitest.Do(t, mediaHandler(Options{MaxBodyBytes: 2000}, m), m.Model, http.MethodPost, "/v1/chat/completions", body)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413: %s", rec.Code, rec.Body)
	}
	if e := errorBody(t, rec.Body.Bytes()); !strings.Contains(e.Message, "limit of 2000 bytes (--max-body-bytes)") {
		t.Errorf("message %q", e.Message)
	}
	if m.PrepareCalls != 0 {
		t.Error("PrepareMedia was called")
	}
	h := newHandler(openaitest.NewBackend[Model](), Options{})
	if want := int64(4*((DefaultMaxMediaBytes+2)/3) + 1<<20); h.maxBody != want || h.maxBody <= DefaultMaxBodyBytes {
		t.Errorf("default body limit %d, want %d", h.maxBody, want)
	}
	if h := newHandler(openaitest.NewBackend[Model](), Options{MaxBodyBytes: 100}); h.maxBody != 100 {
		t.Errorf("--max-body-bytes 100 gave %d", h.maxBody)
	}
}

// TestMediaFetch fetches image URLs from a server on loopback: only from
// the allowed hosts, redirects only to them, within the byte limit and the
// timeout.
func TestMediaFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/a.png", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(openaitest.PNG) })
	mux.HandleFunc("/a.gif", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(openaitest.GIF) })
	mux.HandleFunc("/big.png", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(append(openaitest.PNG, make([]byte, 1000)...))
	})
	mux.HandleFunc("/chunked.png", func(w http.ResponseWriter, _ *http.Request) {
		// No Content-Length: the limit holds while reading.
		_, _ = w.Write(openaitest.PNG)
		w.(http.Flusher).Flush()
		for range 10 {
			_, _ = w.Write(make([]byte, 100))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/slow.png", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/in", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/a.png", http.StatusFound) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	other := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	mux.HandleFunc("/out", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, other+"/a.png", http.StatusFound) })
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	opts := Options{Media: MediaOptions{AllowedDomains: []string{"example.com", "127.0.0.1"}, MaxBytes: 500, FetchTimeout: 200 * time.Millisecond, Transport: tr}}
	const field = "messages[0].content[1].image_url.url"
	tests := []struct {
		name, url string
		opts      *Options
		msg       string // "" for success
	}{
		{name: "allowed", url: srv.URL + "/a.png"},
		{name: "redirect within the allowed hosts", url: srv.URL + "/in"},
		{name: "host not allowed", url: other + "/a.png", msg: `"localhost" is not in --allowed-media-domains`},
		{name: "no allowed domains", url: srv.URL + "/a.png", opts: &Options{Media: MediaOptions{Transport: tr}}, msg: "start the server with --allowed-media-domains"},
		{name: "redirect out", url: srv.URL + "/out", msg: "redirects only to the hosts of --allowed-media-domains"},
		{name: "too large", url: srv.URL + "/big.png", msg: "the limit of 500 bytes"},
		{name: "too large, chunked", url: srv.URL + "/chunked.png", msg: "more than the limit of 500 bytes"},
		{name: "not found", url: srv.URL + "/missing.png", msg: "answered 404 Not Found"},
		{name: "gif", url: srv.URL + "/a.gif", msg: "PNG, JPEG or WebP"},
		{name: "timeout", url: srv.URL + "/slow.png", msg: "did not answer within 200ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			if tt.opts != nil {
				o = *tt.opts
			}
			m := openaitest.NewMediaModel(t)
			rec := openaitest.Do(t, mediaHandler(o, m), m.Model, http.MethodPost, "/v1/chat/completions", chatUser(textPart("x"), imagePartJSON(tt.url)))
			if tt.msg == "" {
				if rec.Code != http.StatusOK || len(m.Items) != 1 || string(m.Items[0].Data) != string(openaitest.PNG) {
					t.Fatalf("status %d, items %v: %s", rec.Code, m.Items, rec.Body)
				}
				return
			}
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			if e := errorBody(t, rec.Body.Bytes()); str(e.Param) != field || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("param %q message %q, want %q", str(e.Param), e.Message, tt.msg)
			}
		})
	}
}

// TestGoOpenAIImage sends an image_url chat request with the go-openai
// client through the real HTTP stack.
func TestGoOpenAIImage(t *testing.T) {
	m := openaitest.NewMediaModel(t)
	srv := httptest.NewServer(mediaHandler(Options{}, m))
	defer srv.Close()
	cfg := goopenai.DefaultConfig("sk-unused")
	cfg.BaseURL = srv.URL + "/v1"
	client := goopenai.NewClientWithConfig(cfg)
	resp, err := client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
		Model: "test-model", MaxCompletionTokens: 20,
		Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, MultiContent: []goopenai.ChatMessagePart{
			{Type: goopenai.ChatMessagePartTypeText, Text: "What is this?"},
			{Type: goopenai.ChatMessagePartTypeImageURL, ImageURL: &goopenai.ChatMessageImageURL{URL: openaitest.DataURL("image/jpeg", openaitest.JPEG), Detail: goopenai.ImageURLDetailLow}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Wait()
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "Hello world!" || resp.Usage.PromptTokens != len(m.Toks) {
		t.Fatalf("response %+v", resp)
	}
	if len(m.Items) != 1 || m.Items[0].Param != "messages[0].content[1]" || string(m.Items[0].Data) != string(openaitest.JPEG) ||
		!strings.Contains(m.Prompt, "What is this?\n"+media.Marker) {
		t.Errorf("PrepareMedia got %q, %+v", m.Prompt, m.Items)
	}
	// A bad image is an *APIError naming the field.
	_, err = client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
		Model: "test-model",
		Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, MultiContent: []goopenai.ChatMessagePart{
			{Type: goopenai.ChatMessagePartTypeImageURL, ImageURL: &goopenai.ChatMessageImageURL{URL: openaitest.DataURL("image/png", openaitest.GIF)}},
		}}},
	})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || apiErr.Param == nil || *apiErr.Param != "messages[0].content[0].image_url.url" {
		t.Fatalf("error %v", err)
	}
}

// TestMediaBOS checks addSpecial against the BOS rule: false when the
// template writes the BOS text itself.
func TestMediaBOS(t *testing.T) {
	m := openaitest.NewMediaModel(t)
	rec := openaitest.Do(t, mediaHandler(Options{}, m), m.Model, http.MethodPost, "/v1/chat/completions",
		`{"model":"test-model","messages":[{"role":"user","content":[`+imagePartJSON(openaitest.DataURL("image/png", openaitest.PNG))+`]}],"chat_template":"{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if m.BOS || !strings.HasSuffix(m.Prompt, media.Marker) || !frontend.StartsWithBOS(m.Tok, m.Prompt) {
		t.Errorf("addSpecial %v for prompt %q", m.BOS, m.Prompt)
	}
}

// TestMediaContextLength checks that the media positions count against
// max_model_len.
func TestMediaContextLength(t *testing.T) {
	m := openaitest.NewMediaModel(t)
	m.MaxLen = 12
	png := imagePartJSON(openaitest.DataURL("image/png", openaitest.PNG))
	rec := openaitest.Do(t, mediaHandler(Options{}, m), m.Model, http.MethodPost, "/v1/chat/completions", chatUser(png, png, png))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if e := errorBody(t, rec.Body.Bytes()); str(e.Code) != "context_length_exceeded" || !strings.Contains(e.Message, fmt.Sprint(len(m.Toks))) {
		t.Errorf("error %+v (prompt of %d tokens)", e, len(m.Toks))
	}
}
