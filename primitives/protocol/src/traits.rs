//! What the pallets ask of each other, defined here so that no pallet depends on another pallet's
//! crate (as `sp-staking` does for pallet-staking): trainer staking implements [`BondInspect`],
//! [`Obligations`] and [`Slashing`]; compute power implements [`ComputePowerLedger`]; the runtime
//! implements [`FreshRandomness`] from BABE. The job market and drilling only see these traits.

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;
use sp_runtime::{DispatchResult, Perbill};

/// Amount of work in micro-ut (10⁻⁶ unit of work; 1 ut = 432·10⁹ FLOPs).
pub type MicroUt = u128;

/// Which kind of verified work a credit is for.
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
pub enum WorkKind {
    /// Proof of Drilling: benchmark work confirmed by redundant agreement (D).
    Drilling,
    /// Proof of Training: a training job that passed verification (T).
    Training,
}

/// How other pallets (job market, drilling, trainer staking) read and credit computing power.
pub trait ComputePowerLedger<AccountId> {
    /// Adds verified work of `kind` to `who`'s credit.
    fn credit(who: &AccountId, kind: WorkKind, amount: MicroUt);
    /// `who`'s effective computing power now (decayed).
    fn ecp(who: &AccountId) -> MicroUt;
    /// The whole network's effective computing power now (decayed): what caps a single credit.
    fn total_ecp() -> MicroUt;
}

/// Why stake was slashed.
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
pub enum SlashReason {
    /// The trainer's checkpoint bundle failed Proof of Training.
    FailedProofOfTraining,
    /// A verifier voted against the quorum.
    LostVerificationVote,
    /// An accepted job, verification or drilling task was not delivered in time.
    NoShow,
    /// A drilling result disagreed with the other executors.
    DrillingDisagreement,
    /// The validator signed two blocks (BABE) or two votes (GRANDPA) for the same slot or round.
    Equivocation,
    /// The validator neither authored a block nor sent a heartbeat in a whole session
    /// (pallet-im-online): a seat held without validating.
    Unresponsive,
}

/// A duty that holds part of a trainer's bond as collateral until it settles.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Encode,
    Decode,
    DecodeWithMemTracking,
    Debug,
    TypeInfo,
    MaxEncodedLen,
)]
pub enum Obligation {
    /// Training job `0`, assigned to the trainer: it must commit a bundle by the deadline.
    Training(u64),
    /// Verifying job `job` (any round): the verifier must commit and reveal in time.
    Verification {
        /// The job.
        job: u64,
        /// The verification round.
        round: u32,
    },
    /// Drilling task `0`: the executor must commit and reveal a result.
    Drilling(u64),
}

/// What other pallets need to know about a trainer's bond.
pub trait BondInspect<AccountId> {
    /// The balance type of bonds.
    type Balance;
    /// Active (not unbonding) bond of `who`.
    fn active_bond(who: &AccountId) -> Self::Balance;
    /// Whether `who`'s active bond reaches the minimum needed to author, bid, verify or drill.
    fn is_eligible(who: &AccountId) -> bool;
    /// Every eligible trainer with its active bond (at most `MaxBonders` of them).
    fn eligible_trainers() -> alloc::vec::Vec<(AccountId, Self::Balance)>;
    /// Number of bonded accounts, eligible or not: what [`Self::eligible_trainers`] reads.
    fn bonder_count() -> u32;
}

/// Slashing of bonded stake, for the pallets that judge work.
pub trait Slashing<AccountId> {
    /// The balance type of bonds.
    type Balance;
    /// Slashes up to `amount` of `who`'s bond (active first, then unbonding stake) for `reason`;
    /// returns what was actually taken, which is at most the bond. Emits `Slashed`.
    fn slash(who: &AccountId, amount: Self::Balance, reason: SlashReason) -> Self::Balance;
}

