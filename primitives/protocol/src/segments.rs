//! Which checkpoint segments `Cᵢ → Cᵢ₊₁` a verification round replays, and who replays which.

use crate::draw::{sample, shuffle, Stream};
use alloc::vec::Vec;

/// `count` distinct segments of `0..segments`, every subset equally likely (so every segment,
/// the first and the last included, is replayed with the same probability), sorted; all of them
/// when the bundle has no more than `count`.
pub fn draw(seed: &[u8; 32], segments: u32, count: u32) -> Vec<u32> {
    sample(&mut Stream::new(seed, b"segments"), segments, count)
}

/// Each of `verifiers` verifiers' own `per_verifier` segments of `0..segments` (sorted), distinct
/// across verifiers while the bundle has enough: the segments of a uniformly shuffled order are dealt
/// out in turn, so the round covers `min(segments, verifiers × per_verifier)` distinct segments,
/// every one equally likely, and no verifier can copy another's replay. Only when the bundle has
/// fewer segments than the round asks for do verifiers share some (never one verifier twice the
/// same, unless `per_verifier > segments`, when each gets all of them).
pub fn assign(seed: &[u8; 32], segments: u32, verifiers: u32, per_verifier: u32) -> Vec<Vec<u32>> {
    if segments == 0 {
        return (0..verifiers).map(|_| Vec::new()).collect();
    }
    let mut order: Vec<u32> = (0..segments).collect();
    shuffle(&mut order, &mut Stream::new(seed, b"assignment"));
    let per_verifier = per_verifier.min(segments) as usize;
    (0..verifiers as usize)
        .map(|v| {
            let mut own: Vec<u32> =
                (0..per_verifier).map(|i| order[(v * per_verifier + i) % order.len()]).collect();
            own.sort_unstable();
            own
        })
        .collect()
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

    #[test]
    fn assignment_gives_each_verifier_its_own_segments() {
        let own = assign(&[3; 32], 30, 3, 3);
        assert_eq!(own.len(), 3);
        let mut all: Vec<u32> = own.iter().flatten().copied().collect();
        assert!(own.iter().all(|s| s.len() == 3 && s.windows(2).all(|w| w[0] < w[1])));
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 9, "nine distinct segments: {own:?}");
        assert!(all.iter().all(|&s| s < 30));
        assert_eq!(own, assign(&[3; 32], 30, 3, 3));
    }

    #[test]
    fn a_short_bundle_is_shared_but_never_twice_to_one_verifier() {
        let own = assign(&[4; 32], 5, 3, 3);
        let mut all: Vec<u32> = own.iter().flatten().copied().collect();
        assert!(own.iter().all(|s| s.len() == 3 && s.windows(2).all(|w| w[0] < w[1])));
        all.sort_unstable();
        all.dedup();
        assert_eq!(all, vec![0, 1, 2, 3, 4]);
        assert_eq!(assign(&[4; 32], 2, 2, 3), vec![vec![0, 1], vec![0, 1]]);
        assert_eq!(assign(&[4; 32], 0, 2, 3), vec![Vec::<u32>::new(), Vec::new()]);
    }

    #[test]
    fn every_segment_is_assigned_equally_often() {
        // 3 verifiers × 3 of 30 segments: each segment is in a round with probability 9/30.
        let mut hits = [0u32; 30];
        let rounds = 3_000u32;
        for r in 0..rounds {
            let seed = crate::hash::blake2_256(&r.to_le_bytes());
            for s in assign(&seed, 30, 3, 3).into_iter().flatten() {
                hits[s as usize] += 1;
            }
        }
        let expected = rounds * 9 / 30;
        assert!(hits.iter().all(|&h| h.abs_diff(expected) < expected / 5), "{hits:?}");
    }
}
