package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/llmserve/llmserve/api/openai/responsestore"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/tokenizer"
)

// responseObject is the Responses API's Response.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *respError         `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Metadata           map[string]string  `json:"metadata"`
	Model              string             `json:"model"`
	Output             []respItem         `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          responsesReason    `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	Text               responsesText      `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopP               *float64           `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *respUsage         `json:"usage"`
	User               *string            `json:"user"`
}

type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// respRecord is what the store keeps of a response: the response, the
// request's own input items (GET .../input_items) and the whole
// conversation up to and including the response's output, which a
// request naming it as previous_response_id continues.
type respRecord struct {
	Response     responseObject `json:"response"`
	Input        []respItem     `json:"input"`
	Conversation []respItem     `json:"conversation"`
}

// responses is the handler state of the Responses API: the store and the
// background requests still running.
type responses struct {
	store *responsestore.Store
	mu    sync.Mutex
	bg    map[string]context.CancelFunc // guarded by mu; running background requests
}

// respParams is a Responses request turned into a chat request, and what
// the response echoes.
type respParams struct {
	req   *responsesRequest
	echo  responseObject // the request's settings, for the response
	input []respItem     // this request's input items, with ids
	conv  []respItem     // previous conversation + input
	// typed is the request as the chat family's prepare path takes it.
	typed  *frontend.Request
	stream bool
	store  bool
	bg     bool
}

// decodeResponses decodes and checks a Responses request body, once, loads
// the previous response's conversation and builds the typed request.
func (h *handler) decodeResponses(body []byte) (*respParams, error) {
	if err := checkText(body); err != nil {
		return nil, err
	}
	var req responsesRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if !isAbsent(req.Conversation) {
		return nil, invalid("conversation", "The Conversations API is not served here; continue a conversation with previous_response_id.")
	}
	items, err := decodeInput(req.Input)
	if err != nil {
		return nil, err
	}
	rp := &respParams{req: &req, store: req.Store == nil || *req.Store,
		stream: req.Stream != nil && *req.Stream, bg: req.Background != nil && *req.Background}
	if rp.bg && !rp.store {
		return nil, invalid("background", "background requires store to be true: a background response is fetched from the store.")
	}
	if rp.bg && rp.stream {
		return nil, invalid("background", "background cannot be combined with stream on this server; poll GET /v1/responses/{id} instead.")
	}
	for i := range items {
		if items[i].ID == "" {
			items[i].ID = itemID(items[i].Type)
		}
	}
	rp.input = items
	var prev []respItem
	if id := strOf(req.PreviousResponseID); id != "" {
		rec, err := h.loadResponse(id)
		if err != nil {
			var nf *responseNotFoundError
			if errors.As(err, &nf) {
				nf.previous = true
			}
			return nil, err
		}
		prev = rec.Conversation
	}
	rp.conv = append(append([]respItem(nil), prev...), items...)
	msgs, err := chatMessagesOf(req.Instructions, rp.conv, len(prev))
	if err != nil {
		return nil, err
	}
	typed := &frontend.Request{
		Model:             req.Model,
		Messages:          msgs,
		Template:          frontend.Template{AddGenerationPrompt: true},
		Sampling:          frontend.Sampling{Temperature: req.Temperature, TopP: req.TopP},
		MaxTokens:         req.MaxOutputTokens,
		Stream:            rp.stream,
		User:              req.User,
		ParallelToolCalls: req.ParallelToolCalls,
		// Codex sends its reasoning settings whatever the model.
		IgnoreThinkingWithoutParser: true,
		Fields: frontend.Fields{
			Messages: "input", MaxTokens: "max_output_tokens", ToolParameters: "tools[%d].parameters",
			ToolChoiceName: "tool_choice.name", Thinking: "reasoning.effort",
		},
	}
	if len(req.Tools) > 0 {
		typed.Tools = make([]frontend.Tool, len(req.Tools))
		for i, raw := range req.Tools {
			t, err := respToolOf(raw)
			if err != nil {
				return nil, withPrefix(fmt.Sprintf("tools[%d]", i), err)
			}
			typed.Tools[i] = t
		}
	}
	if typed.ToolChoice, err = respToolChoiceOf(req.ToolChoice); err != nil {
		return nil, err
	}
	format := responsesFormat{Type: "text"}
	if req.Text != nil && req.Text.Format != nil {
		format = *req.Text.Format
		switch format.Type {
		case "text":
		case "json_object":
			typed.Constraints = []frontend.Constraint{{Kind: frontend.JSONObject, Param: "text.format"}}
		case "json_schema":
			if isAbsent(format.Schema) {
				return nil, invalid("text.format.schema", "A json_schema format needs a schema.")
			}
			typed.Constraints = []frontend.Constraint{{Kind: frontend.JSONSchema, Param: "text.format.schema", Schema: format.Schema}}
		default:
			return nil, invalid("text.format.type", "Unknown text.format type %q; use text, json_object or json_schema.", format.Type)
		}
	}
	rp.typed = typed
	temp, topP := req.Temperature, req.TopP
	if temp == nil {
		temp = ptr(1.0)
	}
	if topP == nil {
		topP = ptr(1.0)
	}
	toolChoice := req.ToolChoice
	if jsonKind(toolChoice) == "nothing" || jsonKind(toolChoice) == "null" {
		toolChoice = json.RawMessage(`"auto"`)
	}
	tools := req.Tools
	if tools == nil {
		tools = []json.RawMessage{}
	}
	metadata := req.Metadata
	if metadata == nil {
		metadata = map[string]string{}
	}
	rp.echo = responseObject{
		Object: "response", Background: rp.bg, Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens,
		Metadata: metadata, Model: req.Model, ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		PreviousResponseID: req.PreviousResponseID, Store: rp.store, Temperature: temp,
		Text: responsesText{Format: &format}, ToolChoice: toolChoice, Tools: tools, TopP: topP,
		Truncation: "disabled", User: req.User, Output: []respItem{},
	}
	if req.Reasoning != nil {
		rp.echo.Reasoning = *req.Reasoning
	}
	if req.Truncation != nil && *req.Truncation != "disabled" && *req.Truncation != "auto" {
		return nil, invalid("truncation", "truncation must be \"auto\" or \"disabled\", got %q.", *req.Truncation)
	}
	if e := req.Reasoning; e != nil && e.Effort != nil {
		switch *e.Effort {
		case "minimal", "low", "medium", "high":
		default:
			return nil, invalid("reasoning.effort", "reasoning.effort must be minimal, low, medium or high, got %q.", *e.Effort)
		}
		rp.typed.ThinkingBudget = ptr(effortBudget(*e.Effort, req.MaxOutputTokens))
	}
	return rp, nil
}

