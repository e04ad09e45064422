package infer

import (
	"math"
	"testing"
)

func TestIntIn(t *testing.T) {
	p := Parameters{"max_tokens": int64(0), "top_logprobs": int64(3), "min_tokens": "x"}
	if _, _, err := p.intIn("max_tokens", 1, math.MaxInt32, "at least 1"); err == nil || err.Error() != "parameter max_tokens must be at least 1, got 0" {
		t.Errorf("max_tokens 0: %v", err)
	} else if AsError(err).Code != Invalid {
		t.Errorf("max_tokens 0: code %v, want Invalid", AsError(err).Code)
	}
	if v, ok, err := p.intIn("top_logprobs", 0, 20, "between 0 and 20"); v != 3 || !ok || err != nil {
		t.Errorf("top_logprobs 3: %d %v %v", v, ok, err)
	}
	if v, ok, err := p.intIn("absent", 0, 1, "0 or 1"); v != 0 || ok || err != nil {
		t.Errorf("absent: %d %v %v", v, ok, err)
	}
	if _, _, err := p.intIn("min_tokens", 0, 1, "0 or 1"); err == nil || AsError(err).Code != Invalid {
		t.Errorf("min_tokens \"x\": %v", err)
	}
}
