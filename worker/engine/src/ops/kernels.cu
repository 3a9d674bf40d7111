// The ops' kernels on a CUDA GPU, in f32: the layer norm and the cross-entropy of `dense.rs`, the
// activations of `mod.rs` and `transformer.rs`, and the causal attention of `transformer.rs`.
// All but the attention do the arithmetic of their CPU twins, one IEEE operation at a time in the
// same order (`_rn` intrinsics, and -fmad=false), each sum in the CPU's order: they give the CPU's
// bits for the same input. What differs between the devices is the matrix products (cuBLAS against
// gemm) and the attention's dot products. A thread computes each value alone, in a fixed order, so
// every kernel repeats its bits run to run.
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

// scale · (softmax(row) − onehot(target)), a thread per row.
extern "C" __global__ void ergon_cross_entropy_grad_f32(
    const float *z, const unsigned *targets, float *dz, u64 rows, unsigned classes, float scale) {
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

// Causal multi-head self-attention (`transformer.rs`) from `qkv` ([B, T, 3d]: queries, keys, values,
// each h heads of dh columns). Unlike the kernels above these do not give the CPU's bits: the CPU
// takes its dot products from gemm, whose summation order is its own; here each is a plain loop.
// Every value is computed by one thread in a fixed order, so the results repeat run to run.

// q_i · k_j of one sample's head (raw, unscaled, as the CPU's scores).
__device__ __forceinline__ float ergon_dot(const float *a, const float *b, unsigned n) {
    float s = 0.0f;
    for (unsigned c = 0; c < n; c++) s = __fadd_rn(s, __fmul_rn(a[c], b[c]));
    return s;
}

// Row i's scaled maximum score and the sum of its exponentials (`attention_weights`).
__device__ void ergon_softmax_row(
    const float *base, unsigned i, unsigned d, unsigned head, unsigned dh, float scale, float *max_scaled,
    float *sum) {
    const float *q = base + (u64)i * 3 * d + head * dh;
    float m = ergon_dot(q, base + d + head * dh, dh);
    for (unsigned j = 1; j <= i; j++) {
        float s = ergon_dot(q, base + (u64)j * 3 * d + d + head * dh, dh);
        m = s > m ? s : m;
    }
    float ms = __fmul_rn(m, scale), total = 0.0f;
    for (unsigned j = 0; j <= i; j++) {
        float s = ergon_dot(q, base + (u64)j * 3 * d + d + head * dh, dh);
        total = __fadd_rn(total, ergon_exp(__fsub_rn(__fmul_rn(s, scale), ms)));
    }
    *max_scaled = ms;
    *sum = total;
}

// p_ij from row i's statistics.
__device__ __forceinline__ float ergon_weight(
    const float *base, unsigned i, unsigned j, unsigned d, unsigned head, unsigned dh, float scale,
    float max_scaled, float sum) {
    float s = ergon_dot(base + (u64)i * 3 * d + head * dh, base + (u64)j * 3 * d + d + head * dh, dh);
    return __fdiv_rn(ergon_exp(__fsub_rn(__fmul_rn(s, scale), max_scaled)), sum);
}

// y[b, i, head·dh + c] = Σ_{j ≤ i} p_ij · v_j[c], a thread per output value.
extern "C" __global__ void ergon_attention_f32(
    const float *qkv, float *y, u64 n, unsigned t, unsigned d, unsigned h, float scale) {
    unsigned dh = d / h;
    ERGON_EACH(k, n) {
        unsigned c = k % dh, i = (k / dh) % t, head = (k / ((u64)dh * t)) % h;
        u64 b = k / ((u64)dh * t * h);
        const float *base = qkv + b * t * 3 * d;
        float ms, sum, out = 0.0f;
        ergon_softmax_row(base, i, d, head, dh, scale, &ms, &sum);
        for (unsigned j = 0; j <= i; j++) {
            float p = ergon_weight(base, i, j, d, head, dh, scale, ms, sum);
            out = __fadd_rn(out, __fmul_rn(p, base[(u64)j * 3 * d + 2 * d + head * dh + c]));
        }
        y[(b * t + i) * d + head * dh + c] = out;
    }
}

// ∂p_ij = ∂y_i · v_j over the head's columns.
__device__ __forceinline__ float ergon_dweight(
    const float *base, const float *dy_base, unsigned i, unsigned j, unsigned d, unsigned head, unsigned dh) {
    return ergon_dot(dy_base + (u64)i * d + head * dh, base + (u64)j * 3 * d + 2 * d + head * dh, dh);
}

// Per (sample, head, row i): the scaled maximum, the sum, and Σ_j ∂p_ij·p_ij, into stats[3·row].
extern "C" __global__ void ergon_attention_stats_f32(
    const float *qkv, const float *dy, float *stats, u64 n, unsigned t, unsigned d, unsigned h, float scale) {
    unsigned dh = d / h;
    ERGON_EACH(k, n) {
        unsigned i = k % t, head = (k / t) % h;
        u64 b = k / ((u64)t * h);
        const float *base = qkv + b * t * 3 * d, *dy_base = dy + b * t * d;
        float ms, sum, dot = 0.0f;
        ergon_softmax_row(base, i, d, head, dh, scale, &ms, &sum);
        for (unsigned j = 0; j <= i; j++) {
            float p = ergon_weight(base, i, j, d, head, dh, scale, ms, sum);
            dot = __fadd_rn(dot, __fmul_rn(ergon_dweight(base, dy_base, i, j, d, head, dh), p));
        }
        stats[3 * k] = ms;
        stats[3 * k + 1] = sum;
        stats[3 * k + 2] = dot;
    }
}

// ∂s_ij = scale·p_ij·(∂p_ij − Σ_j' ∂p_ij'·p_ij').
__device__ __forceinline__ float ergon_dscore(
    const float *base, const float *dy_base, const float *row_stats, unsigned i, unsigned j, unsigned d,
    unsigned head, unsigned dh, float scale) {
    float p = ergon_weight(base, i, j, d, head, dh, scale, row_stats[0], row_stats[1]);
    float dp = ergon_dweight(base, dy_base, i, j, d, head, dh);
    return __fmul_rn(__fmul_rn(scale, p), __fsub_rn(dp, row_stats[2]));
}

// ∂q_i[c] = Σ_{j ≤ i} ∂s_ij·k_j[c], a thread per value.
extern "C" __global__ void ergon_attention_dq_f32(
    const float *qkv, const float *dy, const float *stats, float *dqkv, u64 n, unsigned t, unsigned d,
    unsigned h, float scale) {
    unsigned dh = d / h;
    ERGON_EACH(k, n) {
        unsigned c = k % dh, i = (k / dh) % t, head = (k / ((u64)dh * t)) % h;
        u64 b = k / ((u64)dh * t * h), row = (b * h + head) * t + i;
        const float *base = qkv + b * t * 3 * d, *dy_base = dy + b * t * d;
        float out = 0.0f;
        for (unsigned j = 0; j <= i; j++) {
            float ds = ergon_dscore(base, dy_base, stats + 3 * row, i, j, d, head, dh, scale);
            out = __fadd_rn(out, __fmul_rn(ds, base[(u64)j * 3 * d + d + head * dh + c]));
        }
        dqkv[(b * t + i) * 3 * d + head * dh + c] = out;
    }
}

// ∂k_j[c] = Σ_{i ≥ j} ∂s_ij·q_i[c] and ∂v_j[c] = Σ_{i ≥ j} p_ij·∂y_i[c], a thread per value.
extern "C" __global__ void ergon_attention_dkv_f32(
    const float *qkv, const float *dy, const float *stats, float *dqkv, u64 n, unsigned t, unsigned d,
    unsigned h, float scale) {
    unsigned dh = d / h;
    ERGON_EACH(k, n) {
        unsigned c = k % dh, j = (k / dh) % t, head = (k / ((u64)dh * t)) % h;
        u64 b = k / ((u64)dh * t * h), rows = (b * h + head) * t;
        const float *base = qkv + b * t * 3 * d, *dy_base = dy + b * t * d;
        float dk = 0.0f, dv = 0.0f;
        for (unsigned i = j; i < t; i++) {
            const float *st = stats + 3 * (rows + i);
            float ds = ergon_dscore(base, dy_base, st, i, j, d, head, dh, scale);
            dk = __fadd_rn(dk, __fmul_rn(ds, base[(u64)i * 3 * d + head * dh + c]));
            float p = ergon_weight(base, i, j, d, head, dh, scale, st[0], st[1]);
            dv = __fadd_rn(dv, __fmul_rn(p, dy_base[(u64)i * d + head * dh + c]));
        }
        dqkv[(b * t + j) * 3 * d + d + head * dh + c] = dk;
        dqkv[(b * t + j) * 3 * d + 2 * d + head * dh + c] = dv;
    }
}
