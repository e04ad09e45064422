package batching

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/models/tensor"
)

// fakeExec computes y[r] = {sum(x[r]), x[r][0]*row-independent constant}
// for input x [n, k] and records the rows of every Run. gate, when set,
// holds every Run until it is closed; started receives one value per Run.
type fakeExec struct {
	mu      sync.Mutex
	batches []int
	gate    chan struct{}
	started chan int
}

func (f *fakeExec) Inputs() []tensor.Spec {
	return []tensor.Spec{{Name: "x", DType: tensor.FP32, Shape: []int64{-1, -1}}}
}

func (f *fakeExec) Outputs() []tensor.Spec {
	return []tensor.Spec{{Name: "y", DType: tensor.FP32, Shape: []int64{-1, 2}}, {Name: "label", DType: tensor.INT64, Shape: []int64{-1}}}
}

func (f *fakeExec) Run(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n, k := int(in[0].Shape[0]), int(in[0].Shape[1])
	f.mu.Lock()
	f.batches = append(f.batches, n)
	f.mu.Unlock()
	if f.started != nil {
		f.started <- n
	}
	if f.gate != nil {
		<-f.gate
	}
	y := tensor.Tensor{Name: "y", DType: tensor.FP32, Shape: []int64{int64(n), 2}, F32: make([]float32, 2*n)}
	l := tensor.Tensor{Name: "label", DType: tensor.INT64, Shape: []int64{int64(n)}, I64: make([]int64, n)}
	for r := range n {
		var s float32
		for _, v := range in[0].F32[r*k : (r+1)*k] {
			s += v
		}
		y.F32[2*r], y.F32[2*r+1] = s, in[0].F32[r*k]*0.5
		l.I64[r] = int64(s)
	}
	return []tensor.Tensor{y, l}, nil
}

func (f *fakeExec) Close() error { return nil }

func (f *fakeExec) runs() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

func input(rows, k int, seed float32) []tensor.Tensor {
	x := tensor.Tensor{Name: "x", DType: tensor.FP32, Shape: []int64{int64(rows), int64(k)}, F32: make([]float32, rows*k)}
	for i := range x.F32 {
		x.F32[i] = seed + float32(i)*0.25
	}
	return []tensor.Tensor{x}
}

type recorder struct {
	mu      sync.Mutex
	rows    []int
	queued  int
	arrived [][2]int // queued and running at each arrival
}

func (r *recorder) Batch(rows int) { r.mu.Lock(); r.rows = append(r.rows, rows); r.mu.Unlock() }
func (r *recorder) Arrived(queued, running int) {
	r.mu.Lock()
	r.arrived = append(r.arrived, [2]int{queued, running})
	r.mu.Unlock()
}

func (r *recorder) Queued(time.Duration) {
	r.mu.Lock()
	r.queued++
	r.mu.Unlock()
}

// newHeld starts a Batcher whose test hook reports every request its
// queue takes on the returned channel.
func newHeld(f *fakeExec, cfg Config) (*Batcher, <-chan struct{}) {
	got := make(chan struct{}, 1024)
	b := New(f, cfg)
	b.received = func() { got <- struct{}{} }
	return b, got
}

// TestConcurrentRequestsShareRuns: concurrent requests that arrive while
// the model is busy are merged, and each answer equals the unbatched one.
// The first Run is held until every request has queued.
func TestConcurrentRequestsShareRuns(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfg           Config
		clients, rows int
		maxRuns       int
		// taken is how many requests the queue takes while the first
		// run is held (0: all of them).
		taken int
	}{
		{"one-row requests", Config{MaxBatchSize: 32}, 32, 1, 2, 0},
		{"with a window", Config{MaxBatchSize: 32, MaxBatchTime: time.Hour}, 32, 1, 2, 0},
		{"2-row requests, two workers", Config{MaxBatchSize: 16, Workers: 2}, 8, 2, 3, 0},
		{"batching off", Config{MaxBatchSize: 1, MaxBatchTime: time.Minute}, 8, 1, 8, 2},
		{"larger than the batch runs alone", Config{MaxBatchSize: 4}, 2, 6, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeExec{gate: make(chan struct{}), started: make(chan int, 64)}
			rec := &recorder{}
			tc.cfg.Observer = rec
			tc.cfg.Clock = clock.NewFake(time.Unix(0, 0)) // the window never ends
			b, received := newHeld(f, tc.cfg)
			defer b.Close()
			outs := make([][]tensor.Tensor, tc.clients)
			errs := make([]error, tc.clients)
			var wg sync.WaitGroup
			for i := range tc.clients {
				wg.Go(func() { outs[i], errs[i] = b.Infer(context.Background(), input(tc.rows, 3, float32(i))) })
			}
			<-f.started // the model is busy
			taken := tc.clients
			if tc.taken > 0 {
				taken = tc.taken
			}
			for range taken {
				<-received
			}
			close(f.gate)
			wg.Wait()
			got := f.runs()
			total := 0
			for _, n := range got {
				total += n
				if n > max(tc.cfg.MaxBatchSize, tc.rows) {
					t.Errorf("a run of %d rows: more than MaxBatchSize %d", n, tc.cfg.MaxBatchSize)
				}
			}
			if total != tc.clients*tc.rows || len(got) > tc.maxRuns {
				t.Fatalf("runs of %v rows, want %d rows in at most %d runs", got, tc.clients*tc.rows, tc.maxRuns)
			}
			ref := &fakeExec{}
			for i := range tc.clients {
				if errs[i] != nil {
					t.Fatalf("request %d: %v", i, errs[i])
				}
				want, _ := ref.Run(context.Background(), input(tc.rows, 3, float32(i)))
				if fmt.Sprint(outs[i]) != fmt.Sprint(want) {
					t.Errorf("request %d: got %v, want its unbatched result %v", i, outs[i], want)
				}
			}
			if len(rec.arrived) != tc.clients {
				t.Errorf("observer saw %d arrivals, want %d", len(rec.arrived), tc.clients)
			}
			if rec.queued != tc.clients || len(rec.rows) != len(got) {
				t.Errorf("observer saw %d queued requests and batches %v", rec.queued, rec.rows)
			}
		})
	}
}

