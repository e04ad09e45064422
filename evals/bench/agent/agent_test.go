package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// agentFake serves the three agent APIs' streams. It flattens each request
// into words (system or instructions, tool descriptions, every message's
// text) and reports as cached the words it shares from the start with the
// previous request of the same route, as a prefix cache would.
type agentFake struct {
	srv *httptest.Server
	// status, if set, fails request n (1-based) of a route with that status.
	status func(path string, n int) int
	// silent makes every stream finish without output.
	silent bool
	// llamaChat reports chat's cache as llama-server does: timings.cache_n
	// and no prompt_tokens_details.
	llamaChat bool

	mu     sync.Mutex
	bodies map[string][]map[string]any // by path, guarded by mu
	last   map[string][]string         // the previous request's words by path, guarded by mu
}

func startAgentFake(t *testing.T, setup func(*agentFake)) *agentFake {
	t.Helper()
	f := &agentFake{bodies: map[string][]map[string]any{}, last: map[string][]string{}}
	if setup != nil {
		setup(f)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"agent-model"}]}`)
	})
	for _, p := range []string{"/v1/messages", "/v1/responses", "/v1/chat/completions"} {
		mux.HandleFunc("POST "+p, f.serve)
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// flatten collects the words of every string under the request's
// conversation fields, in order.
func flatten(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, strings.Fields(x)...)
	case []any:
		for _, e := range x {
			flatten(e, out)
		}
	case map[string]any:
		for _, k := range []string{"system", "instructions", "tools", "function", "description", "messages", "input", "content", "text", "output", "arguments"} {
			if e, ok := x[k]; ok {
				flatten(e, out)
			}
		}
	}
}

func (f *agentFake) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	var ws []string
	flatten(body, &ws)
	f.mu.Lock()
	f.bodies[r.URL.Path] = append(f.bodies[r.URL.Path], body)
	n := len(f.bodies[r.URL.Path])
	prev := f.last[r.URL.Path]
	f.last[r.URL.Path] = ws
	f.mu.Unlock()
	if f.status != nil {
		if code := f.status(r.URL.Path, n); code != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":{"message":"request %d refused"}}`, n)
			return
		}
	}
	cached := 0
	for cached < len(prev) && cached < len(ws) && prev[cached] == ws[cached] {
		cached++
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event, data string) {
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		w.(http.Flusher).Flush()
	}
	out := 2
	if f.silent {
		out = 0
	}
	switch r.URL.Path {
	case "/v1/messages":
		send("message_start", fmt.Sprintf(`{"type":"message_start","message":{"usage":{"input_tokens":%d,"cache_read_input_tokens":%d,"cache_creation_input_tokens":0,"output_tokens":1}}}`, len(ws)-cached, cached))
		send("ping", `{"type":"ping"}`)
		send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for range out {
			send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" w"}}`)
		}
		send("content_block_stop", `{"type":"content_block_stop","index":0}`)
		send("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":%d}}`, out))
		send("message_stop", `{"type":"message_stop"}`)
	case "/v1/responses":
		send("response.created", `{"type":"response.created","response":{"status":"in_progress"}}`)
		for range out {
			send("response.output_text.delta", `{"type":"response.output_text.delta","delta":" w"}`)
		}
		send("response.completed", fmt.Sprintf(`{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d}}}`, len(ws), cached, out))
	default:
		send("", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
		for range out {
			send("", `{"choices":[{"index":0,"delta":{"content":" w"}}]}`)
		}
		if f.llamaChat {
			send("", fmt.Sprintf(`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d},"timings":{"cache_n":%d}}`, len(ws), out, cached))
		} else {
			send("", `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`)
			send("", fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`, len(ws), out, cached))
		}
		send("", "[DONE]")
	}
}

func (f *agentFake) requests(path string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies[path]...)
}

func smallAgentConfig(url string) Config {
	cfg := DefaultConfig()
	cfg.BaseURL = url + "/v1"
	cfg.PrefixWords, cfg.Tools, cfg.Turns, cfg.UserWords, cfg.ToolResultWords = 400, 4, 4, 5, 20
	cfg.Timeout = time.Minute
	return cfg
}

// TestAgentSessions: every API gets Turns requests, each re-sending the
// whole transcript plus the last tool call, its result and a new user
// message; the report reads each API's cache figure, and every later turn
// finds the earlier one's whole prompt cached.
func TestAgentSessions(t *testing.T) {
	f := startAgentFake(t, nil)
	cfg := smallAgentConfig(f.srv.URL)
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ModelID != "agent-model" || len(rep.Sessions) != 3 || len(rep.Summaries) != 3 {
		t.Fatalf("model %q, %d sessions, %d summaries", rep.ModelID, len(rep.Sessions), len(rep.Summaries))
	}
	for _, s := range rep.Summaries {
		if s.Completed != 1 || s.Failed != 0 {
			t.Fatalf("%s: %d completed, %d failed: %+v", s.API, s.Completed, s.Failed, s.Errors)
		}
	}
	for _, sess := range rep.Sessions {
		if len(sess.Turns) != cfg.Turns {
			t.Fatalf("%s: %d turns", sess.API, len(sess.Turns))
		}
		for k, turn := range sess.Turns {
			if turn.Error != "" || turn.TTFTMs <= 0 || turn.E2ELMs < turn.TTFTMs || turn.NoOutput || turn.OutputTokens != 2 {
				t.Errorf("%s turn %d: %+v", sess.API, k+1, turn)
			}
			if turn.CacheSource != "usage" {
				t.Errorf("%s turn %d: cache source %q", sess.API, k+1, turn.CacheSource)
			}
			if k == 0 && turn.CachedTokens != 0 {
				t.Errorf("%s turn 1: %d cached, want 0 (a prefix of its own)", sess.API, turn.CachedTokens)
			}
			if k > 0 && turn.CachedTokens != sess.Turns[k-1].InputTokens {
				t.Errorf("%s turn %d: %d cached, want the previous prompt's %d", sess.API, k+1, turn.CachedTokens, sess.Turns[k-1].InputTokens)
			}
		}
	}

	msgs := f.requests("/v1/messages")
	if len(msgs) != cfg.Turns {
		t.Fatalf("%d Messages requests", len(msgs))
	}
	last := msgs[cfg.Turns-1]
	if n := len(last["tools"].([]any)); n != cfg.Tools {
		t.Errorf("%d tools", n)
	}
	// user, then (assistant tool_use, user tool_result + text) per later turn.
	m := last["messages"].([]any)
	if len(m) != 1+2*(cfg.Turns-1) {
		t.Fatalf("last Messages request has %d messages", len(m))
	}
	asst := m[1].(map[string]any)["content"].([]any)[0].(map[string]any)
	res := m[2].(map[string]any)["content"].([]any)
	if asst["type"] != "tool_use" || res[0].(map[string]any)["type"] != "tool_result" ||
		res[0].(map[string]any)["tool_use_id"] != asst["id"] || res[1].(map[string]any)["type"] != "text" {
		t.Errorf("turn 2 of the transcript: %v / %v", asst, res)
	}
	var prefix []string
	flatten(map[string]any{"system": last["system"], "tools": last["tools"]}, &prefix)
	if len(prefix) != cfg.PrefixWords {
		t.Errorf("system + tool descriptions: %d words, want %d", len(prefix), cfg.PrefixWords)
	}

	in := f.requests("/v1/responses")[cfg.Turns-1]["input"].([]any)
	if len(in) != 1+3*(cfg.Turns-1) || in[1].(map[string]any)["type"] != "function_call" || in[2].(map[string]any)["type"] != "function_call_output" {
		t.Errorf("last Responses input: %v", in)
	}
	chat := f.requests("/v1/chat/completions")[cfg.Turns-1]["messages"].([]any)
	if len(chat) != 2+3*(cfg.Turns-1) || chat[2].(map[string]any)["tool_calls"] == nil || chat[3].(map[string]any)["role"] != "tool" {
		t.Errorf("last chat messages: %v", chat)
	}
	// Each API's session has a system prompt of its own.
	if msgs[0]["system"] == f.requests("/v1/responses")[0]["instructions"] {
		t.Error("Messages and Responses sessions share their system prompt")
	}

	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"messages: 1 sessions completed", "responses:", "chat:", "turns 2-4: median TTFT"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestAgentSameSeedSameRequests: two runs with one seed send byte-equal
// requests; another seed changes them.
func TestAgentSameSeedSameRequests(t *testing.T) {
	bodies := func(seed int64) []map[string]any {
		f := startAgentFake(t, nil)
		cfg := smallAgentConfig(f.srv.URL)
		cfg.APIs, cfg.Seed = []API{Chat}, seed
		if _, err := Run(context.Background(), cfg, nil); err != nil {
			t.Fatal(err)
		}
		return f.requests("/v1/chat/completions")
	}
	a, b, c := bodies(7), bodies(7), bodies(8)
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed sent different requests")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("another seed sent the same requests")
	}
}

// TestAgentLlamaServerCache: llama-server's chat says its cache in
// timings.cache_n.
func TestAgentLlamaServerCache(t *testing.T) {
	f := startAgentFake(t, func(f *agentFake) { f.llamaChat = true })
	cfg := smallAgentConfig(f.srv.URL)
	cfg.APIs = []API{Chat}
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	turns := rep.Sessions[0].Turns
	if turns[1].CacheSource != "timings" || turns[1].CachedTokens != turns[0].InputTokens {
		t.Errorf("turn 2: %+v after %+v", turns[1], turns[0])
	}
}

// TestAgentFailedTurn: a refused turn ends its session with the server's
// message; the other APIs still run.
func TestAgentFailedTurn(t *testing.T) {
	f := startAgentFake(t, func(f *agentFake) {
		f.status = func(path string, n int) int {
			if path == "/v1/messages" && n == 2 {
				return http.StatusBadRequest
			}
			return 0
		}
	})
	cfg := smallAgentConfig(f.srv.URL)
	cfg.APIs = []API{Messages, Chat}
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summaries[0]
	if s.Completed != 0 || s.Failed != 1 || len(s.Errors) != 1 || s.Errors[0].Message != "HTTP 400: request 2 refused" {
		t.Errorf("messages summary: %+v", s)
	}
	if n := len(rep.Sessions[0].Turns); n != 2 {
		t.Errorf("the failed session has %d turns, want 2 (it stops at the failure)", n)
	}
	if rep.Summaries[1].Completed != 1 {
		t.Errorf("chat summary: %+v", rep.Summaries[1])
	}
}

// TestAgentNoOutput: a turn whose model stopped at once takes its TTFT at
// the end of generation and says so.
func TestAgentNoOutput(t *testing.T) {
	f := startAgentFake(t, func(f *agentFake) { f.silent = true })
	cfg := smallAgentConfig(f.srv.URL)
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sess := range rep.Sessions {
		for _, turn := range sess.Turns {
			if turn.Error != "" || !turn.NoOutput || turn.TTFTMs <= 0 {
				t.Errorf("%s turn %d: %+v", sess.API, turn.Turn, turn)
			}
		}
	}
}

func TestAgentConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Turns, cfg.Tools, cfg.APIs = 0, 0, nil
	err := cfg.Validate()
	if err == nil {
		t.Fatal("a bad config passed")
	}
	for _, want := range []string{"--turns 0", "--tools 0", "--api"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not name %s", err, want)
		}
	}
	if _, err := ParseAPI("completions"); err == nil {
		t.Error("--api completions accepted")
	}
}

// TestAgentTable: the Markdown table has one row per server and API, with
// the medians over the files.
func TestAgentTable(t *testing.T) {
	f := startAgentFake(t, nil)
	dir := t.TempDir()
	for rep := 1; rep <= 3; rep++ {
		cfg := smallAgentConfig(f.srv.URL)
		cfg.APIs, cfg.Seed, cfg.Label = []API{Messages, Chat}, int64(rep), fmt.Sprintf("fake:run%d", rep)
		r, err := Run(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := benchio.WriteJSONFile(filepath.Join(dir, fmt.Sprintf("fake-run%d.json", rep)), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a result"), 0o644); err != nil {
		t.Fatal(err)
	}
	table, lines := agentTable(t, dir)
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "| fake | chat | 3 |") || !strings.HasPrefix(lines[3], "| fake | messages | 3 |") {
		t.Fatalf("table:\n%s", table)
	}
	// The fake caches every earlier prompt: turns 2+ are mostly cached.
	cells := strings.Split(lines[3], "|")
	if share := strings.TrimSpace(cells[8]); share < "0.5" || share > "1.000" {
		t.Errorf("cached share %q:\n%s", share, table)
	}
}

// agentTable runs bench agent table over dir and returns the table and its
// lines.
func agentTable(t *testing.T, dir string) (string, []string) {
	t.Helper()
	var out bytes.Buffer
	if err := Table(&out, []string{dir}); err != nil {
		t.Fatal(err)
	}
	return out.String(), strings.Split(strings.TrimSpace(out.String()), "\n")
}

// TestAgentTableOneTurn: sessions of one turn have no turns 2+: the table
// says n/a there (it used to take the median of nothing and panic).
func TestAgentTableOneTurn(t *testing.T) {
	f := startAgentFake(t, nil)
	dir := t.TempDir()
	cfg := smallAgentConfig(f.srv.URL)
	cfg.APIs, cfg.Turns, cfg.Label = []API{Chat}, 1, "fake:run1"
	r, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := benchio.WriteJSONFile(filepath.Join(dir, "fake-run1.json"), r); err != nil {
		t.Fatal(err)
	}
	table, lines := agentTable(t, dir)
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "| fake | chat | 1 |") || !strings.HasSuffix(lines[2], "| n/a | n/a | n/a | 0 |") {
		t.Fatalf("table:\n%s", table)
	}
}
