// The ops' kernels on a CUDA GPU, in f32: the layer norm and the cross-entropy of `dense.rs` and the
// activations of `mod.rs` and `transformer.rs` (the attention's are in `attention.cu`). Each does
// the arithmetic of its CPU twin, one IEEE operation at a time in the same order (`_rn` intrinsics,
// and -fmad=false), each sum in the CPU's order: they give the CPU's bits for the same input. What
// differs between the devices is the matrix products (cuBLAS against gemm) and the attention. A
// thread computes each value alone, in a fixed order, so every kernel repeats its bits run to run.
#include "elementary.cuh"

typedef unsigned long long u64;

#define ERGON_EACH(i, n) \
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < (n); i += (u64)blockDim.x * gridDim.x)

// A row's mean and 1/√(var + eps) (`dense.rs::moments`).
__device__ void ergon_moments(const float *row, unsigned d, float eps, float *mean, float *rstd) {
    float n = (float)d, sum = 0.0f, sq = 0.0f;
    for (unsigned i = 0; i < d; i++) sum = __fadd_rn(sum, row[i]);
    float m = __fdiv_rn(sum, n);
    for (unsigned i = 0; i < d; i++) {
        float c = __fsub_rn(row[i], m);
        sq = __fadd_rn(sq, __fmul_rn(c, c));
    }
    *mean = m;
    *rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sq, n), eps)));
}

// y = (x − mean)·r·γ + β, a thread per row.
extern "C" __global__ void ergon_layer_norm_f32(
    const float *x, const float *gamma, const float *beta, float *y, u64 rows, unsigned d, float eps) {
    ERGON_EACH(r, rows) {
        const float *xr = x + r * d;
        float mean, rstd;
        ergon_moments(xr, d, eps, &mean, &rstd);
        for (unsigned i = 0; i < d; i++) {
            float v = __fmul_rn(__fmul_rn(__fsub_rn(xr[i], mean), rstd), gamma[i]);
            y[r * d + i] = __fadd_rn(v, beta[i]);
        }
    }
}

// ∂x per row (`layer_norm_backward`), and each row's moments for the ∂γ, ∂β pass.
extern "C" __global__ void ergon_layer_norm_dx_f32(
    const float *x, const float *gamma, const float *dy, float *dx, float *moments, u64 rows,
    unsigned d, float eps) {
    ERGON_EACH(r, rows) {
        const float *xr = x + r * d, *dyr = dy + r * d;
        float mean, rstd, g_mean = 0.0f, gx_mean = 0.0f, n = (float)d;
        ergon_moments(xr, d, eps, &mean, &rstd);
        for (unsigned i = 0; i < d; i++) {
            float xhat = __fmul_rn(__fsub_rn(xr[i], mean), rstd);
            float g = __fmul_rn(dyr[i], gamma[i]);
            g_mean = __fadd_rn(g_mean, g);
            gx_mean = __fadd_rn(gx_mean, __fmul_rn(g, xhat));
        }
        g_mean = __fdiv_rn(g_mean, n);
        gx_mean = __fdiv_rn(gx_mean, n);
        for (unsigned i = 0; i < d; i++) {
            float xhat = __fmul_rn(__fsub_rn(xr[i], mean), rstd);
            float g = __fsub_rn(__fsub_rn(__fmul_rn(dyr[i], gamma[i]), g_mean), __fmul_rn(xhat, gx_mean));
            dx[r * d + i] = __fmul_rn(rstd, g);
        }
        moments[2 * r] = mean;
        moments[2 * r + 1] = rstd;
    }
}

// ∂γ and ∂β of one group of `per` rows and one column, in row order: partial[group][0..d] for ∂γ,
// [d..2d] for ∂β (`layer_norm_backward`'s partials).
extern "C" __global__ void ergon_layer_norm_partials_f32(
    const float *x, const float *dy, const float *moments, float *partial, u64 rows, unsigned d,
    unsigned per) {
    u64 groups = (rows + per - 1) / per;
    ERGON_EACH(k, groups * d) {
        u64 group = k / d;
        unsigned i = (unsigned)(k % d);
        float dgamma = 0.0f, dbeta = 0.0f;
        for (u64 r = group * per; r < rows && r < (group + 1) * per; r++) {
            float xhat = __fmul_rn(__fsub_rn(x[r * d + i], moments[2 * r]), moments[2 * r + 1]);
            dgamma = __fadd_rn(dgamma, __fmul_rn(dy[r * d + i], xhat));
            dbeta = __fadd_rn(dbeta, dy[r * d + i]);
        }
        partial[group * 2 * d + i] = dgamma;
        partial[group * 2 * d + d + i] = dbeta;
    }
}

// The partials' column sums in group order (`sum_partials`), into `out` (2d values).
extern "C" __global__ void ergon_sum_partials_f32(const float *partial, float *out, u64 groups, unsigned width) {
    ERGON_EACH(i, (u64)width) {
        float total = 0.0f;
        for (u64 g = 0; g < groups; g++) total = __fadd_rn(total, partial[g * width + i]);
        out[i] = total;
    }
}

