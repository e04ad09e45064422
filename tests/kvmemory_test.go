package tests

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmserve/llmserve/models/stories260k"
)

// synthLongContext writes the SmolLM2-135M shape (Q8_0, dummy weights)
// with a trained context of 32,768 tokens: a model whose KV, at one stream
// of max-model-len positions per sequence, held 1 GiB for one sequence.
func synthLongContext(t *testing.T) string { return synthContext(t, 32768) }

// synthContext writes the SmolLM2-135M shape with a trained context of
// ctx tokens.
func synthContext(t *testing.T, ctx int) string {
	t.Helper()
	vocab, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "long.gguf")
	if b, err := exec.Command(pdBinary(t), "synth", "--shape", "smollm2-135m", "--dtype", "q8_0", "--context", strconv.Itoa(ctx), "--vocab", vocab, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("synth: %v\n%s", err, b)
	}
	return out
}

// scrape reads one gauge (its first series) from /metrics, without a testing.T
// (for a goroutine that samples while the test drives requests).
func scrape(url, name string) (float64, error) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			return strconv.ParseFloat(rest[i+1:], 64)
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}

// rssBytes is a process's resident memory (VmRSS).
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestKVMemoryFollowsTokens: with every default (max-model-len the
// trained 32,768, max-num-seqs 64, the KV memory cap), 32 concurrent short
// requests all run at once (every first token arrives before any request
// ends), the KV memory the engine commits grows with them and goes back
// to its idle figure when they end.
func TestKVMemoryFollowsTokens(t *testing.T) {
	t.Parallel()
	model := synthLongContext(t)
	// The harness's own defaults are --threads 1 and --max-num-seqs 4:
	// give serve's default back.
	p := startServeProc(t, "--model", model, "--max-num-seqs", "64")
	if got := p.metric(t, "llmserve_kv_cache_paged", ""); got != 1 {
		t.Fatalf("llmserve_kv_cache_paged = %v", got)
	}
	if got := p.metric(t, "llmserve_kv_cache_slot_tokens", ""); got != 32768 {
		t.Fatalf("slot tokens %v, want the trained context 32768", got)
	}
	idle := p.metric(t, "llmserve_kv_cache_committed_bytes", "")
	idleRSS := rssBytes(t, p.cmd.Process.Pid)

	const n, maxTokens = 32, 48
	var (
		firsts   atomic.Int32
		finished atomic.Int32
		overlap  atomic.Bool // every first token came before any end
		mu       sync.Mutex
		peak     float64
	)
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			v, err := scrape(p.url, "llmserve_kv_cache_committed_bytes")
			if err != nil {
				continue
			}
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
		}
	})
	prompts := headPrompts(n)
	texts := make([]string, n)
	concurrently(n, func(i int) {
		s := openStream(t, p, prompts[i], maxTokens)
		if s == nil {
			return
		}
		defer s.resp.Body.Close()
		first := true
		for s.next(t) {
			if first {
				first = false
				if firsts.Add(1) == n && finished.Load() == 0 {
					overlap.Store(true)
				}
			}
		}
		finished.Add(1)
		if len(s.errs) > 0 {
			t.Errorf("stream %d: %v", i, s.errs)
		}
		texts[i] = s.text.String()
	})
	close(stop)
	sampler.Wait()
	if !overlap.Load() {
		t.Errorf("the 32 requests did not all run at once (%d first tokens before the first end)", firsts.Load())
	}
	// The bound: resident KV at most 1.25 × the tokens in use plus
	// a 16-token block per running sequence. Tokens in use are at most
	// every prompt and answer at once.
	bpt := p.metric(t, "llmserve_kv_cache_reserved_bytes", "") / (p.metric(t, "llmserve_kv_cache_slots", "") * 32768)
	inUse := 0
	for _, pr := range prompts {
		_, promptTokens := completion(t, p, pr, 1)
		inUse += promptTokens + maxTokens
	}
	if peak <= idle {
		t.Errorf("committed KV never grew: peak %v, idle %v", peak, idle)
	}
	if limit := (1.25*float64(inUse) + 16*n) * bpt; peak > limit {
		t.Errorf("committed KV peaked at %.0f bytes, above 1.25 × %d tokens in use + a block per sequence (%.0f)", peak, inUse, limit)
	}
	var got float64
	headWait(t, "committed KV back to its idle figure", func() bool {
		got = p.metric(t, "llmserve_kv_cache_committed_bytes", "")
		return got <= idle
	})
	afterRSS := rssBytes(t, p.cmd.Process.Pid)
	t.Logf("committed KV: idle %.0f, peak %.0f, after %.0f bytes; RSS idle %d MiB, after %d MiB (prefix cache %.1f MiB)",
		idle, peak, got, idleRSS>>20, afterRSS>>20, p.metric(t, "llmserve_prefix_cache_bytes", "")/(1<<20))
	for i, txt := range texts {
		if txt == "" {
			t.Errorf("stream %d: no text", i)
		}
	}
}

