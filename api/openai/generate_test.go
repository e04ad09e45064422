package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
)

// sseEvents splits an SSE body into its data payloads.
func sseEvents(t *testing.T, body string) []string {
	t.Helper()
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("stream does not end with [DONE]: %q", body)
	}
	var evs []string
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		payload, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		evs = append(evs, payload)
	}
	return evs
}

// streamChunk is the union of chat and completion chunks, for tests.
type streamChunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Index int    `json:"index"`
		Text  string `json:"text"`
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage       `json:"usage"`
	Error *errorObject `json:"error"`
}

// streamResult decodes a stream into text and finish reason per choice.
type streamResult struct {
	text   map[int]string
	finish map[int]string
	chunks int
	usage  *Usage
	err    *errorObject
}

func parseStream(t *testing.T, body string) streamResult {
	t.Helper()
	r := streamResult{text: map[int]string{}, finish: map[int]string{}}
	evs := sseEvents(t, body)
	for _, ev := range evs[:len(evs)-1] {
		var c streamChunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("bad chunk %s: %v", ev, err)
		}
		if c.Error != nil {
			r.err = c.Error
			continue
		}
		if c.Usage != nil {
			r.usage = c.Usage
		}
		for _, ch := range c.Choices {
			if _, done := r.finish[ch.Index]; done {
				t.Errorf("choice %d has a chunk after its finish_reason: %s", ch.Index, ev)
			}
			text := ch.Text
			if ch.Delta.Content != nil {
				text = *ch.Delta.Content
			}
			if !utf8.ValidString(text) {
				t.Errorf("chunk with invalid UTF-8: %q", text)
			}
			r.text[ch.Index] += text
			r.chunks++
			if ch.FinishReason != nil {
				r.finish[ch.Index] = *ch.FinishReason
			}
		}
	}
	return r
}

func TestStopStrings(t *testing.T) {
	S, L, N := scheduler.FinishStop, scheduler.FinishLength, scheduler.FinishNone
	hel, lo, wo, rld, bang := openaitest.Token("Hel"), openaitest.Token("lo"), openaitest.Token(" wo"), openaitest.Token("rld"), openaitest.Token("!")
	tests := []struct {
		name       string
		stop       string // JSON
		extra      string
		batches    [][]scheduler.Output
		text       string
		finish     string
		tokens     int  // completion_tokens
		stopChoice bool // StopChoice must have been called
	}{
		{
			name: "stop across two tokens, later tokens dropped", stop: `"lo w"`,
			batches: [][]scheduler.Output{{openaitest.Out(S, hel, lo, wo, rld, bang, openaitest.IMEnd)}},
			text:    "Hel", finish: "stop", tokens: 3,
		},
		{
			name: "stop across three tokens and batches", stop: `["xyz","llo wor"]`,
			batches: [][]scheduler.Output{{openaitest.Out(N, openaitest.Token("Hel"))}, {openaitest.Out(N, lo)}, {openaitest.Out(N, wo, rld)}, {openaitest.Out(N, bang)}, {openaitest.Out(S, openaitest.IMEnd)}},
			text:    "He", finish: "stop", tokens: 4, stopChoice: true,
		},
		{
			name: "partial match released at the end", stop: `"!!"`,
			batches: [][]scheduler.Output{{openaitest.Out(N, hel, lo)}, {openaitest.Out(S, wo, rld, bang, openaitest.IMEnd)}},
			text:    "Hello world!", finish: "stop", tokens: 6,
		},
		{
			name: "held text flushed at length", stop: `" world"`,
			batches: [][]scheduler.Output{{openaitest.Out(L, hel, lo, wo)}},
			text:    "Hello wo", finish: "length", tokens: 3,
		},
		{
			name: "stop string split over outputs", stop: `"END"`,
			batches: [][]scheduler.Output{{openaitest.Out(N, openaitest.Token("Hello"))}, {openaitest.Out(N, openaitest.Token("E"))}, {openaitest.Out(N, openaitest.Token("ND"))}, {openaitest.Out(L, bang)}},
			text:    "Hello", finish: "stop", tokens: 3, stopChoice: true,
		},
		{
			name: "no stop check within min_tokens", stop: `"Hel"`, extra: `,"min_tokens":2`,
			batches: [][]scheduler.Output{{openaitest.Out(S, hel, lo, wo, rld, openaitest.IMEnd)}},
			text:    "Hello world", finish: "stop", tokens: 5,
		},
		{
			name: "client stop token is not text", stop: `[]`, extra: `,"stop_token_ids":[` + fmt.Sprint(openaitest.Token("!")) + `]`,
			batches: [][]scheduler.Output{{openaitest.Out(S, hel, lo, bang)}},
			text:    "Hello", finish: "stop", tokens: 3,
		},
		{
			name: "stop token then nothing", stop: `[]`,
			batches: [][]scheduler.Output{{openaitest.Out(N, hel)}, {openaitest.Out(S, openaitest.IMEnd)}},
			text:    "Hel", finish: "stop", tokens: 2,
		},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, stream), func(t *testing.T) {
				m := openaitest.NewModel(t)
				m.Script = openaitest.OutsScript(tt.batches...)
				body := fmt.Sprintf(`{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"stop":%s%s,"stream":%v}`, tt.stop, tt.extra, stream)
				if stream {
					body = strings.TrimSuffix(body, "}") + `,"stream_options":{"include_usage":true}}`
				}
				rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/chat/completions", body)
				if rec.Code != http.StatusOK {
					t.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				var text, finish string
				var u Usage
				if stream {
					r := parseStream(t, rec.Body.String())
					text, finish = r.text[0], r.finish[0]
					if r.usage == nil {
						t.Fatal("no usage chunk")
					}
					u = *r.usage
				} else {
					var resp chatCompletion
					if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
						t.Fatal(err)
					}
					text, finish, u = *resp.Choices[0].Message.Content, resp.Choices[0].FinishReason, resp.Usage
				}
				if text != tt.text || finish != tt.finish {
					t.Errorf("text %q finish %q, want %q %q", text, finish, tt.text, tt.finish)
				}
				if u.CompletionTokens != tt.tokens {
					t.Errorf("completion_tokens = %d, want %d", u.CompletionTokens, tt.tokens)
				}
				stops := m.Stops()
				if tt.stopChoice && !slices.Equal(stops, []int{0}) {
					t.Errorf("StopChoice calls %v, want [0]", stops)
				}
			})
		}
	}
}

