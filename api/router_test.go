package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/models"
)

func TestMain(m *testing.M) {
	// The default transport keeps idle connections to closed test servers
	// until they time out; they are not ours.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

func newTestServer(t *testing.T, key string, withModel bool) *httptest.Server {
	t.Helper()
	var keys []string
	if key != "" {
		keys = []string{key}
	}
	return newTestServerWith(t, Options{APIKeys: keys}, withModel)
}

func newTestServerWith(t *testing.T, opts Options, withModel bool) *httptest.Server {
	t.Helper()
	reg := models.NewRegistry()
	if withModel {
		g, err := models.LoadGenerative(models.GenerativeConfig{CacheDir: t.TempDir(), MaxNumSeqs: 4, Threads: 1}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Add(g); err != nil {
			t.Fatal(err)
		}
	}
	opts.Registry, opts.Logger = reg, slog.New(slog.DiscardHandler)
	h, err := NewHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); reg.Close() })
	return srv
}

func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealth(t *testing.T) {
	up := newTestServer(t, "", true)
	down := newTestServer(t, "", false) // no model: not ready
	cases := []struct {
		srv  *httptest.Server
		path string
		code int
		body string
	}{
		{up, "/health", 200, ""},
		{up, "/v2/health/live", 200, `{"live":true}`},
		{up, "/v2/health/ready", 200, `{"ready":true}`},
		{down, "/health", 503, ""},
		{down, "/v2/health/live", 200, `{"live":true}`},
		{down, "/v2/health/ready", 503, `{"ready":false}`},
	}
	for _, c := range cases {
		code, body := get(t, c.srv.URL+c.path)
		if code != c.code || strings.TrimSpace(body) != c.body {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, code, body, c.code, c.body)
		}
	}
}

