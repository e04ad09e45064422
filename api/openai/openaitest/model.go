package openaitest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Created is the load time every Model reports (Unix seconds).
const Created = 1700000000

// Batch is one Push of canned outputs.
type Batch struct {
	Outs []scheduler.Output
	// Events is how many SSE content events the handler writes for this
	// batch; with Model.Gate set, the next batch is pushed only after
	// them, so that batches are never coalesced and golden streams are
	// deterministic.
	Events int
}

// Script gives the batches to push for a request.
type Script func(req *scheduler.Request) []Batch

// Model is an openai.Model (and a frontend.Model) whose Submit replays a
// script. Set its exported fields before the first request; SetScript
// changes the script between requests.
type Model struct {
	// ModelName is the name it is served as (NewModel: "test-model").
	ModelName string
	// MaxLen, MaxSeqs and MaxWaiting are the scheduler limits Submit
	// checks requests and batches against.
	MaxLen, MaxSeqs, MaxWaiting int
	// Tok is the model's tokenizer (NewModel: ChatML over Vocab).
	Tok *tokenizer.Tokenizer
	// SubmitErr, when set, is called with the number of earlier Submit
	// calls; a non-nil result is Submit's error.
	SubmitErr func(call int) error
	// Script gives the batches to push for a request; nil means
	// HelloScript.
	Script Script
	// Cached is reported as Usage.CachedTokens.
	Cached int
	// Gate, when set, receives one value per SSE content event written
	// (see GateWriter), and each batch but the last waits for its
	// Batch.Events values before the next is pushed.
	Gate chan struct{}
	// Hold keeps the stream open after the script until Cancel.
	Hold bool
	// Release, when set, holds the first batch until it is closed (a
	// long prefill).
	Release chan struct{}
	// OnSubmit, when set, is called after a successful Submit.
	OnSubmit func()

	mu         sync.Mutex
	calls      int                 // guarded by mu
	reqs       []scheduler.Request // guarded by mu
	cancels    int                 // guarded by mu: Cancels of choice 0
	stops      []int               // guarded by mu: choices ended by StopChoice
	cancelled  chan struct{}       // closed on the first Cancel
	cancelOnce sync.Once
	wg         sync.WaitGroup
}

// NewModel returns "test-model": 64 tokens of context, 16 sequences,
// 64 waiting, ChatML.
func NewModel(t testing.TB) *Model {
	return &Model{ModelName: "test-model", MaxLen: 64, MaxSeqs: 16, MaxWaiting: 64, Tok: NewTokenizer(t, ""), cancelled: make(chan struct{})}
}

// Name is ModelName.
func (m *Model) Name() string { return m.ModelName }

// Created is the constant Created.
func (m *Model) Created() int64 { return Created }

// MaxModelLen is MaxLen.
func (m *Model) MaxModelLen() int { return m.MaxLen }

// RequestTimeout is 0: no timeout.
func (m *Model) RequestTimeout() time.Duration { return 0 }

// Tokenizer is Tok.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.Tok }

// Submit checks the requests as the engine core does (the scheduler's
// capacity checks are pure functions of its configuration), then replays
// the script for each.
func (m *Model) Submit(ctx context.Context, reqs []*scheduler.Request) ([]*core.Stream, error) {
	limits := scheduler.Config{MaxNumSeqs: m.MaxSeqs, MaxWaiting: m.MaxWaiting, MaxModelLen: m.MaxLen}
	for i, r := range reqs {
		if err := limits.CheckRequest(r); err != nil {
			return nil, &core.IndexError{Index: i, Err: err}
		}
	}
	if err := limits.CheckBatch(len(reqs)); err != nil {
		return nil, err
	}
	m.mu.Lock()
	call := m.calls
	m.calls++
	m.mu.Unlock()
	if m.SubmitErr != nil {
		if err := m.SubmitErr(call); err != nil {
			return nil, err
		}
	}
	var streams []*core.Stream
	for _, r := range reqs {
		streams = append(streams, m.submitOne(r))
	}
	return streams, nil
}

func (m *Model) submitOne(req *scheduler.Request) *core.Stream {
	m.mu.Lock()
	m.reqs = append(m.reqs, *req)
	m.mu.Unlock()
	s := core.NewStream(req.ID, req.N, func(choice int, stopped bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if stopped {
			m.stops = append(m.stops, choice)
			return
		}
		if choice == 0 {
			m.cancels++
		}
		m.cancelOnce.Do(func() { close(m.cancelled) })
	})
	m.mu.Lock()
	script := m.Script
	m.mu.Unlock()
	if script == nil {
		script = HelloScript
	}
	batches := script(req)
	u := scheduler.Usage{PromptTokens: len(req.Prompt), CachedTokens: m.Cached}
	if m.OnSubmit != nil {
		defer m.OnSubmit()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		// Reasoning tokens as the scheduler counts them, simplified: a
		// choice is inside the section until its output ends with End.
		thought := map[int][]int32{}
		ended := map[int]bool{}
		if m.Release != nil {
			<-m.Release
		}
		for k, b := range batches {
			for _, o := range b.Outs {
				u.CompletionTokens += len(o.Tokens)
				if th := req.Thinking; th != nil && !th.Off {
					for _, t := range o.Tokens {
						if ended[o.Choice] {
							break
						}
						thought[o.Choice] = append(thought[o.Choice], t)
						if h := thought[o.Choice]; len(h) >= len(th.End) && slices.Equal(h[len(h)-len(th.End):], th.End) {
							ended[o.Choice] = true
							u.ReasoningTokens -= len(th.End) - 1
							continue
						}
						u.ReasoningTokens++
					}
				}
			}
			s.Push(b.Outs, u)
			if m.Gate == nil || k == len(batches)-1 {
				continue
			}
			for range b.Events {
				select {
				case <-m.Gate:
				case <-m.cancelled:
					return
				case <-time.After(10 * time.Second):
					panic("openaitest: the handler wrote no event")
				}
			}
		}
		if m.Hold {
			select {
			case <-m.cancelled:
			case <-time.After(10 * time.Second):
				panic("openaitest: the stream was never cancelled")
			}
		}
	}()
	return s
}

