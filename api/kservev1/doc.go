// Package kservev1 serves KServe's V1 inference protocol for embedding
// and tensor models:
//
//	POST /v1/models/{m}:predict   {"instances": [...]} → {"predictions": [...]}
//
// For an embedding model an instance is a text, or an object {"text":
// "..."}; its prediction is the text's L2-normalized embedding (a list of
// numbers), pooled as the model's pooling says. The model must embed (its
// pooling is not none or rank); a generative model without pooling is a
// 400.
//
// For a tensor model or a custom runtime (tensor.go; infer.AsSignature)
// KServe's row format: an instance is one row of the model's one input (a
// number or nested arrays of the input's shape without the batch
// dimension) or, with several inputs, an object {"input name": row}; the
// rows are stacked into a V2 request that infer.Run serves by the
// model's kind, and each prediction is that row of the one output, or an
// object {"output name": row}.
//
// GET /v1/models/{m}, KServe V1's model status, is api/openai's model
// route: its answer holds KServe's {"name", "ready"} beside OpenAI's model
// object.
//
// Options.Infer counts predict requests per model (MLServer's
// model_infer_request_success and _failure).
//
// Errors are KServe V1's {"error": "<message>"} with 400 (bad input), 404
// (unknown model), 503 (not ready), 429, 413 and 500, mapped from
// api/v2/infer's error kinds. Any other POST under /v1/models/ (:explain
// included) goes to Options.Other, the router's 405 in OpenAI's shape.
package kservev1
