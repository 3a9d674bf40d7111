//! Verifiers' declared replay capacity (issue 37): how long a replay takes at a capacity, and what
//! bond backs a capacity. The runtime checks declarations with these; the daemon sizes its own
//! declaration to its bond with [`BackingTerms::backed_capacity`] — one rule, both sides.
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

/// The chain's terms for the bond behind a declared capacity: its commit window, its replay floor
/// (plancks per ut), the verifier's fee markup (parts per billion) and the least collateral a seat
/// freezes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackingTerms {
    /// The commit window, in milliseconds.
    pub window_ms: u64,
    /// `ReplayPricePerUt`, plancks per ut.
    pub replay_price_per_ut: u128,
    /// `VerifierFeeMarkup`, parts per billion.
    pub markup_ppb: u32,
    /// `VerifierCollateral`, plancks: the least any declaration needs.
    pub least: u128,
}

impl BackingTerms {
    /// The bond a declared `capacity` needs (plancks): the fee of a round that fills the commit
    /// window at that capacity, at the replay floor plus the markup — the collateral such a round
    /// freezes, since a seat puts at stake at least what it earns — or `least` if that is more.
    /// Rounded up.
    pub fn backing(&self, capacity: u128) -> u128 {
        let basis = work_in(capacity, self.window_ms)
            .saturating_mul(self.replay_price_per_ut)
            .div_ceil(MICRO);
        basis.saturating_mul(BILLION + self.markup_ppb as u128).div_ceil(BILLION).max(self.least)
    }

    /// The largest capacity (micro-ut per hour, at most `max`) whose [`Self::backing`] is at most
    /// `bond`; 0 when the bond does not cover `least`.
    pub fn backed_capacity(&self, bond: u128, max: u128) -> u128 {
        let fits = |c: u128| self.backing(c) <= bond;
        if !fits(0) {
            return 0;
        }
        if fits(max) {
            return max;
        }
        // `backing` never falls as the capacity grows: bisect between 0 (fits) and `max` (not).
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
        let terms = BackingTerms {
            window_ms: 1_800_000,
            replay_price_per_ut: 20 * erg,
            markup_ppb: 200_000_000,
            least: 0,
        };
        assert_eq!(terms.backing(1_000 * MICRO), 12_000 * erg);
        for bond in [0, 1, 119 * erg, 12_000 * erg, 12_001 * erg] {
            let c = terms.backed_capacity(bond, u64::MAX as u128);
            assert!(terms.backing(c) <= bond);
            assert!(terms.backing(c + 1) > bond, "bond {bond}");
        }
        let tiny = BackingTerms { window_ms: 1, replay_price_per_ut: 1, markup_ppb: 0, least: 0 };
        assert_eq!(tiny.backed_capacity(u128::MAX, 77), 77, "capped");
        // Every declaration needs the least collateral.
        let floored = BackingTerms { least: 100 * erg, ..terms };
        assert_eq!(floored.backing(1), 100 * erg);
        assert_eq!(floored.backed_capacity(99 * erg, u64::MAX as u128), 0);
    }
}
