//! The bidder's policy: what to ask for a job, and whether this machine can take it at all.
//!
//! A bid is a promise backed by collateral (the price is frozen out of the bond, and all of it is
//! slashed when the deadline passes without a bundle). So a job that does not fit the machine's
//! memory, or cannot be trained by its deadline at the throughput this machine measured, gets no bid:
//! bidding on it would sell a slash. The price is the largest of the operator's asking price per ut
//! (none by default), the measured cost of the machine's time plus a minimum margin, and the chain's
//! floor for the class the job trains on: a daemon on defaults bids what a job posted with its least
//! budget pays, as long as that covers its cost.
//!
//! A GPU host trains convolutional jobs on its CPU ([`Policy::train_on`]): a CPU verifier's replay
//! of an honest GPU-trained CNN is over ε (measured on an H100, docs/pot-calibration.md), so
//! verifiers fail a convolutional bundle that names another device than the CPU
//! ([`ergon_engine::device::replays_across_devices`]), while a CPU-trained one replays exactly on
//! every verifier's CPU. Its bid is checked against the CPU's throughput and memory.

use ergon_job_spec::{DataFormat, JobSpec, SpecSummary};
use ergon_protocol::DeviceClass;

pub use ergon_protocol::units::ERG;
/// Micro-ut in one ut.
const MICRO: u128 = 1_000_000;

/// What one device of the machine can take on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Training throughput, micro-ut per hour (measured, or the operator's figure).
    pub micro_ut_per_hour: u128,
    /// Memory a training may use, in bytes.
    pub memory_bytes: u64,
    /// The device's class on chain (what its bundles are declared as, what it verifies as).
    pub class: DeviceClass,
}

/// The device a job trains on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainOn {
    /// The CPU.
    Cpu,
    /// The GPU the daemon was started on.
    Gpu,
}

/// The operator's prices and the machine's measured capacity.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Asking price per ut of training work, in plancks (0: none; the cost plus the margin, or
    /// the chain's floor, sets the bid).
    pub price_per_ut: u128,
    /// What an hour of this machine costs its operator (power, wear), in plancks.
    pub cost_per_hour: u128,
    /// Least margin over that cost, in percent.
    pub min_margin_percent: u32,
    /// The CPU's capacity (every job can train there).
    pub cpu: Capacity,
    /// The GPU's capacity, on a host that trains on a GPU.
    pub gpu: Option<Capacity>,
    /// Share of the time to the deadline a training may fill, in percent: the rest is slack for
    /// pauses (verifications and drills run in its gaps), the download and the commitment.
    pub deadline_use_percent: u32,
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
    /// The spec is invalid (the chain would not have taken it; a node bug or a hostile node).
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The job is pinned to kernels this worker does not run: its verifiers replay with those,
    /// and this worker's training would replay off by up to the spread between revisions.
    #[error("the job is pinned to kernels revision {job}, this worker runs revision {ours}")]
    OtherKernels {
        /// The job's revision.
        job: u32,
        /// This worker's.
        ours: u32,
    },
}

/// Whether this worker trains a job pinned to kernels revision `job`: only one of its own revision,
/// which the job's verifiers replay exactly.
pub fn runs_kernels(job: u32) -> Result<(), NoBid> {
    ergon_engine::runs_kernels(job)
        .map_err(|_| NoBid::OtherKernels { job, ours: ergon_engine::KERNELS_REVISION })
}

/// What a daemon does about its place in the verifier pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMove {
    /// Nothing: in the pool as it should be, or out of it as it should be.
    Stay,
    /// Join, or join again to declare this worker's kernels.
    Join,
    /// Leave: the role is off, or the entry declares kernels this worker does not run (it would
    /// be drawn for jobs it cannot replay, and lose collateral on each).
    Leave,
    /// Stay out: this worker's kernels are not the chain's current revision, so joining now would
    /// declare kernels it does not run. Upgrade the worker (or wait for the chain's upgrade).
    Wait,
}

