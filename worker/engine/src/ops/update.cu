// The optimizer updates of `ops::update` on a CUDA GPU, one launch per tensor and rule, in place.
//
// Each kernel does the arithmetic of its CPU twin in `ops/mod.rs` (`update::{Momentum, Descend,
// Average, AdamStep}`) in the same order, one IEEE operation at a time: the `_rn` intrinsics are
// never contracted into fused multiply-adds (the build passes -fmad=false as well), and division
// and square root are the correctly rounded ones. So a GPU's update of given (w, m, v, g) has the
// CPU's bits; only the gradients differ between the devices. The `+ 0` terms are kept because the
// CPU has them (they turn −0 into +0).
//
// The host rounds every scalar to the tensors' type before the launch, as the CPU twin does.

#define ERGON_UPDATES(T, SUFFIX, MUL, ADD, SUB, DIV, SQRT)                                       \
    /* v ← (v·μ + 0) + (g + (w·λ + 0)) */                                                     \
    extern "C" __global__ void ergon_sgd_momentum_##SUFFIX(                                    \
        T *v, const T *g, const T *w, unsigned long long n, T mu, T decay) {                   \
        for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;  \
             i < n; i += (unsigned long long)blockDim.x * gridDim.x) {                          \
            v[i] = ADD(ADD(MUL(v[i], mu), (T)0), ADD(g[i], ADD(MUL(w[i], decay), (T)0)));       \
        }                                                                                       \
    }                                                                                           \
    /* w ← w − (v·η + 0) */                                                                   \
    extern "C" __global__ void ergon_sgd_descend_##SUFFIX(                                     \
        T *w, const T *v, unsigned long long n, T lr) {                                         \
        for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;  \
             i < n; i += (unsigned long long)blockDim.x * gridDim.x) {                          \
            w[i] = SUB(w[i], ADD(MUL(v[i], lr), (T)0));                                         \
        }                                                                                       \
    }                                                                                           \
    /* m ← (m·β + 0) + (x·(1−β) + 0), x = g or g·g */                                         \
    extern "C" __global__ void ergon_adamw_moment_##SUFFIX(                                    \
        T *m, const T *g, unsigned long long n, T beta, T rest, int square) {                  \
        for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;  \
             i < n; i += (unsigned long long)blockDim.x * gridDim.x) {                          \
            T x = square ? MUL(g[i], g[i]) : g[i];                                              \
            m[i] = ADD(ADD(MUL(m[i], beta), (T)0), ADD(MUL(x, rest), (T)0));                    \
        }                                                                                       \
    }                                                                                           \
    /* w ← (w·keep + 0) − (((m·m̂ₛ + 0) / (√(v·v̂ₛ + 0)·1 + ε))·η + 0) */                       \
    extern "C" __global__ void ergon_adamw_step_##SUFFIX(                                      \
        T *w, const T *m, const T *v, unsigned long long n, T keep, T m_scale, T v_scale,       \
        T eps, T lr) {                                                                          \
        for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;  \
             i < n; i += (unsigned long long)blockDim.x * gridDim.x) {                          \
            T denom = ADD(MUL(SQRT(ADD(MUL(v[i], v_scale), (T)0)), (T)1), eps);                 \
            T update = DIV(ADD(MUL(m[i], m_scale), (T)0), denom);                               \
            w[i] = SUB(ADD(MUL(w[i], keep), (T)0), ADD(MUL(update, lr), (T)0));                 \
        }                                                                                       \
    }

ERGON_UPDATES(float, f32, __fmul_rn, __fadd_rn, __fsub_rn, __fdiv_rn, __fsqrt_rn)
ERGON_UPDATES(double, f64, __dmul_rn, __dadd_rn, __dsub_rn, __ddiv_rn, __dsqrt_rn)
