package benchio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/r3labs/sse/v2"
)

// maxEventSize bounds one SSE event. OpenAI chunks are a few hundred bytes;
// the bound only protects against a server that never ends an event.
const maxEventSize = 4 << 20

// ReadStream reads the response to a streaming request (sent at start,
// bounded by ctx): the SSE events until the stream ends,
// at the end of the body or at the event for which on says done. It calls
// on with every event that carries data and the time since start it was
// read at. It returns the time the stream ended at or, when the response is
// not a stream, a read failed or on reported a failure, the report line for
// it (describe words a read error). The caller closes resp.Body.
func ReadStream(ctx context.Context, resp *http.Response, start time.Time, describe func(error) string,
	on func(ev Event, at time.Duration) (done bool, failure string)) (end time.Duration, failure string) {
	if failure := notAStream(resp); failure != "" {
		return 0, failure
	}
	reader := sse.NewEventStreamReader(resp.Body, maxEventSize)
	for {
		raw, err := reader.ReadEvent()
		at := time.Since(start)
		if errors.Is(err, io.EOF) {
			if ctx.Err() != nil {
				// ReadEvent reports a canceled read as io.EOF.
				return 0, describe(ctx.Err())
			}
			// The body ended without its API's last event ([DONE] for
			// OpenAI's chunks). Every server we know sends it, but the
			// stream is complete either way.
			return at, ""
		}
		if err != nil {
			return 0, describe(err)
		}
		ev := ParseEvent(raw)
		if !ev.HasData {
			continue
		}
		done, failure := on(ev, at)
		if failure != "" {
			return 0, failure
		}
		if done {
			// Read the rest (normally nothing) so the connection is reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return at, ""
		}
	}
}

// notAStream says why resp does not carry the event stream a streamed
// request asked for (an HTTP error with the server's message, or a JSON
// answer), reading at most 8 KiB of its body; "" when it does.
func notAStream(resp *http.Response) string {
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		return fmt.Sprintf("HTTP %d: %s", resp.StatusCode, OrUnknown(ErrorBody(body)))
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		return "server answered with application/json, not an event stream: " + Truncate(string(bytes.TrimSpace(body)), 200)
	}
	return ""
}
