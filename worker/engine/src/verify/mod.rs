//! The Proof-of-Training verifier: checks a bundle against its job spec and replays segments of it.
//!
//! Checks, in order (each reported with its measured value and threshold):
//!
//! 1. **files**: every checkpoint file and tensor matches the manifest (and the Merkle root matches
//!    the committed one, when given);
//! 2. **manifest**: the manifest describes this spec (spec hash, batch size, step and checkpoint
//!    schedule) and the prescribed seed (mandatory: from the job id and the trainer's account bytes);
//! 3. **states**: every checkpoint read holds only finite values and is not degenerate (not every
//!    weight zero);
//! 4. **init**: C0 is Init(seed) bit for bit, weights and optimizer state;
//! 5. **replay**: for each challenged segment `Cᵢ → Cᵢ₊₁`, the verifier loads `Cᵢ` (weights and
//!    optimizer state), runs the same steps on the same batches (the seed's PRF), and compares
//!    everything the replay produces with what `Cᵢ₊₁` and the manifest claim: the weight update
//!    (relative error ‖ΔW_claim − ΔW_replay‖ / ‖ΔW_replay‖ ≤ ε and cosine ≥ τ), the optimizer state
//!    (the same bounds on the state vectors) and every per-step loss (within [`LOSS_TOLERANCE`]);
//!    on the way it sketches the weights at the segment's probe step, which the bundle does not
//!    hold: the replay evidence a pass carries on chain ([`ergon_protocol::evidence`]);
//! 6. **final_model**: the final-model hash is the hash of the last checkpoint's weights (and the
//!    committed one, when given);
//! 7. **metrics**: the claimed validation loss and accuracy are what the final weights give.
//!
//! Whatever a bundle holds (missing, truncated, altered, malformed or non-finite files) yields a
//! failing check with its reason, never an error: errors are for what is not the trainer's fault
//! (the spec or the data cannot be read). An error on chain would make the job inconclusive and
//! spare a forger its slash.

mod tail;

use std::{collections::BTreeMap, path::PathBuf};

use candle_core::{DType, Device};
use ergon_job_spec::JobSpec;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{
    bundle::{self, checkpoint, CheckpointEntry, HostTensors, Manifest},
    data::{self, hex},
    error::Result,
    full_pass,
    model::Model,
    optim::Optimizer,
    rng::Seed,
    run::{self, Cancel, Threads},
    trajectory,
};

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
    /// The divergence committed on chain (`Some(None)`: none; `Some(Some(s))`: diverged at step
    /// `s`), if known: the manifest must say the same.
    pub expected_divergence: Option<Option<u64>>,
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
    /// Checked between segments: a raised token ends the verification with [`Error::Cancelled`]
    /// (no verdict: the caller asked it to stop).
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
            expected_divergence: None,
            device: Device::Cpu,
            full_pass: true,
            replay: true,
            datasets: None,
            threads: None,
            cancel: None,
        }
    }
}

/// One check's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Which check (`files`, `manifest`, `init`, `replay[i]`, `final_model`, `metrics`).
    pub name: String,
    /// Whether it passed.
    pub passed: bool,
    /// What was measured.
    pub measured: String,
    /// What passing requires.
    pub threshold: String,
}

/// The verdict on a bundle: every check that ran. Its [`Report::evidence_hash`] is what a verifier
/// commits on chain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// All checks passed.
    pub passed: bool,
    /// The bundle's recomputed Merkle root (0x-hex), if the manifest could be read.
    pub root: Option<String>,
    /// Replayed segments.
    pub segments: Vec<u32>,
    /// The checks, in the order they ran.
    pub checks: Vec<Check>,
    /// The replay evidence of each replayed segment, in the order of `segments`.
    #[serde(default)]
    pub sketches: Vec<SegmentSketch>,
    /// Seconds spent replaying.
    pub replay_seconds: f64,
}

/// The replay evidence of one segment ([`ergon_protocol::Sketch`]) as the report and the CLI
/// print it: what a pass reveals on chain, field for field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentSketch {
    /// The segment `i` of `Cᵢ → Cᵢ₊₁`.
    pub segment: u32,
    /// The probe step inside it (none for a segment of one step).
    pub probe: Option<u64>,
    /// The shared power-of-two exponent.
    pub exponent: i16,
    /// The projections of the probe's deviation from the chord.
    pub deviation: [i32; ergon_protocol::evidence::SKETCH_DIMS],
    /// The scale (the chord's projections).
    pub scale: i32,
}