/// The move for a daemon that wants the verifier role (`wanted`), whose pool entry declares the
/// kernels `entry` (`None`: not in the pool) and this machine's device class (`our_class`; an
/// entry of another class, the machine changed, is stale like another revision's), when the
/// chain pins new jobs and joiners to `current`.
/// A worker stays in the pool after a runtime upgrade raised the revision, drawn for the jobs
/// posted before it, until its operator upgrades it; it then joins again under the new revision.
pub fn pool_move(wanted: bool, entry: Option<u32>, our_class: bool, current: u32) -> PoolMove {
    let ours = ergon_engine::KERNELS_REVISION;
    match (wanted, entry) {
        (false, None) => PoolMove::Stay,
        (false, Some(_)) => PoolMove::Leave,
        (true, Some(declared)) if declared == ours && our_class => PoolMove::Stay,
        (true, _) if current == ours => PoolMove::Join,
        (true, Some(_)) => PoolMove::Leave,
        (true, None) => PoolMove::Wait,
    }
}

/// Bytes one sample takes in memory once decoded (f32 inputs and its target).
fn sample_bytes(format: &DataFormat) -> u64 {
    match format {
        DataFormat::Idx { height, width, .. } => 4 * (*height as u64 * *width as u64 + 1),
        DataFormat::Csv { features, .. } => 4 * (*features as u64 + 1),
        DataFormat::Text { seq_len } | DataFormat::Tokens { seq_len, .. } => 8 * *seq_len as u64,
    }
}

/// An upper estimate of the memory a training of `spec` takes: the weights, their gradients and two
/// optimizer slots (AdamW's moments), a checkpoint being written, both datasets decoded, and the
/// activations of a batch through the widest layer (forward and backward).
pub fn memory_estimate(spec: &JobSpec, summary: &SpecSummary) -> u64 {
    let weights = summary.parameters.saturating_mul(4);
    // LoRA's frozen base sits beside the adapters (no gradients, no optimizer state).
    let frozen = summary.frozen_parameters.saturating_mul(4);
    let state = weights.saturating_mul(5).saturating_add(frozen);
    // A weights file is read whole, then decoded next to it.
    let file = match spec.init {
        ergon_job_spec::InitialWeights::Seed => 0,
        ergon_job_spec::InitialWeights::Safetensors { .. } => {
            weights.saturating_add(frozen).saturating_mul(2)
        }
    };
    let data = [&spec.train, &spec.validation]
        .iter()
        .map(|d| d.samples.saturating_mul(sample_bytes(&d.format)))
        .fold(0u64, u64::saturating_add);
    let width =
        (summary.forward_flops_per_sample / summary.parameters.max(1) as u128).max(1) as u64;
    // One micro-batch's activations are alive at a time (gradient accumulation), plus the
    // accumulated gradients: a second copy of the trainable weights.
    let accumulated = match spec.gradients.micro_batches {
        0 | 1 => 0,
        _ => weights,
    };
    let activations = (spec.micro_batch_size() as u64)
        .saturating_mul(width.max(sample_bytes(&spec.train.format)))
        .saturating_mul(2 * 4 * 4);
    state
        .saturating_add(accumulated)
        .saturating_add(file)
        .saturating_add(data)
        .saturating_add(activations)
        .saturating_add(64 << 20)
}

impl Policy {
    /// Where this machine trains `spec`: on its GPU when it has one and CPU verifiers replay the
    /// GPU's training within ε, on its CPU otherwise (a CPU-trained bundle replays exactly on every
    /// verifier's CPU, and verifiers fail a convolutional bundle that names another device).
    pub fn train_on(&self, spec: &JobSpec) -> TrainOn {
        if self.gpu.is_some() && ergon_engine::device::replays_across_devices(spec) {
            TrainOn::Gpu
        } else {
            TrainOn::Cpu
        }
    }

    /// The class of the device a bundle of `spec` is trained on: what the trainer declares with it.
    pub fn bundle_class(&self, spec: &JobSpec) -> DeviceClass {
        self.capacity(self.train_on(spec)).class
    }

