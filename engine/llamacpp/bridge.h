// C side of the binding: the log bridge (llama.cpp, ggml and libmtmd log through
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

// Virtual KV memory (kvmem.c, kvmem.go). llmserve_kvmem_install hooks
// ggml's CPU buffer type once (0 on success); while a window is armed
// (llmserve_kvmem_arm with a non-zero id; 0 disarms) every CPU buffer is
// an uncommitted anonymous mapping whose "cache_*" tensors are recorded.
// llmserve_kvmem_tensors copies up to max of those recorded in a window's
// live buffers and returns how many there are. llmserve_kvmem_release gives
// pages back (madvise MADV_DONTNEED: they read as zeros after); it returns
// 0 or errno. llmserve_kvmem_resident counts the resident pages of a range
// (mincore), or -1.
struct llmserve_kvmem_tensor {
    char name[64];
    uintptr_t data;
    int64_t ne[4];
    int64_t nb[4];
    uintptr_t base;
    int64_t mapped;
};
int llmserve_kvmem_install(void);
void llmserve_kvmem_arm(int64_t window);
int llmserve_kvmem_tensors(int64_t window, struct llmserve_kvmem_tensor * out, int max);
int llmserve_kvmem_release(uintptr_t addr, int64_t len);
int64_t llmserve_kvmem_resident(uintptr_t addr, int64_t len);
