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
} llmserve_conv;

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
