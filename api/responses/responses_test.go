package responses

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/api/responses/store"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// respHandler is the Responses routes over m with a deterministic clock
// and response id.
func respHandler(t *testing.T, m openai.Model) http.Handler {
	t.Helper()
	st, err := store.Open(store.Config{Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	n := 0
	s := testServer(func(*http.Request) string { n++; return "test" + strings.Repeat("x", n-1) }, m)
	Mount(r, s, Options{Store: st})
	return r
}

var itemIDs = regexp.MustCompile(`(:\s*)"(msg|fc|fco|rs|call)_[a-z0-9]+"`)

// normalizeIDs replaces the random item and call ids.
func normalizeIDs(b []byte) []byte {
	return itemIDs.ReplaceAll(b, []byte(`${1}"${2}_ID"`))
}

func TestDecodeInputItems(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []respItem
		param string // error param, "" for success
	}{
		{"string", `"Hi"`, []respItem{{Type: "message", Role: "user", Content: []respContent{{Type: "input_text", Text: "Hi"}}}}, ""},
		{"easy message", `[{"role":"user","content":"Hi"}]`, []respItem{{Type: "message", Role: "user", Content: []respContent{{Type: "input_text", Text: "Hi"}}}}, ""},
		{"parts", `[{"type":"message","role":"developer","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]`,
			[]respItem{{Type: "message", Role: "developer", Content: []respContent{{Type: "input_text", Text: "a"}, {Type: "input_text", Text: "b"}}}}, ""},
		{"assistant output_text", `[{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"x","annotations":[]}]}]`,
			[]respItem{{Type: "message", ID: "msg_1", Role: "assistant", Content: []respContent{{Type: "output_text", Text: "x"}}}}, ""},
		{"assistant string", `[{"role":"assistant","content":"x"}]`, []respItem{{Type: "message", Role: "assistant", Content: []respContent{{Type: "output_text", Text: "x"}}}}, ""},
		{"function_call", `[{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}]`,
			[]respItem{{Type: "function_call", CallID: "c1", Name: "f", Arguments: `{"a":1}`}}, ""},
		{"function_call no args", `[{"type":"function_call","call_id":"c1","name":"f"}]`,
			[]respItem{{Type: "function_call", CallID: "c1", Name: "f", Arguments: `{}`}}, ""},
		{"function_call_output", `[{"type":"function_call_output","call_id":"c1","output":"42"}]`,
			[]respItem{{Type: "function_call_output", CallID: "c1", Output: "42"}}, ""},
		{"function_call_output parts", `[{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"4"},{"type":"input_text","text":"2"}]}]`,
			[]respItem{{Type: "function_call_output", CallID: "c1", Output: "4\n2"}}, ""},
		{"reasoning", `[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"s"}],"content":[{"type":"reasoning_text","text":"r"}]}]`,
			[]respItem{{Type: "reasoning", ID: "rs_1", Summary: []respContent{{Type: "summary_text", Text: "s"}}, Content: []respContent{{Type: "reasoning_text", Text: "r"}}}}, ""},
		{"missing", `null`, nil, "input"},
		{"number", `3`, nil, "input"},
		{"not object", `["Hi"]`, nil, "input[0]"},
		{"no type", `[{"content":"Hi"}]`, nil, "input[0].type"},
		{"unknown type", `[{"type":"fancy_call"}]`, nil, "input[0].type"},
		{"bad role", `[{"role":"tool","content":"x"}]`, nil, "input[0].role"},
		{"image bad url", `[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]`, nil, "input[0].content[0].image_url"},
		{"image file_id", `[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]`, nil, "input[0].content[0].file_id"},
		{"image detail", `[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AA==","detail":"max"}]}]`, nil, "input[0].content[0].detail"},
		{"image for assistant", `[{"role":"assistant","content":[{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}]`, nil, "input[0].content[0].type"},
		{"file part", `[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]`, nil, "input[0].content[0].type"},
		{"output_text for user", `[{"role":"user","content":[{"type":"output_text","text":"x"}]}]`, nil, "input[0].content[0].type"},
		{"part without text", `[{"role":"user","content":[{"type":"input_text"}]}]`, nil, "input[0].content[0].text"},
		{"content number", `[{"role":"user","content":1}]`, nil, "input[0].content"},
		{"call without call_id", `[{"type":"function_call","name":"f"}]`, nil, "input[0].call_id"},
		{"call without name", `[{"type":"function_call","call_id":"c"}]`, nil, "input[0].name"},
		{"output without call_id", `[{"type":"function_call_output","output":"x"}]`, nil, "input[0].call_id"},
		{"output number", `[{"type":"function_call_output","call_id":"c","output":1}]`, nil, "input[0].output"},
		{"summary bad type", `[{"type":"reasoning","summary":[{"type":"x","text":"s"}]}]`, nil, "input[0].summary[0].type"},
		{"type wrong kind", `[{"type":1}]`, nil, "input[0].type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeInput(json.RawMessage(tt.input))
			if tt.param != "" {
				var v *frontend.Error
				if !errors.As(err, &v) || v.Param != tt.param {
					t.Fatalf("err = %#v, want param %q", err, tt.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tt.want)
			if string(gb) != string(wb) {
				t.Fatalf("got  %s\nwant %s", gb, wb)
			}
		})
	}
}

func TestChatMessagesOf(t *testing.T) {
	items, err := decodeInput(json.RawMessage(`[
		{"role":"user","content":"q"},
		{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},
		{"role":"assistant","content":"let me see"},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
		{"type":"function_call","call_id":"c2","name":"g","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"1"},
		{"type":"function_call_output","call_id":"c2","output":"2"}]`))
	if err != nil {
		t.Fatal(err)
	}
	instr := "be brief"
	msgs, err := chatMessagesOf(&instr, items, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := chatView(msgs)
	want := `[{"content":"be brief","role":"system"},{"content":"q","role":"user"},` +
		`{"content":"let me see","reasoning_content":"think","role":"assistant","tool_calls":[{"function":{"arguments":"{}","name":"f"},"id":"c1","type":"function"},{"function":{"arguments":"{}","name":"g"},"id":"c2","type":"function"}]},` +
		`{"content":"1","role":"tool","tool_call_id":"c1"},{"content":"2","role":"tool","tool_call_id":"c2"}]`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	// An output for a call the conversation never made.
	_, err = chatMessagesOf(nil, items[5:], 0)
	if v := (*frontend.Error)(nil); !errors.As(err, &v) || v.Param != "input[0].call_id" {
		t.Fatalf("unknown call_id: %v", err)
	}
}

// respScript answers "Hello world!" in three batches.
func TestResponsesGolden(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		script openaitest.Script
		stream bool
	}{
		{name: "responses.json", body: `{"model":"test-model","input":"Hi","instructions":"c","max_output_tokens":10,"metadata":{"k":"v"}}`},
		{name: "responses_incomplete.json", body: `{"model":"test-model","input":[{"role":"user","content":"Hi"}],"max_output_tokens":2,"store":false}`, script: openaitest.LogprobScript},
		{name: "responses_stream.sse", body: `{"model":"test-model","input":"Hi","stream":true}`, script: openaitest.StreamScript, stream: true},
		{name: "responses_stream_incomplete.sse", body: `{"model":"test-model","input":"Hi","stream":true,"max_output_tokens":2}`, script: openaitest.LogprobScript, stream: true},
		{name: "responses_tool_stream.sse", body: `{"model":"test-model","input":"Hi","stream":true,"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}],"tool_choice":{"type":"function","name":"f"}}`, script: toolArgsScript, stream: true},
		{name: "responses_tool.json", body: `{"model":"test-model","input":"Hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}],"tool_choice":{"type":"function","name":"f"}}`, script: toolArgsScript},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.Script = tt.script
			m.MaxLen = 512 // room for the tools the fallback template gets in the system prompt
			if tt.stream {
				m.Gate = make(chan struct{}, 16)
			}
			h := respHandler(t, m)
			rec := openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			got := rec.Body.Bytes()
			if !tt.stream {
				got = openaitest.IndentJSON(t, got)
			}
			openaitest.CheckGolden(t, tt.name, normalizeIDs(got))
		})
	}
}

