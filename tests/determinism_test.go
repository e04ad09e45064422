package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

// The TestDeterminism tests check that an answer depends only on its
// request, in the server's default configuration (flash attention on,
// prefix cache on): not on what runs beside it, what ran before, whether
// its prefix came from the cache, or whether it was preempted. `make
// test-determinism` runs them 20 times while other processes load the CPU.

// job is one completion request; its answer is the text.
type job struct {
	body map[string]any
}

// greedy is a greedy completion of exactly max tokens (ignore_eos).
func greedy(prompt string, max int) job {
	return job{body: map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": max, "temperature": 0, "ignore_eos": true}}
}

// seeded is a sampled completion at temperature 1 with a seed.
func seeded(prompt string, max int, seed int) job {
	return job{body: map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": max, "temperature": 1, "seed": seed, "ignore_eos": true}}
}

// run sends the jobs one after the other, or all at once, and returns
// their texts (choices joined with "|") in order.
func (s *server) run(t *testing.T, jobs []job, concurrent bool) []string {
	t.Helper()
	out := make([]string, len(jobs))
	one := func(i int) {
		var resp completionResponse
		code, _ := s.post(t, "/v1/completions", jobs[i].body, &resp)
		if code != 200 {
			t.Errorf("job %d: status %d: %+v", i, code, resp.Error)
			return
		}
		texts := make([]string, len(resp.Choices))
		for _, c := range resp.Choices {
			texts[c.Index] = c.Text
		}
		out[i] = strings.Join(texts, "|")
	}
	var wg sync.WaitGroup
	for i := range jobs {
		if concurrent {
			wg.Go(func() { one(i) })
		} else {
			one(i)
		}
	}
	wg.Wait()
	return out
}

// mixedJobs are n greedy and seeded jobs with different prompts and
// lengths.
func mixedJobs(n int) []job {
	words := strings.Fields(stories260k.ReferenceGreedy().GeneratedText)
	var jobs []job
	for i := range n {
		start := (i * 5) % (len(words) - 12)
		prompt := strings.Join(words[start:start+2+i%9], " ")
		if i%2 == 0 {
			jobs = append(jobs, greedy(prompt, 8+(i*7)%40))
		} else {
			jobs = append(jobs, seeded(prompt, 8+(i*5)%40, 1000+i))
		}
	}
	return jobs
}

func compare(t *testing.T, what string, jobs []job, got, want []string) {
	t.Helper()
	for i := range jobs {
		if got[i] != want[i] {
			t.Errorf("%s: job %d (%v):\n got %q\nwant %q", what, i, jobs[i].body, got[i], want[i])
		}
	}
}

// A request returns the same tokens alone and among 63 concurrent others,
// greedy or seeded.
func TestDeterminismSoloVsConcurrent(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{MaxNumBatchedTokens: 256})
	jobs := mixedJobs(64)
	solo := s.run(t, jobs, false)
	before := s.metric(t, "llmserve_engine_steps_total")
	got := s.run(t, jobs, true)
	compare(t, "64 concurrent vs solo", jobs, got, solo)
	// The KV cache, allocated for 4 sequences, grew under the load while
	// sequences ran (their KV moved into the larger context).
	if n := s.metric(t, "llmserve_kv_cache_slots"); n <= 4 {
		t.Errorf("the KV cache holds %v sequences after 64 concurrent requests", n)
	}
	// The batch really was shared: far fewer steps than tokens generated.
	steps := s.metric(t, "llmserve_engine_steps_total") - before
	total := 0
	for _, j := range jobs {
		total += j.body["max_tokens"].(int)
	}
	if steps >= float64(total)/2 {
		t.Errorf("%v steps for %d tokens: requests did not batch", steps, total)
	}
}

// A seeded request repeated gives one text, whatever ran in between:
// concurrent streams, a stream the client abandoned, other seeds.
func TestDeterminismSeededRepeats(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	body := map[string]any{
		"model":       "stories260K",
		"messages":    []map[string]any{{"role": "user", "content": "Tell me a story about a cat."}},
		"temperature": 1, "seed": 1234, "max_tokens": 40,
	}
	chat := func() string {
		var resp struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if code, _ := s.post(t, "/v1/chat/completions", body, &resp); code != 200 || len(resp.Choices) != 1 {
			t.Fatalf("status %d: %+v", code, resp)
		}
		return resp.Choices[0].Message.Content
	}
	first := chat()
	for round := range 5 {
		// Noise: 16 parallel streams, one of them abandoned mid-way.
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				b, _ := json.Marshal(map[string]any{"model": "stories260K", "prompt": fmt.Sprintf("Once upon a time %d", i), "max_tokens": 30 + i, "temperature": 1, "stream": true})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/completions", bytes.NewReader(b))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				for n := 0; sc.Scan(); n++ {
					if i == round && n == 5 {
						return // the client goes away
					}
				}
			})
		}
		wg.Wait()
		if got := chat(); got != first {
			t.Fatalf("round %d: seeded request gave\n %q\nthen\n %q", round, first, got)
		}
	}
}

