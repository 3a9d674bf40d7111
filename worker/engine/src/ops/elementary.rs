//! `exp` and `ln` in f32 written out in plain IEEE arithmetic, for the kernels' softmax,
//! cross-entropy and GELU.
//!
//! Why not libm's `expf` and `logf`: glibc picks one of several builds of each at load time by
//! the CPU's features (`__expf_fma` on a CPU with FMA, another without), and other C libraries
//! (musl, macOS, a container's older glibc) have their own; their last bits may differ, and replay
//! compares bits. Here every step is an f32 add, multiply, divide or an exact bit operation, which IEEE 754
//! rounds one way on every CPU (Rust never fuses a multiply and an add on its own), so a trainer
//! and a verifier get the same bits wherever they run. Branch-free `exp` also vectorizes inside the
//! kernels' loops, which libm calls do not.
//!
//! Accuracy: less than 1 ulp from the exact value over the whole range, subnormals included
//! (tested against f64 on a sweep of every 97th f32: at most 0.96 ulp for `exp`, 0.91 for `ln`),
//! and IEEE's results for 0, ∞ and NaN.

/// `log2(e)`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` in two parts (Cody and Waite): `LN2_HI` has 9 significant bits, so `k·LN2_HI` is exact
/// for every exponent `k` here, and `LN2_HI + LN2_LO` is `ln 2` to about 2⁻³⁵.
const LN2_HI: f32 = 355.0 / 512.0;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Adding and subtracting 1.5·2²³ rounds an f32 below 2²² in magnitude to the nearest integer (ties
/// to even) in IEEE round-to-nearest; no SSE4.1 `round` instruction needed.
const ROUND: f32 = 12_582_912.0;
/// `e^r − 1 − r ≈ r²·P(r)` on `|r| ≤ ln 2 / 2`: the minimax coefficients of Cephes' `expf` (its
/// last, 0.50000001, is 0.5 in f32).
const EXP_P: [f32; 6] =
    [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5];

/// `e^x`: `x = k·ln 2 + r`, `e^x = 2^k · e^r`, with `e^r` a polynomial. Inputs beyond ±104 clamp
/// (e^89 overflows f32 and e^−104 rounds to 0 anyway); `2^k` is applied as two powers of two so
/// that subnormal and overflowing results round once, as IEEE would round the exact value.
#[inline]
pub(super) fn exp(x: f32) -> f32 {
    // NaN stays NaN here, and makes the result NaN.
    let x = x.clamp(-104.0, 89.0);
    // k = round(x·log2 e): the sum's low mantissa bits hold it as an integer (offset by 2²²), read
    // with integer arithmetic, not a float-to-int conversion (which would not vectorize well).
    let t = x * LOG2E + ROUND;
    let k_int = (t.to_bits() as i32) - 0x4b40_0000;
    let k = t - ROUND;
    let r = x - k * LN2_HI - k * LN2_LO;
    let mut p = EXP_P[0];
    for c in &EXP_P[1..] {
        p = p * r + *c;
    }
    let e_r = p * (r * r) + r + 1.0;
    // k ∈ [−150, 128]: both halves lie in [−75, 64], normal exponents.
    let half = k_int >> 1;
    let pow2 = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    e_r * pow2(half) * pow2(k_int - half)
}

/// `ln((1+s)/(1−s)) ≈ 2s + s·z·Q(z)` with `z = s²`: the series `2s(1 + z/3 + z²/5 + z³/7 + z⁴/9)`,
/// whose next term is below 10⁻⁹ relative for the `|s| ≤ 0.172` used here.
const LN_Q: [f32; 4] = [2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0];

/// `ln x`: `x = m · 2^e` with `m ∈ [√½, √2)`, `ln m = 2·atanh(s)` for `s = (m−1)/(m+1)`. Zero gives
/// −∞, a negative number or NaN gives NaN, ∞ gives ∞.
pub(super) fn ln(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == 0.0 {
        return f32::NEG_INFINITY;
    }
    if x == f32::INFINITY {
        return x;
    }
    // Subnormals: scale into the normal range first.
    let (x, mut e) = if x < f32::MIN_POSITIVE { (x * 8_388_608.0, -23) } else { (x, 0) };
    let bits = x.to_bits();
    e += ((bits >> 23) as i32) - 127;
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000); // [1, 2)
    if m > std::f32::consts::SQRT_2 {
        m *= 0.5; // exact
        e += 1;
    }
    let f = m - 1.0; // exact: m and 1 are within a factor of 2
    let s = f / (2.0 + f);
    let z = s * s;
    let mut q = LN_Q[0];
    for c in &LN_Q[1..] {
        q = q * z + *c;
    }
    // 2s = f − s·f: the exact f leads, and the rounding errors sit in the smaller correction.
    let ln_m = f - s * (f - z * q);
    let e = e as f32;
    e * LN2_HI + (ln_m + e * LN2_LO)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in ulps between `got` and the f32 nearest `exact` (ulp of that f32; subnormal ulp
    /// below the normal range).
    fn ulps(got: f32, exact: f64) -> f64 {
        let nearest = exact as f32;
        if got == nearest {
            return 0.0;
        }
        let ulp = (f32::from_bits(nearest.abs().to_bits() + 1) - nearest.abs()) as f64;
        (got as f64 - exact).abs() / ulp
    }

    /// Every 97th f32 bit pattern in a range: a dense, reproducible sweep.
    fn sweep(lo: f32, hi: f32) -> impl Iterator<Item = f32> {
        let (a, b) = (lo.to_bits(), hi.to_bits());
        (a.min(b)..=a.max(b)).step_by(97).map(f32::from_bits)
    }

    /// The largest [`ulps`] of `f` against `exact` over `inputs`, and where.
    fn worst(
        inputs: impl Iterator<Item = f32>,
        f: fn(f32) -> f32,
        exact: fn(f64) -> f64,
    ) -> (f64, f32) {
        inputs.map(|x| (ulps(f(x), exact(x as f64)), x)).fold((0.0, 0.0), |w, u| {
            if u.0 > w.0 {
                u
            } else {
                w
            }
        })
    }

    #[test]
    fn exp_is_within_one_ulp_everywhere() {
        let (u, x) = worst(sweep(-0.0, -104.0).chain(sweep(0.0, 88.72)), exp, f64::exp);
        assert!(u < 1.0, "exp({x}) is {u} ulps off");
    }

    #[test]
    fn ln_is_within_one_ulp_everywhere() {
        let (u, x) = worst(sweep(f32::from_bits(1), f32::MAX), ln, f64::ln);
        assert!(u < 1.0, "ln({x}) is {u} ulps off");
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-200.0), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(88.8), f32::INFINITY);
        assert!(exp(88.72) < f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(-103.0) > 0.0, "subnormal results are kept");
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(ln(0.0), f32::NEG_INFINITY);
        assert_eq!(ln(f32::INFINITY), f32::INFINITY);
        assert!(ln(-1.0).is_nan() && ln(f32::NAN).is_nan());
        assert_eq!(ln(std::f32::consts::E), 1.0);
    }

    /// The bits these functions give, fixed: a change here changes every replay's numbers, and
    /// must be one on purpose (old bundles would replay within tolerance only).
    #[test]
    fn test_vectors() {
        let vectors = [
            (exp(-1.5), 0x3e64_7c3c_u32),
            (exp(0.3), 0x3fac_c82c), // the nearest f32 is …82d: within 1 ulp, not rounded exactly
            (exp(20.0), 0x4de7_5844),
            (exp(-90.0), 0x0008_ec28), // subnormal
            (ln(0.3), 0xbf9a_1bc8),
            (ln(1e-40), 0xc2b8_34f2), // subnormal input
            (ln(12345.0), 0x4116_bc71),
        ];
        for (i, (got, want)) in vectors.into_iter().enumerate() {
            assert_eq!(got.to_bits(), want, "vector {i}: {got:e}");
        }
    }
}
