package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/kvcache"
)

// Config bounds the scheduler.
type Config struct {
	// MaxNumSeqs caps the running sequences (vLLM's max_num_seqs). It is at
	// most the KV manager's slots.
	MaxNumSeqs int
	// MaxNumBatchedTokens caps the tokens of one step
	// (max_num_batched_tokens); long prompts are prefilled in chunks. It is
	// at least MaxNumSeqs, so every running sequence can decode each step.
	MaxNumBatchedTokens int
	// MaxWaiting bounds the requests waiting to start (the engine core
	// enforces it at submission; CheckBatch refuses batches beyond it).
	MaxWaiting int
	// MaxModelLen is the most tokens (prompt and output) one sequence may
	// hold.
	MaxModelLen int
	// KVCapacityTokens is the KV manager's token capacity
	// (kvcache.Config.CapacityTokens: the positions all running sequences
	// may reserve together), or 0 when only its slots bound them. Running
	// sequences are admitted and preempted by the tokens they hold against
	// it, and one sequence may hold at most MaxSeqLen tokens. CheckRequest
	// needs it here, since it runs without the manager.
	KVCapacityTokens int
	// LongPrefillTokens makes a prompt of more than this many tokens
	// "long" (to its last chunk): in a step where other sequences decode, long
	// prompts together compute at most the budget SetLongPrefillBudget
	// last set, and never more than LongPrefillTokens, so that a long
	// prompt's chunks do not stall every decoding stream for seconds (the
	// engine core sets the budget from measured step times; pacing.go).
	// Short prompts are never held back. 0 turns it off.
	LongPrefillTokens int
	// Speculative turns on speculative decoding for every request
	// (speculative.go); Validate checks it, with its defaults filled in
	// (Speculative.WithDefaults) by whoever builds the Config.
	Speculative Speculative
	// MaxLoRAs caps the distinct adapters of one step (vLLM's
	// --max-loras); 0 means no cap. Requests of other adapters wait for a
	// later step, oldest first, so none starves.
	MaxLoRAs int
}

// MaxSeqLen is the most tokens (prompt and output) one sequence may hold:
// MaxModelLen, or KVCapacityTokens when that is smaller (a sequence alone
// may fill the KV memory, not more). A prompt must be shorter.
func (c *Config) MaxSeqLen() int {
	if c.KVCapacityTokens > 0 {
		return min(c.MaxModelLen, c.KVCapacityTokens)
	}
	return c.MaxModelLen
}