/// Collateral for duties, for the pallets that hand out work.
pub trait Obligations<AccountId> {
    /// The balance type of bonds.
    type Balance;
    /// Active bond of `who` not yet obligated: the most a new obligation can freeze.
    fn free_collateral(who: &AccountId) -> Self::Balance;
    /// Freezes `amount` of `who`'s active bond for `what`. Fails when the free collateral is less,
    /// when `who` has `MaxObligations` already, or when `what` is obligated already.
    fn obligate(who: &AccountId, what: Obligation, amount: Self::Balance) -> DispatchResult;
    /// The duty is done: the collateral is free again. Returns what was obligated (zero if none).
    fn release(who: &AccountId, what: Obligation) -> Self::Balance;
    /// The duty failed: slashes `share` of the obligation's collateral for `reason` and ends the
    /// obligation. Returns what was slashed (zero if there was no obligation).
    fn slash_obligation(
        who: &AccountId,
        what: Obligation,
        share: Perbill,
        reason: SlashReason,
    ) -> Self::Balance;
    /// Like [`Self::slash_obligation`], but what is slashed is paid to `beneficiaries` in equal
    /// parts: those the failed duty wronged (a minority proven right is made whole from the slashed
    /// majority). With no beneficiary it goes where every slash goes.
    fn slash_obligation_to(
        who: &AccountId,
        what: Obligation,
        share: Perbill,
        reason: SlashReason,
        beneficiaries: &[AccountId],
    ) -> Self::Balance;
    /// Like [`Self::slash_obligation`], but the first `up_to` of what is slashed is paid to
    /// `wronged` (what the failed duty cost it); the rest goes where every slash goes.
    fn slash_obligation_compensating(
        who: &AccountId,
        what: Obligation,
        share: Perbill,
        reason: SlashReason,
        wronged: &AccountId,
        up_to: Self::Balance,
    ) -> Self::Balance;
    /// Collateral `who` holds for `what` (zero if none).
    fn collateral(who: &AccountId, what: Obligation) -> Self::Balance;
}

/// Randomness that nobody knew, and no single block author could steer, when a commitment was made.
///
/// The runtime implements it with an accumulator of every block's VRF output
/// (`pallet-fresh-randomness`), read for a commitment only once it holds enough outputs of blocks
/// after it. A draw from it must also take its candidates from before `since` (the block after the
/// commitment): a candidate list that could change after the randomness became known could be
/// ground against it. The value may change from block to block: a caller draws once, when
/// [`Self::fresh`] first answers, and keeps what it drew.
pub trait FreshRandomness<BlockNumber> {
    /// Randomness whose unpredictable part was all produced after block `committed_at`, with the
    /// block from which candidates are excluded (`since > committed_at`); `None` while there is
    /// none yet.
    fn fresh(committed_at: BlockNumber) -> Option<([u8; 32], BlockNumber)>;
    /// Blocks to wait before asking again for a commitment at `committed_at` when [`Self::fresh`]
    /// had nothing (at least one): about when its randomness appears.
    fn retry_in(committed_at: BlockNumber) -> BlockNumber;
    /// Benchmarks only: makes [`Self::fresh`] answer for a commitment at `committed_at` (does
    /// nothing unless the implementation needs it).
    fn benchmark_make_fresh(_committed_at: BlockNumber) {}
}

/// Makes eligible trainers for other pallets' benchmarks (their `BenchmarkHelper`).
pub trait BenchmarkTrainers<AccountId> {
    /// Funds `who` and bonds enough to make it an eligible trainer that can put up collateral.
    fn make_trainer(who: &AccountId);
}

/// [`FreshRandomness`] for mock runtimes, as if every epoch were one block long: randomness that
/// began at `committed_at + 1` can be read from block `committed_at + 2` on, while `Available`
/// says so. `Now` gives the block number.
pub struct OneBlockEpochs<Now, Available>(core::marker::PhantomData<(Now, Available)>);

impl<Now, Available> FreshRandomness<u64> for OneBlockEpochs<Now, Available>
where
    Now: sp_runtime::traits::Get<u64>,
    Available: sp_runtime::traits::Get<bool>,
{
    fn fresh(committed_at: u64) -> Option<([u8; 32], u64)> {
        let since = committed_at.saturating_add(1);
        (Available::get() && Now::get() > since)
            .then(|| (crate::hash::tagged(b"ergon/test-randomness/v1", &since), since))
    }

    fn retry_in(_committed_at: u64) -> u64 {
        1
    }
}