impl SegmentSketch {
    /// The protocol's sketch.
    pub fn sketch(&self) -> ergon_protocol::Sketch {
        ergon_protocol::Sketch {
            exponent: self.exponent,
            deviation: self.deviation,
            scale: self.scale,
        }
    }
}

impl Report {
    /// SHA-256 of the report's JSON without its timing: the report hash revealed with the verdict
    /// (the same bundle and challenge give the same hash on the same machine).
    pub fn evidence_hash(&self) -> [u8; 32] {
        let timeless = Report { replay_seconds: 0.0, ..self.clone() };
        Sha256::digest(serde_json::to_vec(&timeless).unwrap_or_default()).into()
    }

    /// The segment a fail names on chain (its evidence, which a dispute re-checks): the first
    /// replayed segment whose replay failed, or, when the defect is the bundle's as a whole (files,
    /// manifest, seed, rules, final model, metrics: any replay finds it again), the first replayed
    /// segment. `None` when the report passed.
    pub fn failed_segment(&self) -> Option<u32> {
        if self.passed {
            return None;
        }
        let failed_replay =
            self.checks.iter().filter(|c| !c.passed).find_map(|c| {
                c.name.strip_prefix("replay[")?.strip_suffix(']')?.parse::<u32>().ok()
            });
        failed_replay.or_else(|| self.segments.first().copied())
    }

    /// The sketches a pass reveals: one per replayed segment, in the order of `segments`.
    pub fn evidence(&self) -> Vec<ergon_protocol::Sketch> {
        self.sketches.iter().map(SegmentSketch::sketch).collect()
    }

    /// The first failing check, if any.
    pub fn first_failure(&self) -> Option<&Check> {
        self.checks.iter().find(|c| !c.passed)
    }

    fn push(&mut self, name: impl Into<String>, passed: bool, measured: String, threshold: &str) {
        self.checks.push(Check {
            name: name.into(),
            passed,
            measured,
            threshold: threshold.into(),
        });
        self.passed &= passed;
    }
}

/// The segments a challenge draws: the protocol's uniform draw ([`ergon_protocol::segments::draw`])
/// seeded with the challenge (a 32-byte seed; other lengths are hashed into one with blake2-256),
/// sorted. For checks off chain: on chain each verifier replays the segments the round assigned it
/// ([`ergon_protocol::segments::assign`], announced in `VerifiersDrawn`), given with `--segments`.
pub fn segments_from_challenge(challenge: &[u8], segments: u64, count: u32) -> Vec<u32> {
    let seed: [u8; 32] =
        challenge.try_into().unwrap_or_else(|_| ergon_protocol::hash::blake2_256(challenge));
    ergon_protocol::segments::draw(&seed, u32::try_from(segments).unwrap_or(u32::MAX), count)
}

/// All weights of `model`, flattened in parameter order.
fn flat_weights(model: &Model) -> Result<Vec<f32>> {
    let mut all = Vec::new();
    for p in &model.params {
        all.extend(p.var.as_tensor().flatten_all()?.to_vec1::<f32>()?);
    }
    Ok(all)
}

/// All weights of `model` in the order the replay evidence projects them: parameter tensors by
/// name (`param.<name>`, the order of a checkpoint's tensors), each flattened.
fn evidence_weights(model: &Model) -> Result<Vec<f32>> {
    let mut params: Vec<_> = model.params.iter().collect();
    params.sort_by(|a, b| a.name.cmp(&b.name));
    let mut all = Vec::new();
    for p in params {
        all.extend(p.var.as_tensor().flatten_all()?.to_vec1::<f32>()?);
    }
    Ok(all)
}

/// The weights of a checkpoint in the order the replay evidence projects them (see
/// [`evidence_weights`]): what a verifier that did not replay has of a segment's two ends.
pub fn checkpoint_evidence_weights(host: &HostTensors) -> Vec<f32> {
    host.0
        .iter()
        .filter(|(n, _)| n.starts_with("param."))
        .flat_map(|(_, (_, v))| v.iter().copied())
        .collect()
}

