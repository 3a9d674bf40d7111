//! The training loop: deterministic batches, checkpoints every k steps, resumable after a crash, and
//! the bundle (manifest + Merkle root) at the end.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

use candle_core::{DType, Device, Tensor};
use codec::Encode;
use ergon_job_spec::{JobSpec, SpecSummary};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{
    bundle::{self, checkpoint, CheckpointEntry, Environment, HostTensors, Manifest, Metrics},
    data::{self, hex, Inputs, Samples},
    error::{io, Error, Result},
    model::{self, Model},
    optim::Optimizer,
    rng::{self, Seed},
};

/// Name of the resume journal in the output directory (removed when the bundle is complete).
pub const PROGRESS_FILE: &str = "progress.json";

/// How to run a training.
pub struct TrainOptions {
    /// Bundle directory (created if missing).
    pub out: PathBuf,
    /// Training seed.
    pub seed: Seed,
    /// Device to train on.
    pub device: Device,
    /// Show a progress bar.
    pub progress: bool,
    /// Stop (as if killed) after this many steps in total: used to test resuming.
    pub halt_after_step: Option<u64>,
    /// Set by another thread to pause the training at its next checkpoint ([`Outcome::Halted`]): a
    /// daemon lends the machine to a verification or a drill, then resumes from that checkpoint
    /// without losing a step.
    pub pause: Option<Arc<AtomicBool>>,
    /// Steps done so far, updated after every step (for a daemon's progress and ETA).
    pub steps_done: Option<Arc<AtomicU64>>,
    /// Datasets kept between runs (a resumed or a later training does not fetch them again).
    pub datasets: Option<Arc<data::DatasetCache>>,
}

impl TrainOptions {
    /// Options to train into `out` under `seed` on the CPU, quietly, without interruptions.
    pub fn new(out: PathBuf, seed: Seed) -> Self {
        Self {
            out,
            seed,
            device: Device::Cpu,
            progress: false,
            halt_after_step: None,
            pause: None,
            steps_done: None,
            datasets: None,
        }
    }
}

/// What a finished training produced.
pub struct TrainReport {
    /// The bundle's Merkle root.
    pub root: [u8; 32],
    /// The manifest.
    pub manifest: Manifest,
    /// Wall time spent training (excluding data loading), seconds.
    pub train_seconds: f64,
    /// Of which writing checkpoints, seconds.
    pub checkpoint_seconds: f64,
}

/// How a call to [`train`] ended.
#[allow(clippy::large_enum_variant)] // one per training run: boxing saves nothing
pub enum Outcome {
    /// The bundle is complete.
    Finished(TrainReport),
    /// Stopped on request after this step; run again to resume.
    Halted(u64),
}

/// The resume journal: where the last checkpoint is and the losses up to it.
#[derive(Serialize, Deserialize)]
struct Progress {
    spec_hash: String,
    seed: String,
    checkpoints: Vec<CheckpointEntry>,
    losses: Vec<f32>,
}

/// SHA-256 of the SCALE encoding of `spec`.
pub fn spec_hash(spec: &JobSpec) -> [u8; 32] {
    Sha256::digest(spec.encode()).into()
}

/// The device and precision description recorded in manifests.
pub fn environment(device: &Device) -> Environment {
    let device = match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".to_string(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    };
    Environment {
        device,
        precision: "f32".into(),
        cpu_features: cpu_features(),
        threads: candle_core::utils::get_num_threads(),
        worker_version: env!("CARGO_PKG_VERSION").into(),
    }
}

fn cpu_features() -> Vec<String> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut f = Vec::new();
        macro_rules! probe {
            ($($name:tt),*) => {$( if std::arch::is_x86_feature_detected!($name) { f.push($name.to_string()); } )*};
        }
        probe!("sse4.2", "avx", "avx2", "fma", "f16c", "avx512f");
        f
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        vec![std::env::consts::ARCH.to_string()]
    }
}

