//! What verification costs the owner, and what a verifier earns.
//!
//! A verifier is paid for the work it is asked to do, at the trainer's own rate. A vote that replays
//! `r` of the job's `N` segments also runs the full-pass rules and the metrics check, a fixed share
//! `o` of the training's compute ([`ergon_protocol::overhead::overhead_ppb`]: forward passes over the
//! validation set and the rules' sample, against the training's), so it earns
//! `price × (r / N + o) × (1 + VerifierFeeMarkup)`. The price is what the market agreed one run of
//! the whole training is worth, so a fee exceeds the compute it pays for by the markup, which pays
//! for the download and the collateral the verifier freezes (measured: `docs/pot-calibration.md`).
//!
//! **A floor whatever the bid** (issue 34, item 2): the price a fee is a share of is at least
//! `ReplayPricePerUt` of the job's device class for the job's work ([`fee_basis`]): the class its
//! winning bid named, so a GPU-hour job pays its GPU verifiers for GPU time, not CPU time (issue 37,
//! item 4). Fees used to follow the bid alone, so a
//! trainer bidding the market's floor (`MinPricePerUt`) paid its verifiers less than their replay
//! costs (measured uncached: 44.5 % of the training's time for a fee of 24.4 % of the price,
//! `docs/pot-calibration.md`), and the seats it drew were better off not replaying. A forger, who
//! does not train, bids the floor without loss; the replay that catches it is still paid.
//!
//! The owner's budget must cover the price and every vote that could ever happen (`Verifiers` in
//! the first round, `DisputeVerifiers` in each later one), so a verifier is never asked to work for
//! an escrow that ran dry; what is not spent is refunded.

use crate::{BalanceOf, Config};
use ergon_protocol::DeviceClass;
use frame_support::traits::Get;
use sp_runtime::{
    helpers_128bit::multiply_by_rational_with_rounding,
    traits::{SaturatedConversion, Saturating},
    Rounding,
};

/// Parts per billion: the unit of `VerifierFeeMarkup`.
const BILLION: u128 = 1_000_000_000;

/// Most votes one job can pay for: `Verifiers` in round 0 and `DisputeVerifiers` in each later round.
pub fn votes_possible<T: Config>() -> u128 {
    let later = T::MaxRounds::get().saturating_sub(1) as u128;
    (T::Verifiers::get() as u128)
        .saturating_add(later.saturating_mul(T::DisputeVerifiers::get() as u128))
}

/// Segments one vote replays at most: `SegmentsPerRound`, or all of a shorter bundle's.
fn replayed_at_most<T: Config>(segments: u64) -> u128 {
    (T::SegmentsPerRound::get() as u128).min(segments as u128)
}

/// `1 + VerifierFeeMarkup`, in parts per billion.
fn with_markup<T: Config>() -> u128 {
    BILLION.saturating_add(T::VerifierFeeMarkup::get().deconstruct() as u128)
}

/// A vote's share of the price before the markup, in parts per billion of it, as the fraction
/// `(numerator, denominator)`: `replayed / segments + overhead_ppb / 10⁹`.
fn share(segments: u64, replayed: u128, overhead_ppb: u64) -> (u128, u128) {
    let segments = segments.max(1) as u128;
    let numerator = replayed
        .min(segments)
        .saturating_mul(BILLION)
        .saturating_add((overhead_ppb as u128).saturating_mul(segments));
    (numerator, segments.saturating_mul(BILLION))
}

/// `ReplayPricePerUt` of `device`'s tier for `work_micro_ut` of work, rounded up: the least a fee
/// is a share of.
fn floor_basis<T: Config>(work_micro_ut: u128, device: DeviceClass) -> u128 {
    let per_ut: u128 = T::ReplayPricePerUt::get().of(device).saturated_into();
    multiply_by_rational_with_rounding(work_micro_ut, per_ut, 1_000_000, Rounding::Up)
        .unwrap_or(u128::MAX)
}

/// What a vote's fee is a share of: the trainer's `price`, or `ReplayPricePerUt` of the job's
/// class (`device`) for its `work_micro_ut` when that is more.
pub fn fee_basis<T: Config>(price: BalanceOf<T>, work_micro_ut: u128, device: DeviceClass) -> u128 {
    let price: u128 = price.saturated_into();
    price.max(floor_basis::<T>(work_micro_ut, device))
}

