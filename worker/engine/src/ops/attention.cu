// Causal multi-head self-attention (`transformer.rs`) on a CUDA GPU, in f32, in tiles: no
// [B, h, T, T] buffer of weights, flash-attention's online softmax, every value computed by one
// thread in a fixed order (so the bits repeat run to run and on every GPU of one class).
//
// Layout: `qkv` is [B, T, 3d] (each row: h heads of dh query columns, then the keys', then the
// values'); `y` and `dy` are [B, T, d]; `dqkv` is `qkv`'s shape. A block is 64 threads, one per
// query row (forward, statistics, ∂q) or one per key row (∂k, ∂v), of one sample's head
// (grid: x = sample·h + head, y = the block of 64 rows). The other side's rows come through shared
// memory in tiles of BC rows, in ascending order, and every thread reads the same row at a time
// (a broadcast). A thread keeps its own rows in registers, `C` columns wide: the kernels come in
// widths C = 32, 64, 128 and 256 for any dh ≤ C, the columns past dh held at zero (which adds
// nothing to a dot product: the bits are those of a kernel exactly dh wide).
//
// Arithmetic: a dot product runs over the columns in four interleaved partial sums (column c into
// sum c mod 4, fused multiply-adds), added as (s0 + s1) + (s2 + s3); a score is x = scale·(q·k);
// the softmax is online: m the largest x so far, each new one rescales the running sums by
// exp(m − x). The exponential is `elementary.cuh`'s. These are not the CPU's bits (its dot products
// come from gemm, its softmax takes the whole row at once), but they are within f32 rounding of
// them (the `on_a_gpu_attention_*` tests).
#include "elementary.cuh"

typedef unsigned long long u64;

#define ERGON_ROWS 64

// One sample's head: where its rows start in `qkv` and in `y`/`dy`, and the sizes.
struct ErgonHead {
    const float *qkv;  // query row 0 of this head (keys at +d, values at +2d); rows 3d apart
    u64 out;           // offset of row 0 of this head in y / dy (rows d apart)
    u64 stat;          // offset of row 0 of this head in the per-row statistics (B·h·T)
    unsigned t, d, dh;
    float scale;
};

__device__ __forceinline__ ErgonHead ergon_head(const float *qkv, unsigned t, unsigned d, unsigned h, float scale) {
    ErgonHead g;
    u64 b = blockIdx.x / h;
    unsigned head = blockIdx.x % h;
    g.dh = d / h;
    g.qkv = qkv + b * t * 3 * d + head * g.dh;
    g.out = b * t * d + head * g.dh;
    g.stat = (u64)blockIdx.x * t;
    g.t = t;
    g.d = d;
    g.scale = scale;
    return g;
}

// A row of `dh` values (zeros past dh, or everywhere if `live` is false) into registers.
template <int C>
__device__ __forceinline__ void ergon_load_row(float (&r)[C], const float *row, unsigned dh, bool live) {
#pragma unroll
    for (int c = 0; c < C; c++) r[c] = (live && c < dh) ? row[c] : 0.0f;
}

// The first dh values of a row in registers out to memory (unrolled: a register array indexed at
// run time would live in local memory).
template <int C>
__device__ __forceinline__ void ergon_store_row(float *row, const float (&r)[C], unsigned dh) {
#pragma unroll
    for (int c = 0; c < C; c++)
        if (c < dh) row[c] = r[c];
}

// Rows first..first+BC of a [T, stride] matrix (columns 0..dh) into a shared [BC, C] tile; rows
// past T and columns past dh are zeros. All threads of the block take part.
template <int C, int BC>
__device__ __forceinline__ void ergon_load_tile(
    float *tile, const float *rows, u64 stride, unsigned first, unsigned t, unsigned dh) {
    for (unsigned k = threadIdx.x; k < BC * C; k += blockDim.x) {
        unsigned r = k / C, c = k % C, i = first + r;
        tile[k] = (i < t && c < dh) ? rows[(u64)i * stride + c] : 0.0f;
    }
}

// Σ_c a[c]·b[c] for a row in registers and one in shared memory (16-byte aligned), in four
// interleaved partial sums.
template <int C>
__device__ __forceinline__ float ergon_dot4(const float (&a)[C], const float *b) {
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma unroll
    for (int c = 0; c < C; c += 4) {
        float4 v = *reinterpret_cast<const float4 *>(b + c);
        s0 = __fmaf_rn(a[c], v.x, s0);
        s1 = __fmaf_rn(a[c + 1], v.y, s1);
        s2 = __fmaf_rn(a[c + 2], v.z, s2);
        s3 = __fmaf_rn(a[c + 3], v.w, s3);
    }
    return __fadd_rn(__fadd_rn(s0, s1), __fadd_rn(s2, s3));
}

