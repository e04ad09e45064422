// Package workercodec is the one codec of the head↔worker service
// (llmserve.worker.v1.Worker, proto/workerpb): how the engine core's
// values travel between a head and its workers, and how they are checked
// on the way in. Both ends import it: api/worker (the server) decodes what
// the head encodes, and head/router (the client) decodes what the worker
// encodes, so each mapping is written once, beside its inverse.
//
//	EncodeRequest / DecodeRequest     scheduler.Request ↔ Request (sampling, thinking, bad words,
//	                                  deadline, prompt logprobs); DecodeRequest checks every field
//	                                  against the model's vocabulary and embedding width
//	EncodeOutput / DecodeOutput       scheduler.Output ↔ Output (logprobs, finish reason, error)
//	EncodeLogprob(s) / DecodeLogprob(s), EncodeFinish / DecodeFinish, EncodeUsage
//	EncodeMedia / DecodeMedia         a prompt's media spans (rows as little-endian float32);
//	                                  DecodePreparedMedia is the head's lighter check
//	EncodeItems / DecodeItems         PrepareMedia's images and audio clips
//	EncodeEmbedInputs / DecodeEmbedInputs   Embed's token-id inputs
//	EncodeError / DecodeError         a scheduler error ↔ workerpb.Error (ErrorCode, the field's
//	                                  param, a RequestError's numbers, Retry-After)
//	SubmitStatus, MediaStatus, Invalid, Status, ErrorDetail, PrefixParam
//	                                  the gRPC statuses that carry a workerpb.Error as detail
//
// # Errors
//
// A worker refuses bad input with INVALID_ARGUMENT and a workerpb.Error
// detail whose param names the field ("prompt[3]", "sampling.top_p",
// "media[0]"); scheduler errors map to codes and ErrorCodes as
// worker.proto's Generate documents (queue full → RESOURCE_EXHAUSTED, too
// long/limit/invalid → INVALID_ARGUMENT, closed → UNAVAILABLE, deadline →
// DEADLINE_EXCEEDED). DecodeError turns the detail back into the
// scheduler error (a *scheduler.RequestError with its numbers where the
// worker's scheduler refused the request), so the head's API layer
// answers a client as serve would for the same failure; DecodeMediaError
// rebuilds the *media.Error of an item the worker's projector could not
// read.
//
// # Where it lives
//
// The codec is the head's wing: it sits under head/, above the core,
// the scheduler and proto/workerpb that it converts between, and below
// both api/worker and head/router, so no import points upward. It is pure
// Go (no cgo, no server): a head imports it without linking llama.cpp.
package workercodec
