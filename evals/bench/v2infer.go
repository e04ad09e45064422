package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// V2Config configures a V2 infer benchmark (`llmserve bench --backend
// v2-infer`): closed-loop clients, each sending its next request when the
// last one is answered, against POST {base}/v2/models/{model}/infer of a
// tensor model.
type V2Config struct {
	// BaseURL is the server's root (http://127.0.0.1:8080); a trailing /v1
	// or /v2 is dropped.
	BaseURL string
	APIKey  string
	// Model is the tensor model's name (required).
	Model string
	// InputName and InputShape describe the one FP32 input sent, its shape
	// without the batch dimension; empty: the model's first input and
	// its shape, from GET /v2/models/{model}.
	InputName  string
	InputShape []int64
	// Rows is the batch size of each request (default 1).
	Rows int
	// Binary sends the input as binary tensor data instead of JSON.
	Binary bool
	// NumRequests are measured, after Warmup unmeasured ones.
	NumRequests int
	Warmup      int
	// Concurrency is how many clients send at once (default 1).
	Concurrency int
	Seed        uint64
	Timeout     time.Duration
	Label       string
	Logger      *slog.Logger
}

// V2Report is a V2 infer benchmark's result; latencies are in ms, from
// sending a request to reading the whole response.
type V2Report struct {
	Label          string  `json:"label,omitempty"`
	BaseURL        string  `json:"base_url"`
	Protocol       string  `json:"protocol"` // "rest" or "grpc"
	Model          string  `json:"model"`
	InputName      string  `json:"input_name"`
	InputShape     []int64 `json:"input_shape"`
	Rows           int     `json:"rows_per_request"`
	Binary         bool    `json:"binary"`
	Concurrency    int     `json:"max_concurrency"`
	NumRequests    int     `json:"num_prompts"`
	Completed      int     `json:"completed"`
	Failed         int     `json:"failed"`
	FirstError     string  `json:"first_error,omitempty"`
	Duration       float64 `json:"duration"`
	RequestsPerSec float64 `json:"request_throughput"`
	RowsPerSec     float64 `json:"rows_throughput"`
	MeanMs         float64 `json:"mean_e2el_ms"`
	MedianMs       float64 `json:"median_e2el_ms"`
	StdMs          float64 `json:"std_e2el_ms"`
	P99Ms          float64 `json:"p99_e2el_ms"`
}

// numBodies is how many distinct request bodies are made and sent in turn.
const numBodies = 64

// RunV2Infer runs the benchmark. It fails only for a bad config, a model
// whose metadata cannot be read, all warmup requests failing, or ctx
// ending; failed measured requests are counted in the report.
func RunV2Infer(ctx context.Context, cfg V2Config) (*V2Report, error) {
	cfg.BaseURL = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(cfg.BaseURL, "/"), "/v1"), "/v2")
	if err := cfg.check("v2-infer"); err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency, DisableCompression: true}}
	defer client.CloseIdleConnections()
	modelURL := cfg.BaseURL + "/v2/models/" + url.PathEscape(cfg.Model)
	if cfg.InputName == "" || len(cfg.InputShape) == 0 {
		if err := v2Input(ctx, client, modelURL, &cfg); err != nil {
			return nil, err
		}
	}
	bodies, err := v2Bodies(cfg)
	if err != nil {
		return nil, err
	}
	send := func(i int) (time.Duration, error) {
		b := bodies[i%len(bodies)]
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, modelURL+"/infer", bytes.NewReader(b.data))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", b.contentType)
		if b.header >= 0 {
			req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(b.header))
		}
		if cfg.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return d, nil
	}
	return measureV2(ctx, cfg, "rest", func(_, i int) (time.Duration, error) { return send(i) })
}

// measureV2 sends cfg.Warmup unmeasured requests, then cfg.NumRequests
// measured ones, from cfg.Concurrency clients, and reports them. send(w, i)
// sends request i from client w.
func measureV2(ctx context.Context, cfg V2Config, protocol string, send func(w, i int) (time.Duration, error)) (*V2Report, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Warmup > 0 {
		log.Info("warming up", "requests", cfg.Warmup)
		lat, _, firstErr := v2Loop(ctx, cfg.Warmup, cfg.Concurrency, send)
		if len(lat) == 0 {
			return nil, fmt.Errorf("bench: every warmup request failed: %s", firstErr)
		}
	}
	log.Info("running", "requests", cfg.NumRequests, "concurrency", cfg.Concurrency)
	start := time.Now()
	lat, failed, firstErr := v2Loop(ctx, cfg.NumRequests, cfg.Concurrency, send)
	dur := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &V2Report{
		Label: cfg.Label, BaseURL: cfg.BaseURL, Protocol: protocol, Model: cfg.Model, InputName: cfg.InputName, InputShape: cfg.InputShape,
		Rows: cfg.Rows, Binary: cfg.Binary, Concurrency: cfg.Concurrency, NumRequests: cfg.NumRequests,
		Completed: len(lat), Failed: failed, FirstError: firstErr, Duration: dur.Seconds(),
	}
	rep.RequestsPerSec = float64(len(lat)) / dur.Seconds()
	rep.RowsPerSec = rep.RequestsPerSec * float64(cfg.Rows)
	rep.MeanMs, rep.MedianMs, rep.StdMs, rep.P99Ms = describeSample(lat)
	return rep, nil
}

