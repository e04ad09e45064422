package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmserve/llmserve/api/webui"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

// The chat page (api/webui) driven in headless Chromium against the real
// server: the picker lists the served models, an answer streams in and
// grows, the history goes with the next turn, an error answer is shown,
// and the stop button ends a running sequence on the server.
//
// No wait below is a timing assertion: each polls a condition with a
// deadline far beyond what a loaded machine needs.

// heavyModel is the name of the dummy model with SmolLM2-135M's shape
// served beside stories260K: ~100 times slower per token, so that an
// answer of 2000 tokens lasts long enough to be stopped mid-stream.
const heavyModel = "smollm2-135m-dummy"

// wait is the deadline of each wait on the page or the server.
const wait = 60 * time.Second

func TestChatPage(t *testing.T) {
	p := openBrowser(t)
	s := startServer(t, models.GenerativeConfig{}, models.GenerativeConfig{
		Name: heavyModel, Path: writeHeavyModel(t), MaxNumSeqs: 1, InitialSeqs: 1,
	})
	p.do(chromedp.Navigate(s.URL + "/"))
	p.waitFor("the model list", `document.body.dataset.state === "idle"`)
	if got, want := evalJS[[]string](p, `Array.from(document.getElementById("model").options, o => o.value)`), []string{stories260k.Name, heavyModel}; !slices.Equal(got, want) {
		t.Fatalf("model picker offers %q, want %q", got, want)
	}

	// The answer streams in: the page appends each delta as it comes, and
	// the whole is the server's greedy answer to the same request.
	p.do(
		p.set("model", stories260k.Name),
		p.set("temperature", "0"),
		p.set("max-tokens", "60"),
	)
	p.eval(`window.textLengths = [];
		new MutationObserver((records) => {
			for (const r of records) if (r.type === "characterData") window.textLengths.push(r.oldValue.length, r.target.length);
		}).observe(document.getElementById("transcript"), {subtree: true, characterData: true, characterDataOldValue: true})`)
	first := p.send("Once upon a time", "done")
	lengths := evalJS[[]int](p, `window.textLengths`)
	if first.text == "" || len(lengths) < 4 || lengths[len(lengths)-1] != evalJS[int](p, `answerText().length`) {
		t.Fatalf("answer %q grew through lengths %v", first.text, lengths)
	}
	for i := 2; i < len(lengths); i += 2 {
		if lengths[i] <= lengths[i-2] {
			t.Fatalf("the answer did not grow at each delta: lengths %v", lengths)
		}
	}
	want := chat(t, s, map[string]any{"model": stories260k.Name, "temperature": 0, "max_tokens": 60,
		"messages": []map[string]string{{"role": "user", "content": "Once upon a time"}}})
	if first.text != want.content || first.tokens != want.completion || first.promptTokens != want.prompt {
		t.Fatalf("page: %q (%d+%d tokens), server: %q (%d+%d tokens)", first.text, first.promptTokens, first.tokens, want.content, want.prompt, want.completion)
	}
	if first.chunks < 2 || first.rate <= 0 {
		t.Fatalf("readout: %d chunks, %v tokens/s", first.chunks, first.rate)
	}

	// The next turn carries the history: its prompt is the server's for
	// the whole conversation.
	second := p.send("And then?", "done")
	want = chat(t, s, map[string]any{"model": stories260k.Name, "temperature": 0, "max_tokens": 60,
		"messages": []map[string]string{
			{"role": "user", "content": "Once upon a time"},
			{"role": "assistant", "content": first.text},
			{"role": "user", "content": "And then?"},
		}})
	if second.text != want.content || second.promptTokens != want.prompt {
		t.Fatalf("second turn, page: %q (prompt %d tokens), server: %q (prompt %d tokens)", second.text, second.promptTokens, want.content, want.prompt)
	}
	if roles := evalJS[[]string](p, `Array.from(document.querySelectorAll("#transcript .msg"), m => m.dataset.role)`); !slices.Equal(roles, []string{"user", "assistant", "user", "assistant"}) {
		t.Fatalf("transcript roles %q", roles)
	}

	// An error answer (400) is shown with the field to fix; the turn is
	// dropped and its text goes back into the message box.
	p.do(p.set("temperature", "-1"))
	p.send("Hello", "error")
	if msg := evalJS[string](p, `document.getElementById("error").textContent`); !strings.Contains(msg, "temperature") {
		t.Fatalf("error shown: %q", msg)
	}
	if box := evalJS[string](p, `document.getElementById("prompt").value`); box != "Hello" {
		t.Fatalf("message box holds %q after the error", box)
	}
	if roles := evalJS[[]string](p, `Array.from(document.querySelectorAll("#transcript .msg"), m => m.dataset.role)`); len(roles) != 4 {
		t.Fatalf("transcript roles after the error %q, want the 4 turns before it", roles)
	}

	// Stop mid-stream: the heavy model's answer of up to 2000 tokens is
	// still running on the server when the button is pressed, and the
	// server ends the sequence as an abort.
	waitUntil(t, "the earlier requests to end", func() bool { return s.metric(t, "vllm:num_requests_running") == 0 })
	p.do(
		chromedp.Click(chromedp.ID("clear")),
		p.set("prompt", ""),
		p.set("model", heavyModel),
		p.set("temperature", ""),
		p.set("max-tokens", "2000"),
		p.set("extra", `{"ignore_eos": true}`),
		chromedp.SendKeys(chromedp.ID("prompt"), "Once upon a time"),
		chromedp.Click(chromedp.ID("send")),
	)
	p.waitFor("the answer to start", `answerText().length > 0`)
	n := evalJS[int](p, `answerText().length`)
	p.waitFor("the answer to grow", fmt.Sprintf(`answerText().length > %d`, n))
	if running := modelMetric(t, s, "vllm:num_requests_running", heavyModel); running != 1 {
		t.Fatalf("%v requests running while the answer streams, want 1", running)
	}
	p.do(chromedp.Click(chromedp.ID("stop")))
	waitUntil(t, "no request running after stop, and the server's count of aborted requests at 1", func() bool {
		return s.metric(t, "vllm:num_requests_running") == 0 &&
			modelMetric(t, s, "vllm:request_success_total", heavyModel, "finished_reason", "abort") == 1
	})
	p.waitFor("the page to say stopped", `document.body.dataset.state === "stopped"`)
	stopped := p.readout()
	if stopped.text == "" || stopped.chunks < 2 {
		t.Fatalf("the stopped answer was not kept: %+v", stopped)
	}
	t.Logf("stopped after %d tokens (%.1f tokens/s)", stopped.chunks, stopped.rate)
	p.checkConsole()
}

