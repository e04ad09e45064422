package frontend

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
)

// Classify sorts the errors from below the protocols into the kinds each
// protocol maps once; an *Error anywhere in the chain is kept as it is.
func TestClassify(t *testing.T) {
	bad := Invalid("max_tokens", "max_tokens must be at least 1, got %d.", 0)
	tests := []struct {
		name  string
		err   error
		kind  Kind
		param string
		code  string
		retry int
	}{
		{"bad input, wrapped", fmt.Errorf("prepare: %w", bad), BadRequest, "max_tokens", "", 0},
		{"media item", &media.Error{Param: "messages[0].content[1]", Err: errors.New("not a PNG")}, BadRequest, "messages[0].content[1]", "", 0},
		{"no projector", media.ErrNoProjector, BadRequest, "messages", "", 0},
		{"queue full", &scheduler.QueueFullError{RetryAfter: 1500 * time.Millisecond}, Overloaded, "", "rate_limit_exceeded", 2},
		{"too long", scheduler.ErrTooLong, BadRequest, "", "context_length_exceeded", 0},
		{"deadline", context.DeadlineExceeded, TimedOut, "", "", 0},
		{"no worker", scheduler.ErrNoWorker, Unavailable, "", "no_healthy_worker", 1},
		{"shutdown", scheduler.ErrClosed, Unavailable, "", "", 0},
		{"engine", scheduler.ErrEngine, Internal, "", "", 0},
		{"canceled", context.Canceled, Canceled, "", "", 0},
		{"unknown", errors.New("boom"), Internal, "", "", 0},
	}
	for _, tt := range tests {
		e := Classify(tt.err)
		if e.Kind != tt.kind || e.Param != tt.param || e.Code != tt.code || e.RetryAfter != tt.retry || e.Message == "" {
			t.Errorf("%s: %+v, want kind %d param %q code %q retry %d", tt.name, e, tt.kind, tt.param, tt.code, tt.retry)
		}
	}
	if e := Classify(errors.New("secret detail")); e.Message != "The server had an error while processing your request." {
		t.Errorf("an unexpected error shows %q", e.Message)
	}
}

func TestWithPrefix(t *testing.T) {
	for _, tt := range []struct{ param, want string }{
		{"role", "messages[0].role"}, {"[1]", "messages[0][1]"}, {"", "messages[0]"},
	} {
		var e *Error
		if !errors.As(WithPrefix("messages[0]", Invalid(tt.param, "x")), &e) || e.Param != tt.want {
			t.Errorf("%q: %+v, want %q", tt.param, e, tt.want)
		}
	}
	plain := errors.New("plain")
	if !errors.Is(WithPrefix("x", plain), plain) {
		t.Error("a plain error changed")
	}
}
