//! The Proof-of-Training verifier: checks a bundle against its job spec and replays segments of it.
//!
//! Checks, in order (each reported with its measured value and threshold):
//!
//! 1. **files**: every checkpoint file and tensor matches the manifest (and the Merkle root matches
//!    the committed one, when given), and every file read whole is its tensors' canonical file;
//!    **weights**: the chunks the rules read of their other checkpoints match the manifest's chunk
//!    lists (`sample.rs`: the rules compare a coordinate sample, 16 chunks of each file);
//! 2. **manifest**: the manifest describes this spec (spec hash, batch size, step and checkpoint
//!    schedule), the prescribed seed (mandatory: from the job id and the trainer's account bytes),
//!    f32 and the kernels revision the job pins (a worker of another revision gives no verdict:
//!    [`crate::Error::OtherKernels`]), and a device of the class declared on chain;
//! 1. **files** also holds every checkpoint to the spec's layout before reading it: only the
//!    spec's model and optimizer tensors, with their shapes, in a file no larger than they take
//!    ([`crate::bundle::Layout`]), so a padded bundle never raises the verifier's memory;
//! 2. **manifest** also recomputes the claimed `final_train_loss` from the manifest's losses and,
//!    given the chain's commitment, compares the committed metrics with the manifest's;
//! 3. **states**: every checkpoint read holds only finite values and is not degenerate (not every
//!    weight zero); **optimizer**: every state read is one an honest run reaches (AdamW's moments
//!    bounded by each other, a state that moves the weights, a second moment that decays no faster
//!    than β₂ between reads, a momentum not reset: `optimizer.rs`);
//! 4. **init**: C0 is Init(seed) bit for bit, weights and optimizer state;
//! 5. **replay**: for each challenged segment `Cᵢ → Cᵢ₊₁`, the verifier loads `Cᵢ` (weights and
//!    optimizer state), runs the same steps on the same batches (the seed's PRF), and compares
//!    everything the replay produces with what `Cᵢ₊₁` and the manifest claim: the weight update
//!    (relative error ‖ΔW_claim − ΔW_replay‖ / ‖ΔW_replay‖ ≤ ε and cosine ≥ τ), the optimizer state
//!    (the same bounds on each slot on its own: SGD's momentum, AdamW's `m` and `v`) and every
//!    per-step loss (within [`LOSS_TOLERANCE`]); `Cᵢ₊₁`'s file must be the canonical file of the
//!    tensors compared; on the way it sketches the weights at each of the segment's probe steps, which the bundle does not
//!    hold: the replay evidence a pass carries on chain ([`ergon_protocol::evidence`]);
//! 6. **device**: a convolutional model was trained on the CPU, where every verifier replays it
//!    ([`crate::device::replays_across_devices`]);
//! 7. **final_model**: the final-model hash is the hash of the last checkpoint's weights (and the
//!    committed one, when given);
//! 8. **metrics**: the claimed validation loss and accuracy are what the final weights give;
//! 9. for a bundle whose training diverged (`Manifest::diverged_at`), no metrics: its **tail** (the
//!    last checkpoint to the divergence) is replayed by every verifier, as its last segment when
//!    drawn for it (`replay[k]`, with a sketch) or else as the `divergence` check, and must diverge
//!    where the manifest says; only the two rules about C0 apply.
//!
//! The files: `checks/` holds one file per check above (`checks/files.rs` … `checks/metrics.rs`),
//! each a function that adds its outcome to the report; [`verify`] here runs them in order. What
//! they use: `select.rs` (what is read and replayed), `replay.rs` (a segment's replay and its
//! sketch), `rules.rs`, `sample.rs` and [`full_pass`] (the full-pass rules, what they read, and
//! state sanity), `optimizer.rs`
//! (the reachability of the optimizer state), `tail.rs` (a diverged bundle's tail), `report.rs`
//! (checks, report, verdict).
//!
//! Whatever a bundle holds (missing, truncated, altered, malformed or non-finite files) yields a
//! failing check with its reason, never an error: errors are for what is not the trainer's fault
//! (the spec or the data cannot be read). An error on chain would make the job inconclusive and
//! spare a forger its slash.

