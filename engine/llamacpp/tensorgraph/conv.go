//go:build cgo

package tensorgraph

/*
#pragma GCC optimize ("fp-contract=off")
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "cnn.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

// The CNN operators ggml has no exact kernel for, as custom operators on
// [batch][channels][height][width] F32 tensors (ggml's ne reversed), the
// planes (one channel of one image) split among ggml's threads.

typedef float llmserve_v8f __attribute__((vector_size(32)));
typedef int32_t llmserve_v8i __attribute__((vector_size(32)));

// llmserve_share is thread ith's share [lo, hi) of n items, split among
// nth threads in contiguous chunks.
static void llmserve_share(int64_t n, int ith, int nth, int64_t * lo, int64_t * hi) {
	const int64_t per = (n + nth - 1) / nth;
	*lo = per * ith;
	*hi = *lo + per < n ? *lo + per : n;
}

// A pooling window (engine/graph's Window) and what it computes.
typedef struct {
	int64_t kh, kw, sh, sw, dh, dw, pad_t, pad_l;
	int32_t is_max, include_pad;
} llmserve_pool;

// llmserve_span: the outputs ox in [*lo, *hi) whose input column
// ox * s - pad + k * d falls inside [0, n): the cells a kernel tap reads.
static inline void llmserve_span(int64_t out, int64_t s, int64_t pad, int64_t k, int64_t d, int64_t n, int64_t * lo, int64_t * hi) {
	const int64_t off = k * d - pad; // input = ox * s + off
	int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
	int64_t b = n - off <= 0 ? 0 : (n - off + s - 1) / s;
	if (b > out) b = out;
	if (a > b) a = b;
	*lo = a;
	*hi = b;
}

#if defined(__AVX2__)
// llmserve_max_upd is the pooling's max step on 8 lanes: the new cell v
// wins when larger or NaN (as in llmserve_pool_op).
static inline __m256 llmserve_max_upd(__m256 m, __m256 v) {
	const __m256 win = _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
	return _mm256_blendv_ps(m, v, win);
}

// llmserve_maxpool2: MaxPool 2x2, strides 2, no pads, no dilation, on
// planes whose output rows hold 8 cells or more: 8 outputs at a time from
// two 16-cell loads of each input row, split into even and odd columns
// (the taps kx = 0 and 1), taken in the order ky, kx from -FLT_MAX, so
// each output is llmserve_pool_op's. A row's last 8 outputs may overlap
// the ones before.
static void llmserve_maxpool2(const float * x, float * y, int64_t lo, int64_t hi, int64_t ih, int64_t iw, int64_t oh, int64_t ow) {
	for (int64_t pl = lo; pl < hi; pl++) {
		const float * xp = x + pl * ih * iw;
		float * yp = y + pl * oh * ow;
		for (int64_t oy = 0; oy < oh; oy++) {
			const float * r0 = xp + 2 * oy * iw, * r1 = r0 + iw;
			for (int64_t ox0 = 0; ox0 < ow; ox0 += 8) {
				const int64_t ox = ox0 + 8 <= ow ? ox0 : ow - 8;
				__m256 m = _mm256_set1_ps(-FLT_MAX);
				const float * rows[2] = {r0 + 2 * ox, r1 + 2 * ox};
				for (int k = 0; k < 2; k++) {
					const __m256 a = _mm256_loadu_ps(rows[k]), b = _mm256_loadu_ps(rows[k] + 8);
					// [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6]
					const __m256 even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
					const __m256 odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
					m = llmserve_max_upd(m, even);
					m = llmserve_max_upd(m, odd);
				}
				_mm256_storeu_ps(yp + oy * ow + ox, m);
			}
		}
	}
}
#endif

// llmserve_pool_op: MaxPool (the largest of the window's input cells,
// NaN kept), AveragePool (their float sum divided by their count, or by
// the kernel's size with count_include_pad, as ONNX Runtime's MLAS does)
// and GlobalAveragePool (a window of the whole image). Each plane is
// swept tap by tap (ky, kx) over all its outputs at once, so that every
// output still takes its cells in the order ky, kx (the same sum and the
// same NaN as a cell-by-cell loop) while the inner loop runs along a row.
static void llmserve_pool_op(struct ggml_tensor * dst, int ith, int nth, void * ud) {
	const llmserve_pool * p = ud;
	const struct ggml_tensor * a = dst->src[0];
	const int64_t iw = a->ne[0], ih = a->ne[1], ow = dst->ne[0], oh = dst->ne[1];
	const int64_t planes = dst->ne[2] * dst->ne[3];
	int64_t lo, hi;
	llmserve_share(planes, ith, nth, &lo, &hi);
	const int64_t n = oh * ow;
	if (lo >= hi) return;
#if defined(__AVX2__)
	if (p->is_max && p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->dh == 1 && p->dw == 1 &&
		p->pad_t == 0 && p->pad_l == 0 && 2 * oh <= ih && 2 * ow <= iw && ow >= 8) {
		llmserve_maxpool2(a->data, dst->data, lo, hi, ih, iw, oh, ow);
		return;
	}
#endif
	// What does not depend on the plane, once: each tap's span of output
	// rows and columns, and (AveragePool) each output's divisor.
	int64_t ylo[p->kh], yhi[p->kh], xlo[p->kw], xhi[p->kw];
	for (int64_t ky = 0; ky < p->kh; ky++) llmserve_span(oh, p->sh, p->pad_t, ky, p->dh, ih, &ylo[ky], &yhi[ky]);
	for (int64_t kx = 0; kx < p->kw; kx++) llmserve_span(ow, p->sw, p->pad_l, kx, p->dw, iw, &xlo[kx], &xhi[kx]);
	float div_stack[n <= 4096 ? n : 1];
	float * div = n <= 4096 ? div_stack : malloc(sizeof(float) * n);
	if (!p->is_max) {
		for (int64_t i = 0; i < n; i++) div[i] = 0.0f;
		for (int64_t ky = 0; ky < p->kh; ky++) {
			for (int64_t kx = 0; kx < p->kw; kx++) {
				for (int64_t oy = ylo[ky]; oy < yhi[ky]; oy++) {
					for (int64_t ox = xlo[kx]; ox < xhi[kx]; ox++) div[oy * ow + ox] += 1.0f;
				}
			}
		}
		if (p->include_pad) {
			for (int64_t i = 0; i < n; i++) div[i] = (float)(p->kh * p->kw);
		}
	}
	if (n == 1 && p->kh == ih && p->kw == iw && p->dh == 1 && p->dw == 1 && p->pad_t == 0 && p->pad_l == 0) {
		// A window of the whole plane (GlobalAveragePool): its cells in
		// ky, kx order are the plane's in memory order.
		for (int64_t pl = lo; pl < hi; pl++) {
			const float * x = (const float *)a->data + pl * ih * iw;
			float r;
			if (p->is_max) {
				r = -FLT_MAX;
				for (int64_t i = 0; i < ih * iw; i++) r = (x[i] > r) | (x[i] != x[i]) ? x[i] : r;
			} else {
				float sum = 0.0f;
				for (int64_t i = 0; i < ih * iw; i++) sum += x[i];
				r = sum / div[0];
			}
			((float *)dst->data)[pl] = r;
		}
		if (div != div_stack) free(div);
		return;
	}
	// AveragePool of small planes: each output's sum over a zero-padded
	// copy of the plane, taps in the order ky, kx from the offsets computed
	// once. Adding a pad's +0 changes no sum (a sum started at +0 is never
	// -0), so this is the sweep below, bit for bit, without its short rows.
	const int64_t ph = (oh - 1) * p->sh + (p->kh - 1) * p->dh + 1, pw = (ow - 1) * p->sw + (p->kw - 1) * p->dw + 1;
	if (!p->is_max && ph * pw <= 4096 && p->kh * p->kw <= 64) {
		float xp[ph * pw];
		int64_t off[p->kh * p->kw];
		for (int64_t ky = 0; ky < p->kh; ky++) {
			for (int64_t kx = 0; kx < p->kw; kx++) off[ky * p->kw + kx] = ky * p->dh * pw + kx * p->dw;
		}
		const int64_t taps = p->kh * p->kw;
		if (hi - lo >= 8 && ph * pw <= 1024) {
			// 8 planes at once: their padded copies interleaved (cell by
			// cell, the 8 planes' values of a cell side by side), so
			// that a tap is one vector load for the 8 planes' output,
			// each lane the sum above, in the same order.
			llmserve_v8f xq[ph * pw];
			memset(xq, 0, sizeof xq);
			for (; lo + 8 <= hi; lo += 8) {
				const int64_t rows = ih < ph - p->pad_t ? ih : ph - p->pad_t, cols = iw < pw - p->pad_l ? iw : pw - p->pad_l;
				for (int q = 0; q < 8; q++) {
					const float * x = (const float *)a->data + (lo + q) * ih * iw;
					for (int64_t r = 0; r < rows; r++) {
						float * d = &xq[(r + p->pad_t) * pw + p->pad_l][q];
						const float * xr = x + r * iw;
						for (int64_t c = 0; c < cols; c++) d[8 * c] = xr[c];
					}
				}
				float * y = (float *)dst->data + lo * n;
				for (int64_t oy = 0; oy < oh; oy++) {
					for (int64_t ox = 0; ox < ow; ox++) {
						const llmserve_v8f * xb = xq + oy * p->sh * pw + ox * p->sw;
						llmserve_v8f sum = {0};
						for (int64_t k = 0; k < taps; k++) sum += xb[off[k]];
						const float d = div[oy * ow + ox];
						sum = sum / (llmserve_v8f){d, d, d, d, d, d, d, d};
						for (int q = 0; q < 8; q++) y[q * n + oy * ow + ox] = sum[q];
					}
				}
			}
		}
		memset(xp, 0, sizeof xp);
		for (int64_t pl = lo; pl < hi; pl++) {
			const float * x = (const float *)a->data + pl * ih * iw;
			float * y = (float *)dst->data + pl * n;
			for (int64_t r = 0; r < ih && r + p->pad_t < ph; r++) {
				const int64_t len = iw + p->pad_l <= pw ? iw : pw - p->pad_l;
				if (len > 0) memcpy(xp + (r + p->pad_t) * pw + p->pad_l, x + r * iw, sizeof(float) * len);
			}
			for (int64_t oy = 0; oy < oh; oy++) {
				for (int64_t ox = 0; ox < ow; ox++) {
					const float * xb = xp + oy * p->sh * pw + ox * p->sw;
					float sum = 0.0f;
					for (int64_t k = 0; k < taps; k++) sum += xb[off[k]];
					y[oy * ow + ox] = sum / div[oy * ow + ox];
				}
			}
		}
		if (div != div_stack) free(div);
		return;
	}
	for (int64_t pl = lo; pl < hi; pl++) {
		const float * x = (const float *)a->data + pl * ih * iw;
		float * y = (float *)dst->data + pl * n;
		for (int64_t i = 0; i < n; i++) y[i] = p->is_max ? -FLT_MAX : 0.0f;
		for (int64_t ky = 0; ky < p->kh; ky++) {
			for (int64_t kx = 0; kx < p->kw; kx++) {
				for (int64_t oy = ylo[ky]; oy < yhi[ky]; oy++) {
					const float * xr = x + (oy * p->sh - p->pad_t + ky * p->dh) * iw + kx * p->dw - p->pad_l;
					float * yr = y + oy * ow;
					if (p->is_max) {
						const int64_t sw = p->sw;
						for (int64_t ox = xlo[kx]; ox < xhi[kx]; ox++) {
							// Branch-free: the new cell wins when larger or NaN.
							const float v = xr[ox * sw], c = yr[ox];
							yr[ox] = (v > c) | (v != v) ? v : c;
						}
					} else {
						for (int64_t ox = xlo[kx]; ox < xhi[kx]; ox++) yr[ox] += xr[ox * p->sw];
					}
				}
			}
		}
		if (!p->is_max) {
			for (int64_t i = 0; i < n; i++) y[i] = y[i] / div[i];
		}
	}
	if (div != div_stack) free(div);
}

// llmserve_conv_op: a direct convolution, grouped or not (depthwise and
// the like, which im2col and one mul_mat do not express, and the small
// convolutions where im2col and a matrix product of a few columns cost
// more than the arithmetic), each output summed in float from its bias
// in engine/graph's reference order: input channel, then ky, then kx.
// For each output pixel and group the kernel walks the patch once and
// adds each input cell times its weights to the group's output channels
// at once (weights stored [group][channel][ky][kx][output channel]), so
// that the inner loop runs over output channels, contiguous, 8 to a
// vector. Threads split the output rows of all images. The parameters,
// llmserve_conv, are in cnn.h.

// llmserve_conv_pixel computes one output pixel (oy, ox) of group g of
// image xb into acc (mg values); nv, when > 0, is mg / 8 known at the
// call, so that (inlined with a constant) the accumulators stay in
// registers instead of a store and a load per tap.
static inline __attribute__((always_inline)) void llmserve_conv_pixel(const llmserve_conv * p, const float * xb, int64_t g, int64_t cg, int64_t mg, int64_t ih, int64_t iw, int64_t oy, int64_t ox, int nv, float * out) {
	const int64_t kh = p->kh, kw = p->kw;
	const float * w = p->wt + g * cg * kh * kw * mg;
	llmserve_v8f acc[4]; // nv <= 4
	if (nv > 0) {
		for (int i = 0; i < nv; i++) {
			acc[i] = (llmserve_v8f){0};
			if (p->bias) memcpy(&acc[i], p->bias + g * mg + 8 * i, sizeof acc[i]);
		}
	} else {
		for (int64_t j = 0; j < mg; j++) out[j] = p->bias ? p->bias[g * mg + j] : 0.0f;
	}
	for (int64_t cj = 0; cj < cg; cj++) {
		const float * x = xb + (g * cg + cj) * ih * iw;
		for (int64_t ky = 0; ky < kh; ky++) {
			const int64_t y0 = oy * p->sh - p->pad_t + ky * p->dh;
			if (y0 < 0 || y0 >= ih) continue;
			for (int64_t kx = 0; kx < kw; kx++) {
				const int64_t x0 = ox * p->sw - p->pad_l + kx * p->dw;
				if (x0 < 0 || x0 >= iw) continue;
				const float v = x[y0 * iw + x0];
				const float * wk = w + ((cj * kh + ky) * kw + kx) * mg;
				if (nv > 0) { // a constant where inlined: no test per tap
					for (int i = 0; i < nv; i++) {
						llmserve_v8f wv;
						memcpy(&wv, wk + 8 * i, sizeof wv);
						acc[i] += v * wv;
					}
				} else {
					for (int64_t j = 0; j < mg; j++) out[j] += v * wk[j];
				}
			}
		}
	}
	if (nv > 0) memcpy(out, acc, sizeof(float) * mg);
}

// llmserve_conv_tile computes 4 neighbouring output pixels (oy, ox..ox+3)
// whose windows lie wholly inside the image, as llmserve_conv_pixel would
// one by one (the same taps in the same order): the 4 pixels' sums are
// independent chains, so the adds overlap instead of each waiting for the
// last, and each weight vector is loaded once for the 4. out is [4][mg].
static inline __attribute__((always_inline)) void llmserve_conv_tile(const llmserve_conv * p, const float * xb, int64_t g, int64_t cg, int64_t mg, int64_t ih, int64_t iw, int64_t oy, int64_t ox, int nv, float * out) {
	const int64_t kh = p->kh, kw = p->kw, sw = p->sw;
	const float * w = p->wt + g * cg * kh * kw * mg;
	llmserve_v8f acc[4][4]; // [pixel][vector], nv <= 4
	for (int i = 0; i < nv; i++) {
		llmserve_v8f b0 = {0};
		if (p->bias) memcpy(&b0, p->bias + g * mg + 8 * i, sizeof b0);
		for (int t = 0; t < 4; t++) acc[t][i] = b0;
	}
	for (int64_t cj = 0; cj < cg; cj++) {
		const float * x = xb + (g * cg + cj) * ih * iw;
		for (int64_t ky = 0; ky < kh; ky++) {
			const float * xr = x + (oy * p->sh - p->pad_t + ky * p->dh) * iw + ox * sw - p->pad_l;
			for (int64_t kx = 0; kx < kw; kx++) {
				const float * xc = xr + kx * p->dw;
				const float * wk = w + ((cj * kh + ky) * kw + kx) * mg;
				for (int i = 0; i < nv; i++) {
					llmserve_v8f wv;
					memcpy(&wv, wk + 8 * i, sizeof wv);
					for (int t = 0; t < 4; t++) acc[t][i] += xc[t * sw] * wv;
				}
			}
		}
	}
	for (int t = 0; t < 4; t++) memcpy(out + t * mg, acc[t], sizeof(float) * mg);
}

#define LLMS_W 8
#define LLMS_V llmserve_v8f
#define LLMS_VI llmserve_v8i
#define LLMS_SPLAT(x) {x, x, x, x, x, x, x, x}
#define LLMS_FN(name) llmserve_conv_##name
#define LLMS_TMAX 8
#define LLMS_NVMAX 4
#include "cnn_rows.h"


// llmserve_copy copies n floats (a row of an image: too short for a call
// to memcpy to pay), 8 at a time, the last 8 overlapping the ones before.
static inline void llmserve_copy(float * d, const float * s, int64_t n) {
	if (n < 8) {
		for (int64_t i = 0; i < n; i++) d[i] = s[i];
		return;
	}
	for (int64_t i = 0;; i += 8) {
		const int64_t at = i + 8 <= n ? i : n - 8;
		llmserve_v8f v;
		memcpy(&v, s + at, sizeof v);
		memcpy(d + at, &v, sizeof v);
		if (at + 8 >= n) break;
	}
}

// llmserve_conv_padded is llmserve_conv_op on a zero-padded copy of each
// image (the cells a window reads outside the image are 0 there), so that
// every output pixel runs the same branch-free row kernels of cnn_rows.h
// (16-lane ones where llmserve_wide_kernels). Each output is its bias
// plus, in the reference's order (input channel, ky, kx), each tap's
// input times weight, where a tap outside the image adds 0 * w: the same
// float sums as llmserve_conv_pixel up to the sign of a zero sum (the
// weights are finite, checked when the model loads, so 0 * w is a zero).
// Threads split the output rows of all images; a thread pads each image
// it touches once.
static void llmserve_conv_padded(struct ggml_tensor * dst, int ith, int nth, const llmserve_conv * p) {
	const struct ggml_tensor * a = dst->src[0];
	const int64_t iw = a->ne[0], ih = a->ne[1], ch = a->ne[2], ow = dst->ne[0], oh = dst->ne[1];
	const int64_t cg = ch / p->group, mg = p->m / p->group, m = p->m;
	int64_t lo, hi; // this thread's output rows (of all images)
	llmserve_share(oh * dst->ne[3], ith, nth, &lo, &hi);
	if (lo >= hi) return;
	// The padded image: the rows and columns the windows read. Where that
	// is the input image as it lies (no pads, every row and column read),
	// the input itself; else a copy, whose pads (zeroed once) no image's
	// copy overwrites.
	const int64_t ph = (oh - 1) * p->sh + (p->kh - 1) * p->dh + 1;
	const int64_t pw = (ow - 1) * p->sw + (p->kw - 1) * p->dw + 1;
	const int inplace = p->pad_t == 0 && p->pad_l == 0 && ph == ih && pw == iw;
	const int64_t n = inplace ? 1 : ch * ph * pw;
	float stack[n <= 4096 ? n : 1];
	float * xp = n <= 4096 ? stack : malloc(sizeof(float) * n);
	if (!inplace) memset(xp, 0, sizeof(float) * n);
	const float * img = xp;
	const int nv = (int)(mg / 8);
	int64_t padded = -1; // the image in img
	for (int64_t r = lo; r < hi; r++) {
		const int64_t b = r / oh, oy = r % oh;
		if (b != padded) {
			const float * xb = (const float *)a->data + b * ch * ih * iw;
			if (inplace) {
				img = xb;
			} else {
				for (int64_t c = 0; c < ch; c++) {
					for (int64_t y = 0; y < ih && y + p->pad_t < ph; y++) {
						const int64_t x0 = p->pad_l, len = iw + x0 <= pw ? iw : pw - x0;
						llmserve_copy(xp + (c * ph + y + p->pad_t) * pw + x0, xb + (c * ih + y) * iw, len);
					}
				}
			}
			padded = b;
		}
		float * yb = (float *)dst->data + b * m * oh * ow;
		const int64_t plane = oh * ow;
#if defined(__x86_64__) && defined(__GNUC__)
		if (llmserve_wide_kernels && llmserve_wconv_row(p, img, ph, pw, cg, mg, oy, ow, yb, plane)) continue;
#endif
		if (p->sw == 1 && ow >= 8) {
			llmserve_conv_xrow(p, img, ph, pw, cg, mg, oy, ow, yb, plane);
			continue;
		}
		// T * NV = 8 accumulators where the row is wide enough.
		const int t = nv == 1 && ow >= 8 ? 8 : nv == 2 && ow >= 4 ? 4 : ow >= 2 ? 2 : 1;
#define LLMSERVE_PROW(T, NV) llmserve_conv_prow(p, img, ph, pw, cg, mg, oy, ow, yb, plane, T, NV)
		switch (t * 8 + nv) {
		case 8 * 8 + 1: LLMSERVE_PROW(8, 1); break;
		case 4 * 8 + 2: LLMSERVE_PROW(4, 2); break;
		case 2 * 8 + 1: LLMSERVE_PROW(2, 1); break;
		case 2 * 8 + 2: LLMSERVE_PROW(2, 2); break;
		case 2 * 8 + 3: LLMSERVE_PROW(2, 3); break;
		case 2 * 8 + 4: LLMSERVE_PROW(2, 4); break;
		case 1 * 8 + 1: LLMSERVE_PROW(1, 1); break;
		case 1 * 8 + 2: LLMSERVE_PROW(1, 2); break;
		case 1 * 8 + 3: LLMSERVE_PROW(1, 3); break;
		default: LLMSERVE_PROW(1, 4); break;
		}
#undef LLMSERVE_PROW
	}
	if (xp != stack) free(xp);
}

static void llmserve_conv_op(struct ggml_tensor * dst, int ith, int nth, void * ud) {
	const llmserve_conv * p = ud;
	const int64_t mg0 = p->m / p->group;
	if (p->padded && mg0 % 8 == 0 && mg0 <= 32) {
		llmserve_conv_padded(dst, ith, nth, p);
		return;
	}
	const struct ggml_tensor * a = dst->src[0];
	const int64_t iw = a->ne[0], ih = a->ne[1], ch = a->ne[2], ow = dst->ne[0], oh = dst->ne[1];
	const int64_t cg = ch / p->group, mg = p->m / p->group, m = p->m;
	int64_t lo, hi; // this thread's output rows (of all images)
	llmserve_share(oh * dst->ne[3], ith, nth, &lo, &hi);
	float acc_stack[mg <= 1024 ? 4 * mg : 1];
	float * acc = mg <= 1024 ? acc_stack : malloc(sizeof(float) * 4 * mg);
	// The output pixels whose windows lie wholly inside the image:
	// rows [ylo, yhi), columns [xlo, xhi).
	int64_t ylo, yhi, xlo, xhi, t;
	llmserve_span(oh, p->sh, p->pad_t, 0, p->dh, ih, &ylo, &yhi);
	llmserve_span(oh, p->sh, p->pad_t, p->kh - 1, p->dh, ih, &t, &yhi);
	if (t > ylo) ylo = t;
	llmserve_span(ow, p->sw, p->pad_l, 0, p->dw, iw, &xlo, &xhi);
	llmserve_span(ow, p->sw, p->pad_l, p->kw - 1, p->dw, iw, &t, &xhi);
	if (t > xlo) xlo = t;
	const int nv = mg == 8 ? 1 : mg == 16 ? 2 : mg == 24 ? 3 : mg == 32 ? 4 : 0;
	for (int64_t r = lo; r < hi; r++) {
		const int64_t b = r / oh, oy = r % oh;
		const float * xb = (const float *)a->data + b * ch * ih * iw;
		float * yb = (float *)dst->data + b * m * oh * ow;
		const int interior = oy >= ylo && oy < yhi;
		for (int64_t ox = 0; ox < ow; ox++) {
			if (nv > 0 && interior && ox >= xlo && ox + 4 <= xhi) {
				for (int64_t g = 0; g < p->group; g++) {
					switch (nv) {
					case 1: llmserve_conv_tile(p, xb, g, cg, mg, ih, iw, oy, ox, 1, acc); break;
					case 2: llmserve_conv_tile(p, xb, g, cg, mg, ih, iw, oy, ox, 2, acc); break;
					case 3: llmserve_conv_tile(p, xb, g, cg, mg, ih, iw, oy, ox, 3, acc); break;
					default: llmserve_conv_tile(p, xb, g, cg, mg, ih, iw, oy, ox, 4, acc); break;
					}
					for (int64_t tp = 0; tp < 4; tp++) {
						float * y = yb + g * mg * oh * ow + oy * ow + ox + tp;
						for (int64_t j = 0; j < mg; j++) y[j * oh * ow] = llmserve_conv_post(p, g * mg + j, acc[tp * mg + j]);
					}
				}
				ox += 3;
				continue;
			}
			for (int64_t g = 0; g < p->group; g++) {
				switch (mg) {
				case 8: llmserve_conv_pixel(p, xb, g, cg, mg, ih, iw, oy, ox, 1, acc); break;
				case 16: llmserve_conv_pixel(p, xb, g, cg, mg, ih, iw, oy, ox, 2, acc); break;
				case 24: llmserve_conv_pixel(p, xb, g, cg, mg, ih, iw, oy, ox, 3, acc); break;
				case 32: llmserve_conv_pixel(p, xb, g, cg, mg, ih, iw, oy, ox, 4, acc); break;
				default: llmserve_conv_pixel(p, xb, g, cg, mg, ih, iw, oy, ox, 0, acc); break;
				}
				float * y = yb + g * mg * oh * ow + oy * ow + ox;
				for (int64_t j = 0; j < mg; j++) y[j * oh * ow] = llmserve_conv_post(p, g * mg + j, acc[j]);
			}
		}
	}
	if (acc != acc_stack) free(acc);
}

static struct ggml_tensor * llmserve_conv_node(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ow, int64_t oh, int64_t m, void * ud) {
	struct ggml_tensor * args[1] = {a};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, ow, oh, m, a->ne[3], args, 1, llmserve_conv_op, GGML_N_TASKS_MAX, ud);
}

// llmserve_affine_op: y = x * scale[c] + shift[c] for channel c (ggml's
// dimension 2), a folded BatchNormalization; with relu, then max(y, 0)
// keeping NaN as llmserve_relu does (a Relu that alone reads the
// BatchNormalization, done in the same pass instead of a second one).
typedef struct {
	int64_t channels;
	float * scale;
	float * shift;
	int32_t relu;
} llmserve_affine;

static void llmserve_affine_op(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth, void * ud) {
	const llmserve_affine * p = ud;
	const int64_t inner = a->ne[0] * a->ne[1];
	const int64_t planes = a->ne[2] * a->ne[3];
	int64_t lo, hi;
	llmserve_share(planes, ith, nth, &lo, &hi);
	for (int64_t pl = lo; pl < hi; pl++) {
		const int64_t c = pl % p->channels;
		const float * x = (const float *)a->data + pl * inner;
		float * y = (float *)dst->data + pl * inner;
		const float s = p->scale[c], t = p->shift[c];
		if (p->relu) {
			for (int64_t i = 0; i < inner; i++) {
				const float v = x[i] * s + t;
				y[i] = (v > 0.0f || isnan(v)) ? v : 0.0f;
			}
		} else {
			for (int64_t i = 0; i < inner; i++) y[i] = x[i] * s + t;
		}
	}
}

static struct ggml_tensor * llmserve_pool_node(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ow, int64_t oh, void * ud) {
	struct ggml_tensor * args[1] = {a};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, ow, oh, a->ne[2], a->ne[3], args, 1, llmserve_pool_op, GGML_N_TASKS_MAX, ud);
}

static struct ggml_tensor * llmserve_affine_node(struct ggml_context * ctx, struct ggml_tensor * a, void * ud) {
	return ggml_map_custom1(ctx, a, llmserve_affine_op, GGML_N_TASKS_MAX, ud);
}
*/
import "C"

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/llmserve/llmserve/engine/graph"
)

