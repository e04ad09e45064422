// Package jsonwire is the JSON decoding the HTTP protocols share
// (api/openai, api/anthropic, api/responses): strict decoding of a
// client's body whose every failure is a *frontend.Error naming the
// field ("messages[1].content", "input[0].role"), the check that its text
// is valid Unicode (CheckText; DecodeBody does both), the reading of one
// field of a given JSON kind with the error that names it (Array, String,
// Object, TypeError), encoding without HTML escaping (Marshal), so
// that "<|im_end|>" reads as the model wrote it, and the token readers of
// the one-pass decoders that skip encoding/json for the common shapes
// (SkipSpace, PlainString, NumberEnd: api/v2's infer header, V2
// parameters).
//
// It knows no protocol: no wire type of any API lives here, only the
// helpers each protocol's decoder calls on its own types. Errors are
// frontend's, so each protocol maps them to its wire in one place.
package jsonwire
