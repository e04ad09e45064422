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
	cs = appendGuided(cs, "guided_", s.GuidedJSON, s.GuidedRegex, s.GuidedChoice, s.GuidedGrammar)
	if so := s.StructuredOutputs; so != nil {
		cs = appendGuided(cs, "structured_outputs.", so.JSON, so.Regex, so.Choice, so.Grammar)
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

// appendGuided appends the constraints of vLLM's four guided forms, which
// guided_* and structured_outputs.* both spell: a JSON schema, a regular
// expression, a choice and a grammar. Their params are prefix followed by
// json, regex, choice and grammar.
func appendGuided(cs []frontend.Constraint, prefix string, schema json.RawMessage, regex *string, choice []string, grammar *string) []frontend.Constraint {
	if !jsonwire.IsAbsent(schema) {
		cs = append(cs, frontend.Constraint{Kind: frontend.JSONSchema, Param: prefix + "json", Schema: schema})
	}
	if regex != nil {
		cs = append(cs, frontend.Constraint{Kind: frontend.Regex, Param: prefix + "regex", Pattern: *regex})
	}
	if choice != nil {
		cs = append(cs, frontend.Constraint{Kind: frontend.Choice, Param: prefix + "choice", Choices: choice})
	}
	if grammar != nil {
		cs = append(cs, frontend.Constraint{Kind: frontend.Grammar, Param: prefix + "grammar", Pattern: *grammar})
	}
	return cs
}

// setStructured turns the structured-output constraint into the request's
// grammar (frontend.Params.SetConstraint), a JSON schema given as a string
// holding one unwrapped first.
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
	return p.SetConstraint(c, m)
}
