// The row kernels of llmserve_conv_padded (conv.go) for one vector
// width, included once per width: by conv.go with 8 lanes (AVX2), by
// conv_wide.go with 16 (AVX-512F, under its target pragma). Each output is
// its bias plus, in the reference's order (input channel, ky, kx), each
// tap's input times weight, rounded after each multiply and each add (no
// fused multiply-add): the width decides how many outputs an instruction
// computes, never how one is summed, so both widths give the same bits.
//
// The includer defines:
//   LLMS_W           the lanes of a vector (8 or 16)
//   LLMS_V, LLMS_VI  the float and int32 vector types of LLMS_W lanes
//   LLMS_SPLAT(x)    a vector of LLMS_W x's (x a variable), as an
//                    initializer list (a loop over the lanes compiles to a
//                    masked insert a lane)
//   LLMS_FN(name)    the kernels' names
//   LLMS_TMAX, LLMS_NVMAX  the most pixels and channel vectors of a tile

// LLMS_FN(vpost) is llmserve_conv_post on LLMS_W outputs of channel c.
static inline LLMS_V LLMS_FN(vpost)(const llmserve_conv * p, int64_t c, LLMS_V v) {
	if (p->post_scale) {
		const float s = p->post_scale[c], t = p->post_shift[c];
		v = v * (LLMS_V)LLMS_SPLAT(s) + (LLMS_V)LLMS_SPLAT(t);
	}
	if (p->post_relu) v = (LLMS_V)((LLMS_VI)v & ((v > 0.0f) | (v != v)));
	return v;
}

// LLMS_FN(xrow) computes output row oy of padded image xp for a stride of
// 1 and rows of LLMS_W pixels or more: LLMS_W neighbouring pixels of a row
// to a vector, loaded from the padded input as they lie, 8 output
// channels at once (8 accumulators, each tap's 8 weights broadcast), each
// vector stored where its channel's row is. A row whose width is not a
// multiple of LLMS_W ends with a vector that overlaps the one before (its
// pixels computed twice, to the same values).
static void LLMS_FN(xrow)(const llmserve_conv * p, const float * xp, int64_t ph, int64_t pw, int64_t cg, int64_t mg, int64_t oy, int64_t ow, float * yb, int64_t plane) {
	const int64_t kh = p->kh, kw = p->kw, dw = p->dw;
	for (int64_t g = 0; g < p->group; g++) {
		const float * w = p->wt + g * cg * kh * kw * mg;
		for (int64_t jb = 0; jb < mg; jb += 8) {
			for (int64_t ox0 = 0; ox0 < ow; ox0 += LLMS_W) {
				const int64_t ox = ox0 + LLMS_W <= ow ? ox0 : ow - LLMS_W;
				LLMS_V acc[8];
				for (int j = 0; j < 8; j++) {
					const float b = p->bias ? p->bias[g * mg + jb + j] : 0.0f;
					acc[j] = (LLMS_V)LLMS_SPLAT(b);
				}
				for (int64_t cj = 0; cj < cg; cj++) {
					const float * x = xp + (g * cg + cj) * ph * pw + oy * p->sh * pw + ox;
					for (int64_t ky = 0; ky < kh; ky++) {
						const float * xr = x + ky * p->dh * pw;
						for (int64_t kx = 0; kx < kw; kx++) {
							LLMS_V xv;
							memcpy(&xv, xr + kx * dw, sizeof xv);
							const float * wk = w + ((cj * kh + ky) * kw + kx) * mg + jb;
							for (int j = 0; j < 8; j++) acc[j] += xv * wk[j];
						}
					}
				}
				for (int j = 0; j < 8; j++) {
					const LLMS_V v = LLMS_FN(vpost)(p, g * mg + jb + j, acc[j]);
					memcpy(yb + (g * mg + jb + j) * plane + oy * ow + ox, &v, sizeof v);
				}
			}
		}
	}
}

// LLMS_FN(ptile) computes T neighbouring pixels of a row (the input read
// with stride SW, or p->sw when SW is 0) by NV vectors of LLMS_W output
// channels: T * NV accumulators, independent chains of adds, each weight
// vector loaded once for the T pixels and each input cell broadcast once
// for the NV vectors.
static inline __attribute__((always_inline)) void LLMS_FN(ptile)(const llmserve_conv * p, const float * xp, int64_t ph, int64_t pw, int64_t g, int64_t cg, int64_t mg, int64_t oy, int64_t ox, float * yb, int64_t plane, int64_t ow, const int T, const int NV, const int SW) {
	const int64_t kh = p->kh, kw = p->kw, sw = SW > 0 ? SW : p->sw, dw = p->dw;
	const float * w = p->wt + g * cg * kh * kw * mg;
	LLMS_V acc[LLMS_TMAX][LLMS_NVMAX]; // [pixel][vector]
	for (int i = 0; i < NV; i++) {
		LLMS_V b0 = {0};
		if (p->bias) memcpy(&b0, p->bias + g * mg + LLMS_W * i, sizeof b0);
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
					LLMS_V wv;
					memcpy(&wv, wk + LLMS_W * i, sizeof wv);
					for (int t = 0; t < T; t++) acc[t][i] += xc[t * sw] * wv;
				}
			}
		}
	}
	for (int i = 0; i < NV; i++) {
		for (int l = 0; l < LLMS_W; l++) {
			float * y = yb + (g * mg + LLMS_W * i + l) * plane + oy * ow + ox;
			for (int t = 0; t < T; t++) y[t] = llmserve_conv_post(p, g * mg + LLMS_W * i + l, acc[t][i][l]);
		}
	}
}

// LLMS_FN(prow) computes output row oy of every group in tiles of T
// pixels (T <= ow, T <= LLMS_TMAX, NV <= LLMS_NVMAX), the last one
// overlapping the one before where T does not divide the row.
static inline __attribute__((always_inline)) void LLMS_FN(prow)(const llmserve_conv * p, const float * xp, int64_t ph, int64_t pw, int64_t cg, int64_t mg, int64_t oy, int64_t ow, float * yb, int64_t plane, const int T, const int NV) {
	for (int64_t g = 0; g < p->group; g++) {
		for (int64_t ox = 0; ox < ow; ox += T) {
			const int64_t o = ox + T <= ow ? ox : ow - T;
			if (p->sw == 1) LLMS_FN(ptile)(p, xp, ph, pw, g, cg, mg, oy, o, yb, plane, ow, T, NV, 1);
			else if (p->sw == 2) LLMS_FN(ptile)(p, xp, ph, pw, g, cg, mg, oy, o, yb, plane, ow, T, NV, 2);
			else LLMS_FN(ptile)(p, xp, ph, pw, g, cg, mg, oy, o, yb, plane, ow, T, NV, 0);
		}
	}
}
