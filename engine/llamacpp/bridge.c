//go:build cgo

#include <math.h>
#include "bridge.h"
#include "llama.h"
#include "mtmd/mtmd.h"
#include "mtmd/mtmd-helper.h"
#include "_cgo_export.h"

static int llmserve_min_level = GGML_LOG_LEVEL_WARN;
static int llmserve_last_level = GGML_LOG_LEVEL_INFO;

static void llmserve_log(enum ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    int eff = level == GGML_LOG_LEVEL_CONT ? llmserve_last_level : (int) level;
    llmserve_last_level = eff;
    if (eff < llmserve_min_level) {
        return;
    }
    llmserveLog(eff, (char *) text);
}

void llmserve_log_install(int min_level) {
    llmserve_min_level = min_level;
    llama_log_set(llmserve_log, NULL);
    mtmd_log_set(llmserve_log, NULL);
    mtmd_helper_log_set(llmserve_log, NULL);
}

int llmserve_check_logits(const float * x, int32_t n, float bound) {
    // One pass, branch-free so that the compiler vectorizes it: NaN fails
    // a == a, infinity fails a <= FLT_MAX.
    int bad = 0;
    float mx = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        bad |= !(a <= 3.40282347e+38f);
        mx = a > mx ? a : mx;
    }
    if (bad) {
        return 1;
    }
    return mx > bound ? 2 : 0;
}

int32_t llmserve_argmax(const float * x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        if (x[i] > x[best]) {
            best = i;
        }
    }
    return best;
}

// llmserve_draw applies chain to the n candidates in cur and returns the
// selected token, or -1 when nothing usable was selected.
static int32_t llmserve_draw(struct llama_sampler * chain, llama_token_data * cur, size_t n) {
    llama_token_data_array a = { cur, n, -1, false };
    llama_sampler_apply(chain, &a);
    if (a.selected < 0 || (size_t) a.selected >= a.size) {
        return -1;
    }
    if (isinf(a.data[a.selected].logit) && a.data[a.selected].logit < 0) {
        return -1;
    }
    return a.data[a.selected].id;
}

int llmserve_grammar_topk = 64;

#define LLMSERVE_MAX_TOPK 256

// llmserve_greedy_grammar returns the first largest of the n logits in cur
// that grammar allows, looking at the k largest only, or -1.
static int32_t llmserve_greedy_grammar(struct llama_sampler * grammar, const llama_token_data * cur, int32_t n, int k) {
    llama_token_data top[LLMSERVE_MAX_TOPK];
    int m = 0;
    for (int32_t i = 0; i < n; i++) {
        float l = cur[i].logit;
        if (isinf(l) && l < 0) {
            continue;
        }
        // Ties keep the lower id first: ids ascend in cur.
        if (m == k && !(l > top[k - 1].logit)) {
            continue;
        }
        int j = m < k ? m++ : k - 1;
        while (j > 0 && top[j - 1].logit < l) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = cur[i];
    }
    if (m == 0) {
        return -1;
    }
    llama_token_data_array a = { top, (size_t) m, -1, true };
    llama_sampler_apply(grammar, &a);
    for (int i = 0; i < m; i++) {
        if (!(isinf(top[i].logit) && top[i].logit < 0)) {
            return top[i].id;
        }
    }
    return -1;
}

int32_t llmserve_sample(struct llama_sampler * chain, struct llama_sampler * grammar, int greedy,
                        const float * x, int32_t n, llama_token_data * cur, int * scanned) {
    *scanned = 0;
    for (int32_t i = 0; i < n; i++) {
        cur[i] = (llama_token_data){ i, x[i], 0.0f };
    }
    int32_t tok = llmserve_draw(chain, cur, (size_t) n);
    if (grammar != NULL) {
        int ok = 0;
        if (tok >= 0) {
            llama_token_data one = { tok, x[tok], 0.0f };
            llama_token_data_array a = { &one, 1, -1, false };
            llama_sampler_apply(grammar, &a);
            ok = !(isinf(one.logit) && one.logit < 0);
        }
        int k = llmserve_grammar_topk < LLMSERVE_MAX_TOPK ? llmserve_grammar_topk : LLMSERVE_MAX_TOPK;
        if (!ok && greedy && tok >= 0 && k > 0) {
            // cur holds every token's logit as the chain left it.
            int32_t t = llmserve_greedy_grammar(grammar, cur, n, k);
            if (t >= 0) {
                tok = t;
                ok = 1;
            }
        }
        if (!ok) {
            *scanned = 1;
            for (int32_t i = 0; i < n; i++) {
                cur[i] = (llama_token_data){ i, x[i], 0.0f };
            }
            llama_token_data_array a = { cur, (size_t) n, -1, false };
            llama_sampler_apply(grammar, &a);
            // Keep the allowed tokens only: the chain then works on fewer
            // candidates and can never select a forbidden one.
            size_t k = 0;
            for (size_t i = 0; i < a.size; i++) {
                if (!(isinf(a.data[i].logit) && a.data[i].logit < 0)) {
                    a.data[k++] = a.data[i];
                }
            }
            if (k == 0) {
                return -1;
            }
            tok = llmserve_draw(chain, a.data, k);
            if (tok < 0) {
                return -1;
            }
        }
        llama_sampler_accept(grammar, tok);
    }
    if (tok < 0) {
        return -1;
    }
    llama_sampler_accept(chain, tok);
    return tok;
}
