//! Verifiers' device classes and capacities (issue 37): which rounds a verifier may be drawn for,
//! how long its commit window is, and what its seat and its declaration put at stake.
//!
//! A verifier declares a [`DeviceClass`] and a replay capacity (micro-ut per hour) when it joins
//! ([`crate::Pallet::set_verifier`]). A round's work is its replay plus the rules' and metrics'
//! evaluation ([`round_work`]); a verifier is drawn for it only if its class verifies the bundle
//! and it finishes the round within `MaxReplayWindow` at its declared capacity, after the rounds
//! it was drawn for before ([`ready_at`]). The round's commit window is its slowest seat's finish
//! plus `CommitWindow` (download, checks, the transaction). So a job of GPU-hours is served by
//! GPU verifiers in minutes, a CPU is never handed more than it said it does, and the largest job
//! the chain takes is set by the largest capacity a verifier may declare ([`max_round_work`]),
//! not by one replay limit sized for CPUs.
//!
//! **What a seat puts at stake.** A seat freezes its round's fee, or `VerifierCollateral` if that
//! is more ([`seat_collateral`]): a fee of thousands of ERG on a GPU-hour job is not guarded by a
//! collateral sized for toy jobs. A declaration must be backed by a free bond that covers a round
//! filling the commit window at the declared capacity and the replay floor price
//! ([`ergon_protocol::capacity::BackingTerms`]): declaring a capacity costs bond in proportion.

use ergon_protocol::DeviceClass;
use frame_support::traits::Get;
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{SaturatedConversion, Saturating};

use crate::{BalanceOf, Config, JobOf, Pallet, VerifierEntry};

/// Work (micro-ut) of one vote replaying `count` of the job's segments: the replay's share of the
/// training ([`crate::verification::replay_work`]) and the forward passes of the rules and the
/// metrics ([`ergon_protocol::overhead::evaluation_flops`]).
pub fn vote_work(
    spec: &ergon_job_spec::JobSpec,
    work_micro_ut: u128,
    segments: u64,
    count: u32,
    forward_flops_per_sample: u128,
) -> u128 {
    let replay = crate::verification::replay_work(work_micro_ut, segments, count);
    let evaluation =
        ergon_job_spec::flops::flops_to_micro_ut(ergon_protocol::overhead::evaluation_flops(
            forward_flops_per_sample,
            spec.validation.samples,
        ));
    replay.saturating_add(evaluation)
}

/// Work (micro-ut) of one vote of a round of `job` that replays `count` segments.
pub fn round_work<T: Config>(job: &JobOf<T>, count: u32) -> u128 {
    let forward = job.spec.validate().map(|s| s.forward_flops_per_sample).unwrap_or(u128::MAX);
    vote_work(&job.spec, job.work_micro_ut, job.segments(), count, forward)
}

/// Milliseconds of `blocks` blocks.
fn blocks_ms<T: Config>(blocks: BlockNumberFor<T>) -> u64 {
    T::MillisecsPerBlock::get().saturating_mul(blocks.saturated_into::<u64>())
}

/// Whole blocks `work` micro-ut take at `capacity` micro-ut per hour (the fraction of a block
/// falls in `CommitWindow`'s margin).
pub fn replay_blocks<T: Config>(work: u128, capacity: u128) -> BlockNumberFor<T> {
    let ms = ergon_protocol::capacity::time_for(work, capacity);
    (ms / T::MillisecsPerBlock::get().max(1)).saturated_into()
}

/// The block at which `entry` would finish a round of `work` drawn at `now`: after the rounds it
/// was drawn for before, at its declared capacity.
pub fn ready_at<T: Config>(
    entry: &VerifierEntry<BlockNumberFor<T>>,
    work: u128,
    now: BlockNumberFor<T>,
) -> BlockNumberFor<T> {
    entry.busy_until.max(now).saturating_add(replay_blocks::<T>(work, entry.capacity))
}