// toolArgsScript writes the arguments in two batches (the fake model
// does not follow the grammar; the handler streams what it writes).
func toolArgsScript(*scheduler.Request) []openaitest.Batch {
	return []openaitest.Batch{
		{Outs: []scheduler.Output{{Tokens: openaitest.Tokens("Hel")}}, Events: 1},
		{Outs: []scheduler.Output{{Tokens: append(openaitest.Tokens("lo"), openaitest.IMEnd), Finish: scheduler.FinishStop}}},
	}
}

func decodeBody(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

func TestResponsesStoredConversation(t *testing.T) {
	m := openaitest.NewModel(t)
	h := respHandler(t, m)
	rec := openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi"}`)
	first := decodeBody(t, rec.Body.Bytes())
	id := first["id"].(string)
	if id != "resp_test" || first["status"] != "completed" {
		t.Fatalf("first: %s", rec.Body)
	}
	got := openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+id, "")
	if got.Code != http.StatusOK || !strings.Contains(got.Body.String(), `"text":"Hello world!"`) {
		t.Fatalf("GET: %d %s", got.Code, got.Body)
	}
	items := decodeBody(t, openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+id+"/input_items", "").Body.Bytes())
	if data := items["data"].([]any); len(data) != 1 || items["first_id"] != data[0].(map[string]any)["id"] || items["has_more"] != false {
		t.Fatalf("input_items: %v", items)
	}
	// The second turn's prompt starts with the first turn's prompt and
	// answer: the template renders the same prefix.
	rec = openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Bye","previous_response_id":"`+id+`"}`)
	second := decodeBody(t, rec.Body.Bytes())
	if second["previous_response_id"] != id || second["status"] != "completed" {
		t.Fatalf("second: %s", rec.Body)
	}
	reqs := m.Requests()
	if len(reqs) != 2 || !slices.Equal(reqs[1].Prompt[:len(reqs[0].Prompt)], reqs[0].Prompt) {
		t.Fatalf("second prompt does not extend the first:\n%v\n%v", reqs[0].Prompt, reqs[1].Prompt)
	}
	answer := m.Tokenizer()
	text := answer.Decode(reqs[1].Prompt)
	if !strings.Contains(text, "Hello world!") || !strings.Contains(text, "Bye") {
		t.Fatalf("second prompt: %q", text)
	}
	// input_tokens counts the same prompt.
	rec = openaitest.Do(t, h, nil, http.MethodPost, "/v1/responses/input_tokens", `{"model":"test-model","input":"Bye","previous_response_id":"`+id+`"}`)
	if v := decodeBody(t, rec.Body.Bytes()); int(v["input_tokens"].(float64)) != len(reqs[1].Prompt) {
		t.Fatalf("input_tokens: %s, prompt %d", rec.Body, len(reqs[1].Prompt))
	}
	// Paging over two items.
	second2 := decodeBody(t, openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`).Body.Bytes())
	sid := second2["id"].(string)
	page := decodeBody(t, openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+sid+"/input_items?limit=1&order=asc", "").Body.Bytes())
	if page["has_more"] != true {
		t.Fatalf("page 1: %v", page)
	}
	page2 := decodeBody(t, openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+sid+"/input_items?limit=1&order=asc&after="+page["last_id"].(string), "").Body.Bytes())
	if page2["has_more"] != false || page2["data"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "b" {
		t.Fatalf("page 2: %v", page2)
	}
	// Delete, then it is gone, and continuing it is a 404.
	if del := openaitest.Do(t, h, nil, http.MethodDelete, "/v1/responses/"+id, ""); del.Code != http.StatusOK || !strings.Contains(del.Body.String(), `"deleted":true`) {
		t.Fatalf("DELETE: %d %s", del.Code, del.Body)
	}
	if g := openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+id, ""); g.Code != http.StatusNotFound {
		t.Fatalf("GET after delete: %d", g.Code)
	}
	// store: false keeps nothing.
	nostore := decodeBody(t, openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi","store":false}`).Body.Bytes())
	if g := openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+nostore["id"].(string), ""); g.Code != http.StatusNotFound {
		t.Fatalf("store false: GET %d", g.Code)
	}
}

