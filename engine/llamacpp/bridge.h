// C side of the binding: the log bridge (llama.cpp and ggml log through
// llmserve_log, which drops messages below the configured level before
// crossing into Go) and small loops that would cost too much as Go code
// over cgo-owned memory.
#pragma once
#include <stdint.h>
#include "ggml.h"

void llmserve_log_install(int min_level);

// llmserve_check_logits returns 0 when every one of the n logits is finite
// with a magnitude of at most bound, 1 when one is NaN or infinite, and 2
// when one is finite but beyond bound. The sampler chain is only defined
// for logits that pass (see engine.Sampling.SafeLogitBound).
int llmserve_check_logits(const float * x, int32_t n, float bound);

// llmserve_argmax returns the index of the first largest of the n logits,
// as llama.cpp's greedy sampler picks it.
int32_t llmserve_argmax(const float * x, int32_t n);
