// The parameters of the CNN kernels (conv.go) and the wider kernels that
// take their rows on processors with AVX-512 (conv_wide.go): one
// definition for the two cgo preambles.

#ifndef LLMSERVE_CNN_H
#define LLMSERVE_CNN_H

#include <stdint.h>

// A convolution for llmserve_conv_op.
typedef struct {
	int64_t kh, kw, sh, sw, dh, dw, pad_t, pad_l;
	int64_t group, m; // groups, output channels
	float * wt;       // [group][channels / group][kh][kw][m / group]
	float * bias;     // NULL: none
	int32_t padded;   // the weights are finite: llmserve_conv_padded may run
	// What the kernel applies to each output before storing it, in place
	// of the nodes after the Conv that alone read its output (prepareCNN):
	// a BatchNormalization folded to y * scale[c] + shift[c] (NULL:
	// none), then a Relu, max(y, 0) with NaN kept. The same float
	// operations as llmserve_affine_op's, so the same bits.
	float * post_scale;
	float * post_shift;
	int32_t post_relu;
} llmserve_conv;

// llmserve_conv_post is what the kernel stores for output channel c's
// value v.
static inline float llmserve_conv_post(const llmserve_conv * p, int64_t c, float v) {
	if (p->post_scale) v = v * p->post_scale[c] + p->post_shift[c];
	if (p->post_relu) v = (v > 0.0f || v != v) ? v : 0.0f;
	return v;
}

#if defined(__x86_64__) && defined(__GNUC__)
// llmserve_wide_kernels: the processor runs AVX-512F and the wider kernels
// are on (llmserve_wide_init; tests turn them off to compare).
extern int llmserve_wide_kernels;

// llmserve_wconv_row computes output row oy of every group of a padded
// image as llmserve_conv_padded's row kernels would, to the same bits,
// with 16-lane vectors; it returns 0, computing nothing, for a shape it
// has no kernel for.
int llmserve_wconv_row(const llmserve_conv * p, const float * xp, int64_t ph, int64_t pw, int64_t cg, int64_t mg, int64_t oy, int64_t ow, float * yb, int64_t plane);
#endif

#endif