    /// What this machine offers as a verifier, given `free_bond` (plancks not yet collateral) and
    /// the chain's rule for the bond a capacity needs (`backed`, the largest capacity a bond
    /// backs): the GPU's class and capacity on a GPU host (it replays GPU bundles there), else
    /// the CPU's, never more capacity than the bond backs. `None` if the bond does not back
    /// `least` (the chain's least capacity).
    pub fn verifier_offer(
        &self,
        backed: impl Fn(DeviceClass, u128) -> u128,
        free_bond: u128,
        least: u128,
    ) -> Option<(DeviceClass, u128)> {
        let device = self.gpu.unwrap_or(self.cpu);
        let capacity = device.micro_ut_per_hour.min(backed(device.class, free_bond));
        (capacity >= least).then_some((device.class, capacity))
    }

    /// The capacity of the device `on`.
    fn capacity(&self, on: TrainOn) -> Capacity {
        match (on, self.gpu) {
            (TrainOn::Gpu, Some(gpu)) => gpu,
            _ => self.cpu,
        }
    }

    /// Seconds this machine needs to train `work_micro_ut` on `on`.
    pub fn training_seconds(&self, on: TrainOn, work_micro_ut: u128) -> u64 {
        let per_hour = self.capacity(on).micro_ut_per_hour.max(1);
        (work_micro_ut.saturating_mul(3600).div_ceil(per_hour)).min(u64::MAX as u128) as u64
    }

    /// What the training on `on` costs the operator, in plancks.
    pub fn cost(&self, on: TrainOn, work_micro_ut: u128) -> u128 {
        self.cost_per_hour.saturating_mul(self.training_seconds(on, work_micro_ut) as u128) / 3600
    }