/// A batch of `indices` from `samples`: inputs `[B, …]` (f32 or u32 tokens) and targets (u32).
pub fn batch(samples: &Samples, indices: &[u64], device: &Device) -> Result<(Tensor, Tensor)> {
    let (n, per, tps) = (indices.len(), samples.sample_len(), samples.targets_per_sample);
    let mut shape = vec![n];
    shape.extend(&samples.sample_shape);
    let x = match &samples.inputs {
        Inputs::Float(v) => {
            let mut buf = Vec::with_capacity(n * per);
            for &i in indices {
                buf.extend_from_slice(&v[i as usize * per..(i as usize + 1) * per]);
            }
            Tensor::from_vec(buf, shape, device)?
        }
        Inputs::Tokens(v) => {
            let mut buf = Vec::with_capacity(n * per);
            for &i in indices {
                buf.extend_from_slice(&v[i as usize * per..(i as usize + 1) * per]);
            }
            Tensor::from_vec(buf, shape, device)?
        }
    };
    let mut y = Vec::with_capacity(n * tps);
    for &i in indices {
        y.extend_from_slice(&samples.targets[i as usize * tps..(i as usize + 1) * tps]);
    }
    Ok((x, Tensor::from_vec(y, n * tps, device)?))
}

/// Mean loss and accuracy of `model` over all of `samples`.
pub fn evaluate(model: &Model, samples: &Samples, device: &Device) -> Result<(f32, f32)> {
    evaluate_first(model, samples, device, usize::MAX)
}

/// Mean loss and accuracy of `model` over the first `limit` of `samples`.
pub fn evaluate_first(
    model: &Model,
    samples: &Samples,
    device: &Device,
    limit: usize,
) -> Result<(f32, f32)> {
    let (mut loss_sum, mut hits, mut count) = (0f64, 0u64, 0u64);
    let all: Vec<u64> = (0..samples.len.min(limit) as u64).collect();
    for chunk in all.chunks(500) {
        let (x, y) = batch(samples, chunk, device)?;
        let logits = model.forward(&x)?;
        let targets = y.dims1()? as u64;
        loss_sum += model::cross_entropy(&logits, &y)?.to_scalar::<f32>()? as f64 * targets as f64;
        hits += model::correct(&logits, &y)?;
        count += targets;
    }
    let count = count.max(1);
    Ok(((loss_sum / count as f64) as f32, hits as f32 / count as f32))
}

/// The checkpoint tensors of the current state: `param.<name>` and `opt.<name>.<slot>`.
pub fn state_tensors(model: &Model, opt: &Optimizer) -> BTreeMap<String, Tensor> {
    let mut all: BTreeMap<String, Tensor> = model
        .params
        .iter()
        .map(|p| (format!("param.{}", p.name), p.var.as_tensor().clone()))
        .collect();
    all.extend(opt.named_state(&model.params));
    all
}

/// Writes the checkpoint of the current state as step `step` of the bundle in `dir`.
pub fn write_checkpoint(
    dir: &Path,
    step: u64,
    model: &Model,
    opt: &Optimizer,
) -> Result<CheckpointEntry> {
    write_host_checkpoint(dir, step, &HostTensors::from_tensors(&state_tensors(model, opt))?)
}

/// Writes `host` as the checkpoint of step `step` of the bundle in `dir`; returns its manifest entry.
pub fn write_host_checkpoint(dir: &Path, step: u64, host: &HostTensors) -> Result<CheckpointEntry> {
    let file = bundle::checkpoint_file(step);
    let written = host.write(&dir.join(&file))?;
    let hashes = host.hashes();
    Ok(CheckpointEntry {
        step,
        file,
        file_sha256: hex(&written.sha256),
        file_bytes: written.bytes,
        chunks: written.chunks.iter().map(|h| hex(h)).collect(),
        digest: hex(&checkpoint::digest(hashes.values())),
        tensors: hashes.iter().map(|(n, h)| (n.clone(), hex(h))).collect(),
    })
}