// SetScript replaces the script between requests.
func (m *Model) SetScript(s Script) {
	m.mu.Lock()
	m.Script = s
	m.mu.Unlock()
}

// Wait waits for the goroutines that push the scripts' batches.
func (m *Model) Wait() { m.wg.Wait() }

// Requests returns copies of the requests submitted so far, in order.
func (m *Model) Requests() []scheduler.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// Cancels is how many streams were cancelled (counted once per stream,
// by their choice 0).
func (m *Model) Cancels() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cancels
}

// Stops returns the choices ended by StopChoice so far, in order.
func (m *Model) Stops() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.stops)
}

// Cancelled is closed when the first stream is cancelled.
func (m *Model) Cancelled() <-chan struct{} { return m.cancelled }

// HelloScript answers "Hello world!" in every choice, ending with the
// stop token IMEnd.
func HelloScript(req *scheduler.Request) []Batch {
	var outs []scheduler.Output
	for i := range req.N {
		outs = append(outs, scheduler.Output{Choice: i, Tokens: append(Tokens("Hello world!"), IMEnd), Finish: scheduler.FinishStop})
	}
	return []Batch{{Outs: outs}}
}

// OutsScript returns a script that pushes the batches of outputs, one
// SSE event each.
func OutsScript(batches ...[]scheduler.Output) Script {
	return func(*scheduler.Request) []Batch {
		var bs []Batch
		for _, b := range batches {
			bs = append(bs, Batch{Outs: b, Events: 1})
		}
		return bs
	}
}

// Out is an output of choice 0.
func Out(finish scheduler.FinishReason, ts ...int32) scheduler.Output {
	return scheduler.Output{Tokens: ts, Finish: finish}
}

// ThinkScript generates text one token at a time, each token in its own
// batch, so that reasoning tags are cut across chunks; it ends with
// FinishLength.
func ThinkScript(text string) Script {
	ids := Tokens(text)
	var batches [][]scheduler.Output
	for i, id := range ids {
		finish := scheduler.FinishReason("")
		if i == len(ids)-1 {
			finish = scheduler.FinishLength
		}
		batches = append(batches, []scheduler.Output{Out(finish, id)})
	}
	return OutsScript(batches...)
}

// ReasoningModel is a Model with a reasoning parser
// (frontend.ReasoningModel).
type ReasoningModel struct {
	*Model
	Parser string
}

// ReasoningParser is Parser.
func (m *ReasoningModel) ReasoningParser() string { return m.Parser }

// TextScript answers the parts of a text in choice 0, one batch and SSE
// event each; the last part ends with the stop token IMEnd.
func TextScript(parts ...string) Script {
	return func(*scheduler.Request) []Batch {
		var bs []Batch
		for i, p := range parts {
			o := scheduler.Output{Tokens: Tokens(p)}
			if i == len(parts)-1 {
				o.Tokens = append(o.Tokens, IMEnd)
				o.Finish = scheduler.FinishStop
			}
			bs = append(bs, Batch{Outs: []scheduler.Output{o}, Events: 1})
		}
		return bs
	}
}

// StreamScript answers "Hello world!" in three batches per choice: "Hel",
// "lo wo", "rld!" + stop token. Choices advance together.
func StreamScript(req *scheduler.Request) []Batch {
	parts := [][]int32{{Token("Hel")}, {Token("lo"), Token(" wo")}, {Token("rld"), Token("!"), IMEnd}}
	var batches []Batch
	for k, p := range parts {
		var b Batch
		for i := range req.N {
			o := scheduler.Output{Choice: i, Tokens: p}
			if k == len(parts)-1 {
				o.Finish = scheduler.FinishStop
			}
			b.Outs = append(b.Outs, o)
			b.Events++
		}
		batches = append(batches, b)
	}
	return batches
}

// LogprobScript answers "Hello world" with logprobs (two alternatives a
// token) and stops at length; with prompt logprobs requested, every
// prompt token but the first gets "a" at -2 with the alternative "b".
func LogprobScript(req *scheduler.Request) []Batch {
	out := scheduler.Output{
		Tokens: []int32{Token("Hello"), Token(" world")},
		Logprobs: []engine.Logprobs{
			Logprob("Hello", -0.25, Alt("Hello", -0.25), Alt("Hi", -1.5)),
			Logprob(" world", -0.5, Alt(" there", -0.75), Alt(" world", -0.5)),
		},
		Finish: scheduler.FinishLength,
	}
	if req.PromptLogprobs >= 0 {
		for range len(req.Prompt) - 1 {
			out.PromptLogprobs = append(out.PromptLogprobs, Logprob("a", -2, Alt("b", -1)))
		}
	}
	return []Batch{{Outs: []scheduler.Output{out}}}
}
