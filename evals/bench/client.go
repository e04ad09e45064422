package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// result is the timeline of one request. All times are measured with the
// monotonic clock; the metric code reads nothing else.
type result struct {
	// sent is when the request was sent, from the start of the run.
	sent time.Duration
	// chunks holds the arrival time of each chunk carrying generated
	// content, from sent, in order.
	chunks []time.Duration
	// end is when the stream ended ([DONE] or end of body), from sent.
	end time.Duration
	// promptWords is the prompt length in words, the input length used when
	// the server reports no usage.
	promptWords int
	// usage is the last usage object the server streamed, nil if none.
	usage *benchio.Usage
	// err is why the request failed; "" means it succeeded.
	err string
	// retried reports that the first attempt failed on a reused connection
	// before any response byte and the request was sent again on a new one
	// (see session.send); the timeline counts from the first attempt.
	retried bool
	// textless reports a stream that finished with output tokens (usage)
	// but no text in any chunk; chunks then holds the finishing chunk.
	textless bool
	// long marks a long request of the mixed dataset.
	long bool
}

func (r *result) ok() bool { return r.err == "" }

// outputTokens is the request's output length: the server's
// completion_tokens when it reports a positive one, else the number of
// content chunks. fromUsage says which.
func (r *result) outputTokens() (n int, fromUsage bool) {
	if r.usage != nil && r.usage.CompletionTokens > 0 {
		return r.usage.CompletionTokens, true
	}
	return len(r.chunks), false
}

// inputTokens is the request's input length: the server's prompt_tokens
// when it reports a positive one, else the word count of the prompt.
func (r *result) inputTokens() (n int, fromUsage bool) {
	if r.usage != nil && r.usage.PromptTokens > 0 {
		return r.usage.PromptTokens, true
	}
	return r.promptWords, false
}

// session holds what every request of a run shares.
type session struct {
	// client sends every request first, over a pool of kept-alive
	// connections.
	client *http.Client
	// fresh sends retries: it never reuses a connection.
	fresh *http.Client
	cfg   *Config
	url   string // full URL of the generation route
	model string
}

// chatMessage is a message whose content is a string, or content parts
// when the request carries images.
type chatMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type imagePart struct {
	Type     string `json:"type"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type textPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// requestBody is the JSON sent to either route. Chat requests carry both
// max_tokens and max_completion_tokens: vLLM reads the latter, Ollama only
// the former.
type requestBody struct {
	Model               string        `json:"model"`
	Prompt              string        `json:"prompt,omitempty"`
	Messages            []chatMessage `json:"messages,omitempty"`
	MaxTokens           int           `json:"max_tokens"`
	MaxCompletionTokens int           `json:"max_completion_tokens,omitempty"`
	Temperature         float64       `json:"temperature"`
	Stream              bool          `json:"stream"`
	StreamOptions       streamOptions `json:"stream_options"`
	IgnoreEOS           bool          `json:"ignore_eos,omitempty"`
}

func (s *session) body(req request) ([]byte, error) {
	b := requestBody{
		Model:         s.model,
		MaxTokens:     req.maxTokens,
		Temperature:   s.cfg.Temperature,
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		IgnoreEOS:     s.cfg.IgnoreEOS,
	}
	if s.cfg.Endpoint == EndpointChat {
		b.Messages = []chatMessage{{Role: "user", Content: req.prompt}}
		if len(s.cfg.ImageURLs) > 0 {
			parts := make([]any, 0, len(s.cfg.ImageURLs)+1)
			for _, u := range s.cfg.ImageURLs {
				p := imagePart{Type: "image_url"}
				p.ImageURL.URL = u
				parts = append(parts, p)
			}
			b.Messages[0].Content = append(parts, textPart{Type: "text", Text: req.prompt})
		}
		b.MaxCompletionTokens = req.maxTokens
	} else {
		b.Prompt = req.prompt
	}
	return json.Marshal(b)
}

func (s *session) setHeaders(h http.Header) {
	if s.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+s.cfg.APIKey)
	}
}

// do sends one streaming request and records its timeline. t0 is the start
// of the run. It never returns an error: failures are recorded in the result.
// Config.Timeout bounds the whole request, a retry included.
func (s *session) do(ctx context.Context, req request, t0 time.Time) result {
	res := result{promptWords: req.promptWords}
	payload, err := s.body(req)
	if err != nil {
		res.err = fmt.Sprintf("encode request: %v", err)
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	start := time.Now()
	res.sent = start.Sub(t0)
	resp, retried, err := s.send(ctx, payload)
	res.retried = retried
	if err != nil {
		res.err = s.describe(err)
		return res
	}
	defer resp.Body.Close()
	finishedAt := time.Duration(-1) // the first chunk with a finish_reason
	res.end, res.err = benchio.ReadStream(ctx, resp, start, s.describe, func(ev benchio.Event, at time.Duration) (bool, string) {
		if ev.Name != "error" && benchio.IsDone(ev.Data) {
			return true, ""
		}
		chunk, failure := benchio.DecodeChunk(ev)
		if failure != "" {
			return false, failure
		}
		if chunk.Usage != nil {
			u := *chunk.Usage
			res.usage = &u
		}
		if chunk.HasContent() {
			res.chunks = append(res.chunks, at)
		}
		if finishedAt < 0 && chunk.Finished() {
			finishedAt = at
		}
		return false, ""
	})
	if res.err != "" {
		return res
	}
	if len(res.chunks) == 0 {
		if finishedAt >= 0 && res.usage != nil && res.usage.CompletionTokens > 0 {
			// The server generated tokens whose text is empty (llama-server
			// withholds tokens that end inside a UTF-8 character, and drops
			// them at the end) and said so at the finish: the client saw
			// its first output then.
			res.chunks = []time.Duration{finishedAt}
			res.textless = true
			return res
		}
		// vLLM's client fails such a request too: it has no TTFT.
		res.err = "stream ended without generated content"
	}
	return res
}

// describe turns a transport error into a short report line.
func (s *session) describe(err error) string {
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Sprintf("timeout after %v", s.cfg.Timeout)
	}
	return benchio.OrUnknown(err.Error())
}
