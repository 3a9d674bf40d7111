// `exp` and `ln` of `elementary.rs` on a CUDA GPU, step for step: the same f32 constants, the same
// IEEE operations in the same order (the `_rn` intrinsics, never contracted into multiply-adds), the
// same bit manipulations. So they return the CPU's bits for every input.
#pragma once

#define ERGON_LOG2E 1.44269504088896340736f
#define ERGON_LN2_HI (355.0f / 512.0f)
#define ERGON_LN2_LO (-2.1219444e-4f)
#define ERGON_ROUND 12582912.0f

__device__ __forceinline__ float ergon_pow2(int e) { return __uint_as_float((unsigned)(e + 127) << 23); }

__device__ __forceinline__ float ergon_exp(float x) {
    // Rust's clamp: a NaN stays NaN.
    x = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
    float t = __fadd_rn(__fmul_rn(x, ERGON_LOG2E), ERGON_ROUND);
    int k_int = __float_as_int(t) - 0x4b400000;
    float k = __fsub_rn(t, ERGON_ROUND);
    float r = __fsub_rn(__fsub_rn(x, __fmul_rn(k, ERGON_LN2_HI)), __fmul_rn(k, ERGON_LN2_LO));
    float p = 1.9875691e-4f;
    p = __fadd_rn(__fmul_rn(p, r), 1.3981999e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 8.333452e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 4.1665796e-2f);
    p = __fadd_rn(__fmul_rn(p, r), 1.6666665e-1f);
    p = __fadd_rn(__fmul_rn(p, r), 0.5f);
    float e_r = __fadd_rn(__fadd_rn(__fmul_rn(p, __fmul_rn(r, r)), r), 1.0f);
    int half = k_int >> 1;
    return __fmul_rn(__fmul_rn(e_r, ergon_pow2(half)), ergon_pow2(k_int - half));
}

__device__ __forceinline__ float ergon_ln(float x) {
    if (isnan(x) || x < 0.0f) return __uint_as_float(0x7fc00000u);
    if (x == 0.0f) return __uint_as_float(0xff800000u);
    if (x == __uint_as_float(0x7f800000u)) return x;
    int e = 0;
    if (x < 1.17549435e-38f) {
        x = __fmul_rn(x, 8388608.0f);
        e = -23;
    }
    unsigned bits = __float_as_uint(x);
    e += (int)(bits >> 23) - 127;
    float m = __uint_as_float((bits & 0x007fffffu) | 0x3f800000u);
    if (m > 1.41421356237309504880f) {
        m = __fmul_rn(m, 0.5f);
        e += 1;
    }
    float f = __fsub_rn(m, 1.0f);
    float s = __fdiv_rn(f, __fadd_rn(2.0f, f));
    float z = __fmul_rn(s, s);
    float q = 2.0f / 9.0f;
    q = __fadd_rn(__fmul_rn(q, z), 2.0f / 7.0f);
    q = __fadd_rn(__fmul_rn(q, z), 2.0f / 5.0f);
    q = __fadd_rn(__fmul_rn(q, z), 2.0f / 3.0f);
    float ln_m = __fsub_rn(f, __fmul_rn(s, __fsub_rn(f, __fmul_rn(z, q))));
    float ef = (float)e;
    return __fadd_rn(__fmul_rn(ef, ERGON_LN2_HI), __fadd_rn(ln_m, __fmul_rn(ef, ERGON_LN2_LO)));
}
