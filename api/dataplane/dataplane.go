package dataplane

import (
	"embed"
	"net/http"
	"path"
	"strconv"

	"github.com/go-chi/chi/v5"
)

//go:embed dataplane.json index.html init.js swaggerui
var files embed.FS

// Document returns the OpenAPI document.
func Document() []byte {
	b, err := files.ReadFile("dataplane.json")
	if err != nil {
		panic("dataplane: " + err.Error())
	}
	return b
}

var contentTypes = map[string]string{
	".json": "application/json",
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".png":  "image/png",
}

// Mount adds the documentation routes to r.
func Mount(r chi.Router) {
	r.Get("/v2/docs", serve("index.html"))
	r.Get("/v2/docs/", serve("index.html"))
	r.Get("/v2/docs/dataplane.json", serve("dataplane.json"))
	r.Get("/v2/docs/init.js", serve("init.js"))
	for _, f := range []string{"swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"} {
		r.Get("/v2/docs/swagger-ui/"+f, serve("swaggerui/"+f))
	}
}

func serve(name string) http.HandlerFunc {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("dataplane: " + err.Error())
	}
	ct := contentTypes[path.Ext(name)]
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(b)
	}
}
