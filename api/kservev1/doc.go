// Package kservev1 serves KServe's V1 inference protocol for embedding
// models:
//
//	POST /v1/models/{m}:predict   {"instances": [...]} → {"predictions": [...]}
//
// An instance is a text, or an object {"text": "..."}; its prediction is
// the text's L2-normalized embedding (a list of numbers), pooled as the
// model's pooling says. The model must embed (its pooling is not none or
// rank); a generative model without pooling is a 400. Tensor models, whose
// instances are arrays, come with a later issue.
//
// GET /v1/models/{m}, KServe V1's model status, is api/openai's model
// route: its answer holds KServe's {"name", "ready"} beside OpenAI's model
// object.
//
// Errors are KServe V1's {"error": "<message>"} with 400 (bad input), 404
// (unknown model), 503 (not ready), 429, 413 and 500, mapped from
// api/v2/infer's error kinds. Any other POST under /v1/models/ (:explain
// included) goes to Options.Other, the router's 405 in OpenAI's shape.
package kservev1
