//go:build cgo

package tensorgraph

/*
#pragma GCC optimize ("fp-contract=off")
#include <stdint.h>
#include <string.h>
#include "cnn.h"

// The convolution rows of llmserve_conv_padded (conv.go) with 16-lane
// vectors, for processors with AVX-512F: twice the lanes of an AVX2
// vector per instruction and 32 vector registers, so more accumulators.
// Each output is the same float sum as the 8-lane kernels compute, its
// bias plus, in the reference's order (input channel, ky, kx), each tap's
// input times weight, rounded after each multiply and each add (no fused
// multiply-add): the lanes only decide how many outputs one instruction
// computes, never how one is summed. The rest of the binary stays built
// for x86-64-v3; these functions alone are compiled for AVX-512F and run
// only where llmserve_wide_init found it.

#if defined(__x86_64__) && defined(__GNUC__)

int llmserve_wide_kernels;

// llmserve_wide_init turns the wider kernels on where the processor (and
// the operating system, which must save the 512-bit registers) runs
// AVX-512F.
static void llmserve_wide_init(void) {
	__builtin_cpu_init();
	llmserve_wide_kernels = __builtin_cpu_supports("avx512f");
}

// llmserve_set_wide turns the wider kernels on (where the processor has
// them) or off, and returns whether they were on.
static int llmserve_set_wide(int on) {
	const int was = llmserve_wide_kernels;
	llmserve_wide_kernels = on && __builtin_cpu_supports("avx512f");
	return was;
}

#pragma GCC push_options
#pragma GCC target("avx512f")

typedef float llmserve_v16f __attribute__((vector_size(64)));
typedef int32_t llmserve_v16i __attribute__((vector_size(64)));

#define LLMS_W 16
#define LLMS_V llmserve_v16f
#define LLMS_VI llmserve_v16i
#define LLMS_SPLAT(x) {x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}
#define LLMS_FN(name) llmserve_wconv_##name
#define LLMS_TMAX 12
#define LLMS_NVMAX 2
#include "cnn_rows.h"

int llmserve_wconv_row(const llmserve_conv * p, const float * xp, int64_t ph, int64_t pw, int64_t cg, int64_t mg, int64_t oy, int64_t ow, float * yb, int64_t plane) {
	if (p->sw == 1 && ow >= 16) {
		llmserve_wconv_xrow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane);
		return 1;
	}
	if (mg == 16) {
		// A row of up to 12 pixels in one tile (12 accumulators), a
		// longer one in tiles of 8.
		switch (ow <= 12 ? ow : 8) {
		case 1: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 1, 1); break;
		case 2: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 2, 1); break;
		case 3: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 3, 1); break;
		case 4: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 4, 1); break;
		case 5: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 5, 1); break;
		case 6: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 6, 1); break;
		case 7: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 7, 1); break;
		case 8: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 8, 1); break;
		case 9: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 9, 1); break;
		case 10: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 10, 1); break;
		case 11: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 11, 1); break;
		default: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 12, 1); break;
		}
		return 1;
	}
	if (mg == 32) {
		switch (ow < 6 ? ow : 6) {
		case 1: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 1, 2); break;
		case 2: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 2, 2); break;
		case 3: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 3, 2); break;
		case 4: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 4, 2); break;
		case 5: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 5, 2); break;
		default: llmserve_wconv_prow(p, xp, ph, pw, cg, mg, oy, ow, yb, plane, 6, 2); break;
		}
		return 1;
	}
	return 0;
}

#pragma GCC pop_options

#else
static void llmserve_wide_init(void) {}
static int llmserve_set_wide(int on) { return 0; }
#endif
*/
import "C"

import "sync"

var wideInit sync.Once

// initWideKernels turns the AVX-512 kernels on where the processor has
// them (once; LoadGraph calls it).
func initWideKernels() {
	wideInit.Do(func() { C.llmserve_wide_init() })
}

// setWideKernels turns the AVX-512 kernels on (where the processor has
// them) or off for the Runs that start after it, and reports whether they
// were on: tests compare the two paths bit for bit.
func setWideKernels(on bool) (was bool) {
	initWideKernels()
	return C.llmserve_set_wide(cBool(on)) != 0
}