// Validate checks the configuration against the KV manager's capacity.
func (c *Config) Validate(kv kvcache.Stats) error {
	switch {
	case c.MaxNumSeqs < 1:
		return fmt.Errorf("scheduler: max_num_seqs %d < 1", c.MaxNumSeqs)
	case c.MaxNumSeqs > kv.Slots:
		return fmt.Errorf("scheduler: max_num_seqs %d exceeds the KV manager's %d slots", c.MaxNumSeqs, kv.Slots)
	case c.MaxNumBatchedTokens < c.MaxNumSeqs:
		return fmt.Errorf("scheduler: max_num_batched_tokens %d < max_num_seqs %d; running sequences could not all decode in one step", c.MaxNumBatchedTokens, c.MaxNumSeqs)
	case c.MaxWaiting < 1:
		return fmt.Errorf("scheduler: max waiting %d < 1", c.MaxWaiting)
	case c.MaxModelLen < 2:
		return fmt.Errorf("scheduler: max model length %d < 2", c.MaxModelLen)
	case c.MaxModelLen > kv.SlotTokens:
		return fmt.Errorf("scheduler: max model length %d exceeds the %d positions of a KV slot", c.MaxModelLen, kv.SlotTokens)
	case c.KVCapacityTokens != kv.CapacityTokens:
		return fmt.Errorf("scheduler: KV capacity of %d tokens differs from the KV manager's %d", c.KVCapacityTokens, kv.CapacityTokens)
	case c.KVCapacityTokens == 1:
		return fmt.Errorf("scheduler: a KV capacity of %d token holds no prompt and its answer", c.KVCapacityTokens)
	}
	if err := c.Speculative.Validate(); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

// maxKVFullRetries bounds how often a sequence the engine had no KV room
// for waits and retries; one more failure ends it with ErrEngine. A slot
// holds MaxModelLen positions and a sequence computes only positions it
// reserved, so the engine should never run out.
const maxKVFullRetries = 3

type seqState uint8

const (
	seqWaiting seqState = iota
	seqRunning
	seqFinished
)

type request struct {
	req       *Request
	started   bool   // left the waiting state (admitted, or finished first)
	order     uint64 // arrival order, for FCFS among equal priorities
	seqs      []*sequence
	open      int
	usage     Usage
	firstSeen bool // a token was produced
	// promptChunks is the most steps one of its sequences' prompts took
	// (RequestOutput.PromptChunks).
	promptChunks int
}

type sequence struct {
	id       engine.SeqID
	req      *request
	choice   int
	sampling engine.Sampling
	tokens   []int32 // prompt, then output
	computed int     // tokens in the KV memory (numComputed)
	state    seqState
	added    bool // the engine has its sampler
	admitted bool // admitted at least once (later admissions are resumes)
	offered  bool // the full prompt was offered to the prefix cache
	kvFull   int  // times the engine found no KV room for it
	// promptLogprobs collects prompt logprobs until they are sent with the
	// first output token.
	promptLogprobs []engine.Logprobs
	sentPromptLP   bool
	// think is the choice's place in its thinking section (Request.Thinking);
	// only backs Chunk.Only when a token is forced.
	think thinkState
	only  [1]int32
	// draftLen is the most draft tokens the sequence's next step may
	// carry (speculative.go's adaptDraft); 0 until its first draft.
	draftLen int
	// promptChunks counts the steps that computed its prompt (or, after a
	// preemption, its tokens again) before it decodes.
	promptChunks int
}

func (s *sequence) numOutput() int { return len(s.tokens) - len(s.req.req.Prompt) }

// RequestOutput is an Output addressed to its request.
type RequestOutput struct {
	RequestID string
	Output    Output
	// Usage is the request's usage after this output.
	Usage Usage
	// First is set on the request's first generated token; Last when its
	// final choice ended. The engine core derives TTFT and end-to-end
	// metrics from them.
	First, Last bool
	// PromptChunks is how many steps the request's prompt took so far: 1
	// for a prompt computed in one step, more when the token budget or a
	// long prompt's pacing split it into chunks, or a preemption made it
	// compute again (with n > 1, the most of any choice). 0 before any of
	// it was computed.
	PromptChunks int
}

// Stats is a snapshot of the scheduler's state.
type Stats struct {
	Running, Waiting int
	// Requests is the number of live requests.
	Requests    int
	Preemptions uint64
	// ThinkingForced counts thinking sections the budget ended
	// (Request.Thinking).
	ThinkingForced uint64
	// Spec counts speculative decoding's drafts and accepted tokens.
	Spec SpecStats
	KV   kvcache.Stats
	// EngineKV is what the executor's KV memory takes, as the engine core
	// last read it (the scheduler leaves it zero).
	EngineKV engine.KVMemory
	// RunningLoRAs and WaitingLoRAs are the names of the adapters of the
	// running and the waiting sequences, sorted (vLLM's
	// lora_requests_info); MaxLoRAs is Config.MaxLoRAs.
	RunningLoRAs, WaitingLoRAs []string
	MaxLoRAs                   int
	// AdapterSwitches is the executor's count of batches decoded with a
	// LoRA adapter set (engine.AdapterSwitchReporter), as the engine core
	// last read it (the scheduler leaves it zero).
	AdapterSwitches uint64
}

// Scheduler is the continuous-batching state machine: every step it picks
// the sequences to run and how many tokens each computes. It has no
// goroutines, no locks, no I/O and reads no clock (time is passed in); the
// engine core drives it. See doc.go for the policy.
type Scheduler struct {
	cfg    Config
	maxLen int // cfg.MaxSeqLen()
	// longBudget is SetLongPrefillBudget's tokens (0: none set);
	// pacing is what it did in the last step (pacing.go).
	longBudget int
	pacing     Pacing
	kv         *kvcache.Manager
	requests   map[string]*request
	byID       map[engine.SeqID]*sequence // live sequences
	waiting    []*sequence                // by (priority, arrival order, choice)
	running    []*sequence                // in admission order
	order      uint64
	nextID     engine.SeqID

	added   []engine.NewSequence
	removed []engine.SeqID
	outbox  []RequestOutput
	// started counts requests that left the waiting state since the last
	// TakeStarted.
	started int

	preemptions    uint64
	thinkingForced uint64
	spec           SpecStats
	// ranked is scratch space for growDecodes.
	ranked []*sequence
}

// New returns a scheduler over kv.
func New(cfg Config, kv *kvcache.Manager) (*Scheduler, error) {
	if err := cfg.Validate(kv.Stats()); err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, maxLen: cfg.MaxSeqLen(), kv: kv, requests: make(map[string]*request), byID: make(map[engine.SeqID]*sequence)}
	if cfg.Speculative.Method != SpecNone {
		s.spec.AcceptedPerPos = make([]uint64, cfg.Speculative.NumTokens)
	}
	return s, nil
}

