package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
	"github.com/llmserve/llmserve/scheduler"
)

// specJobs are completions of a workload that repeats its input (a
// passage given twice, to continue) and of one that does not, greedy and
// seeded, with logprobs, a stop string, a stop that comes early, and n=2.
func specJobs() []map[string]any {
	words := strings.Fields(stories260k.ReferenceGreedy().GeneratedText)
	passage := strings.Join(words[:30], " ")
	var jobs []map[string]any
	add := func(prompt string, max int, more map[string]any) {
		j := map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": max, "temperature": 0, "ignore_eos": true}
		for k, v := range more {
			j[k] = v
		}
		jobs = append(jobs, j)
	}
	add(passage+" "+passage, 64, nil)
	add(passage+"\n"+passage+"\n"+strings.Join(words[:10], " "), 64, nil)
	add("Once upon a time", 64, nil)
	add(passage+" "+passage, 48, map[string]any{"temperature": 0.8, "seed": 11})
	add("Lily and Tom went to the park", 48, map[string]any{"temperature": 1, "seed": 5, "n": 2})
	add(passage+" "+passage, 40, map[string]any{"logprobs": 3})
	add(passage+" "+passage, 64, map[string]any{"stop": []string{"happy"}, "ignore_eos": false})
	add(strings.Join(words[:20], " ")+" "+strings.Join(words[:20], " "), 64, map[string]any{"stop": []string{"."}, "ignore_eos": false})
	return jobs
}

// answers posts the jobs (all at once when concurrent) and returns each
// answer's choices and usage as JSON, for comparison byte for byte.
func (s *server) answers(t *testing.T, jobs []map[string]any, concurrent bool) []string {
	t.Helper()
	out := make([]string, len(jobs))
	one := func(i int) {
		var resp map[string]any
		if code, _ := s.post(t, "/v1/completions", jobs[i], &resp); code != 200 {
			t.Errorf("job %d: status %d: %v", i, code, resp)
			return
		}
		// Cached prompt tokens differ as the prefix cache warms up.
		if u, ok := resp["usage"].(map[string]any); ok {
			delete(u, "prompt_tokens_details")
		}
		b, _ := json.Marshal(map[string]any{"choices": resp["choices"], "usage": resp["usage"]})
		out[i] = string(b)
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

// With --speculative ngram, /v1/completions answers exactly what it
// answers without (texts, logprobs, finish reasons, usage), alone and 8 at
// once, greedy and seeded, and /metrics shows the drafts and what was
// accepted.
func TestSpeculativeMatchesPlain(t *testing.T) {
	plain := startServer(t, models.GenerativeConfig{})
	spec := startServer(t, models.GenerativeConfig{Speculative: scheduler.Speculative{Method: "ngram", NumTokens: 5, PromptLookupMin: 2, PromptLookupMax: 4}})
	jobs := specJobs()
	want := plain.answers(t, jobs, false)
	solo := spec.answers(t, jobs, false)
	for i := range jobs {
		if solo[i] != want[i] {
			t.Errorf("job %d (%v) alone:\n got %s\nwant %s", i, jobs[i], solo[i], want[i])
		}
	}
	// The same tokens in fewer steps. A step's metrics are recorded after
	// its answers leave: wait until they settle. (Generated tokens are not
	// compared: past a stop string a choice runs on until the abort
	// reaches the scheduler, and a step with drafts may bring more tokens.)
	steps, plainSteps := spec.settled(t, "llmserve_engine_steps_total"), plain.settled(t, "llmserve_engine_steps_total")
	if steps >= plainSteps {
		t.Fatalf("%v steps with speculation, no fewer than %v without", steps, plainSteps)
	}
	for round := range 3 {
		got := spec.answers(t, jobs, true)
		for i := range jobs {
			if got[i] != want[i] {
				t.Errorf("round %d, job %d (%v) among 8:\n got %s\nwant %s", round, i, jobs[i], got[i], want[i])
			}
		}
	}
	drafts := spec.metric(t, "vllm:spec_decode_num_drafts_total")
	drafted := spec.metric(t, "vllm:spec_decode_num_draft_tokens_total")
	accepted := spec.metric(t, "vllm:spec_decode_num_accepted_tokens_total")
	perPos := spec.metric(t, "vllm:spec_decode_num_accepted_tokens_per_pos_total")
	if drafts == 0 || accepted == 0 || drafted < accepted || drafted > 5*drafts || perPos != accepted {
		t.Fatalf("drafts %v, draft tokens %v, accepted %v (per position %v)", drafts, drafted, accepted, perPos)
	}
	t.Logf("acceptance %.2f (%v of %v draft tokens in %v drafts); alone: %v steps, %v without",
		accepted/drafted, accepted, drafted, drafts, steps, plainSteps)
	if plain.metric(t, "vllm:spec_decode_num_drafts_total") != 0 {
		t.Fatal("drafts without speculation")
	}
}

// settled returns a metric once it stayed the same for 50ms.
func (s *server) settled(t *testing.T, name string) float64 {
	t.Helper()
	var v float64
	seen := false
	settled := poll(t, 5*time.Second, 50*time.Millisecond, func() bool {
		w := s.metric(t, name)
		same := seen && w == v
		v, seen = w, true
		return same
	})
	if !settled {
		t.Fatalf("metric %s never settled", name)
	}
	return v
}

// A served model refuses a bad speculative configuration at load, naming
// what to fix.
func TestSpeculativeConfigRefused(t *testing.T) {
	for _, c := range []struct {
		sp   scheduler.Speculative
		want string
	}{
		{scheduler.Speculative{Method: "ngram", NumTokens: 17}, "num_speculative_tokens 17 is outside [1, 16]"},
		{scheduler.Speculative{Method: "draft"}, `speculative method "draft" needs a draft model (model)`},
		{scheduler.Speculative{Method: "draft", Model: "/nonexistent/d.gguf"}, "draft model /nonexistent/d.gguf: stat /nonexistent/d.gguf"},
		{scheduler.Speculative{Method: "lookahead"}, `speculative method "lookahead" is unknown`},
	} {
		_, err := models.LoadGenerative(models.GenerativeConfig{CacheDir: modelDir, Speculative: c.sp}, nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(fmt.Sprint(err), "Speculative") {
			t.Errorf("%+v: %v, want %q", c.sp, err, c.want)
		}
	}
}
