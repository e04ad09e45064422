package openai

import (
	"encoding/json"
	"strings"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/frontend"
)

// This file holds structured output: the request fields that constrain
// what the model may write, turned into one GBNF grammar for the engine
// (engine.Sampling.Grammar).
//
//	response_format    {"type": "text" | "json_object" | "json_schema",
//	                    "json_schema": {"name", "schema", "strict", "description"}}  (OpenAI)
//	guided_json        a JSON schema, as an object or a string       (vLLM)
//	guided_regex       a regular expression, matched in full          (vLLM)
//	guided_choice      an array of strings, one of which is written   (vLLM)
//	guided_grammar     a GBNF grammar with a root rule                (vLLM, llama.cpp)
//	structured_outputs {"json" | "regex" | "choice" | "grammar" | "json_object"} (vLLM)
//
// A request uses at most one of them (response_format "text" counts as
// none). Everything is checked before the request is submitted: the
// conversion (package grammar), then the model's own parser when it has
// one (GrammarChecker), so that a grammar the engine would refuse is a
// 400 naming the field, never a failed request.

// structuredFields are the structured-output fields of chat and
// completions.
type structuredFields struct {
	ResponseFormat    *responseFormat    `json:"response_format"`
	GuidedJSON        json.RawMessage    `json:"guided_json"`
	GuidedRegex       *string            `json:"guided_regex"`
	GuidedChoice      []string           `json:"guided_choice"`
	GuidedGrammar     *string            `json:"guided_grammar"`
	StructuredOutputs *structuredOutputs `json:"structured_outputs"`
}

type responseFormat struct {
	Type       *string           `json:"type"`
	JSONSchema *jsonSchemaFormat `json:"json_schema"`
}

type jsonSchemaFormat struct {
	Name        *string         `json:"name"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
	Description *string         `json:"description"`
}

type structuredOutputs struct {
	JSON       json.RawMessage `json:"json"`
	Regex      *string         `json:"regex"`
	Choice     []string        `json:"choice"`
	Grammar    *string         `json:"grammar"`
	JSONObject *bool           `json:"json_object"`
}

// GrammarChecker is a Model whose runtime parses a grammar itself before
// it runs one (llamacpp.Model.CheckGrammar); the handlers find it by type
// assertion and refuse, with a 400, a grammar it rejects.
type GrammarChecker = frontend.GrammarChecker

// schemaDoc is the schema document of a JSON schema given as an object or
// as a string holding one (vLLM accepts both for guided_json); param
// names it.
func schemaDoc(param string, raw json.RawMessage) (json.RawMessage, error) {
	switch jsonwire.Kind(raw) {
	case "object", "bool":
		return raw, nil
	case "string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, jsonwire.TypeError(param, "a JSON schema (an object or a string holding one)", "string")
		}
		return json.RawMessage(s), nil
	default:
		return nil, jsonwire.TypeError(param, "a JSON schema (an object or a string holding one)", jsonwire.Kind(raw))
	}
}

// constraints lists the structured-output requests in s.
func (s *structuredFields) constraints() ([]frontend.Constraint, error) {
	var cs []frontend.Constraint
	if rf := s.ResponseFormat; rf != nil {
		if rf.Type == nil {
			return nil, invalid("response_format.type", "response_format needs a type: text, json_object or json_schema.")
		}
		switch *rf.Type {
		case "text":
		case "json_object":
			cs = append(cs, frontend.Constraint{Kind: frontend.JSONObject, Param: "response_format"})
		case "json_schema":
			if rf.JSONSchema == nil {
				return nil, invalid("response_format.json_schema", "response_format of type json_schema needs json_schema with a schema.")
			}
			if jsonwire.IsAbsent(rf.JSONSchema.Schema) {
				return nil, invalid("response_format.json_schema.schema", "response_format.json_schema needs a schema.")
			}
			cs = append(cs, frontend.Constraint{Kind: frontend.JSONSchema, Param: "response_format.json_schema.schema", Schema: rf.JSONSchema.Schema})
		default:
			return nil, invalid("response_format.type", "Unknown response_format type %q; use text, json_object or json_schema.", *rf.Type)
		}
	}
	if !jsonwire.IsAbsent(s.GuidedJSON) {
		cs = append(cs, frontend.Constraint{Kind: frontend.JSONSchema, Param: "guided_json", Schema: s.GuidedJSON})
	}
	if s.GuidedRegex != nil {
		cs = append(cs, frontend.Constraint{Kind: frontend.Regex, Param: "guided_regex", Pattern: *s.GuidedRegex})
	}
	if s.GuidedChoice != nil {
		cs = append(cs, frontend.Constraint{Kind: frontend.Choice, Param: "guided_choice", Choices: s.GuidedChoice})
	}
	if s.GuidedGrammar != nil {
		cs = append(cs, frontend.Constraint{Kind: frontend.Grammar, Param: "guided_grammar", Pattern: *s.GuidedGrammar})
	}
	if so := s.StructuredOutputs; so != nil {
		if !jsonwire.IsAbsent(so.JSON) {
			cs = append(cs, frontend.Constraint{Kind: frontend.JSONSchema, Param: "structured_outputs.json", Schema: so.JSON})
		}
		if so.Regex != nil {
			cs = append(cs, frontend.Constraint{Kind: frontend.Regex, Param: "structured_outputs.regex", Pattern: *so.Regex})
		}
		if so.Choice != nil {
			cs = append(cs, frontend.Constraint{Kind: frontend.Choice, Param: "structured_outputs.choice", Choices: so.Choice})
		}
		if so.Grammar != nil {
			cs = append(cs, frontend.Constraint{Kind: frontend.Grammar, Param: "structured_outputs.grammar", Pattern: *so.Grammar})
		}
		if so.JSONObject != nil && *so.JSONObject {
			cs = append(cs, frontend.Constraint{Kind: frontend.JSONObject, Param: "structured_outputs.json_object"})
		}
	}
	if len(cs) > 1 {
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = c.Param
		}
		return nil, invalid(cs[1].Param, "Use at most one kind of structured output per request; this one asks for %s.", strings.Join(names, " and "))
	}
	return cs, nil
}

// setStructured turns the structured-output fields into the request's
// grammar, checked by the model's runtime when it can.
func (p *genParams) setStructured(cs []frontend.Constraint, m Model) error {
	if len(cs) == 0 {
		return nil
	}
	c := cs[0]
	if c.Kind == frontend.JSONSchema {
		doc, err := schemaDoc(c.Param, c.Schema)
		if err != nil {
			return err
		}
		c.Schema = doc
	}
	g, err := c.Grammar()
	if err != nil {
		return err
	}
	if gc, ok := m.(GrammarChecker); ok {
		if err := gc.CheckGrammar(g); err != nil {
			return invalid(c.Param, "The model's runtime cannot use the grammar this gives: %v.", err)
		}
	}
	if p.base.MinTokens > 0 {
		return invalid("min_tokens", "min_tokens cannot be combined with %s: the grammar decides where the output ends, and a stop token held back past that point leaves nothing to write.", c.Param)
	}
	p.base.Sampling.Grammar = g
	return nil
}