/// Loads checkpoint `entry` of `dir` into `model` and `opt`, checking its digest first.
pub fn load_checkpoint(
    dir: &Path,
    entry: &CheckpointEntry,
    model: &Model,
    opt: &mut Optimizer,
) -> Result<()> {
    let host = read_checkpoint(dir, entry)?;
    load_state(&dir.join(&entry.file), &host, entry.step, model, opt)
}

/// Reads checkpoint `entry` of the bundle in `dir`, checking it against its recorded digest.
pub fn read_checkpoint(dir: &Path, entry: &CheckpointEntry) -> Result<HostTensors> {
    let path = dir.join(&entry.file);
    let host = HostTensors::read(&path)?;
    if hex(&checkpoint::digest(host.hashes().values())) != entry.digest {
        return Err(Error::Bundle {
            path,
            reason: "checkpoint does not match its recorded digest".into(),
        });
    }
    Ok(host)
}

/// Sets `model` and `opt` to the checkpoint `host` of step `step` (read from `path`, named in errors),
/// whose digest the caller has checked.
pub fn load_state(
    path: &Path,
    host: &HostTensors,
    step: u64,
    model: &Model,
    opt: &mut Optimizer,
) -> Result<()> {
    let device = model.params.first().map(|p| p.var.device().clone()).unwrap_or(Device::Cpu);
    let tensors = host.to_tensors(&device, DType::F32)?;
    for p in &model.params {
        let t = tensors.get(&format!("param.{}", p.name)).ok_or_else(|| Error::Bundle {
            path: path.into(),
            reason: format!("parameter {} missing", p.name),
        })?;
        if t.dims() != p.var.dims() {
            return Err(Error::Bundle {
                path: path.into(),
                reason: format!("parameter {} has the wrong shape", p.name),
            });
        }
        p.var.set(t)?;
    }
    opt.load_state(&model.params, &tensors, step)
}

fn write_progress(dir: &Path, progress: &Progress) -> Result<()> {
    let bytes = serde_json::to_vec(progress)
        .map_err(|e| Error::Bundle { path: dir.into(), reason: e.to_string() })?;
    checkpoint::write_atomic(&dir.join(PROGRESS_FILE), &bytes)
}

fn progress_bar(total: u64, done: u64, show: bool) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} step {pos}/{len} | {msg} | ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_position(done);
    bar
}

/// Whether a checkpoint is written after `done` steps: every `checkpoint_interval` steps and after
/// the last one.
pub fn is_checkpoint_step(spec: &JobSpec, summary: &SpecSummary, done: u64) -> bool {
    done.is_multiple_of(spec.checkpoint_interval as u64) || done == summary.total_steps
}

/// The steps of every checkpoint of a bundle of `spec`, C0 included.
pub fn checkpoint_steps(spec: &JobSpec, summary: &SpecSummary) -> Vec<u64> {
    let mut steps: Vec<u64> = (0..summary.total_steps)
        .step_by(spec.checkpoint_interval as usize)
        .chain([summary.total_steps])
        .collect();
    steps.dedup();
    steps
}