// directConvMaxWeights is the most weights a Conv without groups may have
// to run as the direct kernel (llmserve_conv_op) rather than as im2col
// and mul_mat. A small convolution (the MNIST-sized CNN's 8×1×3×3,
// 16×8×3×3 and 16×16×1×1) spends its time in im2col's copy, the permute
// back and mul_mat over rows of 9 to 72 values (too short for ggml's
// sgemm, which leaves them to vec_dot); the direct kernel reads the input
// in place. A large one (ResNet's 64×64×3×3 and up) has the work that a
// matrix product's tiling pays for. Measured in docs/BENCHMARKS.md
// ("Tensor models as exporters write them").
const directConvMaxWeights = 4096

// prepareCNN copies the parameters of a grouped or small Conv, a pooling, a
// BatchNormalization (folded to a scale and shift per channel) node into
// C memory. A BatchNormalization or Relu that alone reads a direct
// Conv's output is applied by the Conv's kernel as it stores each output
// (llmserve_conv_post), and a Relu that alone reads a BatchNormalization
// by its affine kernel: one pass over the planes instead of two or three.
// Those nodes pass their input on (folded).
func (p *nodeParams) prepareCNN(g *graph.Checked, n *graph.Node) error {
	if n.Op == "Relu" {
		if c := p.directConv(g, n); c != nil {
			c.post_relu = 1
			p.folded[n] = true
		}
		return nil
	}
	if !graph.FileOp(n.Op) {
		return nil
	}
	switch n.Op {
	case "MaxPool", "AveragePool", "GlobalAveragePool":
		w, err := graph.PoolWindow(n, g.Values[n.Inputs[0]].Shape)
		if err != nil {
			return err
		}
		c := (*C.llmserve_pool)(p.alloc(C.sizeof_llmserve_pool))
		c.kh, c.kw, c.sh, c.sw = C.int64_t(w.KH), C.int64_t(w.KW), C.int64_t(w.SH), C.int64_t(w.SW)
		c.dh, c.dw, c.pad_t, c.pad_l = C.int64_t(w.DH), C.int64_t(w.DW), C.int64_t(w.PadT), C.int64_t(w.PadL)
		c.is_max = cBool(n.Op == "MaxPool")
		c.include_pad = cBool(n.Int("count_include_pad", 0) != 0)
		p.byNode[n] = unsafe.Pointer(c)
	case "Conv":
		group := n.Int("group", 1)
		if group == 1 && len(g.Values[n.Inputs[1]].Const.F32) > directConvMaxWeights {
			return nil // im2col and mul_mat
		}
		x := g.Values[n.Inputs[0]]
		w, err := graph.ConvWindow(g, n, x.Shape)
		if err != nil {
			return err
		}
		c := (*C.llmserve_conv)(p.alloc(C.sizeof_llmserve_conv))
		c.kh, c.kw, c.sh, c.sw = C.int64_t(w.KH), C.int64_t(w.KW), C.int64_t(w.SH), C.int64_t(w.SW)
		c.dh, c.dw, c.pad_t, c.pad_l = C.int64_t(w.DH), C.int64_t(w.DW), C.int64_t(w.PadT), C.int64_t(w.PadL)
		wt := g.Values[n.Inputs[1]]
		c.group, c.m = C.int64_t(group), C.int64_t(wt.Shape[0])
		c.wt = (*C.float)(cCopy(p, convWeights(wt.Const.F32, wt.Shape, int64(group))))
		c.padded = cBool(!slices.ContainsFunc(wt.Const.F32, func(v float32) bool { return math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) }))
		if len(n.Inputs) > 2 && n.Inputs[2] != "" {
			c.bias = (*C.float)(cCopy(p, g.Values[n.Inputs[2]].Const.F32))
		}
		p.byNode[n] = unsafe.Pointer(c)
	case "BatchNormalization":
		in := func(i int) []float32 { return g.Values[n.Inputs[i]].Const.F32 }
		s, t := graph.BatchNormFold(n, in(1), in(2), in(3), in(4))
		scale, shift := (*C.float)(cCopy(p, s)), (*C.float)(cCopy(p, t))
		relu := C.int32_t(0)
		if r := onlyReader(g, n.Outputs[0]); r != nil && r.Op == "Relu" {
			relu = 1
			p.folded[r] = true
		}
		if c := p.directConv(g, n); c != nil {
			c.post_scale, c.post_shift, c.post_relu = scale, shift, relu
			p.folded[n] = true
			return nil
		}
		c := (*C.llmserve_affine)(p.alloc(C.sizeof_llmserve_affine))
		c.channels = C.int64_t(len(s))
		c.scale, c.shift, c.relu = scale, shift, relu
		p.byNode[n] = unsafe.Pointer(c)
	}
	return nil
}

