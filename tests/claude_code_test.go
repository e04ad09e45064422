package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/api"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models"
)

// Claude Code (the pinned @anthropic-ai/claude-code of `make agent-clis`)
// runs unchanged against a real llmserve: `claude -p` in print mode, with
// ANTHROPIC_BASE_URL pointing at the server through the shape recorder
// (agents_shapes_test.go), on a real model with a 64k context whose
// answers the engine double scripts (the API, frontend, scheduler, KV cache
// and llama.cpp stay real). The shapes of the requests it sent are kept in
// testdata/agents/claude-code (-update rewrites them).

// synthClaudeModel writes a small random-weight model (2 layers of 64)
// with a 64k context and DeepSeek Coder's byte-level BPE vocabulary:
// Claude Code's prompt (its instructions, tools, environment) is some
// 4,500 tokens in it, against 11,000 in the stories vocabulary of
// synthAgentModel, so a session takes seconds, not minutes.
func synthClaudeModel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "claude-64k.gguf")
	shape := synth.Shape{Name: "coder-64k", Of: "a test", Embd: 64, Layers: 2, Heads: 4, HeadsKV: 2, FF: 128, Context: 65536, RopeTheta: 10000, RMSEps: 1e-5}
	if _, err := synth.Write(path, synth.Options{Shape: shape, DType: synth.DType("f32"), VocabPath: "../engine/llamacpp/testdata/vocabs/ggml-vocab-deepseek-coder.gguf", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	return path
}

// claudeServer serves the Claude model with script behind a shape
// recorder; it returns the recorder, the URL and the model's name.
func claudeServer(t *testing.T, script func(string) (string, bool)) (*shapeRecorder, string, string) {
	t.Helper()
	s := startServer(t, scripted(models.GenerativeConfig{Path: synthClaudeModel(t), ChatTemplate: agentTemplate, MaxNumSeqs: 4}, script))
	reg := prometheus.NewRegistry()
	h, err := api.NewHandler(api.Options{Registry: s.registry, Logger: slog.New(slog.DiscardHandler), Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	rec := &shapeRecorder{next: h}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv.URL, s.model.Name()
}

// anthropicWindow is the context window GET /v1/models/{id} reports to an
// Anthropic client (max_input_tokens), asked past the recorder.
func anthropicWindow(t *testing.T, rec *shapeRecorder, model string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/v1/models/"+model, nil)
	req.Header.Set("anthropic-version", "2023-06-01")
	w := httptest.NewRecorder()
	rec.next.ServeHTTP(w, req)
	var m struct {
		Type           string `json:"type"`
		MaxInputTokens int    `json:"max_input_tokens"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || m.Type != "model" || m.MaxInputTokens != 65536 {
		t.Fatalf("GET /v1/models/%s: %s (%v), want Anthropic's ModelInfo with max_input_tokens 65536", model, w.Body, err)
	}
	return m.MaxInputTokens
}

// claudeSignal is the one line Claude Code 2.1 writes to stderr in print
// mode for any model id its built-in catalog does not list, whatever the
// server answers: a signal of its own, not a warning about the server or
// the model's window (that one reads "doesn't recognize the model ...
// assumes a context window" and fails the test).
const claudeSignal = "[claude-code:unrecognized_model] "

// runClaude runs `claude -p prompt` in dir as a user points it at a local
// server: ANTHROPIC_BASE_URL, a dummy key, the model for every role, no
// telemetry or updates, a HOME of its own, and the context window the
// server reports as CLAUDE_CODE_MAX_CONTEXT_TOKENS (the setting Claude
// Code's docs give for a gateway's model it does not know). It fails on a
// non-zero exit and on anything on stderr but claudeSignal.
func runClaude(t *testing.T, base, model string, window int, dir, prompt string, args ...string) string {
	t.Helper()
	bin := agentCLI(t, "claude")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-p", prompt}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir(), "TERM=dumb",
		"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=dummy",
		"ANTHROPIC_MODEL=" + model, "ANTHROPIC_SMALL_FAST_MODEL=" + model, "ANTHROPIC_DEFAULT_HAIKU_MODEL=" + model,
		"CLAUDE_CODE_MAX_CONTEXT_TOKENS=" + strconv.Itoa(window),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin = strings.NewReader("")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" && !strings.HasPrefix(line, claudeSignal) {
			t.Errorf("claude wrote to stderr: %s", line)
		}
	}
	return stdout.String()
}

// messagesUsage is a Messages answer's usage: message_delta's for a
// stream, the message's otherwise.
type messagesUsage struct {
	InputTokens          int `json:"input_tokens"`
	CacheReadInputTokens int `json:"cache_read_input_tokens"`
	OutputTokens         int `json:"output_tokens"`
}

func messagesUsageOf(t *testing.T, answer []byte) messagesUsage {
	t.Helper()
	var u messagesUsage
	sc := bufio.NewScanner(bytes.NewReader(answer))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string         `json:"type"`
			Usage *messagesUsage `json:"usage"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "message_delta" && ev.Usage != nil {
			u = *ev.Usage
		}
	}
	return u
}

// checkClaudeRequests checks that every request was answered 200 and
// compares their shapes, and the headers' names and betas, with
// testdata/agents/claude-code/<name>.golden.
func checkClaudeRequests(t *testing.T, rec *shapeRecorder, name string) {
	t.Helper()
	reqs := rec.requests()
	var lines []string
	seen := map[string]bool{}
	for _, r := range reqs {
		if r.Status != http.StatusOK {
			t.Errorf("%s %s answered %d: %s", r.Method, r.Path, r.Status, r.Answer)
		}
		ep := r.Method + " " + r.Path
		if seen[ep] {
			continue
		}
		seen[ep] = true
		lines = append(lines, requestShapes(reqs, r.Method, r.Path)...)
		hs := map[string]bool{}
		for _, q := range reqs {
			if q.Method != r.Method || q.Path != r.Path {
				continue
			}
			for k, v := range q.Header {
				k = strings.ToLower(k)
				hs[ep+" header "+k] = true
				if k == "anthropic-beta" {
					for _, b := range strings.Split(strings.Join(v, ","), ",") {
						hs[ep+" header anthropic-beta "+strings.TrimSpace(b)] = true
					}
				}
			}
		}
		for k := range hs {
			lines = append(lines, k)
		}
	}
	slices.Sort(lines)
	checkShapes(t, "claude-code", name, slices.Compact(lines))
}

// Claude Code's print mode gets the model's text: exit 0, the text on
// stdout, nothing on stderr but its own signal, every request answered.
func TestClaudeCodePrint(t *testing.T) {
	agentCLI(t, "claude")
	const answer = "Hello from llmserve."
	rec, base, model := claudeServer(t, func(string) (string, bool) { return answer, true })
	out := runClaude(t, base, model, anthropicWindow(t, rec, model), t.TempDir(), "Say hello.")
	if strings.TrimSpace(out) != answer {
		t.Errorf("stdout %q, want %q", out, answer)
	}
	checkClaudeRequests(t, rec, "print")
}

// A whole agent session: Claude Code reads a file with its Read tool,
// which tells it to read another, then answers: three requests, streamed,
// each re-sending the conversation, each later one's prompt read from the
// prefix cache up to where the turn before's prompt ended.
func TestClaudeCodeToolLoop(t *testing.T) {
	agentCLI(t, "claude")
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
	rec, base, model := claudeServer(t, func(prompt string) (string, bool) {
		switch {
		case strings.Contains(prompt, "SECOND-DONE"):
			return answer, true
		case strings.Contains(prompt, "FIRST-DONE"):
			return "Reading the second file." + call(second), true
		}
		return "Reading the first file." + call(first), true
	})
	out := runClaude(t, base, model, anthropicWindow(t, rec, model), dir, "Follow the instructions in first.txt.", "--allowedTools", "Read")
	if !strings.Contains(out, answer) {
		t.Errorf("stdout %q, want %q", out, answer)
	}
	var turns []messagesUsage
	for _, r := range rec.requests() {
		if r.Method != http.MethodPost || r.Path != "/v1/messages" {
			continue
		}
		body, _ := r.Body.(map[string]any)
		if stream, _ := body["stream"].(bool); !stream {
			t.Errorf("turn %d not streamed", len(turns)+1)
		}
		turns = append(turns, messagesUsageOf(t, r.Answer))
	}
	if len(turns) != 3 {
		t.Fatalf("%d Messages requests, want 3 (two tool calls and the answer)", len(turns))
	}
	for i, u := range turns {
		prompt := u.InputTokens + u.CacheReadInputTokens
		t.Logf("turn %d: prompt %d tokens, %d from the cache, %d out", i+1, prompt, u.CacheReadInputTokens, u.OutputTokens)
		if i == 0 {
			continue
		}
		prev := turns[i-1].InputTokens + turns[i-1].CacheReadInputTokens
		// All but the last partial block of the turn before's prompt.
		if u.CacheReadInputTokens < prev-16 || u.CacheReadInputTokens >= prompt {
			t.Errorf("turn %d: %d of %d prompt tokens from the cache, want about the turn before's %d", i+1, u.CacheReadInputTokens, prompt, prev)
		}
	}
	checkClaudeRequests(t, rec, "tool_loop")
}
