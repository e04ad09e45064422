// Package grammar turns the structured-output requests of the OpenAI and
// vLLM APIs into GBNF, the grammar language of llama.cpp's grammar
// sampler, and checks GBNF before it reaches llama.cpp.
//
//	FromJSONSchema(schema)  a JSON schema (response_format json_schema, guided_json)
//	AnyJSONObject()         any JSON object (response_format json_object)
//	FromRegex(pattern)      a regular expression, matched in full (guided_regex)
//	FromLark(src)           a grammar in a subset of Lark (Responses custom tools)
//	Choices(list)           exactly one of some strings (guided_choice)
//	Check(gbnf)             a client's own grammar (guided_grammar)
//
// Every grammar starts at the rule "root". The engine applies it while
// sampling (engine.Sampling.Grammar); this package only writes and checks
// text.
//
// # What it owns, and what it must not do
//
// It owns the translation and the checks, and it is pure Go: no cgo, no
// I/O, no state. It must not touch the engine or know the wire format:
// errors carry what is wrong (*SchemaError with the keyword and its JSON
// pointer, *RegexError, *GBNFError with line and column) and api/openai
// maps them to a 400 naming the request field.
//
// # Why a GBNF checker in Go
//
// The runtime parses the grammar again (llamacpp.Model.CheckGrammar, which
// the API calls before submitting): that parse is the authority, since
// <token> references need the vocabulary. Check comes first because
// llama.cpp's parser trusts its input more than a server can: an
// unbounded repetition of a group that can be empty, such as ("a"?)*, is
// not caught by its left-recursion check and recurses until the process
// dies (found by the cross-check in engine/llamacpp's tests); {5,2}
// underflows into an endless expansion; deeply nested groups or long
// chains of rules overflow its C stack; a large literal repeated 2000
// times expands to gigabytes; and a parse error prints the whole grammar
// to stderr. Check mirrors llama.cpp's syntax (parse_sequence in
// llama-grammar.cpp at the vendored commit) and its semantic checks
// (undefined rules, root, left recursion including through rules that can
// be empty), and adds the limits MaxNesting, MaxElements and MaxLeftDepth,
// with messages that give the line and column.
//
// # JSON schema
//
// No maintained Go library converts JSON schema to GBNF with errors that
// name the unsupported keyword and where it is (llama.cpp's converter is
// C++ behind cgo and its ollama wrapper returns nil on any failure;
// LocalAI's is part of an application and ignores what it does not know),
// so this package has its own. Supported: type (one or a list), properties
// (written in the schema's order), required, additionalProperties,
// enum, const, anyOf, oneOf, items, prefixItems, minItems, maxItems,
// minLength, maxLength, format (date, time, date-time, uuid; dates never
// February 29, which depends on the year), and $ref to
// any local JSON pointer ("#/$defs/name", "#/definitions/name", "#"),
// recursion included. Annotations (title, description, default, examples,
// $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored.
// Anything else (minimum, pattern, allOf, not, if, ...) is a *SchemaError
// naming the keyword, since ignoring it would produce output the client's
// schema rejects.
//
// Choices that keep generation finite and valid: an object with
// properties and no additionalProperties allows no other properties (as
// OpenAI's strict mode and vLLM's xgrammar do; {"type":"object"} alone is
// any object); whitespace between tokens is bounded (a space, or a newline
// and up to 20 spaces or tabs); numbers have at most 16 digits before and
// after the point and a two-digit exponent. oneOf is generated as anyOf: a
// value that matches two branches is possible when the branches overlap.
// Counts (minItems, maxLength, ...) are at most MaxRepetition, llama.cpp's
// own bound.
package grammar