// v2Loop sends n requests from c clients (send(w, i): request i from
// client w) and returns the latencies (ms) of the ones that succeeded, how
// many failed and the first error.
func v2Loop(ctx context.Context, n, c int, send func(w, i int) (time.Duration, error)) ([]float64, int, string) {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      = make([]float64, 0, n)
		failed   int
		firstErr string
		wg       sync.WaitGroup
	)
	for w := range min(c, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				d, err := send(w, i)
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == "" {
						firstErr = err.Error()
					}
				} else {
					lat = append(lat, benchio.Millis(d))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, failed, firstErr
}

// check validates the config and fills in its defaults.
func (cfg *V2Config) check(backend string) error {
	switch {
	case cfg.BaseURL == "":
		return errors.New("bench: --base-url is required")
	case cfg.Model == "":
		return fmt.Errorf("bench: --model is required with --backend %s", backend)
	case cfg.NumRequests < 1:
		return errors.New("bench: --num-prompts must be at least 1")
	}
	cfg.Rows = max(cfg.Rows, 1)
	cfg.Concurrency = max(cfg.Concurrency, 1)
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Minute
	}
	return nil
}

// v2Input reads the model's first input from its metadata.
func v2Input(ctx context.Context, client *http.Client, modelURL string, cfg *V2Config) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, modelURL, nil)
	if err != nil {
		return err
	}
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("bench: model metadata: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var md struct {
		Inputs []struct {
			Name     string  `json:"name"`
			Datatype string  `json:"datatype"`
			Shape    []int64 `json:"shape"`
		} `json:"inputs"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("bench: model metadata: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		return fmt.Errorf("bench: model metadata: %w", err)
	}
	if len(md.Inputs) == 0 {
		return errors.New("bench: the model's metadata lists no inputs")
	}
	in := md.Inputs[0]
	if cfg.InputName == "" {
		cfg.InputName = in.Name
	}
	if len(cfg.InputShape) == 0 {
		if len(in.Shape) < 1 {
			return fmt.Errorf("bench: input %q has shape %v: no batch dimension", in.Name, in.Shape)
		}
		for _, d := range in.Shape[1:] {
			if d < 1 {
				return fmt.Errorf("bench: input %q has shape %v with a variable dimension; give --input-shape", in.Name, in.Shape)
			}
		}
		cfg.InputShape = in.Shape[1:]
	}
	return nil
}

type v2Body struct {
	data        []byte
	contentType string
	header      int // Inference-Header-Content-Length, -1 for JSON
}

// v2Values makes the numBodies requests' random FP32 inputs in [-1, 1),
// each cfg.Rows rows of cfg.InputShape.
func v2Values(cfg V2Config) ([][]float32, error) {
	per := int64(1)
	for _, d := range cfg.InputShape {
		if d < 1 {
			return nil, fmt.Errorf("bench: --input-shape %v: every dimension must be at least 1", cfg.InputShape)
		}
		per *= d
	}
	n := int(per) * cfg.Rows
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	out := make([][]float32, numBodies)
	for i := range out {
		out[i] = make([]float32, n)
		for j := range out[i] {
			out[i][j] = float32(rng.Float64()*2 - 1)
		}
	}
	return out, nil
}

// v2Bodies makes numBodies requests with random FP32 data in [-1, 1).
func v2Bodies(cfg V2Config) ([]v2Body, error) {
	values, err := v2Values(cfg)
	if err != nil {
		return nil, err
	}
	shape := append([]int64{int64(cfg.Rows)}, cfg.InputShape...)
	out := make([]v2Body, numBodies)
	for i, vals := range values {
		n := len(vals)
		in := map[string]any{"name": cfg.InputName, "datatype": "FP32", "shape": shape}
		if !cfg.Binary {
			in["data"] = vals
			b, err := json.Marshal(map[string]any{"inputs": []any{in}})
			if err != nil {
				return nil, err
			}
			out[i] = v2Body{data: b, contentType: "application/json", header: -1}
			continue
		}
		in["parameters"] = map[string]any{"binary_data_size": 4 * n}
		head, err := json.Marshal(map[string]any{"inputs": []any{in}, "parameters": map[string]any{"binary_data_output": true}})
		if err != nil {
			return nil, err
		}
		b := append([]byte(nil), head...)
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		out[i] = v2Body{data: b, contentType: "application/octet-stream", header: len(head)}
	}
	return out, nil
}

// WriteText writes the report as a table.
func (r *V2Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	fmt.Fprintln(tw, "============ V2 Infer Benchmark Result ============")
	line("Model", r.Model)
	if r.Protocol != "" {
		line("Protocol", r.Protocol)
	}
	line("Input", fmt.Sprintf("%s FP32 [%d]+%v (binary: %v)", r.InputName, r.Rows, r.InputShape, r.Binary))
	line("Max concurrency", r.Concurrency)
	line("Successful requests", r.Completed)
	line("Failed requests", r.Failed)
	if r.FirstError != "" {
		line("First error", r.FirstError)
	}
	line("Benchmark duration (s)", fmt.Sprintf("%.2f", r.Duration))
	line("Request throughput (req/s)", fmt.Sprintf("%.1f", r.RequestsPerSec))
	line("Row throughput (rows/s)", fmt.Sprintf("%.1f", r.RowsPerSec))
	line("Mean latency (ms)", fmt.Sprintf("%.3f", r.MeanMs))
	line("Median latency (ms)", fmt.Sprintf("%.3f", r.MedianMs))
	line("P99 latency (ms)", fmt.Sprintf("%.3f", r.P99Ms))
	fmt.Fprintln(tw, "===================================================")
	return tw.Flush()
}
