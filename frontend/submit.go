package frontend

import (
	"context"
	"fmt"
	"time"

	"github.com/llmserve/llmserve/scheduler"
)

// Input is one prompt of a request, rendered and ready to submit.
type Input struct {
	// Tokens are the prompt's tokens, media placeholders included.
	Tokens []int32
	// Media are the encoded images and audio clips whose placeholders
	// Tokens holds.
	Media []scheduler.Media
	// Thinking is how the prompt's thinking section is counted and
	// bounded (nil: the model has no reasoning parser).
	Thinking *scheduler.Thinking
}

// Submission is what every prompt of a request shares when it becomes a
// scheduler.Request: the request's parameters, its id, and the times the
// protocol took from its clock.
type Submission struct {
	// Base is the scheduler request every prompt starts from; ID, Prompt,
	// Media, Thinking, MaxTokens, Arrival and Deadline are set per prompt.
	// The slices in it are shared read-only.
	Base scheduler.Request
	// ID is the request's id; with several prompts, prompt i is "ID-i".
	ID string
	// Arrival is when the request arrived.
	Arrival time.Time
	// Deadline is when it must end (Deadline), zero for never.
	Deadline time.Time
	// MaxTokens is the client's cap on generated tokens when MaxTokensSet;
	// else each prompt may generate the rest of the context, MaxModelLen.
	MaxTokens    int
	MaxTokensSet bool
	MaxModelLen  int
}

// Deadline is a request's deadline: the sooner of ctx's and arrival plus
// the model's request timeout (0: none), zero for none.
func Deadline(ctx context.Context, arrival time.Time, timeout time.Duration) time.Time {
	deadline, _ := ctx.Deadline()
	if timeout > 0 && (deadline.IsZero() || arrival.Add(timeout).Before(deadline)) {
		deadline = arrival.Add(timeout)
	}
	return deadline
}

// GenerationCap is the generation cap of a prompt of promptLen tokens:
// the client's, or the rest of the context. Whether it fits is the
// scheduler's check.
func (s *Submission) GenerationCap(promptLen int) int {
	if s.MaxTokensSet {
		return s.MaxTokens
	}
	return max(s.MaxModelLen-promptLen, 0)
}

// Requests turns the inputs into scheduler.Requests: the one place a
// request's defaults are set (id, arrival, deadline, generation cap). The
// model's Submit takes them all or none.
func (s *Submission) Requests(inputs []Input) []*scheduler.Request {
	reqs := make([]*scheduler.Request, len(inputs))
	for i, in := range inputs {
		req := s.Base
		req.ID = s.ID
		if len(inputs) > 1 {
			req.ID = fmt.Sprintf("%s-%d", s.ID, i)
		}
		req.Prompt = in.Tokens
		req.Media = in.Media
		req.Thinking = in.Thinking
		req.MaxTokens = s.GenerationCap(len(in.Tokens))
		req.Arrival = s.Arrival
		req.Deadline = s.Deadline
		reqs[i] = &req
	}
	return reqs
}
