//! Draws from a 32-byte seed: a random stream, uniform numbers below a bound (rejection sampling,
//! no modulo bias), uniform samples without replacement (Floyd's algorithm), shuffles
//! (Fisher–Yates), and the *weighted order* of candidates by an exponential race.
//!
//! The weighted order is what makes a draw hard to steer: a candidate's place is decided by a key
//! derived from the seed and its *own* identity and weight only (`time = −log2(u) / weight`, `u`
//! uniform from `blake2(seed, purpose, candidate)`), never from its index in a list. Adding,
//! removing or re-weighting one candidate therefore moves only that candidate: nobody can push a
//! chosen account up by changing the candidate list around it. The first `k` of the order are a
//! weighted sample without replacement (each next pick with probability proportional to weight
//! among those left), computed with integers only so every node agrees bit for bit.

use crate::hash::{tagged, RACE, STREAM};
use alloc::{collections::BTreeSet, vec::Vec};
use codec::Encode;

/// A deterministic stream of uniform `u64`s: draw `i` is the first 8 bytes (LE) of
/// `tagged("ergon/stream/v1", (seed, purpose, i))`.
pub struct Stream<'a> {
    seed: [u8; 32],
    purpose: &'a [u8],
    next: u64,
}

impl<'a> Stream<'a> {
    /// The stream for `purpose` (a short name of what is drawn) under `seed`.
    pub fn new(seed: &[u8; 32], purpose: &'a [u8]) -> Self {
        Stream { seed: *seed, purpose, next: 0 }
    }

    /// The next uniform `u64`.
    pub fn next_u64(&mut self) -> u64 {
        let hash = tagged(STREAM, &(&self.seed, self.purpose, self.next));
        self.next = self.next.wrapping_add(1);
        first_u64(&hash)
    }

    /// A uniform integer in `0..n` (`0` when `n == 0`), without modulo bias: draws below
    /// `2^64 mod n` are rejected (each with probability below `n / 2^64`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let reject_below = n.wrapping_neg() % n;
        // A rejection has probability < n / 2^64: 64 in a row never happen, but the bound keeps
        // the runtime's loop finite whatever the hash does.
        for _ in 0..64 {
            let x = self.next_u64();
            if x >= reject_below {
                return x % n;
            }
        }
        self.next_u64() % n
    }
}

fn first_u64(hash: &[u8; 32]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash[..8]);
    u64::from_le_bytes(bytes)
}

