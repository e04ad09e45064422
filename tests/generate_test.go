package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

type completionResponse struct {
	Choices []struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		Logprobs *struct {
			Tokens []string `json:"tokens"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// tokenIDs parses logprob tokens written as "token_id:<id>".
func tokenIDs(t *testing.T, names []string) []int32 {
	t.Helper()
	ids := make([]int32, len(names))
	for i, n := range names {
		v, err := strconv.Atoi(strings.TrimPrefix(n, "token_id:"))
		if err != nil {
			t.Fatalf("token %q: %v", n, err)
		}
		ids[i] = int32(v)
	}
	return ids
}

// The greedy continuation of "Once upon a time" is exactly llama.cpp's,
// token for token, streamed and not.
func TestGreedyMatchesLlamaCppReference(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ref := stories260k.ReferenceGreedy()
	body := map[string]any{
		"model": "stories260K", "prompt": ref.Prompt, "max_tokens": len(ref.GeneratedTokens),
		"temperature": 0, "logprobs": 0, "return_tokens_as_token_ids": true,
	}
	var resp completionResponse
	if code, _ := s.post(t, "/v1/completions", body, &resp); code != 200 {
		t.Fatalf("status %d: %+v", code, resp.Error)
	}
	c := resp.Choices[0]
	if c.Text != ref.GeneratedText {
		t.Errorf("text\n got %q\nwant %q", c.Text, ref.GeneratedText)
	}
	if got := tokenIDs(t, c.Logprobs.Tokens); !slices.Equal(got, ref.GeneratedTokens) {
		t.Errorf("tokens\n got %v\nwant %v", got, ref.GeneratedTokens)
	}
	if *c.FinishReason != "length" || resp.Usage.PromptTokens != len(ref.PromptTokens) || resp.Usage.CompletionTokens != 60 {
		t.Errorf("finish %q usage %+v", *c.FinishReason, resp.Usage)
	}

	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	events := s.stream(t, context.Background(), "/v1/completions", body)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", events[len(events)-1])
	}
	var text strings.Builder
	var names []string
	var usage *completionResponse
	for _, e := range events[:len(events)-1] {
		var chunk completionResponse
		if err := json.Unmarshal([]byte(e), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", e, err)
		}
		if chunk.Usage != nil {
			usage = &chunk
			continue
		}
		text.WriteString(chunk.Choices[0].Text)
		if chunk.Choices[0].Logprobs != nil {
			names = append(names, chunk.Choices[0].Logprobs.Tokens...)
		}
	}
	if text.String() != ref.GeneratedText {
		t.Errorf("streamed text\n got %q\nwant %q", text.String(), ref.GeneratedText)
	}
	if got := tokenIDs(t, names); !slices.Equal(got, ref.GeneratedTokens) {
		t.Errorf("streamed tokens\n got %v\nwant %v", got, ref.GeneratedTokens)
	}
	if usage == nil || usage.Usage.CompletionTokens != 60 || len(usage.Choices) != 0 {
		t.Errorf("usage chunk = %+v", usage)
	}
}

// Sixteen concurrent greedy requests with different prompts and lengths
// each return exactly what the same request returns alone (batch-invariant
// mode: see models.GenerativeConfig.BatchInvariant).
func TestConcurrentRequestsMatchSolo(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{MaxNumBatchedTokens: 64, BatchInvariant: true})
	words := strings.Fields(stories260k.ReferenceGreedy().GeneratedText)
	var jobs []greedyJob
	for i := range 16 {
		start := i % 7
		jobs = append(jobs, greedyJob{prompt: strings.Join(words[start:start+3+i*2], " "), max: 20 + 7*i})
	}
	solo := s.runGreedy(t, jobs, false)
	before := s.metric(t, "llmserve_engine_steps_total")
	got := s.runGreedy(t, jobs, true)
	for i := range jobs {
		if got[i] != solo[i] {
			t.Errorf("request %d (%q, max %d):\nconcurrent %q\n      solo %q", i, jobs[i].prompt, jobs[i].max, got[i], solo[i])
		}
	}
	// The batch really was shared: far fewer steps than tokens generated.
	steps := s.metric(t, "llmserve_engine_steps_total") - before
	total := 0
	for _, j := range jobs {
		total += j.max
	}
	if steps >= float64(total)/2 {
		t.Errorf("%v steps for %d tokens: requests did not batch", steps, total)
	}
}

// greedyJob is one greedy completion: a prompt and how many tokens to
// generate (ignore_eos, so exactly that many).
type greedyJob struct {
	prompt string
	max    int
}

// runGreedy runs the jobs one after the other, or all at once, and returns
// their texts in order.
func (s *server) runGreedy(t *testing.T, jobs []greedyJob, concurrent bool) []string {
	t.Helper()
	out := make([]string, len(jobs))
	run := func(i int) {
		var resp completionResponse
		code, _ := s.post(t, "/v1/completions", map[string]any{
			"prompt": jobs[i].prompt, "max_tokens": jobs[i].max, "temperature": 0, "ignore_eos": true,
		}, &resp)
		if code != 200 {
			t.Errorf("status %d: %+v", code, resp.Error)
			return
		}
		out[i] = resp.Choices[0].Text
	}
	var wg sync.WaitGroup
	for i := range jobs {
		if concurrent {
			wg.Go(func() { run(i) })
		} else {
			run(i)
		}
	}
	wg.Wait()
	return out
}

// A request whose prompt starts with the first 400 tokens of an earlier
// prompt gets those tokens from the prefix cache: usage reports them and the
// engine decodes only the rest.
func TestPrefixCacheAcrossRequests(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ref := stories260k.ReferenceGreedy()
	seq := append(slices.Clone(ref.PromptTokens), ref.GeneratedTokens...)
	var prefix []int32
	for len(prefix) < 400 {
		prefix = append(prefix, seq...)
	}
	prefix = prefix[:400]
	first := append(slices.Clone(prefix), ref.GeneratedTokens[:31]...)
	second := append(slices.Clone(prefix), ref.GeneratedTokens[10:33]...)

	var resp completionResponse
	if code, _ := s.post(t, "/v1/completions", map[string]any{"prompt": first, "max_tokens": 5, "temperature": 0}, &resp); code != 200 {
		t.Fatalf("first: %d %+v", code, resp.Error)
	}
	if resp.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("first request found %d cached tokens", resp.Usage.PromptTokensDetails.CachedTokens)
	}
	decodedBefore := s.metric(t, "llmserve_engine_decoded_tokens_total")
	hitsBefore := s.metric(t, "vllm:prefix_cache_hits_total")
	resp = completionResponse{}
	if code, _ := s.post(t, "/v1/completions", map[string]any{"prompt": second, "max_tokens": 5, "temperature": 0, "ignore_eos": true}, &resp); code != 200 {
		t.Fatalf("second: %d %+v", code, resp.Error)
	}
	cached := resp.Usage.PromptTokensDetails.CachedTokens
	if cached < 400 {
		t.Fatalf("cached_tokens = %d, want at least the 400 shared tokens (25 full blocks)", cached)
	}
	// The uncached part of the prompt in one step, then one token for each
	// of the 4 decode steps after the first sampled token.
	decoded := s.metric(t, "llmserve_engine_decoded_tokens_total") - decodedBefore
	if want := float64(len(second) - cached + 4); decoded != want {
		t.Fatalf("the engine decoded %v tokens, want %v (prompt %d, cached %d)", decoded, want, len(second), cached)
	}
	if hits := s.metric(t, "vllm:prefix_cache_hits_total") - hitsBefore; hits != float64(cached) {
		t.Fatalf("prefix cache hits metric grew by %v, want %d", hits, cached)
	}
}

// A streaming client that goes away frees its sequence and KV at once.
func TestDisconnectFreesSequence(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	b, _ := json.Marshal(map[string]any{
		"prompt": "Once upon a time", "max_tokens": 500, "ignore_eos": true, "stream": true,
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/completions", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read a few events, then go away mid-stream.
	sc := bufio.NewScanner(resp.Body)
	for events := 0; events < 5 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	if s.metric(t, "vllm:num_requests_running") != 1 {
		t.Fatal("the request is not running")
	}
	cancel()
	resp.Body.Close()
	s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 0 })
	s.waitMetric(t, "vllm:kv_cache_usage_perc", func(v float64) bool { return v == 0 })
	gen := s.metric(t, "vllm:generation_tokens_total")
	if gen >= 400 {
		t.Fatalf("the sequence ran to %v tokens after the client left", gen)
	}
	if st := s.model.Stats(); st.Running != 0 || st.KV.UsedBlocks != 0 || st.Requests != 0 {
		t.Fatalf("after disconnect: %+v", st)
	}
}

// With a KV cache too small for every request at once, sequences are
// preempted and recomputed, and each still returns its solo greedy output
// (batch-invariant mode).
func TestPreemptionKeepsGreedyOutputs(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{KVTokens: 512, MaxNumBatchedTokens: 256, BatchInvariant: true})
	prompts := []string{"Tom had a red", "The sun was", "One day, a little dog", "Sam and Mia went to the", "There was a big tree", "The bird"}
	var jobs []greedyJob
	for _, p := range prompts {
		jobs = append(jobs, greedyJob{prompt: p, max: 200})
	}
	solo := s.runGreedy(t, jobs, false)
	got := s.runGreedy(t, jobs, true)
	for i := range prompts {
		if got[i] != solo[i] {
			t.Errorf("prompt %d: preempted run differs\n got %q\nwant %q", i, got[i], solo[i])
		}
	}
	if n := s.metric(t, "vllm:num_preemptions_total"); n == 0 {
		t.Fatal("no preemption happened: the KV cache was not too small")
	}
	if st := s.model.Stats(); st.KV.UsedBlocks != 0 {
		t.Fatalf("KV still used: %+v", st.KV)
	}
}

func TestNChoicesAndStopStrings(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ref := stories260k.ReferenceGreedy()
	var resp completionResponse
	code, _ := s.post(t, "/v1/completions", map[string]any{
		"prompt": ref.Prompt, "max_tokens": 60, "temperature": 0, "n": 3, "stop": []string{"Lily."},
	}, &resp)
	if code != 200 || len(resp.Choices) != 3 {
		t.Fatalf("status %d, %d choices: %+v", code, len(resp.Choices), resp.Error)
	}
	want, _, _ := strings.Cut(ref.GeneratedText, "Lily.")
	for i, c := range resp.Choices {
		if c.Index != i || c.Text != want || *c.FinishReason != "stop" {
			t.Errorf("choice %d: %q (%s), want %q", c.Index, c.Text, *c.FinishReason, want)
		}
	}
	if resp.Usage.PromptTokens != 5 || resp.Usage.CompletionTokens < 3*5 {
		t.Errorf("usage %+v", resp.Usage)
	}
}