// directConv returns the parameters of the direct Conv kernel whose output
// n alone reads, when n is the first node after it to be folded into it
// (none yet: a BatchNormalization, or a Relu with no BatchNormalization
// before it), nil otherwise.
func (p *nodeParams) directConv(g *graph.Checked, n *graph.Node) *C.llmserve_conv {
	if len(n.Inputs) == 0 || onlyReader(g, n.Inputs[0]) != n {
		return nil
	}
	for i := range g.Nodes {
		prod := &g.Nodes[i]
		if prod.Op != "Conv" || len(prod.Outputs) == 0 || prod.Outputs[0] != n.Inputs[0] {
			continue
		}
		ud := p.byNode[prod]
		if ud == nil {
			return nil // im2col and mul_mat
		}
		c := (*C.llmserve_conv)(ud)
		if c.post_scale != nil || c.post_relu != 0 {
			return nil
		}
		return c
	}
	return nil
}

// onlyReader returns the one node that reads value name, nil when another
// node or the graph's outputs read it too, or none does.
func onlyReader(g *graph.Checked, name string) *graph.Node {
	if slices.ContainsFunc(g.Outputs, func(v graph.Value) bool { return v.Name == name }) {
		return nil
	}
	var reader *graph.Node
	for i := range g.Nodes {
		for _, in := range g.Nodes[i].Inputs {
			if in != name {
				continue
			}
			if reader != nil {
				return nil
			}
			reader = &g.Nodes[i]
		}
	}
	return reader
}

