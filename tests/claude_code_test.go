package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models"
)

// Claude Code (the pinned @anthropic-ai/claude-code of `make agent-clis`)
// runs unchanged against a real llmserve: `claude -p` in print mode, with
// ANTHROPIC_BASE_URL pointing at the server through a recording proxy, on
// a synthesized model with a 64k context whose answers an engine-level
// script chooses (enginetest.Scripted: the API, frontend, scheduler, KV
// cache and llama.cpp stay real). Every request the client sends is
// recorded as its shape (field paths, type values, header names) in
// testdata/agents/claude-code/*.golden, so a release that sends something
// new shows up as a diff (-update-agent-golden rewrites them).

var updateAgentGolden = flag.Bool("update-agent-golden", false, "rewrite the request shapes in testdata/agents")

// claudeModel is the served model's name: no Claude model id, as a local
// model's is not.
const claudeModel = "tiny-coder-64k"

// claudeBinary is the pinned claude of `make agent-clis`
// (LLMSERVE_AGENT_CLIS, which `make test-cgo` sets); the test skips,
// saying so, when the target has not run.
func claudeBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LLMSERVE_AGENT_CLIS")
	if dir == "" {
		t.Skip("LLMSERVE_AGENT_CLIS is not set: run `make agent-clis` (it prints the value) or the tests through `make test-cgo`")
	}
	bin := filepath.Join(dir, "claude")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("claude is not in LLMSERVE_AGENT_CLIS=%s (%v): run `make agent-clis`", dir, err)
	}
	return bin
}

// synthClaudeModel writes a small random-weight model with a 64k context
// and DeepSeek Coder's byte-level BPE vocabulary (it spells any text), so
// that Claude Code's ~20k-token prompt fits and prefills in seconds.
func synthClaudeModel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "coder-64k.gguf")
	shape := synth.Shape{Name: claudeModel, Of: "a test", Embd: 64, Layers: 2, Heads: 4, HeadsKV: 2, FF: 128, Context: 65536, RopeTheta: 10000, RMSEps: 1e-5}
	if _, err := synth.Write(path, synth.Options{Shape: shape, DType: synth.DType("f32"), VocabPath: "../engine/llamacpp/testdata/vocabs/ggml-vocab-deepseek-coder.gguf", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	return path
}

// recordedRequest is one request the client sent, and the answer's usage
// (from a stream's message_delta or a message's usage).
type recordedRequest struct {
	method, path string
	header       http.Header
	body         []byte
	usage        messagesUsageJSON
}

type messagesUsageJSON struct {
	InputTokens          int `json:"input_tokens"`
	CacheReadInputTokens int `json:"cache_read_input_tokens"`
	OutputTokens         int `json:"output_tokens"`
}

// recorder is a reverse proxy in front of the server that keeps every
// request and reads the usage of every Messages answer.
type recorder struct {
	mu   sync.Mutex
	reqs []*recordedRequest
}

func (rc *recorder) requests() []*recordedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

func startRecorder(t *testing.T, target string) (*recorder, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rc := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(resp *http.Response) error {
		rr, _ := resp.Request.Context().Value(recordKey{}).(*recordedRequest)
		if rr == nil {
			return nil
		}
		resp.Body = &usageReader{ReadCloser: resp.Body, rr: rr, mu: &rc.mu}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rr := &recordedRequest{method: r.Method, path: r.URL.RequestURI(), header: r.Header.Clone(), body: body}
		if !strings.HasPrefix(r.UserAgent(), "Go-http-client") { // the test's own probes are not the client's
			rc.mu.Lock()
			rc.reqs = append(rc.reqs, rr)
			rc.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), recordKey{}, rr)))
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

type recordKey struct{}

// usageReader passes an answer through and keeps its last usage object.
type usageReader struct {
	io.ReadCloser
	rr  *recordedRequest
	mu  *sync.Mutex
	buf bytes.Buffer
}

func (u *usageReader) Read(p []byte) (int, error) {
	n, err := u.ReadCloser.Read(p)
	u.buf.Write(p[:n])
	if err != nil {
		u.parse()
	}
	return n, err
}