/// Relative error and cosine between a claimed and a replayed update.
pub fn compare_updates(claimed: &[f32], replayed: &[f32]) -> (f64, f64) {
    let (mut diff, mut rr, mut cc, mut dot) = (0f64, 0f64, 0f64, 0f64);
    for (c, r) in claimed.iter().zip(replayed) {
        let (c, r) = (*c as f64, *r as f64);
        diff += (c - r) * (c - r);
        rr += r * r;
        cc += c * c;
        dot += c * r;
    }
    if claimed.len() != replayed.len() {
        return (f64::INFINITY, 0.0);
    }
    let rel = if rr > 0.0 {
        diff.sqrt() / rr.sqrt()
    } else if diff > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let cos = if rr > 0.0 && cc > 0.0 {
        dot / (rr.sqrt() * cc.sqrt())
    } else if rr == 0.0 && cc == 0.0 {
        1.0
    } else {
        0.0
    };
    (rel, cos)
}

/// Validation samples rule 1 evaluates each checkpoint on (the protocol's number: the fees pay for
/// exactly this much).
pub const RULE_VALIDATION_SAMPLES: usize =
    ergon_protocol::overhead::RULE_VALIDATION_SAMPLES as usize;
/// Checkpoints the full-pass rules look at, at most (the first, the last, and an evenly spaced grid
/// at an offset drawn from the challenge; the protocol's number).
pub const RULE_CHECKPOINTS: usize = ergon_protocol::overhead::RULE_CHECKPOINTS as usize;

/// The checkpoints the rules read out of `n`: every one if `n` ≤ [`RULE_CHECKPOINTS`]; else the
/// first, the last, and a grid of `RULE_CHECKPOINTS − 2` evenly spaced ones whose offset is drawn
/// from `seed` (the challenge), so that a forger committing its bundle cannot know which of its
/// checkpoints the rules will read. Returns all picks (sorted) and the grid (evenly spaced, which is
/// what the continuity rule compares).
pub fn rule_sample(n: usize, seed: &[u8; 32]) -> (Vec<usize>, Vec<usize>) {
    if n <= RULE_CHECKPOINTS {
        let all: Vec<usize> = (0..n).collect();
        return (all.clone(), all);
    }
    let grid_len = RULE_CHECKPOINTS - 2;
    let stride = ((n - 1) / grid_len).max(1);
    let span = stride * (grid_len - 1);
    let room = (n - 1).saturating_sub(span) as u64;
    let offset = ergon_protocol::draw::Stream::new(seed, b"rule-offset").below(room + 1) as usize;
    let grid: Vec<usize> = (0..grid_len).map(|k| offset + k * stride).filter(|i| *i < n).collect();
    let mut picks: Vec<usize> = grid.iter().copied().chain([0, n - 1]).collect();
    picks.sort_unstable();
    picks.dedup();
    (picks, grid)
}

/// The seed of the rules' sample: the challenge and the segments the verifier was given (drawn on
/// chain from randomness that began after the bundle was committed).
pub fn rule_seed(challenge: &[u8], segments: &[u32]) -> [u8; 32] {
    ergon_protocol::hash::blake2_256(
        &[b"ergon/verify/rules".as_slice(), challenge, &{
            segments.iter().flat_map(|s| s.to_le_bytes()).collect::<Vec<u8>>()
        }]
        .concat(),
    )
}
/// Fresh initializations rule 6 compares the final model with.
pub const RULE_RANDOM_INITS: usize = 3;

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

/// The parameters of a checkpoint (weights only).
fn checkpoint_weights(host: &HostTensors) -> full_pass::Weights {
    host.0
        .iter()
        .filter(|(n, _)| n.starts_with("param."))
        .map(|(n, (_, v))| (n.clone(), v.clone()))
        .collect()
}

/// The weights of Init(`seed`) for `spec`.
fn init_weights(spec: &JobSpec, seed: &Seed, device: &Device) -> Result<full_pass::Weights> {
    let model = Model::new(spec, seed, device, DType::F32)?;
    let mut out = BTreeMap::new();
    for p in &model.params {
        out.insert(format!("param.{}", p.name), p.var.as_tensor().flatten_all()?.to_vec1::<f32>()?);
    }
    Ok(out)
}

/// A seed derived from `seed` for reference draws, never the training seed itself.
fn derived_seed(seed: &Seed, label: &str) -> Seed {
    Sha256::new()
        .chain_update(b"ergon/verify/")
        .chain_update(label)
        .chain_update(seed)
        .finalize()
        .into()
}