// convWeights reorders Conv weights [m][channels/group][kh][kw] into the
// direct kernel's [group][channels/group][kh][kw][m/group].
func convWeights(w []float32, shape []int64, group int64) []float32 {
	m, cg, kk := shape[0], shape[1], shape[2]*shape[3]
	mg := m / group
	out := make([]float32, len(w))
	for o := range m {
		g, j := o/mg, o%mg
		for cj := range cg {
			for k := range kk {
				out[((g*cg+cj)*kk+k)*mg+j] = w[(o*cg+cj)*kk+k]
			}
		}
	}
	return out
}

// cnnNode builds a CNN node on its [rows, channels, height, width] input
// (BatchNormalization: any rank).
func (bl *builder) cnnNode(n *graph.Node) (gval, error) {
	ctx := bl.ctx
	x, err := bl.value(n.Inputs[0])
	if err != nil {
		return gval{}, err
	}
	out := bl.actual(bl.m.g.Values[n.Outputs[0]].Shape)
	xt := bl.contiguous(x.t)
	ud := bl.m.params.byNode[n]
	switch n.Op {
	case "Conv":
		if ud != nil { // group > 1, or small: the direct kernel
			return gval{C.llmserve_conv_node(ctx, xt, C.int64_t(out[3]), C.int64_t(out[2]), C.int64_t(out[1]), ud), out}, nil
		}
		return bl.conv(n, x, out)
	case "BatchNormalization":
		if bl.m.params.folded[n] {
			return x, nil // its Conv applied it
		}
		if len(x.shape) != 4 {
			// The affine kernel reads channels as ggml's dimension 2.
			shape := append(append([]int64{}, x.shape...), 1, 1, 1)[:4]
			xt = bl.reshape(gval{xt, x.shape}, shape).t
		}
		t := C.llmserve_affine_node(ctx, xt, ud)
		return bl.reshape(gval{t, out}, out), nil
	case "MaxPool", "AveragePool", "GlobalAveragePool":
		return gval{C.llmserve_pool_node(ctx, xt, C.int64_t(out[3]), C.int64_t(out[2]), ud), out}, nil
	}
	return gval{}, fmt.Errorf("operator %s: %w", n.Op, graph.ErrUnsupported)
}

