//! Verifiers' declared replay capacity (issue 37): how long a replay takes at a capacity, and what
//! bond backs a capacity. The runtime checks declarations with these; the daemon sizes its own
//! declaration to its bond with [`backed_capacity`] — one rule, both sides.
//!
//! Capacities are in micro-ut per hour, work in micro-ut (1 ut = 432·10⁹ FLOPs).

/// Milliseconds in an hour.
const MS_PER_HOUR: u128 = 3_600_000;
/// Parts per billion.
const BILLION: u128 = 1_000_000_000;
/// Micro-ut per ut.
const MICRO: u128 = 1_000_000;

/// Work (micro-ut) a `capacity` does in `ms` milliseconds, rounded down.
pub fn work_in(capacity: u128, ms: u64) -> u128 {
    capacity.saturating_mul(ms as u128) / MS_PER_HOUR
}

/// Milliseconds `work` micro-ut take at `capacity`, rounded up (`u64::MAX` at capacity 0 or past
/// it).
pub fn time_for(work: u128, capacity: u128) -> u64 {
    if capacity == 0 {
        return u64::MAX;
    }
    let ms = work.saturating_mul(MS_PER_HOUR).div_ceil(capacity);
    ms.min(u64::MAX as u128) as u64
}

/// The bond a declared `capacity` needs (plancks): the fee of a round that fills a commit window of
/// `window_ms` at that capacity, at the replay floor `replay_price_per_ut` (plancks per ut) plus
/// the verifier's markup `markup_ppb` — the collateral such a round freezes, since a seat puts
/// at stake at least what it earns. Rounded up.
pub fn backing(capacity: u128, window_ms: u64, replay_price_per_ut: u128, markup_ppb: u32) -> u128 {
    let basis = work_in(capacity, window_ms).saturating_mul(replay_price_per_ut).div_ceil(MICRO);
    basis.saturating_mul(BILLION + markup_ppb as u128).div_ceil(BILLION)
}

/// The largest capacity (micro-ut per hour, at most `max`) whose [`backing`] is at most `bond`.
pub fn backed_capacity(
    bond: u128,
    window_ms: u64,
    replay_price_per_ut: u128,
    markup_ppb: u32,
    max: u128,
) -> u128 {
    let fits = |c: u128| backing(c, window_ms, replay_price_per_ut, markup_ppb) <= bond;
    if fits(max) {
        return max;
    }
    // `backing` never falls as the capacity grows: bisect between 0 (fits: backing 0) and `max`.
    let (mut low, mut high) = (0u128, max);
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hour_at_a_capacity_is_that_capacity_of_work() {
        assert_eq!(work_in(1_000_000_000, 3_600_000), 1_000_000_000);
        assert_eq!(time_for(1_000_000_000, 1_000_000_000), 3_600_000);
        assert_eq!(time_for(1, 1_000_000_000), 1, "rounded up");
        assert_eq!(time_for(1, 0), u64::MAX);
    }

    #[test]
    fn the_backed_capacity_is_the_largest_the_bond_covers() {
        let erg = crate::units::ERG;
        // 1 000 ut/h, a 30-minute window, 20 ERG per ut, a 20 % markup: 500 ut → 12 000 ERG.
        assert_eq!(backing(1_000 * MICRO, 1_800_000, 20 * erg, 200_000_000), 12_000 * erg);
        for bond in [0, 1, 119 * erg, 12_000 * erg, 12_001 * erg] {
            let c = backed_capacity(bond, 1_800_000, 20 * erg, 200_000_000, u64::MAX as u128);
            assert!(backing(c, 1_800_000, 20 * erg, 200_000_000) <= bond);
            assert!(backing(c + 1, 1_800_000, 20 * erg, 200_000_000) > bond, "bond {bond}");
        }
        assert_eq!(backed_capacity(u128::MAX, 1, 1, 0, 77), 77, "capped");
    }
}