func (u *usageReader) parse() {
	var last messagesUsageJSON
	found := false
	sc := bufio.NewScanner(bytes.NewReader(u.buf.Bytes()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		var v struct {
			Usage   *messagesUsageJSON `json:"usage"`
			Message *struct {
				Usage *messagesUsageJSON `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal([]byte(line), &v) != nil {
			continue
		}
		switch {
		case v.Usage != nil:
			last, found = *v.Usage, true
		case v.Message != nil && v.Message.Usage != nil && !found:
			last = *v.Message.Usage
		}
	}
	u.mu.Lock()
	u.rr.usage = last
	u.mu.Unlock()
}

// claudeRun is one `claude -p` run's output.
type claudeRun struct {
	stdout, stderr string
}

// runClaude runs `claude -p prompt` in dir against base (the recorder),
// as a user would point it at a local server: ANTHROPIC_BASE_URL, a dummy
// key, the model, no telemetry or updates, a HOME of its own, and the
// context window the server reports (CLAUDE_CODE_MAX_CONTEXT_TOKENS, the
// setting Claude Code's docs give for a gateway's model it does not know).
func runClaude(t *testing.T, bin, base, dir string, window int, prompt string, args ...string) claudeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-p", prompt}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + t.TempDir(), "TERM=dumb",
		"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=dummy",
		"ANTHROPIC_MODEL=" + claudeModel, "ANTHROPIC_SMALL_FAST_MODEL=" + claudeModel, "ANTHROPIC_DEFAULT_HAIKU_MODEL=" + claudeModel,
		"CLAUDE_CODE_MAX_CONTEXT_TOKENS=" + strconv.Itoa(window),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	run := claudeRun{stdout: stdout.String(), stderr: stderr.String()}
	checkClaudeStderr(t, run.stderr)
	return run
}

// claudeSignal is the one line Claude Code 2.1 writes to stderr in print
// mode for any model id its built-in catalog does not list, whatever the
// server answers: a signal of its own, not a warning about the server or
// the model's window (those would read "doesn't recognize the model ...
// assumes a context window", and fail the test).
const claudeSignal = "[claude-code:unrecognized_model] "

// checkClaudeStderr fails on anything the client wrote to stderr but
// claudeSignal: an error, a warning about the model or its context window.
func checkClaudeStderr(t *testing.T, stderr string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if line == "" || strings.HasPrefix(line, claudeSignal) {
			continue
		}
		t.Errorf("claude wrote to stderr: %s", line)
	}
}

// anthropicWindow is the context window GET /v1/models reports to an
// Anthropic client (max_input_tokens), which the run gives Claude Code.
func anthropicWindow(t *testing.T, base string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/models/"+claudeModel, nil)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Type           string `json:"type"`
		MaxInputTokens int    `json:"max_input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.Type != "model" || m.MaxInputTokens != 65536 {
		t.Fatalf("GET /v1/models/%s: %+v (%v), want Anthropic's ModelInfo with max_input_tokens 65536", claudeModel, m, err)
	}
	return m.MaxInputTokens
}

// claudeTemplate is ChatML with the tools in a system block first, as
// Hermes-style templates (Qwen's) put them, so that a conversation that
// grows keeps its prefix; tool calls are written the Hermes way.
const claudeTemplate = `{% if tools %}<|im_start|>system
Tools:
{% for t in tools %}{{ t.function.name }}
{% endfor %}<|im_end|>
{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.content %}{{ m.content }}{% endif %}{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function.name }}</tool_call>{% endfor %}{% endif %}<|im_end|>
{% endfor %}<|im_start|>assistant
`

// claudeServer starts a server of the 64k model with script, behind a
// recorder.
func claudeServer(t *testing.T, script func(string) (string, bool)) (*recorder, string) {
	t.Helper()
	s := startServer(t, scripted(models.GenerativeConfig{Name: claudeModel, Path: synthClaudeModel(t), ChatTemplate: claudeTemplate}, script))
	return startRecorder(t, s.URL)
}

// Claude Code's print mode gets the model's text: exit 0, the text on
// stdout, nothing on stderr but its own signal, every request answered.
func TestClaudeCodePrint(t *testing.T) {
	bin := claudeBinary(t)
	const answer = "Hello from llmserve."
	rec, base := claudeServer(t, func(string) (string, bool) { return answer, true })
	run := runClaude(t, bin, base, t.TempDir(), anthropicWindow(t, base), "Say hello.")
	if strings.TrimSpace(run.stdout) != answer {
		t.Errorf("stdout %q, want %q", run.stdout, answer)
	}
	checkClaudeRequests(t, rec, "print")
}

// A whole agent session: Claude Code reads a file with its Read tool,
// which tells it to read another, then answers; three requests, streamed,
// each re-sending the conversation, each later one's prompt read from the
// prefix cache up to (nearly) everything before its new turn.
func TestClaudeCodeToolLoop(t *testing.T) {
	bin := claudeBinary(t)
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.txt"), filepath.Join(dir, "second.txt")
	if err := os.WriteFile(first, []byte("FIRST-DONE: now read second.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, []byte("SECOND-DONE: the word is pelican\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := func(path string) string {
		args, _ := json.Marshal(map[string]any{"name": "Read", "arguments": map[string]string{"file_path": path}})
		return "<tool_call>\n" + string(args) + "\n</tool_call>"
	}
	const answer = "The word is pelican."
	rec, base := claudeServer(t, func(prompt string) (string, bool) {
		switch {
		case strings.Contains(prompt, "SECOND-DONE"):
			return answer, true
		case strings.Contains(prompt, "FIRST-DONE"):
			return "Reading the second file." + call(second), true
		}
		return "Reading the first file." + call(first), true
	})
	run := runClaude(t, bin, base, dir, anthropicWindow(t, base), "Follow the instructions in first.txt.", "--allowedTools", "Read")
	if !strings.Contains(run.stdout, answer) {
		t.Errorf("stdout %q, want %q", run.stdout, answer)
	}
	var turns []*recordedRequest
	for _, r := range rec.requests() {
		if strings.HasPrefix(r.path, "/v1/messages") && !strings.Contains(r.path, "count_tokens") {
			turns = append(turns, r)
		}
	}
	if len(turns) < 3 {
		t.Fatalf("%d Messages requests, want 3 (two tool calls and the answer)", len(turns))
	}
	turns = turns[len(turns)-3:]
	for i, r := range turns {
		var body struct {
			Stream   bool              `json:"stream"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		prompt := r.usage.InputTokens + r.usage.CacheReadInputTokens
		t.Logf("turn %d: %d messages, prompt %d tokens, %d from the cache, %d out", i+1, len(body.Messages), prompt, r.usage.CacheReadInputTokens, r.usage.OutputTokens)
		if !body.Stream {
			t.Errorf("turn %d not streamed", i+1)
		}
		if i == 0 {
			continue
		}
		prev := turns[i-1].usage.InputTokens + turns[i-1].usage.CacheReadInputTokens
		// The cache holds whole 16-token blocks of what the previous turn
		// prefilled: at least all but its last block.
		if r.usage.CacheReadInputTokens < prev-16 || r.usage.CacheReadInputTokens >= prompt {
			t.Errorf("turn %d: %d of %d prompt tokens from the cache, want about the previous turn's %d", i+1, r.usage.CacheReadInputTokens, prompt, prev)
		}
	}
	checkClaudeRequests(t, rec, "tool_loop")
}

// checkClaudeRequests checks that every request was answered 2xx by the
// paths Claude Code uses, and compares their shapes with
// testdata/agents/claude-code/<name>.golden.
func checkClaudeRequests(t *testing.T, rec *recorder, name string) {
	t.Helper()
	shapes := map[string]map[string]bool{} // endpoint -> shape lines
	for _, r := range rec.requests() {
		ep := r.method + " " + r.path
		if shapes[ep] == nil {
			shapes[ep] = map[string]bool{}
		}
		for k := range r.header {
			shapes[ep]["header "+strings.ToLower(k)] = true
		}
		if len(r.body) > 0 {
			var v any
			if err := json.Unmarshal(r.body, &v); err != nil {
				t.Errorf("%s: body is not JSON: %v", ep, err)
				continue
			}
			jsonShape("body", v, shapes[ep])
		}
	}
	var b strings.Builder
	b.WriteString("# Request shapes Claude Code sent in TestClaudeCode*: per endpoint, the header\n# names, the body's field paths with their JSON types, and the values of \"type\"\n# fields (block, tool and edit types). Rewrite with -update-agent-golden.\n")
	for _, ep := range slices.Sorted(maps.Keys(shapes)) {
		fmt.Fprintf(&b, "\n%s\n", ep)
		for _, l := range slices.Sorted(maps.Keys(shapes[ep])) {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	path := filepath.Join("testdata", "agents", "claude-code", name+".golden")
	if *updateAgentGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-agent-golden to write it)", err)
	}
	if string(want) != b.String() {
		t.Errorf("Claude Code's requests differ from %s (a new client release? check what changed, then rerun with -update-agent-golden):\n got:\n%s\nwant:\n%s", path, b.String(), want)
	}
}

// jsonShape adds v's field paths (arrays as [], tool input schemas as one
// opaque object) with their JSON types to out, and the values of "type"
// fields.
func jsonShape(path string, v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if strings.HasSuffix(path, ".input_schema") || strings.HasSuffix(path, ".input") {
			out[path+": object"] = true
			return
		}
		out[path+": object"] = true
		for k, e := range x {
			p := path + "." + k
			if s, ok := e.(string); ok && k == "type" {
				out[p+" = "+s] = true
				continue
			}
			jsonShape(p, e, out)
		}
	case []any:
		out[path+": array"] = true
		for _, e := range x {
			jsonShape(path+"[]", e, out)
		}
	case string:
		out[path+": string"] = true
	case float64:
		out[path+": number"] = true
	case bool:
		out[path+": boolean"] = true
	case nil:
		out[path+": null"] = true
	}
}
