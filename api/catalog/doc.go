// Package catalog serves the model catalog: GET /v1/models and GET
// /v1/models/{id}, in the shape each client that asks reads.
//
//	GET /v1/models                       OpenAI's list, with vLLM's max_model_len;
//	                                     a LoRA adapter (AdapterModel) with parent and root
//	GET /v1/models  (anthropic-version)  Anthropic's page of ModelInfo
//	GET /v1/models?client_version=...    the list and Codex CLI's model catalog (codex.go)
//	GET /v1/models/{id}                  OpenAI's model object and KServe V1's
//	                                     {"name","ready"} in one document; a tensor
//	                                     model's KServe V1 status alone
//	GET /v1/models/{id} (anthropic-version)  Anthropic's ModelInfo
//
// Model ids such as "org/name" hold slashes, so {id} is the rest of the
// path; an escaped slash (%2F) works too. An unknown id is OpenAI's 404
// (code model_not_found), written by api/openai's error path so that it
// reads as every other OpenAI error.
//
// # What it owns, and what it must not do
//
// It owns the catalog's wire types and the choice among them, made from
// the request alone (the anthropic-version header, the client_version
// parameter). It reads the models through api/openai's Backend (Model,
// Models, and the optional TensorModels) and nothing else: it holds no
// state, never submits a request to a model, and maps no error itself.
// The POST routes under /v1/models/ are KServe V1's (api/kservev1); api's
// router mounts this package beside api/openai, api/anthropic and
// api/responses.
package catalog
