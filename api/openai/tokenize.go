package openai

import (
	"encoding/json"
	"fmt"

	"github.com/llmserve/llmserve/frontend"
)

// This file serves vLLM's POST /tokenize and POST /detokenize.

// tokenizeRequest is vLLM's completion form (prompt) or chat form
// (messages) of /tokenize.
type tokenizeRequest struct {
	Model                string          `json:"model"`
	Prompt               *string         `json:"prompt"`
	Messages             messageList     `json:"messages"`
	AddSpecialTokens     *bool           `json:"add_special_tokens"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ReturnTokenStrs      *bool           `json:"return_token_strs"`
	ContinueFinalMessage *bool           `json:"continue_final_message"`
	ChatTemplate         *string         `json:"chat_template"`
	ChatTemplateKwargs   json.RawMessage `json:"chat_template_kwargs"`
	Tools                json.RawMessage `json:"tools"`
}

type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

type detokenizeResponse struct {
	Prompt string `json:"prompt"`
}

func (r tokenizeRequest) modelName() string   { return r.Model }
func (r detokenizeRequest) modelName() string { return r.Model }

// tokenize answers POST /tokenize (serveJSON).
func (h *handler) tokenize(c *jsonCall, req *tokenizeRequest, m Model) (any, error) {
	toks, err := tokenizeFor(m, req, c.body)
	if err != nil {
		return nil, err
	}
	resp := tokenizeResponse{Count: len(toks), MaxModelLen: m.MaxModelLen(), Tokens: toks}
	if resp.Tokens == nil {
		resp.Tokens = []int32{}
	}
	if req.ReturnTokenStrs != nil && *req.ReturnTokenStrs {
		tok := m.Tokenizer()
		resp.TokenStrs = make([]string, len(toks))
		for i, t := range toks {
			resp.TokenStrs[i] = tok.TokenText(t)
		}
	}
	return resp, nil
}

// tokenizeFor tokenizes the prompt, or renders and tokenizes the
// messages (with the chat request's template fields: tools, documents,
// chat_template, chat_template_kwargs, add_generation_prompt,
// continue_final_message), as vLLM does: add_special_tokens defaults to true for a prompt
// and to false for messages (the chat template writes BOS itself).
func tokenizeFor(m Model, req *tokenizeRequest, body []byte) ([]int32, error) {
	tok := m.Tokenizer()
	switch {
	case req.Prompt != nil && req.Messages.set:
		return nil, invalid("messages", "Give either prompt or messages, not both.")
	case req.Prompt != nil:
		for _, f := range []struct {
			name string
			set  bool
		}{{"add_generation_prompt", req.AddGenerationPrompt != nil}, {"continue_final_message", req.ContinueFinalMessage != nil},
			{"chat_template", req.ChatTemplate != nil}, {"chat_template_kwargs", req.ChatTemplateKwargs != nil}, {"tools", req.Tools != nil}} {
			if f.set {
				return nil, invalid(f.name, "%s applies to messages, not to a prompt.", f.name)
			}
		}
		if max := tok.MaxTextBytes(m.MaxModelLen()); len(*req.Prompt) > 4*max {
			return nil, invalid("prompt", "The prompt is %d bytes, more than this server tokenizes at once (%d).", len(*req.Prompt), 4*max)
		}
		addSpecial := req.AddSpecialTokens == nil || *req.AddSpecialTokens
		toks, err := tok.Encode(*req.Prompt, addSpecial)
		if err != nil {
			return nil, invalid("prompt", "The prompt could not be tokenized: %v", err)
		}
		return toks, nil
	case req.Messages.set:
		if len(req.Messages.msgs) == 0 {
			return nil, invalid("messages", "messages must not be empty.")
		}
		if refs := frontend.MediaOf(req.Messages.msgs); len(refs) > 0 {
			return nil, invalid(refs[0].Param, "%s: /tokenize does not take images or audio (their tokens come from the model's projector); POST /v1/chat/completions counts them in usage.prompt_tokens.", refs[0].Param)
		}
		// The chat request's prompt fields, checked as chat checks them.
		typed := &frontend.Request{Messages: req.Messages.msgs}
		if err := decodePromptFields(body, typed); err != nil {
			return nil, err
		}
		text, err := frontend.NewPrompt(typed).Apply(tok, typed.Messages)
		if err != nil {
			return nil, err
		}
		if max := tok.MaxTextBytes(m.MaxModelLen()); len(text) > 4*max {
			return nil, invalid("messages", "The messages render to %d bytes, more than this server tokenizes at once (%d).", len(text), 4*max)
		}
		addSpecial := req.AddSpecialTokens != nil && *req.AddSpecialTokens
		toks, err := tok.Encode(text, addSpecial)
		if err != nil {
			return nil, invalid("messages", "The rendered prompt could not be tokenized: %v", err)
		}
		return toks, nil
	default:
		return nil, invalid("prompt", "Give a prompt (a string) or messages to tokenize.")
	}
}

// detokenize answers POST /detokenize (serveJSON).
func (h *handler) detokenize(_ *jsonCall, req *detokenizeRequest, m Model) (any, error) {
	if req.Tokens == nil {
		return nil, invalid("tokens", "tokens is required: an array of token ids.")
	}
	nVocab := m.Tokenizer().Vocab().NumTokens()
	toks := make([]int32, len(req.Tokens))
	for i, t := range req.Tokens {
		if t < 0 || t >= int64(nVocab) {
			return nil, invalid(fmt.Sprintf("tokens[%d]", i), "Token id %d is outside the vocabulary [0, %d).", t, nVocab)
		}
		toks[i] = int32(t)
	}
	return detokenizeResponse{Prompt: m.Tokenizer().Decode(toks)}, nil
}