// choiceScript answers choice i of the prompt whose last token is x with
// x + " " + "abc"[i], pushing choices in reverse order across batches.
func choiceScript(req *scheduler.Request) []openaitest.Batch {
	last := req.Prompt[len(req.Prompt)-1]
	letters := []int32{openaitest.Token("a"), openaitest.Token("b"), openaitest.Token("c")}
	var first, second []scheduler.Output
	for i := req.N - 1; i >= 0; i-- {
		first = append(first, scheduler.Output{Choice: i, Tokens: []int32{last, openaitest.Token(" ")}})
		second = append(second, scheduler.Output{Choice: i, Tokens: []int32{letters[i]}, Finish: scheduler.FinishLength})
	}
	return []openaitest.Batch{{Outs: first}, {Outs: second}}
}

func TestChoiceIndexing(t *testing.T) {
	want := map[int]string{0: "a a", 1: "a b", 2: "a c", 3: "b a", 4: "b b", 5: "b c"}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.Script = choiceScript
			body := fmt.Sprintf(`{"model":"test-model","prompt":["a","b"],"n":3,"stream":%v}`, stream)
			rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/completions", body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			got := map[int]string{}
			if stream {
				r := parseStream(t, rec.Body.String())
				got = r.text
				for i := range 6 {
					if r.finish[i] != "length" {
						t.Errorf("choice %d finish %q", i, r.finish[i])
					}
				}
			} else {
				var resp struct {
					Choices []completionChoice `json:"choices"`
					Usage   Usage              `json:"usage"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
					t.Fatal(err)
				}
				for i, c := range resp.Choices {
					if c.Index != i {
						t.Errorf("choices[%d].index = %d", i, c.Index)
					}
					got[c.Index] = c.Text
				}
				if u := resp.Usage; u.PromptTokens != 4 || u.CompletionTokens != 18 || u.TotalTokens != 22 {
					t.Errorf("usage %+v", u)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("texts %v, want %v", got, want)
			}
		})
	}
}

func TestChatMultiChoiceStream(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Script = choiceScript
	rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/chat/completions",
		`{"model":"test-model","messages":[{"role":"user","content":"a"}],"n":3,"stream":true}`)
	evs := sseEvents(t, rec.Body.String())
	// Role chunks come first, one per choice.
	for i := range 3 {
		var c streamChunk
		if err := json.Unmarshal([]byte(evs[i]), &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Index != i || c.Choices[0].Delta.Role != "assistant" ||
			c.Choices[0].Delta.Content == nil || *c.Choices[0].Delta.Content != "" {
			t.Errorf("event %d is not choice %d's role chunk: %s", i, i, evs[i])
		}
	}
	r := parseStream(t, rec.Body.String())
	// The chat prompt ends with "\n".
	for i, want := range []string{"\n a", "\n b", "\n c"} {
		if r.text[i] != want || r.finish[i] != "length" {
			t.Errorf("choice %d: %q %q", i, r.text[i], r.finish[i])
		}
	}
}

func TestUTF8AcrossTokens(t *testing.T) {
	// "é" is 0xC3 0xA9: two byte-fallback tokens in separate batches.
	m := openaitest.NewModel(t)
	m.Script = openaitest.OutsScript(
		[]scheduler.Output{openaitest.Out(scheduler.FinishNone, openaitest.Token("Hi"), 2+0xC3)},
		[]scheduler.Output{openaitest.Out(scheduler.FinishNone, 2+0xA9)},
		[]scheduler.Output{openaitest.Out(scheduler.FinishStop, openaitest.IMEnd)},
	)
	rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/chat/completions",
		`{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"stream":true}`)
	r := parseStream(t, rec.Body.String())
	if r.text[0] != "Hié" {
		t.Errorf("text %q", r.text[0])
	}
}

func TestLogprobEdgeValues(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Script = openaitest.OutsScript([]scheduler.Output{{
		Tokens: []int32{openaitest.Token("Hi")},
		Logprobs: []engine.Logprobs{{
			Chosen: engine.TokenLogprob{Token: openaitest.Token("Hi"), Logprob: float32(math.Inf(-1))},
			Top:    []engine.TokenLogprob{{Token: 2 + 0xE2, Logprob: -1e-7}},
		}},
		Finish: scheduler.FinishLength,
	}})
	rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/chat/completions",
		`{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":1}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []string{`"logprob":-9999`, `"token":"bytes:\\xe2"`, `"bytes":[226]`, `"logprob":-1e-7`} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %s: %s", want, body)
		}
	}
}

func TestSubmitErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		status     int
		typ        string
		retryAfter string
	}{
		{"queue full", &scheduler.QueueFullError{Waiting: 9, RetryAfter: 1500 * time.Millisecond}, 429, typeRateLimit, "2"},
		{"queue full no hint", fmt.Errorf("admit: %w", &scheduler.QueueFullError{}), 429, typeRateLimit, "1"},
		{"too long", scheduler.ErrTooLong, 400, typeBadRequest, ""},
		{"closed", scheduler.ErrClosed, 503, typeServiceUnavailable, ""},
		{"no worker", fmt.Errorf("head: %w", scheduler.ErrNoWorker), 503, typeServiceUnavailable, "1"},
		{"engine", fmt.Errorf("step: %w", scheduler.ErrEngine), 500, typeInternal, ""},
		{"unknown", errors.New("something odd"), 500, typeInternal, ""},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, stream), func(t *testing.T) {
				m := openaitest.NewModel(t)
				m.SubmitErr = func(int) error { return tt.err }
				rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/chat/completions",
					fmt.Sprintf(`{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"stream":%v}`, stream))
				if rec.Code != tt.status {
					t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
				}
				e := errorBody(t, rec.Body.Bytes())
				if e.Type != tt.typ {
					t.Errorf("type %q, want %q", e.Type, tt.typ)
				}
				if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
					t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
				}
				if errors.Is(tt.err, scheduler.ErrNoWorker) && (!strings.Contains(e.Message, "No healthy worker") || strings.Contains(e.Message, "shutting down")) {
					t.Errorf("no-worker message %q", e.Message)
				}
				if tt.status == 500 && strings.Contains(e.Message, "odd") {
					t.Errorf("500 leaks internals: %q", e.Message)
				}
			})
		}
	}
}

// The prompts of one request are submitted all or none: when the engine
// refuses the batch, no prompt started.
func TestBatchSubmitIsAtomic(t *testing.T) {
	m := openaitest.NewModel(t)
	m.SubmitErr = func(int) error { return scheduler.ErrClosed }
	rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/completions", `{"model":"test-model","prompt":["a","b"]}`)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if reqs := m.Requests(); len(reqs) != 0 {
		t.Errorf("%d prompts started", len(reqs))
	}
}

func TestGenerationErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		typ    string
	}{
		{"deadline", scheduler.ErrDeadline, 408, typeTimeout},
		{"engine", scheduler.ErrEngine, 500, typeInternal},
		{"abort without reason", nil, 500, typeInternal},
	}
	for _, tt := range tests {
		script := openaitest.OutsScript(
			[]scheduler.Output{openaitest.Out(scheduler.FinishNone, openaitest.Token("Hello"))},
			[]scheduler.Output{{Tokens: []int32{openaitest.Token(" world")}, Finish: scheduler.FinishAbort, Err: tt.err}},
		)
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.Script = script
			rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/chat/completions",
				`{"model":"test-model","messages":[{"role":"user","content":"Hi"}]}`)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if e := errorBody(t, rec.Body.Bytes()); e.Type != tt.typ {
				t.Errorf("type %q", e.Type)
			}
		})
		t.Run(tt.name+"/stream", func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.Script = script
			m.Gate = make(chan struct{}, 100)
			rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/chat/completions",
				`{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			r := parseStream(t, rec.Body.String())
			if r.err == nil || r.err.Type != tt.typ {
				t.Fatalf("error event %+v, want type %s:\n%s", r.err, tt.typ, rec.Body)
			}
			if r.usage != nil {
				t.Errorf("usage chunk after an error")
			}
			if !strings.HasPrefix(r.text[0], "Hello") {
				t.Errorf("text before the error: %q", r.text[0])
			}
			evs := sseEvents(t, rec.Body.String())
			if !strings.HasPrefix(evs[len(evs)-2], `{"error":{`) {
				t.Errorf("second to last event is not the error: %s", evs[len(evs)-2])
			}
		})
	}
}

// TestClientDisconnect: when the client goes away mid-stream, the handler
// cancels the scheduler stream at once.
func TestClientDisconnect(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.Hold = true
			m.Script = openaitest.OutsScript([]scheduler.Output{openaitest.Out(scheduler.FinishNone, openaitest.Token("Hello"))})
			srv := httptest.NewServer(testHandler(m))
			defer srv.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := fmt.Sprintf(`{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"stream":%v}`, stream)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
			if !stream {
				// The answer never comes; give up once the request is in.
				m.OnSubmit = cancel
			}
			resp, err := http.DefaultClient.Do(req)
			if stream {
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if strings.Contains(sc.Text(), `"content":"Hello"`) {
						break
					}
				}
				cancel()
				resp.Body.Close()
			} else if err == nil {
				resp.Body.Close()
				t.Fatal("request succeeded")
			}
			select {
			case <-m.Cancelled():
			case <-time.After(5 * time.Second):
				t.Fatal("Stream.Cancel was not called after the client went away")
			}
			m.Wait()
		})
	}
}

// TestCompletionStreamEchoLogprobs: with echo and logprobs, a choice whose
// output comes before the prompt logprobs (which come with choice 0) waits
// for them, so that its first chunk carries the whole echoed prompt.
func TestCompletionStreamEchoLogprobs(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Script = func(req *scheduler.Request) []openaitest.Batch {
		var plps []engine.Logprobs
		for range len(req.Prompt) - 1 {
			plps = append(plps, openaitest.Logprob("a", -2))
		}
		return []openaitest.Batch{
			{Outs: []scheduler.Output{{Choice: 1, Tokens: []int32{openaitest.Token("b")}, Logprobs: []engine.Logprobs{openaitest.Logprob("b", -0.5)}}}},
			{Outs: []scheduler.Output{
				{Choice: 0, Tokens: []int32{openaitest.Token("c")}, Logprobs: []engine.Logprobs{openaitest.Logprob("c", -0.25)}, PromptLogprobs: plps, Finish: scheduler.FinishLength},
				{Choice: 1, Finish: scheduler.FinishLength},
			}},
		}
	}
	rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/completions",
		`{"model":"test-model","prompt":"a","n":2,"echo":true,"logprobs":0,"stream":true}`)
	evs := sseEvents(t, rec.Body.String())
	type lpChunk struct {
		Choices []struct {
			Index    int    `json:"index"`
			Text     string `json:"text"`
			Logprobs *struct {
				Tokens        []string   `json:"tokens"`
				TokenLogprobs []*float64 `json:"token_logprobs"`
				TextOffset    []int      `json:"text_offset"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	first := map[int]bool{}
	for _, ev := range evs[:len(evs)-1] {
		var c lpChunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatal(err)
		}
		ch := c.Choices[0]
		if first[ch.Index] {
			continue
		}
		first[ch.Index] = true
		want := map[int]string{0: "ac", 1: "ab"}[ch.Index]
		if ch.Text != want {
			t.Errorf("choice %d first chunk text %q, want %q", ch.Index, ch.Text, want)
		}
		if ch.Logprobs == nil || len(ch.Logprobs.Tokens) != 3 || ch.Logprobs.Tokens[0] != "<s>" ||
			ch.Logprobs.TokenLogprobs[0] != nil || ch.Logprobs.TokenLogprobs[1] == nil || *ch.Logprobs.TokenLogprobs[1] != -2 ||
			!slices.Equal(ch.Logprobs.TextOffset, []int{0, 0, 1}) {
			t.Errorf("choice %d first chunk logprobs %+v", ch.Index, ch.Logprobs)
		}
	}
	if len(first) != 2 {
		t.Errorf("chunks for %d choices", len(first))
	}
}