// TestKVMemoryPreemptsByTokens: with a KV memory cap of a few sequences'
// tokens, 12 concurrent requests that outgrow it are preempted (their KV
// goes to the prefix cache, they resume later) and each still answers
// exactly what it answers alone.
func TestKVMemoryPreemptsByTokens(t *testing.T) {
	t.Parallel()
	model := synthModel(t) // SmolLM2 shape, trained context 512
	ref := startServeProc(t, "--model", model)
	const n, maxTokens = 12, 120
	prompts := headPrompts(n)
	want := make([]string, n)
	for i, pr := range prompts {
		want[i], _ = completion(t, ref, pr, maxTokens)
	}
	// 22.5 KiB per token: 8 MiB hold 352 tokens, two or three requests'
	// prompts and answers (~140 tokens each) of the 12.
	p := startServeProc(t, "--model", model, "--max-num-seqs", "64", "--kv-cache-memory", "8MiB")
	got := make([]string, n)
	concurrently(n, func(i int) { got[i], _ = completion(t, p, prompts[i], maxTokens) })
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("request %d under preemption:\n got %q\nwant %q", i, got[i], want[i])
		}
	}
	if pre := p.metric(t, "vllm:num_preemptions_total", ""); pre == 0 {
		t.Error("no preemption counted: the cap did not bind")
	}
}

