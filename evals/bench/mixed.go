package bench

import (
	"strings"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// Mixed describes the mixed dataset: a few clients send long prompts while
// the others send short ones, all at once, as a server sees a handful of
// long documents among chat traffic. It measures what a long prompt costs
// the short requests beside it (their TTFT and ITL while it prefills) and
// how much memory a server needs to run them together. Lengths are in words
// (about one token each).
//
// The run has Config.MaxConcurrency clients. LongClients of them send the
// LongPrompts long requests, one after another; the other
// MaxConcurrency − LongClients send the remaining NumPrompts − LongPrompts
// short ones, one after another. Each group of clients works through its
// own requests, so a long request never holds back a short one and the
// number of each kind in flight is fixed while both kinds last. Choose
// NumPrompts so that the short requests last about as long as the long ones,
// or the end of the run is short requests alone (or long ones alone).
type Mixed struct {
	// LongClients is the number of clients that send long prompts.
	LongClients int
	// LongPrompts is the number of long requests in the measured run; 0
	// means LongClients (one per long client). Warmup requests are short.
	LongPrompts int
	// LongInputLen is the length of each long prompt, in words.
	LongInputLen int
	// ShortInputLen is the length of each short prompt, in words.
	ShortInputLen int
	// OutputLen is the max_tokens of every request, long or short.
	OutputLen int
}

// DefaultMixed returns the load of issue 17: 4 clients with 6,000-word
// prompts among 28 with 128-word ones (with --max-concurrency 32), 64
// tokens out.
func DefaultMixed() Mixed {
	return Mixed{LongClients: 4, LongInputLen: 6000, ShortInputLen: 128, OutputLen: 64}
}

// longPrompts is the number of long requests among numPrompts measured ones.
func (m Mixed) longPrompts() int {
	if m.LongPrompts == 0 {
		return m.LongClients
	}
	return m.LongPrompts
}

// validate reports each problem with add. numPrompts and concurrency are the
// run's measured requests and clients.
func (m Mixed) validate(numPrompts, concurrency int, add func(format string, args ...any)) {
	if m.LongClients < 1 {
		add("mixed long clients %d: need at least 1", m.LongClients)
	} else if concurrency <= m.LongClients {
		add("max concurrency %d with mixed long clients %d: the mixed dataset needs a --max-concurrency above the long clients, the rest being short clients",
			concurrency, m.LongClients)
	}
	if m.LongPrompts < 0 {
		add("mixed long prompts %d: must not be negative (0 means one per long client)", m.LongPrompts)
	} else if long := m.longPrompts(); long >= 1 && numPrompts >= 1 && numPrompts <= long {
		add("num prompts %d: the mixed dataset needs more than its %d long prompts, the rest being short", numPrompts, long)
	}
	if m.LongInputLen < 1 || m.ShortInputLen < 1 {
		add("mixed long input len %d and short input len %d: need at least 1 word each", m.LongInputLen, m.ShortInputLen)
	}
	if m.OutputLen < 1 {
		add("mixed output len %d: need at least 1 token", m.OutputLen)
	}
}

// mixedRequests returns n requests of the mixed dataset drawn from the given
// RNG stream: the first long ones (the measured run's longPrompts; warmups
// have none, measured says which), then short ones. Request i does not
// depend on n.
func mixedRequests(cfg *Config, stream uint64, n int, measured bool) []request {
	m := cfg.Mixed
	long := 0
	if measured {
		long = min(m.longPrompts(), n)
	}
	r := newRand(cfg.Seed, stream)
	reqs := make([]request, n)
	for i := range reqs {
		words := m.ShortInputLen
		if i < long {
			words = m.LongInputLen
		}
		var b strings.Builder
		b.Grow(8 * words)
		benchio.AppendWords(&b, r, words)
		reqs[i] = request{prompt: b.String(), promptWords: words, maxTokens: m.OutputLen, long: i < long}
	}
	return reqs
}

// lane is one group of clients: the requests they send, in order, and how
// many of them are in flight at most.
type lane struct {
	clients int
	reqs    []int // indices into the run's requests
}

// lanes splits a run's requests between its groups of clients: one group
// of cfg.concurrency() for every dataset but mixed, which has a group for
// its long requests and one for its short ones.
func lanes(cfg *Config, reqs []request) []lane {
	if cfg.Dataset != DatasetMixed {
		all := make([]int, len(reqs))
		for i := range all {
			all[i] = i
		}
		return []lane{{clients: cfg.concurrency(), reqs: all}}
	}
	long := lane{clients: cfg.Mixed.LongClients}
	short := lane{clients: max(cfg.concurrency()-cfg.Mixed.LongClients, 1)}
	for i := range reqs {
		if reqs[i].long {
			long.reqs = append(long.reqs, i)
		} else {
			short.reqs = append(short.reqs, i)
		}
	}
	if len(long.reqs) == 0 {
		return []lane{short}
	}
	return []lane{long, short}
}
