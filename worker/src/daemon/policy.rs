//! The bidder's policy: what to ask for a job, and whether this machine can take it at all.
//!
//! A bid is a promise backed by collateral (the price is frozen out of the bond, and all of it is
//! slashed when the deadline passes without a bundle). So a job that does not fit the machine's
//! memory, or cannot be trained by its deadline at the throughput this machine measured, gets no bid:
//! bidding on it would sell a slash. The price is the larger of the operator's asking price per ut and
//! the measured cost of the machine's time plus a minimum margin. A GPU does not bid on
//! convolutional jobs: a CPU verifier's replay of an honest GPU-trained CNN is over ε (measured on
//! an H100, docs/pot-calibration.md), so the bid would sell a slash too.

use ergon_job_spec::{DataFormat, JobSpec, Layer, SpecSummary};

/// Plancks in one ERG.
pub const ERG: u128 = 1_000_000_000_000;
/// Micro-ut in one ut.
const MICRO: u128 = 1_000_000;

/// The operator's prices and the machine's measured capacity.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Asking price per ut of training work, in plancks.
    pub price_per_ut: u128,
    /// What an hour of this machine costs its operator (power, wear), in plancks.
    pub cost_per_hour: u128,
    /// Least margin over that cost, in percent.
    pub min_margin_percent: u32,
    /// Training throughput, micro-ut per hour (measured, or the operator's figure).
    pub micro_ut_per_hour: u128,
    /// Memory a training may use, in bytes.
    pub memory_bytes: u64,
    /// Share of the time to the deadline a training may fill, in percent: the rest is slack for
    /// pauses (verifications and drills run in its gaps), the download and the commitment.
    pub deadline_use_percent: u32,
    /// Whether trainings run on a GPU.
    pub gpu: bool,
}

/// Why no bid was placed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoBid {
    /// The training would need more memory than the machine has.
    #[error("needs about {need} MiB of memory, {have} MiB available")]
    TooBig {
        /// MiB needed (estimate).
        need: u64,
        /// MiB available.
        have: u64,
    },
    /// The training would not finish in time at the measured throughput.
    #[error("needs about {need_s} s of training, {have_s} s usable before the deadline")]
    TooSlow {
        /// Seconds of training needed.
        need_s: u64,
        /// Seconds usable before the deadline.
        have_s: u64,
    },
    /// A convolutional job on a GPU: CPU verifiers would fail the honest bundle (its replay error
    /// is over ε), until GPU tolerances are calibrated.
    #[error("a convolutional model trained on a GPU fails CPU verifiers' replay (over ε)")]
    GpuConvolution,
    /// The spec is invalid (the chain would not have taken it; a node bug or a hostile node).
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
}

/// Bytes one sample takes in memory once decoded (f32 inputs and its target).
fn sample_bytes(format: &DataFormat) -> u64 {
    match format {
        DataFormat::Idx { height, width, .. } => 4 * (*height as u64 * *width as u64 + 1),
        DataFormat::Csv { features, .. } => 4 * (*features as u64 + 1),
        DataFormat::Text { seq_len } => 8 * *seq_len as u64,
    }
}

/// An upper estimate of the memory a training of `spec` takes: the weights, their gradients and two
/// optimizer slots (AdamW's moments), a checkpoint being written, both datasets decoded, and the
/// activations of a batch through the widest layer (forward and backward).
pub fn memory_estimate(spec: &JobSpec, summary: &SpecSummary) -> u64 {
    let weights = summary.parameters.saturating_mul(4);
    let state = weights.saturating_mul(5);
    let data = [&spec.train, &spec.validation]
        .iter()
        .map(|d| d.samples.saturating_mul(sample_bytes(&d.format)))
        .fold(0u64, u64::saturating_add);
    let width =
        (summary.forward_flops_per_sample / summary.parameters.max(1) as u128).max(1) as u64;
    let activations = (spec.batch_size as u64)
        .saturating_mul(width.max(sample_bytes(&spec.train.format)))
        .saturating_mul(2 * 4 * 4);
    state.saturating_add(data).saturating_add(activations).saturating_add(64 << 20)
}

impl Policy {
    /// Seconds this machine needs to train `work_micro_ut`.
    pub fn training_seconds(&self, work_micro_ut: u128) -> u64 {
        let per_hour = self.micro_ut_per_hour.max(1);
        (work_micro_ut.saturating_mul(3600).div_ceil(per_hour)).min(u64::MAX as u128) as u64
    }

    /// What the training costs the operator, in plancks.
    pub fn cost(&self, work_micro_ut: u128) -> u128 {
        self.cost_per_hour.saturating_mul(self.training_seconds(work_micro_ut) as u128) / 3600
    }