// conv is a 2-D convolution as ggml_conv_2d builds it, in F32: the input
// unfolded (im2col) into one row of channels × kernel cells per output
// pixel, multiplied by the weights [out channels][channels × kernel]. The
// weights are mul_mat's first operand, so that (as for MatMul) the
// arithmetic of each output does not depend on the batch size. Unequal
// pads are applied beforehand (ggml_pad_ext), im2col's are symmetric.
func (bl *builder) conv(n *graph.Node, x gval, out []int64) (gval, error) {
	ctx := bl.ctx
	win, err := graph.ConvWindow(bl.m.g, n, x.shape)
	if err != nil {
		return gval{}, err
	}
	w, err := bl.weight(n.Inputs[1], "")
	if err != nil {
		return gval{}, err
	}
	xt := bl.contiguous(x.t)
	p0, p1 := C.int(win.PadL), C.int(win.PadT)
	if win.PadL != win.PadR || win.PadT != win.PadB {
		xt = C.ggml_pad_ext(ctx, xt, C.int(win.PadL), C.int(win.PadR), C.int(win.PadT), C.int(win.PadB), 0, 0, 0, 0)
		p0, p1 = 0, 0
	}
	im := C.ggml_im2col(ctx, w.t, xt, C.int(win.SW), C.int(win.SH), p0, p1, C.int(win.DW), C.int(win.DH), true, C.GGML_TYPE_F32)
	k := w.shape[1] * w.shape[2] * w.shape[3]
	m := w.shape[0]
	im2 := C.ggml_reshape_2d(ctx, im, C.int64_t(k), C.int64_t(win.OutW*win.OutH*bl.rows))
	w2 := C.ggml_reshape_2d(ctx, w.t, C.int64_t(k), C.int64_t(m))
	y := bl.mulMat(w2, im2) // [rows·OH·OW][M]
	y = C.ggml_reshape_4d(ctx, y, C.int64_t(m), C.int64_t(win.OutW), C.int64_t(win.OutH), C.int64_t(bl.rows))
	y = C.ggml_cont(ctx, C.ggml_permute(ctx, y, 2, 0, 1, 3))
	v := gval{y, out}
	if len(n.Inputs) > 2 && n.Inputs[2] != "" {
		b, err := bl.weight(n.Inputs[2], "")
		if err != nil {
			return gval{}, err
		}
		v = gval{bl.binary("Add", v, gval{b.t, []int64{m, 1, 1}}, out), out}
	}
	return v, nil
}
