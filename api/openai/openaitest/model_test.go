package openaitest_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/scheduler"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recvAll drains s and returns choice 0's tokens and the final usage.
func recvAll(t *testing.T, s *core.Stream) ([]int32, scheduler.Usage) {
	t.Helper()
	var got []int32
	for {
		outs, err := s.Recv(context.Background())
		if errors.Is(err, io.EOF) {
			return got, s.Usage()
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			if o.Choice == 0 {
				got = append(got, o.Tokens...)
			}
		}
	}
}

// The default script answers "Hello world!" and the stop token; the model
// records the request and reports Cached as cached tokens.
func TestModelHello(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Cached = 2
	req := &scheduler.Request{ID: "a", Prompt: openaitest.Tokens("Hi there"), N: 1, MaxTokens: 8, Arrival: openaitest.Now()}
	streams, err := m.Submit(context.Background(), []*scheduler.Request{req})
	if err != nil {
		t.Fatal(err)
	}
	got, u := recvAll(t, streams[0])
	m.Wait()
	if want := append(openaitest.Tokens("Hello world!"), openaitest.IMEnd); !slices.Equal(got, want) {
		t.Errorf("tokens %v, want %v", got, want)
	}
	if u.PromptTokens != 2 || u.CachedTokens != 2 || u.CompletionTokens != len(got) {
		t.Errorf("usage %+v", u)
	}
	if reqs := m.Requests(); len(reqs) != 1 || reqs[0].ID != "a" {
		t.Errorf("requests %+v", reqs)
	}
}

// Submit refuses what the scheduler would: a prompt longer than the
// context is an error naming the request's index.
func TestModelChecksRequests(t *testing.T) {
	m := openaitest.NewModel(t)
	long := &scheduler.Request{ID: "b", Prompt: make([]int32, m.MaxLen+1), N: 1, MaxTokens: 1, Arrival: openaitest.Now()}
	var ie *core.IndexError
	if _, err := m.Submit(context.Background(), []*scheduler.Request{long}); !errors.As(err, &ie) || ie.Index != 0 {
		t.Fatalf("err %v, want a core.IndexError for request 0", err)
	}
	if len(m.Requests()) != 0 {
		t.Error("a refused request was recorded")
	}
}

// With Gate set, a batch is pushed only after the previous batch's events
// were signalled; Hold keeps the stream open until Cancel, which closes
// Cancelled and counts once; StopChoice is recorded.
func TestModelGateHoldCancel(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Gate = make(chan struct{})
	m.Hold = true
	m.Script = openaitest.TextScript("Hel", "lo")
	req := &scheduler.Request{ID: "c", Prompt: openaitest.Tokens("Hi"), N: 1, MaxTokens: 8, Arrival: openaitest.Now()}
	streams, err := m.Submit(context.Background(), []*scheduler.Request{req})
	if err != nil {
		t.Fatal(err)
	}
	s := streams[0]
	first, err := s.Recv(context.Background())
	if err != nil || len(first) != 1 || !slices.Equal(first[0].Tokens, openaitest.Tokens("Hel")) {
		t.Fatalf("first batch %+v, %v", first, err)
	}
	m.Gate <- struct{}{} // the handler wrote the first batch's event
	second, err := s.Recv(context.Background())
	if err != nil || len(second) != 1 || second[0].Finish != scheduler.FinishStop {
		t.Fatalf("second batch %+v, %v", second, err)
	}
	s.StopChoice(0)
	select {
	case <-m.Cancelled():
		t.Fatal("cancelled before Cancel")
	default:
	}
	s.Cancel()
	s.Cancel()
	<-m.Cancelled()
	m.Wait()
	if m.Cancels() != 2 || !slices.Equal(m.Stops(), []int{0}) {
		t.Errorf("cancels %d stops %v, want 2 and [0]", m.Cancels(), m.Stops())
	}
}

// Backend finds its models by name.
func TestBackend(t *testing.T) {
	a, b := openaitest.NewModel(t), openaitest.NewModel(t)
	b.ModelName = "b"
	be := openaitest.NewBackend(a, b)
	if m, ok := be.Model("b"); !ok || m != b {
		t.Errorf("Model(b) = %v, %v", m, ok)
	}
	if m, ok := be.Model("c"); ok || m != nil {
		t.Errorf("Model(c) = %v, %v", m, ok)
	}
	if len(be.Models()) != 2 {
		t.Errorf("Models() = %v", be.Models())
	}
}