// Config returns the configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// CheckRequest reports why a request can never run under c, or nil. Errors
// about the request's content or the server's limits are *RequestError; a
// request the protocol layer failed to fill in (no arrival time) is a plain
// error. It is the one place a request's capacity is checked, and safe to
// call from any goroutine.
func (c *Config) CheckRequest(r *Request) error {
	reqErr := func(f Field, err error, v, limit int) error {
		return &RequestError{Field: f, Err: err, Value: v, Limit: limit, PromptTokens: len(r.Prompt), MaxTokens: r.MaxTokens}
	}
	maxLen := c.MaxModelLen
	switch {
	case r.Arrival.IsZero():
		return errors.New("scheduler: request without an arrival time")
	case r.N < 1:
		return reqErr(FieldN, ErrInvalid, r.N, 1)
	case r.KeepKV != "" && r.N != 1:
		return reqErr(FieldN, ErrInvalid, r.N, 1)
	case r.N > c.MaxNumSeqs:
		return reqErr(FieldN, ErrLimit, r.N, c.MaxNumSeqs)
	case len(r.Prompt) == 0:
		return reqErr(FieldPrompt, ErrInvalid, 0, 1)
	case len(r.Prompt) >= maxLen:
		return &RequestError{Field: FieldPrompt, Err: ErrTooLong, Value: len(r.Prompt), Limit: maxLen, PromptTokens: len(r.Prompt)}
	case c.KVCapacityTokens > 0 && len(r.Prompt) >= c.KVCapacityTokens:
		// The context has room, the KV memory never will: even alone, the
		// sequence could not hold its prompt and a token more.
		return &RequestError{Field: FieldPrompt, Err: ErrTooLong, Value: len(r.Prompt), Limit: c.KVCapacityTokens,
			PromptTokens: len(r.Prompt), KVTokens: c.KVCapacityTokens}
	case r.MaxTokens < 1:
		return reqErr(FieldMaxTokens, ErrInvalid, r.MaxTokens, 1)
	case !mediaFits(r.Media, len(r.Prompt)):
		return errors.New("scheduler: request media spans out of order, outside the prompt, or with no rows")
	case r.Thinking != nil && (len(r.Thinking.Start) == 0 || len(r.Thinking.End) == 0):
		return reqErr(FieldThinking, ErrInvalid, 0, 1)
	case r.Thinking != nil && (r.Thinking.Generated < 0 || r.Thinking.Generated >= len(r.Prompt) || (r.Thinking.Generated > 0 && r.N > 1)):
		return reqErr(FieldThinking, ErrInvalid, r.Thinking.Generated, len(r.Prompt)-1)
	case r.MinTokens < 0 || r.MinTokens > r.MaxTokens:
		return reqErr(FieldMinTokens, ErrInvalid, r.MinTokens, r.MaxTokens)
	case len(r.Prompt)+r.MaxTokens > maxLen:
		f := FieldPrompt
		if r.MaxTokens >= maxLen {
			f = FieldMaxTokens // no prompt could make room: the cap is what to fix
		}
		return reqErr(f, ErrTooLong, len(r.Prompt)+r.MaxTokens, maxLen)
	}
	return nil
}

// mediaFits reports whether media spans are in order, inside a prompt of
// n tokens, each with rows of one width.
func mediaFits(media []Media, n int) bool {
	next := 0
	for _, m := range media {
		if m.Rows <= 0 || m.Offset < next || m.Offset+m.Rows > n || len(m.Embd) == 0 || len(m.Embd)%m.Rows != 0 {
			return false
		}
		next = m.Offset + m.Rows
	}
	return true
}

// CheckBatch reports whether n requests submitted together can ever be
// waiting at once under c.
func (c *Config) CheckBatch(n int) error {
	if n > c.MaxWaiting {
		return &RequestError{Field: FieldRequests, Err: ErrLimit, Value: n, Limit: c.MaxWaiting}
	}
	return nil
}

// Add enqueues a request. The caller has checked it (Config.CheckRequest).
func (s *Scheduler) Add(r *Request) {
	if _, dup := s.requests[r.ID]; dup {
		panic(fmt.Sprintf("scheduler: request %q added twice", r.ID))
	}
	rq := &request{req: r, order: s.order, open: r.N}
	s.order++
	rq.usage.PromptTokens = len(r.Prompt)
	for i := range r.N {
		sp := r.Sampling
		sp.Seed += uint32(i)
		sq := &sequence{id: s.nextID, req: rq, choice: i, sampling: sp, tokens: slices.Clip(slices.Clone(r.Prompt)), think: thinkStateAfter(r.Thinking, r.Prompt)}
		s.nextID++
		rq.seqs = append(rq.seqs, sq)
		s.byID[sq.id] = sq
		s.enqueue(sq)
	}
	s.requests[r.ID] = rq
}

func (s *Scheduler) less(a, b *sequence) bool {
	ra, rb := a.req, b.req
	if ra.req.Priority != rb.req.Priority {
		return ra.req.Priority < rb.req.Priority
	}
	if ra.order != rb.order {
		return ra.order < rb.order
	}
	return a.choice < b.choice
}

func (s *Scheduler) enqueue(sq *sequence) {
	sq.state = seqWaiting
	i, _ := slices.BinarySearchFunc(s.waiting, sq, func(x, y *sequence) int {
		if s.less(x, y) {
			return -1
		}
		return 1
	})
	s.waiting = slices.Insert(s.waiting, i, sq)
}

