// Package media owns what a client's image or audio clip is between the
// API that reads it and the model that encodes it: its kind, its bytes,
// the limits it is checked against, and the errors that name the request
// field it came from.
//
// The API layer finds media in a request (OpenAI image_url and
// input_audio parts, Anthropic image blocks, Responses input_image), puts
// Marker in the prompt text where each one goes, and hands the items to
// the model (Model.PrepareMedia in api/openai's terms). The model decodes
// and encodes them with its projector (engine/llamacpp's libmtmd binding).
//
// DecodeImage decodes an image to RGB pixels in Go (PNG, JPEG, WebP),
// after checking its header's dimensions: no C decoder reads a client's
// image bytes, and an oversized image is refused before its pixels are
// allocated (FuzzDecodeImage feeds it arbitrary bytes).
//
// Sniff names a file's format by its magic numbers (the formats the
// projectors read) and Describe says a format in prose, for the errors
// that refuse an item that is not what it claims.
//
// EncodeRows and DecodeRows are the wire form of encoded rows, which a
// head and its workers exchange (api/worker and head/router both use
// them, so the two sides cannot drift).
//
// It must not import the engine, the scheduler or an API package: both
// sides import it.
package media
