//go:build cgo

#include <math.h>
#include "bridge.h"
#include "llama.h"
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