// The page sends the API key the user types, and shows an error event in
// the stream ({"error": ...} after some text, as the server sends when a
// sequence fails mid-answer) while keeping the text that came before it.
// The server cannot fail on demand, so a fake API beside the real page
// sends it.
func TestChatPageKeyAndStreamErrors(t *testing.T) {
	p := openBrowser(t)
	const key = "sekret"
	authorized := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"missing or invalid API key","type":"AuthenticationError","param":null,"code":401}}`)
			return false
		}
		return true
	}
	mux := http.NewServeMux()
	ui := webui.Handler(http.NotFoundHandler())
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET "+webui.Prefix, ui)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		if authorized(w, r) {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"fake","object":"model"}]}`)
		}
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		// An event split across writes, CRLF line ends, a comment line and
		// a two-byte character: all of them SSE as a server may send it.
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Once"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"cont`)
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, `ent":" upon é"}}]}`+"\r\n\r\n: comment\n\n")
		_, _ = io.WriteString(w, `data: {"error":{"message":"the engine failed; other requests are not affected","type":"InternalServerError","code":500}}`+"\n\ndata: [DONE]\n\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	p.do(chromedp.Navigate(srv.URL + "/"))
	p.waitFor("the model list to fail", `document.body.dataset.state === "idle"`)
	if msg := evalJS[string](p, `document.getElementById("error").textContent`); !strings.Contains(msg, "missing or invalid API key") || !strings.Contains(msg, "API key.") {
		t.Fatalf("error shown without the key: %q", msg)
	}
	p.do(p.set("api-key", key))
	p.waitFor("the model list with the key", `document.getElementById("model").value === "fake"`)
	got := p.send("Once upon a time", "error")
	if got.text != "Once upon é" {
		t.Fatalf("text before the error: %q", got.text)
	}
	if msg := evalJS[string](p, `document.getElementById("error").textContent`); !strings.Contains(msg, "the engine failed") {
		t.Fatalf("error shown: %q", msg)
	}
	p.checkConsole()
}

// writeHeavyModel writes a Q8_0 model of SmolLM2-135M's shape (dummy
// weights, stories260K's vocabulary) with a context of 2048 tokens.
func writeHeavyModel(t *testing.T) string {
	t.Helper()
	vocab, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	shape, err := synth.LookupShape("smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), heavyModel+".gguf")
	if _, err := synth.Write(path, synth.Options{Shape: shape, DType: synth.Q8_0, VocabPath: vocab, Context: 2048, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

// chromium finds the browser; without one the test fails, since a skipped
// browser test is a test nobody runs.
func chromium(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	for _, name := range names {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Fatalf("the chat page's browser test needs headless Chromium and found none of %q on PATH: `make test` installs it "+
		"(its browser-deps target runs apt-get install chromium), or install it yourself", names)
	return ""
}

// openBrowser starts headless Chromium for the test and returns its tab.
// The browser's console is watched for exceptions and security errors (see
// page.checkConsole).
func openBrowser(t *testing.T) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		// The sandbox needs user namespaces that containers and root
		// lack; the browser only visits this test's loopback server.
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	// A stop for a hung test only: every wait has its own deadline.
	ctx, cancel := context.WithTimeout(tabCtx, 5*time.Minute)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelTab()
		cancelAlloc()
		t.Fatalf("start %s: %v", chromium(t), err)
	}
	p := &page{t: t, ctx: ctx}
	messages := chromedp.Console(ctx)
	p.wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
				p.mu.Lock()
				p.bad = append(p.bad, m.String())
				p.mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		cancelTab()
		cancelAlloc()
		p.wg.Wait()
	})
	return p
}

// page drives the chat page in one browser tab.
type page struct {
	t   *testing.T
	ctx context.Context //nolint:containedctx // the tab's context, for the test's lifetime
	wg  sync.WaitGroup  // the console reader
	mu  sync.Mutex
	bad []string // console messages that fail the test; guarded by mu
}

// turn is what the page showed for one message.
type turn struct {
	text                 string
	tokens, promptTokens int
	chunks               int
	rate                 float64
}

// answerText, defined in the page by page.eval's prelude, is the text of
// the last assistant turn.
const prelude = `window.answerText = () => {
	const all = document.querySelectorAll("#transcript .msg.assistant .content");
	return all.length ? all[all.length - 1].textContent : "";
};`

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%v (page: %s)", err, p.describe())
	}
}