// Abort ends choice of request id (all choices when choice < 0). stopped
// reports a stop string found by the caller: the choice finishes with
// FinishStop instead of FinishAbort. Unknown requests are ignored.
func (s *Scheduler) Abort(id string, choice int, stopped bool, err error) {
	rq, ok := s.requests[id]
	if !ok {
		return
	}
	reason := FinishAbort
	if stopped {
		reason = FinishStop
	}
	for _, sq := range rq.seqs {
		if choice >= 0 && sq.choice != choice {
			continue
		}
		s.finish(sq, Output{Choice: sq.choice, Finish: reason, Err: err}, true)
	}
}

// Expire aborts requests whose deadline is not after now, in arrival
// order.
func (s *Scheduler) Expire(now time.Time) {
	for _, rq := range s.byArrival() {
		if d := rq.req.Deadline; !d.IsZero() && !now.Before(d) {
			s.Abort(rq.req.ID, -1, false, ErrDeadline)
		}
	}
}

// AbortAll ends every request with err (shutdown, engine restart), in
// arrival order.
func (s *Scheduler) AbortAll(err error) {
	for _, rq := range s.byArrival() {
		s.Abort(rq.req.ID, -1, false, err)
	}
}

// byArrival lists the live requests in arrival order, so that what
// iterates over them is as deterministic as the rest of the state machine.
func (s *Scheduler) byArrival() []*request {
	rqs := make([]*request, 0, len(s.requests))
	for _, rq := range s.requests {
		rqs = append(rqs, rq)
	}
	slices.SortFunc(rqs, func(a, b *request) int { return cmp.Compare(a.order, b.order) })
	return rqs
}

// finish ends a sequence and queues its last output. keepKV offers its
// computed blocks to the prefix cache; it is false when the engine failed
// the sequence and its KV is unknown.
func (s *Scheduler) finish(sq *sequence, out Output, keepKV bool) {
	if sq.state == seqFinished {
		return
	}
	switch sq.state {
	case seqRunning:
		s.running = slices.DeleteFunc(s.running, func(x *sequence) bool { return x == sq })
	case seqWaiting:
		s.waiting = slices.DeleteFunc(s.waiting, func(x *sequence) bool { return x == sq })
	}
	sq.state = seqFinished
	delete(s.byID, sq.id)
	s.kv.Free(sq.id, keepKV)
	if sq.added {
		s.removed = append(s.removed, sq.id)
	}
	rq := sq.req
	rq.open--
	s.markStarted(rq)
	s.emit(rq, out, false)
	if rq.open == 0 {
		delete(s.requests, rq.req.ID)
	}
}

func (s *Scheduler) emit(rq *request, out Output, first bool) {
	s.outbox = append(s.outbox, RequestOutput{
		RequestID:    rq.req.ID,
		Output:       out,
		Usage:        rq.usage,
		First:        first,
		Last:         rq.open == 0,
		PromptChunks: rq.promptChunks,
	})
}

func (s *Scheduler) markStarted(rq *request) {
	if !rq.started {
		rq.started = true
		s.started++
	}
}

// TakeStarted returns how many requests left the waiting queue (ran for the
// first time, or ended before they ran) since the last call. The engine
// core uses it to keep its bound on waiting requests exact.
func (s *Scheduler) TakeStarted() int {
	n := s.started
	s.started = 0
	return n
}

// Has reports whether a request with this id is live.
func (s *Scheduler) Has(id string) bool { _, ok := s.requests[id]; return ok }

// Outputs returns the outputs produced since the last call.
func (s *Scheduler) Outputs() []RequestOutput {
	out := s.outbox
	s.outbox = nil
	return out
}

// SlotsWanted is how many KV slots the scheduler could use now when
// sequences wait for a slot (every running and waiting sequence, up to
// MaxNumSeqs), or 0 when no sequence waits for one: none waits, a slot is
// free, or the head of the queue waits for KV tokens, which more slots
// would not give it. The engine core grows the engine's slots to it when
// it can, so that KV memory follows the load.
func (s *Scheduler) SlotsWanted() int {
	if len(s.waiting) == 0 || s.kv.FreeSlots() > 0 {
		return 0
	}
	if head := s.waitingHead(); head != nil && !s.kv.FitsTokens(len(head.tokens)) {
		return 0
	}
	return min(s.cfg.MaxNumSeqs, len(s.running)+len(s.waiting))
}

// HasWork reports whether a step would do anything.
func (s *Scheduler) HasWork() bool {
	return len(s.running) > 0 || len(s.waiting) > 0 || len(s.removed) > 0 || len(s.added) > 0
}

// Stats returns a snapshot.
func (s *Scheduler) Stats() Stats {
	return Stats{
		Running:        len(s.running),
		Waiting:        len(s.waiting),
		Requests:       len(s.requests),
		Preemptions:    s.preemptions,
		ThinkingForced: s.thinkingForced,
		Spec:           s.spec.clone(),
		KV:             s.kv.Stats(),
		RunningLoRAs:   loraNames(s.running),
		WaitingLoRAs:   loraNames(s.waiting),
		MaxLoRAs:       s.cfg.MaxLoRAs,
	}
}

