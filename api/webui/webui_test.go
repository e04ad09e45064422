package webui

import (
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

// answer is what the handler answered.
type answer struct {
	code   int
	header http.Header
	body   string
}

func serve(t *testing.T, path string, header ...string) answer {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	Handler(notFound).ServeHTTP(w, req)
	return answer{w.Code, w.Header(), w.Body.String()}
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
			if resp.code != 200 || resp.header.Get("Content-Type") != c.contentType {
				t.Fatalf("%d %q, want 200 %q", resp.code, resp.header.Get("Content-Type"), c.contentType)
			}
			if !strings.Contains(resp.body, c.contains) {
				t.Errorf("body lacks %q", c.contains)
			}
			if resp.header.Get("X-Content-Type-Options") != "nosniff" || resp.header.Get("Cache-Control") != "no-cache" {
				t.Errorf("headers %v", resp.header)
			}
			if got := resp.header.Get("Content-Security-Policy") != ""; got != c.csp {
				t.Errorf("Content-Security-Policy present: %v, want %v", got, c.csp)
			}
			etag := resp.header.Get("ETag")
			if etag == "" {
				t.Fatal("no ETag")
			}
			if again := serve(t, c.path, "If-None-Match", etag); again.code != http.StatusNotModified {
				t.Errorf("revalidation with the ETag: %d, want 304", again.code)
			}
		})
	}
}

func TestOtherPathsGoToNotFound(t *testing.T) {
	for _, path := range []string{"/ui/", "/ui/nope.js", "/ui/index.html", "/ui/static/app.js", "/ui/../ui/app.js/", "/index.html", "/app.js", "/nope"} {
		resp := serve(t, path)
		if resp.code != 404 || strings.TrimSpace(resp.body) != "router 404" {
			t.Errorf("GET %s: %d %q, want the notFound handler's 404", path, resp.code, resp.body)
		}
	}
}

// The page refers only to files that are served, by paths relative to it,
// and to nothing outside the server.
func TestPageRefersToServedFilesOnly(t *testing.T) {
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(serve(t, "/").body, -1)
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
		if resp := serve(t, "/"+u); resp.code != 200 {
			t.Errorf("%q: %d", u, resp.code)
		}
	}
}
