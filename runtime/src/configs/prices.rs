//! The market's price floors, per device class, and what they are derived from (issue 37, item 4).
//!
//! The floors used to be one figure per ut sized for toy jobs on CPUs (10 ERG per ut, a 2-core
//! CPU-hour 10 000 ERG): a GPU-hour job of 3·10⁶ ut cost 3·10⁷ ERG at the floor, thirty times an
//! endowed account, and no bond backed its verifiers' seats. They are now derived from one anchor —
//! what an hour of a device rents for, in ERG — and each class's measured throughput:
//!
//! | | ut an hour | rent an hour | least price per ut | replay floor per ut |
//! | --- | --- | --- | --- | --- |
//! | 2-core x86 CPU (f32, AVX2) | 1 000 | 50 ERG (anchor; ≈ $0.08) | 0.05 ERG | 0.1 ERG (2×) |
//! | H100/H200 (Ergon's f32 kernels) | 180 000 | 1 550 ERG (31× the CPU; ≈ $2.50) | 0.0086 ERG | 0.043 ERG (5×) |
//!
//! - *Throughputs*: the CPU's from the worker's start-up measurement on the 2-core machines
//!   (docs/pot-calibration.md); the GPU's from GPT-small's graph step on an H200, 21.5 TFLOP/s
//!   (docs/gpu-performance.md). A faster GPU path (bf16) earns more per GPU-hour at the same floor.
//! - *The least price* is the rent of the work's device time: an honest trainer at cost bids at
//!   or above it; a lower bid would be below any machine's cost of that class.
//! - *The replay floor* pays a floor-bid job's verifiers their time: on the CPU, verification
//!   measured 44.5 % of the training's time against a fee share of 24.4 % (docs/pot-calibration.md),
//!   so twice the least price; on a GPU, `verify --cuda` took 107 s for 22 s of training
//!   (4.9×: reading checkpoints and the full-pass rules dominate, issue 37), so five times — a
//!   fee of 1.2 × 0.043 = 0.052 ERG per replayed ut against 4.9 × 0.0086 = 0.042 of GPU time.
//!
//! So the GPT-2-small GPU-hour example (3.67·10⁶ ut) costs 31 578 ERG at the floor and its whole
//! budget, every possible vote's fee reserved, 87 991 ERG (`runtime/src/tests.rs`,
//! `a_gpu_hour_job_costs_gpu_hours_not_cpu_hours`); a CPU verifier is drawn only for jobs whose fee
//! floor pays its time (`pallet_job_market::capacity::verifies_at_its_price`).

use ergon_protocol::PerClass;

use crate::{units::ERG, Balance};

/// What a 2-core x86 CPU trains in an hour, in ut: the floors' CPU throughput.
pub const CPU_UT_PER_HOUR: Balance = 1_000;
/// What an H100 or H200 trains in an hour with Ergon's f32 kernels, in ut (21.5 TFLOP/s).
pub const GPU_UT_PER_HOUR: Balance = 180_000;
/// The anchor: an hour of a 2-core CPU at the floor.
pub const CPU_HOUR: Balance = 50 * ERG;
/// An hour of a GPU at the floor: 31 CPU-hours, the ratio of their rents.
pub const GPU_HOUR: Balance = 31 * CPU_HOUR;
/// A GPU verification's time over the replayed training's, in percent (measured: 107 s / 22 s).
pub const GPU_VERIFICATION_PERCENT: Balance = 490;

/// `MinPricePerUt`: an hour's rent over an hour's ut, per class (rounded down).
pub const MIN_PRICE_PER_UT: PerClass<Balance> =
    PerClass { cpu: CPU_HOUR / CPU_UT_PER_HOUR, gpu: GPU_HOUR / GPU_UT_PER_HOUR };

/// `ReplayPricePerUt`: twice the CPU's least price, five times the GPU's (above).
pub const REPLAY_PRICE_PER_UT: PerClass<Balance> =
    PerClass { cpu: 2 * MIN_PRICE_PER_UT.cpu, gpu: 5 * MIN_PRICE_PER_UT.gpu };