/// The manifest of a bundle with these checkpoints and per-step losses (the final-model hash is taken
/// from the last checkpoint, the final training loss from the last loss).
#[allow(clippy::too_many_arguments)]
pub fn build_manifest(
    spec: &JobSpec,
    summary: &SpecSummary,
    seed: &Seed,
    device: &Device,
    lr: f32,
    losses: Vec<f32>,
    checkpoints: Vec<CheckpointEntry>,
    metrics: Metrics,
) -> Result<Manifest> {
    let last = checkpoints.last().ok_or_else(|| Error::Bundle {
        path: PathBuf::new(),
        reason: "no checkpoint written".into(),
    })?;
    let weight_hashes = last
        .tensors
        .iter()
        .filter(|(n, _)| n.starts_with("param."))
        .filter_map(|(_, h)| bundle::parse_hash(h))
        .collect::<Vec<_>>();
    Ok(Manifest {
        format_version: bundle::manifest::FORMAT_VERSION,
        spec_hash: hex(&spec_hash(spec)),
        seed: hex(seed),
        environment: environment(device),
        batch_size: spec.batch_size,
        checkpoint_interval: spec.checkpoint_interval,
        steps_per_epoch: summary.steps_per_epoch,
        total_steps: summary.total_steps,
        learning_rates: vec![lr; summary.total_steps as usize],
        final_model_hash: hex(&checkpoint::digest(weight_hashes.iter())),
        metrics: Metrics {
            final_train_loss: losses.last().copied().unwrap_or_default(),
            ..metrics
        },
        losses,
        checkpoints,
    })
}

/// Runs the optimizer steps `steps` (global step numbers) of `spec` on `model` and `opt`, each on the
/// batch the seed's PRF assigns to it, and calls `after(model, opt, steps_done, loss)` after each step;
/// `after` returning `false` stops early. Training and the verifier's replay both go through here, so
/// they compute the same thing.
#[allow(clippy::too_many_arguments)]
pub fn run_steps(
    spec: &JobSpec,
    summary: &SpecSummary,
    train_set: &Samples,
    seed: &Seed,
    model: &Model,
    opt: &mut Optimizer,
    steps: std::ops::Range<u64>,
    device: &Device,
    mut after: impl FnMut(&Model, &Optimizer, u64, f32) -> Result<bool>,
) -> Result<()> {
    let mut order: Option<(u32, Vec<u64>)> = None;
    let n = train_set.len as u64;
    for step in steps {
        let epoch = (step / summary.steps_per_epoch) as u32;
        let in_epoch = step % summary.steps_per_epoch;
        if order.as_ref().map(|(e, _)| *e) != Some(epoch) {
            order = Some((epoch, rng::epoch_order(seed, epoch, n)));
        }
        let perm = &order.as_ref().map(|(_, o)| o.as_slice()).unwrap_or_default();
        let lo = (in_epoch * spec.batch_size as u64).min(n) as usize;
        let hi = ((in_epoch + 1) * spec.batch_size as u64).min(n) as usize;
        let (x, y) = batch(train_set, &perm[lo..hi], device)?;

        let loss = model::cross_entropy(&model.forward(&x)?, &y)?;
        let grads = loss.backward()?;
        opt.step(&model.params, &grads)?;
        let loss_value = loss.to_scalar::<f32>()?;
        if !loss_value.is_finite() {
            return Err(Error::Diverged { step, loss: loss_value });
        }
        if !after(model, opt, step + 1, loss_value)? {
            break;
        }
    }
    Ok(())
}

