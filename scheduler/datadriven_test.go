package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/kvcache"
)

// TestDataDriven runs the scripts in testdata/ against a Scheduler, its
// kvcache.Manager and an enginetest.Fake that plays the engine. Regenerate
// the expected output with
//
//	go test ./scheduler/ -run TestDataDriven -rewrite
//
// and read the diff. A sequence is named by its request and choice: a/0.
// Token lists are written as ints and ranges: prompt=(1-8, 20, 21).
//
// Commands:
//
//	config max-num-seqs=N batched-tokens=N max-model-len=N [max-waiting=N]
//	       [slots=N] [slot-tokens=N] [block=N] [cache-blocks=N] [max-events=N]
//	       [capacity=N] [vocab=N] [poison=T]
//	    a fresh scheduler over a fresh manager and fake. slots defaults to
//	    max-num-seqs, slot-tokens to max-model-len, block to 4,
//	    cache-blocks (the prefix cache budget in blocks; 4 bytes per
//	    position in the fake's layout) to 0, vocab to 100. capacity is the
//	    KV token capacity (0: none) of the manager, the scheduler and the
//	    fake; with one, state prints each running sequence's reservation
//	    (r=N) and stats the tokens reserved.
//	add id=S prompt=(...) [max=N] [min=N] [priority=N] [n=N] [stop=(...)]
//	    [salt=S] [deadline=SECONDS] [temp=F seed=N] [logprobs]
//	    [prompt-logprobs=N] [unchecked]
//	    Config.CheckRequest, then Add (unless the check fails; unchecked
//	    skips it). max defaults to 1.
//	step [n=K]
//	    K times: Schedule, Execute on the fake, Update; prints the step,
//	    the failures, the outputs and the sequences' state.
//	run [max-steps=N]
//	    steps until the scheduler has no work; prints each choice's tokens
//	    and finish, and the number of steps.
//	abort id=S [choice=N] [stopped]
//	expire now=SECONDS
//	    Expire; prints the outputs (sorted by request: Expire's order is
//	    not deterministic).
//	fake [slot-tokens=N] [poison=T]
//	    reconfigures the fake between steps.
//	state | stats | events
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var h *schedHarness
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) (out string) {
			if d.Cmd == "config" {
				h = &schedHarness{}
			} else if h == nil {
				d.Fatalf(t, "%s before config", d.Cmd)
			}
			defer func() {
				if r := recover(); r != nil {
					out = fmt.Sprintf("panic: %v\n", r)
				}
			}()
			return h.run(t, d)
		})
	})
}

var testBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type schedHarness struct {
	s     *Scheduler
	kv    *kvcache.Manager
	fake  *enginetest.Fake
	steps int
	names map[engine.SeqID]string
	hashN map[kvcache.Hash]string
	// acc accumulates a run's outputs per choice.
	acc map[string]*choiceLog
}

type choiceLog struct {
	tokens []int32
	finish FinishReason
	err    error
	// usage is set on the request's last choice.
	usage string
}

