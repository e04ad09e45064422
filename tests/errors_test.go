package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/models"
)

// Bad input gets a 4xx OpenAI error object that says what to fix.
func TestBadInput(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	long := make([]int, 600)
	for i := range long {
		long[i] = 300
	}
	cases := []struct {
		name     string
		path     string
		body     string
		status   int
		param    string
		contains []string
	}{
		{"invalid JSON", "/v1/completions", `{"model":"stories260K","prompt": "hi",`, 400, "", []string{"JSON"}},
		{"wrong type", "/v1/completions", `{"model":"stories260K","prompt": "hi", "max_tokens": "ten"}`, 400, "max_tokens", nil},
		{"wrong type in messages", "/v1/chat/completions", `{"model":"stories260K","messages": [{"role": "user", "content": 5}]}`, 400, "messages[0].content", nil},
		{"unknown model", "/v1/completions", `{"model": "gpt-9", "prompt": "hi"}`, 404, "model", []string{"gpt-9"}},
		{"negative max_tokens", "/v1/completions", `{"model":"stories260K","prompt": "hi", "max_tokens": -1}`, 400, "max_tokens", nil},
		{"oversized max_tokens", "/v1/completions", `{"model":"stories260K","prompt": "hi", "max_tokens": 100000}`, 400, "max_tokens", []string{"512", "100000"}},
		{"prompt longer than the context", "/v1/completions", `{"model":"stories260K","prompt": ` + mustJSON(long) + `}`, 400, "", []string{"512", "600"}},
		{"empty messages", "/v1/chat/completions", `{"model":"stories260K","messages": []}`, 400, "messages", nil},
		{"empty prompt", "/v1/completions", `{"model":"stories260K","prompt": ""}`, 400, "prompt", nil},
		{"token outside the vocabulary", "/v1/completions", `{"model":"stories260K","prompt": [1, 99999]}`, 400, "prompt[1]", nil},
		{"bad temperature", "/v1/chat/completions", `{"model":"stories260K","messages": [{"role": "user", "content": "hi"}], "temperature": -1}`, 400, "temperature", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var resp completionResponse
			code, _ := s.postRaw(t, tc.path, []byte(tc.body), &resp)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %+v", code, tc.status, resp.Error)
			}
			if resp.Error == nil || resp.Error.Message == "" || resp.Error.Type == "" {
				t.Fatalf("no OpenAI error object: %+v", resp)
			}
			if tc.param != "" && (resp.Error.Param == nil || *resp.Error.Param != tc.param) {
				got := "<nil>"
				if resp.Error.Param != nil {
					got = *resp.Error.Param
				}
				t.Errorf("param = %q, want %q (message %q)", got, tc.param, resp.Error.Message)
			}
			for _, c := range tc.contains {
				if !strings.Contains(resp.Error.Message, c) {
					t.Errorf("message %q does not mention %q", resp.Error.Message, c)
				}
			}
		})
	}
	// The server is still healthy after all of that.
	resp, err := http.Get(s.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health after bad input: %v %v", resp, err)
	}
	resp.Body.Close()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// When the waiting queue is full, requests get 429 with Retry-After.
func TestQueueFull(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{MaxNumSeqs: 1, MaxWaiting: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() *http.Response {
		b, _ := json.Marshal(map[string]any{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 500, "ignore_eos": true, "stream": true})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/completions", bytes.NewReader(b))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	running := open()
	defer running.Body.Close()
	bufio.NewReader(running.Body).ReadString('\n') // it started
	s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 1 })
	waiting := open()
	defer waiting.Body.Close()
	s.waitMetric(t, "vllm:num_requests_waiting", func(v float64) bool { return v == 1 })

	var resp completionResponse
	code, hdr := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": "hi", "max_tokens": 5}, &resp)
	if code != 429 || resp.Error == nil || !strings.Contains(resp.Error.Message, "waiting") {
		t.Fatalf("status %d: %+v", code, resp.Error)
	}
	if secs, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || secs < 1 {
		t.Fatalf("Retry-After = %q", hdr.Get("Retry-After"))
	}
}