// loraNames lists the distinct adapter names of seqs, sorted.
func loraNames(seqs []*sequence) []string {
	var names []string
	for _, sq := range seqs {
		if name := sq.req.req.adapterName(); name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Schedule decides the next step:
//
//  1. every running sequence that decodes reserves the KV position its
//     token takes; when the KV tokens are all reserved, the lowest-ranked
//     running sequences are preempted for it (growDecodes);
//  2. if a waiting sequence outranks a running one (lower priority value)
//     and no slot is free or its tokens do not fit, the lowest-ranked
//     running sequences are preempted for it;
//  3. every running sequence that decodes gets its token, then running
//     prompts get their next chunks, within the token budget;
//  4. waiting sequences are admitted in order while the budget, MaxNumSeqs,
//     the KV slots and the KV tokens allow.
func (s *Scheduler) Schedule() *engine.Step {
	step := &engine.Step{}
	budget := s.cfg.MaxNumBatchedTokens
	s.growDecodes()
	s.preemptForPriority()

	// Decodes first: one token each, so that prompts never stall them.
	decodes := 0
	for _, sq := range s.running {
		if len(sq.tokens)-sq.computed == 1 {
			if sq.computed < len(sq.req.req.Prompt) {
				sq.promptChunk() // the last token of a chunked prompt
			}
			step.Batch = append(step.Batch, s.chunk(sq, 1))
			budget--
			decodes++
		}
	}
	// Their drafts next (speculative.go): before prompts, as vLLM
	// schedules a running request's speculative tokens with it; none in a
	// step of more decodes than DisableByBatchSize.
	if sp := s.cfg.Speculative; sp.Method != SpecNone && (sp.DisableByBatchSize == 0 || decodes <= sp.DisableByBatchSize) {
		budget = s.addDrafts(step.Batch, budget)
	}
	// Long prompts share the long-prefill limit while others decode.
	s.pacing = Pacing{Limit: s.longPrefillLimit(len(step.Batch) > 0)}
	prefill := func(sq *sequence) int {
		n := min(len(sq.tokens)-sq.computed, budget)
		if s.pacing.Limit > 0 && len(sq.tokens) > s.cfg.LongPrefillTokens {
			n = min(n, s.pacing.Limit-s.pacing.Tokens)
			s.pacing.Tokens += n
		}
		if n > 0 {
			sq.promptChunk()
		}
		return n
	}
	for _, sq := range s.running {
		if len(sq.tokens)-sq.computed <= 1 || budget <= 0 {
			continue
		}
		n := prefill(sq)
		if n == 0 {
			continue
		}
		step.Batch = append(step.Batch, s.chunk(sq, n))
		budget -= n
	}

	loras := s.runningLoRAs()
	loraBlocked := false
	for i := 0; i < len(s.waiting) && budget > 0 && len(s.running) < s.cfg.MaxNumSeqs; {
		sq := s.waiting[i]
		if s.waitForSibling(sq) {
			i++
			continue
		}
		if !loraAdmits(s.cfg.MaxLoRAs, loras, sq.req.req.adapterName(), loraBlocked) {
			// Its adapter would exceed MaxLoRAs: it waits, and so do the
			// later sequences of adapters, so that the running adapters
			// drain and it gets its turn; base-model sequences need no
			// adapter and go on.
			loraBlocked = true
			i++
			continue
		}
		if c := s.kv.CapacityTokens(); c > 0 && len(sq.tokens) > c {
			// It could never reserve its tokens, and would block the queue
			// for ever. CheckRequest refuses such prompts; this is for a
			// caller that skipped it.
			s.finish(sq, Output{Choice: sq.choice, Finish: FinishAbort, Err: &RequestError{Field: FieldPrompt, Err: ErrTooLong,
				Value: len(sq.tokens), Limit: c, PromptTokens: len(sq.req.req.Prompt), KVTokens: c}}, false)
			continue
		}
		cached, ok := s.kv.Admit(sq.id, kvcache.AdmitOptions{
			Tokens:        sq.tokens,
			Salt:          sq.req.req.CacheKey(),
			NoCache:       sq.wantsPromptLogprobs(),
			Count:         !sq.admitted,
			Keep:          sq.keepKV(),
			KeepPositions: len(sq.req.req.Prompt),
		})
		if !ok {
			break // no slot or no KV tokens; strict order: nothing jumps the head of the queue
		}
		s.waiting = slices.Delete(s.waiting, i, i+1)
		sq.state = seqRunning
		s.running = append(s.running, sq)
		sq.computed = cached
		if name := sq.req.req.adapterName(); name != "" {
			loras[name] = true
		}
		s.markStarted(sq.req)
		if !sq.admitted {
			sq.admitted = true
			sq.req.usage.CachedTokens = max(sq.req.usage.CachedTokens, cached)
		}
		if !sq.added {
			sq.added = true
			s.added = append(s.added, engine.NewSequence{Seq: sq.id, Sampling: sq.sampling, History: sq.req.req.Prompt, Adapter: sq.req.req.Adapter})
		}
		// A long prompt with no budget left is admitted (its KV reserved,
		// its cached prefix restored) and starts computing next step.
		if n := prefill(sq); n > 0 {
			step.Batch = append(step.Batch, s.chunk(sq, n))
			budget -= n
		}
	}

	step.Added, s.added = s.added, nil
	step.Exports, step.Clears, step.Restores = s.kv.StepOps()
	step.Removed, s.removed = s.removed, nil
	return step
}

// preemptForPriority makes room for waiting sequences that outrank running
// ones when every slot is taken or their tokens do not fit the free KV
// tokens. It preempts for tokens only when preempting every running
// sequence the head outranks would make them fit.
func (s *Scheduler) preemptForPriority() {
	for len(s.waiting) > 0 && len(s.running) > 0 {
		head := s.waitingHead()
		if head == nil {
			return
		}
		slot := s.kv.FreeSlots() > 0 && len(s.running) < s.cfg.MaxNumSeqs
		fits := s.kv.FitsTokens(len(head.tokens))
		if slot && fits {
			return
		}
		if !loraAdmits(s.cfg.MaxLoRAs, s.runningLoRAs(), head.req.req.adapterName(), false) {
			return // preempting would not let it in before the adapters drain
		}
		victim := s.pickVictim()
		if head.req.req.Priority >= victim.req.req.Priority {
			return
		}
		if !fits && !s.fitsAfterPreempting(head) {
			return
		}
		s.preempt(victim)
	}
}

// fitsAfterPreempting reports whether head's tokens would fit the KV
// tokens if every running sequence it outranks were preempted.
func (s *Scheduler) fitsAfterPreempting(head *sequence) bool {
	free := s.kv.FreeTokens()
	for _, sq := range s.running {
		if sq.req.req.Priority > head.req.req.Priority {
			free += s.kv.Reserved(sq.id)
		}
	}
	return len(head.tokens) <= free
}

// growDecodes reserves, for every running sequence that decodes, the KV
// position its token takes (a prefill never needs more: admission reserved
// every known token). When the KV tokens are all reserved, it goes through
// the running sequences best first, and one that cannot grow preempts the
// lowest-ranked running sequence (highest priority value, latest arrival;
// none of them has a chunk yet) until it can: itself, when it is that
// sequence. A sequence alone that cannot grow holds the whole capacity; it
// ends with FinishLength, as at the end of the context (appendToken ends a
// sequence at MaxSeqLen before that can happen).
func (s *Scheduler) growDecodes() {
	if s.kv.CapacityTokens() == 0 {
		return
	}
	short := false
	for _, sq := range s.running {
		if len(sq.tokens)-sq.computed == 1 && !s.kv.Grow(sq.id, sq.computed+1) {
			short = true
		}
	}
	if !short {
		return
	}
	ranked := append(s.ranked[:0], s.running...)
	slices.SortFunc(ranked, func(a, b *sequence) int {
		if s.less(a, b) {
			return -1
		}
		return 1
	})
	worst := len(ranked) - 1
	for i, sq := range ranked {
		if sq.state != seqRunning {
			continue // preempted for a better one
		}
		if len(sq.tokens)-sq.computed != 1 {
			continue
		}
		for !s.kv.Grow(sq.id, sq.computed+1) {
			for ranked[worst].state != seqRunning {
				worst--
			}
			if worst > i {
				s.preempt(ranked[worst])
				continue
			}
			if len(s.running) == 1 {
				s.finish(sq, Output{Choice: sq.choice, Finish: FinishLength}, true)
			} else {
				s.preempt(sq)
			}
			break
		}
	}
	clear(ranked)
	s.ranked = ranked[:0]
}

// waitingHead is the first waiting sequence that may be admitted now.
func (s *Scheduler) waitingHead() *sequence {
	for _, sq := range s.waiting {
		if !s.waitForSibling(sq) {
			return sq
		}
	}
	return nil
}

// runningLoRAs is the set of adapter names of the running sequences.
func (s *Scheduler) runningLoRAs() map[string]bool {
	set := make(map[string]bool)
	for _, sq := range s.running {
		if name := sq.req.req.adapterName(); name != "" {
			set[name] = true
		}
	}
	return set
}

// loraAdmits reports whether a sequence of adapter name ("" for the base
// model) may start beside the running adapters under the cap maxLoRAs (0:
// none). After blocked (an earlier waiting sequence did not fit), only
// base-model sequences start: admitting more of a running adapter would
// keep it running and starve the blocked one.
func loraAdmits(maxLoRAs int, running map[string]bool, name string, blocked bool) bool {
	switch {
	case maxLoRAs <= 0 || name == "":
		return true
	case blocked:
		return false
	case running[name]:
		return true
	}
	return len(running) < maxLoRAs
}

// waitForSibling holds back the other choices of an n > 1 request until
// choice 0's prompt blocks are in the prefix cache: they then restore the
// prompt instead of computing it n times.
func (s *Scheduler) waitForSibling(sq *sequence) bool {
	if sq.choice == 0 || sq.admitted || !s.kv.Caching() {
		return false
	}
	first := sq.req.seqs[0]
	if first.state == seqFinished {
		// Its blocks may still be on their way to the cache.
		return !s.kv.Settled(first.id, len(sq.req.req.Prompt))
	}
	return !first.offered || !s.kv.Settled(first.id, len(sq.req.req.Prompt))
}

// wantsPromptLogprobs: choice 0 of a request that asked for prompt logprobs
// still has to report them, so every prompt position needs its logits.
func (sq *sequence) wantsPromptLogprobs() bool {
	return sq.req.req.PromptLogprobs >= 0 && sq.choice == 0 && !sq.sentPromptLP
}

// badWordBans returns ban plus the last token of every bad word whose
// other tokens end output. ban is not modified.
func badWordBans(ban []int32, words [][]int32, output []int32) []int32 {
	out := slices.Clip(ban)
	for _, w := range words {
		if len(w) == 0 {
			continue
		}
		prefix := w[:len(w)-1]
		if len(prefix) <= len(output) && slices.Equal(output[len(output)-len(prefix):], prefix) {
			out = append(out, w[len(w)-1])
		}
	}
	return out
}

func (s *Scheduler) chunk(sq *sequence, n int) engine.Chunk {
	slot, _ := s.kv.Slot(sq.id)
	c := engine.Chunk{
		Seq:    sq.id,
		Slot:   slot,
		Pos:    int32(sq.computed),
		Tokens: sq.tokens[sq.computed : sq.computed+n],
		Sample: sq.computed+n == len(sq.tokens),
	}
	r := sq.req.req
	if c.Sample && sq.numOutput() < r.MinTokens {
		c.Ban = r.StopTokens
	}
	if c.Sample && len(r.BadWords) > 0 {
		c.Ban = badWordBans(c.Ban, r.BadWords, sq.tokens[len(r.Prompt):])
	}
	if c.Sample {
		if tok, ok := sq.think.force(r.Thinking); ok {
			// The thinking budget is spent: this token is not the model's
			// choice (min_tokens and bad words give way).
			sq.only[0] = tok
			c.Only, c.Ban = sq.only[:], nil
		}
	}
	c.Media = mediaSpans(r.Media, sq.computed, sq.computed+n)
	if sq.wantsPromptLogprobs() {
		// Row i predicts token i+1; the last prompt row predicts the first
		// output token, which the sample reports.
		if end := min(sq.computed+n, len(r.Prompt)-1); end > sq.computed {
			c.Targets = sq.tokens[sq.computed+1 : end+1]
		}
	}
	return c
}

// mediaSpans are the parts of a prompt's media that positions [from, to)
// cover, as spans of the chunk that starts at from. A chunk may begin or
// end inside an item: its span then holds that part's rows.
func mediaSpans(media []Media, from, to int) []engine.MediaSpan {
	var spans []engine.MediaSpan
	for _, m := range media {
		a, b := max(m.Offset, from), min(m.Offset+m.Rows, to)
		if a >= b {
			continue
		}
		width := len(m.Embd) / m.Rows
		spans = append(spans, engine.MediaSpan{
			Offset: a - from, Rows: b - a,
			Embd: m.Embd[(a-m.Offset)*width : (b-m.Offset)*width],
		})
	}
	return spans
}

// pickVictim returns the running sequence to preempt: the lowest priority
// (highest value), latest arrival.
func (s *Scheduler) pickVictim() *sequence {
	v := s.running[len(s.running)-1]
	for _, sq := range s.running {
		if s.less(v, sq) {
			v = sq
		}
	}
	return v
}

// preempt frees a running sequence's slot (its KV goes to the prefix
// cache) and puts it back in the waiting queue; it resumes by
// restoring what the cache kept and recomputing the rest.
func (s *Scheduler) preempt(sq *sequence) {
	s.running = slices.DeleteFunc(s.running, func(x *sequence) bool { return x == sq })
	s.kv.Free(sq.id, true)
	sq.computed = 0
	sq.offered = false
	// Prompt logprobs not sent yet are computed again from the start.
	sq.promptLogprobs = nil
	s.preemptions++
	s.enqueue(sq)
}

// Update applies a step's result: failures, tokens computed, tokens
// sampled, stop and length checks, blocks exported to the prefix cache.
// Finished sequences free their slot at once.
func (s *Scheduler) Update(step *engine.Step, res engine.StepResult) {
	s.kv.Store(res.Exported)
	failed := make(map[engine.SeqID]bool, len(res.Failures))
	for _, f := range res.Failures {
		failed[f.Seq] = true
		sq := s.find(f.Seq)
		if sq == nil || sq.state == seqFinished {
			continue
		}
		if sq.kvFull++; errors.Is(f.Err, engine.ErrKVFull) && sq.state == seqRunning && sq.kvFull <= maxKVFullRetries {
			// The engine had no room for it now: retry it later.
			s.running = slices.DeleteFunc(s.running, func(x *sequence) bool { return x == sq })
			s.kv.Free(sq.id, false)
			sq.computed, sq.offered, sq.promptLogprobs = 0, false, nil
			s.preemptions++
			s.enqueue(sq)
			continue
		}
		s.finish(sq, Output{Choice: sq.choice, Finish: FinishAbort, Err: fmt.Errorf("%w: %w", ErrEngine, f.Err)}, false)
	}
	for i := range step.Batch {
		ch := &step.Batch[i]
		sq := s.find(ch.Seq)
		if sq == nil || sq.state != seqRunning || failed[ch.Seq] {
			continue
		}
		sq.computed += len(ch.Tokens)
		s.kv.Commit(sq.id, sq.tokens, sq.computed)
		if !sq.offered && sq.computed >= len(sq.req.req.Prompt) {
			// The whole prompt is in the slot: let the cache keep it now, so
			// that siblings and requests with the same prefix find it while
			// this one still runs.
			sq.offered = true
			s.kv.Offer(sq.id)
		}
	}
	for _, pl := range res.PromptLogprobs {
		if sq := s.find(pl.Seq); sq != nil && sq.state == seqRunning {
			sq.promptLogprobs = append(sq.promptLogprobs, pl.Logprobs...)
		}
	}
	var drafted map[engine.SeqID]int
	for i := range step.Batch {
		if ch := &step.Batch[i]; len(ch.Draft) > 0 {
			if drafted == nil {
				drafted = make(map[engine.SeqID]int)
			}
			drafted[ch.Seq] = len(ch.Draft)
		}
	}
	for _, smp := range res.Samples {
		sq := s.find(smp.Seq)
		if sq == nil || sq.state != seqRunning {
			continue
		}
		s.countDrafts(drafted[smp.Seq], len(smp.Accepted))
		sq.adaptDraft(drafted[smp.Seq], len(smp.Accepted), s.cfg.Speculative.NumTokens)
		s.appendSample(sq, smp)
	}
}

func (s *Scheduler) find(id engine.SeqID) *sequence { return s.byID[id] }

// keepKV is the name the KV manager keeps the sequence's prompt KV under:
// the request's KeepKV, for choice 0.
func (sq *sequence) keepKV() string {
	if sq.choice != 0 {
		return ""
	}
	return sq.req.req.KeepKV
}

// appendSample applies what the engine sampled for sq: the accepted draft
// tokens, whose KV the slot holds already, then the sampled token. Each is
// checked as if it had come alone (stop tokens, max_tokens, the length
// limit, the thinking count), and the first that ends the choice drops
// the ones after it. One Output carries them.
func (s *Scheduler) appendSample(sq *sequence, smp engine.Sample) {
	rq := sq.req
	r := rq.req
	out := Output{Choice: sq.choice}
	for i := range len(smp.Accepted) + 1 {
		tok, lp := smp.Token, smp.Logprobs
		if i < len(smp.Accepted) {
			tok, lp = smp.Accepted[i], nil
			if i < len(smp.AcceptedLogprobs) {
				lp = &smp.AcceptedLogprobs[i]
			}
		}
		sq.tokens = append(sq.tokens, tok)
		if i < len(smp.Accepted) {
			sq.computed++
			s.kv.Commit(sq.id, sq.tokens, sq.computed)
		}
		rq.usage.CompletionTokens++
		if r.Thinking != nil && sq.think.phase != thinkDone {
			before, wasForced := sq.think.reasoning, sq.think.forced
			sq.think.advance(r.Thinking, sq.tokens[len(r.Prompt)-r.Thinking.Generated:])
			rq.usage.ReasoningTokens += sq.think.reasoning - before
			if sq.think.forced && !wasForced {
				s.thinkingForced++
			}
		}
		out.Tokens = append(out.Tokens, tok)
		if lp != nil {
			out.Logprobs = append(out.Logprobs, *lp)
		}
		n := sq.numOutput()
		switch {
		case n >= r.MinTokens && slices.Contains(r.StopTokens, tok):
			out.Finish = FinishStop
		case n >= r.MaxTokens || len(sq.tokens) >= s.maxLen:
			out.Finish = FinishLength
		}
		if out.Finish != FinishNone {
			break
		}
	}
	if r.PromptLogprobs >= 0 && sq.choice == 0 && !sq.sentPromptLP {
		out.PromptLogprobs = sq.promptLogprobs
		sq.sentPromptLP = true
		sq.promptLogprobs = nil
	}
	first := !rq.firstSeen
	rq.firstSeen = true
	if out.Finish == FinishNone {
		s.emit(rq, out, first)
		return
	}
	// finish emits the output itself; mark it first if it is.
	before := len(s.outbox)
	s.finish(sq, out, true)
	if first {
		s.outbox[before].First = true
	}
}

func (st *SpecStats) clone() SpecStats {
	c := *st
	c.AcceptedPerPos = slices.Clone(st.AcceptedPerPos)
	return c
}
