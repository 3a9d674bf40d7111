//! Every duration of the protocol, in one place, with its value in both builds of the runtime:
//!
//! - the production runtime (the default): 2-second slots, ~6-second blocks, 200-second epochs;
//! - the `fast-runtime` build for test networks: the same consensus (BABE's VRF lottery with the
//!   same `c`, GRANDPA), the same protocol and the same counts (verifiers, segments, fresh VRF
//!   outputs, suspension sessions), on ¼-length slots, ⅛-length epochs and windows a tenth or less
//!   of production's in wall time, so that a job, a dispute or a drilling task settles in a minute
//!   or two instead of ten. The node's integration tests run on it (`cargo build -p ergon-node
//!   --features fast-runtime`); the demo and the container images run the production runtime.
//!
//! Durations counted in blocks assume the build's own block time ([`MILLI_SECS_PER_BLOCK`]).
//! [`TABLE`] lists both values of each (docs/testing.md shows it), and a test checks that the fast
//! build shortens every one in wall time and keeps the relations the pallets rely on.

use crate::{BlockNumber, Moment};

/// One duration of [`TABLE`]: its name, unit and both builds' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duration {
    /// The constant's name in this module.
    pub name: &'static str,
    /// What the value counts: `"ms"`, `"slots"` or `"blocks"`.
    pub unit: &'static str,
    /// The production runtime's value.
    pub production: u64,
    /// The `fast-runtime` build's value.
    pub fast: u64,
}