func TestUnknownRoutesAnswerInTheProtocolsFormat(t *testing.T) {
	srv := newTestServer(t, "", false)
	code, body := get(t, srv.URL+"/v1/nope")
	var oai struct {
		Error struct{ Message, Type string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &oai); code != 404 || err != nil || oai.Error.Message == "" {
		t.Errorf("/v1/nope: %d %s", code, body)
	}
	code, body = get(t, srv.URL+"/v2/nope")
	var v2 struct{ Error string }
	if err := json.Unmarshal([]byte(body), &v2); code != 404 || err != nil || v2.Error == "" {
		t.Errorf("/v2/nope: %d %s", code, body)
	}
	resp, err := http.Post(srv.URL+"/v1/models", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST /v1/models: %d", resp.StatusCode)
	}
}

// The chat page is mounted at "/" with its files under /ui/, outside the
// API key check; unknown paths, under /ui/ or under the API prefixes,
// still answer the router's 404 in their protocol's format.
func TestChatPage(t *testing.T) {
	srv := newTestServer(t, "sekret", false)
	cases := []struct {
		path        string
		code        int
		contentType string
		format      string // of a 404: "openai" or "oip"
	}{
		{"/", 200, "text/html; charset=utf-8", ""},
		{"/ui/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"/ui/style.css", 200, "text/css; charset=utf-8", ""},
		{"/ui/nope.js", 404, "application/json", "oip"},
		{"/ui/", 404, "application/json", "oip"},
		{"/nope", 404, "application/json", "oip"},
		{"/v1/nope", 404, "application/json", "openai"},
		{"/v1/", 404, "application/json", "openai"},
		{"/v2/nope", 404, "application/json", "oip"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.code || resp.Header.Get("Content-Type") != c.contentType {
				t.Fatalf("%d %q, want %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), c.code, c.contentType, body)
			}
			switch c.format {
			case "openai":
				var e struct {
					Error struct{ Message, Type string } `json:"error"`
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "NotFoundError" {
					t.Errorf("not an OpenAI 404: %s", body)
				}
			case "oip":
				var e struct{ Error string }
				if err := json.Unmarshal(body, &e); err != nil || !strings.HasPrefix(e.Error, "no route") {
					t.Errorf("not the router's 404: %s", body)
				}
			}
		})
	}
	// The page's API calls still need the key.
	if code, _ := get(t, srv.URL+"/v1/models"); code != 401 {
		t.Errorf("/v1/models without the key: %d", code)
	}
}

func TestAPIKey(t *testing.T) {
	srv := newTestServer(t, "sekret", true)
	if code, _ := get(t, srv.URL+"/v1/models"); code != 401 {
		t.Errorf("no key: %d", code)
	}
	if code, _ := get(t, srv.URL+"/v1/models", "Authorization", "Bearer wrong"); code != 401 {
		t.Errorf("wrong key: %d", code)
	}
	if code, _ := get(t, srv.URL+"/v1/models", "Authorization", "Bearer sekret"); code != 200 {
		t.Errorf("right key: %d", code)
	}
	// Probes and metrics stay open, as vLLM's --api-key leaves them.
	if code, _ := get(t, srv.URL+"/health"); code != 200 {
		t.Errorf("health with a key set: %d", code)
	}
	if code, body := get(t, srv.URL+"/metrics"); code != 200 || !strings.Contains(body, "llmserve_http_requests_total") {
		t.Errorf("metrics: %d", code)
	}
}

// Every inference route needs one of the keys; probes and metrics do not.
func TestAPIKeysOnEveryInferenceRoute(t *testing.T) {
	srv := newTestServerWith(t, Options{APIKeys: []string{"first", "second"}}, true)
	routes := []struct{ path, body string }{
		{"/v1/completions", `{"model":"stories260K","prompt":"a","max_tokens":1}`},
		{"/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"a"}],"max_tokens":1}`},
		{"/v1/embeddings", `{"model":"stories260K","input":"a"}`},
		{"/v1/score", `{"model":"stories260K","text_1":"a","text_2":"b"}`},
		{"/score", `{"model":"stories260K","text_1":"a","text_2":"b"}`},
		{"/v1/rerank", `{"model":"stories260K","query":"a","documents":["b"]}`},
		{"/rerank", `{"model":"stories260K","query":"a","documents":["b"]}`},
		{"/v2/rerank", `{"model":"stories260K","query":"a","documents":["b"]}`},
		{"/tokenize", `{"model":"stories260K","prompt":"a"}`},
		{"/detokenize", `{"model":"stories260K","tokens":[1]}`},
		{"/v2/models/stories260K/generate", `{"text_input":"a","parameters":{"max_tokens":1}}`},
		{"/v2/models/stories260K/infer", `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["a"]}],"parameters":{"max_tokens":1}}`},
	}
	for _, rt := range routes {
		for _, tc := range []struct {
			auth string
			want int
		}{{"", 401}, {"Bearer third", 401}, {"Bearer first", 200}, {"Bearer second", 200}, {"first", 401}} {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+rt.path, strings.NewReader(rt.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s with %q: %d %s, want %d", rt.path, tc.auth, resp.StatusCode, body, tc.want)
			}
			oip := strings.HasPrefix(rt.path, "/v2/models/")
			if tc.want == 401 && !oip && !strings.Contains(string(body), `"type":"AuthenticationError"`) {
				t.Errorf("%s: 401 body %s is not an OpenAI error", rt.path, body)
			}
			if tc.want == 401 && oip && !strings.HasPrefix(string(body), `{"error":"`) {
				t.Errorf("%s: 401 body %s is not an Open Inference Protocol error", rt.path, body)
			}
		}
	}
	for _, open := range []string{"/health", "/v2/health/live", "/v2/health/ready", "/metrics"} {
		if code, _ := get(t, srv.URL+open); code != 200 {
			t.Errorf("%s with keys set: %d", open, code)
		}
	}
}

func TestCORS(t *testing.T) {
	srv := newTestServerWith(t, Options{APIKeys: []string{"k"}, CORS: CORSOptions{AllowedOrigins: []string{"https://app.example"}}}, false)
	// A preflight passes without credentials.
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/v1/chat/completions", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	// Another origin gets no CORS headers.
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin allowed: %v", resp.Header)
	}
	// Without --allowed-origins nothing is allowed.
	plain := newTestServer(t, "", false)
	req, _ = http.NewRequest(http.MethodGet, plain.URL+"/health", nil)
	req.Header.Set("Origin", "https://app.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS on by default: %v", resp.Header)
	}
}