/// Whether a verifier of class `verifier` is drawn for bundles trained on `bundle`: its class
/// verifies the bundle ([`DeviceClass::verifies`]) and the job's fee floor pays its class's
/// (`ReplayPricePerUt`): a CPU, whose replay of a ut costs several GPUs', is not drawn for a
/// GPU-priced job whose fees would not pay its time (issue 37, item 4).
pub fn verifies_at_its_price<T: Config>(
    verifier: DeviceClass,
    bundle: DeviceClass,
    across_devices: bool,
) -> bool {
    let floors = T::ReplayPricePerUt::get();
    verifier.verifies(bundle, across_devices) && floors.of(verifier) <= floors.of(bundle)
}

/// Whether `entry` may be drawn at `now` for a round of `work` on a bundle trained on `bundle`:
/// its class verifies the bundle at its price, and it finishes within `MaxReplayWindow`.
pub fn can_serve<T: Config>(
    entry: &VerifierEntry<BlockNumberFor<T>>,
    bundle: DeviceClass,
    across_devices: bool,
    work: u128,
    now: BlockNumberFor<T>,
) -> bool {
    verifies_at_its_price::<T>(entry.class, bundle, across_devices)
        && ready_at::<T>(entry, work, now) <= now.saturating_add(T::MaxReplayWindow::get())
}

/// Whether `entry`'s class and capacity could ever serve a round of `work` on `bundle` (with an
/// empty queue): what the pool floor counts.
pub fn could_serve<T: Config>(
    entry: &VerifierEntry<BlockNumberFor<T>>,
    bundle: DeviceClass,
    across_devices: bool,
    work: u128,
) -> bool {
    verifies_at_its_price::<T>(entry.class, bundle, across_devices)
        && replay_blocks::<T>(work, entry.capacity) <= T::MaxReplayWindow::get()
}

/// The collateral a seat of `job`'s round replaying `count` segments of a bundle trained on
/// `device` freezes: its fee, or `VerifierCollateral` if that is more.
pub fn seat_collateral<T: Config>(
    job: &JobOf<T>,
    price: BalanceOf<T>,
    count: u32,
    device: DeviceClass,
) -> BalanceOf<T> {
    let fee = crate::fees::vote_fee::<T>(
        price,
        job.work_micro_ut,
        job.segments(),
        count,
        job.overhead_ppb(),
        device,
    );
    fee.max(T::VerifierCollateral::get())
}

impl<T: Config> Pallet<T> {
    /// Most work (micro-ut) one vote may be: what the largest declarable capacity does within
    /// `MaxReplayWindow`. A spec whose vote is more is refused (`VerificationTooLong`).
    pub fn max_round_work() -> u128 {
        ergon_protocol::capacity::work_in(
            T::MaxVerifierCapacity::get(),
            blocks_ms::<T>(T::MaxReplayWindow::get()),
        )
    }

    /// The chain's terms for the bond behind a capacity declared for `class`: `CommitWindow`,
    /// the class's replay floor, the fee markup and `VerifierCollateral`.
    pub fn backing_terms(class: DeviceClass) -> ergon_protocol::capacity::BackingTerms {
        ergon_protocol::capacity::BackingTerms {
            window_ms: blocks_ms::<T>(T::CommitWindow::get()),
            replay_price_per_ut: T::ReplayPricePerUt::get().of(class).saturated_into(),
            markup_ppb: T::VerifierFeeMarkup::get().deconstruct(),
            least: T::VerifierCollateral::get().saturated_into(),
        }
    }

    /// The free bond a `capacity` declared for `class` needs: the collateral of a round filling
    /// `CommitWindow` at that capacity and the class's replay floor, or `VerifierCollateral` if
    /// that is more ([`ergon_protocol::capacity::BackingTerms::backing`]).
    pub fn capacity_backing(class: DeviceClass, capacity: u128) -> BalanceOf<T> {
        Self::backing_terms(class).backing(capacity).saturated_into()
    }

    /// The device class `job` is trained on: its winning bid's (a job assigned before bids named
    /// one was priced at the CPU's floor, the only one then).
    pub fn job_device(job: crate::JobId) -> DeviceClass {
        crate::BundleDevice::<T>::get(job).unwrap_or(DeviceClass::Cpu)
    }
}
