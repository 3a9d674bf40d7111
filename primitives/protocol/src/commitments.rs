//! What a party commits to before it reveals: binding the job (task), the round and the party's
//! account stops anyone from replaying another party's commitment as its own.

use crate::evidence::Sketch;
use crate::hash::{tagged, DRILL_RESULT, VERDICT};
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

/// A verifier's verdict on a bundle.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Encode,
    Decode,
    DecodeWithMemTracking,
    Debug,
    TypeInfo,
    MaxEncodedLen,
)]
#[scale_info(capture_docs = "always")]
pub enum Verdict {
    /// Every check passed.
    Pass,
    /// A check failed. `segment` is the evidence a dispute re-checks: the verifier's own segment
    /// whose replay failed, or its first segment when the defect is the bundle's as a whole (files,
    /// manifest, seed, final model, metrics), which any replay of any segment finds again. The
    /// full report's hash is revealed beside it.
    Fail {
        /// `i` of the failing segment `Cᵢ → Cᵢ₊₁`, one of those the verifier was given.
        segment: u32,
    },
}

impl Verdict {
    /// Whether this is a pass.
    pub fn is_pass(&self) -> bool {
        matches!(self, Verdict::Pass)
    }

    /// The segment a fail names.
    pub fn failed_segment(&self) -> Option<u32> {
        match self {
            Verdict::Pass => None,
            Verdict::Fail { segment } => Some(*segment),
        }
    }
}

/// A verifier's commitment to `verdict` on job `job`, round `round`:
/// `blake2_256(SCALE(("ergon/verdict/v4", job, round, verifier, verdict, sketches, report, salt)))`.
/// A fail's segment is part of `verdict` (SCALE: `0x00` for pass, `0x01` and the `u32` for fail);
/// `sketches` are the replay evidence of the verifier's segments in their order, each the sketches
/// of the segment's probe steps ([`crate::evidence`]; SCALE: a compact length, then each segment's
/// compact length and sketches); `report` is the hash of the
/// verifier's full report.
pub fn verdict<A: Encode + ?Sized>(
    job: u64,
    round: u32,
    verifier: &A,
    verdict: Verdict,
    sketches: &[impl AsRef<[Sketch]>],
    report: &[u8; 32],
    salt: &[u8; 32],
) -> [u8; 32] {
    let sketches: alloc::vec::Vec<&[Sketch]> = sketches.iter().map(AsRef::as_ref).collect();
    tagged(VERDICT, &(job, round, verifier, verdict, sketches, report, salt))
}

/// A drilling executor's commitment to `result` of task `task`:
/// `blake2_256(SCALE(("ergon/drill-result/v1", task, executor, result, salt)))`.
pub fn drill_result<A: Encode + ?Sized>(
    task: u64,
    executor: &A,
    result: &[u8; 32],
    salt: &[u8; 32],
) -> [u8; 32] {
    tagged(DRILL_RESULT, &(task, executor, result, salt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commitments_bind_every_field() {
        let (who, other, e, s) = ([1u8; 32], [2u8; 32], [3u8; 32], [4u8; 32]);
        let one = Sketch { exponent: -3, deviation: [1, 2, 3, 4, 5, 6, 7, 8], scale: 9 };
        let sk = [vec![one, one]];
        let base = verdict(1, 0, &who, Verdict::Pass, &sk, &e, &s);
        assert_ne!(base, verdict(2, 0, &who, Verdict::Pass, &sk, &e, &s));
        assert_ne!(base, verdict(1, 1, &who, Verdict::Pass, &sk, &e, &s));
        assert_ne!(base, verdict(1, 0, &other, Verdict::Pass, &sk, &e, &s));
        let fail = verdict(1, 0, &who, Verdict::Fail { segment: 0 }, &sk, &e, &s);
        assert_ne!(base, fail);
        assert_ne!(fail, verdict(1, 0, &who, Verdict::Fail { segment: 1 }, &sk, &e, &s));
        let none: [Vec<Sketch>; 0] = [];
        assert_ne!(base, verdict(1, 0, &who, Verdict::Pass, &none, &e, &s));
        assert_ne!(base, verdict(1, 0, &who, Verdict::Pass, &[vec![one]], &e, &s));
        let other_sketch = [vec![one, Sketch { scale: 10, ..one }]];
        assert_ne!(base, verdict(1, 0, &who, Verdict::Pass, &other_sketch, &e, &s));
        assert_ne!(base, verdict(1, 0, &who, Verdict::Pass, &sk, &s, &s));
        assert_ne!(base, verdict(1, 0, &who, Verdict::Pass, &sk, &e, &e));
        // Same inputs under another rule never collide: the tags differ.
        assert_ne!(drill_result(1, &who, &e, &s), tagged(VERDICT, &(1u64, &who, &e, &s)));
    }
}
