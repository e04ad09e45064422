package benchio

import "net/http"

// NewTransport returns the HTTP transport of a run with the given number of
// request slots. keepAlive false makes every request dial a connection of its
// own and close it afterwards (the transport of retries).
func NewTransport(slots int, keepAlive bool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = slots
	t.MaxIdleConnsPerHost = slots
	t.DisableKeepAlives = !keepAlive
	// A compressed event stream would be buffered by the decompressor and
	// distort every timestamp.
	t.DisableCompression = true
	// HTTP/1.1 only, one connection per request in flight, as vLLM's aiohttp
	// client does; HTTP/2 over TLS would multiplex them on one connection.
	t.ForceAttemptHTTP2 = false
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP1(true)
	return t
}