func TestResponsesBadInput(t *testing.T) {
	m := openaitest.NewModel(t)
	h := respHandler(t, m)
	tests := []struct {
		name, method, path, body string
		status                   int
		param, msg               string
	}{
		{"previous missing", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","previous_response_id":"resp_nope"}`, 400, "previous_response_id", "Previous response with id 'resp_nope' not found."},
		{"input missing", "POST", "/v1/responses", `{"model":"test-model"}`, 400, "input", ""},
		{"bad item", "POST", "/v1/responses", `{"model":"test-model","input":[{"type":"fancy_call"}]}`, 400, "input[0].type", ""},
		{"image without url", "POST", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_image"}]}]}`, 400, "input[0].content[0].image_url", ""},
		{"image to a text model", "POST", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}]}`, 400, "input[0].content[1]", ""},
		{"unknown call", "POST", "/v1/responses", `{"model":"test-model","input":[{"type":"function_call_output","call_id":"x","output":"1"}]}`, 400, "input[0].call_id", ""},
		{"tool type", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","tools":[{"type":"fancy"}]}`, 400, "tools[0].type", ""},
		{"namespace in namespace", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","tools":[{"type":"namespace","name":"a","tools":[{"type":"namespace","name":"b","tools":[]}]}]}`, 400, "tools[0].tools[0].type", ""},
		{"namespace tool name", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","tools":[{"type":"namespace","name":"a","tools":[{"type":"function"}]}]}`, 400, "tools[0].tools[0].name", ""},
		{"custom grammar syntax", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","tools":[{"type":"custom","name":"c","format":{"type":"grammar","syntax":"peg","definition":"x"}}]}`, 400, "tools[0].format.syntax", ""},
		{"custom grammar", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","tools":[{"type":"custom","name":"c","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}]}`, 400, "tools[0].format.definition", ""},
		{"include", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","include":["everything"]}`, 400, "include[0]", ""},
		{"top_logprobs", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","top_logprobs":21}`, 400, "top_logprobs", ""},
		{"schema name missing", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","text":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`, 400, "text.format.name", "Missing required parameter: 'text.format.name'."},
		{"schema name", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","text":{"format":{"type":"json_schema","name":"a b","schema":{"type":"object"}}}}`, 400, "text.format.name", ""},
		{"schema name long", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","text":{"format":{"type":"json_schema","name":"` + strings.Repeat("n", 65) + `","schema":{"type":"object"}}}}`, 400, "text.format.name", ""},
		{"tool_choice unknown", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, 400, "tool_choice.name", ""},
		{"max_output_tokens", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","max_output_tokens":-1}`, 400, "max_output_tokens", ""},
		{"max_output_tokens zero", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","max_output_tokens":0}`, 400, "max_output_tokens", "max_output_tokens must be at least 1, got 0."},
		{"tool parameters type", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","tools":[{"type":"function","name":"f","parameters":"x"}]}`, 400, "tools[0].parameters", ""},
		{"tool parameters schema", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"minimum":"x"}}}}],"tool_choice":"required"}`, 400, "tools[0].parameters", ""},
		{"call arguments", "POST", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":"q"},{"type":"function_call","call_id":"c","name":"f","arguments":"{x"}]}`, 400, "input[1].tool_calls[0].function.arguments", ""},
		{"format schema", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"nope"}}}}`, 400, "text.format.schema", ""},
		{"input_tokens too long", "POST", "/v1/responses/input_tokens", `{"model":"test-model","input":"` + strings.Repeat("long ", 200) + `"}`, 400, "input", ""},
		{"temperature type", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","temperature":"hot"}`, 400, "temperature", ""},
		{"format type", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","text":{"format":{"type":"xml"}}}`, 400, "text.format.type", ""},
		{"schema missing", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","text":{"format":{"type":"json_schema","name":"x"}}}`, 400, "text.format.schema", ""},
		{"effort", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","reasoning":{"effort":"max"}}`, 400, "reasoning.effort", ""},
		{"background without store", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","background":true,"store":false}`, 400, "background", ""},
		{"conversation", "POST", "/v1/responses", `{"model":"test-model","input":"Hi","conversation":"conv_1"}`, 400, "conversation", ""},
		{"model", "POST", "/v1/responses", `{"model":"nope","input":"Hi"}`, 404, "model", ""},
		{"not json", "POST", "/v1/responses", `{`, 400, "", ""},
		{"get missing", "GET", "/v1/responses/resp_nope", ``, 404, "", "Response with id 'resp_nope' not found."},
		{"delete missing", "DELETE", "/v1/responses/resp_nope", ``, 404, "", ""},
		{"items missing", "GET", "/v1/responses/resp_nope/input_items", ``, 404, "", ""},
		{"items limit", "GET", "/v1/responses/resp_nope/input_items?limit=0", ``, 400, "limit", ""},
		{"items order", "GET", "/v1/responses/resp_nope/input_items?order=up", ``, 400, "order", ""},
		{"cancel missing", "POST", "/v1/responses/resp_nope/cancel", ``, 404, "", ""},
		{"input_tokens bad", "POST", "/v1/responses/input_tokens", `{"model":"test-model","input":[1]}`, 400, "input[0]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := openaitest.Do(t, h, nil, tt.method, tt.path, tt.body)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			var e errorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("not an OpenAI error: %s", rec.Body)
			}
			if tt.param != "" && (e.Error.Param == nil || *e.Error.Param != tt.param) {
				t.Fatalf("param %v, want %q: %s", e.Error.Param, tt.param, rec.Body)
			}
			if tt.msg != "" && e.Error.Message != tt.msg {
				t.Fatalf("message %q, want %q", e.Error.Message, tt.msg)
			}
		})
	}
	// Cancelling a response that is not a background one is a 400.
	done := decodeBody(t, openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi"}`).Body.Bytes())
	if rec := openaitest.Do(t, h, nil, http.MethodPost, "/v1/responses/"+done["id"].(string)+"/cancel", ""); rec.Code != http.StatusBadRequest {
		t.Fatalf("cancel foreground: %d %s", rec.Code, rec.Body)
	}
}

func TestResponsesBackgroundCancel(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Hold = true
	m.Script = func(*scheduler.Request) []openaitest.Batch {
		return []openaitest.Batch{{Outs: []scheduler.Output{{Tokens: openaitest.Tokens("Hel")}}}}
	}
	h := respHandler(t, m)
	rec := openaitest.Do(t, h, nil, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi","background":true}`)
	resp := decodeBody(t, rec.Body.Bytes())
	if resp["status"] != "queued" || resp["background"] != true {
		t.Fatalf("background: %s", rec.Body)
	}
	id := resp["id"].(string)
	if g := decodeBody(t, openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+id, "").Body.Bytes()); g["status"] != "queued" {
		t.Fatalf("GET while running: %v", g["status"])
	}
	c := decodeBody(t, openaitest.Do(t, h, nil, http.MethodPost, "/v1/responses/"+id+"/cancel", "").Body.Bytes())
	if c["status"] != "cancelled" {
		t.Fatalf("cancel: %v", c)
	}
	// cancel answered once the final state was stored: GET says the same.
	if g := decodeBody(t, openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+id, "").Body.Bytes()); g["status"] != "cancelled" {
		t.Fatalf("stored status %v after cancel answered cancelled", g["status"])
	}
	m.Wait()
}

