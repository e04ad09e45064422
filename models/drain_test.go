package models

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmserve/llmserve/clock"
)

// busyModel is a served model that never turns idle by itself; Stop cuts
// its one running request.
type busyModel struct{ stops atomic.Int32 }

func (*busyModel) Name() string { return "busy" }
func (*busyModel) Ready() bool  { return true }
func (m *busyModel) Idle() bool { return m.stops.Load() > 0 }
func (*busyModel) Close() error { return nil }
func (m *busyModel) Stop() int64 {
	m.stops.Add(1)
	return 1
}

// TestDrainTimesOut: on a fake clock, a drain waits for a busy model until
// DrainTimeout and not a moment less, then cuts it; then it waits for the
// requests that began before the unload to end, up to linger.
func TestDrainTimesOut(t *testing.T) {
	fc := clock.NewFake(time.Now())
	reg := NewRegistry()
	repo, err := NewRepository(RepositoryConfig{Dir: t.TempDir(), DrainTimeout: time.Minute, Clock: fc}, reg)
	if err != nil {
		t.Fatal(err)
	}
	_, exit := reg.Enter(context.Background()) // a request on the model
	m := &busyModel{}
	done := make(chan struct{})
	go func() {
		repo.drain(context.Background(), m, reg.mark())
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The drain looks again every drainPoll.
	for range 3 {
		if err := fc.WaitArmed(ctx, drainPoll); err != nil {
			t.Fatalf("the drain does not wait on the clock: %v", err)
		}
		fc.Advance(drainPoll)
	}
	if m.stops.Load() != 0 {
		t.Fatal("the model was cut before DrainTimeout")
	}
	if err := fc.WaitArmed(ctx, drainPoll); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Minute)
	// Cut, the model waits for the request's handler, up to linger.
	if err := fc.WaitArmed(ctx, drainPoll); err != nil {
		t.Fatal(err)
	}
	if m.stops.Load() != 1 {
		t.Fatalf("%d stops after DrainTimeout, want 1", m.stops.Load())
	}
	select {
	case <-done:
		t.Fatal("the drain ended before the request's handler did")
	default:
	}
	exit()
	fc.Advance(drainPoll)
	<-done
}