mod checks;
pub mod full_pass;
mod optimizer;
mod replay;
mod report;
mod rules;
mod sample;
mod select;
mod tail;

pub use optimizer::{adam_step_ratio, checkpoint_step_ratio, MIN_ADAM_STEP_RATIO};
pub use replay::{checkpoint_evidence_weights, compare_updates, Sketcher};
pub use report::{Check, ProbeSketch, Report, SegmentSketch};
pub use rules::{state_defects, RULE_RANDOM_INITS};
pub use sample::{CoordinateSample, RULE_CHUNKS};
pub use select::{
    drawable_segments, fetch_for, rule_sample, rule_seed, segments_from_challenge, selection,
    Selection, RULE_CHECKPOINTS, RULE_VALIDATION_SAMPLES,
};

use std::{collections::BTreeMap, path::PathBuf};

use candle_core::{DType, Device};
use ergon_job_spec::JobSpec;

use crate::{
    bundle::{self, CheckpointEntry, HostTensors, Manifest, OnChainMetrics},
    data,
    error::Result,
    model::Model,
    optim::Optimizer,
    rng::Seed,
    run::{self, Cancel, Threads},
    trajectory,
};
use replay::{evidence_weights, loss_gap, replay_segment, Segment};
use rules::full_pass_rules;
use tail::check_tail;

/// Default replay tolerance ε on the relative error of a segment's update.
pub const DEFAULT_EPSILON: f64 = 1e-3;
/// Default replay tolerance τ on the cosine between claimed and replayed updates.
pub const DEFAULT_TAU: f64 = 0.999;
/// Default number of replayed segments.
pub const DEFAULT_SEGMENTS: u32 = 3;
/// Tolerance on claimed validation loss and accuracy (absolute, after evaluating the final weights).
pub const METRIC_TOLERANCE: f64 = 1e-4;
/// Tolerance on each replayed step's loss against the manifest's: `|Δ| ≤ LOSS_TOLERANCE · max(1, |loss|)`.
pub const LOSS_TOLERANCE: f64 = 1e-3;
pub use tail::DIVERGENCE_TOLERANCE;

/// What to verify and how strictly.
pub struct VerifyOptions {
    /// The bundle directory: the manifest and the checkpoints read whole ([`fetch_for`] downloads
    /// them there from a served bundle).
    pub bundle: PathBuf,
    /// Where the bundle is served (its base URL), when it was downloaded from there: what the
    /// verification reads only in part (the rules' weights, an end-state tensor the replay disagrees
    /// with) and is not in `bundle` is read from it by byte ranges.
    pub source: Option<String>,
    /// Segments to replay (`i` for `Cᵢ → Cᵢ₊₁`), e.g. from the on-chain round; when empty they are
    /// drawn from `challenge`.
    pub segments: Vec<u32>,
    /// Challenge bytes (on-chain randomness) that choose the segments when none are given.
    pub challenge: Vec<u8>,
    /// How many segments to draw from the challenge.
    pub segment_count: u32,
    /// ε: largest accepted relative error of a segment's update.
    pub epsilon: f64,
    /// τ: smallest accepted cosine between claimed and replayed updates.
    pub tau: f64,
    /// The committed Merkle root, if known.
    pub expected_root: Option<[u8; 32]>,
    /// The seed the job prescribes ([`crate::rng::job_seed`] of the job id and the trainer's account
    /// bytes): mandatory, a bundle trained under any other seed fails.
    pub expected_seed: Seed,
    /// The committed final-model hash, if known.
    pub expected_final_model: Option<[u8; 32]>,
    /// The metrics the bundle commitment states on chain, if known: the manifest's must convert to
    /// them ([`crate::bundle::Metrics::on_chain`]).
    pub expected_metrics: Option<OnChainMetrics>,
    /// The divergence committed on chain (`Some(None)`: none; `Some(Some(s))`: diverged at step
    /// `s`), if known: the manifest must say the same.
    pub expected_divergence: Option<Option<u64>>,
    /// The kernels revision the job pins (the chain's job record; default this worker's): the
    /// manifest must name it, and a worker of another revision does not verify
    /// ([`crate::Error::OtherKernels`]).
    pub kernels: u32,
    /// The device class the trainer declared on chain for the bundle (`JobMarket.BundleDevice`),
    /// if known: the manifest must name a device of it, or the bundle fails before any replay.
    pub expected_class: Option<ergon_protocol::DeviceClass>,
    /// Device to replay on.
    pub device: Device,
    /// Run the six full-pass rules ([`full_pass`]).
    pub full_pass: bool,
    /// Replay the segments (turning it off leaves the rules alone, to measure what they miss).
    pub replay: bool,
    /// Datasets kept from earlier verifications (loaded here and kept there if missing).
    pub datasets: Option<std::sync::Arc<data::DatasetCache>>,
    /// CPU threads to replay on (default: the calling thread's pool).
    pub threads: Option<Threads>,
    /// Checked between segments: a raised token ends the verification with
    /// [`crate::Error::Cancelled`] (no verdict: the caller asked it to stop).
    pub cancel: Option<Cancel>,
}

