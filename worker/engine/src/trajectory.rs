//! The trajectory of a training: the optimizer steps on the seed's batches ([`Trajectory::run_steps`]), the
//! checkpoint schedule, a state's save and load, evaluation and the manifest. A training writes it,
//! a verifier replays pieces of it, both through these functions, so they compute the same thing.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use candle_core::{DType, Device, Tensor};
use codec::Encode;
use ergon_job_spec::{JobSpec, SpecSummary};
use sha2::{Digest, Sha256};

use crate::{
    bundle::{self, checkpoint, CheckpointEntry, Environment, HostTensors, Manifest, Metrics},
    data::{hex, Inputs, Samples},
    error::{Error, Result},
    model::{self, Model},
    optim::Optimizer,
    rng::{self, Seed},
    step::Stepper,
};

/// SHA-256 of the SCALE encoding of `spec`.
pub fn spec_hash(spec: &JobSpec) -> [u8; 32] {
    Sha256::digest(spec.encode()).into()
}

/// The device and precision description recorded in manifests: `precision` is the job's
/// ([`ergon_job_spec::Precision::name`]).
pub fn environment(device: &Device, precision: ergon_job_spec::Precision) -> Environment {
    let device = match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".to_string(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    };
    Environment {
        device,
        precision: precision.name().into(),
        cpu_features: cpu_features(),
        // The pool this computation runs on (see `run::Threads`).
        threads: rayon::current_num_threads(),
        worker_version: env!("CARGO_PKG_VERSION").into(),
        kernels: crate::KERNELS_REVISION,
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

/// The tensors every checkpoint of `spec` holds, with their shapes: `param.<name>` for each
/// parameter of the model and `opt.<name>.<slot>` for each of the optimizer's state slots
/// ([`crate::optim::slot_names`]). Computed from the spec alone (nothing is allocated).
pub fn layout(spec: &JobSpec) -> Result<bundle::Layout> {
    let mut tensors = BTreeMap::new();
    for (name, shape) in model::Model::layout(spec)? {
        for slot in crate::optim::slot_names(&spec.optimizer) {
            tensors.insert(format!("opt.{name}.{slot}"), shape.clone());
        }
        tensors.insert(format!("param.{name}"), shape);
    }
    Ok(bundle::Layout(tensors))
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

/// Writes the checkpoint of the current state as step `step` of the bundle in `dir`. A state that
/// is not finite is not written: the training diverged at `step` ([`ensure_finite_state`]).
pub fn write_checkpoint(
    dir: &Path,
    step: u64,
    model: &Model,
    opt: &Optimizer,
) -> Result<CheckpointEntry> {
    write_host_checkpoint(dir, step, &host_state(step, model, opt)?)
}

/// The current state copied to the host as the checkpoint of step `step`, or
/// `Err(Error::Diverged)` when it is not finite ([`ensure_finite_state`]).
pub fn host_state(step: u64, model: &Model, opt: &Optimizer) -> Result<HostTensors> {
    let host = HostTensors::from_tensors(&state_tensors(model, opt))?;
    ensure_finite_state(step, &host)?;
    Ok(host)
}

/// `Err(Error::Diverged { step })` when the state after `step` steps holds a non-finite value
/// (weights or optimizer state). With the non-finite loss [`Trajectory::run_steps`] reports, this is the one
/// definition of "the training diverged at step s" that a trainer writing a bundle and a verifier
/// replaying its tail share: a checkpoint step whose state is not finite, or a step whose loss is
/// not.
pub fn ensure_finite_state(step: u64, host: &HostTensors) -> Result<()> {
    let bad = host.0.values().flat_map(|(_, values)| values).find(|v| !v.is_finite());
    match bad {
        Some(v) => Err(Error::Diverged { step, loss: *v }),
        None => Ok(()),
    }
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
    let tensors = load_weights(path, host, model)?;
    opt.load_state(&model.params, &tensors, step)
}

/// Sets the weights of `model` to those of the checkpoint `host` (read from `path`, named in
/// errors; its optimizer state, if any, is left alone); returns the checkpoint's tensors on the
/// model's device.
pub fn load_weights(
    path: &Path,
    host: &HostTensors,
    model: &Model,
) -> Result<BTreeMap<String, Tensor>> {
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
    Ok(tensors)
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

/// The training loss a bundle claims (the manifest's `final_train_loss`, committed on chain as
/// `train_loss_micro`): the mean loss of the last epoch's steps (of every step, for a run shorter
/// than an epoch), in f64 then rounded to f32; zero for a run that diverged (`diverged_at`), whose
/// metrics are all zero. A verifier recomputes it from the manifest's losses, bit for bit.
pub fn final_train_loss(losses: &[f32], steps_per_epoch: u64, diverged_at: Option<u64>) -> f32 {
    if diverged_at.is_some() || losses.is_empty() {
        return 0.0;
    }
    let last_epoch = (losses.len() as u64 - 1) / steps_per_epoch.max(1) * steps_per_epoch.max(1);
    let tail = &losses[last_epoch as usize..];
    (tail.iter().map(|l| *l as f64).sum::<f64>() / tail.len() as f64) as f32
}

/// The batch of each optimizer step: the samples the seed's PRF orders for the step's epoch,
/// `batch_size` of them from the step's place in it (the epoch's order is kept between steps).
pub struct Batches<'a> {
    spec: &'a JobSpec,
    summary: &'a SpecSummary,
    train_set: &'a Samples,
    seed: &'a Seed,
    order: Option<(u32, Vec<u64>)>,
}

impl<'a> Batches<'a> {
    /// The batches of `spec`'s steps on `train_set` under `seed`.
    pub fn new(
        spec: &'a JobSpec,
        summary: &'a SpecSummary,
        train_set: &'a Samples,
        seed: &'a Seed,
    ) -> Self {
        Batches { spec, summary, train_set, seed, order: None }
    }

    /// Inputs and targets of step `step` (a global step number, 0-based) on `device`.
    pub fn of(&mut self, step: u64, device: &Device) -> Result<(Tensor, Tensor)> {
        let n = self.train_set.len as u64;
        let epoch = (step / self.summary.steps_per_epoch) as u32;
        let in_epoch = step % self.summary.steps_per_epoch;
        if self.order.as_ref().map(|(e, _)| *e) != Some(epoch) {
            self.order = Some((epoch, rng::epoch_order(self.seed, epoch, n)));
        }
        let perm = self.order.as_ref().map(|(_, o)| o.as_slice()).unwrap_or_default();
        let lo = (in_epoch * self.spec.batch_size as u64).min(n) as usize;
        let hi = ((in_epoch + 1) * self.spec.batch_size as u64).min(n) as usize;
        batch(self.train_set, &perm[lo..hi], device)
    }
}

/// One job's run as a value: the spec (and what validating it derived), the seed, the training
/// samples and the device — what every optimizer step, every batch and the manifest depend on.
/// Training, the verifier's replays, the attack suite and the calibration each build one and call
/// its methods, so that the same arguments do not travel through every signature.
#[derive(Clone, Copy)]
pub struct Trajectory<'a> {
    /// The job's spec (for a forgery, the spec whose data it trains on).
    pub spec: &'a JobSpec,
    /// What [`JobSpec::validate`] derived from the spec: steps, epochs.
    pub summary: &'a SpecSummary,
    /// The seed: Init(seed) and the batch order.
    pub seed: &'a Seed,
    /// The training samples the seed's PRF orders into batches.
    pub train_set: &'a Samples,
    /// Where the steps run.
    pub device: &'a Device,
}

impl<'a> Trajectory<'a> {
    /// The batch of each step ([`Batches`]).
    pub fn batches(&self) -> Batches<'a> {
        Batches::new(self.spec, self.summary, self.train_set, self.seed)
    }

    /// Runs the optimizer steps `steps` (global step numbers) on `model` and `opt`, each on the
    /// batch the seed's PRF assigns to it, and calls `after(model, opt, steps_done, loss)` after each
    /// step; `after` returning `false` stops early. Training and the verifier's replay both go
    /// through here, so they compute the same thing (on a GPU, each step through a CUDA graph:
    /// [`Stepper`]).
    pub fn run_steps(
        &self,
        model: &Model,
        opt: &mut Optimizer,
        steps: std::ops::Range<u64>,
        mut after: impl FnMut(&Model, &Optimizer, u64, f32) -> Result<bool>,
    ) -> Result<()> {
        let device = self.device;
        let mut batches = self.batches();
        let mut stepper = Stepper::new(device, self.spec);
        for step in steps {
            let (x, y) = batches.of(step, device)?;

            let layouts = crate::device::cache_layouts(device);
            let loss = stepper.step(model, opt, &x, &y)?;
            drop(layouts);
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

    /// The manifest of a bundle of this run with these checkpoints and per-step losses (the
    /// final-model hash is taken from the last checkpoint, the final training loss from the losses:
    /// [`final_train_loss`]).
    pub fn manifest(
        &self,
        lr: f32,
        losses: Vec<f32>,
        checkpoints: Vec<CheckpointEntry>,
        metrics: Metrics,
    ) -> Result<Manifest> {
        let (spec, summary) = (self.spec, self.summary);
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
            seed: hex(self.seed),
            environment: environment(self.device, spec.precision),
            batch_size: spec.batch_size,
            checkpoint_interval: spec.checkpoint_interval,
            steps_per_epoch: summary.steps_per_epoch,
            total_steps: summary.total_steps,
            learning_rates: vec![lr; summary.total_steps as usize],
            final_model_hash: hex(&checkpoint::digest(weight_hashes.iter())),
            metrics: Metrics {
                final_train_loss: final_train_loss(&losses, summary.steps_per_epoch, None),
                ..metrics
            },
            losses,
            checkpoints,
            diverged_at: None,
        })
    }
}
