package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/api"
	"github.com/llmserve/llmserve/api/responses/store"
	"github.com/llmserve/llmserve/models"
)

// responsesServer serves the registry of s through a handler with its own
// Responses store, as `llmserve serve --responses-store-dir dir` does.
func responsesServer(t *testing.T, s *server, dir string) (string, func()) {
	t.Helper()
	st, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h, err := api.NewHandler(api.Options{Registry: s.registry, Logger: slog.New(slog.DiscardHandler), Registerer: reg, Gatherer: reg, ResponseStore: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	stop := func() {
		srv.Close()
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}
	return srv.URL, stop
}

// TestResponsesOpenAINode drives POST /v1/responses with the official
// openai npm package: responses.create unstreamed and streamed, the
// stream helper, a forced function call and its output sent back, three
// turns on previous_response_id with cached_tokens growing, retrieve,
// input items, delete and the 404 of an unknown previous response.
func TestResponsesOpenAINode(t *testing.T) {
	node, modules := nodeModules(t, filepath.Join("openai"))
	s := startServer(t, models.GenerativeConfig{})
	url, stop := responsesServer(t, s, "")
	defer stop()
	cmd := exec.Command(node, filepath.Join("testdata", "responses_client.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "BASE_URL="+url, "MODEL="+s.model.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node responses_client.cjs: %v\n%s", err, out)
	}
	t.Logf("openai npm: %s", bytes.TrimSpace(out))
}

func respPost(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return respDecode(t, resp)
}

func respGet(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return respDecode(t, resp)
}

func respDecode(t *testing.T, resp *http.Response) (int, map[string]any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("status %d, not JSON: %s", resp.StatusCode, b)
	}
	return resp.StatusCode, v
}

// TestResponsesStoreSurvivesRestart stores a conversation with
// --responses-store-dir, stops the server and its store, starts a new one
// on the same directory and continues the conversation there.
func TestResponsesStoreSurvivesRestart(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	dir := t.TempDir()
	url, stop := responsesServer(t, s, dir)
	model := s.model.Name()
	code, first := respPost(t, url+"/v1/responses", `{"model":"`+model+`","input":"Lily went to the park.","max_output_tokens":16,"temperature":0}`)
	if code != http.StatusOK {
		t.Fatalf("create: %d %v", code, first)
	}
	id := first["id"].(string)
	stop()

	url, stop = responsesServer(t, s, dir)
	defer stop()
	code, got := respGet(t, url+"/v1/responses/"+id)
	if code != http.StatusOK {
		t.Fatalf("GET after restart: %d %v", code, got)
	}
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(got)
	if !bytes.Equal(a, b) {
		t.Fatalf("the stored response changed over the restart:\n%s\n%s", a, b)
	}
	code, items := respGet(t, url+"/v1/responses/"+id+"/input_items")
	if code != http.StatusOK || len(items["data"].([]any)) != 1 {
		t.Fatalf("input_items after restart: %d %v", code, items)
	}
	code, next := respPost(t, url+"/v1/responses", `{"model":"`+model+`","input":"Then she saw a dog.","previous_response_id":"`+id+`","max_output_tokens":16,"temperature":0}`)
	if code != http.StatusOK || next["previous_response_id"] != id {
		t.Fatalf("continue after restart: %d %v", code, next)
	}
	u := next["usage"].(map[string]any)
	if u["input_tokens"].(float64) <= first["usage"].(map[string]any)["input_tokens"].(float64) {
		t.Fatalf("the continued prompt is not longer than the first: %v vs %v", u, first["usage"])
	}
}

// TestResponsesBadInputReal: bad input is a 4xx in OpenAI's error shape
// on the real server, never a 500.
func TestResponsesBadInputReal(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	url, stop := responsesServer(t, s, "")
	defer stop()
	model := s.model.Name()
	for _, tt := range []struct {
		body   string
		status int
		param  string
	}{
		{`{"model":"` + model + `","input":"x","previous_response_id":"resp_nope"}`, 400, "previous_response_id"},
		{`{"model":"` + model + `","input":[{"type":"function_call_output","call_id":"nope","output":"1"}]}`, 400, "input[0].call_id"},
		{`{"model":"` + model + `","input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`, 400, "input[0].content[0]"},
		{`{"model":"` + model + `","input":[{"type":"item_reference","id":"x"}]}`, 400, "input[0].type"},
		{`{"model":"` + model + `","input":"x","max_output_tokens":100000}`, 400, "max_output_tokens"},
		{`{"model":"` + model + `","input":"x","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=a)b"}}}}}}`, 400, ""},
		{`{"model":"` + model + `","input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, 400, "tool_choice.name"},
	} {
		code, v := respPost(t, url+"/v1/responses", tt.body)
		e, _ := v["error"].(map[string]any)
		if code != tt.status || e == nil || e["message"] == "" {
			t.Errorf("%s: %d %v, want %d", tt.body, code, v, tt.status)
			continue
		}
		if tt.param != "" && e["param"] != tt.param {
			t.Errorf("%s: param %v, want %s", tt.body, e["param"], tt.param)
		}
	}
}

// respTurn posts one turn to p and returns the response.
func respTurn(t *testing.T, p *pdProc, input, previous string) map[string]any {
	t.Helper()
	req := map[string]any{"model": servedModel(t, p), "input": input, "max_output_tokens": 16, "temperature": 0}
	if previous != "" {
		req["previous_response_id"] = previous
	}
	code, body := p.post(t, "/v1/responses", req)
	var v map[string]any
	if code != http.StatusOK || json.Unmarshal(body, &v) != nil {
		t.Fatalf("%s: %d %s", p.url, code, body)
	}
	return v
}

func respGetProc(t *testing.T, p *pdProc, id string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(p.url + "/v1/responses/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestResponsesHeadRestart: llmserve head serves the Responses API over a
// worker, keeps its store in --responses-store-dir, and after the head
// process is killed and started again the conversation is still there and
// goes on; a continued turn is served from the worker's prefix cache.
func TestResponsesHeadRestart(t *testing.T) {
	w := startWorkerProc(t, "both")
	dir := t.TempDir()
	h := startHeadProc(t, []*headWorker{w}, "--responses-store-dir", dir)
	first := respTurn(t, h, "Lily went to the park with her mom.", "")
	second := respTurn(t, h, "Then she saw a big dog.", first["id"].(string))
	cached := second["usage"].(map[string]any)["input_tokens_details"].(map[string]any)["cached_tokens"].(float64)
	if cached <= 0 {
		t.Errorf("the second turn through the head found no cached prefix: %v", second["usage"])
	}
	_, before := respGetProc(t, h, second["id"].(string))
	h.kill() // no clean shutdown: every stored response was committed

	h2 := startHeadProc(t, []*headWorker{w}, "--responses-store-dir", dir)
	code, after := respGetProc(t, h2, second["id"].(string))
	if code != http.StatusOK || !bytes.Equal(before, after) {
		t.Fatalf("after the restart: %d\n%s\nwant\n%s", code, after, before)
	}
	third := respTurn(t, h2, "The dog wanted to play.", second["id"].(string))
	if third["status"] == "failed" || third["previous_response_id"] != second["id"] {
		t.Fatalf("third turn: %v", third)
	}
}

// TestResponsesServeStoreBound: serve's --responses-store-size bounds the
// store on disk across a restart: of three responses in a store of two,
// the first is gone and the others survive.
func TestResponsesServeStoreBound(t *testing.T) {
	dir := t.TempDir()
	p := startServeProc(t, "--responses-store-dir", dir, "--responses-store-size", "2")
	var ids []string
	for _, in := range []string{"Lily", "Tom", "Sue"} {
		ids = append(ids, respTurn(t, p, in, "")["id"].(string))
	}
	p.kill()
	p2 := startServeProc(t, "--responses-store-dir", dir, "--responses-store-size", "2")
	for i, id := range ids {
		code, body := respGetProc(t, p2, id)
		if want := map[bool]int{true: http.StatusNotFound, false: http.StatusOK}[i == 0]; code != want {
			t.Errorf("response %d after the restart: %d, want %d: %s", i, code, want, body)
		}
	}
}

// TestResponsesTextFormat: text.format json_schema goes through the
// grammar path: the answer is JSON of the schema.
func TestResponsesTextFormat(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	url, stop := responsesServer(t, s, "")
	defer stop()
	code, v := respPost(t, url+"/v1/responses", `{"model":"`+s.model.Name()+`","input":"Pick a name.","max_output_tokens":40,"temperature":0,
		"text":{"format":{"type":"json_schema","name":"pick","strict":true,"schema":{"type":"object","properties":{"name":{"type":"string","enum":["Lily","Tom"]}},"required":["name"],"additionalProperties":false}}}}`)
	if code != http.StatusOK {
		t.Fatalf("%d %v", code, v)
	}
	text := v["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
	var got struct{ Name string }
	if err := json.Unmarshal([]byte(text), &got); err != nil || (got.Name != "Lily" && got.Name != "Tom") {
		t.Fatalf("answer %q is not JSON of the schema: %v", text, err)
	}
	if f := v["text"].(map[string]any)["format"].(map[string]any); f["type"] != "json_schema" || f["name"] != "pick" {
		t.Fatalf("text.format echo: %v", f)
	}
}