// Test32ConcurrentRequestsRunAsAtMostTwoBatches is the dynamic batcher's
// promise under load: 32 one-row requests sent at once to a model with
// room for 32 rows run as the batch that found the model idle and one
// batch of all that queued behind it (held until every request queued).
func Test32ConcurrentRequestsRunAsAtMostTwoBatches(t *testing.T) {
	f := &fakeExec{gate: make(chan struct{}), started: make(chan int, 64)}
	b, received := newHeld(f, Config{MaxBatchSize: 32})
	defer b.Close()
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if _, err := b.Infer(context.Background(), input(1, 3, float32(i))); err != nil {
				t.Error(err)
			}
		})
	}
	first := <-f.started
	for range 32 {
		<-received
	}
	close(f.gate)
	wg.Wait()
	if got := f.runs(); len(got) > 2 || got[0] != first || (len(got) == 2 && got[1] != 32-first) {
		t.Fatalf("runs of %v rows, want at most 2 runs of 32 rows in all", got)
	}
}

// TestIdleRequestRunsAtOnce: a request that finds the model idle runs at
// once, whatever the window: the clock is fake and never moves, so a
// request held by the window would never be answered.
func TestIdleRequestRunsAtOnce(t *testing.T) {
	for _, window := range []time.Duration{0, time.Millisecond, time.Hour} {
		t.Run(window.String(), func(t *testing.T) {
			fk := clock.NewFake(time.Unix(0, 0))
			f := &fakeExec{}
			b := New(f, Config{MaxBatchSize: 32, MaxBatchTime: window, Clock: fk})
			defer b.Close()
			for i := range 3 {
				if _, err := b.Infer(context.Background(), input(1, 2, float32(i))); err != nil {
					t.Fatal(err)
				}
			}
			if got := f.runs(); !slices.Equal(got, []int{1, 1, 1}) {
				t.Fatalf("runs %v, want three runs of one row", got)
			}
			if n := fk.Armed(); n != 0 {
				t.Errorf("%d timers left armed", n)
			}
		})
	}
}

// TestWindowIsAnUpperBound: a batch that waits for a request on its way
// (one counted in Infer that never queues) waits MaxBatchTime and no
// longer.
func TestWindowIsAnUpperBound(t *testing.T) {
	fk := clock.NewFake(time.Unix(0, 0))
	f := &fakeExec{}
	const window = 5 * time.Millisecond
	b := New(f, Config{MaxBatchSize: 32, MaxBatchTime: window, Clock: fk})
	defer b.Close()
	b.arriving.Add(1) // a request on its way that never comes
	defer b.arriving.Add(-1)
	done := make(chan error, 1)
	go func() {
		_, err := b.Infer(context.Background(), input(1, 2, 0))
		done <- err
	}()
	if err := fk.WaitArmed(context.Background(), window); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("answered (%v) before the window ended while a request was on its way", err)
	default:
	}
	fk.Advance(window)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.runs(); !slices.Equal(got, []int{1}) {
		t.Fatalf("runs %v", got)
	}
}

// TestWindowEnds: a lone request is not held past MaxBatchTime.
func TestWindowEnds(t *testing.T) {
	f := &fakeExec{}
	b := New(f, Config{MaxBatchSize: 64, MaxBatchTime: time.Millisecond})
	defer b.Close()
	if _, err := b.Infer(context.Background(), input(1, 2, 0)); err != nil {
		t.Fatal(err)
	}
	if got := f.runs(); !slices.Equal(got, []int{1}) {
		t.Fatalf("runs %v", got)
	}
}