/// Runs the six full-pass rules over every checkpoint of the bundle.
#[allow(clippy::too_many_arguments)]
fn full_pass_rules(
    spec: &JobSpec,
    checkpoints: &Checkpoints,
    m: &Manifest,
    (picks, grid): &(Vec<usize>, Vec<usize>),
    seed: &Seed,
    model: &Model,
    opt: &mut Optimizer,
    val_set: &data::Samples,
    device: &Device,
) -> Result<Vec<Check>> {
    let mut chain = Vec::new();
    let mut evenly = Vec::new();
    let mut accuracies = Vec::new();
    let mut c0 = None;
    // The rules look at a sample of the chain drawn from the challenge (first and last included):
    // reading and evaluating every checkpoint of a long chain would cost more than the replay.
    for &i in picks {
        let entry = &m.checkpoints[i];
        // The files check passed: every sampled file is readable and matches its hashes.
        let host = checkpoints.tensors(entry)?;
        let weights = checkpoint_weights(&host);
        trajectory::load_state(&checkpoints.dir.join(&entry.file), &host, entry.step, model, opt)?;
        accuracies
            .push(trajectory::evaluate_first(model, val_set, device, RULE_VALIDATION_SAMPLES)?.1);
        let flat = full_pass::flatten(&weights);
        if grid.contains(&i) {
            evenly.push(flat.clone());
        }
        chain.push(flat);
        c0.get_or_insert(weights);
    }
    let c0 = c0.unwrap_or_default();
    let reference = init_weights(spec, &derived_seed(seed, "reference"), device)?;
    let randoms = (0..RULE_RANDOM_INITS)
        .map(|k| init_weights(spec, &derived_seed(seed, &format!("random-{k}")), device))
        .collect::<Result<Vec<_>>>()?
        .iter()
        .map(full_pass::flatten)
        .collect::<Vec<_>>();
    let (first, last) =
        (chain.first().cloned().unwrap_or_default(), chain.last().cloned().unwrap_or_default());
    Ok(vec![
        full_pass::accuracy_monotone(&accuracies),
        full_pass::continuity(&evenly),
        full_pass::initial_distribution(&c0, &reference),
        full_pass::initial_independence(&c0),
        full_pass::distance_monotone(&chain),
        full_pass::init_final_distance(&first, &last, &randoms),
    ])
}

/// What is wrong with a checkpoint's state: non-finite values anywhere (weights or optimizer
/// state), or every weight zero. Empty when the state is sane.
pub fn state_defects(step: u64, host: &HostTensors) -> Vec<String> {
    let mut defects = Vec::new();
    for (name, (_, values)) in &host.0 {
        if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
            defects.push(format!("step {step}: {name} holds {bad}"));
        }
    }
    let mut weights = host.0.iter().filter(|(n, _)| n.starts_with("param.")).peekable();
    if weights.peek().is_none() {
        defects.push(format!("step {step}: no weights"));
    } else if weights.all(|(_, (_, values))| values.iter().all(|v| *v == 0.0)) {
        defects.push(format!("step {step}: every weight is zero"));
    }
    defects
}

/// A segment to replay: its two checkpoints, the end's tensors, the manifest's per-step losses and
/// the key of its replay evidence.
struct Segment<'a> {
    from: &'a CheckpointEntry,
    to: &'a CheckpointEntry,
    target: &'a HostTensors,
    claimed_losses: &'a [f32],
    evidence_key: [u8; 32],
}

/// How a replay compares with what the bundle claims.
struct ReplayOutcome {
    /// Relative error and cosine of the weight update.
    weights: (f64, f64),
    /// Relative error and cosine of the optimizer state after the segment.
    state: (f64, f64),
    /// Largest gap between a replayed step's loss and the claimed one, relative to max(1, |loss|).
    loss_gap: f64,
    /// Tensors the replay produces that the end checkpoint lacks.
    missing: Vec<String>,
    /// The probe step and the sketch of the weights there (the replay evidence).
    probe: Option<u64>,
    sketch: ergon_protocol::Sketch,
}

