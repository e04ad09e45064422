// C side of the binding: the log bridge (llama.cpp and ggml log through
// llmserve_log, which drops messages below the configured level before
// crossing into Go) and small loops that would cost too much as Go code
// over cgo-owned memory.
#pragma once
#include <stdint.h>
#include "ggml.h"
#include "llama.h"

void llmserve_log_install(int min_level);

// llmserve_check_logits returns 0 when every one of the n logits is finite
// with a magnitude of at most bound, 1 when one is NaN or infinite, and 2
// when one is finite but beyond bound. The sampler chain is only defined
// for logits that pass (see engine.Sampling.SafeLogitBound).
int llmserve_check_logits(const float * x, int32_t n, float bound);

// llmserve_argmax returns the index of the first largest of the n logits,
// as llama.cpp's greedy sampler picks it.
int32_t llmserve_argmax(const float * x, int32_t n);

// llmserve_sample draws a token from the n logits x with chain and accepts
// it into chain. With a grammar sampler it draws from the tokens the
// grammar allows: it draws from the full distribution first and keeps the
// token when the grammar allows it (which is what a draw restricted to the
// allowed tokens gives for greedy, and a rejection sample of it
// otherwise); else it removes the tokens the grammar forbids and draws
// again. greedy says that the chain only transforms each token's logit
// on its own (bias, penalties) and takes the first largest: then the
// grammar is first matched against the llmserve_grammar_topk most likely
// tokens only, and the first it allows is the answer, exactly as a full
// match would give. The token is then accepted into grammar too. cur is
// scratch room for n entries; *scanned is set to 1 when the grammar was
// matched against all n tokens. It returns -1, accepting nothing, when no
// token can be drawn (the grammar allows none of the tokens left).
int32_t llmserve_sample(struct llama_sampler * chain, struct llama_sampler * grammar, int greedy,
                        const float * x, int32_t n, llama_token_data * cur, int * scanned);

// llmserve_grammar_topk is how many of the most likely tokens a greedy
// grammar draw matches before it matches them all; 0 turns that off
// (tests compare both).
extern int llmserve_grammar_topk;