impl VerifyOptions {
    /// Defaults for `bundle` trained under `expected_seed`: 3 segments from an empty challenge,
    /// default ε and τ, no committed root or final model.
    pub fn new(bundle: PathBuf, expected_seed: Seed) -> Self {
        Self {
            bundle,
            source: None,
            segments: Vec::new(),
            challenge: Vec::new(),
            segment_count: DEFAULT_SEGMENTS,
            epsilon: DEFAULT_EPSILON,
            tau: DEFAULT_TAU,
            expected_root: None,
            expected_seed,
            expected_final_model: None,
            expected_metrics: None,
            expected_divergence: None,
            kernels: crate::KERNELS_REVISION,
            expected_class: None,
            device: Device::Cpu,
            full_pass: true,
            replay: true,
            datasets: None,
            threads: None,
            cancel: None,
        }
    }
}

/// The bundle's checkpoints as the checks read them: those the files check parsed and matched
/// against their digest come from memory, the others are read (and their digest checked) again;
/// parts of a checkpoint (its weights, some tensors) are read by byte ranges from the local file
/// or, when it was not downloaded, from the served bundle, each tensor checked against its hash.
struct Checkpoints<'a> {
    dir: &'a std::path::Path,
    cached: &'a BTreeMap<u64, HostTensors>,
    layout: &'a bundle::Layout,
    source: Option<&'a str>,
    /// The rules' coordinates of the checkpoints read by chunks and not yet used by the rules, by
    /// step: at most the rules' sample ([`RULE_CHECKPOINTS`]), each dropped once the rules have
    /// taken it.
    samples: std::cell::RefCell<BTreeMap<u64, std::rc::Rc<Vec<f32>>>>,
}