/// The fee of a vote that replayed `replayed` of a job's `segments` segments, on a job of
/// `work_micro_ut` whose rules and metrics cost `overhead_ppb` of its training, trained on
/// `device`, at `price` (or the class's floor, [`fee_basis`]), rounded up.
pub fn vote_fee<T: Config>(
    price: BalanceOf<T>,
    work_micro_ut: u128,
    segments: u64,
    replayed: u32,
    overhead_ppb: u64,
    device: DeviceClass,
) -> BalanceOf<T> {
    let price = fee_basis::<T>(price, work_micro_ut, device);
    let (numerator, denominator) = share(segments, replayed as u128, overhead_ppb);
    let fee = multiply_by_rational_with_rounding(
        price,
        numerator.saturating_mul(with_markup::<T>()),
        denominator.saturating_mul(BILLION),
        Rounding::Up,
    )
    .unwrap_or(u128::MAX);
    fee.saturated_into()
}

/// The highest price a job with `budget`, `work_micro_ut` of work, `segments` segments and an
/// overhead of `overhead_ppb`, trained on `device`, can pay, so that the price plus the fees of every possible vote (each
/// at most [`vote_fee`] of `SegmentsPerRound` segments) fit in the budget. With `a = (r / N + o) ×
/// (1 + markup) × votes` and `F` the floor basis: `budget / (1 + a)` when that is at least `F`,
/// else `budget − a × F` (the fees are then the floor's, whatever the price); rounded down.
pub fn max_price<T: Config>(
    budget: BalanceOf<T>,
    work_micro_ut: u128,
    segments: u64,
    overhead_ppb: u64,
    device: DeviceClass,
) -> BalanceOf<T> {
    let budget: u128 = budget.saturated_into();
    let (numerator, denominator) = share(segments, replayed_at_most::<T>(segments), overhead_ppb);
    // Everything in units of 10⁻¹⁸ of the fee basis: the price itself, plus the reserve.
    let whole = denominator.saturating_mul(BILLION);
    let reserve =
        numerator.saturating_mul(with_markup::<T>()).saturating_mul(votes_possible::<T>());
    let price = multiply_by_rational_with_rounding(
        budget,
        whole,
        whole.saturating_add(reserve),
        Rounding::Down,
    )
    .unwrap_or(0);
    let floor = floor_basis::<T>(work_micro_ut, device);
    let price = if price >= floor {
        price
    } else {
        let floor_fees = multiply_by_rational_with_rounding(floor, reserve, whole, Rounding::Up)
            .unwrap_or(u128::MAX);
        budget.saturating_sub(floor_fees).min(floor)
    };
    // The fees are rounded up one planck each: keep room for that.
    price.saturating_sub(votes_possible::<T>()).saturated_into()
}

/// The least budget for a job of `work_micro_ut`, `segments` segments and an overhead of
/// `overhead_ppb`, trained on `device`: `MinBudget`, or more where the least price of the work
/// (`min_price`) plus the reserve for every possible vote needs it — the smallest budget whose
/// [`max_price`] reaches `min_price`. `max_price` never falls as the budget grows, so a doubling
/// then a binary search finds it; a work so large that no balance pays for it gives the largest
/// balance.
pub fn least_budget<T: Config>(
    min_price: BalanceOf<T>,
    work_micro_ut: u128,
    segments: u64,
    overhead_ppb: u64,
    device: DeviceClass,
) -> BalanceOf<T> {
    let pays = |budget: u128| {
        max_price::<T>(budget.saturated_into(), work_micro_ut, segments, overhead_ppb, device)
            >= min_price
    };
    let mut low: u128 = T::MinBudget::get().saturated_into();
    if pays(low) {
        return low.saturated_into();
    }
    // `low` does not pay; double until a `high` does (none at all: the largest balance).
    let mut high = low.max(1);
    while !pays(high) {
        if high == u128::MAX {
            return high.saturated_into();
        }
        low = high;
        high = high.saturating_mul(2);
    }
    // Invariant: `low` does not pay, `high` does.
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if pays(mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    high.saturated_into()
}

/// What the owner has reserved for verification at `price` on `device`: every possible vote's fee.
pub fn reserve<T: Config>(
    price: BalanceOf<T>,
    work_micro_ut: u128,
    segments: u64,
    overhead_ppb: u64,
    device: DeviceClass,
) -> BalanceOf<T> {
    let replayed = replayed_at_most::<T>(segments) as u32;
    let per_vote = vote_fee::<T>(price, work_micro_ut, segments, replayed, overhead_ppb, device);
    per_vote.saturating_mul(votes_possible::<T>().saturated_into())
}
