package tests

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// updateAgents rewrites the request shapes the agent CLIs sent
// (testdata/agents/<cli>/*.golden).
var updateAgents = flag.Bool("update", false, "rewrite the agent CLIs' request shapes in testdata/agents")

// shapeRecorder is middleware that keeps every request an agent CLI sent
// (method, path, query keys, JSON body) and every answer's body, so a
// test can check the session and record the request shapes.
type shapeRecorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []recordedRequest // guarded by mu
}

// recordedRequest is one request and its answer.
type recordedRequest struct {
	Method, Path string
	Query        []string
	Header       http.Header
	Body         any // the decoded JSON body, nil for none
	Status       int
	Answer       []byte
}

func (s *shapeRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := recordedRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()}
	for k := range r.URL.Query() {
		rec.Query = append(rec.Query, k)
	}
	slices.Sort(rec.Query)
	if len(body) > 0 {
		_ = json.Unmarshal(body, &rec.Body)
	}
	cw := &captureWriter{ResponseWriter: w, status: http.StatusOK}
	s.next.ServeHTTP(cw, r)
	rec.Status, rec.Answer = cw.status, cw.buf.Bytes()
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()
}

// requests returns the requests so far.
func (s *shapeRecorder) requests() []recordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// captureWriter copies what a handler writes; it flushes as the handler
// does, so streams stay streams.
type captureWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *captureWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *captureWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// jsonShape adds v's field paths to out: object keys joined with ".",
// array elements as "[]", and an object with a string "type" written
// with it ("tools[type=namespace].tools[type=function].name"), so that a
// new field, item type or tool type is a new line. Values are left out,
// and so are the insides of tools' JSON schemas (schemaKeys), which are
// the tools' content, not the API's shape.
func jsonShape(prefix string, v any, out map[string]bool) {
	if i := strings.LastIndexByte(prefix, '.'); schemaKeys[prefix[i+1:]] {
		out[prefix] = true
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if typ, ok := v["type"].(string); ok && strings.HasSuffix(prefix, "[]") {
			prefix = strings.TrimSuffix(prefix, "[]") + "[type=" + typ + "]"
		}
		if prefix != "" {
			out[prefix] = true
		}
		for k, x := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			jsonShape(p, x, out)
		}
	case []any:
		if len(v) == 0 {
			out[prefix+"[]"] = true
		}
		for _, x := range v {
			jsonShape(prefix+"[]", x, out)
		}
	default:
		out[prefix] = true
	}
}

// schemaKeys hold a tool's JSON schema (OpenAI's parameters,
// Anthropic's input_schema).
var schemaKeys = map[string]bool{"parameters": true, "input_schema": true}

// requestShapes are the shapes of the requests to path: "METHOD path
// ?key" for each query key, then each body path, sorted, each once.
func requestShapes(reqs []recordedRequest, method, path string) []string {
	set := map[string]bool{}
	for _, r := range reqs {
		if r.Method != method || r.Path != path {
			continue
		}
		set[method+" "+path] = true
		for _, q := range r.Query {
			set[method+" "+path+" ?"+q] = true
		}
		if r.Body != nil {
			jsonShape("", r.Body, set)
		}
	}
	lines := make([]string, 0, len(set))
	for k := range set {
		lines = append(lines, k)
	}
	slices.Sort(lines)
	return lines
}

// checkShapes compares lines with testdata/agents/<cli>/<name>.golden, or
// rewrites it with -update: a client release that sends a new field or
// type shows up as a diff here.
func checkShapes(t *testing.T, cli, name string, lines []string) {
	t.Helper()
	path := filepath.Join("testdata", "agents", cli, name+".golden")
	got := strings.Join(lines, "\n") + "\n"
	if *updateAgents {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to record the shapes)", err)
	}
	if got != string(want) {
		t.Errorf("%s sent requests of another shape than %s records (a new client release? check the diff, then run with -update):\n%s",
			cli, path, lineDiff(strings.Split(strings.TrimSpace(string(want)), "\n"), lines))
	}
}

// lineDiff lists the lines only in want ("-") or only in got ("+").
func lineDiff(want, got []string) string {
	var b strings.Builder
	for _, w := range want {
		if !slices.Contains(got, w) {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			fmt.Fprintf(&b, "+ %s\n", g)
		}
	}
	return b.String()
}
