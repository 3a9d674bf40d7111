//! What a party commits to before it reveals: binding the job (task), the round and the party's
//! account stops anyone from replaying another party's commitment as its own.

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
pub enum Verdict {
    /// Every check passed.
    Pass,
    /// A check failed (evidence in the verifier's report, whose hash is revealed).
    Fail,
}

/// A verifier's commitment to `verdict` on job `job`, round `round`:
/// `blake2_256(SCALE(("ergon/verdict/v1", job, round, verifier, verdict, evidence, salt)))`.
pub fn verdict<A: Encode + ?Sized>(
    job: u64,
    round: u32,
    verifier: &A,
    verdict: Verdict,
    evidence: &[u8; 32],
    salt: &[u8; 32],
) -> [u8; 32] {
    tagged(VERDICT, &(job, round, verifier, verdict, evidence, salt))
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
        let base = verdict(1, 0, &who, Verdict::Pass, &e, &s);
        assert_ne!(base, verdict(2, 0, &who, Verdict::Pass, &e, &s));
        assert_ne!(base, verdict(1, 1, &who, Verdict::Pass, &e, &s));
        assert_ne!(base, verdict(1, 0, &other, Verdict::Pass, &e, &s));
        assert_ne!(base, verdict(1, 0, &who, Verdict::Fail, &e, &s));
        assert_ne!(base, verdict(1, 0, &who, Verdict::Pass, &s, &s));
        assert_ne!(base, verdict(1, 0, &who, Verdict::Pass, &e, &e));
        // Same inputs under another rule never collide: the tags differ.
        assert_ne!(drill_result(1, &who, &e, &s), tagged(VERDICT, &(1u64, &who, &e, &s)));
    }
}
