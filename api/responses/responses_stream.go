package responses

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/tokenizer"
)

// The Responses API's stream: named server-sent events ("event: <type>"
// then "data: {...}"), each with its type and a sequence_number counting
// from 0, in OpenAI's order:
//
//	response.created, response.in_progress
//	per output item, one at a time, in output order:
//	  response.output_item.added
//	  reasoning:     response.reasoning_text.delta ... response.reasoning_text.done
//	  message:       response.content_part.added, response.output_text.delta ...
//	                 response.output_text.done, response.content_part.done
//	  function_call: response.function_call_arguments.delta ... .done
//	  custom_tool_call: response.custom_tool_call_input.delta ... .done
//	  response.output_item.done
//	response.completed (or response.incomplete; an error mid-stream is an
//	"error" event then response.failed)
//
// There is no [DONE]: the final response event ends the stream.

// eventSink takes a response's events: a client's SSE stream, or a
// background response's event log (bgRun).
type eventSink interface {
	Named(event string, v any) error
}

// respStream writes one response's events.
type respStream struct {
	sse  eventSink
	seq  int
	resp responseObject // the response so far (status in_progress)
	ids  *outputIDs
	out  respOutput
	// open is the type of the item being written ("" for none; "custom"
	// for a forced custom tool's call) and index its output_index.
	open  string
	index int
	call  int // the open function call's index in out.calls
	// forced is the input of a custom tool that tool_choice names, so far.
	forced string
}

// event writes one event of type typ with the fields of data.
func (s *respStream) event(typ string, data map[string]any) error {
	data["type"] = typ
	data["sequence_number"] = s.seq
	s.seq++
	return s.sse.Named(typ, data)
}

// item is the open item as it stands.
func (s *respStream) item(status string) respItem {
	switch s.open {
	case "reasoning":
		return s.out.reasoningItem(s.ids.reasoning)
	case "message":
		return s.out.messageItem(s.ids.message, status)
	default:
		return s.out.call(s.call).itemOf(s.ids.call(s.call), status)
	}
}

// openItem closes the open item unless it is typ (or the call i), and
// opens typ.
func (s *respStream) openItem(typ string, call int) error {
	if s.open == typ && (typ != "function_call" || s.call == call) {
		return nil
	}
	if err := s.closeItem(); err != nil {
		return err
	}
	s.open, s.call = typ, call
	added := s.item("in_progress")
	switch typ {
	case "message":
		added.Content = []respContent{}
	case "reasoning":
		added.Content, added.EncryptedContent = nil, ""
	}
	if err := s.event("response.output_item.added", map[string]any{"output_index": s.index, "item": added}); err != nil {
		return err
	}
	if typ == "message" {
		return s.event("response.content_part.added", map[string]any{"item_id": s.ids.message, "output_index": s.index, "content_index": 0, "part": outputText("")})
	}
	return nil
}

// closeItem ends the open item, if any.
func (s *respStream) closeItem() error {
	var err error
	switch s.open {
	case "":
		return nil
	case "custom":
		err = s.event("response.custom_tool_call_input.done", map[string]any{"item_id": s.ids.call(0), "output_index": s.index, "input": s.forced})
	case "reasoning":
		err = s.event("response.reasoning_text.done", map[string]any{"item_id": s.ids.reasoning, "output_index": s.index, "content_index": 0, "text": s.out.reasoning})
	case "message":
		part := s.out.messageItem(s.ids.message, "").Content[0]
		err = s.event("response.output_text.done", map[string]any{"item_id": s.ids.message, "output_index": s.index, "content_index": 0, "text": s.out.text, "logprobs": *part.Logprobs})
		if err == nil {
			err = s.event("response.content_part.done", map[string]any{"item_id": s.ids.message, "output_index": s.index, "content_index": 0, "part": part})
		}
	case "function_call":
		c := s.out.call(s.call)
		if c.info.custom {
			// The input is whole only once the call's JSON is: it is sent
			// in one delta.
			input := customInput(c.Arguments)
			err = s.event("response.custom_tool_call_input.delta", map[string]any{"item_id": s.ids.call(s.call), "output_index": s.index, "delta": input})
			if err == nil {
				err = s.event("response.custom_tool_call_input.done", map[string]any{"item_id": s.ids.call(s.call), "output_index": s.index, "input": input})
			}
			break
		}
		err = s.event("response.function_call_arguments.done", map[string]any{"item_id": s.ids.call(s.call), "output_index": s.index, "name": c.info.name, "arguments": c.Arguments})
	}
	if err == nil {
		status := "completed"
		if s.open == "message" {
			status = s.out.status()
		}
		err = s.event("response.output_item.done", map[string]any{"output_index": s.index, "item": s.item(status)})
	}
	s.open = ""
	s.index++
	return err
}

// reasoning, text and callDelta write what the answer added.
func (s *respStream) reasoning(t string) error {
	if t == "" {
		return nil
	}
	if err := s.openItem("reasoning", 0); err != nil {
		return err
	}
	s.out.reasoning += t
	return s.event("response.reasoning_text.delta", map[string]any{"item_id": s.ids.reasoning, "output_index": s.index, "content_index": 0, "delta": t})
}

func (s *respStream) text(t string, lps []openai.TokenLogprob) error {
	if t == "" {
		return nil
	}
	if s.out.rp.forced != nil {
		return s.forcedInput(t)
	}
	if err := s.openItem("message", 0); err != nil {
		return err
	}
	s.out.text += t
	if s.out.lps != nil {
		s.out.lps = append(s.out.lps, lps...)
	}
	if lps == nil {
		lps = []openai.TokenLogprob{}
	}
	return s.event("response.output_text.delta", map[string]any{"item_id": s.ids.message, "output_index": s.index, "content_index": 0, "delta": t, "logprobs": lps})
}