    /// The price to bid for `spec` (its on-chain work is `work_micro_ut`), or why not to bid, with
    /// `seconds_left` until the deadline and `min_price_per_ut` the chain's floors (plancks per
    /// ut, per class: the floor of the class it trains on applies).
    pub fn price(
        &self,
        spec: &JobSpec,
        work_micro_ut: u128,
        seconds_left: u64,
        min_price_per_ut: ergon_protocol::PerClass<u128>,
    ) -> Result<u128, NoBid> {
        let summary = spec.validate().map_err(|e| NoBid::InvalidSpec(e.to_string()))?;
        let on = self.train_on(spec);
        let have = self.capacity(on).memory_bytes;
        let need = memory_estimate(spec, &summary);
        if need > have {
            return Err(NoBid::TooBig { need: need >> 20, have: have >> 20 });
        }
        let need_s = self.training_seconds(on, work_micro_ut);
        let have_s = seconds_left.saturating_mul(self.deadline_use_percent as u64) / 100;
        if need_s > have_s {
            return Err(NoBid::TooSlow { need_s, have_s });
        }
        let asked = work_micro_ut.saturating_mul(self.price_per_ut) / MICRO;
        let per_ut = min_price_per_ut.of(self.capacity(on).class);
        let floor = work_micro_ut.saturating_mul(per_ut).div_ceil(MICRO);
        let cost = self.cost(on, work_micro_ut);
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

    fn example(name: &str) -> JobSpec {
        let path = format!("{}/examples/{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    fn spec() -> JobSpec {
        example("fashion-mnist-mlp")
    }

    fn work(spec: &JobSpec) -> u128 {
        spec.validate().unwrap().training_micro_ut()
    }

    fn policy() -> Policy {
        Policy {
            price_per_ut: 100 * ERG,
            cost_per_hour: ERG,
            min_margin_percent: 20,
            cpu: Capacity {
                micro_ut_per_hour: 1_000 * MICRO,
                memory_bytes: 8 << 30,
                class: DeviceClass::Cpu,
            },
            gpu: None,
            deadline_use_percent: 50,
        }
    }

    /// An honest GPU training of a CNN would be failed by CPU verifiers, and its trainer lose its
    /// collateral: a GPU host trains it on its CPU, and checks the bid against the CPU's
    /// throughput and memory; dense models train on the GPU.
    #[test]
    fn a_gpu_host_trains_a_convolutional_job_on_its_cpu() {
        let (cnn, mlp, transformer) =
            (example("fashion-mnist-cnn"), spec(), example("char-transformer"));
        // A CPU that trains the MLP in an hour, a GPU that trains anything in a second.
        let slow = Capacity { micro_ut_per_hour: work(&mlp), ..policy().cpu };
        let fast = Capacity {
            micro_ut_per_hour: u128::MAX / 4,
            memory_bytes: 80 << 30,
            class: DeviceClass::Cuda { capability: 90 },
        };
        let cpu_host = Policy { cpu: slow, ..policy() };
        let host = Policy { gpu: Some(fast), ..cpu_host.clone() };
        assert_eq!(host.train_on(&cnn), TrainOn::Cpu);
        assert_eq!(host.train_on(&mlp), TrainOn::Gpu);
        assert_eq!(host.train_on(&transformer), TrainOn::Gpu);
        assert_eq!(cpu_host.train_on(&mlp), TrainOn::Cpu, "a CPU host trains everything there");

        // The CNN is checked against the CPU's throughput (half the time to the deadline is
        // usable), the MLP against the GPU's: two seconds suffice.
        let cnn_s = host.training_seconds(TrainOn::Cpu, work(&cnn)) * 2;
        assert!(matches!(
            host.price(&cnn, work(&cnn), cnn_s - 2, flat(0)),
            Err(NoBid::TooSlow { .. })
        ));
        assert!(host.price(&cnn, work(&cnn), cnn_s, flat(0)).is_ok());
        assert!(host.price(&mlp, work(&mlp), 2, flat(0)).is_ok());
        assert!(matches!(cpu_host.price(&mlp, work(&mlp), 2, flat(0)), Err(NoBid::TooSlow { .. })));
        // The CNN's price is the CPU's time, not the GPU's.
        let costly = Policy { price_per_ut: 0, cost_per_hour: 3_600_000 * ERG, ..host.clone() };
        assert_eq!(
            costly.price(&cnn, work(&cnn), cnn_s, flat(0)).unwrap(),
            costly.cost(TrainOn::Cpu, work(&cnn)) * 120 / 100
        );
        // Memory: the CPU's for the CNN, the GPU's for the MLP.
        let small_cpu =
            Policy { cpu: Capacity { memory_bytes: 100 << 20, ..host.cpu }, ..host.clone() };
        assert!(matches!(
            small_cpu.price(&cnn, work(&cnn), cnn_s, flat(0)),
            Err(NoBid::TooBig { .. })
        ));
        assert!(small_cpu.price(&mlp, work(&mlp), 2, flat(0)).is_ok());
    }

    #[test]
    fn the_price_is_the_asking_price_when_it_covers_cost_and_floor() {
        let s = spec();
        let work = work(&s);
        let price = policy().price(&s, work, 3_600, flat(10 * ERG)).unwrap();
        assert_eq!(price, work * 100 * ERG / MICRO);
    }

    #[test]
    fn an_expensive_machine_asks_its_cost_plus_margin() {
        let s = spec();
        let work = work(&s);
        let p = Policy { price_per_ut: 0, cost_per_hour: 3_600_000 * ERG, ..policy() };
        let price = p.price(&s, work, 3_600, flat(0)).unwrap();
        assert_eq!(price, p.cost(TrainOn::Cpu, work) * 120 / 100);
        assert!(price > 0);
    }

    /// The same floor for both classes.
    fn flat(per_ut: u128) -> ergon_protocol::PerClass<u128> {
        ergon_protocol::PerClass { cpu: per_ut, gpu: per_ut }
    }

    /// The floor a bid must clear is that of the class the machine trains the spec on: a GPU host
    /// bids a dense model down to the GPU's floor, a convolutional one (trained on its CPU) to the
    /// CPU's.
    #[test]
    fn the_floor_is_the_one_of_the_class_trained_on() {
        let floors = ergon_protocol::PerClass { cpu: 10 * ERG, gpu: 2 * ERG };
        let h100 = DeviceClass::Cuda { capability: 90 };
        let gpu =
            Capacity { micro_ut_per_hour: 3_000_000 * MICRO, memory_bytes: 80 << 30, class: h100 };
        let p = Policy { gpu: Some(gpu), price_per_ut: 0, cost_per_hour: 0, ..policy() };
        let (mlp, cnn) = (spec(), example("fashion-mnist-cnn"));
        let (mlp_work, cnn_work) = (work(&mlp), work(&cnn));
        assert_eq!(
            p.price(&mlp, mlp_work, 3_600, floors).unwrap(),
            (mlp_work * 2 * ERG).div_ceil(MICRO)
        );
        assert_eq!(
            p.price(&cnn, cnn_work, 1_000_000, floors).unwrap(),
            (cnn_work * 10 * ERG).div_ceil(MICRO)
        );
    }

    #[test]
    fn the_chain_floor_is_never_undercut() {
        let s = spec();
        let work = work(&s);
        let p = Policy { price_per_ut: 0, cost_per_hour: 0, ..policy() };
        assert_eq!(
            p.price(&s, work, 3_600, flat(10 * ERG)).unwrap(),
            (work * 10 * ERG).div_ceil(MICRO)
        );
    }

    /// A daemon on defaults (no asking price; the default cost, an ERG an hour, far below an
    /// hour's rent at the floor) bids exactly the floor of the class it trains on: what a job
    /// posted with its least budget pays for the work. With the old default ask (100 ERG per
    /// ut, 2 000 times the CPU floor) a GPU-hour job at its least budget got no bid at all.
    #[test]
    fn a_daemon_on_defaults_bids_what_a_least_budget_pays() {
        // The production runtime's floors (runtime/src/configs/prices.rs): 0.05 and 0.0086 ERG.
        let floors = ergon_protocol::PerClass { cpu: ERG / 20, gpu: 86 * ERG / 10_000 };
        let h100 = Capacity {
            micro_ut_per_hour: 180_000 * MICRO,
            memory_bytes: 80 << 30,
            class: DeviceClass::Cuda { capability: 90 },
        };
        let defaults = Policy { price_per_ut: 0, cost_per_hour: ERG, ..policy() };
        let gpu_host = Policy { gpu: Some(h100), ..defaults.clone() };
        let (mlp, transformer) = (spec(), example("char-transformer"));
        for (host, spec, per_ut) in
            [(&defaults, &mlp, floors.cpu), (&gpu_host, &transformer, floors.gpu)]
        {
            let work = work(spec);
            let least_price = (work * per_ut).div_ceil(MICRO);
            assert_eq!(host.price(spec, work, 1_000_000, floors).unwrap(), least_price);
        }
        // The runtime's GPT-2-small example (3.67·10⁶ ut), with a week to its deadline.
        let (big, week) = (3_670_000 * MICRO, 7 * 24 * 3_600);
        let least_price = (big * floors.gpu).div_ceil(MICRO);
        assert_eq!(gpu_host.price(&transformer, big, week, floors).unwrap(), least_price);
        let old_default = Policy { price_per_ut: 100 * ERG, ..gpu_host };
        assert!(old_default.price(&transformer, big, week, floors).unwrap() > 10_000 * least_price);
    }

    /// A slow machine that bid anyway would freeze its price as collateral and lose all of it at
    /// the deadline: it does not bid.
    #[test]
    fn a_job_that_cannot_finish_by_its_deadline_gets_no_bid() {
        let s = spec();
        let work = work(&s);
        let slow = Policy { cpu: Capacity { micro_ut_per_hour: work, ..policy().cpu }, ..policy() };
        // An hour of training; half of two hours usable: just fits. Half of an hour and a half:
        // does not.
        assert!(slow.price(&s, work, 2 * 3_600, flat(0)).is_ok());
        assert!(matches!(slow.price(&s, work, 3 * 1_800, flat(0)), Err(NoBid::TooSlow { .. })));
    }

    #[test]
    fn a_job_that_does_not_fit_in_memory_gets_no_bid() {
        let s = spec();
        let work = work(&s);
        let small =
            Policy { cpu: Capacity { memory_bytes: 100 << 20, ..policy().cpu }, ..policy() };
        assert!(matches!(small.price(&s, work, 3_600, flat(0)), Err(NoBid::TooBig { .. })));
        // Fashion-MNIST's 70 000 images alone are ~220 MB decoded.
        let need = memory_estimate(&s, &s.validate().unwrap());
        assert!(need > 220 << 20 && need < 1 << 30, "{need}");
    }

    /// Fail an honest trainer with another revision's kernels, from the daemon's side: a worker
    /// never trains a job pinned to other kernels (its verifiers would replay it off by up to the
    /// spread between revisions), never declares kernels it does not run, and leaves the pool
    /// when its entry declares other kernels (drawn for jobs it cannot replay, it would lose its
    /// collateral). After a runtime upgrade it stays, drawn for the jobs posted before, until its
    /// operator upgrades it; the upgraded worker joins again under the new revision.
    #[test]
    fn a_worker_trains_and_verifies_only_jobs_of_its_kernels() {
        let ours = ergon_engine::KERNELS_REVISION;
        assert_eq!(runs_kernels(ours), Ok(()));
        assert_eq!(runs_kernels(ours + 1), Err(NoBid::OtherKernels { job: ours + 1, ours }));
        // The chain runs this worker's revision.
        assert_eq!(pool_move(true, None, true, ours), PoolMove::Join);
        assert_eq!(pool_move(true, Some(ours), true, ours), PoolMove::Stay);
        assert_eq!(
            pool_move(true, Some(ours - 1), true, ours),
            PoolMove::Join,
            "upgraded: declares it"
        );
        assert_eq!(pool_move(false, Some(ours), true, ours), PoolMove::Leave);
        assert_eq!(pool_move(false, None, true, ours), PoolMove::Stay);
        // The chain moved on to the next revision, this worker not yet.
        assert_eq!(
            pool_move(true, Some(ours), true, ours + 1),
            PoolMove::Stay,
            "drawn for older jobs"
        );
        assert_eq!(pool_move(true, None, true, ours + 1), PoolMove::Wait);
        // The worker was upgraded before the chain: its entry declares kernels it no longer runs.
        assert_eq!(pool_move(true, Some(ours - 1), true, ours - 1), PoolMove::Leave);
        assert_eq!(pool_move(true, None, true, ours - 1), PoolMove::Wait);
        // The machine changed class (a GPU added or removed): declared again.
        assert_eq!(pool_move(true, Some(ours), false, ours), PoolMove::Join);
    }

    /// A verifier declares its device's class and measured capacity, cut to what its bond backs
    /// under the chain's rule; a GPU host declares the GPU (CPU bundles go to CPU verifiers).
    #[test]
    fn the_verifier_offer_is_the_device_cut_to_the_bond() {
        let erg = ergon_protocol::units::ERG;
        // The fast chain's window (120 blocks of 1.5 s), 20 ERG per ut, a 20 % markup.
        let terms = ergon_protocol::capacity::BackingTerms {
            window_ms: 180_000,
            replay_price_per_ut: 20 * erg,
            markup_ppb: 200_000_000,
            least: 100 * erg,
        };
        let backed = |_, bond| terms.backed_capacity(bond, u128::MAX);
        let host = policy();
        assert_eq!(
            host.verifier_offer(backed, 1_000_000 * erg, 10 * MICRO),
            Some((DeviceClass::Cpu, 1_000 * MICRO)),
            "a large bond: the measured capacity"
        );
        // 1 000 ut/h fill the 3-minute window with 50 ut: 1 200 ERG of fees; 600 ERG back half.
        let (_, cut) = host.verifier_offer(backed, 600 * erg, 10 * MICRO).unwrap();
        assert_eq!(cut / MICRO, 500, "{cut}");
        assert_eq!(host.verifier_offer(backed, erg, 10 * MICRO), None, "backs less than the least");
        let h100 = DeviceClass::Cuda { capability: 90 };
        let gpu =
            Capacity { micro_ut_per_hour: 3_000_000 * MICRO, memory_bytes: 80 << 30, class: h100 };
        let gpu_host = Policy { gpu: Some(gpu), ..policy() };
        assert_eq!(gpu_host.verifier_offer(backed, u128::MAX, 10 * MICRO).map(|o| o.0), Some(h100));
        assert_eq!(gpu_host.bundle_class(&spec()), h100, "a dense model trains on the GPU");
        assert_eq!(gpu_host.bundle_class(&example("fashion-mnist-cnn")), DeviceClass::Cpu);
    }
}
