package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
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
	if code, _ := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": first, "max_tokens": 5, "temperature": 0}, &resp); code != 200 {
		t.Fatalf("first: %d %+v", code, resp.Error)
	}
	if resp.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("first request found %d cached tokens", resp.Usage.PromptTokensDetails.CachedTokens)
	}
	decodedBefore := s.metric(t, "llmserve_engine_decoded_tokens_total")
	hitsBefore := s.metric(t, "vllm:prefix_cache_hits_total")
	resp = completionResponse{}
	if code, _ := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": second, "max_tokens": 5, "temperature": 0, "ignore_eos": true}, &resp); code != 200 {
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
		"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 500, "ignore_eos": true, "stream": true,
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
	if st := s.model.Stats(); st.Running != 0 || st.KV.UsedSlots != 0 || st.KV.HeldTokens != 0 || st.Requests != 0 {
		t.Fatalf("after disconnect: %+v", st)
	}
}

// A cached prompt still hits after 100 unrelated requests have gone
// through the cache, up to its last token.
func TestPrefixCacheSurvivesUnrelatedRequests(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ref := stories260k.ReferenceGreedy()
	prompt := append(append(slices.Clone(ref.PromptTokens), ref.GeneratedTokens...), ref.GeneratedTokens...) // 125 tokens
	var resp completionResponse
	if code, _ := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": 3, "temperature": 0}, &resp); code != 200 {
		t.Fatalf("status %d: %+v", code, resp.Error)
	}
	var jobs []job
	for i := range 100 {
		jobs = append(jobs, greedy(fmt.Sprintf("Once upon a time, in a land far away, there lived a child called number %d who", i), 2))
	}
	s.run(t, jobs, true)
	resp = completionResponse{}
	if code, _ := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": 3, "temperature": 0}, &resp); code != 200 {
		t.Fatalf("status %d: %+v", code, resp.Error)
	}
	// Everything but the last token: 7 blocks of 16 and 12 positions of the
	// prompt's tail (its last token is always computed, for its logits).
	if got := resp.Usage.PromptTokensDetails.CachedTokens; got != len(prompt)-1 {
		t.Fatalf("cached_tokens = %d after 100 unrelated requests, want %d", got, len(prompt)-1)
	}
}

func TestNChoicesAndStopStrings(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ref := stories260k.ReferenceGreedy()
	var resp completionResponse
	code, _ := s.post(t, "/v1/completions", map[string]any{
		"model": "stories260K", "prompt": ref.Prompt, "max_tokens": 60, "temperature": 0, "n": 3, "stop": []string{"Lily."},
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
