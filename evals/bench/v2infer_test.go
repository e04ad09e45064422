package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRunV2Infer drives a fake V2 server: the metadata gives the input,
// every request carries it with the asked shape, JSON or binary.
func TestRunV2Infer(t *testing.T) {
	for _, binary := range []bool{false, true} {
		t.Run("binary="+strconv.FormatBool(binary), func(t *testing.T) {
			var served, bad atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/v2/models/mlp":
					_, _ = io.WriteString(w, `{"name":"mlp","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}]}`)
				case r.Method == http.MethodPost && r.URL.Path == "/v2/models/mlp/infer":
					body, _ := io.ReadAll(r.Body)
					head := body
					if h := r.Header.Get("Inference-Header-Content-Length"); h != "" {
						n, _ := strconv.Atoi(h)
						head = body[:n]
						if len(body)-n != 4*4*2 {
							bad.Add(1)
						}
					}
					var req struct {
						Inputs []struct {
							Name  string    `json:"name"`
							Shape []int64   `json:"shape"`
							Data  []float32 `json:"data"`
						} `json:"inputs"`
					}
					if err := json.Unmarshal(head, &req); err != nil || req.Inputs[0].Name != "x" || len(req.Inputs[0].Shape) != 2 ||
						req.Inputs[0].Shape[0] != 2 || req.Inputs[0].Shape[1] != 4 || (!binary && len(req.Inputs[0].Data) != 8) {
						bad.Add(1)
					}
					served.Add(1)
					_, _ = io.WriteString(w, `{"outputs":[]}`)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			rep, err := RunV2Infer(context.Background(), V2Config{BaseURL: srv.URL + "/v1", Model: "mlp", Rows: 2, Binary: binary, NumRequests: 20, Warmup: 3, Concurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Completed != 20 || rep.Failed != 0 || served.Load() != 23 || bad.Load() != 0 || rep.P99Ms < rep.MedianMs || rep.RequestsPerSec <= 0 {
				t.Fatalf("report %+v, served %d, bad %d", rep, served.Load(), bad.Load())
			}
			var buf bytes.Buffer
			if err := rep.WriteText(&buf); err != nil || !strings.Contains(buf.String(), "Request throughput") {
				t.Fatalf("text report %q: %v", buf.String(), err)
			}
		})
	}
}

func TestRunV2InferFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"input \"x\" is missing"}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	_, err := RunV2Infer(context.Background(), V2Config{BaseURL: srv.URL, Model: "mlp", InputName: "x", InputShape: []int64{4}, NumRequests: 2, Warmup: 1})
	if err == nil || !strings.Contains(err.Error(), "every warmup request failed") || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("err %v", err)
	}
	rep, err := RunV2Infer(context.Background(), V2Config{BaseURL: srv.URL, Model: "mlp", InputName: "x", InputShape: []int64{4}, NumRequests: 2})
	if err != nil || rep.Failed != 2 || rep.Completed != 0 {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if _, err := RunV2Infer(context.Background(), V2Config{BaseURL: srv.URL, NumRequests: 1}); err == nil {
		t.Fatal("no model: no error")
	}
}
