package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/api"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

// agentCLI is the path of an agent CLI that `make agent-clis` installed
// (LLMSERVE_AGENT_CLIS, which `make test` sets); the test is skipped,
// saying so, when it is not installed.
func agentCLI(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("LLMSERVE_AGENT_CLIS")
	if dir == "" {
		t.Skipf("%s is not installed: run `make agent-clis` and set LLMSERVE_AGENT_CLIS to the folder it prints (make test does both)", name)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("LLMSERVE_AGENT_CLIS=%s has no %s: %v", dir, name, err)
	}
	return path
}

// synthAgentModel writes the stories260K shape (tiny and fast) with the
// stories vocabulary and a trained context of 64k tokens: an agent CLI's
// prompt (instructions, tools, environment) is some 10k tokens in this
// small vocabulary, and a session re-sends it every turn.
func synthAgentModel(t *testing.T) string {
	t.Helper()
	vocab, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "agent.gguf")
	if b, err := exec.Command(pdBinary(t), "synth", "--shape", "stories260k", "--dtype", "f32", "--context", "65536", "--vocab", vocab, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("synth: %v\n%s", err, b)
	}
	return out
}

// codexSession is a Codex CLI session's script: turn 1 runs a command
// (exec_command, a function tool), turn 2 writes a file with apply_patch
// (a freeform custom tool with a Lark grammar), turn 3 answers. Each
// turn's prompt holds the tool results before it (the template renders
// them as "tool" turns).
func codexSession(prompt string) (string, bool) {
	switch strings.Count(prompt, "<|im_start|>tool\n") {
	case 0:
		return "Let me run it.<tool_call>\n" + `{"name": "exec_command", "arguments": {"cmd": "echo codex-tool-ok"}}` + "\n</tool_call>", true
	case 1:
		return "<tool_call>\n" + `{"name": "apply_patch", "arguments": {"input": "*** Begin Patch\n*** Add File: hello.txt\n+hello from llmserve\n*** End Patch\n"}}` + "\n</tool_call>", true
	default:
		return codexFinal, true
	}
}

const codexFinal = "Done: the command printed codex-tool-ok and hello.txt is written."

// agentTemplate is hermesTemplate with the tools offered first, in the
// system turn, as the templates of models with tool support do (Qwen,
// Hermes): a conversation re-sent with a new turn then renders to a
// prompt that starts with the previous turn's whole prompt.
const agentTemplate = `{% if tools %}<|im_start|>system
Tools:
{% for t in tools %}{{ t.function.name }}
{% endfor %}<|im_end|>
{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.content %}{{ m.content }}{% endif %}{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function.name }}</tool_call>{% endfor %}{% endif %}<|im_end|>
{% endfor %}<|im_start|>assistant
`

