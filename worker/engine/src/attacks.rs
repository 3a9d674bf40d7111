//! Forgers: what a cheating trainer would submit instead of honest work, each writing a bundle in the
//! real format (checkpoints + manifest, self-consistent hashes and metrics) so that only Proof of
//! Training's checks stand between it and payment. Built only with the `attacks` feature, for the
//! tests and `scripts/bench-pot.sh`.
//!
//! Every forger starts from the prescribed `seed` (the verifier knows it) and writes its bundle to
//! `out`; `variant` varies the forger's own choices between samples.

use std::{collections::BTreeMap, path::Path, time::Instant};

use candle_core::{DType, Device, Tensor};
use ergon_job_spec::{JobSpec, Optimizer as OptimizerSpec, Ppb};

use crate::{
    bundle::{checkpoint, CheckpointEntry, Metrics, MANIFEST_FILE},
    data,
    error::{io, Error, Result},
    model::Model,
    optim::Optimizer,
    rng::Seed,
    trajectory::{self, Trajectory},
};

/// The attacks of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attack {
    /// Another model (trained from another seed: a "public" model) passed off as the result, with a
    /// chain interpolated from the genuine C0 to it.
    FineTunedOther,
    /// Only the first segment is trained; the rest of the chain are small interpolated updates
    /// towards an extrapolated final model.
    Interpolation,
    /// Honest training from a rank-matched permutation of Init(seed) (same values, other places).
    PermutedInit,
    /// The first `real` segments are trained, the rest interpolated.
    BlindfoldTopQ {
        /// Honestly trained segments.
        real: usize,
    },
    /// Half the steps are trained; the later checkpoints repeat the last real one.
    TruncatedTail,
    /// The middle third of the run is skipped (its checkpoints interpolated); the first and last
    /// thirds are trained for real, the last from the interpolated point on.
    SkippedEpochs,
    /// Trained on substituted data (labels rotated), relabelled as the job's.
    SubstitutedData,
    /// Another trainer's honest bundle (another seed) submitted as is.
    ReplayedBundle,
    /// Trained with weights rounded to bfloat16 after every step (cheaper arithmetic; in a bf16
    /// job: no f32 master copy).
    ReducedPrecision,
    /// Trained with every matrix product in FP8 (E4M3 operands and outputs, scaled per tensor, as
    /// an H100's FP8 tensor cores run at twice their bf16 rate), gradients in bf16.
    Fp8Products,
    /// Trained with twice the prescribed learning rate.
    WrongLearningRate,
    /// Every segment starts from a reset optimizer (momentum thrown away at each checkpoint, e.g.
    /// to train segments apart), and each checkpoint claims that reset state: the weights of each
    /// segment replay exactly, only the optimizer state at its end gives it away.
    ResetOptimizerState,
    /// Honest training, but one checkpoint's optimizer state holds a NaN (a poisoned checkpoint that
    /// would break whoever resumes or replays from it).
    PoisonedCheckpoint,
    /// The lazy trainer: `faked` segments (chosen by the variant) are not trained; each claims the
    /// previous segment's update again (a plausible guess), optimizer state carried over, and the
    /// real segments continue from the faked state, so the chain stays consistent everywhere but
    /// inside the faked segments. Saves `faked / N` of the work.
    LazySegments {
        /// Segments faked.
        faked: usize,
    },
    /// An integrity attack: honest training, except that inside one segment (chosen by the variant)
    /// every step also pulls the weights a little towards a target model of the forger's choosing
    /// (a backdoor, say); everything after it is trained honestly from the steered state.
    SteeredSegment,
    /// A run trained under another seed (an earlier job's, say) resubmitted for this job under this
    /// job's seed: the manifest names the prescribed seed and C0 is Init(seed), the rest is the
    /// other run's.
    ResubmittedSeed,
    /// The absorbing optimizer state (AdamW jobs): honest training to checkpoint 1 or 2 (by the
    /// variant), where the second moment is set to `f32::MAX` and the first to zero (all finite);
    /// every later step is a forward pass for its loss and the update that state implies with no
    /// gradient (the weights only decay), about a third of the work. The state then replays "exactly"
    /// in every later segment as long as the moments are compared under one norm (the first hides
    /// behind the second), and the model delivered is barely trained.
    SaturatedOptimizerState,
    /// Honest training whose manifest claims an eighth of the true final training loss (the
    /// metrics users read on chain), the losses left as they are.
    FalseTrainLoss,
    /// Honest training with one checkpoint (by the variant) padded with a tensor the spec's model
    /// does not have, four times the size of the model's state: a verifier that read it would hold
    /// it in memory.
    PaddedCheckpoint,
}

