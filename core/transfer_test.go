package core

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/scheduler"
)

// TestPrefillTransfer: a prefill keeps its prompt's KV; another core that
// imports it continues exactly as a core that computed everything, and
// restores the imported positions instead of computing them.
func TestPrefillTransfer(t *testing.T) {
	prompt := []int32{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	ctx := context.Background()

	ref := testCore(t, nil, nil)
	s, err := ref.Submit(ctx, []*scheduler.Request{request("ref", prompt, 8)})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := drain(t, s[0])

	p := testCore(t, nil, nil)
	ps, lease, err := p.Prefill(ctx, request("p", prompt, 1), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := drain(t, ps)
	info, err := lease.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Positions != len(prompt) || info.Bytes != int64(len(prompt)*enginetest.Layout.BytesPerPosition()) {
		t.Fatalf("kept %+v; want %d positions", info, len(prompt))
	}
	if !slices.Equal(first, want[:1]) {
		t.Fatalf("prefill's first token %v, want %v", first, want[:1])
	}
	got, toks, _, err := p.LeaseKV(ctx, lease.Name())
	if err != nil || got.KV().N != info.Positions || !slices.Equal(toks, prompt) {
		t.Fatalf("LeaseKV: %v", err)
	}
	defer got.Release()
	kv := got.KV()
	if st := p.Stats(); st.KV.Leases != 1 || st.KV.LeaseBytes != info.Bytes {
		t.Fatalf("stats %d leases %d bytes", st.KV.Leases, st.KV.LeaseBytes)
	}

	d := testCore(t, nil, nil)
	ds, imported, err := d.SubmitWithKV(ctx, request("d", prompt, 8), kv)
	if err != nil {
		t.Fatal(err)
	}
	if n := <-imported; n != len(prompt) {
		t.Fatalf("imported %d positions, want %d", n, len(prompt))
	}
	out, _ := drain(t, ds)
	if !slices.Equal(out, want) {
		t.Fatalf("after the transfer %v, want %v", out, want)
	}
	if u := ds.Usage(); u.CachedTokens != len(prompt)-1 {
		t.Fatalf("cached %d tokens, want %d", u.CachedTokens, len(prompt)-1)
	}

	if ok, err := p.ReleaseLease(ctx, lease.Name()); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	if _, _, _, err := p.LeaseKV(ctx, lease.Name()); !errors.Is(err, ErrNoLease) {
		t.Fatalf("after release: %v", err)
	}
	if st := p.Stats(); st.KV.Leases != 0 || st.KV.LeaseBytes != 0 {
		t.Fatalf("after release: %d leases %d bytes", st.KV.Leases, st.KV.LeaseBytes)
	}
	// The reference outlives the lease: its KV is still the one imported.
	d2 := testCore(t, nil, nil)
	ds2, imported2, err := d2.SubmitWithKV(ctx, request("d2", prompt, 8), kv)
	if err != nil {
		t.Fatal(err)
	}
	if n := <-imported2; n != len(prompt) {
		t.Fatalf("imported %d positions after the lease's release, want %d", n, len(prompt))
	}
	if out, _ := drain(t, ds2); !slices.Equal(out, want) {
		t.Fatalf("after the lease's release %v, want %v", out, want)
	}
}

// TestLeaseExpires: a lease nobody pulls is freed when it ends, and
// counted.
func TestLeaseExpires(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fc := clock.NewFake(time.Now())
	c := testCore(t, nil, func(cfg *Config) { cfg.Clock = fc })
	s, lease, err := c.Prefill(ctx, request("p", []int32{1, 2, 3, 4, 5}, 1), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s)
	if _, err := lease.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The idle core sleeps until the lease's expiry.
	if err := fc.WaitArmed(ctx, time.Second); err != nil {
		t.Fatalf("the core set no timer for the lease: %v", err)
	}
	passed(t, c)
	if n := c.LeasesExpired(); n != 0 {
		t.Fatalf("%d leases expired before their time", n)
	}
	fc.Advance(time.Second)
	passed(t, c)
	if n := c.LeasesExpired(); n != 1 {
		t.Fatalf("%d leases expired, want 1", n)
	}
	if _, _, _, err := c.LeaseKV(ctx, lease.Name()); !errors.Is(err, ErrNoLease) {
		t.Fatalf("after expiry: %v", err)
	}
	if st := c.Stats(); st.KV.Leases != 0 || st.KV.LeaseBytes != 0 {
		t.Fatalf("after expiry: %d leases %d bytes", st.KV.Leases, st.KV.LeaseBytes)
	}
}

// TestPrefillAborted: a prefill that ends before its prompt is in its slot
// (its deadline passed before it ran; the engine failed it) reports that
// no KV was kept, and holds nothing.
func TestPrefillAborted(t *testing.T) {
	ctx := context.Background()
	c := testCore(t, func() *enginetest.Fake { return &enginetest.Fake{PoisonToken: 999} }, nil)
	late := request("late", []int32{1, 2, 3, 4, 5}, 1)
	late.Deadline = time.Now().Add(-time.Second)
	poisoned := request("poisoned", []int32{1, 2, 999, 4, 5}, 1)
	for _, r := range []*scheduler.Request{late, poisoned} {
		s, lease, err := c.Prefill(ctx, r, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lease.Wait(ctx); err == nil {
			t.Fatalf("%s: a prefill that did not run kept KV", r.ID)
		}
		drain(t, s)
		if _, _, _, err := c.LeaseKV(ctx, lease.Name()); !errors.Is(err, ErrNoLease) {
			t.Fatalf("%s: %v", r.ID, err)
		}
	}
	if st := c.Stats(); st.KV.Leases != 0 || st.KV.LeaseBytes != 0 {
		t.Fatalf("%d leases, %d bytes", st.KV.Leases, st.KV.LeaseBytes)
	}
}

// TestWatchKV: a watch starts with a snapshot of the cache, then gets the
// live events.
func TestWatchKV(t *testing.T) {
	ctx := context.Background()
	cached := &cachedSignal{ch: make(chan struct{})}
	c := testCore(t, nil, func(cfg *Config) { cfg.Observer = cached })
	s, err := c.Submit(ctx, []*scheduler.Request{request("a", []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 2)})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s[0])
	// The export comes back a step after the last output.
	<-cached.ch
	w, err := c.WatchKV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bs, err := w.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// More of a's blocks may still be on their way (its tail is exported
	// when it is freed): the snapshot holds at least its first block, and
	// parents come before their children.
	if !bs[0].Snapshot || len(bs[0].Events) == 0 {
		t.Fatalf("first batch %+v, want a snapshot", bs[0])
	}
	known := map[kvcache.Hash]bool{}
	for _, e := range bs[0].Events {
		if e.Depth > 0 && !known[e.Parent] {
			t.Fatalf("block at depth %d before its parent", e.Depth)
		}
		known[e.Hash] = true
	}
	if first := kvcache.BlockHashes([]int32{1, 2, 3, 4}, "", 4)[0]; !known[first] {
		t.Fatal("the snapshot lacks a's first block")
	}
	s, err = c.Submit(ctx, []*scheduler.Request{request("b", []int32{50, 51, 52, 53, 54, 55}, 2)})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s[0])
	want := kvcache.BlockHashes([]int32{50, 51, 52, 53}, "", 4)[0]
	for !known[want] {
		bs, err := w.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.Snapshot {
				t.Fatal("unexpected snapshot")
			}
			for _, e := range b.Events {
				if e.Kind == kvcache.BlockStored {
					known[e.Hash] = true
				}
			}
		}
	}
}