// TestCodexExec runs the real Codex CLI (`codex exec`, the pinned npm
// release) against a real llmserve over the Responses API, as a user
// would configure it: a model_providers entry with wire_api "responses"
// and model_catalog_url at /v1/models. The model (a real model whose
// answers the engine double scripts, so the API path is the real one)
// calls exec_command, then apply_patch (a custom tool), then answers;
// Codex runs both tools and re-sends the whole conversation each turn
// (store false). The test fails on a non-zero exit, on any error or
// warning Codex reports (one about the model's metadata included), when
// the answer is not printed, when a later turn's prompt does not hit the
// prefix cache for what the turn before sent, and when the requests'
// shapes differ from testdata/agents/codex.
func TestCodexExec(t *testing.T) {
	codex := agentCLI(t, "codex")
	var mu sync.Mutex
	var prompts []string
	script := func(prompt string) (string, bool) {
		mu.Lock()
		prompts = append(prompts, prompt)
		mu.Unlock()
		return codexSession(prompt)
	}
	s := startServer(t, scripted(models.GenerativeConfig{Path: synthAgentModel(t), ChatTemplate: agentTemplate, MaxNumSeqs: 4}, script))
	reg := prometheus.NewRegistry()
	h, err := api.NewHandler(api.Options{Registry: s.registry, Logger: slog.New(slog.DiscardHandler), Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	rec := &shapeRecorder{next: h}
	srv := httptest.NewServer(rec)
	defer srv.Close()

	home, work := t.TempDir(), t.TempDir()
	config := fmt.Sprintf(`model = %q
model_provider = "llmserve"
check_for_update_on_startup = false

[model_providers.llmserve]
name = "llmserve"
base_url = "%s/v1"
env_key = "LLMSERVE_API_KEY"
wire_api = "responses"
model_catalog_url = "%s/v1/models"

[features]
api_key_model_discovery = true

[analytics]
enabled = false
`, s.model.Name(), srv.URL, srv.URL)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "exec", "--json", "--skip-git-repo-check", "--ephemeral",
		"--dangerously-bypass-approvals-and-sandbox", "-C", work, "Run `echo codex-tool-ok`, then write hello.txt.")
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "LLMSERVE_API_KEY=dummy", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdin = strings.NewReader("")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("codex stderr:\n%s", stderr.Bytes())
	if err != nil {
		t.Fatalf("codex exec: %v\nstdout:\n%s", err, stdout.Bytes())
	}

	// The events: no error, no warning; both tools ran; the answer.
	var answer string
	var commands, patches int
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Type  string `json:"type"`
			Item  map[string]any
			Error any `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("codex printed a line that is no event: %q", sc.Text())
		}
		switch ev.Type {
		case "error", "turn.failed":
			t.Errorf("codex reported %s", sc.Text())
		case "item.completed":
			switch ev.Item["type"] {
			case "error":
				t.Errorf("codex reported an error or warning: %v", ev.Item["message"])
			case "agent_message":
				answer, _ = ev.Item["text"].(string)
			case "command_execution":
				commands++
				if out, _ := ev.Item["aggregated_output"].(string); !strings.Contains(out, "codex-tool-ok") {
					t.Errorf("the command's output: %v", ev.Item)
				}
			case "file_change":
				patches++
			}
		}
	}
	if answer != codexFinal {
		t.Errorf("codex printed the answer %q, want %q", answer, codexFinal)
	}
	if commands != 1 || patches != 1 {
		t.Errorf("codex ran %d commands and %d patches, want 1 and 1", commands, patches)
	}
	if b, err := os.ReadFile(filepath.Join(work, "hello.txt")); err != nil || string(b) != "hello from llmserve\n" {
		t.Errorf("apply_patch wrote %q, %v", b, err)
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "ERROR") || strings.Contains(line, "Model metadata") {
			t.Errorf("codex logged: %s", line)
		}
	}

	// Three turns, each re-sending the conversation; each later turn's
	// prompt was cached up to where the turn before ended.
	reqs := rec.requests()
	var turns []respUsage
	for _, r := range reqs {
		if r.Path != "/v1/responses" {
			continue
		}
		if r.Status != 200 {
			t.Fatalf("POST /v1/responses answered %d: %s", r.Status, r.Answer)
		}
		turns = append(turns, finalUsage(t, r.Answer))
	}
	if len(turns) != 3 {
		t.Fatalf("%d Responses requests, want 3 turns", len(turns))
	}
	for i := 1; i < len(turns); i++ {
		prev, cur := turns[i-1], turns[i]
		t.Logf("turn %d: %d input tokens, %d cached (turn %d sent %d)", i+1, cur.Input, cur.Cached, i, prev.Input)
		// All but the last partial block of the turn before's prompt.
		if cur.Cached < prev.Input-16 {
			t.Errorf("turn %d: %d of %d prompt tokens cached; want about the %d the turn before sent", i+1, cur.Cached, cur.Input, prev.Input)
		}
	}
	t.Logf("turn 1: %d input tokens", turns[0].Input)
	checkShapes(t, "codex", "responses", requestShapes(reqs, "POST", "/v1/responses"))
	checkShapes(t, "codex", "models", requestShapes(reqs, "GET", "/v1/models"))
}

// respUsage is a finished response's usage.
type respUsage struct{ Input, Cached int }

// finalUsage reads the usage of a streamed response's last event.
func finalUsage(t *testing.T, stream []byte) respUsage {
	t.Helper()
	var u respUsage
	found := false
	for _, line := range strings.Split(string(stream), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				Usage struct {
					InputTokens        int `json:"input_tokens"`
					InputTokensDetails struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"input_tokens_details"`
				} `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && (ev.Type == "response.completed" || ev.Type == "response.incomplete") {
			u = respUsage{Input: ev.Response.Usage.InputTokens, Cached: ev.Response.Usage.InputTokensDetails.CachedTokens}
			found = true
		}
	}
	if !found {
		t.Fatalf("a streamed response without its final event: %s", stream)
	}
	return u
}

// TestResponsesCustomToolLark: a custom tool named by tool_choice holds
// the real model's answer to its Lark grammar (Codex's apply_patch
// grammar, translated to GBNF and parsed by llama.cpp): a scripted patch
// goes through the sampler's grammar and comes back as the call's input;
// an answer the grammar refuses never comes back (the engine double fails
// the sequence: a real model held to the grammar could not write it).
func TestResponsesCustomToolLark(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
	answer := patch
	var mu sync.Mutex
	script := func(string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		return answer, true
	}
	s := startServer(t, scripted(models.GenerativeConfig{ChatTemplate: agentTemplate}, script))
	url, stop := responsesServer(t, s, "")
	defer stop()
	// Codex CLI 0.171's apply_patch grammar, as its requests carry it.
	lark, err := os.ReadFile("../grammar/testdata/codex_apply_patch.lark")
	if err != nil {
		t.Fatal(err)
	}
	grammar, _ := json.Marshal(string(lark))
	body := `{"model":"` + s.model.Name() + `","input":"Add a.txt","max_output_tokens":64,"store":false,` +
		`"tools":[{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":` + string(grammar) + `}}],` +
		`"tool_choice":{"type":"custom","name":"apply_patch"}}`
	code, v := respPost(t, url+"/v1/responses", body)
	out, _ := v["output"].([]any)
	if code != 200 || len(out) != 1 {
		t.Fatalf("%d %v", code, v)
	}
	call := out[0].(map[string]any)
	if call["type"] != "custom_tool_call" || call["name"] != "apply_patch" || call["input"] != patch {
		t.Fatalf("output %v", call)
	}
	mu.Lock()
	answer = "diff --git a/a.txt b/a.txt\n" // not a patch in the grammar
	mu.Unlock()
	code, v = respPost(t, url+"/v1/responses", body)
	t.Logf("an answer outside the grammar: %d %v", code, v)
	if out, _ := v["output"].([]any); code == 200 && len(out) == 1 && out[0].(map[string]any)["input"] == "diff --git a/a.txt b/a.txt\n" {
		t.Fatalf("the grammar let through %v", v)
	}
}

// TestHeadPromptCacheKey: under `llmserve head`, Responses requests with
// the same prompt_cache_key go to one worker though their prompts share
// nothing (the key, not the prefix, routes them); requests with other
// keys still spread over both workers.
func TestHeadPromptCacheKey(t *testing.T) {
	t.Parallel()
	w1, w2 := startWorkerProc(t, "both"), startWorkerProc(t, "both")
	h := startHeadProc(t, []*headWorker{w1, w2})
	model := servedModel(t, h)
	turn := func(prompt, key string) {
		code, body := h.post(t, "/v1/responses", map[string]any{"model": model, "input": prompt, "max_output_tokens": 4,
			"temperature": 0, "store": false, "prompt_cache_key": key})
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
	}
	count := func(w *headWorker) float64 {
		return h.metric(t, "llmserve_router_requests_total", `worker="`+w.addr+`"`)
	}
	prompts := headPrompts(16)
	for _, p := range prompts[:8] {
		turn(p, "session-a")
	}
	a1, a2 := count(w1), count(w2)
	if (a1 != 8 || a2 != 0) && (a1 != 0 || a2 != 8) {
		t.Fatalf("the 8 requests of one key went %v and %v to the two workers; want all to one", a1, a2)
	}
	for i, p := range prompts[8:] {
		turn(p, fmt.Sprintf("session-%d", i))
	}
	if count(w1) == a1 || count(w2) == a2 {
		t.Errorf("requests with 8 other keys went %v and %v to the workers; want both used", count(w1)-a1, count(w2)-a2)
	}
}