// TestDifferentShapesDoNotMerge: requests that differ in a non-batch
// dimension run in separate batches.
func TestDifferentShapesDoNotMerge(t *testing.T) {
	f := &fakeExec{}
	b := New(f, Config{MaxBatchSize: 8, MaxBatchTime: 10 * time.Millisecond})
	defer b.Close()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := b.Infer(context.Background(), input(1, 2+i%2, 0)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, n := range f.runs() {
		if n > 2 {
			t.Fatalf("a batch of %d rows mixed widths 2 and 3: runs %v", n, f.runs())
		}
	}
}

// TestCancelWhileQueued: a request whose context ends while it waits for
// a worker returns at once, and its batch runs without it.
func TestCancelWhileQueued(t *testing.T) {
	f := &fakeExec{gate: make(chan struct{}), started: make(chan int, 4)}
	b := New(f, Config{MaxBatchSize: 1})
	defer b.Close()
	first := make(chan error, 1)
	go func() {
		_, err := b.Infer(context.Background(), input(1, 2, 0))
		first <- err
	}()
	<-f.started // the one worker is busy
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := b.Infer(ctx, input(1, 2, 1))
		second <- err
	}()
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled request: %v, want context.Canceled", err)
	}
	close(f.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got := f.runs(); !slices.Equal(got, []int{1}) {
		t.Fatalf("runs %v: the canceled request ran", got)
	}
}

// TestParallelWorkers: with two workers two batches run at once (the
// fake's gate holds both until the second has started).
func TestParallelWorkers(t *testing.T) {
	f := &fakeExec{gate: make(chan struct{}), started: make(chan int, 4)}
	b := New(f, Config{MaxBatchSize: 1, Workers: 2})
	defer b.Close()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if _, err := b.Infer(context.Background(), input(1, 2, float32(i))); err != nil {
				t.Error(err)
			}
		})
	}
	<-f.started
	<-f.started // both run before either ends
	close(f.gate)
	wg.Wait()
}

// TestCloseFailsQueued: Close answers the queued requests with ErrClosed
// and later ones too, and waits for the running batch.
func TestCloseFailsQueued(t *testing.T) {
	f := &fakeExec{gate: make(chan struct{}), started: make(chan int, 4)}
	b, received := newHeld(f, Config{MaxBatchSize: 8})
	first := make(chan error, 1)
	go func() {
		_, err := b.Infer(context.Background(), input(1, 2, 0))
		first <- err
	}()
	<-f.started
	queued := make(chan error, 1)
	go func() {
		_, err := b.Infer(context.Background(), input(1, 2, 1))
		queued <- err
	}()
	<-received
	<-received // both taken; the second waits for the busy worker
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	if err := <-queued; !errors.Is(err, ErrClosed) {
		t.Fatalf("queued request: %v, want ErrClosed", err)
	}
	close(f.gate)
	if err := <-first; err != nil {
		t.Fatalf("running request: %v", err)
	}
	<-closed
	if _, err := b.Infer(context.Background(), input(1, 2, 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("request after Close: %v, want ErrClosed", err)
	}
	b.Close()
}

// TestMergeReusesWorkerBuffers: a worker's merged inputs reuse its buffer
// from batch to batch (growing it when a batch needs more) and hold each
// batch's rows in order; a single request's inputs pass as they are.
func TestMergeReusesWorkerBuffers(t *testing.T) {
	calls := func(first float32, rows ...int) []*call {
		var cs []*call
		for i, n := range rows {
			cs = append(cs, &call{in: input(n, 3, first+float32(i)), rows: n})
		}
		return cs
	}
	rowsOf := func(cs []*call) (n int) {
		for _, c := range cs {
			n += c.rows
		}
		return n
	}
	want := func(cs []*call) []float32 {
		var all []float32
		for _, c := range cs {
			all = append(all, c.in[0].F32...)
		}
		return all
	}
	var scratch mergeBuffers
	var prev *float32
	for i, cs := range [][]*call{calls(0, 1, 2, 1), calls(10, 2, 1), calls(20, 4, 4, 4)} {
		n := rowsOf(cs)
		in := merge(cs, n, &scratch)
		if !slices.Equal(in[0].F32, want(cs)) || in[0].Shape[0] != int64(n) || in[0].Shape[1] != 3 {
			t.Fatalf("batch %d: merged %v %v, want %v", i, in[0].Shape, in[0].F32, want(cs))
		}
		at := &in[0].F32[0]
		switch i {
		case 1:
			if at != prev {
				t.Errorf("batch %d: fits the buffer but was merged into new memory", i)
			}
		case 2:
			if cap(scratch.f32[0]) < n*3 {
				t.Errorf("batch %d: the buffer did not grow to %d values", i, n*3)
			}
		}
		prev = at
	}
	one := calls(30, 2)
	if in := merge(one, 2, &scratch); &in[0].F32[0] != &one[0].in[0].F32[0] {
		t.Error("a single request's inputs were copied")
	}
}
