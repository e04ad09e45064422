package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/models"
)

// TestDataplaneDocument: /v2/docs/dataplane.json is valid OpenAPI 3 (by
// kin-openapi) and describes every V2 route the router serves, the
// repository extension, Triton's legacy health routes and KServe V1.
func TestDataplaneDocument(t *testing.T) {
	reg := models.NewRegistry()
	repo, err := models.NewRepository(models.RepositoryConfig{Dir: t.TempDir()}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(Options{Registry: reg, Repository: repo, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServerFor(t, h)
	code, body := get(t, srv+"/v2/docs/dataplane.json")
	if code != 200 {
		t.Fatalf("GET /v2/docs/dataplane.json: %d", code)
	}
	doc, err := openapi3.NewLoader().LoadFromData([]byte(body))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document is not valid: %v", err)
	}

	served := 0
	err = chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(route, "/")
		switch {
		case strings.HasPrefix(route, "/v2/docs"), route == "/v2/rerank", route == "":
			return nil // documentation itself; Cohere's rerank (OpenAI API)
		case !strings.HasPrefix(route, "/v2") && !strings.HasPrefix(route, "/api/health"):
			return nil
		}
		served++
		item := doc.Paths.Value(route)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("%s %s is served but not in dataplane.json", method, route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if served < 20 {
		t.Fatalf("only %d V2 routes walked; the walk is broken", served)
	}
	for _, want := range [][2]string{{"GET", "/v1/models/{model}"}, {"POST", "/v1/models/{model}:predict"}} {
		if item := doc.Paths.Value(want[1]); item == nil || item.GetOperation(want[0]) == nil {
			t.Errorf("KServe V1 %s %s is not in dataplane.json", want[0], want[1])
		}
	}
	// Every documented path is served (no stale entries): each has a
	// route of the same shape.
	for p := range doc.Paths.Map() {
		if strings.HasPrefix(p, "/v1/") {
			continue
		}
		if c, _ := get(t, srv+strings.NewReplacer("{model}", "m", "{version}", "1").Replace(p)); c == http.StatusNotFound && !strings.Contains(p, "{model}") {
			t.Errorf("documented %s answers 404", p)
		}
	}
}

// TestSwaggerUI: /v2/docs is the Swagger UI page, and everything it
// loads is served by us.
func TestSwaggerUI(t *testing.T) {
	srv := newTestServer(t, "secret", false)
	for _, path := range []string{"/v2/docs", "/v2/docs/"} {
		code, page := get(t, srv.URL+path)
		if code != 200 || !strings.Contains(page, `id="swagger-ui"`) {
			t.Fatalf("GET %s: %d %.200s", path, code, page)
		}
		refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
		if len(refs) < 4 {
			t.Fatalf("the page loads %d files", len(refs))
		}
		for _, m := range refs {
			if !strings.HasPrefix(m[1], "/v2/docs/") {
				t.Errorf("the page loads %s, which is not ours", m[1])
				continue
			}
			if c, b := get(t, srv.URL+m[1]); c != 200 || len(b) == 0 {
				t.Errorf("GET %s: %d", m[1], c)
			}
		}
	}
	if c, b := get(t, srv.URL+"/v2/docs/init.js"); c != 200 || !strings.Contains(b, "/v2/docs/dataplane.json") {
		t.Fatalf("init.js: %d %s", c, b)
	}
}

func newServerFor(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
