package tests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

// The requests that crashed or misled the server (issue 5), each against
// the real server: a 400 naming the field, and the server keeps serving the
// reference text afterwards.
func TestReproducersGetA400(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	hugePrompt := strings.Repeat("Once upon a time ", 600000) // 10 MB
	cases := []struct {
		name     string
		path     string
		body     string
		param    string
		contains []string
	}{
		{"temperature 1e-40", "/v1/completions", `{"model":"stories260K","prompt":"a","temperature":1e-40,"max_tokens":3}`, "temperature", []string{"1e-05", "got 1e-40"}},
		{"temperature 1e-45", "/v1/completions", `{"model":"stories260K","prompt":"a","temperature":1e-45,"max_tokens":3}`, "temperature", nil},
		{"temperature 1.2e-38", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"a"}],"temperature":1.2e-38}`, "temperature", nil},
		{"temperature 1e39", "/v1/completions", `{"model":"stories260K","prompt":"a","temperature":1e39}`, "temperature", []string{"between 0 and 2", "got 1e+39"}},
		{"repetition_penalty 1e-38", "/v1/completions", `{"model":"stories260K","prompt":"a","temperature":1,"repetition_penalty":1e-38}`, "repetition_penalty", []string{"[0.01, 100]"}},
		{"n 65", "/v1/completions", `{"model":"stories260K","prompt":"a","n":65,"max_tokens":3}`, "n", []string{"65", "64"}},
		{"n 128", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"a"}],"n":128}`, "n", nil},
		{"10 MB prompt", "/v1/completions", `{"model":"stories260K","prompt":` + mustJSON(hugePrompt) + `,"max_tokens":3}`, "prompt", []string{"512 tokens"}},
		{"5000 prompts", "/v1/completions", `{"model":"stories260K","prompt":` + mustJSON(slices.Repeat([]string{"Once upon a time"}, 5000)) + `,"max_tokens":1}`, "prompt", []string{"5000 prompts", "512"}},
		{"invalid UTF-8", "/v1/completions", "{\"prompt\":\"Once upon a \xff time\"}", "prompt", []string{"UTF-8"}},
		{"unpaired surrogate", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"a\udc00"}]}`, "messages[0].content", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			var resp completionResponse
			code, hdr := s.postRaw(t, tc.path, []byte(tc.body), &resp)
			if code != 400 || resp.Error == nil {
				t.Fatalf("status %d (Retry-After %q): %+v", code, hdr.Get("Retry-After"), resp.Error)
			}
			if resp.Error.Param == nil || *resp.Error.Param != tc.param {
				t.Errorf("param = %v, want %q (message %q)", resp.Error.Param, tc.param, resp.Error.Message)
			}
			for _, c := range tc.contains {
				if !strings.Contains(resp.Error.Message, c) {
					t.Errorf("message %q does not mention %q", resp.Error.Message, c)
				}
			}
			t.Logf("%s: answered in %s: %s", tc.name, time.Since(start).Round(time.Millisecond), resp.Error.Message)
		})
	}
	ref := stories260k.ReferenceGreedy()
	var resp completionResponse
	if code, _ := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": ref.Prompt, "max_tokens": len(ref.GeneratedTokens), "temperature": 0}, &resp); code != 200 {
		t.Fatalf("after the reproducers: status %d: %+v", code, resp.Error)
	}
	if resp.Choices[0].Text != ref.GeneratedText {
		t.Fatalf("after the reproducers the reference text changed:\n got %q\nwant %q", resp.Choices[0].Text, ref.GeneratedText)
	}
}

// A sequence whose sampling fails (a model that produces NaN logits for one
// token) is aborted alone: the other 15 requests of its batch return what
// they return alone, and the model stays ready.
func TestFailuresStayLocal(t *testing.T) {
	clean := startServer(t, models.GenerativeConfig{})
	var jobs []job
	words := strings.Fields(stories260k.ReferenceGreedy().GeneratedText)
	for i := range 15 {
		jobs = append(jobs, greedy(strings.Join(words[i:i+4], " "), 40))
	}
	want := clean.run(t, jobs, false)

	// Poison a token that none of the 15 uses, in prompt or output.
	tok := clean.model.Tokenizer()
	used := map[int32]bool{0: true, 1: true, 2: true}
	for i, j := range jobs {
		ids, err := tok.Encode(j.body["prompt"].(string)+want[i], true)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			used[id] = true
		}
	}
	poison := int32(-1)
	for id := int32(tok.Vocab().NumTokens() - 1); id > 2; id-- {
		if !used[id] {
			poison = id
			break
		}
	}
	src, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "poisoned.gguf")
	if err := synth.Poison(src, path, "token_embd.weight", []int{int(poison)}); err != nil {
		t.Fatal(err)
	}
	// Named as the default model, so that the jobs' bodies name it.
	s := startServer(t, models.GenerativeConfig{Name: "stories260K", Path: path})

	got := make([]string, len(jobs))
	var poisoned completionResponse
	var poisonedCode int
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Go(func() { got[i] = s.run(t, jobs[i:i+1], false)[0] })
	}
	wg.Go(func() {
		poisonedCode, _ = s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": []int32{1, 300, poison, 301}, "max_tokens": 40, "ignore_eos": true}, &poisoned)
	})
	wg.Wait()
	compare(t, "beside a failing sequence", jobs, got, want)
	if poisonedCode != 500 || poisoned.Error == nil || !strings.Contains(poisoned.Error.Message, "other requests are not affected") {
		t.Errorf("poisoned request: status %d, %+v", poisonedCode, poisoned.Error)
	}
	if resp, err := http.Get(s.URL + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health after the failure: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if n := s.metric(t, "llmserve_engine_sequence_failures_total"); n != 1 {
		t.Errorf("%v sequence failures, want 1", n)
	}
	if n := s.metric(t, "llmserve_engine_restarts_total"); n != 0 {
		t.Errorf("the engine restarted %v times", n)
	}
	// And it still serves.
	if again := s.run(t, jobs[:1], false); again[0] != want[0] {
		t.Errorf("after the failure: %q, want %q", again[0], want[0])
	}
}

// 10,000 requests through one server leave the KV manager's event outbox
// bounded: the engine core drains it every step, and nothing is dropped.
func TestKVEventsStayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 requests")
	}
	s := startServer(t, models.GenerativeConfig{PrefixCacheBytes: 2 << 20}) // ~200 blocks: evictions too
	const requests, workers = 10000, 32
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	maxPending := 0
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range next {
				prompt := make([]int32, 20)
				for i := range prompt {
					prompt[i] = 3 + rng.Int32N(500)
				}
				body, _ := json.Marshal(map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": 1})
				var resp completionResponse
				code, _ := s.postRaw(t, "/v1/completions", body, &resp)
				st := s.model.Stats().KV
				mu.Lock()
				maxPending = max(maxPending, st.EventsPending)
				if code != 200 && len(failures) < 5 {
					failures = append(failures, fmt.Sprintf("%d %+v", code, resp.Error))
				}
				mu.Unlock()
			}
		})
	}
	for i := range requests {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("failed requests: %v", failures)
	}
	st := s.model.Stats().KV
	stored := s.metric(t, "llmserve_kv_cache_events_total")
	t.Logf("%d requests: %v cache events, %d evictions, at most %d events pending, %d dropped", requests, stored, st.Evictions, maxPending, st.EventsDropped)
	if stored < requests || st.Evictions == 0 {
		t.Errorf("%v events and %d evictions for %d requests of a new block each", stored, st.Evictions, requests)
	}
	if maxPending > 4096 || st.EventsPending > 4096 || st.EventsDropped != 0 {
		t.Errorf("event outbox: %d pending at most, %d now, %d dropped", maxPending, st.EventsPending, st.EventsDropped)
	}
	if st.CachedBytes > st.CacheBytesLimit {
		t.Errorf("prefix cache holds %d bytes, over its %d", st.CachedBytes, st.CacheBytesLimit)
	}
}