// acc[c] += w · b[c] (b in shared memory).
template <int C>
__device__ __forceinline__ void ergon_axpy(float (&acc)[C], float w, const float *b) {
#pragma unroll
    for (int c = 0; c < C; c += 4) {
        float4 v = *reinterpret_cast<const float4 *>(b + c);
        acc[c] = __fmaf_rn(w, v.x, acc[c]);
        acc[c + 1] = __fmaf_rn(w, v.y, acc[c + 1]);
        acc[c + 2] = __fmaf_rn(w, v.z, acc[c + 2]);
        acc[c + 3] = __fmaf_rn(w, v.w, acc[c + 3]);
    }
}

template <int C>
__device__ __forceinline__ void ergon_scale_row(float (&acc)[C], float by) {
#pragma unroll
    for (int c = 0; c < C; c++) acc[c] = __fmul_rn(acc[c], by);
}

// Forward: y_i = Σ_{j ≤ i} softmax_j(x_ij) · v_j, a thread per query.
template <int C, int BC>
__device__ void ergon_flash_forward(const float *qkv, float *y, unsigned t, unsigned d, unsigned h, float scale) {
    __shared__ __align__(16) float ks[BC * C];
    __shared__ __align__(16) float vs[BC * C];
    ErgonHead g = ergon_head(qkv, t, d, h, scale);
    const unsigned first = blockIdx.y * ERGON_ROWS, i = first + threadIdx.x;
    const bool live = i < t;
    const u64 stride = 3 * (u64)d;
    float q[C], o[C];
    ergon_load_row<C>(q, g.qkv + (u64)i * stride, g.dh, live);
#pragma unroll
    for (int c = 0; c < C; c++) o[c] = 0.0f;
    float m = 0.0f, l = 0.0f;
    const unsigned end = min(t, first + ERGON_ROWS);
    for (unsigned j0 = 0; j0 < end; j0 += BC) {
        __syncthreads();
        ergon_load_tile<C, BC>(ks, g.qkv + d, stride, j0, t, g.dh);
        ergon_load_tile<C, BC>(vs, g.qkv + 2 * (u64)d, stride, j0, t, g.dh);
        __syncthreads();
        for (unsigned r = 0; r < BC; r++) {
            unsigned j = j0 + r;
            if (!live || j > i) break;
            float x = __fmul_rn(ergon_dot4<C>(q, ks + r * C), g.scale);
            if (j == 0) {
                m = x;
            } else if (x > m) {
                float alpha = ergon_exp(__fsub_rn(m, x));
                l = __fmul_rn(l, alpha);
                ergon_scale_row<C>(o, alpha);
                m = x;
            }
            float p = ergon_exp(__fsub_rn(x, m));
            l = __fadd_rn(l, p);
            ergon_axpy<C>(o, p, vs + r * C);
        }
    }
    if (live) {
#pragma unroll
        for (int c = 0; c < C; c++) o[c] = __fdiv_rn(o[c], l);
        ergon_store_row<C>(y + g.out + (u64)i * d, o, g.dh);
    }
}

