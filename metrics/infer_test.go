package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestInferCountsAndSnapshot(t *testing.T) {
	reg := prometheus.NewRegistry()
	in, err := NewInfer(reg)
	if err != nil {
		t.Fatal(err)
	}
	in.Observe(InferObservation{Model: "m", Version: "1", Duration: 3 * time.Millisecond, Queue: time.Millisecond, Compute: 2 * time.Millisecond})
	in.Observe(InferObservation{Model: "m", Version: "1", Duration: 5 * time.Millisecond})
	in.Observe(InferObservation{Model: "m", Version: "1", Err: errors.New("bad"), Duration: time.Millisecond})
	in.Observe(InferObservation{Model: "other", Version: "2"})

	s := in.Snapshot("m", "1")
	if s.Success != (StatDuration{2, 8 * time.Millisecond}) || s.Failed != (StatDuration{1, time.Millisecond}) {
		t.Errorf("success %+v failed %+v", s.Success, s.Failed)
	}
	if s.Queue != (StatDuration{1, time.Millisecond}) || s.Compute != (StatDuration{1, 2 * time.Millisecond}) {
		t.Errorf("queue %+v compute %+v", s.Queue, s.Compute)
	}
	if s.LastInference.IsZero() {
		t.Error("LastInference not set")
	}
	if got := testutil.ToFloat64(in.success.WithLabelValues("m", "1")); got != 2 {
		t.Errorf("model_infer_request_success = %v, want 2", got)
	}
	if got := testutil.ToFloat64(in.failure.WithLabelValues("m", "1")); got != 1 {
		t.Errorf("model_infer_request_failure = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(in.duration, "model_infer_request_duration"); n != 2 {
		t.Errorf("model_infer_request_duration has %d series, want 2 (m 1, other 2)", n)
	}
	if err := testutil.CollectAndCompare(in.success, strings.NewReader(`
# HELP model_infer_request_success_total Model infer request success count (MLServer's metric): V2 infer, KServe V1 predict and Triton v1 infer.
# TYPE model_infer_request_success_total counter
model_infer_request_success_total{model="m",version="1"} 2
model_infer_request_success_total{model="other",version="2"} 1
`)); err != nil {
		t.Error(err)
	}
	in.Observe(InferObservation{Model: "m", Version: "2"})
	in.Forget("m", "1")
	if s := in.Snapshot("m", "2"); s.Success.Count != 1 {
		t.Errorf("Forget of version 1 dropped version 2: %+v", s)
	}
	in.Forget("m", "2")
	if s := in.Snapshot("m", "1"); s.Success.Count != 0 {
		t.Errorf("after Forget: %+v", s)
	}
	if n := testutil.CollectAndCount(in.success); n != 1 {
		t.Errorf("after Forget %d success series, want 1 (other)", n)
	}
	var none *Infer
	none.Observe(InferObservation{Model: "m"})
	if s := none.Snapshot("m", "1"); s.Success.Count != 0 {
		t.Error("nil Infer recorded")
	}
}