// set is an action that sets a form field's value as a user's edit does
// (input and change events), and checks that the field took it (a select
// takes only the value of one of its options).
func (p *page) set(id, value string) chromedp.Action[chromedp.Void] {
	args, _ := json.Marshal([]string{id, value})
	js := `((id, value) => {
		const el = document.getElementById(id);
		el.value = value;
		el.dispatchEvent(new Event("input", {bubbles: true}));
		el.dispatchEvent(new Event("change", {bubbles: true}));
		return el.value;
	})(...` + string(args) + `)`
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		got, err := chromedp.Evaluate[string](js)(ctx, t)
		if err == nil && got != value {
			err = fmt.Errorf("#%s took the value %q, not %q", id, got, value)
		}
		return err
	})
}

func (p *page) eval(js string) {
	p.t.Helper()
	p.do(chromedp.Evaluate[chromedp.Void](prelude + js))
}

func evalJS[T any](p *page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](prelude+js))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor polls the JavaScript condition until it holds.
func (p *page) waitFor(what, cond string) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.PollFunction[chromedp.Void](`() => { `+prelude+` return `+cond+`; }`,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(wait)))
	if err != nil {
		p.t.Fatalf("waiting for %s: %v (page: %s)", what, err, p.describe())
	}
}

// send types a message, sends it, waits for the page to reach state and
// returns the answer and readout.
func (p *page) send(msg, state string) turn {
	p.t.Helper()
	p.do(chromedp.SendKeys(chromedp.ID("prompt"), msg), chromedp.Click(chromedp.ID("send")))
	p.waitFor("state "+state, `document.body.dataset.state === "`+state+`"`)
	return p.readout()
}

// readout returns the last answer and the readout of its request.
func (p *page) readout() turn {
	p.t.Helper()
	d := evalJS[map[string]string](p, `({text: answerText(), ...document.getElementById("tps").dataset})`)
	num := func(k string) int { n, _ := strconv.Atoi(d[k]); return n }
	rate, _ := strconv.ParseFloat(d["rate"], 64)
	if d["final"] != "true" {
		p.t.Fatalf("the readout is not final after the answer: %v", d)
	}
	return turn{text: d["text"], tokens: num("tokens"), promptTokens: num("promptTokens"), chunks: num("chunks"), rate: rate}
}

// describe is the page's state, for failure messages.
func (p *page) describe() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({state: document.body.dataset.state,
		status: document.getElementById("status").textContent, error: document.getElementById("error").textContent,
		readout: document.getElementById("tps").textContent})`))
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return v
}

// checkConsole fails the test for any exception or security error the
// page logged.
func (p *page) checkConsole() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bad) > 0 {
		p.t.Fatalf("the page logged errors:\n%s", strings.Join(p.bad, "\n"))
	}
}

// answer is the server's own answer to a chat request.
type answer struct {
	content            string
	prompt, completion int
}

func chat(t *testing.T, s *server, body map[string]any) answer {
	t.Helper()
	var resp struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if code, _ := s.post(t, "/v1/chat/completions", body, &resp); code != 200 || len(resp.Choices) != 1 {
		t.Fatalf("chat: status %d, %+v", code, resp)
	}
	return answer{resp.Choices[0].Message.Content, resp.Usage.PromptTokens, resp.Usage.CompletionTokens}
}

// modelMetric is the value of a counter or gauge for one model; more
// gives further label pairs the series must have.
func modelMetric(t *testing.T, s *server, name, model string, more ...string) float64 {
	t.Helper()
	want := map[string]string{"model_name": model}
	for i := 0; i+1 < len(more); i += 2 {
		want[more[i]] = more[i+1]
	}
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(t, wait, 10*time.Millisecond, cond) {
		t.Fatalf("%s: not after %v", what, wait)
	}
}