// A row's maximum and ln Σ exp(v − max) (`dense.rs::log_sum_exp`).
__device__ void ergon_log_sum_exp(const float *row, unsigned classes, float *max, float *lse) {
    float m = row[0], sum = 0.0f;
    for (unsigned j = 0; j < classes; j++) m = row[j] > m ? row[j] : m;
    for (unsigned j = 0; j < classes; j++) sum = __fadd_rn(sum, ergon_exp(__fsub_rn(row[j], m)));
    *max = m;
    *lse = ergon_ln(sum);
}

// Each row's loss lse − (z[t] − max); a target out of range gives NaN (the host checked them).
extern "C" __global__ void ergon_cross_entropy_rows_f32(
    const float *z, const unsigned *targets, float *losses, u64 rows, unsigned classes) {
    ERGON_EACH(r, rows) {
        const float *row = z + r * classes;
        unsigned t = targets[r];
        float max, lse;
        ergon_log_sum_exp(row, classes, &max, &lse);
        losses[r] = t < classes ? __fsub_rn(lse, __fsub_rn(row[t], max)) : __uint_as_float(0x7fc00000u);
    }
}

// The mean of the rows' losses, summed in order by one thread.
extern "C" __global__ void ergon_mean_f32(const float *losses, float *out, u64 rows) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float sum = 0.0f;
        for (u64 r = 0; r < rows; r++) sum = __fadd_rn(sum, losses[r]);
        out[0] = __fdiv_rn(sum, (float)(rows > 0 ? rows : 1));
    }
}

// scale · (softmax(row) − onehot(target)), a thread per row, with scale = ∂loss / divisor rounded
// from f64 to f32 (as the CPU).
extern "C" __global__ void ergon_cross_entropy_grad_f32(
    const float *z, const unsigned *targets, const float *grad, float *dz, u64 rows, unsigned classes,
    double divisor) {
    float scale = __double2float_rn(__ddiv_rn((double)grad[0], divisor));
    ERGON_EACH(r, rows) {
        const float *row = z + r * classes;
        float *out = dz + r * classes;
        float max, lse;
        ergon_log_sum_exp(row, classes, &max, &lse);
        for (unsigned j = 0; j < classes; j++)
            out[j] = __fmul_rn(ergon_exp(__fsub_rn(__fsub_rn(row[j], max), lse)), scale);
        unsigned t = targets[r];
        if (t < classes) out[t] = __fsub_rn(out[t], scale);
    }
}

// GELU, tanh approximation (`transformer.rs`): tanh(u) = 1 − 2/(exp(2u) + 1).
#define ERGON_SQRT_2_OVER_PI ((float)0.7978845608028654)
#define ERGON_GELU_CUBIC ((float)0.044715)
#define ERGON_GELU_CUBIC3 ((float)(3.0 * 0.044715))

__device__ __forceinline__ float ergon_gelu_tanh(float x) {
    float inner = __fadd_rn(1.0f, __fmul_rn(__fmul_rn(ERGON_GELU_CUBIC, x), x));
    float u = __fmul_rn(__fmul_rn(ERGON_SQRT_2_OVER_PI, x), inner);
    return __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(ergon_exp(__fadd_rn(u, u)), 1.0f)));
}

extern "C" __global__ void ergon_gelu_f32(const float *x, float *y, u64 n) {
    ERGON_EACH(i, n) {
        y[i] = __fmul_rn(__fmul_rn(0.5f, x[i]), __fadd_rn(1.0f, ergon_gelu_tanh(x[i])));
    }
}

extern "C" __global__ void ergon_gelu_grad_f32(const float *x, const float *dy, float *dx, u64 n) {
    ERGON_EACH(i, n) {
        float v = x[i], t = ergon_gelu_tanh(v);
        float inner = __fmul_rn(ERGON_SQRT_2_OVER_PI, __fadd_rn(1.0f, __fmul_rn(__fmul_rn(ERGON_GELU_CUBIC3, v), v)));
        float slope = __fmul_rn(__fmul_rn(__fmul_rn(0.5f, v), __fsub_rn(1.0f, __fmul_rn(t, t))), inner);
        dx[i] = __fmul_rn(dy[i], __fadd_rn(__fmul_rn(0.5f, __fadd_rn(1.0f, t)), slope));
    }
}

// ReLU (`mod.rs`): max(x, 0); the gradient passes where x ≥ 0.
extern "C" __global__ void ergon_relu_f32(const float *x, float *y, u64 n) {
    ERGON_EACH(i, n) { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
}

extern "C" __global__ void ergon_relu_grad_f32(const float *x, const float *dy, float *dx, u64 n) {
    ERGON_EACH(i, n) { dx[i] = x[i] >= 0.0f ? dy[i] : 0.0f; }
}
