// Package dataplane serves the data plane's OpenAPI document and a
// Swagger UI for it:
//
//	GET /v2/docs                  the Swagger UI page
//	GET /v2/docs/dataplane.json   the OpenAPI 3 document
//	GET /v2/docs/init.js, /v2/docs/swagger-ui/{file}   the page's files
//
// dataplane.json is written by hand from the Open Inference Protocol's
// REST spec and Triton's generate extension, trimmed to what llmserve
// serves, plus the model repository extension, MLServer's infer_stream,
// the legacy health routes and KServe V1; a test checks that it is valid
// OpenAPI and lists every V2 route api/v2 mounts. The OpenAI API is
// documented in docs/API.md, not here.
//
// The Swagger UI is swagger-ui-dist, vendored into swaggerui/ by `make
// swagger-ui` at the version the Makefile pins (see swaggerui/PROVENANCE
// and its LICENSE); the page loads only files embedded here. The routes
// are public, as the chat page is: they hold no data.
package dataplane
