//! Half-life decay in integer arithmetic: `v · 2^(−Δ/H)`.
//!
//! Whole half-lives are applied by shifting; the remaining fraction of a half-life is quantized to
//! 1/2¹⁶ and applied as a Q64 fixed-point factor, the product of precomputed `2^(−2^−i)`. Every step
//! rounds down, and the factor's rounding error (≤ 2⁻⁶⁰) is far below the gap between neighbouring
//! quantized fractions (≈ 10⁻⁵), so the result is monotone in Δ; it never exceeds `v` and cannot
//! overflow, even at `u128::MAX`.

/// Bits of the quantized fraction of a half-life.
pub const FRACTION_BITS: u32 = 16;

/// `2^(−2^−i)` in Q64 for i = 1..=16, rounded down (computed with 80-digit decimal arithmetic).
const POW2_NEG_INV_POW2: [u64; FRACTION_BITS as usize] = [
    0xb504f333f9de6484,
    0xd744fccad69d6af4,
    0xeac0c6e7dd24392e,
    0xf5257d152486cc2c,
    0xfa83b2db722a033a,
    0xfd3e0c0cf486c174,
    0xfe9e115c7b8f884b,
    0xff4ecb59511ec8a5,
    0xffa756521c8daed1,
    0xffd3a751c0f7e10b,
    0xffe9d2b2f7db2755,
    0xfff4e91bff1b8c3d,
    0xfffa747ea0040664,
    0xfffd3a3b7814eb53,
    0xfffe9d1cc60ddab1,
    0xffff4e8e25879bfa,
];

/// `2^(−q/2¹⁶)` in Q64 (`2⁶⁴ · factor`, rounded down) for a quantized fraction `q < 2¹⁶`;
/// `None` stands for exactly 1 (q = 0).
fn fraction_factor(q: u32) -> Option<u64> {
    if q == 0 {
        return None;
    }
    let mut acc: u128 = 1 << 64; // 1.0 in Q64, held in u128 while multiplying
    for (i, c) in POW2_NEG_INV_POW2.iter().enumerate() {
        // Bit i (from the top) of q stands for 2^−(i+1) of a half-life.
        if q & (1 << (FRACTION_BITS - 1 - i as u32)) != 0 {
            acc = (acc * *c as u128) >> 64;
        }
    }
    Some(acc as u64)
}

/// `floor(v · f / 2⁶⁴)` without overflow for any `v` (f < 2⁶⁴, so the result is ≤ v).
fn mul_q64(v: u128, f: u64) -> u128 {
    let (hi, lo) = (v >> 64, v & u64::MAX as u128);
    hi * f as u128 + ((lo * f as u128) >> 64)
}

/// `value` decayed over `elapsed` blocks with a half-life of `half_life` blocks (0 = no decay).
pub fn decay(value: u128, elapsed: u64, half_life: u64) -> u128 {
    if value == 0 || elapsed == 0 || half_life == 0 {
        return value;
    }
    let whole = elapsed / half_life;
    if whole >= 128 {
        return 0;
    }
    let shifted = value >> whole;
    let rest = elapsed % half_life;
    // Quantize rest/half_life to 1/2^16, rounding down (less decay, never more).
    let q = ((rest as u128) << FRACTION_BITS) / half_life as u128;
    match fraction_factor(q as u32) {
        None => shifted,
        Some(f) => mul_q64(shifted, f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn constants_are_the_powers_they_claim() {
        for (i, c) in POW2_NEG_INV_POW2.iter().enumerate() {
            let expected = 2f64.powf(-1.0 / 2f64.powi(i as i32 + 1));
            assert!((*c as f64 / 2f64.powi(64) - expected).abs() < 1e-15);
        }
    }

    #[test]
    fn exact_points() {
        assert_eq!(decay(1_000, 0, 100), 1_000);
        assert_eq!(decay(1_000, 100, 100), 500);
        assert_eq!(decay(1_000, 200, 100), 250);
        assert_eq!(decay(1_000, 50, 100), 707); // 1000 / √2 = 707.1
        assert_eq!(decay(u128::MAX, 128 * 100, 100), 0);
        assert_eq!(decay(7, 5, 0), 7);
    }

    proptest! {
        #[test]
        fn one_half_life_halves_within_one(v in any::<u128>(), h in 1u64..10_000_000) {
            let d = decay(v, h, h);
            prop_assert!(d.abs_diff(v / 2) <= 1);
        }

        #[test]
        fn monotone_in_time(v in any::<u128>(), h in 1u64..100_000, t in 0u64..2_000_000, dt in 1u64..50_000) {
            prop_assert!(decay(v, t + dt, h) <= decay(v, t, h));
        }

        #[test]
        fn never_grows_and_never_overflows(v in any::<u128>(), h in any::<u64>(), t in any::<u64>()) {
            prop_assert!(decay(v, t, h) <= v);
        }

        #[test]
        fn close_to_the_real_exponential(v in 1u64..u64::MAX, h in 1u64..1_000_000, t in 0u64..5_000_000) {
            let exact = v as f64 * 2f64.powf(-(t as f64) / h as f64);
            let got = decay(v as u128, t, h) as f64;
            // Quantization of the fraction to 1/2^16 of a half-life: relative error ≤ ln2/2^16 ≈ 1.1e-5.
            prop_assert!((got - exact).abs() <= exact * 1.1e-5 + 2.0);
        }
    }
}
