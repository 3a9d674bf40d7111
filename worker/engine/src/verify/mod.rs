//! The Proof-of-Training verifier: checks a bundle against its job spec and replays segments of it.
//!
//! Checks, in order (each reported with its measured value and threshold):
//!
//! 1. **files**: every checkpoint file and tensor matches the manifest (and the Merkle root matches
//!    the committed one, when given);
//! 2. **manifest**: the manifest describes this spec (spec hash, batch size, step and checkpoint
//!    schedule), the prescribed seed (mandatory: from the job id and the trainer's account bytes),
//!    f32 and the kernels revision the job pins (a worker of another revision gives no verdict:
//!    [`crate::Error::OtherKernels`]);
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
//!    per-step loss (within [`LOSS_TOLERANCE`]);
//!    on the way it sketches the weights at each of the segment's probe steps, which the bundle does not
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
//! The files: `select.rs` (what is read and replayed), `replay.rs` (a segment's replay and its
//! sketch), `rules.rs` (the full-pass rules and state sanity), `optimizer.rs` (the reachability of
//! the optimizer state), `tail.rs` (a diverged bundle's tail), `report.rs` (checks, report,
//! verdict); this module runs them in order.
//!
//! Whatever a bundle holds (missing, truncated, altered, malformed or non-finite files) yields a
//! failing check with its reason, never an error: errors are for what is not the trainer's fault
//! (the spec or the data cannot be read). An error on chain would make the job inconclusive and
//! spare a forger its slash.

mod optimizer;
mod replay;
mod report;
mod rules;
mod select;
mod tail;

pub use optimizer::{adam_step_ratio, checkpoint_step_ratio, MIN_ADAM_STEP_RATIO};
pub use replay::{checkpoint_evidence_weights, compare_updates, Sketcher};
pub use report::{Check, ProbeSketch, Report, SegmentSketch};
pub use rules::{state_defects, RULE_RANDOM_INITS};
pub use select::{
    drawable_segments, fetch_for, rule_sample, rule_seed, segments_from_challenge, selection,
    Selection, RULE_CHECKPOINTS, RULE_VALIDATION_SAMPLES,
};

use std::{collections::BTreeMap, path::PathBuf};

use candle_core::{DType, Device};
use ergon_job_spec::JobSpec;

