package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/metadata"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// startFake starts a model served by the fake runtime (the test binary).
func startFake(t *testing.T, mode string, cfg Config) *Model {
	t.Helper()
	cfg.Name = "fake"
	cfg.Command = "exec '" + os.Args[0] + "'"
	cfg.Dir = t.TempDir()
	cfg.Env = append(cfg.Env, envFake+"="+mode)
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	m, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// request is a call with rows rows of x = [v, v+1] and the action.
func request(rows int, v float32, action string) *pb.ModelInferRequest {
	raw := make([]byte, 0, 8*rows)
	for r := range rows {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v+float32(r)))
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v+float32(r)+0.5))
	}
	req := &pb.ModelInferRequest{
		ModelName:        "fake",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{int64(rows), 2}}},
		RawInputContents: [][]byte{raw},
	}
	if action != "" {
		req.Parameters = map[string]*pb.InferParameter{"action": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: action}}}
	}
	return req
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestBatchMergesAndSplits: concurrent requests form one call (the
// runtime saw all their rows) and each gets its own rows back, and the
// runtime's headers.
func TestBatchMergesAndSplits(t *testing.T) {
	m := startFake(t, "", Config{MaxBatchSize: 8, MaxBatchTime: 2 * time.Second})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			resp, hdr, err := m.Infer(context.Background(), request(2, float32(10*i), ""), metadata.Pairs("x-echo", "hi"))
			if err != nil {
				t.Error(err)
				return
			}
			y := floats(resp.GetRawOutputContents()[0])
			want := []float32{20 * float32(i), 20*float32(i) + 1, 20*float32(i) + 2, 20*float32(i) + 3}
			if len(y) != 4 || y[0] != want[0] || y[3] != want[3] {
				t.Errorf("request %d: y = %v, want %v", i, y, want)
			}
			if sh := resp.GetOutputs()[0].GetShape(); sh[0] != 2 || sh[1] != 2 {
				t.Errorf("request %d: y shape %v", i, sh)
			}
			b := resp.GetRawOutputContents()[1]
			if len(b) != 16 || binary.LittleEndian.Uint64(b) != 8 {
				t.Errorf("request %d: the runtime saw a batch of %d rows, want 8", i, binary.LittleEndian.Uint64(b))
			}
			if got := hdr.Get("x-batch-rows"); len(got) != 1 || got[0] != "8" {
				t.Errorf("request %d: x-batch-rows %v", i, got)
			}
			if got := hdr.Get("x-echo"); len(got) != 1 || got[0] != "hi" {
				t.Errorf("request %d: x-echo %v", i, got)
			}
		})
	}
	wg.Wait()
}

// TestBatchTimeAndKeys: a lone request runs after max_batch_time; a
// request with other parameters is not merged with the others, nor does
// it keep them apart (each key has its batch).
func TestBatchTimeAndKeys(t *testing.T) {
	m := startFake(t, "", Config{MaxBatchSize: 2, MaxBatchTime: time.Second})
	resp, _, err := m.Infer(context.Background(), request(1, 1, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := binary.LittleEndian.Uint64(resp.GetRawOutputContents()[1]); b != 1 {
		t.Fatalf("lone request ran in a batch of %d", b)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]uint64{}
	for i, action := range []string{"", "", "invalid"} {
		wg.Go(func() {
			resp, _, err := m.Infer(context.Background(), request(1, float32(i), action), nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case action == "invalid" && errors.Is(err, ErrInvalid):
				seen["invalid"]++
			case err == nil:
				seen["batch"] = binary.LittleEndian.Uint64(resp.GetRawOutputContents()[1])
			default:
				t.Errorf("action %q: %v", action, err)
			}
		})
	}
	wg.Wait()
	if seen["invalid"] != 1 || seen["batch"] != 2 {
		t.Fatalf("seen %v, want the two plain requests in one batch of 2 and the invalid one refused alone", seen)
	}
}

// TestBadAnswers: a batch answer of the wrong shape and a malformed
// answer are ErrBadAnswer errors naming the model and the fault.
func TestBadAnswers(t *testing.T) {
	m := startFake(t, "", Config{MaxBatchSize: 4, MaxBatchTime: time.Second})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_, _, err := m.Infer(context.Background(), request(2, 1, "badshape"), nil)
			if !errors.Is(err, ErrBadAnswer) || !strings.Contains(err.Error(), `model "fake"`) || !strings.Contains(err.Error(), `output "batch" has shape [3 1] but the batch it answers has 4 rows`) {
				t.Errorf("badshape: %v", err)
			}
		})
	}
	wg.Wait()
	_, _, err := m.Infer(context.Background(), request(5, 1, "malformed"), nil) // more rows than a batch: alone
	if !errors.Is(err, ErrBadAnswer) || !strings.Contains(err.Error(), `output "y": shape [5 2] of FP32 needs 40 bytes but the data has 39`) {
		t.Fatalf("malformed: %v", err)
	}
}