func TestResponsesBackgroundCompletes(t *testing.T) {
	m := openaitest.NewModel(t)
	h := respHandler(t, m)
	resp := decodeBody(t, openaitest.Do(t, h, m, http.MethodPost, "/v1/responses", `{"model":"test-model","input":"Hi","background":true}`).Body.Bytes())
	id := resp["id"].(string)
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := decodeBody(t, openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/"+id, "").Body.Bytes())
		if g["status"] == "completed" {
			if !strings.Contains(string(mustJSON(g)), "Hello world!") {
				t.Fatalf("completed without the answer: %v", g)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored status %v", g["status"])
		}
		time.Sleep(10 * time.Millisecond) // a bounded poll: the background run stores its end unannounced
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestResponsesReasoning: with a reasoning parser the answer is a
// reasoning item then the message, streamed as reasoning_text events
// before the message's, and the reasoning tokens are counted apart.
func TestResponsesReasoning(t *testing.T) {
	for _, stream := range []bool{false, true} {
		fm := openaitest.NewModel(t)
		fm.MaxLen = 256
		fm.SetScript(openaitest.ThinkScript("Hel lo</think>Hello world!"))
		h := respHandler(t, &openaitest.ReasoningModel{Model: fm, Parser: tokenizer.ReasoningDeepSeekR1})
		body := `{"model":"test-model","input":"Hi","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
		rec := openaitest.Do(t, h, fm, http.MethodPost, "/v1/responses", body)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var resp map[string]any
		if !stream {
			resp = decodeBody(t, rec.Body.Bytes())
		} else {
			var reasoning, text strings.Builder
			var types []string
			for _, line := range strings.Split(rec.Body.String(), "\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					continue
				}
				ev := decodeBody(t, []byte(data))
				typ := ev["type"].(string)
				types = append(types, typ)
				switch typ {
				case "response.reasoning_text.delta":
					reasoning.WriteString(ev["delta"].(string))
				case "response.output_text.delta":
					if reasoning.String() != "Hel lo" {
						t.Fatalf("text before the reasoning ended: %q", reasoning.String())
					}
					text.WriteString(ev["delta"].(string))
				case "response.incomplete":
					resp = ev["response"].(map[string]any)
				}
			}
			if reasoning.String() != "Hel lo" || text.String() != "Hello world!" || resp == nil {
				t.Fatalf("stream: reasoning %q, text %q, events %v", reasoning.String(), text.String(), types)
			}
		}
		out := resp["output"].([]any)
		if len(out) != 2 {
			t.Fatalf("stream %v: output %v", stream, out)
		}
		r, m := out[0].(map[string]any), out[1].(map[string]any)
		if r["type"] != "reasoning" || r["content"].([]any)[0].(map[string]any)["text"] != "Hel lo" ||
			m["type"] != "message" || m["content"].([]any)[0].(map[string]any)["text"] != "Hello world!" {
			t.Fatalf("stream %v: output %v", stream, out)
		}
		u := resp["usage"].(map[string]any)
		if rt := u["output_tokens_details"].(map[string]any)["reasoning_tokens"].(float64); rt <= 0 || rt >= u["output_tokens"].(float64) {
			t.Fatalf("stream %v: usage %v", stream, u)
		}
	}
}

// FuzzDecodeResponses: no request body makes the Responses decoder panic
// or fail with anything but a validation error (a 400), unless it names a
// previous response (a 404).
func FuzzDecodeResponses(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"Hi"}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f"},{"type":"function_call_output","call_id":"c","output":"x"}]}`,
		`{"model":"m","input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}]}],"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"}}`,
		`{"model":"m","input":"x","text":{"format":{"type":"json_schema","schema":{}}},"reasoning":{"effort":"low"}}`,
		`{"input":[null,1,"a",{}]}`,
		`{"model":"test-model","input":[{"role":"user","content":"q"},{"type":"function_call","call_id":"c","name":"f","arguments":"{x"}],"instructions":"i","max_output_tokens":4,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":"required","parallel_tool_calls":false}`,
		`{"model":"test-model","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="},{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}],"text":{"format":{"type":"json_object"}}}`,
		`{"model":"test-model","input":[{"role":"user","content":"q"},{"type":"custom_tool_call","call_id":"c","name":"p","input":"x"},{"type":"custom_tool_call_output","call_id":"c","output":"ok"},{"type":"web_search_call","id":"w"},{"type":"reasoning","summary":[],"encrypted_content":"bGxtc2VydmUtcmVhc29uaW5nLXYxOmE="}],"tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]},{"type":"custom","name":"p","format":{"type":"grammar","syntax":"lark","definition":"start: \"a\"+"}},{"type":"web_search"}],"tool_choice":{"type":"custom","name":"p"},"include":["reasoning.encrypted_content","message.output_text.logprobs"],"top_logprobs":3,"truncation":"auto","prompt_cache_key":"k"}`,
	} {
		f.Add([]byte(s))
	}
	m := openaitest.NewModel(f)
	h := newHandler(openai.New(openaitest.NewBackend[openai.Model](m), openai.Options{}), Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		rp, err := h.decodeResponses(body)
		if err == nil {
			// The typed request it decoded to goes through the prepare
			// path like any chat request.
			_, err = h.s.Prepare(context.Background(), rp.typed)
		}
		var v *frontend.Error
		if err != nil && !errors.As(err, &v) && openai.ErrorOf(err).Status != http.StatusNotFound {
			t.Fatalf("%q: %T %v", body, err, err)
		}
	})
}

// TestResponsesStreamClientGone: a streamed response whose client went
// away cancels its generation, as chat does, and is not stored.
func TestResponsesStreamClientGone(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Hold = true
	m.Script = func(*scheduler.Request) []openaitest.Batch {
		return []openaitest.Batch{{Outs: []scheduler.Output{{Tokens: openaitest.Tokens("Hel")}}}}
	}
	h := respHandler(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(`{"model":"test-model","input":"Hi","stream":true}`)).WithContext(ctx)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	cancel()
	<-done
	select {
	case <-m.Cancelled():
	case <-time.After(5 * time.Second):
		t.Fatal("the generation was not cancelled")
	}
	m.Wait()
	if g := openaitest.Do(t, h, nil, http.MethodGet, "/v1/responses/resp_test", ""); g.Code != http.StatusNotFound {
		t.Fatalf("a response whose client went away was stored: %d %s", g.Code, g.Body)
	}
}

// chatView writes typed messages as chat messages in JSON, for comparing.
func chatView(msgs []frontend.Message) string {
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		v := map[string]any{"role": m.Role, "content": m.Content}
		if m.ReasoningContent != "" {
			v["reasoning_content"] = m.ReasoningContent
		}
		if m.ToolCallID != "" {
			v["tool_call_id"] = m.ToolCallID
		}
		if len(m.ToolCalls) > 0 {
			var calls []any
			for _, c := range m.ToolCalls {
				calls = append(calls, map[string]any{"id": c.ID, "type": c.Type, "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
			}
			v["tool_calls"] = calls
		}
		out[i] = v
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// errorResponse is OpenAI's error envelope, as the Responses API's errors
// are written (api/openai).
type errorResponse struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}