impl Attack {
    /// Every attack, with `BlindfoldTopQ` keeping half of the segments real.
    pub fn all(segments: usize) -> Vec<Attack> {
        vec![
            Attack::FineTunedOther,
            Attack::Interpolation,
            Attack::PermutedInit,
            Attack::BlindfoldTopQ { real: segments / 2 },
            Attack::TruncatedTail,
            Attack::SkippedEpochs,
            Attack::SubstitutedData,
            Attack::ReplayedBundle,
            Attack::ReducedPrecision,
            Attack::Fp8Products,
            Attack::WrongLearningRate,
            Attack::ResetOptimizerState,
            Attack::PoisonedCheckpoint,
            Attack::LazySegments { faked: 1 },
            Attack::LazySegments { faked: segments.div_ceil(10) },
            Attack::SteeredSegment,
            Attack::ResubmittedSeed,
            Attack::SaturatedOptimizerState,
            Attack::FalseTrainLoss,
            Attack::PaddedCheckpoint,
        ]
    }

    /// Whether the attack needs an AdamW job (its forgery is of AdamW's state).
    pub fn needs_adamw(&self) -> bool {
        matches!(self, Attack::SaturatedOptimizerState)
    }

    /// A short name for reports.
    pub fn name(&self) -> String {
        match self {
            Attack::BlindfoldTopQ { real } => format!("blindfold-top-{real}"),
            Attack::LazySegments { faked } => format!("lazy-{faked}"),
            other => format!("{other:?}").to_lowercase(),
        }
    }
}

/// What a forgery cost.
pub struct Forgery {
    /// Seconds the forger spent (training it did, interpolation, writing).
    pub seconds: f64,
    /// Optimizer steps it actually ran (an honest run takes the spec's total).
    pub steps: u64,
    /// Steps it ran as a forward pass only (about a third of a training step's work).
    pub forward_only: u64,
}