/// The sketch of the weights `mid` at step `probe` of a segment `from → to` that starts at `start`
/// and is claimed to end at `end` ([`ergon_protocol::evidence`]; every vector holds the parameter
/// tensors by name, each flattened, as a checkpoint orders them): the projections of
/// `mid − (start + t·(end − start))`, `t = (probe − from) / (to − from)`, scaled by those of the
/// chord `end − start`. Without a probe (a one-step segment) the deviation is zero.
pub fn sketch(
    key: &[u8; 32],
    (from, probe, to): (u64, Option<u64>, u64),
    start: &[f32],
    mid: Option<&[f32]>,
    end: &[f32],
) -> ergon_protocol::Sketch {
    use ergon_protocol::evidence::{Projector, Sketch};
    let (mut deviation, mut chord) = (Projector::new(key), Projector::new(key));
    let t = match probe {
        Some(p) if to > from => (p - from) as f64 / (to - from) as f64,
        _ => 0.0,
    };
    for (i, (s, e)) in start.iter().zip(end).enumerate() {
        let (s, e) = (*s as f64, *e as f64);
        chord.push(e - s);
        let m = mid.and_then(|m| m.get(i)).map_or(s + t * (e - s), |m| *m as f64);
        deviation.push((m - s) - t * (e - s));
    }
    Sketch::quantize(deviation.finish(), chord.finish())
}

/// Replays `segment` from its start (already loaded into `model` and `opt`) and compares every
/// state it produces with the claimed end.
#[allow(clippy::too_many_arguments)]
fn replay_segment(
    spec: &JobSpec,
    summary: &ergon_job_spec::SpecSummary,
    train_set: &data::Samples,
    seed: &Seed,
    model: &Model,
    opt: &mut Optimizer,
    segment: &Segment,
    device: &Device,
) -> Result<ReplayOutcome> {
    let (from, to) = (segment.from, segment.to);
    let before = flat_weights(model)?;
    let start = evidence_weights(model)?;
    let probe = ergon_protocol::evidence::probe_step(&segment.evidence_key, from.step, to.step);
    let mut losses = Vec::new();
    let mut at_probe = None;
    trajectory::run_steps(
        spec,
        summary,
        train_set,
        seed,
        model,
        opt,
        from.step..to.step,
        device,
        |model, _, done, loss| {
            losses.push(loss);
            if Some(done) == probe {
                at_probe = Some(evidence_weights(model)?);
            }
            Ok(true)
        },
    )?;
    let mut missing = Vec::new();
    let mut claimed_of = |name: String, out: &mut Vec<f32>| match segment.target.0.get(&name) {
        Some((_, values)) => out.extend_from_slice(values),
        None => missing.push(name),
    };
    // Weights: the update from the start, claimed against replayed.
    let replayed = flat_weights(model)?;
    let mut claimed = Vec::with_capacity(replayed.len());
    for p in &model.params {
        claimed_of(format!("param.{}", p.name), &mut claimed);
    }
    let delta =
        |after: &[f32]| -> Vec<f32> { after.iter().zip(&before).map(|(a, b)| a - b).collect() };
    let weights = compare_updates(&delta(&claimed), &delta(&replayed));
    let sketch = sketch(
        &segment.evidence_key,
        (from.step, probe, to.step),
        &start,
        at_probe.as_deref(),
        &checkpoint_evidence_weights(segment.target),
    );
    // Optimizer state: what the next segment would start from.
    let (mut state_claimed, mut state_replayed) = (Vec::new(), Vec::new());
    for (name, tensor) in opt.named_state(&model.params) {
        state_replayed.extend(tensor.flatten_all()?.to_vec1::<f32>()?);
        claimed_of(name, &mut state_claimed);
    }
    let state = compare_updates(&state_claimed, &state_replayed);
    // Per-step losses.
    let claimed_losses =
        segment.claimed_losses.get(from.step as usize..to.step as usize).unwrap_or_default();
    let loss_gap = if claimed_losses.len() != losses.len() {
        f64::INFINITY
    } else {
        losses
            .iter()
            .zip(claimed_losses)
            .map(|(a, b)| (*a as f64 - *b as f64).abs() / (*b as f64).abs().max(1.0))
            .fold(0.0, |worst, gap| if gap.is_nan() { f64::INFINITY } else { worst.max(gap) })
    };
    Ok(ReplayOutcome { weights, state, loss_gap, missing, probe, sketch })
}

/// A tail check's outcome as the report shows it.
struct TailCheck {
    passed: bool,
    measured: String,
    threshold: String,
    sketch: Option<SegmentSketch>,
}

