package webui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// notFound stands in for the router's 404 handler.
var notFound = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "router 404", http.StatusNotFound)
})

func serve(t *testing.T, path string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	Handler(notFound).ServeHTTP(w, req)
	return w.Result()
}

func TestFilesAreServedWithTheirContentTypes(t *testing.T) {
	cases := []struct {
		path, contentType, contains string
		csp                         bool
	}{
		{"/", "text/html; charset=utf-8", `<select id="model"`, true},
		{"/ui/app.js", "text/javascript; charset=utf-8", "v1/chat/completions", false},
		{"/ui/style.css", "text/css; charset=utf-8", "#transcript", false},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			resp := serve(t, c.path)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != c.contentType {
				t.Fatalf("%d %q, want 200 %q", resp.StatusCode, resp.Header.Get("Content-Type"), c.contentType)
			}
			if !strings.Contains(string(body), c.contains) {
				t.Errorf("body lacks %q", c.contains)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-cache" {
				t.Errorf("headers %v", resp.Header)
			}
			if got := resp.Header.Get("Content-Security-Policy") != ""; got != c.csp {
				t.Errorf("Content-Security-Policy present: %v, want %v", got, c.csp)
			}
			etag := resp.Header.Get("ETag")
			if etag == "" {
				t.Fatal("no ETag")
			}
			if again := serve(t, c.path, "If-None-Match", etag); again.StatusCode != http.StatusNotModified {
				t.Errorf("revalidation with the ETag: %d, want 304", again.StatusCode)
			}
		})
	}
}

func TestOtherPathsGoToNotFound(t *testing.T) {
	for _, path := range []string{"/ui/", "/ui/nope.js", "/ui/index.html", "/ui/static/app.js", "/ui/../ui/app.js/", "/index.html", "/app.js", "/nope"} {
		resp := serve(t, path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 404 || strings.TrimSpace(string(body)) != "router 404" {
			t.Errorf("GET %s: %d %q, want the notFound handler's 404", path, resp.StatusCode, body)
		}
	}
}

// The page refers only to files that are served, by paths relative to it,
// and to nothing outside the server.
func TestPageRefersToServedFilesOnly(t *testing.T) {
	body, _ := io.ReadAll(serve(t, "/").Body)
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(body), -1)
	if len(refs) < 2 {
		t.Fatalf("found %d references in the page", len(refs))
	}
	for _, ref := range refs {
		u := ref[1]
		if strings.HasPrefix(u, "data:") {
			continue
		}
		if strings.Contains(u, "//") || strings.HasPrefix(u, "/") {
			t.Errorf("%q is not relative to the page", u)
			continue
		}
		if resp := serve(t, "/"+u); resp.StatusCode != 200 {
			t.Errorf("%q: %d", u, resp.StatusCode)
		}
	}
}