// Backward, first pass, a thread per query: the row's largest score m, its softmax denominator l
// (so p_ij = exp(x_ij − m)/l) and D = Σ_j p_ij·∂p_ij with ∂p_ij = ∂y_i·v_j, into stats[0..3][row].
template <int C, int BC>
__device__ void ergon_flash_stats(
    const float *qkv, const float *dy, float *stats, unsigned t, unsigned d, unsigned h, float scale, u64 rows) {
    __shared__ __align__(16) float ks[BC * C];
    __shared__ __align__(16) float vs[BC * C];
    ErgonHead g = ergon_head(qkv, t, d, h, scale);
    const unsigned first = blockIdx.y * ERGON_ROWS, i = first + threadIdx.x;
    const bool live = i < t;
    const u64 stride = 3 * (u64)d;
    float q[C], dyi[C];
    ergon_load_row<C>(q, g.qkv + (u64)i * stride, g.dh, live);
    ergon_load_row<C>(dyi, dy + g.out + (u64)i * d, g.dh, live);
    float m = 0.0f, l = 0.0f, acc = 0.0f;
    const unsigned end = min(t, first + ERGON_ROWS);
    for (unsigned j0 = 0; j0 < end; j0 += BC) {
        __syncthreads();
        ergon_load_tile<C, BC>(ks, g.qkv + d, stride, j0, t, g.dh);
        ergon_load_tile<C, BC>(vs, g.qkv + 2 * (u64)d, stride, j0, t, g.dh);
        __syncthreads();
        for (unsigned r = 0; r < BC; r++) {
            unsigned j = j0 + r;
            if (!live || j > i) break;
            float x = __fmul_rn(ergon_dot4<C>(q, ks + r * C), g.scale);
            if (j == 0) {
                m = x;
            } else if (x > m) {
                float alpha = ergon_exp(__fsub_rn(m, x));
                l = __fmul_rn(l, alpha);
                acc = __fmul_rn(acc, alpha);
                m = x;
            }
            float p = ergon_exp(__fsub_rn(x, m));
            l = __fadd_rn(l, p);
            acc = __fmaf_rn(p, ergon_dot4<C>(dyi, vs + r * C), acc);
        }
    }
    if (live) {
        u64 at = g.stat + i;
        stats[at] = m;
        stats[rows + at] = l;
        stats[2 * rows + at] = __fdiv_rn(acc, l);
    }
}

// p_ij and the score's gradient ∂s_ij = scale·p_ij·(∂p_ij − D_i).
__device__ __forceinline__ float ergon_weight(float x, float m, float l) {
    return __fdiv_rn(ergon_exp(__fsub_rn(x, m)), l);
}

// Backward, ∂q_i = Σ_{j ≤ i} ∂s_ij·k_j, a thread per query.
template <int C, int BC>
__device__ void ergon_flash_dq(
    const float *qkv, const float *dy, const float *stats, float *dqkv, unsigned t, unsigned d, unsigned h,
    float scale, u64 rows) {
    __shared__ __align__(16) float ks[BC * C];
    __shared__ __align__(16) float vs[BC * C];
    ErgonHead g = ergon_head(qkv, t, d, h, scale);
    const unsigned first = blockIdx.y * ERGON_ROWS, i = first + threadIdx.x;
    const bool live = i < t;
    const u64 stride = 3 * (u64)d;
    float q[C], dyi[C], dq[C];
    ergon_load_row<C>(q, g.qkv + (u64)i * stride, g.dh, live);
    ergon_load_row<C>(dyi, dy + g.out + (u64)i * d, g.dh, live);
#pragma unroll
    for (int c = 0; c < C; c++) dq[c] = 0.0f;
    const u64 at = g.stat + i;
    const float m = live ? stats[at] : 0.0f, l = live ? stats[rows + at] : 1.0f;
    const float dd = live ? stats[2 * rows + at] : 0.0f;
    const unsigned end = min(t, first + ERGON_ROWS);
    for (unsigned j0 = 0; j0 < end; j0 += BC) {
        __syncthreads();
        ergon_load_tile<C, BC>(ks, g.qkv + d, stride, j0, t, g.dh);
        ergon_load_tile<C, BC>(vs, g.qkv + 2 * (u64)d, stride, j0, t, g.dh);
        __syncthreads();
        for (unsigned r = 0; r < BC; r++) {
            unsigned j = j0 + r;
            if (!live || j > i) break;
            float p = ergon_weight(__fmul_rn(ergon_dot4<C>(q, ks + r * C), g.scale), m, l);
            float dp = ergon_dot4<C>(dyi, vs + r * C);
            float ds = __fmul_rn(__fmul_rn(g.scale, p), __fsub_rn(dp, dd));
            ergon_axpy<C>(dq, ds, ks + r * C);
        }
    }
    if (live) ergon_store_row<C>(dqkv + (g.qkv - qkv) + (u64)i * stride, dq, g.dh);
}