use crate::{
    bundle::{self, checkpoint, CheckpointEntry, HostTensors, Manifest, OnChainMetrics},
    data::{self, hex},
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
    /// The bundle directory.
    pub bundle: PathBuf,
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
    /// Device to replay on.
    pub device: Device,
    /// Run the six full-pass rules ([`crate::full_pass`]).
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
/// against their digest come from memory, the others are read (and their digest checked) again.
struct Checkpoints<'a> {
    dir: &'a std::path::Path,
    cached: &'a BTreeMap<u64, HostTensors>,
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
    let dir = &opts.bundle;
    let layout = trajectory::layout(spec)?;

    // 1. Files against the manifest, and the root. Only the checkpoints the checks below read are
    // re-hashed (the rules' sample, the replayed segments' ends, C0 and the last); the Merkle root
    // over the manifest still commits to every one.
    let mut chosen = Selection::default();
    let select = |m: &Manifest| {
        chosen = selection(opts, m);
        chosen.read.clone()
    };
    let inspection = match bundle::inspect_selected(dir, select, Some(&layout)) {
        Ok(i) => i,
        Err(e) => {
            report.push("files", false, e.to_string(), "a readable manifest");
            return Ok(report);
        }
    };
    report.root = Some(hex(&inspection.root));
    let problems = inspection.problems.join("; ");
    report.push(
        "files",
        inspection.problems.is_empty(),
        if problems.is_empty() {
            format!(
                "{} of {} checkpoint files read; all files and tensors match",
                chosen.read.len(),
                inspection.manifest.checkpoints.len()
            )
        } else {
            problems
        },
        "every file read matches the manifest's hashes",
    );
    if let Some(root) = opts.expected_root {
        report.push(
            "root",
            inspection.root == root,
            hex(&inspection.root),
            &format!("the committed root {}", hex(&root)),
        );
    }
    let m: &Manifest = &inspection.manifest;

    // 2. The manifest describes this spec, this seed, and the prescribed checkpoint schedule.
    let mut schedule = trajectory::checkpoint_steps(spec, &summary);
    let mut trained_steps = summary.total_steps;
    let steps: Vec<u64> = m.checkpoints.iter().map(|c| c.step).collect();
    let seed = bundle::parse_hash(&m.seed);
    let mut mismatches = Vec::new();
    if m.spec_hash != hex(&trajectory::spec_hash(spec)) {
        mismatches.push("spec hash".to_string());
    }
    if m.environment.kernels != opts.kernels {
        mismatches.push(format!(
            "kernels revision {} where the job pins {}",
            m.environment.kernels, opts.kernels
        ));
    }
    // A diverged bundle holds the checkpoints and losses before its divergence.
    if let Some(step) = m.diverged_at {
        if step > summary.total_steps {
            mismatches.push(format!("diverged at step {step}, after the last"));
        }
        schedule.truncate(spec.checkpoints_before_divergence(step) as usize);
        trained_steps = step.min(summary.total_steps);
    }
    if let Some(expected) = opts.expected_divergence {
        if m.diverged_at != expected {
            mismatches.push(format!(
                "divergence {:?} where the commitment says {expected:?}",
                m.diverged_at
            ));
        }
    }
    if m.batch_size != spec.batch_size
        || m.checkpoint_interval != spec.checkpoint_interval
        || m.steps_per_epoch != summary.steps_per_epoch
        || m.total_steps != summary.total_steps
        || m.losses.len() as u64 != trained_steps
    {
        mismatches.push("step schedule".into());
    }
    if steps != schedule {
        mismatches.push(format!("checkpoint steps {steps:?}"));
    }
    // Jobs train in f32 on every device (a GPU with TF32 off): a bundle of another precision was
    // not computed as the job asks, and the replay tolerances do not cover it.
    if m.environment.precision != "f32" {
        mismatches.push(format!("precision {:?} (jobs train in f32)", m.environment.precision));
    }
    // The claimed training loss is a function of the claimed losses (which the replays check):
    // since format 4 the last epoch's mean, before it the last step's loss (a bundle of an older
    // worker, trained before the change, is judged by its own rule; either is a value, not a
    // choice).
    let train_loss = if m.format_version >= 4 {
        trajectory::final_train_loss(&m.losses, summary.steps_per_epoch, m.diverged_at)
    } else {
        m.losses.last().copied().unwrap_or_default()
    };
    if m.metrics.final_train_loss.to_bits() != train_loss.to_bits() {
        mismatches.push(format!(
            "final_train_loss {} where the losses give {train_loss}",
            m.metrics.final_train_loss
        ));
    }
    if let Some(committed) = opts.expected_metrics {
        let claimed = m.metrics.on_chain();
        if claimed != committed {
            mismatches.push(format!("metrics {claimed:?} where the commitment says {committed:?}"));
        }
    }
    match seed {
        None => mismatches.push("seed is not 32 bytes of hex".into()),
        Some(s) if s != opts.expected_seed => {
            mismatches.push(format!("seed {} ≠ {}", hex(&s), hex(&opts.expected_seed)))
        }
        Some(_) => {}
    }
    report.push(
        "manifest",
        mismatches.is_empty(),
        if mismatches.is_empty() { "matches".into() } else { mismatches.join("; ") },
        "spec hash, batch size, step and checkpoint schedule, seed as prescribed, f32, the \
         job's kernels revision, final_train_loss of the losses, the committed metrics",
    );
    let (Some(seed), true) = (seed, report.passed) else {
        // Nothing below is meaningful on a bundle that is not what it claims to be.
        return Ok(report);
    };
    let checkpoints = Checkpoints { dir, cached: &inspection.checkpoints };

    // 3. Every checkpoint read holds a sane state.
    // Each checkpoint read once for both checks: its sanity, and whether its optimizer state is
    // one an honest run reaches (on its own and from the one read before it), wherever the
    // segments were drawn.
    let (mut bad, mut unreachable) = (Vec::new(), Vec::new());
    let mut previous: Option<(u64, std::borrow::Cow<HostTensors>)> = None;
    for &i in &chosen.read {
        let entry = &m.checkpoints[i];
        let host = match checkpoints.tensors(entry) {
            Ok(host) => host,
            Err(e) => {
                bad.push(format!("step {}: {e}", entry.step));
                continue;
            }
        };
        bad.extend(state_defects(entry.step, &host));
        unreachable.extend(optimizer::state_defects(&spec.optimizer, entry.step, &host));
        if let Some((step, earlier)) = &previous {
            let (earlier, later) = ((*step, earlier.as_ref()), (entry.step, host.as_ref()));
            unreachable.extend(optimizer::decay_defects(&spec.optimizer, earlier, later));
        }
        previous = Some((entry.step, host));
    }
    drop(previous);
    report.push(
        "states",
        bad.is_empty(),
        if bad.is_empty() {
            format!("{} checkpoints finite and not degenerate", chosen.read.len())
        } else {
            bad.join("; ")
        },
        "every value finite; not every weight zero",
    );
    if !report.passed {
        return Ok(report);
    }
    report.push(
        "optimizer",
        unreachable.is_empty(),
        if unreachable.is_empty() {
            format!("{} optimizer states reachable", chosen.read.len())
        } else {
            unreachable.join("; ")
        },
        "each state one an honest run reaches: AdamW's m² within the bound v sets, an update \
         direction of root mean square ≥ 1e-5, v decaying no faster than β₂; SGD's momentum not reset",
    );

    // 4. C0 == Init(seed).
    let cpu = Device::Cpu;
    let device = replay_device(&m.environment.device, &opts.device, &cpu);
    let replayed_on = trajectory::environment(device).device;
    let model = Model::new(spec, &seed, device, DType::F32)?;
    let mut opt = Optimizer::new(spec.optimizer.clone(), &model.params)?;
    let init = HostTensors::from_tensors(&trajectory::state_tensors(&model, &opt))?.hashes();
    let init: BTreeMap<String, String> = init.iter().map(|(n, h)| (n.clone(), hex(h))).collect();
    let differing =
        init.iter().filter(|(n, h)| m.checkpoints[0].tensors.get(*n) != Some(h)).count()
            + m.checkpoints[0].tensors.len().saturating_sub(init.len());
    report.push(
        "init",
        differing == 0,
        format!("{differing} of {} tensors differ from Init(seed)", init.len()),
        "C0 equals Init(seed) bit for bit",
    );

    // The six full-pass rules: cheap screens before the replay.
    let data = load_job_data(spec, opts.datasets.as_deref())?;
    let (train_set, val_set) = (data.train(), data.validation());
    if opts.full_pass {
        let sample = &chosen.rules_sample;
        match full_pass_rules(
            spec,
            &checkpoints,
            m,
            sample,
            &seed,
            &model,
            &mut opt,
            val_set,
            device,
        ) {
            Ok(checks) => {
                // Four rules assume a converging run (accuracy, steps and distances settle): a
                // diverged one is judged by its replay and the two rules about C0.
                let about_c0 = ["rule:initial_distribution", "rule:initial_independence"];
                let applies =
                    |c: &Check| m.diverged_at.is_none() || about_c0.contains(&c.name.as_str());
                for check in checks.into_iter().filter(applies) {
                    report.passed &= check.passed;
                    report.checks.push(check);
                }
            }
            Err(e) => report.push("rules", false, e.to_string(), "checkpoints the rules can read"),
        }
    }

    // 5. Replay the challenged segments.
    let segments = chosen.segments.clone();
    if opts.replay {
        report.segments = segments;
    }
    let started = std::time::Instant::now();
    // A diverged bundle's tail (its last checkpoint to the divergence) is replayed by everyone: as
    // a drawn segment with its evidence, or else as a check of the bundle as a whole.
    let tail_index = m.diverged_at.map(|_| m.checkpoints.len().saturating_sub(1) as u32);
    if let (Some(_), Some(cancel)) = (tail_index, &opts.cancel) {
        cancel.check()?;
    }
    let tail = tail_index.map(|i| {
        let key = ergon_protocol::evidence::key(&inspection.root, i);
        let state = (&model, &mut opt);
        check_tail(spec, &summary, &data, &seed, (m, &checkpoints), state, key, device)
    });
    let mut tail_replayed = false;
    for &i in &report.segments.clone() {
        if let Some(cancel) = &opts.cancel {
            cancel.check()?;
        }
        let name = format!("replay[{i}]");
        if let (Some(tail), true) = (&tail, Some(i) == tail_index) {
            if let Some(sketch) = &tail.sketch {
                report.sketches.push(sketch.clone());
            }
            report.push(name, tail.passed, tail.measured.clone(), &tail.threshold);
            tail_replayed = true;
            continue;
        }
        let (Some(from), Some(to)) =
            (m.checkpoints.get(i as usize), m.checkpoints.get(i as usize + 1))
        else {
            report.push(name, false, "no such segment".into(), "a segment of the bundle");
            continue;
        };
        let target = match checkpoints.tensors(to) {
            Ok(t) => t,
            Err(e) => {
                report.push(name, false, e.to_string(), "a readable checkpoint");
                continue;
            }
        };
        if let Err(e) = checkpoints.load(from, &model, &mut opt) {
            report.push(name, false, e.to_string(), "a readable checkpoint");
            continue;
        }
        let threshold = format!(
            "weights and each optimizer state slot: relative error ≤ {:e} and cosine ≥ {}; every \
             step's loss within {LOSS_TOLERANCE:e} (trained on {}, replayed on {})",
            opts.epsilon, opts.tau, m.environment.device, replayed_on
        );
        let segment = Segment {
            from,
            to,
            target: &target,
            claimed_losses: &m.losses,
            evidence_key: ergon_protocol::evidence::key(&inspection.root, i),
        };
        match replay_segment(spec, &summary, train_set, &seed, &model, &mut opt, &segment, device) {
            Ok(r) => {
                report.sketches.push(SegmentSketch::new(i, r.probes.clone(), &r.sketches));
                let within = |(rel, cos): (f64, f64)| rel <= opts.epsilon && cos >= opts.tau;
                let passed = within(r.weights)
                    && r.state.iter().all(|(_, s)| within(*s))
                    && r.loss_gap <= LOSS_TOLERANCE
                    && r.missing.is_empty();
                let state: Vec<String> = r
                    .state
                    .iter()
                    .map(|(slot, (rel, cos))| {
                        format!("optimizer {slot} relative error {rel:.3e}, cosine {cos:.6}")
                    })
                    .collect();
                let mut measured = format!(
                    "steps {}..{}: relative error {:.3e}, cosine {:.6}; {}; max loss gap {:.2e}",
                    from.step,
                    to.step,
                    r.weights.0,
                    r.weights.1,
                    state.join("; "),
                    r.loss_gap
                );
                if !r.missing.is_empty() {
                    measured.push_str(&format!(
                        "; missing from the checkpoint: {}",
                        r.missing.join(", ")
                    ));
                }
                report.push(name, passed, measured, &threshold);
            }
            Err(e) => report.push(name, false, e.to_string(), &threshold),
        }
    }
    if let (Some(tail), false) = (tail, tail_replayed) {
        report.push("divergence", tail.passed, tail.measured, &tail.threshold);
    }
    report.replay_seconds = started.elapsed().as_secs_f64();

    // 6. The device: a convolutional job trains on the CPU, where every verifier replays it (its
    // GPU training replays off by more than ε). Checked after the replays so that they still
    // measure how far another device's training lands (scripts/bench-gpu.sh).
    report.push(
        "device",
        m.environment.device == "cpu" || crate::device::replays_across_devices(spec),
        m.environment.device.clone(),
        "the CPU for a convolutional model (any device otherwise)",
    );

    // 7. Final-model hash.
    let Some(last) = m.checkpoints.last() else {
        // The manifest check requires the schedule's checkpoints; kept as a check all the same.
        report.push("final_model", false, "no checkpoint".into(), "a final checkpoint");
        return Ok(report);
    };
    let weight_hashes: Vec<[u8; 32]> = last
        .tensors
        .iter()
        .filter(|(n, _)| n.starts_with("param."))
        .filter_map(|(_, h)| bundle::parse_hash(h))
        .collect();
    let final_hash = checkpoint::digest(weight_hashes.iter());
    let committed_ok = opts.expected_final_model.is_none_or(|e| e == final_hash);
    report.push(
        "final_model",
        hex(&final_hash) == m.final_model_hash && committed_ok,
        hex(&final_hash),
        "the manifest's (and the committed) final-model hash",
    );

    // 8. Claimed metrics of the final weights (a diverged bundle claims none: its tail decides).
    if let Some(step) = m.diverged_at {
        report.push(
            "metrics",
            true,
            format!("none: diverged at step {step} of {}", summary.total_steps),
            "the metrics of a bundle that did not diverge",
        );
        return Ok(report);
    }
    match checkpoints
        .load(last, &model, &mut opt)
        .and_then(|()| trajectory::evaluate(&model, val_set, device))
    {
        Ok((loss, accuracy)) => {
            let gap_loss = (loss - m.metrics.validation_loss).abs() as f64;
            let gap_acc = (accuracy - m.metrics.validation_accuracy).abs() as f64;
            report.push(
                "metrics",
                gap_loss <= METRIC_TOLERANCE && gap_acc <= METRIC_TOLERANCE,
                format!(
                    "validation loss {loss:.6} (claimed {:.6}), accuracy {accuracy:.6} (claimed {:.6})",
                    m.metrics.validation_loss, m.metrics.validation_accuracy
                ),
                &format!("both within {METRIC_TOLERANCE:e}"),
            );
        }
        Err(e) => report.push("metrics", false, e.to_string(), "a readable final checkpoint"),
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