thread_local! {
    /// Optimizer steps run by the forger on this thread since the last reset.
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Forward-only steps run by the forger on this thread since the last reset.
    static FORWARD_ONLY: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn other_seed(seed: &Seed, variant: u64, label: &str) -> Seed {
    use sha2::{Digest, Sha256};
    Sha256::new()
        .chain_update(b"ergon/attack/")
        .chain_update(label)
        .chain_update(seed)
        .chain_update(variant.to_le_bytes())
        .finalize()
        .into()
}

/// The checkpoint steps a bundle of `spec` must have.
fn schedule(spec: &JobSpec) -> Result<Vec<u64>> {
    Ok(trajectory::checkpoint_steps(spec, &spec.validate()?))
}

/// Trains `spec` from `model`'s current weights (and a fresh optimizer), writing every scheduled
/// checkpoint up to step `until`; `tamper` may change the weights after each step.
/// Returns the checkpoint entries, the per-step losses, and the optimizer.
fn train_chain(
    spec: &JobSpec,
    data_spec: &JobSpec,
    seed: &Seed,
    model: &Model,
    out: &Path,
    until: u64,
    tamper: impl Fn(&Model) -> Result<()>,
) -> Result<(Vec<CheckpointEntry>, Vec<f32>, Optimizer)> {
    let mut opt = Optimizer::new(data_spec, &model.params)?;
    let mut entries = vec![trajectory::write_checkpoint(out, 0, model, &opt)?];
    let mut losses = Vec::new();
    continue_chain(
        spec,
        data_spec,
        seed,
        model,
        &mut opt,
        out,
        0..until,
        &mut entries,
        &mut losses,
        tamper,
    )?;
    Ok((entries, losses, opt))
}

/// Trains the steps `steps` from the current state, appending the scheduled checkpoints and losses.
#[allow(clippy::too_many_arguments)]
fn continue_chain(
    spec: &JobSpec,
    data_spec: &JobSpec,
    seed: &Seed,
    model: &Model,
    opt: &mut Optimizer,
    out: &Path,
    steps: std::ops::Range<u64>,
    entries: &mut Vec<CheckpointEntry>,
    losses: &mut Vec<f32>,
    tamper: impl Fn(&Model) -> Result<()>,
) -> Result<()> {
    let summary = spec.validate()?;
    let train_set = data::load(&data_spec.train, "training data")?;
    let device = Device::Cpu;
    let run = Trajectory {
        spec: data_spec,
        summary: &summary,
        seed,
        train_set: &train_set,
        device: &device,
    };
    run.run_steps(model, opt, steps, |model, opt, done, loss| {
        STEPS.with(|s| s.set(s.get() + 1));
        tamper(model)?;
        losses.push(loss);
        if trajectory::is_checkpoint_step(spec, &summary, done) {
            entries.push(trajectory::write_checkpoint(out, done, model, opt)?);
        }
        Ok(true)
    })
}

/// Parameters of `model` as host vectors, by name.
fn weights_of(model: &Model) -> Result<BTreeMap<String, Vec<f32>>> {
    let mut w = BTreeMap::new();
    for p in &model.params {
        w.insert(p.name.clone(), p.var.as_tensor().flatten_all()?.to_vec1::<f32>()?);
    }
    Ok(w)
}

/// Sets `model`'s parameters to `w`.
fn set_weights(model: &Model, w: &BTreeMap<String, Vec<f32>>) -> Result<()> {
    for p in &model.params {
        if let Some(v) = w.get(&p.name) {
            p.var.set(&Tensor::from_vec(v.clone(), p.var.dims(), p.var.device())?)?;
        }
    }
    Ok(())
}

/// `a + t·(b − a)` for every parameter.
fn lerp(
    a: &BTreeMap<String, Vec<f32>>,
    b: &BTreeMap<String, Vec<f32>>,
    t: f32,
) -> BTreeMap<String, Vec<f32>> {
    a.iter()
        .map(|(n, va)| {
            let vb = &b[n];
            (n.clone(), va.iter().zip(vb).map(|(x, y)| x + t * (y - x)).collect())
        })
        .collect()
}

/// Completes a chain whose first `entries` are real: the remaining scheduled checkpoints move
/// linearly from the last real weights to `target` (optimizer state copied from the last real one),
/// then writes the manifest with the claimed losses continuing the last real loss and metrics of the
/// final weights (so that the metrics check alone does not catch it).
#[allow(clippy::too_many_arguments)]
fn finish_forgery(
    spec: &JobSpec,
    seed: &Seed,
    model: &Model,
    opt: &Optimizer,
    out: &Path,
    mut entries: Vec<CheckpointEntry>,
    mut losses: Vec<f32>,
    target: &BTreeMap<String, Vec<f32>>,
) -> Result<()> {
    let steps = schedule(spec)?;
    let summary = spec.validate()?;
    let start = weights_of(model)?;
    let remaining = steps.len() - entries.len();
    for (k, step) in steps[entries.len()..].iter().enumerate() {
        let t = (k + 1) as f32 / remaining as f32;
        set_weights(model, &lerp(&start, target, t))?;
        entries.push(trajectory::write_checkpoint(out, *step, model, opt)?);
    }
    let last_loss = losses.last().copied().unwrap_or(1.0);
    losses.resize(summary.total_steps as usize, last_loss);
    let val_set = data::load(&spec.validation, "validation data")?;
    let (validation_loss, validation_accuracy) =
        trajectory::evaluate(model, &val_set, &Device::Cpu)?;
    let train_set = data::load(&spec.train, "training data")?;
    let run =
        Trajectory { spec, summary: &summary, seed, train_set: &train_set, device: &Device::Cpu };
    let manifest = run.manifest(
        match spec.optimizer {
            OptimizerSpec::Sgd { lr, .. } | OptimizerSpec::AdamW { lr, .. } => lr.0 as f32 / 1e9,
        },
        losses,
        entries,
        Metrics { validation_loss, validation_accuracy, final_train_loss: 0.0 },
    )?;
    let bytes = manifest
        .to_bytes()
        .map_err(|e| Error::Bundle { path: out.into(), reason: e.to_string() })?;
    checkpoint::write_atomic(&out.join(MANIFEST_FILE), &bytes)
}

/// Writes the manifest of a chain trained in full (by the forger's own rules) as if it were `spec`'s.
fn relabel(
    spec: &JobSpec,
    seed: &Seed,
    model: &Model,
    opt: &Optimizer,
    out: &Path,
    entries: Vec<CheckpointEntry>,
    losses: Vec<f32>,
) -> Result<()> {
    // Nothing left to interpolate: the target is the current weights.
    let target = weights_of(model)?;
    finish_forgery(spec, seed, model, opt, out, entries, losses, &target)
}

/// Writes the bundle of `attack` against the job `spec` with prescribed `seed` into `out`.
pub fn forge(
    attack: Attack,
    spec: &JobSpec,
    seed: &Seed,
    out: &Path,
    variant: u64,
) -> Result<Forgery> {
    let started = Instant::now();
    STEPS.with(|s| s.set(0));
    FORWARD_ONLY.with(|s| s.set(0));
    std::fs::create_dir_all(out).map_err(io("creating", out))?;
    let summary = spec.validate()?;
    let steps = schedule(spec)?;
    let device = Device::Cpu;
    let model = Model::new(spec, seed, &device, DType::F32)?;
    let none = |_: &Model| Ok(());
    match attack {
        Attack::FineTunedOther => {
            // The "public" model: honest training from another seed, in a scratch directory.
            let scratch = out.join("scratch");
            std::fs::create_dir_all(&scratch).map_err(io("creating", &scratch))?;
            let other_seed = other_seed(seed, variant, "other-model");
            let other = Model::new(spec, &other_seed, &device, DType::F32)?;
            train_chain(spec, spec, &other_seed, &other, &scratch, summary.total_steps, none)?;
            std::fs::remove_dir_all(&scratch).map_err(io("removing", &scratch))?;
            let target = weights_of(&other)?;
            let (entries, losses, opt) = train_chain(spec, spec, seed, &model, out, 0, none)?;
            finish_forgery(spec, seed, &model, &opt, out, entries, losses, &target)?;
        }
        Attack::Interpolation | Attack::BlindfoldTopQ { .. } => {
            let real = match attack {
                Attack::BlindfoldTopQ { real } => real.clamp(1, steps.len() - 1),
                _ => 1,
            };
            let c0 = weights_of(&model)?;
            let (entries, losses, opt) =
                train_chain(spec, spec, seed, &model, out, steps[real], none)?;
            // Extrapolate the real progress to the whole run, scaled by the variant.
            let now = weights_of(&model)?;
            let factor =
                (steps.len() - 1) as f32 / real as f32 * (0.5 + (variant % 5) as f32 / 10.0);
            let target = lerp(&c0, &now, factor);
            finish_forgery(spec, seed, &model, &opt, out, entries, losses, &target)?;
        }
        Attack::PermutedInit => {
            // Rank-matched: each tensor's values, rotated by a variant-dependent offset.
            let mut w = weights_of(&model)?;
            for v in w.values_mut() {
                if v.len() > 1 {
                    let k = 1 + variant as usize % (v.len() - 1);
                    v.rotate_left(k);
                }
            }
            set_weights(&model, &w)?;
            let (entries, losses, opt) =
                train_chain(spec, spec, seed, &model, out, summary.total_steps, none)?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::TruncatedTail => {
            let half = steps[steps.len() / 2];
            let (entries, losses, opt) = train_chain(spec, spec, seed, &model, out, half, none)?;
            let target = weights_of(&model)?;
            finish_forgery(spec, seed, &model, &opt, out, entries, losses, &target)?;
        }
        Attack::SkippedEpochs => {
            let (a, b) = (steps.len() / 3, 2 * steps.len() / 3);
            let (mut entries, mut losses, mut opt) =
                train_chain(spec, spec, seed, &model, out, steps[a], none)?;
            // Interpolate the middle third: as far again as the first third went.
            let c0 = Model::new(spec, seed, &device, DType::F32)?;
            let (start, origin) = (weights_of(&model)?, weights_of(&c0)?);
            let target = lerp(&origin, &start, (b as f32 / a.max(1) as f32).min(2.0));
            for (k, step) in steps[a + 1..=b].iter().enumerate() {
                set_weights(&model, &lerp(&start, &target, (k + 1) as f32 / (b - a) as f32))?;
                entries.push(trajectory::write_checkpoint(out, *step, &model, &opt)?);
            }
            let last_loss = losses.last().copied().unwrap_or(1.0);
            losses.resize(steps[b] as usize, last_loss);
            opt.step = steps[b];
            continue_chain(
                spec,
                spec,
                seed,
                &model,
                &mut opt,
                out,
                steps[b]..summary.total_steps,
                &mut entries,
                &mut losses,
                none,
            )?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::SubstitutedData => {
            let substituted = substitute_labels(spec, out, variant)?;
            let (entries, losses, opt) =
                train_chain(spec, &substituted, seed, &model, out, summary.total_steps, none)?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::ResetOptimizerState => {
            let mut opt = Optimizer::new(spec, &model.params)?;
            let reset = Optimizer::new(spec, &model.params)?;
            let zeros = reset.named_state(&model.params);
            let mut entries = vec![trajectory::write_checkpoint(out, 0, &model, &opt)?];
            let mut losses = Vec::new();
            for w in steps.windows(2) {
                // The segment starts from a zero state (at the right step, so the schedule holds).
                opt.load_state(&model.params, &zeros, w[0])?;
                let mut written = Vec::new();
                continue_chain(
                    spec,
                    spec,
                    seed,
                    &model,
                    &mut opt,
                    out,
                    w[0]..w[1],
                    &mut written,
                    &mut losses,
                    none,
                )?;
                // The end is claimed with the state the next segment starts from: zero.
                entries.push(trajectory::write_checkpoint(out, w[1], &model, &reset)?);
            }
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::PoisonedCheckpoint => {
            let (mut entries, losses, opt) =
                train_chain(spec, spec, seed, &model, out, summary.total_steps, none)?;
            let k = (1 + variant as usize % (entries.len() - 1)).min(entries.len() - 1);
            let mut host = trajectory::read_checkpoint(out, &entries[k])?;
            if let Some((_, (_, values))) = host.0.iter_mut().find(|(n, _)| n.starts_with("opt.")) {
                if let Some(v) = values.last_mut() {
                    *v = f32::NAN;
                }
            }
            entries[k] = trajectory::write_host_checkpoint(out, entries[k].step, &host)?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::LazySegments { faked } => {
            let segments = steps.len() - 1;
            let mut chosen: Vec<usize> = (0..segments).collect();
            // The forger's own choice of which segments to skip (any will do: the draw is uniform).
            let pick = other_seed(seed, variant, "lazy");
            chosen.sort_by_key(|i| other_seed(&pick, *i as u64, "lazy-order"));
            chosen.truncate(faked.min(segments));
            let mut opt = Optimizer::new(spec, &model.params)?;
            let mut entries = vec![trajectory::write_checkpoint(out, 0, &model, &opt)?];
            let mut losses = Vec::new();
            let mut last_update: Option<BTreeMap<String, Vec<f32>>> = None;
            for (i, w) in steps.windows(2).enumerate() {
                let start = weights_of(&model)?;
                if chosen.contains(&i) {
                    // No training: claim the previous segment's update again (none before the first).
                    if let Some(update) = &last_update {
                        let guessed = start
                            .iter()
                            .map(|(n, v)| {
                                (n.clone(), v.iter().zip(&update[n]).map(|(a, d)| a + d).collect())
                            })
                            .collect();
                        set_weights(&model, &guessed)?;
                    }
                    let last = losses.last().copied().unwrap_or(1.0);
                    losses.resize(w[1] as usize, last);
                    opt.step = w[1];
                    entries.push(trajectory::write_checkpoint(out, w[1], &model, &opt)?);
                } else {
                    continue_chain(
                        spec,
                        spec,
                        seed,
                        &model,
                        &mut opt,
                        out,
                        w[0]..w[1],
                        &mut entries,
                        &mut losses,
                        none,
                    )?;
                }
                let end = weights_of(&model)?;
                last_update = Some(
                    end.iter()
                        .map(|(n, v)| {
                            (n.clone(), v.iter().zip(&start[n]).map(|(b, a)| b - a).collect())
                        })
                        .collect(),
                );
            }
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::SteeredSegment => {
            let segments = steps.len() - 1;
            let target_seed = other_seed(seed, variant, "steering-target");
            let target = weights_of(&Model::new(spec, &target_seed, &device, DType::F32)?)?;
            let k = variant as usize % segments;
            let (mut entries, mut losses, mut opt) =
                train_chain(spec, spec, seed, &model, out, steps[k], none)?;
            // A pull of 1 % of the way to the target per step: small next to an update, but it
            // adds up over the segment.
            let steer = |model: &Model| -> Result<()> {
                let w = weights_of(model)?;
                set_weights(model, &lerp(&w, &target, 0.01))
            };
            continue_chain(
                spec,
                spec,
                seed,
                &model,
                &mut opt,
                out,
                steps[k]..steps[k + 1],
                &mut entries,
                &mut losses,
                steer,
            )?;
            continue_chain(
                spec,
                spec,
                seed,
                &model,
                &mut opt,
                out,
                steps[k + 1]..summary.total_steps,
                &mut entries,
                &mut losses,
                none,
            )?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::ResubmittedSeed => {
            // The other run, trained in full under its own seed...
            let other_seed = other_seed(seed, variant, "earlier-job");
            let other = Model::new(spec, &other_seed, &device, DType::F32)?;
            let (mut entries, losses, opt) =
                train_chain(spec, spec, &other_seed, &other, out, summary.total_steps, none)?;
            // ...relabelled: C0 is this job's Init(seed), the manifest names this job's seed.
            let init_opt = Optimizer::new(spec, &model.params)?;
            entries[0] = trajectory::write_checkpoint(out, 0, &model, &init_opt)?;
            relabel(spec, seed, &other, &opt, out, entries, losses)?;
        }
        Attack::SaturatedOptimizerState => {
            let OptimizerSpec::AdamW { .. } = spec.optimizer else {
                return Err(Error::Bundle {
                    path: out.into(),
                    reason: "the saturated-state forgery needs an AdamW job".into(),
                });
            };
            let k = 1 + variant as usize % 2.min(steps.len() - 1);
            let (mut entries, mut losses, mut opt) =
                train_chain(spec, spec, seed, &model, out, steps[k], none)?;
            // The injection: finite values, so the state check of old passes.
            let mut host = trajectory::host_state(steps[k], &model, &opt)?;
            for (name, (_, values)) in host.0.iter_mut() {
                if name.starts_with("opt.") && name.ends_with(".v") {
                    values.fill(f32::MAX);
                } else if name.starts_with("opt.") && name.ends_with(".m") {
                    values.fill(0.0);
                }
            }
            entries[k] = trajectory::write_host_checkpoint(out, steps[k], &host)?;
            opt.load_state(&model.params, &host.to_tensors(&device, DType::F32)?, steps[k])?;
            // The rest: a forward pass per step for the claimed loss, the update without gradients.
            let train_set = data::load(&spec.train, "training data")?;
            let mut batches = trajectory::Batches::new(spec, &summary, &train_set, seed);
            let no_gradients = vec![None; model.params.len()];
            for step in steps[k]..summary.total_steps {
                let (x, y) = batches.of(step, &device)?;
                let loss = crate::model::cross_entropy(&model.forward(&x)?, &y)?;
                losses.push(loss.to_scalar::<f32>()?);
                opt.step(&model.params, &no_gradients)?;
                FORWARD_ONLY.with(|s| s.set(s.get() + 1));
                if trajectory::is_checkpoint_step(spec, &summary, step + 1) {
                    entries.push(trajectory::write_checkpoint(out, step + 1, &model, &opt)?);
                }
            }
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::FalseTrainLoss => {
            let (entries, losses, opt) =
                train_chain(spec, spec, seed, &model, out, summary.total_steps, none)?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
            let path = out.join(MANIFEST_FILE);
            let mut manifest: crate::bundle::Manifest =
                serde_json::from_slice(&std::fs::read(&path).map_err(io("reading", &path))?)
                    .map_err(|e| Error::Bundle { path: path.clone(), reason: e.to_string() })?;
            manifest.metrics.final_train_loss /= 8.0;
            let bytes = manifest
                .to_bytes()
                .map_err(|e| Error::Bundle { path: path.clone(), reason: e.to_string() })?;
            checkpoint::write_atomic(&path, &bytes)?;
        }
        Attack::PaddedCheckpoint => {
            let (mut entries, losses, opt) =
                train_chain(spec, spec, seed, &model, out, summary.total_steps, none)?;
            let k = variant as usize % entries.len();
            let mut host = trajectory::read_checkpoint(out, &entries[k])?;
            let values: usize = host.0.values().map(|(_, v)| v.len()).sum();
            host.0.insert("param.padding".into(), (vec![4 * values], vec![0.25; 4 * values]));
            entries[k] = trajectory::write_host_checkpoint(out, entries[k].step, &host)?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::ReplayedBundle => {
            let other_seed = other_seed(seed, variant, "other-trainer");
            let other = Model::new(spec, &other_seed, &device, DType::F32)?;
            let (entries, losses, opt) =
                train_chain(spec, spec, &other_seed, &other, out, summary.total_steps, none)?;
            relabel(spec, &other_seed, &other, &opt, out, entries, losses)?;
        }
        Attack::ReducedPrecision => {
            let round = |model: &Model| -> Result<()> {
                for p in &model.params {
                    let t = p.var.as_tensor().to_dtype(DType::BF16)?.to_dtype(DType::F32)?;
                    p.var.set(&t)?;
                }
                Ok(())
            };
            let (entries, losses, opt) =
                train_chain(spec, spec, seed, &model, out, summary.total_steps, round)?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::Fp8Products => {
            let mut model = model;
            model.forge_fp8_products();
            let (entries, losses, opt) =
                train_chain(spec, spec, seed, &model, out, summary.total_steps, none)?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
        Attack::WrongLearningRate => {
            let mut wrong = spec.clone();
            wrong.optimizer = match spec.optimizer.clone() {
                OptimizerSpec::Sgd { lr, momentum, weight_decay } => {
                    OptimizerSpec::Sgd { lr: Ppb(lr.0.saturating_mul(2)), momentum, weight_decay }
                }
                OptimizerSpec::AdamW { lr, beta1, beta2, eps, weight_decay } => {
                    OptimizerSpec::AdamW {
                        lr: Ppb(lr.0.saturating_mul(2)),
                        beta1,
                        beta2,
                        eps,
                        weight_decay,
                    }
                }
            };
            let (entries, losses, opt) =
                train_chain(spec, &wrong, seed, &model, out, summary.total_steps, none)?;
            relabel(spec, seed, &model, &opt, out, entries, losses)?;
        }
    }
    Ok(Forgery {
        seconds: started.elapsed().as_secs_f64(),
        steps: STEPS.with(|s| s.get()),
        forward_only: FORWARD_ONLY.with(|s| s.get()),
    })
}

/// A copy of `spec` whose training data has every label moved to the next class (written beside the
/// bundle). Only CSV data is supported, which is what the suite uses.
fn substitute_labels(spec: &JobSpec, out: &Path, variant: u64) -> Result<JobSpec> {
    use ergon_job_spec::{Bounded, BoundedString, DataFormat, Hash32};
    let DataFormat::Csv { classes, .. } = spec.train.format else {
        return Err(Error::Data { file: "substituted data".into(), reason: "only CSV".into() });
    };
    let file = spec.train.files.first().and_then(|f| f.as_str()).unwrap_or_default().to_string();
    let text = String::from_utf8(data::fetch(&file)?)
        .map_err(|_| Error::Data { file: file.clone(), reason: "not UTF-8".into() })?;
    let shift = 1 + variant as u32 % (classes - 1).max(1);
    let rotated: String = text
        .lines()
        .map(|line| match line.split_once(',') {
            Some((label, rest)) => match label.trim().parse::<u32>() {
                Ok(l) => format!("{},{rest}\n", (l + shift) % classes),
                Err(_) => format!("{line}\n"),
            },
            None => format!("{line}\n"),
        })
        .collect();
    let path = out.join("substituted.csv");
    std::fs::write(&path, &rotated).map_err(io("writing", &path))?;
    let mut substituted = spec.clone();
    substituted.train.files =
        Bounded::new(vec![BoundedString::from_str(path.to_str().unwrap_or_default()).ok_or_else(
            || Error::Data { file: path.display().to_string(), reason: "path too long".into() },
        )?])
        .map_err(|_| Error::Data {
            file: path.display().to_string(),
            reason: "too many files".into(),
        })?;
    substituted.train.content_root = Hash32(data::content_root([rotated.as_bytes()]));
    Ok(substituted)
}

/// The largest finite FP8 E4M3 value.
const E4M3_MAX: f32 = 448.0;

/// `v` rounded to the nearest FP8 E4M3 value (3 mantissa bits, exponents down to 2⁻⁶, subnormals
/// in steps of 2⁻⁹; ties to even), saturated at ±448.
fn e4m3(v: f32) -> f32 {
    if !v.is_finite() {
        return v;
    }
    let a = v.abs().min(E4M3_MAX);
    let rounded = if a < 2f32.powi(-6) {
        (a * 512.0).round_ties_even() / 512.0
    } else {
        // Keep 3 of f32's 23 mantissa bits, rounding the 20 dropped ones to nearest even.
        let bits = a.to_bits();
        let half = 0x7_FFFF + ((bits >> 20) & 1);
        f32::from_bits((bits + half) & !0xF_FFFF).min(E4M3_MAX)
    };
    rounded.copysign(v)
}

/// FP8 rounding of a whole tensor, scaled so that its largest magnitude maps to 448 (per-tensor
/// scaling, as FP8 training recipes do); its gradient is the incoming one in bf16.
pub(crate) fn round_fp8(x: &Tensor) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op1(RoundFp8)?)
}

struct RoundFp8;

impl candle_core::CustomOp1 for RoundFp8 {
    fn name(&self) -> &'static str {
        "forger-round-fp8"
    }

    fn cpu_fwd(
        &self,
        s: &candle_core::CpuStorage,
        l: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        let candle_core::CpuStorage::F32(all) = s else {
            candle_core::bail!("{}: f32 only", self.name());
        };
        let Some((start, end)) = l.contiguous_offsets() else {
            candle_core::bail!("{}: the input must be contiguous", self.name());
        };
        let x = &all[start..end];
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = if amax > 0.0 && amax.is_finite() { amax / E4M3_MAX } else { 1.0 };
        let y = x.iter().map(|v| e4m3(v / scale) * scale).collect();
        Ok((candle_core::CpuStorage::F32(y), l.shape().clone()))
    }

    fn bwd(
        &self,
        _arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(crate::ops::round_bf16(grad)?))
    }
}

#[cfg(test)]
mod tests {
    use super::e4m3;

    #[test]
    fn e4m3_rounds_to_three_mantissa_bits_and_saturates() {
        assert_eq!(e4m3(1.0), 1.0);
        assert_eq!(e4m3(1.0625), 1.0, "a tie: to even (1.0)");
        assert_eq!(e4m3(1.1875), 1.25, "a tie: to even (1.25)");
        assert_eq!(e4m3(1.07), 1.125);
        assert_eq!(e4m3(-3.3), -3.25);
        assert_eq!(e4m3(1000.0), 448.0);
        assert_eq!(e4m3(2f32.powi(-9)), 2f32.powi(-9), "the smallest subnormal");
        assert_eq!(e4m3(2f32.powi(-11)), 0.0);
    }
}