/// Replays the tail of the diverged bundle `checkpoints` (from its last checkpoint) and says
/// whether the training diverges where the manifest claims.
#[allow(clippy::too_many_arguments)]
fn check_tail(
    spec: &JobSpec,
    summary: &ergon_job_spec::SpecSummary,
    data: &data::JobData,
    seed: &Seed,
    (m, checkpoints): (&Manifest, &Checkpoints),
    (model, opt): (&Model, &mut Optimizer),
    evidence_key: [u8; 32],
    device: &Device,
) -> TailCheck {
    let claimed = m.diverged_at.unwrap_or(summary.total_steps);
    let threshold = format!(
        "the replay diverges within {DIVERGENCE_TOLERANCE} steps of step {claimed}; every step \
         before within {LOSS_TOLERANCE:e} of its claimed loss"
    );
    let Some(from) = m.checkpoints.last() else {
        return TailCheck {
            passed: false,
            measured: "no checkpoint".into(),
            threshold,
            sketch: None,
        };
    };
    let tail = tail::Tail { from, claimed, claimed_losses: &m.losses, evidence_key };
    let outcome = checkpoints.load(from, model, opt).and_then(|()| {
        let sets = (data.train(), data.validation());
        tail::replay(spec, summary, sets, seed, model, opt, &tail, device)
    });
    match outcome {
        Ok(r) => TailCheck {
            passed: r.confirms(),
            measured: match r.diverged_at {
                Some(t) => format!(
                    "steps {}..: diverges at step {t}; max loss gap {:.2e}",
                    from.step, r.loss_gap
                ),
                None => format!(
                    "steps {}..: no divergence near step {claimed}; max loss gap {:.2e}",
                    from.step, r.loss_gap
                ),
            },
            threshold,
            sketch: Some(SegmentSketch {
                segment: m.checkpoints.len().saturating_sub(1) as u32,
                probe: r.probe,
                exponent: r.sketch.exponent,
                deviation: r.sketch.deviation,
                scale: r.sketch.scale,
            }),
        },
        Err(e) => TailCheck { passed: false, measured: e.to_string(), threshold, sketch: None },
    }
}

/// The checkpoints a verification reads, drawn from its options and the bundle's checkpoint count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// The segments replayed (`i` for `Cᵢ → Cᵢ₊₁`).
    pub segments: Vec<u32>,
    /// The rules' sample: all picks and the evenly spaced grid ([`rule_sample`]).
    pub rules_sample: (Vec<usize>, Vec<usize>),
    /// Every checkpoint index read, sorted: the rules' sample and the replayed segments' ends.
    pub read: Vec<usize>,
}

/// What [`verify`] reads of the bundle of `manifest` under `opts`: a verifier downloads exactly
/// these ([`bundle::fetch_selected`]) and nothing else.
pub fn selection(opts: &VerifyOptions, manifest: &Manifest) -> Selection {
    let checkpoints = manifest.checkpoints.len();
    let segments = if opts.segments.is_empty() {
        segments_from_challenge(&opts.challenge, drawable_segments(manifest), opts.segment_count)
    } else {
        opts.segments.clone()
    };
    let rules_sample = rule_sample(checkpoints, &rule_seed(&opts.challenge, &segments));
    let mut picked: std::collections::BTreeSet<usize> = rules_sample.0.iter().copied().collect();
    if opts.replay {
        for s in &segments {
            picked.extend([*s as usize, *s as usize + 1]);
        }
    }
    picked.retain(|i| *i < checkpoints);
    Selection { segments, rules_sample, read: picked.into_iter().collect() }
}

/// The segments a draw picks from: `Cᵢ → Cᵢ₊₁` of every pair of checkpoints, and the tail of a
/// diverged bundle (segment `checkpoints.len() - 1`).
pub fn drawable_segments(manifest: &Manifest) -> u64 {
    let real = manifest.checkpoints.len().saturating_sub(1) as u64;
    real + manifest.diverged_at.is_some() as u64
}

/// Downloads from `url` into `opts.bundle` the manifest and exactly the checkpoints that
/// [`verify`] with `opts` reads ([`selection`]); returns how many checkpoints it downloaded.
pub fn fetch_for(url: &str, opts: &VerifyOptions) -> Result<usize> {
    let mut count = 0;
    bundle::fetch_selected(url, &opts.bundle, |m| {
        let read = selection(opts, m).read;
        count = read.len();
        read
    })?;
    Ok(count)
}

