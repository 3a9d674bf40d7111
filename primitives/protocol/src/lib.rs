//! # Ergon protocol rules
//!
//! One home for every rule that more than one party computes: the runtime, the worker, the
//! integration tests and the JavaScript client all call (or check against the test vectors of) this
//! crate, never a copy of their own.
//!
//! - [`hash`]: the one domain-tag scheme behind every protocol hash,
//!   `blake2_256(SCALE((tag, payload)))` with `tag = b"ergon/<rule>/v<n>"`.
//! - [`seed`]: a job's training seed, from the job id and the trainer's raw 32-byte account.
//! - [`draw`]: random streams, uniform samples and shuffles, and the weighted order by an
//!   exponential race in which each candidate's place depends only on its own key and weight.
//! - [`sortition`]: weighted draws that read O(log n) of a large pool (a sum tree over slots),
//!   for a pool frozen before the randomness it is drawn with.
//! - [`segments`]: which checkpoint segments a verification round replays, and who replays which
//!   (every one by two verifiers).
//! - [`evidence`]: the sketch of a state inside a segment that only a replay produces, and how two
//!   sketches of one segment are compared.
//! - [`overhead`]: what a verification does besides its replay (rules and metrics), as a share of
//!   training, which the fees pay for.
//! - [`capacity`]: verifiers' declared replay capacity: replay times and the bond behind it.
//! - [`device`]: the hardware classes bundles are trained and replayed on, and which class may
//!   verify which.
//! - [`commitments`]: what verifiers and drilling executors commit to before they reveal.
//! - [`kernels`]: the revision of the worker's floating-point kernels that the chain pins each job
//!   to (replay is exact only between identical kernels).
//! - [`url`]: which URLs validators and daemons fetch on a live chain (http(s), public hosts only).
//! - [`units`]: the token's unit (ERG) and the unit of work (ut).
//! - [`traits`] (feature `frame`): what the pallets ask of each other (bonds, obligations,
//!   slashing, computing power, fresh randomness), so that no pallet depends on another's crate.
//!
//! `test-vectors.json` next to this crate holds the outputs of every rule for fixed inputs; a test
//! keeps it in sync and clients in other languages check their encoding against it.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod capacity;
pub mod commitments;
pub mod device;
pub mod draw;
pub mod evidence;
pub mod hash;
pub mod kernels;
pub mod overhead;
pub mod seed;
pub mod segments;
pub mod sortition;
#[cfg(feature = "frame")]
pub mod traits;
pub mod units;
pub mod url;

#[cfg(test)]
mod vectors;

pub use commitments::Verdict;
pub use device::{DeviceClass, PerClass};
pub use evidence::Sketch;
pub use seed::job_seed;
