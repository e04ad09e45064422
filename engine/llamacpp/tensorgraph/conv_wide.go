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

// llmserve_post16: llmserve_conv_post on 16 outputs of channel c.
static inline llmserve_v16f llmserve_post16(const llmserve_conv * p, int64_t c, llmserve_v16f v) {
	if (p->post_scale) {
		const float s = p->post_scale[c], t = p->post_shift[c];
		v = v * (llmserve_v16f){s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s} + (llmserve_v16f){t, t, t, t, t, t, t, t, t, t, t, t, t, t, t, t};
	}
	if (p->post_relu) v = (llmserve_v16f)((llmserve_v16i)v & ((v > 0.0f) | (v != v)));
	return v;
}

// llmserve_wconv_xrow: stride 1, rows of 16 pixels or more: 16
// neighbouring pixels of a row to a vector, loaded from the padded input
// as they lie, 8 output channels at once (8 accumulators, each tap's 8
// weights broadcast), each vector stored where its channel's row is. A
// row whose width is not a multiple of 16 ends with a vector that
// overlaps the one before (its pixels computed twice, to the same values).
static void llmserve_wconv_xrow(const llmserve_conv * p, const float * xp, int64_t ph, int64_t pw, int64_t cg, int64_t mg, int64_t oy, int64_t ow, float * yb, int64_t plane) {
	const int64_t kh = p->kh, kw = p->kw, dw = p->dw;
	for (int64_t g = 0; g < p->group; g++) {
		const float * w = p->wt + g * cg * kh * kw * mg;
		for (int64_t jb = 0; jb < mg; jb += 8) {
			for (int64_t ox0 = 0; ox0 < ow; ox0 += 16) {
				const int64_t ox = ox0 + 16 <= ow ? ox0 : ow - 16;
				llmserve_v16f acc[8];
				for (int j = 0; j < 8; j++) {
					const float b = p->bias ? p->bias[g * mg + jb + j] : 0.0f;
					// One broadcast (a loop over the lanes compiles to a
					// masked insert a lane).
					acc[j] = (llmserve_v16f){b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b};
				}
				for (int64_t cj = 0; cj < cg; cj++) {
					const float * x = xp + (g * cg + cj) * ph * pw + oy * p->sh * pw + ox;
					for (int64_t ky = 0; ky < kh; ky++) {
						const float * xr = x + ky * p->dh * pw;
						for (int64_t kx = 0; kx < kw; kx++) {
							llmserve_v16f xv;
							memcpy(&xv, xr + kx * dw, sizeof xv);
							const float * wk = w + ((cj * kh + ky) * kw + kx) * mg + jb;
							for (int j = 0; j < 8; j++) acc[j] += xv * wk[j];
						}
					}
				}
				for (int j = 0; j < 8; j++) {
					const llmserve_v16f v = llmserve_post16(p, g * mg + jb + j, acc[j]);
					memcpy(yb + (g * mg + jb + j) * plane + oy * ow + ox, &v, sizeof v);
				}
			}
		}
	}
}

// llmserve_wconv_ptile: T neighbouring pixels of a row (the input read
// with stride SW, or p->sw when SW is 0) by NV vectors of 16 output
// channels, T * NV accumulators, each weight vector loaded once for the T
// pixels and each input cell broadcast once for the NV vectors.
static inline __attribute__((always_inline)) void llmserve_wconv_ptile(const llmserve_conv * p, const float * xp, int64_t ph, int64_t pw, int64_t g, int64_t cg, int64_t mg, int64_t oy, int64_t ox, float * yb, int64_t plane, int64_t ow, const int T, const int NV, const int SW) {
	const int64_t kh = p->kh, kw = p->kw, sw = SW > 0 ? SW : p->sw, dw = p->dw;
	const float * w = p->wt + g * cg * kh * kw * mg;
	llmserve_v16f acc[12][2]; // [pixel][vector], T <= 12, NV <= 2
	for (int i = 0; i < NV; i++) {
		llmserve_v16f b0 = {0};
		if (p->bias) memcpy(&b0, p->bias + g * mg + 16 * i, sizeof b0);
		for (int t = 0; t < T; t++) acc[t][i] = b0;
	}
	for (int64_t cj = 0; cj < cg; cj++) {
		const float * x = xp + (g * cg + cj) * ph * pw + oy * p->sh * pw + ox * sw;
		for (int64_t ky = 0; ky < kh; ky++) {
			const float * xr = x + ky * p->dh * pw;
			for (int64_t kx = 0; kx < kw; kx++) {
				const float * xc = xr + kx * dw;
				const float * wk = w + ((cj * kh + ky) * kw + kx) * mg;
				for (int i = 0; i < NV; i++) {
					llmserve_v16f wv;
					memcpy(&wv, wk + 16 * i, sizeof wv);
					for (int t = 0; t < T; t++) acc[t][i] += xc[t * sw] * wv;
				}
			}
		}
	}
	for (int i = 0; i < NV; i++) {
		for (int l = 0; l < 16; l++) {
			float * y = yb + (g * mg + 16 * i + l) * plane + oy * ow + ox;
			for (int t = 0; t < T; t++) y[t] = llmserve_conv_post(p, g * mg + 16 * i + l, acc[t][i][l]);
		}
	}
}

// llmserve_wconv_prow computes output row oy for all groups in tiles of
// T pixels (T <= ow), the last one overlapping the one before where T
// does not divide the row.
static inline __attribute__((always_inline)) void llmserve_wconv_prow(const llmserve_conv * p, const float * xp, int64_t ph, int64_t pw, int64_t cg, int64_t mg, int64_t oy, int64_t ow, float * yb, int64_t plane, const int T, const int NV) {
	for (int64_t g = 0; g < p->group; g++) {
		for (int64_t ox = 0; ox < ow; ox += T) {
			const int64_t o = ox + T <= ow ? ox : ow - T;
			if (p->sw == 1) llmserve_wconv_ptile(p, xp, ph, pw, g, cg, mg, oy, o, yb, plane, ow, T, NV, 1);
			else if (p->sw == 2) llmserve_wconv_ptile(p, xp, ph, pw, g, cg, mg, oy, o, yb, plane, ow, T, NV, 2);
			else llmserve_wconv_ptile(p, xp, ph, pw, g, cg, mg, oy, o, yb, plane, ow, T, NV, 0);
		}
	}
}

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
