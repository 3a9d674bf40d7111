//! Which checkpoint segments `Cᵢ → Cᵢ₊₁` a verification round replays.

use crate::draw::{sample, Stream};
use alloc::vec::Vec;

/// `count` distinct segments of `0..segments`, every subset equally likely (so every segment,
/// the first and the last included, is replayed with the same probability), sorted; all of them
/// when the bundle has no more than `count`.
pub fn draw(seed: &[u8; 32], segments: u32, count: u32) -> Vec<u32> {
    sample(&mut Stream::new(seed, b"segments"), segments, count)
}

/// Probability in parts per million that a draw of `count` of `segments` includes at least one of
/// `faked` given segments: `1 − C(segments − faked, count) / C(segments, count)`. What a lazy
/// trainer that fakes `faked` segments risks per round (rounded up).
pub fn catch_ppm(segments: u32, count: u32, faked: u32) -> u32 {
    let (n, k, f) = (segments as u128, count.min(segments) as u128, faked.min(segments) as u128);
    // Probability of missing every faked segment: Π_{i<k} (n − f − i) / (n − i).
    let (mut num, mut den) = (1u128, 1u128);
    for i in 0..k {
        num *= n.saturating_sub(f).saturating_sub(i);
        den *= n - i;
        let g = gcd(num, den);
        num /= g;
        den /= g;
    }
    (1_000_000 - num * 1_000_000 / den.max(1)) as u32
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catch_probability_matches_the_hypergeometric_formula() {
        // 3 of 30: faking one segment is caught with 3/30 = 10 %.
        assert_eq!(catch_ppm(30, 3, 1), 100_000);
        assert_eq!(catch_ppm(30, 3, 0), 0);
        assert_eq!(catch_ppm(30, 30, 1), 1_000_000);
        // 1 − (27·26·25)/(30·29·28) = 0.279556…, rounded up.
        assert_eq!(catch_ppm(30, 3, 3), 279_557);
    }

    #[test]
    fn draw_is_deterministic_and_in_range() {
        let a = draw(&[1; 32], 30, 4);
        assert_eq!(a, draw(&[1; 32], 30, 4));
        assert_eq!(a.len(), 4);
        assert!(a.iter().all(|&i| i < 30));
        assert_ne!(a, draw(&[2; 32], 30, 4));
    }
}
