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

// Row kernels (layer norm, cross-entropy) sum each row on one thread, in the CPU's order, but read
// and write memory in tiles: a warp holds 32 rows (lane l the l-th), and for each 32 columns its
// lanes load the tile row by row (each load 32 neighbouring values: coalesced), then each lane takes
// its own row's values out of shared memory in column order. Launched with 256 threads a block
// (`gpu::config`): eight warps, 256 rows a block.
#define ERGON_WARPS 8
#define ERGON_TILE 32

// Each warp's group of 32 rows (first row r0), striding over the grid.
#define ERGON_EACH_ROW_GROUP(r0, rows)                                                                \
    for (u64 r0 = ((u64)blockIdx.x * (blockDim.x / ERGON_TILE) + threadIdx.x / ERGON_TILE) * ERGON_TILE; \
         r0 < (rows); r0 += (u64)gridDim.x * blockDim.x)

typedef float ErgonTile[ERGON_TILE][ERGON_TILE + 1];

// Columns c0..c0+32 of rows r0..r0+32 of `src` ([rows, d]) into the warp's tile (zeros outside).
__device__ __forceinline__ void ergon_tile_load(const float *src, u64 rows, unsigned d, u64 r0, unsigned c0, ErgonTile &tile) {
    unsigned lane = threadIdx.x % ERGON_TILE, c = c0 + lane;
    for (unsigned k = 0; k < ERGON_TILE; k++) {
        u64 r = r0 + k;
        tile[k][lane] = (r < rows && c < d) ? src[r * d + c] : 0.0f;
    }
    __syncwarp();
}

// The tile back into `dst` (the same place in a [rows, d] matrix).
__device__ __forceinline__ void ergon_tile_store(float *dst, u64 rows, unsigned d, u64 r0, unsigned c0, ErgonTile &tile) {
    __syncwarp();
    unsigned lane = threadIdx.x % ERGON_TILE, c = c0 + lane;
    for (unsigned k = 0; k < ERGON_TILE; k++) {
        u64 r = r0 + k;
        if (r < rows && c < d) dst[r * d + c] = tile[k][lane];
    }
    __syncwarp();
}

// f(value, column) over this lane's row of `src`, in column order.
template <typename F>
__device__ __forceinline__ void ergon_row_pass(const float *src, u64 rows, unsigned d, u64 r0, ErgonTile &tile, F f) {
    unsigned lane = threadIdx.x % ERGON_TILE;
    for (unsigned c0 = 0; c0 < d; c0 += ERGON_TILE) {
        ergon_tile_load(src, rows, d, r0, c0, tile);
        unsigned n = min(ERGON_TILE, d - c0);
        for (unsigned j = 0; j < n; j++) f(tile[lane][j], c0 + j);
        __syncwarp();
    }
}

// f(a, b, column) over this lane's rows of `a` and `b`, in column order; with `dst`, each f's
// result is written there.
template <typename F>
__device__ __forceinline__ void ergon_row_pass2(
    const float *a, const float *b, float *dst, u64 rows, unsigned d, u64 r0, ErgonTile &tile, F f) {
    unsigned lane = threadIdx.x % ERGON_TILE;
    for (unsigned c0 = 0; c0 < d; c0 += ERGON_TILE) {
        float av[ERGON_TILE];
        ergon_tile_load(a, rows, d, r0, c0, tile);
#pragma unroll
        for (unsigned j = 0; j < ERGON_TILE; j++) av[j] = tile[lane][j];
        __syncwarp();
        ergon_tile_load(b, rows, d, r0, c0, tile);
        unsigned n = min(ERGON_TILE, d - c0);
#pragma unroll
        for (unsigned j = 0; j < ERGON_TILE; j++)
            if (j < n) tile[lane][j] = f(av[j], tile[lane][j], c0 + j);
        if (dst) ergon_tile_store(dst, rows, d, r0, c0, tile);
        __syncwarp();
    }
}

// This lane's row's mean and 1/√(var + eps) (`dense.rs::moments`).
__device__ __forceinline__ void ergon_moments(
    const float *x, u64 rows, unsigned d, u64 r0, float eps, ErgonTile &tile, float *mean, float *rstd) {
    float n = (float)d, sum = 0.0f, sq = 0.0f;
    ergon_row_pass(x, rows, d, r0, tile, [&](float v, unsigned) { sum = __fadd_rn(sum, v); });
    float m = __fdiv_rn(sum, n);
    ergon_row_pass(x, rows, d, r0, tile, [&](float v, unsigned) {
        float c = __fsub_rn(v, m);
        sq = __fadd_rn(sq, __fmul_rn(c, c));
    });
    *mean = m;
    *rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sq, n), eps)));
}

// y = (x − mean)·r·γ + β, each row on one thread.
extern "C" __global__ void ergon_layer_norm_f32(
    const float *x, const float *gamma, const float *beta, float *y, u64 rows, unsigned d, float eps) {
    __shared__ ErgonTile tiles[ERGON_WARPS];
    ErgonTile &tile = tiles[threadIdx.x / ERGON_TILE];
    unsigned lane = threadIdx.x % ERGON_TILE;
    ERGON_EACH_ROW_GROUP(r0, rows) {
        float mean, rstd;
        ergon_moments(x, rows, d, r0, eps, tile, &mean, &rstd);
        for (unsigned c0 = 0; c0 < d; c0 += ERGON_TILE) {
            ergon_tile_load(x, rows, d, r0, c0, tile);
            unsigned n = min(ERGON_TILE, d - c0);
            for (unsigned j = 0; j < n; j++) {
                float v = __fmul_rn(__fmul_rn(__fsub_rn(tile[lane][j], mean), rstd), gamma[c0 + j]);
                tile[lane][j] = __fadd_rn(v, beta[c0 + j]);
            }
            ergon_tile_store(y, rows, d, r0, c0, tile);
        }
    }
}