/// Declares each duration once with both values: the constant takes the value of this build, and
/// [`TABLE`] keeps both for the docs and the tests.
macro_rules! durations {
    ($($(#[$doc:meta])* $name:ident: $ty:ty, $unit:literal = $production:expr, fast $fast:expr;)*) => {
        $(
            $(#[$doc])*
            #[cfg(not(feature = "fast-runtime"))]
            pub const $name: $ty = $production;
            $(#[$doc])*
            #[cfg(feature = "fast-runtime")]
            pub const $name: $ty = $fast;
        )*

        /// Every duration of this module, with its production and fast values.
        pub const TABLE: &[Duration] = &[$(Duration {
            name: stringify!($name),
            unit: $unit,
            production: $production as u64,
            fast: $fast as u64,
        }),*];
    };
}

/// Production blocks: `PRODUCTION_BLOCK_MS` per block (a 2 s slot won with probability 1/3).
const PRODUCTION_BLOCK_MS: u32 = 6_000;
/// Production's minute, hour and day, in production blocks.
const MINUTE: u32 = 60_000 / PRODUCTION_BLOCK_MS;
const HOUR: u32 = 60 * MINUTE;
const DAY: u32 = 24 * HOUR;
/// The fast build's minute, in its 1.5-second blocks.
const FAST_MINUTE: u32 = 40;

durations! {
    // --- Consensus: BABE slots and epochs (one epoch = one session) ---------------------------

    /// Length of one BABE slot.
    SLOT_DURATION: Moment, "ms" = 2_000, fast 500;
    /// Length of a BABE epoch (= one session) in slots: 100 slots, 200 s, ~33 blocks in production,
    /// short on purpose so that changes of the authority set show within minutes; 50 slots, 25 s,
    /// ~17 blocks in the fast build (long enough for every validator's heartbeat to land).
    EPOCH_DURATION_IN_SLOTS: u64, "slots" = 100, fast 50;

    // --- Staking ------------------------------------------------------------------------------

    /// Unbonded stake stays held (and slashable) this long: a week; half an hour on test networks.
    /// Offences are accepted for six sevenths of it (`configs::HISTORY_DEPTH`).
    UNBONDING_PERIOD: BlockNumber, "blocks" = 7 * DAY, fast 30 * FAST_MINUTE;

    // --- Job market ---------------------------------------------------------------------------

    /// Longest bid window a job may ask for: a day; an hour.
    MAX_BID_WINDOW: BlockNumber, "blocks" = DAY, fast 60 * FAST_MINUTE;
    /// Least time from the close of bidding to the deadline: 20 blocks in both builds (2 minutes; 30
    /// seconds), enough for the small jobs the tests post.
    MIN_TRAINING_TIME: BlockNumber, "blocks" = 2 * MINUTE, fast 20;
    /// Longest a job may run: 30 days; a day.
    MAX_JOB_DURATION: BlockNumber, "blocks" = 30 * DAY, fast 24 * 60 * FAST_MINUTE;
    /// Verifiers commit their verdicts within this window after their replay's time at their
    /// declared capacity (download, checks, the transaction): 30 minutes; 3 minutes.
    JOB_COMMIT_WINDOW: BlockNumber, "blocks" = 30 * MINUTE, fast 3 * FAST_MINUTE;
    /// Longest a drawn verifier's replay may take at its declared capacity (queue included) on
    /// top of the commit window: 2 hours; 10 minutes.
    MAX_REPLAY_WINDOW: BlockNumber, "blocks" = 2 * HOUR, fast 10 * FAST_MINUTE;
    /// ...and reveal them within this one: 10 minutes; 1 minute.
    JOB_REVEAL_WINDOW: BlockNumber, "blocks" = 10 * MINUTE, fast FAST_MINUTE;
    /// A pool epoch: joins, leaves and re-declarations of verifiers reach the draw's sum trees at
    /// its end, and a draw then waits for randomness newer than the trees (`FreshOutputs`
    /// blocks, only after a boundary that changed them): 5 minutes, so a verifier joining is
    /// drawable within about 7; 30 seconds.
    POOL_EPOCH: BlockNumber, "blocks" = 5 * MINUTE, fast 20;
    /// Finished jobs are kept for clients this long: a day; an hour.
    JOB_RETENTION: BlockNumber, "blocks" = DAY, fast 60 * FAST_MINUTE;

    // --- Proof of Drilling --------------------------------------------------------------------

    /// A drilling epoch (one synthetic round for every driller): an hour; 5 minutes.
    DRILLING_EPOCH: BlockNumber, "blocks" = HOUR, fast 5 * FAST_MINUTE;
    /// Executors commit a task's result within this window: 5 minutes; 1 minute (a synthetic
    /// task fills half of it at the executors' declared capacity, so test tasks are short too).
    DRILLING_COMMIT_WINDOW: BlockNumber, "blocks" = 5 * MINUTE, fast FAST_MINUTE;
    /// ...and reveal it within this one: 2 minutes; 30 seconds.
    DRILLING_REVEAL_WINDOW: BlockNumber, "blocks" = 2 * MINUTE, fast FAST_MINUTE / 2;
    /// Settled tasks are kept this long: 10 minutes; 1 minute.
    DRILLING_RETENTION: BlockNumber, "blocks" = 10 * MINUTE, fast FAST_MINUTE;
}

/// BABE's `c` = 1/3: probability that a slot has at least one primary winner (both builds).
pub const PRIMARY_PROBABILITY: (u64, u64) = (1, 3);

/// Expected time between blocks. With primary slots only, a slot holds a block with probability
/// `c` (whatever the weights, since Σθ = 1), so the mean block time is `SLOT_DURATION / c`: 6 s in
/// production, 1.5 s in the fast build.
pub const MILLI_SECS_PER_BLOCK: Moment =
    SLOT_DURATION * PRIMARY_PROBABILITY.1 / PRIMARY_PROBABILITY.0;

#[cfg(test)]
mod tests {
    use super::*;

    /// Wall-clock milliseconds of `value` in `unit`, at the given build's slot and block times.
    fn wall_ms(unit: &str, value: u64, slot_ms: u64) -> u64 {
        let block_ms = slot_ms * PRIMARY_PROBABILITY.1 / PRIMARY_PROBABILITY.0;
        match unit {
            "ms" => value,
            "slots" => value * slot_ms,
            "blocks" => value * block_ms,
            other => panic!("unknown unit {other}"),
        }
    }

    fn value(name: &str) -> Duration {
        *TABLE.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("{name} not in TABLE"))
    }

    #[test]
    fn the_fast_build_shortens_every_duration_in_wall_time() {
        let (slot, fast_slot) = (value("SLOT_DURATION").production, value("SLOT_DURATION").fast);
        assert_eq!(PRODUCTION_BLOCK_MS as u64, slot * PRIMARY_PROBABILITY.1);
        assert_eq!(FAST_MINUTE as u64, 60_000 / (fast_slot * PRIMARY_PROBABILITY.1));
        for d in TABLE {
            let (production, fast) =
                (wall_ms(d.unit, d.production, slot), wall_ms(d.unit, d.fast, fast_slot));
            assert!(fast < production, "{}: fast {fast} ms, production {production} ms", d.name);
        }
    }

    #[test]
    fn this_builds_constants_are_its_column_of_the_table() {
        let column =
            |d: Duration| if cfg!(feature = "fast-runtime") { d.fast } else { d.production };
        assert_eq!(SLOT_DURATION, column(value("SLOT_DURATION")));
        assert_eq!(JOB_COMMIT_WINDOW as u64, column(value("JOB_COMMIT_WINDOW")));
        assert_eq!(DRILLING_EPOCH as u64, column(value("DRILLING_EPOCH")));
    }

    #[test]
    fn windows_keep_the_relations_the_protocol_relies_on() {
        // A draw waits for 16 fresh VRF outputs, well inside the windows it opens.
        use frame_support::traits::Get;
        type FreshOutputs = <crate::Runtime as pallet_fresh_randomness::Config>::FreshOutputs;
        let fresh: BlockNumber = FreshOutputs::get();
        assert!(4 * fresh <= JOB_COMMIT_WINDOW, "a job's draw fits its commit window");
        assert!(fresh + DRILLING_COMMIT_WINDOW + DRILLING_REVEAL_WINDOW < DRILLING_EPOCH);
        // A draw waits `fresh` blocks after the trees change, at most once a pool epoch: every
        // epoch has blocks that draw, and in production a whole pool re-declaring in one epoch
        // (a kernels upgrade) is applied, and its randomness arrives, within a round's commit
        // window.
        assert!(fresh < POOL_EPOCH, "every pool epoch has blocks that draw");
        type Pool = <crate::Runtime as pallet_job_market::Config>::MaxVerifierPool;
        type Syncs = <crate::Runtime as pallet_job_market::Config>::MaxPoolSyncs;
        let drain: u32 = <Pool as Get<u32>>::get().div_ceil(<Syncs as Get<u32>>::get());
        if !cfg!(feature = "fast-runtime") {
            assert!(drain + fresh < JOB_COMMIT_WINDOW, "a full pool's changes hold draws too long");
        }
        const { assert!(MIN_TRAINING_TIME < MAX_JOB_DURATION && MAX_BID_WINDOW < MAX_JOB_DURATION) };
        // Offences can be reported while the offender's unbonded stake is still held.
        assert!(
            crate::configs::HISTORY_DEPTH as u64 * EPOCH_DURATION_IN_SLOTS * SLOT_DURATION
                < UNBONDING_PERIOD as u64 * MILLI_SECS_PER_BLOCK
        );
    }
}