    /// The price to bid for `spec` (its on-chain work is `work_micro_ut`), or why not to bid, with
    /// `seconds_left` until the deadline and `min_price_per_ut` the chain's floor (plancks per ut).
    pub fn price(
        &self,
        spec: &JobSpec,
        work_micro_ut: u128,
        seconds_left: u64,
        min_price_per_ut: u128,
    ) -> Result<u128, NoBid> {
        let summary = spec.validate().map_err(|e| NoBid::InvalidSpec(e.to_string()))?;
        let convolutional = spec
            .model
            .layers
            .iter()
            .any(|l| matches!(l, Layer::Conv2d { .. } | Layer::MaxPool2d { .. }));
        if self.gpu && convolutional {
            return Err(NoBid::GpuConvolution);
        }
        let need = memory_estimate(spec, &summary);
        if need > self.memory_bytes {
            return Err(NoBid::TooBig { need: need >> 20, have: self.memory_bytes >> 20 });
        }
        let need_s = self.training_seconds(work_micro_ut);
        let have_s = seconds_left.saturating_mul(self.deadline_use_percent as u64) / 100;
        if need_s > have_s {
            return Err(NoBid::TooSlow { need_s, have_s });
        }
        let asked = work_micro_ut.saturating_mul(self.price_per_ut) / MICRO;
        let floor = work_micro_ut.saturating_mul(min_price_per_ut).div_ceil(MICRO);
        let cost = self.cost(work_micro_ut);
        let with_margin =
            cost.saturating_add(cost.saturating_mul(self.min_margin_percent as u128) / 100);
        Ok(asked.max(floor).max(with_margin).max(1))
    }
}

/// Memory available to new work on this machine (`MemAvailable` of `/proc/meminfo`), in bytes;
/// `None` where the kernel does not say.
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> JobSpec {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/fashion-mnist-mlp.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    fn policy() -> Policy {
        Policy {
            price_per_ut: 100 * ERG,
            cost_per_hour: ERG,
            min_margin_percent: 20,
            micro_ut_per_hour: 1_000 * MICRO,
            memory_bytes: 8 << 30,
            deadline_use_percent: 50,
            gpu: false,
        }
    }

    /// An honest GPU trainer of a CNN would be failed by CPU verifiers and lose its collateral: it
    /// does not bid; the same machine bids on the MLP, and a CPU on the CNN.
    #[test]
    fn a_gpu_does_not_bid_on_a_convolutional_job() {
        let example = |name: &str| -> JobSpec {
            let path = format!("{}/examples/{name}.json", env!("CARGO_MANIFEST_DIR"));
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
        };
        let (cnn, mlp) = (example("fashion-mnist-cnn"), example("fashion-mnist-mlp"));
        let work = |s: &JobSpec| s.validate().unwrap().training_micro_ut();
        let gpu = Policy { gpu: true, micro_ut_per_hour: u128::MAX / 4, ..policy() };
        assert_eq!(gpu.price(&cnn, work(&cnn), 3_600, 0), Err(NoBid::GpuConvolution));
        assert!(gpu.price(&mlp, work(&mlp), 3_600, 0).is_ok());
        let cpu = Policy { micro_ut_per_hour: u128::MAX / 4, ..policy() };
        assert!(cpu.price(&cnn, work(&cnn), 3_600, 0).is_ok());
    }

    #[test]
    fn the_price_is_the_asking_price_when_it_covers_cost_and_floor() {
        let s = spec();
        let work = s.validate().unwrap().training_micro_ut();
        let price = policy().price(&s, work, 3_600, 10 * ERG).unwrap();
        assert_eq!(price, work * 100 * ERG / MICRO);
    }

    #[test]
    fn an_expensive_machine_asks_its_cost_plus_margin() {
        let s = spec();
        let work = s.validate().unwrap().training_micro_ut();
        let p = Policy { price_per_ut: 0, cost_per_hour: 3_600_000 * ERG, ..policy() };
        let price = p.price(&s, work, 3_600, 0).unwrap();
        assert_eq!(price, p.cost(work) * 120 / 100);
        assert!(price > 0);
    }

    #[test]
    fn the_chain_floor_is_never_undercut() {
        let s = spec();
        let work = s.validate().unwrap().training_micro_ut();
        let p = Policy { price_per_ut: 0, cost_per_hour: 0, ..policy() };
        assert_eq!(p.price(&s, work, 3_600, 10 * ERG).unwrap(), (work * 10 * ERG).div_ceil(MICRO));
    }

    /// A slow machine that bid anyway would freeze its price as collateral and lose all of it at
    /// the deadline: it does not bid.
    #[test]
    fn a_job_that_cannot_finish_by_its_deadline_gets_no_bid() {
        let s = spec();
        let work = s.validate().unwrap().training_micro_ut();
        let slow = Policy { micro_ut_per_hour: work, ..policy() };
        // An hour of training; half of two hours usable: just fits. Half of an hour and a half:
        // does not.
        assert!(slow.price(&s, work, 2 * 3_600, 0).is_ok());
        assert!(matches!(slow.price(&s, work, 3 * 1_800, 0), Err(NoBid::TooSlow { .. })));
    }

    #[test]
    fn a_job_that_does_not_fit_in_memory_gets_no_bid() {
        let s = spec();
        let work = s.validate().unwrap().training_micro_ut();
        let small = Policy { memory_bytes: 100 << 20, ..policy() };
        assert!(matches!(small.price(&s, work, 3_600, 0), Err(NoBid::TooBig { .. })));
        // Fashion-MNIST's 70 000 images alone are ~220 MB decoded.
        let need = memory_estimate(&s, &s.validate().unwrap());
        assert!(need > 220 << 20 && need < 1 << 30, "{need}");
    }
}