// cachedSignal is an Observer that closes ch after the first step whose
// published stats hold a cached block.
type cachedSignal struct {
	once sync.Once
	ch   chan struct{}
}

func (o *cachedSignal) StepDone(s StepInfo) {
	if s.Stats.KV.CachedBlocks > 0 {
		o.once.Do(func() { close(o.ch) })
	}
}
func (*cachedSignal) FirstToken(time.Duration) {}
func (*cachedSignal) RequestDone(RequestInfo)  {}
func (*cachedSignal) EngineRestarted()         {}

// TestWatchKVResync: when the KV manager's outbox overflows between
// drains, a watch gets a fresh snapshot instead of a gap.
func TestWatchKVResync(t *testing.T) {
	ctx := context.Background()
	c := testCore(t, nil, func(cfg *Config) { cfg.KV.MaxEvents = 2 })
	w, err := c.WatchKV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if bs, err := w.Recv(ctx); err != nil || !bs[0].Snapshot || len(bs[0].Events) != 0 {
		t.Fatalf("first batch %v %v, want an empty snapshot", bs, err)
	}
	// Five blocks and a tail stored in one step: more than the outbox holds.
	prompt := make([]int32, 22)
	for i := range prompt {
		prompt[i] = int32(100 + i)
	}
	s, err := c.Submit(ctx, []*scheduler.Request{request("a", prompt, 1)})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s[0])
	for {
		bs, err := w.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last := bs[len(bs)-1]
		if last.Snapshot && len(last.Events) >= 5 {
			break
		}
	}
}
