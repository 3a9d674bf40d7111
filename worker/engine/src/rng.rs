//! Deterministic randomness derived from the job seed: every random choice of a training run (initial
//! weights, batch order) is a pure function of the seed, so a verifier can regenerate it bit for bit.
//!
//! Streams are ChaCha20 keyed by `SHA-256(seed ‖ domain ‖ label)`; floats and integers are drawn with
//! our own fixed algorithms, never with a library's distribution code that may change between versions.

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

/// A 32-byte training seed.
pub type Seed = [u8; 32];

/// The seed of a job run, from the job id and the trainer's raw 32-byte account (the protocol's one
/// rule, [`ergon_protocol::job_seed`]). Neither the trainer nor the user can pick it once the job id
/// and the trainer are fixed.
pub use ergon_protocol::job_seed;

/// A deterministic random stream for `domain`/`label` under `seed`.
pub struct Stream(ChaCha20Rng);

impl Stream {
    /// The stream named `domain` and `label`.
    pub fn new(seed: &Seed, domain: &str, label: &[u8]) -> Stream {
        let mut h = Sha256::new();
        h.update(seed);
        h.update((domain.len() as u32).to_le_bytes());
        h.update(domain.as_bytes());
        h.update(label);
        Stream(ChaCha20Rng::from_seed(h.finalize().into()))
    }

    /// A uniform `u32`.
    pub fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }

    /// A uniform float in [0, 1) with 24 random bits (exact in f32).
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// A uniform float in [-bound, bound).
    pub fn uniform(&mut self, bound: f32) -> f32 {
        (2.0 * self.unit_f32() - 1.0) * bound
    }

    /// A standard normal sample (Box–Muller on two uniforms).
    pub fn normal(&mut self) -> f32 {
        // 1 - u in (0, 1] keeps the log finite.
        let u1 = 1.0 - self.unit_f32() as f64;
        let u2 = self.unit_f32() as f64;
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }

    /// A uniform integer in `[0, n)` by rejection sampling (no modulo bias). `n` must be > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.0.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// The order in which epoch `epoch` visits the `n` training samples: a Fisher–Yates shuffle driven by
/// the stream `("batch", epoch)`. Step `s` of the epoch trains on `order[s·B .. (s+1)·B]`.
pub fn epoch_order(seed: &Seed, epoch: u32, n: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..n).collect();
    let mut rng = Stream::new(seed, "batch", &epoch.to_le_bytes());
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    order
}

/// The sample indices of optimizer step `step` within `epoch` (the PRF of seed, epoch and step).
pub fn batch_indices(seed: &Seed, epoch: u32, step: u64, n: u64, batch_size: u32) -> Vec<u64> {
    let order = epoch_order(seed, epoch, n);
    let start = (step * batch_size as u64).min(n) as usize;
    let end = ((step + 1) * batch_size as u64).min(n) as usize;
    order[start..end].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let seed = job_seed(7, &[1; 32]);
        let a: Vec<u32> = (0..4)
            .map({
                let mut s = Stream::new(&seed, "init", b"w");
                move |_| s.next_u32()
            })
            .collect();
        let b: Vec<u32> = (0..4)
            .map({
                let mut s = Stream::new(&seed, "init", b"w");
                move |_| s.next_u32()
            })
            .collect();
        let c: Vec<u32> = (0..4)
            .map({
                let mut s = Stream::new(&seed, "init", b"b");
                move |_| s.next_u32()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(job_seed(7, &[1; 32]), job_seed(7, &[2; 32]));
        assert_ne!(job_seed(7, &[1; 32]), job_seed(8, &[1; 32]));
    }

    #[test]
    fn epoch_order_is_a_permutation_that_changes_per_epoch() {
        let seed = job_seed(1, &[3; 32]);
        let o0 = epoch_order(&seed, 0, 1000);
        let mut sorted = o0.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(o0, epoch_order(&seed, 1, 1000));
        assert_eq!(batch_indices(&seed, 0, 2, 1000, 64), o0[128..192].to_vec());
        assert_eq!(batch_indices(&seed, 0, 15, 1000, 64).len(), 1000 - 15 * 64);
    }

    #[test]
    fn floats_are_in_range() {
        let mut s = Stream::new(&[0; 32], "x", b"");
        for _ in 0..10_000 {
            let u = s.unit_f32();
            assert!((0.0..1.0).contains(&u));
            let v = s.uniform(0.5);
            assert!((-0.5..0.5).contains(&v));
            assert!(s.normal().is_finite());
        }
    }
}