func (h *schedHarness) run(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	switch d.Cmd {
	case "config":
		var cfg Config
		cfg.MaxWaiting = 16
		d.ScanArgs(t, "max-num-seqs", &cfg.MaxNumSeqs)
		d.ScanArgs(t, "batched-tokens", &cfg.MaxNumBatchedTokens)
		d.ScanArgs(t, "max-model-len", &cfg.MaxModelLen)
		d.MaybeScanArgs(t, "max-waiting", &cfg.MaxWaiting)
		kc := kvcache.Config{BlockSize: 4, Slots: cfg.MaxNumSeqs, SlotTokens: cfg.MaxModelLen}
		d.MaybeScanArgs(t, "slots", &kc.Slots)
		d.MaybeScanArgs(t, "slot-tokens", &kc.SlotTokens)
		d.MaybeScanArgs(t, "block", &kc.BlockSize)
		var blocks int64
		d.MaybeScanArgs(t, "cache-blocks", &blocks)
		kc.CacheBytes = blocks * int64(kc.BlockSize) * 4
		d.MaybeScanArgs(t, "max-events", &kc.MaxEvents)
		d.MaybeScanArgs(t, "capacity", &kc.CapacityTokens)
		cfg.KVCapacityTokens = kc.CapacityTokens
		kv, err := kvcache.New(kc)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		s, err := New(cfg, kv)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		h.s, h.kv = s, kv
		h.fake = &enginetest.Fake{Slots: kc.Slots, SlotTokens: kc.SlotTokens, CapacityTokens: kc.CapacityTokens, Vocab: 100}
		d.MaybeScanArgs(t, "vocab", &h.fake.Vocab)
		d.MaybeScanArgs(t, "poison", &h.fake.PoisonToken)
		h.names = map[engine.SeqID]string{}
		h.hashN = map[kvcache.Hash]string{}
		return ""

	case "add":
		r := &Request{Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 1, Arrival: testBase, PromptLogprobs: -1}
		d.ScanArgs(t, "id", &r.ID)
		r.Prompt = tokenList(t, d, "prompt")
		d.MaybeScanArgs(t, "max", &r.MaxTokens)
		d.MaybeScanArgs(t, "min", &r.MinTokens)
		d.MaybeScanArgs(t, "priority", &r.Priority)
		d.MaybeScanArgs(t, "n", &r.N)
		if d.HasArg("stop") {
			r.StopTokens = tokenList(t, d, "stop")
		}
		d.MaybeScanArgs(t, "salt", &r.CacheSalt)
		var deadline int
		if d.MaybeScanArgs(t, "deadline", &deadline) {
			r.Deadline = testBase.Add(time.Duration(deadline) * time.Second)
		}
		var temp float64
		if d.MaybeScanArgs(t, "temp", &temp) {
			r.Sampling.Temperature = float32(temp)
		}
		var seed uint64
		if d.MaybeScanArgs(t, "seed", &seed) {
			r.Sampling.Seed = uint32(seed)
		}
		r.Sampling.Logprobs = d.HasArg("logprobs")
		d.MaybeScanArgs(t, "prompt-logprobs", &r.PromptLogprobs)
		if !d.HasArg("unchecked") {
			cfg := h.s.Config()
			if err := cfg.CheckRequest(r); err != nil {
				return fmt.Sprintf("rejected: %v\n", err)
			}
		}
		h.s.Add(r)
		var ids []string
		for _, sq := range h.s.requests[r.ID].seqs {
			h.names[sq.id] = fmt.Sprintf("%s/%d", r.ID, sq.choice)
			ids = append(ids, fmt.Sprint(sq.id))
		}
		return fmt.Sprintf("%s: seq %s\n", r.ID, strings.Join(ids, " "))

	case "step":
		n := 1
		d.MaybeScanArgs(t, "n", &n)
		for range n {
			h.step(t, &b, true)
		}
		return b.String()

	case "run":
		maxSteps := 1000
		d.MaybeScanArgs(t, "max-steps", &maxSteps)
		h.acc = map[string]*choiceLog{}
		var order []string
		steps := 0
		for ; h.s.HasWork() && steps < maxSteps; steps++ {
			for _, o := range h.step(t, &b, false) {
				name := fmt.Sprintf("%s/%d", o.RequestID, o.Output.Choice)
				c := h.acc[name]
				if c == nil {
					c = &choiceLog{}
					h.acc[name] = c
					order = append(order, name)
				}
				c.tokens = append(c.tokens, o.Output.Tokens...)
				c.finish, c.err = o.Output.Finish, o.Output.Err
				if o.Last {
					u := o.Usage
					c.usage = fmt.Sprintf(" usage=(prompt=%d cached=%d completion=%d)", u.PromptTokens, u.CachedTokens, u.CompletionTokens)
				}
			}
		}
		fmt.Fprintf(&b, "%d steps\n", steps)
		for _, name := range order {
			c := h.acc[name]
			fmt.Fprintf(&b, "%s: %v", name, c.tokens)
			if c.finish != FinishNone {
				fmt.Fprintf(&b, " finish=%s", c.finish)
			}
			if c.err != nil {
				fmt.Fprintf(&b, " err=%q", c.err)
			}
			b.WriteString(c.usage)
			b.WriteString("\n")
		}
		if h.s.HasWork() {
			b.WriteString("still has work\n")
		}
		b.WriteString(h.state())
		return b.String()

	case "abort":
		var id string
		choice := -1
		d.ScanArgs(t, "id", &id)
		d.MaybeScanArgs(t, "choice", &choice)
		h.s.Abort(id, choice, d.HasArg("stopped"), nil)
		h.outputs(&b, h.s.Outputs())
		b.WriteString(h.state())
		return b.String()

	case "expire":
		var now int
		d.ScanArgs(t, "now", &now)
		h.s.Expire(testBase.Add(time.Duration(now) * time.Second))
		outs := h.s.Outputs()
		slices.SortStableFunc(outs, func(a, b RequestOutput) int { return strings.Compare(a.RequestID, b.RequestID) })
		h.outputs(&b, outs)
		b.WriteString(h.state())
		return b.String()

	case "fake":
		d.MaybeScanArgs(t, "slot-tokens", &h.fake.SlotTokens)
		d.MaybeScanArgs(t, "poison", &h.fake.PoisonToken)
		return ""

	case "state":
		return h.state()

	case "stats":
		st := h.s.Stats()
		fmt.Fprintf(&b, "running=%d waiting=%d requests=%d preemptions=%d started=%d\n", st.Running, st.Waiting, st.Requests, st.Preemptions, h.s.TakeStarted())
		k := st.KV
		fmt.Fprintf(&b, "kv: slots %d/%d held-tokens=%d cached-blocks=%d bytes=%d/%d stored=%d evicted=%d query-tokens=%d hit-tokens=%d events=%d dropped=%d\n",
			k.UsedSlots, k.Slots, k.HeldTokens, k.CachedBlocks, k.CachedBytes, k.CacheBytesLimit, k.StoredBlocks, k.Evictions, k.QueryTokens, k.HitTokens, k.EventsPending, k.EventsDropped)
		if k.CapacityTokens > 0 {
			fmt.Fprintf(&b, "kv tokens: reserved=%d/%d usage=%.3f\n", k.ReservedTokens, k.CapacityTokens, k.Usage())
		}
		fs := h.fake.Stats()
		fmt.Fprintf(&b, "fake: steps=%d decoded=%d restored=%d exported=%d max-batch=%d samplers=%d\n", fs.Steps, fs.DecodedTokens, fs.Restored, fs.Exported, fs.MaxBatchSeqs, h.fake.Samplers())
		return b.String()

	case "events":
		for _, e := range h.kv.DrainEvents() {
			fmt.Fprintf(&b, "%s %s depth=%d\n", e.Kind, h.hash(e.Hash), e.Depth)
		}
		if b.Len() == 0 {
			return "none\n"
		}
		return b.String()
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// step runs one Schedule, Execute, Update and, when verbose, prints them.
// It returns the step's outputs.
func (h *schedHarness) step(t *testing.T, b *strings.Builder, verbose bool) []RequestOutput {
	st := h.s.Schedule()
	res, err := h.fake.Execute(context.Background(), st)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	h.s.Update(st, res)
	outs := h.s.Outputs()
	h.steps++
	if !verbose {
		for _, f := range res.Failures {
			fmt.Fprintf(b, "failure %s: %v\n", h.name(f.Seq), f.Err)
		}
		return outs
	}
	fmt.Fprintf(b, "step %d: %d tokens\n", h.steps, st.NumTokens())
	if len(st.Added) > 0 {
		var names []string
		for _, a := range st.Added {
			names = append(names, h.name(a.Seq))
		}
		fmt.Fprintf(b, "  added %s\n", strings.Join(names, " "))
	}
	for _, e := range st.Exports {
		fmt.Fprintf(b, "  export %s slot=%d [%d,%d)\n", h.name(e.Seq), e.Slot, e.From, e.To)
	}
	for _, c := range st.Clears {
		fmt.Fprintf(b, "  clear slot=%d\n", c)
	}
	for _, r := range st.Restores {
		n := 0
		for _, kv := range r.KV {
			n += kv.N
		}
		fmt.Fprintf(b, "  restore %s slot=%d %d blocks, %d tokens\n", h.name(r.Seq), r.Slot, len(r.KV), n)
	}
	for _, c := range st.Batch {
		fmt.Fprintf(b, "  chunk %s slot=%d pos=%d len=%d", h.name(c.Seq), c.Slot, c.Pos, len(c.Tokens))
		if c.Sample {
			b.WriteString(" sample")
		}
		if len(c.Ban) > 0 {
			fmt.Fprintf(b, " ban=%v", c.Ban)
		}
		if c.Targets != nil {
			fmt.Fprintf(b, " targets=%d", len(c.Targets))
		}
		b.WriteString("\n")
	}
	if len(st.Removed) > 0 {
		var names []string
		for _, id := range st.Removed {
			names = append(names, h.name(id))
		}
		fmt.Fprintf(b, "  removed %s\n", strings.Join(names, " "))
	}
	for _, f := range res.Failures {
		fmt.Fprintf(b, "  failure %s: %v\n", h.name(f.Seq), f.Err)
	}
	h.outputs(b, outs)
	b.WriteString(h.state())
	return outs
}

func (h *schedHarness) outputs(b *strings.Builder, outs []RequestOutput) {
	for _, o := range outs {
		fmt.Fprintf(b, "  out %s/%d %v", o.RequestID, o.Output.Choice, o.Output.Tokens)
		if o.Output.Finish != FinishNone {
			fmt.Fprintf(b, " finish=%s", o.Output.Finish)
		}
		if o.Output.Err != nil {
			fmt.Fprintf(b, " err=%q", o.Output.Err)
		}
		if len(o.Output.Logprobs) > 0 {
			fmt.Fprintf(b, " logprobs=%d", len(o.Output.Logprobs))
		}
		if o.Output.PromptLogprobs != nil {
			fmt.Fprintf(b, " prompt-logprobs=%d", len(o.Output.PromptLogprobs))
		}
		if o.First {
			b.WriteString(" first")
		}
		if o.Last {
			u := o.Usage
			fmt.Fprintf(b, " last usage=(prompt=%d cached=%d completion=%d)", u.PromptTokens, u.CachedTokens, u.CompletionTokens)
		}
		b.WriteString("\n")
	}
}

// state prints the running and waiting sequences: name, slot, computed
// tokens of known tokens.
func (h *schedHarness) state() string {
	var b strings.Builder
	b.WriteString("running:")
	for _, sq := range h.s.running {
		slot, _ := h.kv.Slot(sq.id)
		fmt.Fprintf(&b, " %s[slot=%d %d/%d", h.name(sq.id), slot, sq.computed, len(sq.tokens))
		if h.kv.CapacityTokens() > 0 {
			fmt.Fprintf(&b, " r=%d", h.kv.Reserved(sq.id))
		}
		b.WriteString("]")
	}
	b.WriteString("\nwaiting:")
	for _, sq := range h.s.waiting {
		fmt.Fprintf(&b, " %s[%d]", h.name(sq.id), len(sq.tokens))
		if h.s.waitForSibling(sq) {
			b.WriteString("(sibling)")
		}
	}
	b.WriteString("\n")
	return b.String()
}

func (h *schedHarness) name(id engine.SeqID) string {
	if n, ok := h.names[id]; ok {
		return n
	}
	return fmt.Sprintf("seq%d", id)
}

func (h *schedHarness) hash(hs kvcache.Hash) string {
	if n, ok := h.hashN[hs]; ok {
		return n
	}
	n := fmt.Sprintf("h%d", len(h.hashN))
	h.hashN[hs] = n
	return n
}

// tokenList parses a list of tokens: ints and inclusive ranges lo-hi.
func tokenList(t *testing.T, d *datadriven.TestData, key string) []int32 {
	arg, ok := d.Arg(key)
	if !ok {
		d.Fatalf(t, "missing argument: %s", key)
	}
	var toks []int32
	for _, v := range arg.Vals {
		if v == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(v, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			d.Fatalf(t, "%s: %v", key, err)
		}
		c := a
		if isRange {
			if c, err = strconv.Atoi(hi); err != nil {
				d.Fatalf(t, "%s: %v", key, err)
			}
		}
		for x := a; x <= c; x++ {
			toks = append(toks, int32(x))
		}
	}
	return toks
}