// TestLongPromptPacedBesideStreams: a 331-token prompt that arrives while
// 8 streams decode is computed in paced chunks (it is long: over
// --long-prefill-token-threshold 256), and its answer, like the streams',
// is exactly what it is alone: the chunking never changes a number. Paced
// means what holds on any machine, however its step times size the
// pacer's budget (scheduler/pacing.go): beside decodes, long prompts
// compute at most the threshold a step, so the prompt takes two steps at
// least; the server's own record says so (llmserve_paced_prefill_tokens,
// llmserve_request_prefill_chunks). The budget itself follows the
// machine: on two busy cores it can be 2 or 3 tokens a step, so the
// prompt is short enough (166 steps at 2) for the 300-token streams to
// outlast it.
func TestLongPromptPacedBesideStreams(t *testing.T) {
	t.Parallel()
	model := synthContext(t, 4096)
	p := startServeProc(t, "--model", model, "--max-num-seqs", "16", "--no-enable-prefix-caching", "--long-prefill-token-threshold", "256")
	long := strings.Repeat("Once upon a time, there was a little girl named Lily who liked to play. ", 15)
	prompts := headPrompts(8)
	const streamTokens, longTokens = 300, 12
	wantLong, longPromptTokens := completion(t, p, long, longTokens)
	if longPromptTokens <= 300 {
		t.Fatalf("the long prompt has %d tokens, want over 300", longPromptTokens)
	}
	want := make([]string, len(prompts))
	concurrently(len(prompts), func(i int) { want[i], _ = completion(t, p, prompts[i], streamTokens) })

	steps := p.metric(t, "llmserve_engine_steps_total", "")
	// The record of pacing: steps where long prompts computed beside
	// decodes, their tokens, those steps within the threshold, and
	// finished requests whose prompt took more than one step.
	type record struct{ paced, tokens, within, split float64 }
	read := func() record {
		return record{
			paced:  p.metric(t, "llmserve_paced_prefill_tokens_count", ""),
			tokens: p.metric(t, "llmserve_paced_prefill_tokens_sum", ""),
			within: p.metric(t, "llmserve_paced_prefill_tokens_bucket", `le="256"`),
			split:  p.metric(t, "llmserve_request_prefill_chunks_count", "") - p.metric(t, "llmserve_request_prefill_chunks_bucket", `le="1"`),
		}
	}
	// The scenario needs the streams to outlast the long prompt: it must
	// arrive, be computed and answer while they decode. On a machine busy
	// enough to hold this test back for the streams' whole decode, the
	// long prompt can come after them; then the run shows nothing about
	// pacing and is made again (at most 3 times).
	var before, after record
	got := make([]string, len(prompts))
	var gotLong string
	for attempt := 1; ; attempt++ {
		before = read()
		generated := p.metric(t, "vllm:generation_tokens_total", "")
		var wg sync.WaitGroup
		wg.Go(func() {
			concurrently(len(prompts), func(i int) {
				s := openStream(t, p, prompts[i], streamTokens)
				if s == nil {
					return
				}
				defer s.resp.Body.Close()
				for s.next(t) {
				}
				got[i] = s.text.String()
			})
		})
		// The long prompt arrives once the streams decode: their prompts
		// computed (running counts them from admission, so a prompt sent
		// then could join their prefill step, where nothing decodes to pace
		// beside) and at least one decode step made, two tokens each.
		headWait(t, "the streams decode", func() bool {
			return p.metric(t, "vllm:generation_tokens_total", "")-generated >= float64(2*len(prompts))
		})
		gotLong, _ = completion(t, p, long, longTokens)
		beside := p.metric(t, "vllm:num_requests_running", "") > 0
		wg.Wait()
		if beside {
			break
		}
		if attempt == 3 {
			t.Fatal("3 times the streams ended before the long prompt did: the machine is too busy for this scenario")
		}
		t.Logf("attempt %d: the streams ended before the long prompt; again", attempt)
	}
	after = read()
	// Only the long prompt is long, and only it can take more than one
	// step (the streams' prompts are short and never held back).
	if n := after.paced - before.paced; n < 1 {
		t.Errorf("no step computed the long prompt paced beside the streams")
	}
	if n := (after.paced - before.paced) - (after.within - before.within); n > 0 {
		t.Errorf("%v paced steps computed over 256 long-prompt tokens beside the streams", n)
	}
	if n := after.split - before.split; n != 1 {
		t.Errorf("%v requests' prompts took more than one step, want 1: the long prompt in chunks", n)
	}
	if gotLong != wantLong {
		t.Errorf("the long prompt beside streams:\n got %q\nwant %q", gotLong, wantLong)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("stream %d beside the long prompt:\n got %q\nwant %q", i, got[i], want[i])
		}
	}
	t.Logf("%v steps for 8 streams of %d tokens and a %d-token prompt, %v of them paced (%v long-prompt tokens)",
		p.metric(t, "llmserve_engine_steps_total", "")-steps, streamTokens, longPromptTokens, after.paced-before.paced, after.tokens-before.tokens)
}

// TestKVMemoryRefusesWhatCannotFit: a prompt longer than the KV memory cap
// holds is a 400 that names the numbers and the flag.
func TestKVMemoryRefusesWhatCannotFit(t *testing.T) {
	t.Parallel()
	p := startServeProc(t, "--kv-cache-memory", "64KiB") // 640 B a token: 96 tokens (whole blocks)
	code, body := p.post(t, "/v1/completions", map[string]any{
		"model": servedModel(t, p), "prompt": strings.Repeat("Once upon a time there was a girl. ", 20), "max_tokens": 4,
	})
	if code != http.StatusBadRequest || !strings.Contains(string(body), "--kv-cache-memory") || !strings.Contains(string(body), "holds 96 tokens") {
		t.Fatalf("%d %s; want a 400 naming the KV cache's 96 tokens and --kv-cache-memory", code, body)
	}
}
