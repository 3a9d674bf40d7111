//! What verification costs the owner, and what a verifier earns.
//!
//! A verifier is paid for the replay it is asked to do, at the trainer's own rate: a vote that
//! replays `r` of the job's `N` segments earns `price × r / N × (1 + VerifierFeeMarkup)`. The price
//! is what the market agreed one run of the whole training is worth, and a replay of `r` segments
//! is `r / N` of that run's steps (measured: a verifier's whole check, downloads and the rules
//! included, costs less than its replayed share of training; `docs/pot-calibration.md`), so a fee
//! always exceeds the work it pays for, and the markup pays for the download and the collateral
//! the verifier freezes. The owner's budget must cover the price and every vote that could ever
//! happen (`Verifiers` in the first round, `DisputeVerifiers` in each later one), so a verifier
//! is never asked to work for an escrow that ran dry; what is not spent is refunded.

use crate::{BalanceOf, Config};
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

/// The fee of a vote that replayed `replayed` of a job's `segments` segments at `price`, rounded up.
pub fn vote_fee<T: Config>(price: BalanceOf<T>, segments: u64, replayed: u32) -> BalanceOf<T> {
    let price: u128 = price.saturated_into();
    let replayed = (replayed as u128).min(segments as u128);
    let fee = multiply_by_rational_with_rounding(
        price,
        replayed.saturating_mul(with_markup::<T>()),
        (segments.max(1) as u128).saturating_mul(BILLION),
        Rounding::Up,
    )
    .unwrap_or(u128::MAX);
    fee.saturated_into()
}

/// The highest price a job with `budget` and `segments` segments can pay, so that the price plus
/// the fees of every possible vote (each at most [`vote_fee`] of `SegmentsPerRound` segments) fit
/// in the budget: `budget × N / (N + r × (1 + markup) × votes)`, rounded down.
pub fn max_price<T: Config>(budget: BalanceOf<T>, segments: u64) -> BalanceOf<T> {
    let budget: u128 = budget.saturated_into();
    let n = (segments.max(1) as u128).saturating_mul(BILLION);
    let reserve = replayed_at_most::<T>(segments)
        .saturating_mul(with_markup::<T>())
        .saturating_mul(votes_possible::<T>());
    let price =
        multiply_by_rational_with_rounding(budget, n, n.saturating_add(reserve), Rounding::Down)
            .unwrap_or(0);
    // The fees are rounded up one planck each: keep room for that.
    price.saturating_sub(votes_possible::<T>()).saturated_into()
}

/// What the owner has reserved for verification at `price`: every possible vote's fee.
pub fn reserve<T: Config>(price: BalanceOf<T>, segments: u64) -> BalanceOf<T> {
    let per_vote = vote_fee::<T>(price, segments, replayed_at_most::<T>(segments) as u32);
    per_vote.saturating_mul(votes_possible::<T>().saturated_into())
}
