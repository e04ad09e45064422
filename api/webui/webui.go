package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path under which the page's files (other than the page
// itself, served at "/") are served: "/ui/app.js", "/ui/style.css".
const Prefix = "/ui/"

//go:embed static
var static embed.FS

// contentTypes maps the extensions of the embedded files to their media
// types. They are set here rather than left to mime.TypeByExtension, whose
// answer for .js depends on the host's mime tables.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// securityPolicy lets the page load only its own script and style sheet and
// talk only to its own origin; nothing is inline and nothing is fetched from
// elsewhere.
const securityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one embedded file, ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the chat page: "/" is index.html and Prefix+name each
// other embedded file. Any other path, including a name under Prefix that
// is not one of the files, is passed to notFound, so that unknown paths
// answer as they do elsewhere on the server. Mount it on GET "/" and GET
// Prefix+"*".
func Handler(notFound http.Handler) http.Handler {
	files := load()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var f file
		var ok bool
		switch p := r.URL.Path; {
		case p == "/":
			f, ok = files["index.html"]
		case strings.HasPrefix(p, Prefix) && p != Prefix+"index.html":
			f, ok = files[strings.TrimPrefix(p, Prefix)]
		}
		if !ok {
			notFound.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("ETag", f.etag)
		// Revalidate every time (a 304 while unchanged), so that a new
		// server version's page is never mixed with an old script.
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if f.contentType == contentTypes[".html"] {
			h.Set("Content-Security-Policy", securityPolicy)
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}

// load reads the embedded files into memory, keyed by their names under
// static/. A file without a known content type is a bug caught by the
// package's tests, so it panics.
func load() map[string]file {
	files := make(map[string]file)
	err := fs.WalkDir(static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(name)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			panic("webui: no content type for " + name)
		}
		sum := sha256.Sum256(body)
		files[strings.TrimPrefix(name, "static/")] = file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("webui: read the embedded files: " + err.Error())
	}
	return files
}