// ∂x per row (`layer_norm_backward`), and each row's moments for the ∂γ, ∂β pass.
extern "C" __global__ void ergon_layer_norm_dx_f32(
    const float *x, const float *gamma, const float *dy, float *dx, float *moments, u64 rows,
    unsigned d, float eps) {
    __shared__ ErgonTile tiles[ERGON_WARPS];
    ErgonTile &tile = tiles[threadIdx.x / ERGON_TILE];
    unsigned lane = threadIdx.x % ERGON_TILE;
    ERGON_EACH_ROW_GROUP(r0, rows) {
        float mean, rstd, g_mean = 0.0f, gx_mean = 0.0f, n = (float)d;
        ergon_moments(x, rows, d, r0, eps, tile, &mean, &rstd);
        ergon_row_pass2(x, dy, nullptr, rows, d, r0, tile, [&](float xv, float dyv, unsigned i) {
            float xhat = __fmul_rn(__fsub_rn(xv, mean), rstd);
            float g = __fmul_rn(dyv, gamma[i]);
            g_mean = __fadd_rn(g_mean, g);
            gx_mean = __fadd_rn(gx_mean, __fmul_rn(g, xhat));
            return dyv;
        });
        g_mean = __fdiv_rn(g_mean, n);
        gx_mean = __fdiv_rn(gx_mean, n);
        ergon_row_pass2(x, dy, dx, rows, d, r0, tile, [&](float xv, float dyv, unsigned i) {
            float xhat = __fmul_rn(__fsub_rn(xv, mean), rstd);
            float g = __fsub_rn(__fsub_rn(__fmul_rn(dyv, gamma[i]), g_mean), __fmul_rn(xhat, gx_mean));
            return __fmul_rn(rstd, g);
        });
        u64 r = r0 + lane;
        if (r < rows) {
            moments[2 * r] = mean;
            moments[2 * r + 1] = rstd;
        }
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

// This lane's row's maximum and ln Σ exp(v − max) (`dense.rs::log_sum_exp`).
__device__ __forceinline__ void ergon_log_sum_exp(
    const float *z, u64 rows, unsigned classes, u64 r0, ErgonTile &tile, float *max, float *lse) {
    float m = 0.0f, sum = 0.0f;
    ergon_row_pass(z, rows, classes, r0, tile, [&](float v, unsigned j) { m = j == 0 || v > m ? v : m; });
    ergon_row_pass(z, rows, classes, r0, tile, [&](float v, unsigned) { sum = __fadd_rn(sum, ergon_exp(__fsub_rn(v, m))); });
    *max = m;
    *lse = ergon_ln(sum);
}

// Each row's loss lse − (z[t] − max); a target out of range gives NaN (the host checked them).
extern "C" __global__ void ergon_cross_entropy_rows_f32(
    const float *z, const unsigned *targets, float *losses, u64 rows, unsigned classes) {
    __shared__ ErgonTile tiles[ERGON_WARPS];
    ErgonTile &tile = tiles[threadIdx.x / ERGON_TILE];
    ERGON_EACH_ROW_GROUP(r0, rows) {
        float max, lse;
        ergon_log_sum_exp(z, rows, classes, r0, tile, &max, &lse);
        u64 r = r0 + threadIdx.x % ERGON_TILE;
        if (r < rows) {
            unsigned t = targets[r];
            losses[r] = t < classes ? __fsub_rn(lse, __fsub_rn(z[r * classes + t], max)) : __uint_as_float(0x7fc00000u);
        }
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

// scale · (softmax(row) − onehot(target)), each row on one thread, with scale = ∂loss / divisor
// rounded from f64 to f32 (as the CPU).
extern "C" __global__ void ergon_cross_entropy_grad_f32(
    const float *z, const unsigned *targets, const float *grad, float *dz, u64 rows, unsigned classes,
    double divisor) {
    __shared__ ErgonTile tiles[ERGON_WARPS];
    ErgonTile &tile = tiles[threadIdx.x / ERGON_TILE];
    unsigned lane = threadIdx.x % ERGON_TILE;
    float scale = __double2float_rn(__ddiv_rn((double)grad[0], divisor));
    ERGON_EACH_ROW_GROUP(r0, rows) {
        float max, lse;
        ergon_log_sum_exp(z, rows, classes, r0, tile, &max, &lse);
        u64 r = r0 + lane;
        unsigned t = r < rows ? targets[r] : classes;
        for (unsigned c0 = 0; c0 < classes; c0 += ERGON_TILE) {
            ergon_tile_load(z, rows, classes, r0, c0, tile);
            unsigned n = min(ERGON_TILE, classes - c0);
            for (unsigned j = 0; j < n; j++) {
                float v = __fmul_rn(ergon_exp(__fsub_rn(__fsub_rn(tile[lane][j], max), lse)), scale);
                tile[lane][j] = c0 + j == t ? __fsub_rn(v, scale) : v;
            }
            ergon_tile_store(dz, rows, classes, r0, c0, tile);
        }
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