impl<'a> Checkpoints<'a> {
    fn tensors(&self, entry: &CheckpointEntry) -> Result<std::borrow::Cow<'a, HostTensors>> {
        if let Some(t) = self.cached.get(&entry.step) {
            return Ok(std::borrow::Cow::Borrowed(t));
        }
        trajectory::read_checkpoint(self.dir, entry).map(std::borrow::Cow::Owned)
    }

    /// Sets `model` and `opt` to checkpoint `entry`.
    fn load(&self, entry: &CheckpointEntry, model: &Model, opt: &mut Optimizer) -> Result<()> {
        let host = self.tensors(entry)?;
        trajectory::load_state(&self.dir.join(&entry.file), &host, entry.step, model, opt)
    }

    /// The tensors `names` of checkpoint `entry`, each checked against its hash in the manifest.
    fn some(&self, entry: &CheckpointEntry, names: &[String]) -> Result<HostTensors> {
        if let Some(t) = self.cached.get(&entry.step) {
            let picked = names.iter().filter_map(|n| Some((n.clone(), t.0.get(n)?.clone())));
            return Ok(HostTensors(picked.collect()));
        }
        Ok(bundle::ranges::read_tensors(&self.uri(entry)?, entry, names, self.layout)?.0)
    }

    /// Where checkpoint `entry`'s file is read from in part: the local file when it was
    /// downloaded, else the served bundle.
    fn uri(&self, entry: &CheckpointEntry) -> Result<String> {
        let not_here = || crate::Error::Bundle {
            path: self.dir.join(&entry.file),
            reason: "not downloaded, and no source to read it from".into(),
        };
        if !bundle::is_plain_file_name(&entry.file) {
            return Err(crate::Error::Bundle {
                path: entry.file.clone().into(),
                reason: "file name escapes the bundle".into(),
            });
        }
        let local = self.dir.join(&entry.file);
        Ok(if local.is_file() {
            local.to_string_lossy().into_owned()
        } else {
            let base = self.source.ok_or_else(not_here)?;
            format!("{}/{}", base.trim_end_matches('/'), entry.file)
        })
    }

    /// The rules' coordinates of checkpoint `entry` ([`CoordinateSample`]), read by its chunks
    /// (each checked against the manifest's chunk list) once and kept until
    /// [`Checkpoints::take_sample`]. A file of another length than the layout's is a defect.
    fn sample(
        &self,
        entry: &CheckpointEntry,
        coordinates: &CoordinateSample,
    ) -> Result<std::rc::Rc<Vec<f32>>> {
        let file_bytes = coordinates.file_bytes;
        if let Some(t) = self.samples.borrow().get(&entry.step) {
            return Ok(t.clone());
        }
        if entry.file_bytes != file_bytes {
            return Err(crate::Error::Bundle {
                path: entry.file.clone().into(),
                reason: format!(
                    "{} bytes, not the {file_bytes} of the last checkpoint's layout",
                    entry.file_bytes
                ),
            });
        }
        let uri = self.uri(entry)?;
        let (chunks, _) = bundle::ranges::read_chunks(&uri, entry, &coordinates.chunks)?;
        let read = std::rc::Rc::new(coordinates.of_chunks(&chunks));
        self.samples.borrow_mut().insert(entry.step, read.clone());
        Ok(read)
    }

    /// [`Checkpoints::sample`], no longer kept: the rules' last use of it.
    fn take_sample(&self, entry: &CheckpointEntry) -> Option<std::rc::Rc<Vec<f32>>> {
        self.samples.borrow_mut().remove(&entry.step)
    }
}

/// Whether `e` is a failure to reach the served bundle (retried by a daemon, and a fail only once
/// its attempts are spent) rather than a defect of what it served.
fn unreachable(e: &crate::Error) -> bool {
    matches!(e, crate::Error::Download { .. })
}

/// Where to replay a bundle trained on `trained_on` (the manifest's device): on the CPU when it was
/// trained on a CPU, even by a verifier that computes on a GPU, else on the verifier's `device`.
/// Replays between CPUs are exact, while a GPU's other summation orders put an honest CNN bundle's
/// replay over ε (measured on an H100: docs/pot-calibration.md). No trainer gains from the choice:
/// a bundle that names the CPU gets the exact replay, one that names a GPU the verifier's own.
fn replay_device<'a>(trained_on: &str, device: &'a Device, cpu: &'a Device) -> &'a Device {
    if trained_on == "cpu" {
        cpu
    } else {
        device
    }
}

/// The job's datasets for a verification (from `datasets` when kept there): a failure is
/// [`crate::Error::JobData`], the owner's problem and not a defect of the bundle.
pub fn load_job_data(
    spec: &JobSpec,
    datasets: Option<&data::DatasetCache>,
) -> Result<data::JobData> {
    data::JobData::load_with(spec, datasets).map_err(|e| crate::Error::JobData(Box::new(e)))
}

/// Verifies the bundle at `opts.bundle` against `spec`.
pub fn verify(spec: &JobSpec, opts: &VerifyOptions) -> Result<Report> {
    run::on(opts.threads.as_ref(), || verify_here(spec, opts))
}

