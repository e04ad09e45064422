package openai

import (
	"fmt"
	"net/http"

	"github.com/llmserve/llmserve/scheduler"
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
//	  response.output_item.done
//	response.completed (or response.incomplete; an error mid-stream is an
//	"error" event then response.failed)
//
// There is no [DONE]: the final response event ends the stream.

// respStream writes one response's events.
type respStream struct {
	sse  *sseWriter
	seq  int
	resp responseObject // the response so far (status in_progress)
	ids  *outputIDs
	out  respOutput
	// open is the type of the item being written ("" for none) and
	// index its output_index.
	open  string
	index int
	call  int // the open function call's index in out.calls
}

// event writes one event of type typ with the fields of data.
func (s *respStream) event(typ string, data map[string]any) error {
	data["type"] = typ
	data["sequence_number"] = s.seq
	s.seq++
	if s.sse.err != nil {
		return s.sse.err
	}
	b, err := marshal(data)
	if err != nil {
		return fmt.Errorf("openai: encode response event: %w", err)
	}
	s.sse.buf = append(append(append(append(append(s.sse.buf[:0], "event: "...), typ...), "\ndata: "...), b...), "\n\n"...)
	if _, err := s.sse.w.Write(s.sse.buf); err != nil {
		s.sse.err = fmt.Errorf("%w: %w", errClientGone, err)
		return s.sse.err
	}
	return s.sse.flush()
}

// item is the open item as it stands.
func (s *respStream) item(status string) respItem {
	switch s.open {
	case "reasoning":
		return respItem{Type: "reasoning", ID: s.ids.reasoning, Summary: []respContent{},
			Content: []respContent{{Type: "reasoning_text", Text: s.out.reasoning}}}
	case "message":
		return respItem{Type: "message", ID: s.ids.message, Status: status, Role: "assistant", Content: []respContent{outputText(s.out.text)}}
	default:
		c := s.out.calls[s.call]
		return respItem{Type: "function_call", ID: s.ids.call(s.call), Status: status, CallID: c.ID, Name: c.Name, Arguments: c.Arguments}
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
		added.Content = nil
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
	case "reasoning":
		err = s.event("response.reasoning_text.done", map[string]any{"item_id": s.ids.reasoning, "output_index": s.index, "content_index": 0, "text": s.out.reasoning})
	case "message":
		err = s.event("response.output_text.done", map[string]any{"item_id": s.ids.message, "output_index": s.index, "content_index": 0, "text": s.out.text, "logprobs": []any{}})
		if err == nil {
			err = s.event("response.content_part.done", map[string]any{"item_id": s.ids.message, "output_index": s.index, "content_index": 0, "part": outputText(s.out.text)})
		}
	case "function_call":
		c := s.out.calls[s.call]
		err = s.event("response.function_call_arguments.done", map[string]any{"item_id": s.ids.call(s.call), "output_index": s.index, "name": c.Name, "arguments": c.Arguments})
	}
	if err == nil {
		err = s.event("response.output_item.done", map[string]any{"output_index": s.index, "item": s.item("completed")})
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

func (s *respStream) text(t string) error {
	if t == "" {
		return nil
	}
	if err := s.openItem("message", 0); err != nil {
		return err
	}
	s.out.text += t
	return s.event("response.output_text.delta", map[string]any{"item_id": s.ids.message, "output_index": s.index, "content_index": 0, "delta": t, "logprobs": []any{}})
}

func (s *respStream) callDelta(calls []tokenizer.ToolCall, d toolCallDelta) error {
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
	return s.event("response.function_call_arguments.delta", map[string]any{"item_id": s.ids.call(d.Index), "output_index": s.index, "delta": d.Arguments})
}

// streamResponse streams a response's generation.
func (h *handler) streamResponse(w http.ResponseWriter, r *http.Request, rg *respGen, rp *respParams, resp responseObject, meta respMeta) {
	g := rg.g
	resp.Status = "in_progress"
	s := &respStream{sse: startSSE(w), resp: resp, ids: newOutputIDs()}
	err := s.event("response.created", map[string]any{"response": resp})
	if err == nil {
		err = s.event("response.in_progress", map[string]any{"response": resp})
	}
	if err == nil {
		err = g.receive(r.Context(), func(pi int, outs []scheduler.Output) error {
			ds, err := g.apply(pi, outs)
			for _, cd := range ds {
				d := &cd.d
				final := d.finish != ""
				if werr := s.reasoning(d.reasoning); werr != nil {
					return werr
				}
				if werr := s.text(d.text); werr != nil {
					return werr
				}
				for _, c := range d.calls {
					if werr := s.callDelta(cd.c.out.ToolCalls(), c); werr != nil {
						return werr
					}
				}
				if final {
					s.out.finish = d.finish
				}
			}
			return err
		})
	}
	if err != nil {
		if isClientGone(err) || s.sse.err != nil {
			h.log.Debug("client went away", "id", meta.id, "path", r.URL.Path)
			return
		}
		e := toAPIError(err)
		h.logError(r, meta.id, e, err)
		code := ""
		if e.body.Code != nil {
			code = *e.body.Code
		}
		_ = s.event("error", map[string]any{"code": code, "message": e.body.Message, "param": e.body.Param})
		resp.Status = "failed"
		resp.Error = &respError{Code: "server_error", Message: e.body.Message}
		_ = s.event("response.failed", map[string]any{"response": resp})
		return
	}
	if len(s.out.calls) == 0 && s.out.text == "" {
		// An empty answer is still a message, as in the response object.
		if err := s.openItem("message", 0); err != nil {
			return
		}
	}
	if err := s.closeItem(); err != nil {
		return
	}
	u := g.usage()
	finishResponse(&resp, &s.out, s.ids, u)
	h.storeResponse(r.URL.Path, rp, resp)
	typ := "response.completed"
	if resp.Status == "incomplete" {
		typ = "response.incomplete"
	}
	_ = s.event(typ, map[string]any{"response": resp})
	h.logDone(r, meta, u)
}
