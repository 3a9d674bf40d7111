//! The revision of the worker's floating-point kernels that a job is trained and replayed with.
//!
//! Replay is exact only between identical kernels: a kernel change moves the last bits of every
//! update, and on a convolutional model a verifier one revision apart replays an honest bundle off
//! by up to 3·10⁻², thirty times ε (docs/pot-calibration.md). So the chain pins one revision per
//! job: a job records the revision current when it is posted, a verifier joins the pool declaring
//! the revision its worker runs, and a round draws only verifiers of the job's revision. A trainer
//! whose manifest names another revision fails; a verifier drawn for a revision it does not run
//! does not vote (it loses its own collateral, not the trainer's).
//!
//! The worker's test `worker/engine/tests/kernels.rs` pins the bits each kernel family gives to
//! this number: a change that moves them fails it until the revision is bumped, which takes a
//! runtime upgrade to reach the chain. The GPU's kernels are not pinned: a GPU may only train specs
//! that replay across devices (`ergon_protocol::device`), whose replays are measured against ε
//! between any two devices already, so a GPU kernel that moves its own last bits (the tiled
//! attention did) changes no verdict.

/// The kernels revision of this release: the worker's, and the one the runtime pins new jobs to.
pub const KERNELS_REVISION: u32 = 1;