// Backward, ∂k_j = Σ_{i ≥ j} ∂s_ij·q_i and ∂v_j = Σ_{i ≥ j} p_ij·∂y_i, a thread per key; `values`
// picks which (two kernels: a thread holding both rows and both sums would spill its registers).
template <int C, int BC, bool values>
__device__ void ergon_flash_dkv(
    const float *qkv, const float *dy, const float *stats, float *dqkv, unsigned t, unsigned d, unsigned h,
    float scale, u64 rows) {
    __shared__ __align__(16) float qs[BC * C];
    __shared__ __align__(16) float dys[BC * C];
    __shared__ float ms[BC], ls[BC], ds_[BC];
    ErgonHead g = ergon_head(qkv, t, d, h, scale);
    const unsigned first = blockIdx.y * ERGON_ROWS, j = first + threadIdx.x;
    const bool live = j < t;
    const u64 stride = 3 * (u64)d;
    float k[C], v[C], acc[C];
    ergon_load_row<C>(k, g.qkv + d + (u64)j * stride, g.dh, live);
    if (!values) ergon_load_row<C>(v, g.qkv + 2 * (u64)d + (u64)j * stride, g.dh, live);
#pragma unroll
    for (int c = 0; c < C; c++) acc[c] = 0.0f;
    for (unsigned i0 = first; i0 < t; i0 += BC) {
        __syncthreads();
        ergon_load_tile<C, BC>(qs, g.qkv, stride, i0, t, g.dh);
        ergon_load_tile<C, BC>(dys, dy + g.out, d, i0, t, g.dh);
        for (unsigned r = threadIdx.x; r < BC; r += blockDim.x) {
            bool in = i0 + r < t;
            u64 at = g.stat + i0 + r;
            ms[r] = in ? stats[at] : 0.0f;
            ls[r] = in ? stats[rows + at] : 1.0f;
            ds_[r] = in ? stats[2 * rows + at] : 0.0f;
        }
        __syncthreads();
        for (unsigned r = 0; r < BC; r++) {
            unsigned i = i0 + r;
            if (!live || i >= t) break;
            if (i < j) continue;
            float p = ergon_weight(__fmul_rn(ergon_dot4<C>(k, qs + r * C), g.scale), ms[r], ls[r]);
            if (values) {
                ergon_axpy<C>(acc, p, dys + r * C);
            } else {
                float dp = ergon_dot4<C>(v, dys + r * C);
                float ds = __fmul_rn(__fmul_rn(g.scale, p), __fsub_rn(dp, ds_[r]));
                ergon_axpy<C>(acc, ds, qs + r * C);
            }
        }
    }
    if (live) ergon_store_row<C>(dqkv + (g.qkv - qkv) + (values ? 2 : 1) * (u64)d + (u64)j * stride, acc, g.dh);
}

// The kernels, per width C (and its tile height BC: 32 rows, 16 for the widest, within 48 KB of
// shared memory).
#define ERGON_ATTENTION(C, BC)                                                                           \
    extern "C" __global__ void __launch_bounds__(ERGON_ROWS) ergon_flash_forward_c##C(                     \
        const float *qkv, float *y, unsigned t, unsigned d, unsigned h, float scale) {                     \
        ergon_flash_forward<C, BC>(qkv, y, t, d, h, scale);                                                \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(ERGON_ROWS) ergon_flash_stats_c##C(                       \
        const float *qkv, const float *dy, float *stats, unsigned t, unsigned d, unsigned h, float scale,  \
        u64 rows) {                                                                                        \
        ergon_flash_stats<C, BC>(qkv, dy, stats, t, d, h, scale, rows);                                    \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(ERGON_ROWS) ergon_flash_dq_c##C(                          \
        const float *qkv, const float *dy, const float *stats, float *dqkv, unsigned t, unsigned d,        \
        unsigned h, float scale, u64 rows) {                                                               \
        ergon_flash_dq<C, BC>(qkv, dy, stats, dqkv, t, d, h, scale, rows);                                 \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(ERGON_ROWS) ergon_flash_dk_c##C(                          \
        const float *qkv, const float *dy, const float *stats, float *dqkv, unsigned t, unsigned d,        \
        unsigned h, float scale, u64 rows) {                                                               \
        ergon_flash_dkv<C, BC, false>(qkv, dy, stats, dqkv, t, d, h, scale, rows);                         \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(ERGON_ROWS) ergon_flash_dv_c##C(                          \
        const float *qkv, const float *dy, const float *stats, float *dqkv, unsigned t, unsigned d,        \
        unsigned h, float scale, u64 rows) {                                                               \
        ergon_flash_dkv<C, BC, true>(qkv, dy, stats, dqkv, t, d, h, scale, rows);                           \
    }

ERGON_ATTENTION(32, 32)
ERGON_ATTENTION(64, 32)
ERGON_ATTENTION(128, 32)
ERGON_ATTENTION(256, 16)