fn verify_here(spec: &JobSpec, opts: &VerifyOptions) -> Result<Report> {
    let summary = spec.validate()?;
    // Another revision's replay of an honest bundle may be off by more than ε: no verdict at all,
    // rather than a fail that would slash an honest trainer.
    crate::runs_kernels(opts.kernels)?;
    let mut report = Report {
        passed: true,
        root: None,
        segments: vec![],
        checks: vec![],
        sketches: vec![],
        replay_seconds: 0.0,
    };
    let layout = trajectory::layout(spec)?;
    let Some((inspection, chosen)) = checks::files::check(opts, &layout, &mut report) else {
        return Ok(report);
    };
    let m = &inspection.manifest;
    let Some(seed) = checks::manifest::check(spec, &summary, opts, m, &mut report) else {
        return Ok(report);
    };
    let checkpoints = Checkpoints {
        dir: &opts.bundle,
        cached: &inspection.checkpoints,
        layout: &layout,
        source: opts.source.as_deref(),
        samples: Default::default(),
    };
    let Some(coordinates) =
        checks::files::check_samples(&checkpoints, m, &chosen, opts, &mut report)?
    else {
        return Ok(report);
    };
    let bundle = checks::Bundle {
        spec,
        summary: &summary,
        opts,
        root: inspection.root,
        manifest: m,
        chosen: &chosen,
        seed,
        checkpoints,
        coordinates,
    };
    if !checks::states::check(&bundle, &mut report) {
        return Ok(report);
    }

    let cpu = Device::Cpu;
    let device = replay_device(&m.environment.device, &opts.device, &cpu);
    let data = load_job_data(spec, opts.datasets.as_deref())?;
    let model = Model::initial(spec, &seed, data.weights(), device, DType::F32)?;
    let opt = Optimizer::new(spec, &model.params)?;
    checks::init::check(&bundle, &model, &opt, &mut report)?;
    let replayed_on = trajectory::environment(device, spec.precision).device;
    let mut replayer = checks::Replayer { model, opt, device, replayed_on, data };
    if opts.full_pass {
        // C0 as computed here: the `init` check holds the bundle's to it bit for bit.
        let c0 = rules::model_weights(&replayer.model)?;
        checks::rules::check(&bundle, &mut replayer, &c0, &mut report);
    }
    checks::replay::check(&bundle, &mut replayer, &mut report)?;
    checks::device::check(&bundle, &mut report);
    if checks::final_model::check(&bundle, &mut report) {
        checks::metrics::check(&bundle, &mut replayer, &mut report);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU verifier replays a CPU-trained bundle on the CPU and a GPU-trained one on its GPU (a
    /// second CPU device stands in for the GPU: the choice is by reference).
    #[test]
    fn a_cpu_bundle_is_replayed_on_the_cpu_and_a_gpu_bundle_where_the_verifier_computes() {
        let (gpu, cpu) = (Device::Cpu, Device::Cpu);
        assert!(std::ptr::eq(replay_device("cpu", &gpu, &cpu), &cpu));
        assert!(std::ptr::eq(replay_device("cuda:0", &gpu, &cpu), &gpu));
    }

    fn check(name: &str, passed: bool) -> Check {
        Check { name: name.into(), passed, measured: String::new(), threshold: String::new() }
    }

    fn report(checks: Vec<Check>) -> Report {
        Report {
            passed: checks.iter().all(|c| c.passed),
            root: None,
            segments: vec![4, 9, 17],
            checks,
            sketches: vec![],
            replay_seconds: 0.0,
        }
    }

    #[test]
    fn a_fail_names_the_failing_replay_or_else_the_first_segment() {
        let pass = report(vec![check("files", true), check("replay[4]", true)]);
        assert_eq!(pass.failed_segment(), None);
        let replay = report(vec![check("replay[4]", true), check("replay[9]", false)]);
        assert_eq!(replay.failed_segment(), Some(9));
        let bundle_wide = report(vec![check("manifest", false), check("replay[4]", true)]);
        assert_eq!(bundle_wide.failed_segment(), Some(4));
    }
}