/// Verifies the bundle at `opts.bundle` against `spec`.
pub fn verify(spec: &JobSpec, opts: &VerifyOptions) -> Result<Report> {
    run::on(opts.threads.as_ref(), || verify_here(spec, opts))
}

fn verify_here(spec: &JobSpec, opts: &VerifyOptions) -> Result<Report> {
    let summary = spec.validate()?;
    let mut report = Report {
        passed: true,
        root: None,
        segments: vec![],
        checks: vec![],
        sketches: vec![],
        replay_seconds: 0.0,
    };
    let dir = &opts.bundle;

    // 1. Files against the manifest, and the root. Only the checkpoints the checks below read are
    // re-hashed (the rules' sample, the replayed segments' ends, C0 and the last); the Merkle root
    // over the manifest still commits to every one.
    let mut chosen = Selection::default();
    let select = |m: &Manifest| {
        chosen = selection(opts, m);
        chosen.read.clone()
    };
    let inspection = match bundle::inspect_selected(dir, select) {
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
        "spec hash, batch size, step and checkpoint schedule, seed as prescribed",
    );
    let (Some(seed), true) = (seed, report.passed) else {
        // Nothing below is meaningful on a bundle that is not what it claims to be.
        return Ok(report);
    };
    let checkpoints = Checkpoints { dir, cached: &inspection.checkpoints };

    // 3. Every checkpoint read holds a sane state.
    let mut bad = Vec::new();
    for &i in &chosen.read {
        let entry = &m.checkpoints[i];
        match checkpoints.tensors(entry) {
            Ok(host) => bad.extend(state_defects(entry.step, &host)),
            Err(e) => bad.push(format!("step {}: {e}", entry.step)),
        }
    }
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

    // 4. C0 == Init(seed).
    let device = &opts.device;
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
    let data = data::JobData::load_with(spec, opts.datasets.as_deref())?;
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
    let mut tail_replayed = false;
    for &i in &report.segments.clone() {
        if let Some(cancel) = &opts.cancel {
            cancel.check()?;
        }
        let name = format!("replay[{i}]");
        if Some(i) == tail_index {
            let key = ergon_protocol::evidence::key(&inspection.root, i);
            let tail = check_tail(
                spec,
                &summary,
                &data,
                &seed,
                (m, &checkpoints),
                (&model, &mut opt),
                key,
                device,
            );
            if let Some(sketch) = tail.sketch {
                report.sketches.push(sketch);
            }
            report.push(name, tail.passed, tail.measured, &tail.threshold);
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
            "weights and optimizer state: relative error ≤ {:e} and cosine ≥ {}; every step's loss \
             within {LOSS_TOLERANCE:e}",
            opts.epsilon, opts.tau
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
                report.sketches.push(SegmentSketch {
                    segment: i,
                    probe: r.probe,
                    exponent: r.sketch.exponent,
                    deviation: r.sketch.deviation,
                    scale: r.sketch.scale,
                });
                let passed = r.weights.0 <= opts.epsilon
                    && r.weights.1 >= opts.tau
                    && r.state.0 <= opts.epsilon
                    && r.state.1 >= opts.tau
                    && r.loss_gap <= LOSS_TOLERANCE
                    && r.missing.is_empty();
                let mut measured = format!(
                    "steps {}..{}: relative error {:.3e}, cosine {:.6}; optimizer state relative \
                     error {:.3e}, cosine {:.6}; max loss gap {:.2e}",
                    from.step, to.step, r.weights.0, r.weights.1, r.state.0, r.state.1, r.loss_gap
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
    if let (Some(i), false) = (tail_index, tail_replayed) {
        let key = ergon_protocol::evidence::key(&inspection.root, i);
        let tail = check_tail(
            spec,
            &summary,
            &data,
            &seed,
            (m, &checkpoints),
            (&model, &mut opt),
            key,
            device,
        );
        report.push("divergence", tail.passed, tail.measured, &tail.threshold);
    }
    report.replay_seconds = started.elapsed().as_secs_f64();

    // 6. Final-model hash.
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

    // 7. Claimed metrics of the final weights (a diverged bundle claims none: its tail decides).
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