/// Trains `spec` into the bundle directory `opts.out`, resuming from its last checkpoint if a previous
/// run was interrupted. An uninterrupted and a resumed run produce the same bundle root.
pub fn train(spec: &JobSpec, opts: &TrainOptions) -> Result<Outcome> {
    let summary: SpecSummary = spec.validate()?;
    let data = data::JobData::load_with(spec, opts.datasets.as_deref())?;
    let (train_set, val_set) = (data.train(), data.validation());
    let (dir, device) = (&opts.out, &opts.device);
    fs::create_dir_all(dir).map_err(io("creating", dir))?;

    let spec_hash = hex(&spec_hash(spec));
    let seed_hex = hex(&opts.seed);
    let model = Model::new(spec, &opts.seed, device, DType::F32)?;
    let mut opt = Optimizer::new(spec.optimizer.clone(), &model.params)?;

    // Resume, or start with C0 = Init(seed).
    let progress_path = dir.join(PROGRESS_FILE);
    let mut progress = if progress_path.exists() {
        let bytes = fs::read(&progress_path).map_err(io("reading", &progress_path))?;
        let p: Progress = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Bundle { path: progress_path.clone(), reason: e.to_string() })?;
        if p.spec_hash != spec_hash || p.seed != seed_hex {
            return Err(Error::Bundle {
                path: dir.clone(),
                reason: "holds a run of another spec or seed; use an empty directory".into(),
            });
        }
        let last = p.checkpoints.last().ok_or_else(|| Error::Bundle {
            path: progress_path.clone(),
            reason: "no checkpoint recorded".into(),
        })?;
        load_checkpoint(dir, last, &model, &mut opt)?;
        p
    } else {
        if dir.join(bundle::MANIFEST_FILE).exists() {
            return Err(Error::Bundle {
                path: dir.clone(),
                reason: "already holds a finished bundle".into(),
            });
        }
        let c0 = write_checkpoint(dir, 0, &model, &opt)?;
        let p = Progress {
            spec_hash: spec_hash.clone(),
            seed: seed_hex.clone(),
            checkpoints: vec![c0],
            losses: vec![],
        };
        write_progress(dir, &p)?;
        p
    };

    let start_step = opt.step;
    progress.losses.truncate(start_step as usize);
    let bar = progress_bar(summary.total_steps, start_step, opts.progress);
    let started = Instant::now();
    let mut checkpoint_seconds = 0.0;
    let mut halted = None;

    run_steps(
        spec,
        &summary,
        train_set,
        &opts.seed,
        &model,
        &mut opt,
        start_step..summary.total_steps,
        device,
        |model, opt, done, loss_value| {
            progress.losses.push(loss_value);
            if is_checkpoint_step(spec, &summary, done) {
                let t = Instant::now();
                progress.checkpoints.push(write_checkpoint(dir, done, model, opt)?);
                write_progress(dir, &progress)?;
                checkpoint_seconds += t.elapsed().as_secs_f64();
            }
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            bar.set_position(done);
            bar.set_message(format!(
                "loss {loss_value:.4} | {:.0} samples/s",
                (done - start_step) as f64 * spec.batch_size as f64 / secs
            ));
            if let Some(counter) = &opts.steps_done {
                counter.store(done, Ordering::Relaxed);
            }
            if opts.halt_after_step == Some(done) && done < summary.total_steps {
                halted = Some(done);
                return Ok(false);
            }
            let paused = opts.pause.as_ref().is_some_and(|p| p.load(Ordering::Acquire));
            if paused && is_checkpoint_step(spec, &summary, done) && done < summary.total_steps {
                halted = Some(done);
                return Ok(false);
            }
            Ok(true)
        },
    )?;
    if let Some(done) = halted {
        bar.abandon();
        return Ok(Outcome::Halted(done));
    }
    bar.finish_and_clear();
    let train_seconds = started.elapsed().as_secs_f64();

    let (validation_loss, validation_accuracy) = evaluate(&model, val_set, device)?;
    if !validation_loss.is_finite() {
        return Err(Error::Diverged { step: summary.total_steps, loss: validation_loss });
    }
    let manifest = build_manifest(
        spec,
        &summary,
        &opts.seed,
        device,
        opt.lr() as f32,
        progress.losses,
        progress.checkpoints,
        Metrics {
            validation_loss,
            validation_accuracy,
            final_train_loss: 0.0, // set from the losses below
        },
    )?;
    let bytes = manifest
        .to_bytes()
        .map_err(|e| Error::Bundle { path: dir.clone(), reason: e.to_string() })?;
    checkpoint::write_atomic(&dir.join(bundle::MANIFEST_FILE), &bytes)?;
    fs::remove_file(&progress_path).map_err(io("removing", &progress_path))?;
    let root = bundle::root_of(&bytes)?;
    Ok(Outcome::Finished(TrainReport { root, manifest, train_seconds, checkpoint_seconds }))
}
