//! The token's unit and the unit of work, for every Rust crate (the runtime, the worker, the
//! client, the tests). JavaScript has its own one copy, `ERG` in `scripts/client/lib/ergon.mjs`,
//! checked against `test-vectors.json`.

/// Plancks in one ERG: 12 decimals.
pub const ERG: u128 = 1_000_000_000_000;

/// Micro-ut in one ut, the chain's unit of training work (432·10⁹ floating-point operations).
pub const MICRO_UT_PER_UT: u128 = 1_000_000;
