package frontend

import (
	"errors"
	"strings"

	"github.com/llmserve/llmserve/grammar"
)

// Grammar builds the GBNF grammar that holds the answer to c (package
// grammar), or a BadRequest naming c.Param when c cannot be used. A
// JSONSchema constraint's Schema is the schema document itself (a protocol
// that also takes it as a string holding one unwraps it first).
func (c Constraint) Grammar() (string, error) {
	switch c.Kind {
	case JSONObject:
		return grammar.AnyJSONObject(), nil
	case Regex:
		g, err := grammar.FromRegex(c.Pattern)
		if err != nil {
			return "", Invalid(c.Param, "The regular expression cannot be used: %v.", strings.TrimPrefix(err.Error(), "regex: "))
		}
		return g, nil
	case Choice:
		if len(c.Choices) == 0 {
			return "", Invalid(c.Param, "%s must list at least one choice.", c.Param)
		}
		g, err := grammar.Choices(c.Choices)
		if err != nil {
			return "", Invalid(c.Param, "The choices cannot be used: %v.", err)
		}
		return g, nil
	case Grammar:
		if strings.TrimSpace(c.Pattern) == "" {
			return "", Invalid(c.Param, "%s must not be empty.", c.Param)
		}
		if err := grammar.Check(c.Pattern); err != nil {
			return "", Invalid(c.Param, "The grammar cannot be used: %v.", strings.TrimPrefix(err.Error(), "gbnf: "))
		}
		return c.Pattern, nil
	default:
		g, err := grammar.FromJSONSchema(c.Schema)
		if err != nil {
			return "", SchemaError(c.Param, err)
		}
		return g, nil
	}
}

// SchemaError is the BadRequest for a JSON schema, named param, that
// cannot become a grammar: the keyword and its JSON pointer when the
// converter says which ("The JSON schema keyword "minimum" at
// #/properties/n is not supported").
func SchemaError(param string, err error) error {
	var se *grammar.SchemaError
	if !errors.As(err, &se) {
		return Invalid(param, "The JSON schema cannot be used: %v.", err)
	}
	at := se.Pointer()
	if at == "" {
		at = "its root"
	} else {
		at = "#" + at
	}
	switch {
	case se.Keyword == "":
		return Invalid(param, "The JSON schema is invalid at %s: %s.", at, se.Msg)
	case strings.HasPrefix(se.Msg, "not supported"):
		return Invalid(param, "The JSON schema keyword %q at %s is %s.", se.Keyword, at, se.Msg)
	default:
		return Invalid(param, "The JSON schema keyword %q at %s %s.", se.Keyword, at, se.Msg)
	}
}
