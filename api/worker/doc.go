// Package worker is the internal gRPC service llmserve.worker.v1.Worker
// (workerpb, generated from workerpb/worker.proto, which documents every
// message) over one model's engine core. `llmserve worker` serves it on
// --worker-port for a head; every serve process also registers it on its
// --grpc-port, so that vLLM-style routers can move KV between plain serve
// processes (kv_transfer_params, vllm.go). --api-key applies to it as to
// the V2 gRPC service.
//
//	Info, Vocabulary           the model, the role, the reasoning parser, and a vocabulary-only
//	                           GGUF (vocab.go) from which a head builds the same tokenizer
//	Generate                   one request by token ids; stop_choice; cancel = abort
//	Prefill                    prompt plus first token; the prompt's KV kept under a lease
//	PullKV, ReleaseKV          the kept KV in CRC-32C-checked chunks, then a trailer
//	Stats, WatchKVEvents       load, and the prefix cache's block events (snapshot first)
//	Embed                      token-id inputs pooled on the engine core (core.EngineCore.Embed):
//	                           unnormalized vectors, or a reranker's class outputs
//	PrepareMedia               a rendered chat prompt with images or audio tokenized and
//	                           encoded by the worker's projector (media.go)
//
// # Media
//
// A worker started with --mmproj says what its projector reads in Info
// (reads_images, reads_audio) and serves PrepareMedia: the model's
// PrepareMedia (models.Generative, its media cache included) over a
// prompt the head rendered, answering the prompt's token ids, the media
// positions holding placeholders (engine.MediaToken: negative ids), and
// the spans' rows as little-endian float32 bytes. The head sends both in a
// Request (prompt, media), to any worker of the model: the rows travel
// with the request, so the worker that runs it (or a prefill worker, or
// the worker a migrated request moves to) needs no projector.
// workercodec.DecodeRequest checks the spans: in order, inside the prompt, rows × the model's n_embd
// floats each, placeholders inside and vocabulary ids outside them (a
// placeholder never stands for text in the prefix cache), else
// INVALID_ARGUMENT naming "media[i]" or "prompt[j]". A *media.Error (an
// item the model cannot read, no projector) is INVALID_ARGUMENT with the
// item's param and the message of its Err, which the head turns back into
// the same *media.Error.
//
// # Thinking budget
//
// Request.thinking is scheduler.Thinking (the head builds it from the
// reasoning parser Info reports, as api/openai does on serve): the
// worker's scheduler counts each choice's thinking tokens and forces the
// end of thinking at the budget; Usage.reasoning_tokens reports the count.
// thinking.generated marks a migrated continuation: the prompt's last
// tokens the choice generated on another worker, from which the thinking
// state starts (only n = 1).
//
// # Roles
//
// both serves everything. prefill is meant for Prefill but still serves
// Generate (a head with only prefill workers left can still answer). decode
// serves Generate, pulling a remote prefill's KV, and refuses Prefill
// (FAILED_PRECONDITION, ERROR_CODE_ROLE).
//
// # KV transfer (transfer.go)
//
// A Prefill runs as a one-token request whose prompt KV the engine core
// keeps (core.EngineCore.Prefill, kvcache's keep) under a transfer id, in
// the engine's own KV snapshot format (engine.KV: the bytes of N positions
// as engine.KVLayout lays them out; the prefix cache stores the same). It
// is freed when a PullKV sent its trailer, on ReleaseKV, or when the lease
// ends (llmserve_kv_leases_expired_total). The decode worker pulls it
// itself, straight from the prefill worker (KVSource.address), not through
// the head: Pull checks every chunk's CRC-32C, the whole's, the size
// against positions × bytes per position and the layout against its own;
// SubmitWithTransfer then checks the KV covers a prefix of the request's
// prompt in its cache salt and imports it into the prefix cache right
// before the request is added (core.EngineCore.SubmitWithKV), so the
// request restores all but the prompt's last token and computes from there:
// the greedy output is the one a single process gives. On ANY failure
// (peer gone, checksum, timeout, lease ended, mismatch, prefix caching
// off) the request is submitted alone and computes its prompt
// (vLLM's kv_load_failure_policy "recompute"), counted in
// llmserve_kv_transfer_failures_total and _recomputed_total, and reported
// in the Final message's KVTransferReport. llmserve_kv_transfer_bytes_total
// counts the bytes by direction.
//
// # Errors
//
// Bad input is INVALID_ARGUMENT with a workerpb.Error detail whose param
// names the field (workercodec.ErrorDetail reads it); scheduler errors at
// submission map to gRPC codes and ErrorCodes as worker.proto's Generate documents
// (queue full → RESOURCE_EXHAUSTED, too long/limit/invalid →
// INVALID_ARGUMENT, closed → UNAVAILABLE, deadline → DEADLINE_EXCEEDED);
// errors after the start come in-band, in the aborted Output's error.
// Embed refuses a model without pooling, and an input the engine refuses,
// with INVALID_ARGUMENT (ERROR_CODE_INVALID).
//
// # The codec
//
// Every conversion between the wire and the engine core's values, with
// the checks of a request's fields on the way in, is head/workercodec's,
// the one codec both
// ends of the service import (the head encodes what this server decodes,
// and the other way round); this package holds the server: the RPCs, the
// model they run on, KV transfer and the vLLM contract.
//
// What this package must not do: decide which worker serves a request (the
// head does), or touch KV state outside the engine core's goroutine (it
// talks to it through core's commands).
package worker