// TestCrashRestarts: a runtime that dies mid-request fails that request
// with ErrUnavailable, is restarted, and serves again.
func TestCrashRestarts(t *testing.T) {
	m := startFake(t, "", Config{})
	_, _, err := m.Infer(context.Background(), request(1, 1, "crash"), nil)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `model "fake": its runtime process (worker 0)`) {
		t.Fatalf("crash: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, _, err := m.Infer(context.Background(), request(1, 2, ""), nil)
		if err == nil {
			if y := floats(resp.GetRawOutputContents()[0]); y[0] != 4 {
				t.Fatalf("after restart: y = %v", y)
			}
			break
		}
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("after crash: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // a bounded poll: the runtime's process restarts unannounced
	}
	if !m.Ready() {
		t.Fatal("not ready after the restart")
	}
}

// TestRequestTimeout: a runtime that does not answer within
// request_timeout is ErrTimeout, and the next request is served.
func TestRequestTimeout(t *testing.T) {
	m := startFake(t, "", Config{RequestTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, _, err := m.Infer(context.Background(), request(1, 1, "sleep"), nil)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "request_timeout of 300ms") {
		t.Fatalf("sleep: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
	if _, _, err := m.Infer(context.Background(), request(1, 1, ""), nil); err != nil {
		t.Fatalf("after the timeout: %v", err)
	}
}

// TestNeverStarts: a command that exits, or never answers, fails Start
// with the reason and the last output.
func TestNeverStarts(t *testing.T) {
	_, err := Start(Config{Name: "broken", Command: "echo 'ImportError: no module named torch' >&2; exit 7", Dir: t.TempDir(), StartTimeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), "ImportError: no module named torch") {
		t.Fatalf("exiting command: %v", err)
	}
	_, err = Start(Config{Name: "silent", Command: "exec sleep 60", Dir: t.TempDir(), StartTimeout: 300 * time.Millisecond, StopGrace: time.Second})
	if err == nil || !strings.Contains(err.Error(), "did not answer ServerReady and ModelReady") {
		t.Fatalf("silent command: %v", err)
	}
}

// TestCloseKillsAfterGrace: a runtime that ignores SIGTERM is killed
// after StopGrace; Close returns.
func TestCloseKillsAfterGrace(t *testing.T) {
	m := startFake(t, "ignore-term", Config{StopGrace: 200 * time.Millisecond, Workers: 2})
	inc, _ := m.ps[1].current()
	start := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if inc.alive() {
		t.Fatal("process alive after Close")
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 10*time.Second {
		t.Fatalf("Close took %s", d)
	}
	if _, _, err := m.Infer(context.Background(), request(1, 1, ""), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestParallelWorkers: two processes serve concurrently (two sleeping
// requests do not queue behind each other... the second answers while
// the first sleeps).
func TestParallelWorkers(t *testing.T) {
	m := startFake(t, "", Config{Workers: 2, RequestTimeout: 2 * time.Second})
	errc := make(chan error, 1)
	go func() {
		_, _, err := m.Infer(context.Background(), request(1, 1, "sleep"), nil)
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond) // no event says the first request reached its process
	if _, _, err := m.Infer(context.Background(), request(1, 1, ""), nil); err != nil {
		t.Fatalf("second worker: %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrTimeout) {
		t.Fatalf("sleeping request: %v", err)
	}
}

// TestMetricsCollector: the runtime's metrics come with the model's
// labels; names under llmserve's prefixes are dropped.
func TestMetricsCollector(t *testing.T) {
	m := startFake(t, "", Config{Version: "3"})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collector())
	const want = `
# HELP fake_predictions_total 
# TYPE fake_predictions_total counter
fake_predictions_total{kind="a",model_name="fake",model_version="3",worker="0"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// TestInferStream: a stream's responses come in order, the runtime's
// headers with the first; INVALID_ARGUMENT is ErrInvalid, a process that
// dies mid-stream ErrUnavailable; the content types its codecs decode are
// learnt at start.
func TestInferStream(t *testing.T) {
	m := startFake(t, "", Config{ContentTypes: []string{"mine"}})
	if got := strings.Join(m.ContentTypes(), ","); got != "img,mine,np" {
		t.Fatalf("content types %q", got)
	}
	var seqs []int64
	var first metadata.MD
	err := m.InferStream(context.Background(), request(2, 1, ""), nil, func(resp *pb.ModelInferResponse, hdr metadata.MD) error {
		if len(seqs) == 0 {
			first = hdr
		} else if hdr != nil {
			t.Errorf("headers again with response %d: %v", len(seqs), hdr)
		}
		seqs = append(seqs, resp.GetParameters()["seq"].GetInt64Param())
		if y := floats(resp.GetRawOutputContents()[0]); len(y) != 4 || y[0] != 2 {
			t.Errorf("y = %v", y)
		}
		return nil
	})
	if err != nil || len(seqs) != 3 || seqs[0] != 0 || seqs[2] != 2 || len(first.Get("x-stream")) != 1 {
		t.Fatalf("stream: %v, seqs %v, headers %v", err, seqs, first)
	}
	stop := errors.New("enough")
	if err := m.InferStream(context.Background(), request(1, 1, ""), nil, func(*pb.ModelInferResponse, metadata.MD) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("the callback's error: %v", err)
	}
	if err := m.InferStream(context.Background(), request(1, 1, "invalid"), nil, func(*pb.ModelInferResponse, metadata.MD) error { return nil }); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "x must be positive") {
		t.Fatalf("invalid: %v", err)
	}
	// (The response sent before the exit may or may not have left the
	// process.)
	n := 0
	err = m.InferStream(context.Background(), request(1, 1, "crash"), nil, func(*pb.ModelInferResponse, metadata.MD) error { n++; return nil })
	if !errors.Is(err, ErrUnavailable) || n > 1 {
		t.Fatalf("crash mid-stream: %v after %d responses", err, n)
	}
	// A runtime without ModelStreamInfer answers once, through ModelInfer.
	plain := startFake(t, "nostream", Config{})
	n = 0
	err = plain.InferStream(context.Background(), request(1, 1, ""), nil, func(resp *pb.ModelInferResponse, hdr metadata.MD) error {
		n++
		if len(hdr.Get("x-batch-rows")) != 1 || resp.GetParameters()["seq"] != nil {
			t.Errorf("fallback answer %v, headers %v", resp, hdr)
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("no streaming: %v after %d responses", err, n)
	}
}
