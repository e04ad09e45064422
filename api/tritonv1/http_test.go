package tritonv1

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/metrics"
	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares m with testdata/name (text protobuf), or rewrites it
// with -update. The comparison is of messages, not bytes: Go's text
// protobuf output is not stable byte for byte.
func golden(t *testing.T, name string, m proto.Message) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		b, err := prototext.MarshalOptions{Multiline: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		// One space after each colon (Go's writer adds a second at random).
		b = bytes.ReplaceAll(b, []byte(":  "), []byte(": "))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	want := m.ProtoReflect().New().Interface()
	if err := prototext.Unmarshal(b, want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !proto.Equal(m, want) {
		t.Fatalf("%s differs:\ngot:\n%s\nwant:\n%s", path, prototext.Format(m), prototext.Format(want))
	}
}

// testServer serves the fake models with a clock that stands still, so
// that uptime and request times are fixed.
func testServer(t *testing.T) (*httptest.Server, *fakeBackend) {
	t.Helper()
	b := newFakeBackend()
	stats, err := metrics.NewInfer(nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newService(b, Options{Infer: stats, Version: "test", Started: start})
	s.now = func() time.Time { return start.Add(90 * time.Second) }
	r := chi.NewRouter()
	MountHealth(r, b.Ready)
	mount(r, s, 1<<10)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, b
}

// answer is an HTTP answer, read to the end.
type answer struct {
	StatusCode int
	Header     http.Header
}

func do(t *testing.T, method, url, nvRequest string, body []byte) (answer, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if nvRequest != "" {
		req.Header.Set(HeaderInferRequest, nvRequest)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header}, b
}

// nvStatus reads the NV-Status header of an answer.
func nvStatus(t *testing.T, resp answer) *pb.RequestStatus {
	t.Helper()
	v := resp.Header.Get(HeaderStatus)
	var rs pb.RequestStatus
	if err := prototext.Unmarshal([]byte(v), &rs); err != nil || v == "" {
		t.Fatalf("%s %q: %v", HeaderStatus, v, err)
	}
	if rs.GetServerId() != "llmserve" || rs.GetRequestId() == 0 {
		t.Fatalf("%s %v: no server or request id", HeaderStatus, &rs)
	}
	return &rs
}

func TestHTTPInfer(t *testing.T) {
	srv, _ := testServer(t)
	body := append(fp32(0.1, 0.7, 0.2, 0.5, 0.25, 0.25), i64(3, 4)...)
	resp, b := do(t, http.MethodPost, srv.URL+"/api/infer/mlp/1",
		`id: 42 batch_size: 2 input { name: "x" } input { name: "ids" } output { name: "probs" cls { count: 2 } } output { name: "label" }`, body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if rs := nvStatus(t, resp); rs.GetCode() != pb.RequestStatusCode_SUCCESS {
		t.Fatalf("status %v", rs)
	}
	var h pb.InferResponseHeader
	if err := prototext.Unmarshal([]byte(resp.Header.Get(HeaderInferResponse)), &h); err != nil {
		t.Fatal(err)
	}
	golden(t, "infer_cls.txt", &h)
	// The body: label's 16 bytes (the one raw output), then the same
	// header in text.
	if !bytes.Equal(b[:16], i64(3, 4)) {
		t.Fatalf("raw label %v", b[:16])
	}
	var trailer pb.InferResponseHeader
	if err := prototext.Unmarshal(b[16:], &trailer); err != nil || !proto.Equal(&trailer, &h) {
		t.Fatalf("trailing header %q (%v)", b[16:], err)
	}
	if n, _ := strconv.Atoi(resp.Header.Get("Content-Length")); n != len(b) {
		t.Fatalf("Content-Length %d, body %d", n, len(b))
	}

	// ?format=binary: the trailing header in binary; no outputs asked
	// for: every output, raw.
	resp, b = do(t, http.MethodPost, srv.URL+"/api/infer/mlp?format=binary", `batch_size: 1 input { name: "x" } input { name: "ids" }`, append(fp32(1, 2, 3), i64(9)...))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if !bytes.Equal(b[:20], append(fp32(1, 2, 3), i64(9)...)) {
		t.Fatalf("raw outputs %v", b[:20])
	}
	if err := proto.Unmarshal(b[20:], &trailer); err != nil {
		t.Fatal(err)
	}
	golden(t, "infer_raw.txt", &trailer)
}

func TestHTTPStatus(t *testing.T) {
	srv, _ := testServer(t)
	// One success and one failure of mlp, for its statistics.
	if resp, b := do(t, http.MethodPost, srv.URL+"/api/infer/mlp", `batch_size: 1 input { name: "x" } input { name: "ids" }`, append(fp32(1, 2, 3), i64(9)...)); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if resp, _ := do(t, http.MethodPost, srv.URL+"/api/infer/mlp", `batch_size: 9`, nil); resp.StatusCode != 400 {
		t.Fatalf("batch 9: %d", resp.StatusCode)
	}
	resp, b := do(t, http.MethodGet, srv.URL+"/api/status", "", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	nvStatus(t, resp)
	var st pb.ServerStatus
	if err := prototext.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.txt", &st)

	resp, b = do(t, http.MethodGet, srv.URL+"/api/status/mlp?format=binary", "", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var one pb.ServerStatus
	if err := proto.Unmarshal(b, &one); err != nil {
		t.Fatal(err)
	}
	if len(one.GetModelStatus()) != 1 || !proto.Equal(one.GetModelStatus()["mlp"], st.GetModelStatus()["mlp"]) {
		t.Fatalf("status of mlp alone: %v", &one)
	}
}

// TestHTTPErrors: every error has its status code and NV-Status, with a
// message that says what is wrong.
func TestHTTPErrors(t *testing.T) {
	srv, b := testServer(t)
	big := make([]byte, 2<<10)
	for _, c := range []struct {
		name, method, path, header string
		body                       []byte
		http                       int
		code                       pb.RequestStatusCode
		msg                        string
	}{
		{"unknown model", "POST", "/api/infer/nope", `batch_size: 1`, nil, 404, pb.RequestStatusCode_NOT_FOUND, `model "nope" is not served here`},
		{"unknown version", "POST", "/api/infer/mlp/2", `batch_size: 1`, nil, 404, pb.RequestStatusCode_NOT_FOUND, `has no version "2"`},
		{"no header", "POST", "/api/infer/mlp", "", nil, 400, pb.RequestStatusCode_INVALID_ARG, "the NV-InferRequest header is missing"},
		{"bad header", "POST", "/api/infer/mlp", "batch_size: one", nil, 400, pb.RequestStatusCode_INVALID_ARG, "not a text InferRequestHeader"},
		{"short body", "POST", "/api/infer/mlp", `batch_size: 1 input { name: "x" }`, fp32(1), 400, pb.RequestStatusCode_INVALID_ARG, `input "x": shape [1, 3]`},
		{"missing input", "POST", "/api/infer/mlp", `batch_size: 1 input { name: "x" }`, fp32(1, 2, 3), 400, pb.RequestStatusCode_INVALID_ARG, `input "ids" is missing`},
		{"body too large", "POST", "/api/infer/mlp", `batch_size: 1 input { name: "x" }`, big, 413, pb.RequestStatusCode_INVALID_ARG, "larger than the limit of 1024 bytes"},
		{"bad format", "POST", "/api/infer/mlp?format=json", `batch_size: 1`, nil, 400, pb.RequestStatusCode_INVALID_ARG, `format="json" is not a format`},
		{"status of unknown model", "GET", "/api/status/nope", "", nil, 404, pb.RequestStatusCode_NOT_FOUND, `model "nope" is not served here`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, c.method, srv.URL+c.path, c.header, c.body)
			rs := nvStatus(t, resp)
			if resp.StatusCode != c.http || rs.GetCode() != c.code || !strings.Contains(rs.GetMsg(), c.msg) {
				t.Fatalf("%d %v, want %d %v with %q", resp.StatusCode, rs, c.http, c.code, c.msg)
			}
			if strings.TrimSpace(string(body)) != rs.GetMsg() {
				t.Fatalf("body %q, want the message", body)
			}
		})
	}

	// What the router refuses under /api/, in the v1 form.
	rec := httptest.NewRecorder()
	Refuse(rec, http.StatusMethodNotAllowed, "method PUT is not allowed on /api/status")
	if rs := nvStatus(t, answer{rec.Code, rec.Header()}); rec.Code != 405 || rs.GetCode() != pb.RequestStatusCode_UNSUPPORTED || strings.TrimSpace(rec.Body.String()) != rs.GetMsg() {
		t.Fatalf("Refuse 405: %d %v %q", rec.Code, rs, rec.Body)
	}

	// Health, and a model that is not ready.
	if resp, _ := do(t, "GET", srv.URL+"/api/health/live", "", nil); resp.StatusCode != 200 || nvStatus(t, resp).GetCode() != pb.RequestStatusCode_SUCCESS {
		t.Fatalf("live: %d", resp.StatusCode)
	}
	b.ms[0].(*fakeTensor).ready = false
	if resp, _ := do(t, "GET", srv.URL+"/api/health/ready", "", nil); resp.StatusCode != 503 || nvStatus(t, resp).GetCode() != pb.RequestStatusCode_UNAVAILABLE {
		t.Fatalf("ready with a model not ready: %d", resp.StatusCode)
	}
	resp, _ := do(t, "POST", srv.URL+"/api/infer/mlp", `batch_size: 1`, nil)
	if rs := nvStatus(t, resp); resp.StatusCode != 503 || rs.GetCode() != pb.RequestStatusCode_UNAVAILABLE || !strings.Contains(rs.GetMsg(), "not ready") {
		t.Fatalf("infer on a model not ready: %d %v", resp.StatusCode, rs)
	}
}