func ptr[T any](v T) *T { return &v }

// respToolOf reads a Responses function tool ({"type": "function",
// "name", "description", "parameters", "strict"}).
func respToolOf(raw json.RawMessage) (frontend.Tool, error) {
	if jsonKind(raw) != "object" {
		return frontend.Tool{}, typeError("", "a tool object", jsonKind(raw))
	}
	var t struct {
		Type        *string         `json:"type"`
		Name        *string         `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}
	if err := decodeJSON(raw, &t); err != nil {
		return frontend.Tool{}, err
	}
	if strOf(t.Type) != "function" {
		return frontend.Tool{}, invalid("type", "Tools of type %q are not supported; only \"function\" is.", strOf(t.Type))
	}
	if strOf(t.Name) == "" {
		return frontend.Tool{}, invalid("name", "A function tool needs a name.")
	}
	if k := jsonKind(t.Parameters); !isAbsent(t.Parameters) && k != "object" {
		// The message names the field as chat's tools do, which these
		// tools share their checks and wording with.
		err := typeError("function.parameters", "a JSON Schema object", k)
		err.Param = "parameters"
		return frontend.Tool{}, err
	}
	return functionTool(*t.Name, t.Description, t.Parameters)
}

// respToolChoiceOf reads tool_choice: "none", "auto", "required" or
// {"type": "function", "name"}.
func respToolChoiceOf(raw json.RawMessage) (frontend.ToolChoice, error) {
	var tc frontend.ToolChoice
	switch jsonKind(raw) {
	case "nothing", "null":
		return tc, nil
	case "string":
		var s string
		_ = json.Unmarshal(raw, &s)
		mode, ok := toolModes[s]
		if !ok {
			return tc, invalid("tool_choice", "Unknown tool_choice %q; use \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": ...}.", s)
		}
		tc.Mode = mode
	case "object":
		var named struct {
			Type *string `json:"type"`
			Name *string `json:"name"`
		}
		if err := decodeJSON(raw, &named); err != nil {
			return tc, withPrefix("tool_choice", err)
		}
		if strOf(named.Type) != "function" {
			return tc, invalid("tool_choice.type", "tool_choice.type must be \"function\" (the only tools served here), got %q.", strOf(named.Type))
		}
		if strOf(named.Name) == "" {
			return tc, invalid("tool_choice.name", "A function tool_choice needs a name.")
		}
		tc.Mode, tc.Name = frontend.ToolNamed, *named.Name
	default:
		return tc, typeError("tool_choice", "a string or an object", jsonKind(raw))
	}
	tc.Text = toolChoiceText(tc.Mode, tc.Name)
	return tc, nil
}

// itemID is a new id for an item of type typ.
func itemID(typ string) string {
	prefix := map[string]string{"message": "msg_", "function_call": "fc_", "function_call_output": "fco_", "reasoning": "rs_"}[typ]
	if prefix == "" {
		prefix = "item_"
	}
	return prefix + strings.ToLower(randomID())
}

// respGen is a started Responses generation.
type respGen struct {
	g  *generation
	m  Model
	tp *toolPlan
}

// startResponse prepares rp's typed request (prepareChat) and submits it.
func (h *handler) startResponse(ctx context.Context, rp *respParams, id string, arrival time.Time) (*respGen, error) {
	run, err := h.prepareChat(ctx, rp.typed, nil)
	if err != nil {
		return nil, err
	}
	g, err := submit(ctx, run.m, run.p, []promptInput{run.prompt}, id, arrival, func(int) string { return run.cp.Param })
	if err != nil {
		return nil, err
	}
	if err := g.split(reasoningParserOf(run.m), run.tp); err != nil {
		g.close()
		return nil, err
	}
	return &respGen{g: g, m: run.m, tp: run.tp}, nil
}

// respOutput is a finished answer split into output items.
type respOutput struct {
	reasoning string
	text      string
	calls     []tokenizer.ToolCall
	finish    string
}

// items are the response's output items: reasoning, the message (when it
// has text or nothing else was said), function calls.
func (o *respOutput) items(ids *outputIDs) []respItem {
	var out []respItem
	if o.reasoning != "" {
		out = append(out, respItem{Type: "reasoning", ID: ids.reasoning, Summary: []respContent{},
			Content: []respContent{{Type: "reasoning_text", Text: o.reasoning}}})
	}
	if o.text != "" || len(o.calls) == 0 {
		out = append(out, respItem{Type: "message", ID: ids.message, Status: "completed", Role: "assistant",
			Content: []respContent{outputText(o.text)}})
	}
	for i, c := range o.calls {
		out = append(out, respItem{Type: "function_call", ID: ids.call(i), Status: "completed", CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return out
}

func outputText(text string) respContent {
	return respContent{Type: "output_text", Text: text, Annotations: &[]any{}, Logprobs: &[]any{}}
}

// outputIDs are the ids of a response's output items, the same in the
// stream's events and in the final response.
type outputIDs struct {
	reasoning, message string
	calls              []string
}

func newOutputIDs() *outputIDs {
	return &outputIDs{reasoning: itemID("reasoning"), message: itemID("message")}
}

func (ids *outputIDs) call(i int) string {
	for len(ids.calls) <= i {
		ids.calls = append(ids.calls, itemID("function_call"))
	}
	return ids.calls[i]
}

// finishResponse fills resp with the output and usage of a finished
// generation.
func finishResponse(resp *responseObject, o *respOutput, ids *outputIDs, u usage) {
	resp.Output = o.items(ids)
	resp.Status = "completed"
	if o.finish == "length" {
		resp.Status = "incomplete"
		resp.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	ru := &respUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	ru.InputTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
	if d := u.CompletionTokensDetails; d != nil {
		// The engine counts the tokens generated inside the thinking
		// section (a model with a reasoning parser).
		ru.OutputTokensDetails.ReasoningTokens = d.ReasoningTokens
	}
	resp.Usage = ru
}

// collectOutput runs a generation to its end and splits the answer.
func (rg *respGen) collectOutput(ctx context.Context) (*respOutput, error) {
	res, err := rg.g.collect(ctx)
	if err != nil {
		return nil, err
	}
	msg := chatMessageOf(res[0].reasoning.String(), res[0].text.String())
	o := &respOutput{finish: res[0].finish}
	if msg.ReasoningContent != nil {
		o.reasoning = *msg.ReasoningContent
	}
	if msg.Content != nil {
		o.text = *msg.Content
	}
	o.calls = rg.g.choices[0].out.ToolCalls()
	return o, nil
}

// createResponse serves POST /v1/responses.
func (h *handler) createResponse(w http.ResponseWriter, r *http.Request) {
	arrival := h.now()
	id := "resp_" + strings.ToLower(h.id(r))
	body, err := h.readBody(w, r)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	rp, err := h.decodeResponses(body)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	resp := rp.echo
	resp.ID, resp.CreatedAt = id, arrival.Unix()
	if rp.bg {
		h.startBackground(w, r, rp, resp)
		return
	}
	rg, err := h.startResponse(r.Context(), rp, id, arrival)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	defer rg.g.close()
	resp.Model = rg.m.Name()
	meta := respMeta{id: id, created: arrival.Unix(), model: rg.m.Name(), user: strOf(rp.req.User), arrival: arrival}
	if rp.stream {
		h.streamResponse(w, r, rg, rp, resp, meta)
		return
	}
	o, err := rg.collectOutput(r.Context())
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	finishResponse(&resp, o, newOutputIDs(), rg.g.usage())
	h.storeResponse(r.URL.Path, rp, resp)
	writeJSON(w, http.StatusOK, resp)
	h.logDone(r, meta, rg.g.usage())
}
