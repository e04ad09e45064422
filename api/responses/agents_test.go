package responses

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/api/responses/store"

	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// outputOf decodes a response and returns its output items.
func outputOf(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var r struct {
		Status string           `json:"status"`
		Output []map[string]any `json:"output"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return r.Output
}

// TestResponsesNamespaceTool: a function of a namespace is offered to the
// model as "<namespace>__<name>" and its call comes back with name and
// namespace apart, in the answer and in the stream.
func TestResponsesNamespaceTool(t *testing.T) {
	m := openaitest.NewModel(t)
	m.MaxLen = 512
	m.Tok = openaitest.NewTokenizer(t, `{% for t in tools %}{{ t.function.name }} {% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}`)
	m.SetScript(openaitest.TextScript(`{"a":`, `1}`))
	h := respHandler(t, m)
	body := `{"model":"test-model","input":"Hi","tools":[{"type":"namespace","name":"mcp","description":"d","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}]},{"type":"web_search"}],"tool_choice":{"type":"function","namespace":"mcp","name":"f"}`
	rec := openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", body+`}`)
	out := outputOf(t, rec.Body.Bytes())
	if rec.Code != http.StatusOK || len(out) != 1 || out[0]["type"] != "function_call" || out[0]["name"] != "f" || out[0]["namespace"] != "mcp" || out[0]["arguments"] != `{"a":1}` {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	prompt := m.Tokenizer().Decode(m.Requests()[0].Prompt)
	if !strings.Contains(prompt, "mcp__f") || strings.Contains(prompt, "web_search") {
		t.Errorf("the prompt offers %q; want mcp__f and no hosted tool", prompt)
	}
	rec = openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", body+`,"stream":true}`)
	if s := rec.Body.String(); !strings.Contains(s, `"name":"f","namespace":"mcp"`) || !strings.Contains(s, "response.function_call_arguments.done") {
		t.Fatalf("stream: %s", s)
	}
}

// TestResponsesCustomToolForced: tool_choice naming a custom tool makes
// the whole answer its input, constrained by its grammar (regex here,
// Lark below), as a custom_tool_call item.
func TestResponsesCustomToolForced(t *testing.T) {
	m := openaitest.NewModel(t)
	m.MaxLen = 512
	m.SetScript(openaitest.TextScript("42"))
	h := respHandler(t, m)
	for _, format := range []string{
		`{"type":"grammar","syntax":"regex","definition":"[0-9]+"}`,
		`{"type":"grammar","syntax":"lark","definition":"start: DIGIT+\n%import common.DIGIT"}`,
	} {
		body := `{"model":"test-model","input":"Hi","tools":[{"type":"custom","name":"calc","format":` + format + `}],"tool_choice":{"type":"custom","name":"calc"}`
		rec := openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", body+`}`)
		out := outputOf(t, rec.Body.Bytes())
		if rec.Code != http.StatusOK || len(out) != 1 || out[0]["type"] != "custom_tool_call" || out[0]["name"] != "calc" || out[0]["input"] != "42" || out[0]["call_id"] == "" {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		reqs := m.Requests()
		if g := reqs[len(reqs)-1].Sampling.Grammar; g == "" {
			t.Errorf("format %s: no grammar reached the sampler", format)
		}
		rec = openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", body+`,"stream":true}`)
		s := rec.Body.String()
		for _, want := range []string{"response.custom_tool_call_input.delta", `"input":"42"`, `"type":"custom_tool_call"`} {
			if !strings.Contains(s, want) {
				t.Fatalf("stream lacks %s: %s", want, s)
			}
		}
	}
}

// TestResponsesAgentInput: an agent's re-sent conversation (Codex with
// store false) renders its namespaced and custom tool calls, their
// outputs, and the reasoning it got back as encrypted_content.
func TestResponsesAgentInput(t *testing.T) {
	items, err := decodeInput(json.RawMessage(`[
		{"role":"user","content":"go"},
		{"type":"reasoning","summary":[],"encrypted_content":"` + encryptReasoning("let me think") + `"},
		{"type":"function_call","call_id":"c1","name":"f","namespace":"mcp","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"ok"},
		{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":"*** Begin Patch"},
		{"type":"custom_tool_call_output","call_id":"c2","output":"done"},
		{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := chatMessagesOf(nil, items, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 {
		t.Fatalf("%d messages: %+v", len(msgs), msgs)
	}
	want := []tokenizer.ToolCall{{ID: "c1", Type: "function", Name: "mcp__f", Arguments: "{}"}, {ID: "c2", Type: "function", Name: "apply_patch", Arguments: `{"input":"*** Begin Patch"}`}}
	if a := msgs[1]; a.Role != "assistant" || a.ReasoningContent != "let me think" || len(a.ToolCalls) != 1 || a.ToolCalls[0] != want[0] {
		t.Fatalf("first assistant turn %+v", a)
	}
	if a := msgs[3]; a.Role != "assistant" || len(a.ToolCalls) != 1 || a.ToolCalls[0] != want[1] {
		t.Fatalf("second assistant turn %+v", a)
	}
	if msgs[2].Role != "tool" || msgs[2].Content != "ok" || msgs[4].Role != "tool" || msgs[4].Content != "done" {
		t.Fatalf("tool turns %+v %+v", msgs[2], msgs[4])
	}
	if decryptReasoning("c29tZXRoaW5nIGVsc2U=") != "" {
		t.Error("another server's blob was read")
	}
}

// TestResponsesThinkingFillsOutput: thinking cut by max_output_tokens
// gives a reasoning item and no empty message, in the answer and the
// stream; with include reasoning.encrypted_content the item carries it.
func TestResponsesThinkingFillsOutput(t *testing.T) {
	fm := openaitest.NewModel(t)
	fm.MaxLen = 256
	fm.SetScript(openaitest.ThinkScript("<think>a b c"))
	h := respHandler(t, &openaitest.ReasoningModel{Model: fm, Parser: tokenizer.ReasoningQwen3})
	body := `{"model":"test-model","input":"Hi","max_output_tokens":4,"include":["reasoning.encrypted_content"]`
	rec := openaitest.Do(t, h, fm, http.MethodPost, "/v1/responses", body+`}`)
	out := outputOf(t, rec.Body.Bytes())
	if len(out) != 1 || out[0]["type"] != "reasoning" || !strings.Contains(rec.Body.String(), `"status":"incomplete"`) {
		t.Fatalf("output %s", rec.Body)
	}
	if enc, _ := out[0]["encrypted_content"].(string); decryptReasoning(enc) == "" {
		t.Errorf("encrypted_content %q does not hold the reasoning", enc)
	}
	rec = openaitest.Do(t, h, fm, http.MethodPost, "/v1/responses", body+`,"stream":true}`)
	if s := rec.Body.String(); strings.Contains(s, `"type":"message"`) || !strings.Contains(s, "response.incomplete") {
		t.Fatalf("stream has a message item or no response.incomplete: %s", s)
	}
}

// TestResponsesLogprobs: include message.output_text.logprobs with
// top_logprobs fills output_text's logprobs.
func TestResponsesLogprobs(t *testing.T) {
	m := openaitest.NewModel(t)
	m.SetScript(openaitest.LogprobScript)
	h := respHandler(t, m)
	rec := openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi","include":["message.output_text.logprobs"],"top_logprobs":2}`)
	var r struct {
		Output []struct {
			Content []struct {
				Logprobs []struct {
					Token       string `json:"token"`
					TopLogprobs []any  `json:"top_logprobs"`
				} `json:"logprobs"`
			} `json:"content"`
		} `json:"output"`
		TopLogprobs int `json:"top_logprobs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || len(r.Output) != 1 {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if lps := r.Output[0].Content[0].Logprobs; len(lps) == 0 || lps[0].Token == "" || r.TopLogprobs != 2 {
		t.Fatalf("logprobs %s", rec.Body)
	}
	if got := m.Requests()[0].Sampling; !got.Logprobs || got.TopLogprobs != 2 {
		t.Errorf("the sampler was asked for %+v, want logprobs with 2 alternatives", got)
	}
	// Streamed: each output_text delta carries its tokens' logprobs.
	rec = openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi","include":["message.output_text.logprobs"],"top_logprobs":2,"stream":true}`)
	var deltas int
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !strings.Contains(data, `"type":"response.output_text.delta"`) {
			continue
		}
		var ev struct {
			Logprobs []struct {
				Token string `json:"token"`
			} `json:"logprobs"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || len(ev.Logprobs) == 0 || ev.Logprobs[0].Token == "" {
			t.Fatalf("delta without logprobs: %s", data)
		}
		deltas++
	}
	if deltas == 0 || !strings.Contains(rec.Body.String(), `"top_logprobs":[{`) {
		t.Fatalf("stream: %s", rec.Body)
	}
}

// TestResponsesTruncationAuto: a conversation too long for the context
// is a 400, unless truncation is "auto": then its oldest items (but the
// developer message) are dropped until it fits.
func TestResponsesTruncationAuto(t *testing.T) {
	m := openaitest.NewModel(t)
	m.MaxLen = 96
	h := respHandler(t, m)
	var items []string
	items = append(items, `{"role":"developer","content":"Be brief."}`)
	for i := range 12 {
		items = append(items, `{"role":"user","content":"Hello world hello world `+strings.Repeat("x", i)+`"}`, `{"role":"assistant","content":"Hello"}`)
	}
	items = append(items, `{"role":"user","content":"last"}`)
	body := `{"model":"test-model","max_output_tokens":4,"input":[` + strings.Join(items, ",") + `]`
	if rec := openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", body+`}`); rec.Code != http.StatusBadRequest {
		t.Fatalf("without truncation: %d %s", rec.Code, rec.Body)
	}
	rec := openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", body+`,"truncation":"auto"}`)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"truncation":"auto"`) {
		t.Fatalf("with truncation auto: %d %s", rec.Code, rec.Body)
	}
	reqs := m.Requests()
	prompt := m.Tokenizer().Decode(reqs[len(reqs)-1].Prompt)
	if !strings.Contains(prompt, "Be brief.") || !strings.Contains(prompt, "last") || strings.Contains(prompt, "world hello world \n") {
		t.Errorf("truncated prompt %q", prompt)
	}
	if n := len(reqs[len(reqs)-1].Prompt); n+4 > 96 || n+4 < 96-40 {
		t.Errorf("truncated prompt of %d tokens; want it to fill most of the 96-token context", n)
	}
	// The newest item always stays: when it alone (with the developer
	// message) does not fit, the answer is the too-long 400, not an
	// empty input.
	long := `{"model":"test-model","max_output_tokens":4,"truncation":"auto","input":[{"role":"user","content":"hi"},{"role":"user","content":"` + strings.Repeat("word ", 200) + `"}]}`
	rec = openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", long)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "context_length_exceeded") {
		t.Fatalf("newest item too long with truncation auto: %d %s", rec.Code, rec.Body)
	}
}

// bgHandler is respHandler with the handler itself, for tests that wait
// on a background response's end.
func bgHandler(t *testing.T, m openai.Model) (*handler, http.Handler) {
	t.Helper()
	st, err := store.Open(store.Config{Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	h := newHandler(testServer(func(*http.Request) string { n++; return "bg" + strings.Repeat("x", n-1) }, m), Options{Store: st})
	r := chi.NewRouter()
	r.Post("/v1/responses", h.createResponse)
	r.Get("/v1/responses/{id}", h.getResponse)
	r.Post("/v1/responses/{id}/cancel", h.cancelResponse)
	return h, r
}

// waitBackground waits until background response id has stored its end.
func waitBackground(t *testing.T, h *handler, id string) {
	t.Helper()
	if run, ok := h.background(id); ok {
		<-run.done
	}
}

// TestResponsesCancelAfterEnd: a cancel that comes after the answer ended
// answers the completed response, as GET does.
func TestResponsesCancelAfterEnd(t *testing.T) {
	m := openaitest.NewModel(t)
	h, srv := bgHandler(t, m)
	id := decodeBody(t, openaitest.Do(t, srv, nil, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi","background":true}`).Body.Bytes())["id"].(string)
	waitBackground(t, h, id)
	c := decodeBody(t, openaitest.Do(t, srv, nil, http.MethodPost, "/v1/responses/"+id+"/cancel", "").Body.Bytes())
	g := decodeBody(t, openaitest.Do(t, srv, nil, http.MethodGet, "/v1/responses/"+id, "").Body.Bytes())
	if c["status"] != "completed" || g["status"] != "completed" {
		t.Fatalf("cancel answered %v, GET %v; want completed for both", c["status"], g["status"])
	}
	m.Wait()
}

// TestResponsesCancelRace: cancel racing the end of the answer gives one
// answer: cancel's is what GET says, whichever won. Run with -count=20
// under load.
func TestResponsesCancelRace(t *testing.T) {
	m := openaitest.NewModel(t)
	h, srv := bgHandler(t, m)
	id := decodeBody(t, openaitest.Do(t, srv, nil, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi","background":true}`).Body.Bytes())["id"].(string)
	c := decodeBody(t, openaitest.Do(t, srv, nil, http.MethodPost, "/v1/responses/"+id+"/cancel", "").Body.Bytes())
	g := decodeBody(t, openaitest.Do(t, srv, nil, http.MethodGet, "/v1/responses/"+id, "").Body.Bytes())
	if c["status"] != g["status"] || (c["status"] != "cancelled" && c["status"] != "completed") {
		t.Fatalf("cancel answered %v, GET %v", c["status"], g["status"])
	}
	waitBackground(t, h, id)
	m.Wait()
}

// firstWrite is a ResponseWriter that says when the handler first wrote.
type firstWrite struct {
	*httptest.ResponseRecorder
	once  sync.Once
	wrote chan struct{}
}

func (w *firstWrite) Write(b []byte) (int, error) {
	n, err := w.ResponseRecorder.Write(b)
	w.once.Do(func() { close(w.wrote) })
	return n, err
}

// TestResponsesCancelStream: a background stream cancelled while it runs
// ends, and cancel, GET and the stream agree it was cancelled.
func TestResponsesCancelStream(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Hold = true
	m.Script = func(*scheduler.Request) []openaitest.Batch {
		return []openaitest.Batch{{Outs: []scheduler.Output{{Tokens: openaitest.Tokens("Hel")}}}}
	}
	h, srv := bgHandler(t, m)
	w := &firstWrite{ResponseRecorder: httptest.NewRecorder(), wrote: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(`{"model":"test-model","input":"Hi","background":true,"stream":true}`)))
	}()
	<-w.wrote // the run is registered and streaming
	c := decodeBody(t, openaitest.Do(t, srv, nil, http.MethodPost, "/v1/responses/resp_bg/cancel", "").Body.Bytes())
	g := decodeBody(t, openaitest.Do(t, srv, nil, http.MethodGet, "/v1/responses/resp_bg", "").Body.Bytes())
	<-served
	if c["status"] != "cancelled" || g["status"] != "cancelled" {
		t.Fatalf("cancel answered %v, GET %v; want cancelled", c["status"], g["status"])
	}
	if body := w.Body.String(); strings.Contains(body, "response.completed") || !strings.Contains(body, "response.created") {
		t.Fatalf("stream: %s", body)
	}
	waitBackground(t, h, "resp_bg")
	m.Wait()
}

// TestResponsesBackgroundStream: background with stream streams the
// events as a plain stream would, and GET ?stream=true&starting_after=N
// gives the same events from N+1 on, after the end too.
func TestResponsesBackgroundStream(t *testing.T) {
	m := openaitest.NewModel(t)
	m.SetScript(openaitest.StreamScript)
	h, srv := bgHandler(t, m)
	rec := openaitest.Do(t, srv, nil, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi","background":true,"stream":true}`)
	events := strings.SplitAfter(rec.Body.String(), "\n\n")
	events = events[:len(events)-1]
	if len(events) < 6 || !strings.Contains(events[0], "response.created") || !strings.Contains(events[len(events)-1], "response.completed") {
		t.Fatalf("background stream: %s", rec.Body)
	}
	waitBackground(t, h, "resp_bg")
	again := openaitest.Do(t, srv, nil, http.MethodGet, "/v1/responses/resp_bg?stream=true&starting_after=2", "")
	if want := strings.Join(events[3:], ""); again.Body.String() != want {
		t.Fatalf("resumed after 2:\n%s\nwant\n%s", again.Body, want)
	}
	if g := decodeBody(t, openaitest.Do(t, srv, nil, http.MethodGet, "/v1/responses/resp_bg", "").Body.Bytes()); g["status"] != "completed" || g["background"] != true {
		t.Fatalf("stored %v", g)
	}
	if bad := openaitest.Do(t, srv, nil, http.MethodGet, "/v1/responses/resp_bg?stream=true&starting_after=x", ""); bad.Code != http.StatusBadRequest {
		t.Fatalf("starting_after=x: %d", bad.Code)
	}
	m.Wait()
}

// TestResponsesPromptCacheKey: prompt_cache_key is the scheduler
// request's routing key (a head routes on it); client_metadata is
// accepted.
func TestResponsesPromptCacheKey(t *testing.T) {
	m := openaitest.NewModel(t)
	h := respHandler(t, m)
	rec := openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi","prompt_cache_key":"session-1","client_metadata":{"turn_id":"t"}}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if got := m.Requests()[0].RouteKey; got != "session-1" {
		t.Errorf("RouteKey %q, want session-1", got)
	}
}