/// `k` distinct integers of `0..n`, every `k`-subset equally likely (Floyd's algorithm), sorted.
/// All of `0..n` when `k ≥ n`.
pub fn sample(stream: &mut Stream, n: u32, k: u32) -> Vec<u32> {
    let k = k.min(n);
    let mut chosen = BTreeSet::new();
    for j in (n - k)..n {
        let t = stream.below(j as u64 + 1) as u32;
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    chosen.into_iter().collect()
}

/// Shuffles `items` in place, every order equally likely (Fisher–Yates).
pub fn shuffle<A>(items: &mut [A], stream: &mut Stream) {
    for i in (1..items.len()).rev() {
        let j = stream.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// `−log2(u / 2^64)` in Q32 fixed point, for `u ≥ 1`: an exponential variable (in bits) from a
/// uniform one. Integer-only: the integer part from the leading zeros, 32 fraction bits by
/// repeated squaring of the mantissa.
pub fn neg_log2_q32(u: u64) -> u64 {
    let u = u.max(1);
    let int = 63 - u.leading_zeros() as u64;
    // Mantissa u / 2^int in [1, 2), as Q63.
    let mut m: u128 = ((u as u128) << 63) >> int;
    let mut frac = 0u64;
    for bit in (0..32).rev() {
        m = (m * m) >> 63;
        if m >= 1u128 << 64 {
            m >>= 1;
            frac |= 1 << bit;
        }
    }
    (64u64 << 32) - ((int << 32) | frac)
}

/// A candidate's place in the race: it arrives at `time / weight`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaceKey {
    /// `1 + −log2(u)` in Q32 (never zero), `u` uniform from the candidate's hash.
    pub time: u64,
    /// The candidate's weight (never zero).
    pub weight: u64,
}

impl RaceKey {
    /// `self` arrives strictly before `other`.
    pub fn before(&self, other: &RaceKey) -> bool {
        (self.time as u128) * (other.weight as u128) < (other.time as u128) * (self.weight as u128)
    }
}

/// The race key of candidate `id` with `weight` for `purpose` under `seed` (`None` for weight 0).
pub fn race_key<A: Encode + ?Sized>(
    seed: &[u8; 32],
    purpose: &[u8],
    id: &A,
    weight: u64,
) -> Option<RaceKey> {
    if weight == 0 {
        return None;
    }
    let u = first_u64(&tagged(RACE, &(seed, purpose, id)));
    Some(RaceKey { time: neg_log2_q32(u).saturating_add(1), weight })
}

/// The candidates in the order of the race (weighted sample without replacement, see the module
/// docs); candidates of weight 0 are left out. Ties (practically impossible) go to the smaller
/// encoding of the candidate, so the order is total and the same on every node.
pub fn weighted_order<A: Encode + Clone>(
    seed: &[u8; 32],
    purpose: &[u8],
    candidates: &[(A, u64)],
) -> Vec<A> {
    let mut keyed: Vec<(RaceKey, Vec<u8>, A)> = candidates
        .iter()
        .filter_map(|(id, w)| race_key(seed, purpose, id, *w).map(|k| (k, id.encode(), id.clone())))
        .collect();
    keyed.sort_by(|(a, ea, _), (b, eb, _)| {
        if a.before(b) {
            core::cmp::Ordering::Less
        } else if b.before(a) {
            core::cmp::Ordering::Greater
        } else {
            ea.cmp(eb)
        }
    });
    keyed.into_iter().map(|(_, _, id)| id).collect()
}

/// `items` in the order of an equal-weight race under `seed`: uniformly random, each item's place
/// depending on its own key only (so removing one never moves the others).
pub fn uniform_order<A: Encode + Clone>(seed: &[u8; 32], purpose: &[u8], items: &[A]) -> Vec<A> {
    let weighted: Vec<(A, u64)> = items.iter().map(|a| (a.clone(), 1)).collect();
    weighted_order(seed, purpose, &weighted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut s = Stream::new(&[7; 32], b"test");
        let mut seen = [0u32; 7];
        for _ in 0..7_000 {
            let x = s.below(7);
            assert!(x < 7);
            seen[x as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
        assert_eq!(s.below(0), 0);
        assert_eq!(s.below(1), 0);
    }

    #[test]
    fn sample_is_distinct_sorted_and_uniform() {
        // Every segment of 30 equally likely when 3 are drawn (no double odds for any index).
        let mut hits = [0u32; 30];
        for trial in 0..20_000u32 {
            let mut seed = [0u8; 32];
            seed[..4].copy_from_slice(&trial.to_le_bytes());
            let s = sample(&mut Stream::new(&seed, b"segments"), 30, 3);
            assert_eq!(s.len(), 3);
            assert!(s.windows(2).all(|w| w[0] < w[1]));
            for i in s {
                hits[i as usize] += 1;
            }
        }
        // Expected 2 000 each; 5 sigma ≈ 215.
        assert!(hits.iter().all(|&h| (1_780..2_220).contains(&h)), "{hits:?}");
        assert_eq!(sample(&mut Stream::new(&[0; 32], b"x"), 4, 9), vec![0, 1, 2, 3]);
        assert!(sample(&mut Stream::new(&[0; 32], b"x"), 0, 3).is_empty());
    }

    #[test]
    fn neg_log2_is_exact_on_powers_of_two_and_monotone() {
        assert_eq!(neg_log2_q32(1 << 63), 1 << 32);
        assert_eq!(neg_log2_q32(1 << 32), 32 << 32);
        assert_eq!(neg_log2_q32(1), 64 << 32);
        // log2(3·2^62) = 62 + log2(3) = 63.58496…: −log2(u/2^64) = 0.41504…
        let x = neg_log2_q32(3 << 62) as f64 / (1u64 << 32) as f64;
        assert!((x - (2.0 - 3f64.log2())).abs() < 1e-8, "{x}");
        let mut last = u64::MAX;
        for u in (1..1000u64).map(|i| i * (u64::MAX / 1000)) {
            let v = neg_log2_q32(u);
            assert!(v <= last);
            last = v;
        }
    }

    #[test]
    fn weighted_order_first_pick_is_proportional_to_weight() {
        let candidates: Vec<(u32, u64)> = vec![(1, 1), (2, 2), (3, 3), (4, 4), (5, 0)];
        let mut first = [0u32; 6];
        for trial in 0..20_000u32 {
            let mut seed = [0u8; 32];
            seed[..4].copy_from_slice(&trial.to_le_bytes());
            let order = weighted_order(&seed, b"verifiers", &candidates);
            assert_eq!(order.len(), 4, "weight 0 is never drawn");
            first[order[0] as usize] += 1;
        }
        // Expected 2 000, 4 000, 6 000, 8 000.
        for (id, expected) in [(1, 2_000), (2, 4_000), (3, 6_000), (4, 8_000)] {
            let got = first[id] as i64;
            assert!((got - expected).abs() < 350, "candidate {id}: {got} vs {expected}");
        }
    }

    #[test]
    fn one_candidate_cannot_move_the_others() {
        let seed = [9u8; 32];
        let all: Vec<(u32, u64)> = (0..50).map(|i| (i, 1 + (i as u64 % 5))).collect();
        let order = weighted_order(&seed, b"v", &all);
        // Remove candidate 17, or give it weight 1 000: the others keep their relative order.
        let without: Vec<(u32, u64)> = all.iter().copied().filter(|(i, _)| *i != 17).collect();
        let heavier: Vec<(u32, u64)> =
            all.iter().map(|&(i, w)| if i == 17 { (i, 1_000) } else { (i, w) }).collect();
        let others = |o: Vec<u32>| o.into_iter().filter(|i| *i != 17).collect::<Vec<_>>();
        assert_eq!(others(order.clone()), weighted_order(&seed, b"v", &without));
        assert_eq!(others(order), others(weighted_order(&seed, b"v", &heavier)));
    }
}
