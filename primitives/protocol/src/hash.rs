//! The domain-tag scheme: every protocol hash is `blake2_256(SCALE((tag, payload)))`, where `tag` is
//! the byte string `ergon/<rule>/v<n>` (SCALE-encoded with its compact length) and `payload` the
//! SCALE encoding of the rule's inputs. Distinct tags keep a hash made for one rule from ever being
//! accepted by another; the version lets a rule change without ambiguity.

use codec::Encode;

pub use sp_crypto_hashing::blake2_256;

/// Tag of the training seed of a job ([`crate::seed::job_seed`]).
pub const JOB_SEED: &[u8] = b"ergon/job-seed/v1";
/// Tag of a verifier's verdict commitment ([`crate::commitments::verdict`]).
pub const VERDICT: &[u8] = b"ergon/verdict/v4";
/// Tag of a segment's replay-evidence key ([`crate::evidence::key`]).
pub const EVIDENCE_KEY: &[u8] = b"ergon/replay-evidence/v1";
/// Tag of the blocks of projection signs of a sketch ([`crate::evidence::Signs`]).
pub const EVIDENCE_SIGNS: &[u8] = b"ergon/evidence-signs/v1";
/// Tag of a synthetic drilling task's seed ([`crate::seed::synthetic_task`]).
pub const SYNTHETIC_TASK: &[u8] = b"ergon/synthetic-task/v1";
/// Tag of a drilling executor's result commitment ([`crate::commitments::drill_result`]).
pub const DRILL_RESULT: &[u8] = b"ergon/drill-result/v1";
/// Tag of a random stream's key ([`crate::draw::Stream`]).
pub const STREAM: &[u8] = b"ergon/stream/v1";
/// Tag of a candidate's race key ([`crate::draw::weighted_order`]).
pub const RACE: &[u8] = b"ergon/race/v1";
/// Tag of the seed of a draw from chain randomness ([`draw_seed`]).
pub const DRAW: &[u8] = b"ergon/draw/v1";

/// `blake2_256(SCALE((tag, payload)))`.
pub fn tagged<P: Encode + ?Sized>(tag: &[u8], payload: &P) -> [u8; 32] {
    let mut bytes = tag.encode();
    payload.encode_to(&mut bytes);
    sp_crypto_hashing::blake2_256(&bytes)
}

/// The seed of one draw: the chain's `randomness` bound to what is drawn (`subject`, e.g. a pallet
/// name with a job id and round), so that two draws from the same randomness are independent.
pub fn draw_seed<S: Encode + ?Sized>(randomness: &[u8; 32], subject: &S) -> [u8; 32] {
    let mut payload = randomness.encode();
    subject.encode_to(&mut payload);
    tagged(DRAW, &payload[..])
}

/// The seed of a job's verification round `round` from the chain's fresh `randomness`: the job
/// market's draw of verifiers and segments (one definition for the pallet and whoever recomputes a
/// draw, e.g. the live test that shows nothing known at the commitment predicts it).
pub fn job_round_seed(randomness: &[u8; 32], job: u64, round: u32) -> [u8; 32] {
    draw_seed(randomness, &(b"ergon/job-market/draw", job, round))
}
