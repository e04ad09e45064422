// Package benchio is what the benchmarks under evals/bench share: the
// plumbing between a load generator and a server's HTTP streams, and the
// files a run leaves behind. It knows no workload and no report.
//
// # What it owns
//
//   - The HTTP transport of a run (NewTransport): HTTP/1.1, one connection
//     per request in flight, compression off so that no decompressor
//     buffers the stream and skews a timestamp.
//   - Reading a streamed response (ReadStream): the server-sent events
//     split by github.com/r3labs/sse/v2's reader and parsed here
//     (ParseEvent, Event), each handed to the caller with the time it
//     arrived; a response that is not a stream is a failure line naming the
//     server's message (ErrorBody, ErrorText).
//   - OpenAI's streamed chunks (Chunk, DecodeChunk, IsDone): what counts as
//     generated output (HasContent) and as the end of generation (Finished).
//   - The model lookup (FirstModel: GET {base}/models).
//   - The prompt vocabulary (AppendWords, Intn): common English words of one
//     token each, drawn from a PCG stream, so a seed gives the same prompts
//     on every Go release.
//   - Result files (WriteJSONFile, ResultFiles, ReadResult), printing a
//     report as text or JSON (PrintReport), and the small statistics the
//     reports share (Median, Millis, ErrorSample, AddErrorSample).
//
// Callers are evals/bench (`llmserve bench`) and evals/bench/agent
// (`llmserve bench agent`); this package imports neither.
package benchio
