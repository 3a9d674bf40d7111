//! Which checkpoint segments `Cᵢ → Cᵢ₊₁` a verification round replays, and who replays which.

use crate::draw::{sample, shuffle, Stream};
use alloc::vec::Vec;

/// `count` distinct segments of `0..segments`, every subset equally likely (so every segment,
/// the first and the last included, is replayed with the same probability), sorted; all of them
/// when the bundle has no more than `count`.
pub fn draw(seed: &[u8; 32], segments: u32, count: u32) -> Vec<u32> {
    sample(&mut Stream::new(seed, b"segments"), segments, count)
}

/// Each of `verifiers` verifiers' `per_verifier` segments of `0..segments` (sorted), every one of
/// them shared with exactly one other verifier of the round, so that the replay evidence of every
/// pass is compared with a second replay ([`crate::evidence`]).
///
/// The segments of a uniformly shuffled order are cut into one block per verifier, of
/// `⌈per_verifier / 2⌉` segments each, and verifier `v` replays its block and the first
/// `⌊per_verifier / 2⌋` of verifier `v − 1`'s (a ring): the round covers `verifiers ×
/// ⌈per_verifier / 2⌉` distinct segments, every segment equally likely. Every segment is paired on
/// purpose: the draw is public, so were only some segments given to two verifiers, a verifier would
/// see which of its own are cross-checked and replay only those. (With an odd `per_verifier` the
/// last segment of each block is replayed once; with one verifier nothing is paired.) Only when the
/// bundle has fewer segments than the round covers do blocks overlap (never one verifier twice the
/// same segment; each gets all of them when `per_verifier > segments`).
pub fn assign(seed: &[u8; 32], segments: u32, verifiers: u32, per_verifier: u32) -> Vec<Vec<u32>> {
    if segments == 0 {
        return (0..verifiers).map(|_| Vec::new()).collect();
    }
    let mut order: Vec<u32> = (0..segments).collect();
    shuffle(&mut order, &mut Stream::new(seed, b"assignment"));
    let per_verifier = per_verifier.min(segments) as usize;
    let (block, borrowed) = (per_verifier.div_ceil(2), per_verifier / 2);
    let verifiers = verifiers as usize;
    let at = |v: usize, i: usize| order[(v * block + i) % order.len()];
    (0..verifiers)
        .map(|v| {
            let mut own: Vec<u32> = (0..block).map(|i| at(v, i)).collect();
            if verifiers > 1 {
                let left = (v + verifiers - 1) % verifiers;
                own.extend((0..borrowed).map(|i| at(left, i)));
            } else {
                own.extend((block..per_verifier).map(|i| at(v, i)));
            }
            own.sort_unstable();
            own.dedup();
            // A short bundle's blocks wrap around: top up with segments not yet held, in order.
            for s in order.iter() {
                if own.len() >= per_verifier {
                    break;
                }
                if !own.contains(s) {
                    own.push(*s);
                }
            }
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
    fn assignment_pairs_every_segment_with_exactly_two_verifiers() {
        let own = assign(&[3; 32], 30, 3, 4);
        assert_eq!(own.len(), 3);
        assert!(own.iter().all(|s| s.len() == 4 && s.windows(2).all(|w| w[0] < w[1])));
        let mut count = std::collections::BTreeMap::new();
        for s in own.iter().flatten() {
            *count.entry(*s).or_insert(0) += 1;
        }
        assert_eq!(count.len(), 6, "six distinct segments: {own:?}");
        assert!(count.values().all(|&c| c == 2), "each replayed twice: {own:?}");
        assert!(count.keys().all(|&s| s < 30));
        // Each pair of verifiers shares exactly two segments (a ring of three).
        for (a, b) in [(0, 1), (1, 2), (0, 2)] {
            assert_eq!(own[a].iter().filter(|s| own[b].contains(s)).count(), 2);
        }
        assert_eq!(own, assign(&[3; 32], 30, 3, 4));
        // One verifier: nothing to pair with, it replays its own four.
        assert_eq!(assign(&[3; 32], 30, 1, 4)[0].len(), 4);
    }

    #[test]
    fn a_short_bundle_is_shared_but_never_twice_to_one_verifier() {
        let own = assign(&[4; 32], 5, 3, 4);
        let mut all: Vec<u32> = own.iter().flatten().copied().collect();
        assert!(own.iter().all(|s| s.len() == 4 && s.windows(2).all(|w| w[0] < w[1])), "{own:?}");
        all.sort_unstable();
        all.dedup();
        assert_eq!(all, vec![0, 1, 2, 3, 4]);
        assert_eq!(assign(&[4; 32], 2, 2, 3), vec![vec![0, 1], vec![0, 1]]);
        assert_eq!(assign(&[4; 32], 0, 2, 3), vec![Vec::<u32>::new(), Vec::new()]);
    }

    #[test]
    fn every_segment_is_assigned_equally_often() {
        // 3 verifiers × 4 of 30 segments, paired: each segment is in a round with probability
        // 6/30, and then replayed twice.
        let mut hits = [0u32; 30];
        let rounds = 3_000u32;
        for r in 0..rounds {
            let seed = crate::hash::blake2_256(&r.to_le_bytes());
            for s in assign(&seed, 30, 3, 4).into_iter().flatten() {
                hits[s as usize] += 1;
            }
        }
        let expected = rounds * 2 * 6 / 30;
        assert!(hits.iter().all(|&h| h.abs_diff(expected) < expected / 5), "{hits:?}");
    }
}
