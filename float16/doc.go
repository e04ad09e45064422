// Package float16 converts between float32 and IEEE 754 half precision
// (binary16), held as its 16 bits in a uint16. It is the one home of that
// conversion: the V2 protocol's FP16 tensors (api/v2/infer) and the GGUF
// files evals/synth writes (F16 tensors, Q8_0 block scales) both use it.
// It is pure Go and imports nothing of the server's.
//
// FromFloat32 rounds to nearest with ties to even, as ggml's
// GGML_FP32_TO_FP16 (F16C's vcvtps2ph) does; values beyond the half range
// become infinities and NaN stays NaN (quiet). ToFloat32 is exact. Every
// half that is not NaN survives FromFloat32(ToFloat32(h)).
package float16