// n > 1 with a seed gives the same set of choices, alone and under load.
func TestDeterminismSeededChoices(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	j := []job{{body: map[string]any{"model": "stories260K", "prompt": "The little dog", "max_tokens": 24, "temperature": 1, "seed": 7, "n": 4, "ignore_eos": true}}}
	want := s.run(t, j, false)
	if len(slices.Compact(strings.Split(want[0], "|"))) < 2 {
		t.Fatalf("four seeded choices are all the same: %q", want[0])
	}
	jobs := append(mixedJobs(20), j[0], j[0], j[0])
	got := s.run(t, jobs, true)
	for i := 20; i < len(jobs); i++ {
		if got[i] != want[0] {
			t.Errorf("n=4 seeded under load:\n got %q\nwant %q", got[i], want[0])
		}
	}
}

// An answer is the same whether its prompt was computed or restored from
// the prefix cache, greedy or seeded.
func TestDeterminismAfterPrefixCacheHit(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ref := stories260k.ReferenceGreedy()
	long := strings.Repeat(ref.GeneratedText+" ", 3) // ~200 tokens
	jobs := []job{greedy(long, 40), seeded(long, 40, 99), greedy(long+" The end.", 30)}
	first := s.run(t, jobs, false)
	hitsBefore := s.metric(t, "vllm:prefix_cache_hits_total")
	second := s.run(t, jobs, false)
	compare(t, "after a prefix-cache hit", jobs, second, first)
	if hits := s.metric(t, "vllm:prefix_cache_hits_total") - hitsBefore; hits < 3*160 {
		t.Fatalf("the second round hit only %v cached tokens", hits)
	}
	// And concurrently, where they hit the cache while others compute.
	third := s.run(t, append(jobs, mixedJobs(12)...), true)[:len(jobs)]
	compare(t, "concurrent, after a prefix-cache hit", jobs, third, first)
}

// Sequences preempted for higher-priority requests resume (from the prefix
// cache and by recompute) and return what they return alone.
func TestDeterminismAfterPreemption(t *testing.T) {
	for _, cache := range []bool{true, false} {
		t.Run(fmt.Sprintf("prefix_cache=%v", cache), func(t *testing.T) {
			cfg := models.GenerativeConfig{MaxNumSeqs: 4}
			if !cache {
				cfg.PrefixCacheBytes = -1
			}
			s := startServer(t, cfg)
			var low, high []job
			for i := range 4 {
				j := greedy(fmt.Sprintf("Lily wanted to play outside %d", i), 120)
				if i%2 == 1 {
					j = seeded(fmt.Sprintf("Tom had a big red ball %d", i), 120, 50+i)
				}
				j.body["priority"] = 10
				low = append(low, j)
				h := greedy(fmt.Sprintf("The sun was hot %d", i), 20)
				h.body["priority"] = 0
				high = append(high, h)
			}
			soloLow, soloHigh := s.run(t, low, false), s.run(t, high, false)

			// The low-priority requests fill every slot, then the
			// high-priority ones arrive and take slots from them.
			gotLow := make([]string, len(low))
			var wg sync.WaitGroup
			started := make(chan struct{}, len(low))
			for i := range low {
				wg.Go(func() { gotLow[i] = s.streamText(t, low[i].body, started) })
			}
			for range low {
				<-started
			}
			gotHigh := s.run(t, high, true)
			wg.Wait()
			compare(t, "preempted low-priority", low, gotLow, soloLow)
			compare(t, "high-priority", high, gotHigh, soloHigh)
			if n := s.metric(t, "vllm:num_preemptions_total"); n == 0 {
				t.Fatal("no preemption happened")
			}
		})
	}
}

// streamText runs a streaming completion, signals started after its first
// token, and returns the text.
func (s *server) streamText(t *testing.T, body map[string]any, started chan<- struct{}) string {
	t.Helper()
	b := make(map[string]any, len(body)+1)
	for k, v := range body {
		b[k] = v
	}
	b["stream"] = true
	raw, _ := json.Marshal(b)
	resp, err := http.Post(s.URL+"/v1/completions", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Error(err)
		started <- struct{}{}
		return ""
	}
	defer resp.Body.Close()
	var text strings.Builder
	signalled := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk completionResponse
		if err := json.Unmarshal([]byte(data), &chunk); err != nil || chunk.Error != nil {
			t.Errorf("chunk %q: %v", data, err)
			continue
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Text)
		}
		if !signalled {
			signalled = true
			started <- struct{}{}
		}
	}
	if !signalled {
		started <- struct{}{}
	}
	return text.String()
}