// forcedInput streams the answer to a custom tool that tool_choice names
// as its call's input.
func (s *respStream) forcedInput(t string) error {
	if len(s.out.calls) == 0 {
		if err := s.closeItem(); err != nil {
			return err
		}
		f := s.out.rp.forced
		s.out.calls = []tokenizer.ToolCall{{ID: "call_" + strings.ToLower(rand.Text()), Type: "function", Name: modelName(f.namespace, f.name)}}
		s.open, s.call = "custom", 0
		if err := s.event("response.output_item.added", map[string]any{"output_index": s.index, "item": s.out.call(0).itemOf(s.ids.call(0), "in_progress")}); err != nil {
			return err
		}
	}
	s.forced += t
	s.out.calls[0].Arguments = customArguments(s.forced)
	return s.event("response.custom_tool_call_input.delta", map[string]any{"item_id": s.ids.call(0), "output_index": s.index, "delta": t})
}

func (s *respStream) callDelta(calls []tokenizer.ToolCall, d frontend.ToolCallDelta) error {
	for len(s.out.calls) <= d.Index {
		s.out.calls = append(s.out.calls, calls[len(s.out.calls)])
		s.out.calls[len(s.out.calls)-1].Arguments = ""
	}
	if err := s.openItem("function_call", d.Index); err != nil {
		return err
	}
	if d.Arguments == "" {
		return nil
	}
	s.out.calls[d.Index].Arguments += d.Arguments
	if s.out.call(d.Index).info.custom {
		return nil // sent whole when the call ends (closeItem)
	}
	return s.event("response.function_call_arguments.delta", map[string]any{"item_id": s.ids.call(d.Index), "output_index": s.index, "delta": d.Arguments})
}

// streamResponse streams a response's generation; done logs the
// finished request.
func (h *handler) streamResponse(w http.ResponseWriter, r *http.Request, rg *respGen, rp *respParams, resp responseObject, done func(openai.Usage)) {
	sse := openai.StartSSE(w)
	final, err := h.streamTo(r.Context(), sse, rg, rp, resp, r.URL.Path)
	if err != nil {
		if openai.IsClientGone(err) || sse.Err() != nil {
			h.s.Log().Debug("client went away", "id", resp.ID, "path", r.URL.Path)
			return
		}
		h.s.LogError(r, resp.ID, openai.ErrorOf(err).Status, err)
		return
	}
	done(final.Usage())
}

// streamTo writes a response's events to sink as the generation goes,
// and stores the finished response. A generation that fails after the
// events started ends with an "error" event and response.failed (stored
// as failed); one cancelled by POST .../cancel is stored as cancelled.
// The error is the generation's or the sink's.
func (h *handler) streamTo(ctx context.Context, sink eventSink, rg *respGen, rp *respParams, resp responseObject, path string) (*streamed, error) {
	g := rg.g
	resp.Status = "in_progress"
	s := &respStream{sse: sink, resp: resp, ids: newOutputIDs()}
	s.out.rp = rp
	if rp.include.logprobs {
		s.out.lps = []openai.TokenLogprob{}
	}
	err := s.event("response.created", map[string]any{"response": resp})
	if err == nil {
		err = s.event("response.in_progress", map[string]any{"response": resp})
	}
	if err == nil {
		err = g.Receive(ctx, func(d *openai.Delta) error {
			if werr := s.reasoning(d.Reasoning); werr != nil {
				return werr
			}
			if werr := s.text(d.Text, d.Logprobs); werr != nil {
				return werr
			}
			for _, c := range d.Calls {
				if werr := s.callDelta(d.ToolCalls(), c); werr != nil {
					return werr
				}
			}
			if d.Finish != "" {
				s.out.finish = d.Finish
			}
			return nil
		})
	}
	if err != nil {
		if errors.Is(context.Cause(ctx), errResponseCancelled) {
			resp.Status = "cancelled"
			h.storeFinal(path, rp, resp)
			return nil, err
		}
		if openai.IsClientGone(err) {
			return nil, err
		}
		e := openai.ErrorOf(err)
		code := ""
		if e.Code != nil {
			code = *e.Code
		}
		_ = s.event("error", map[string]any{"code": code, "message": e.Message, "param": e.Param})
		resp.Status = "failed"
		resp.Error = &respError{Code: "server_error", Message: e.Message}
		if rp.bg {
			h.storeFinal(path, rp, resp)
		}
		_ = s.event("response.failed", map[string]any{"response": resp})
		return nil, err
	}
	if s.out.text == "" && s.out.hasMessage() {
		// An empty answer is still a message, as in the response object.
		if err := s.openItem("message", 0); err != nil {
			return nil, err
		}
	}
	if err := s.closeItem(); err != nil {
		return nil, err
	}
	u := g.Usage()
	finishResponse(&resp, &s.out, s.ids, u)
	h.storeFinal(path, rp, resp)
	typ := "response.completed"
	if resp.Status == "incomplete" {
		typ = "response.incomplete"
	}
	_ = s.event(typ, map[string]any{"response": resp})
	return &streamed{usage: u}, nil
}

// streamed is a finished streamed response.
type streamed struct{ usage openai.Usage }

// Usage is its token count.
func (f *streamed) Usage() openai.Usage { return f.usage }

// storeFinal stores a finished response, unless it is a background one
// deleted while it ran.
func (h *handler) storeFinal(path string, rp *respParams, resp responseObject) {
	if rp.bg {
		if _, err := h.store.Get(resp.ID); err != nil {
			return
		}
	}
	h.storeResponse(path, rp, resp)
}
