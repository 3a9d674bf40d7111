//! The training loop: deterministic batches, checkpoints every k steps, resumable after a crash, and
//! the bundle (manifest + Merkle root) at the end.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::{mpsc, Arc},
    thread::JoinHandle,
    time::Instant,
};

use candle_core::{DType, Device};
use ergon_job_spec::{JobSpec, SpecSummary};
use serde::{Deserialize, Serialize};

use crate::{
    bundle::{self, checkpoint, CheckpointEntry, HostTensors, Manifest, Metrics},
    data::{self, hex},
    error::{io, Error, Result},
    model::Model,
    optim::Optimizer,
    rng::Seed,
    run::{self, Cancel, OnStep, Step, Threads},
    trajectory::{
        evaluate, final_train_loss, host_state, is_checkpoint_step, load_checkpoint, spec_hash,
        write_checkpoint, write_host_checkpoint, Trajectory,
    },
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
    /// CPU threads to train on (default: the calling thread's pool, rayon's global one).
    pub threads: Option<Threads>,
    /// Stop (as if killed) after this many steps in total: used to test resuming.
    pub halt_after_step: Option<u64>,
    /// Raised by another thread to stop the training at its next checkpoint ([`Outcome::Halted`]): a
    /// daemon lends the machine to a verification or a drill, or shuts down, then resumes from that
    /// checkpoint without losing a step.
    pub stop: Option<Cancel>,
    /// Told about every step (a progress bar, a daemon's metrics and ETA).
    pub on_step: Option<OnStep>,
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
            threads: None,
            halt_after_step: None,
            stop: None,
            on_step: None,
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
    /// Of which the training thread spent on checkpoints, seconds: copying the state off the device,
    /// and waiting when the background writer is still busy with the previous one.
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
#[derive(Clone, Serialize, Deserialize)]
struct Journal {
    spec_hash: String,
    seed: String,
    checkpoints: Vec<CheckpointEntry>,
    losses: Vec<f32>,
}

fn write_journal(dir: &std::path::Path, progress: &Journal) -> Result<()> {
    let bytes = serde_json::to_vec(progress)
        .map_err(|e| Error::Bundle { path: dir.into(), reason: e.to_string() })?;
    checkpoint::write_atomic(&dir.join(PROGRESS_FILE), &bytes)
}

/// Writes checkpoints, then the journal that lists them, on a thread beside the training: hashing and
/// syncing a checkpoint to disk overlaps the next steps instead of stalling them. Checkpoints are
/// written in order and the journal only ever lists files already on disk, so a crash at any point
/// resumes from the last complete checkpoint. At most one checkpoint waits while another is written,
/// so memory stays bounded at two copies of the state.
struct BackgroundWriter {
    queue: Option<mpsc::SyncSender<(u64, HostTensors, Vec<f32>)>>,
    thread: Option<JoinHandle<Result<Journal>>>,
}

impl BackgroundWriter {
    fn start(dir: &Path, mut journal: Journal) -> Result<Self> {
        let (queue, jobs) = mpsc::sync_channel::<(u64, HostTensors, Vec<f32>)>(1);
        let (dir, dir_of_error) = (dir.to_path_buf(), dir);
        let thread = std::thread::Builder::new()
            .name("ergon-checkpoints".into())
            .spawn(move || {
                for (step, host, losses) in jobs {
                    journal.checkpoints.push(write_host_checkpoint(&dir, step, &host)?);
                    journal.losses = losses;
                    write_journal(&dir, &journal)?;
                }
                Ok(journal)
            })
            .map_err(io("starting the checkpoint writer for", dir_of_error))?;
        Ok(Self { queue: Some(queue), thread: Some(thread) })
    }

    /// Queues the state after `step` steps (and the losses so far); waits while the writer is two
    /// checkpoints behind. A write that failed is reported here, at the next checkpoint.
    fn submit(&mut self, step: u64, host: HostTensors, losses: Vec<f32>) -> Result<()> {
        let sent = self.queue.as_ref().is_some_and(|q| q.send((step, host, losses)).is_ok());
        if sent {
            return Ok(());
        }
        // The writer stopped: it failed, and says why.
        self.finish().map(|_| ())
    }

    /// Waits for every queued checkpoint to be on disk; returns the journal that lists them.
    fn finish(&mut self) -> Result<Journal> {
        self.queue = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(journal)) => journal,
            Some(Err(_)) => Err(Error::Bundle {
                path: PathBuf::new(),
                reason: "the checkpoint writer panicked".into(),
            }),
            None => Err(Error::Bundle {
                path: PathBuf::new(),
                reason: "the checkpoint writer already stopped".into(),
            }),
        }
    }
}

/// Trains `spec` into the bundle directory `opts.out`, resuming from its last checkpoint if a previous
/// run was interrupted. An uninterrupted and a resumed run produce the same bundle root. A training
/// that diverges (a non-finite loss) still finishes a bundle: the checkpoints before the divergence
/// and [`Manifest::diverged_at`], which a verifier can check by replaying the tail.
pub fn train(spec: &JobSpec, opts: &TrainOptions) -> Result<Outcome> {
    run::on(opts.threads.as_ref(), || train_here(spec, opts))
}

fn train_here(spec: &JobSpec, opts: &TrainOptions) -> Result<Outcome> {
    let summary: SpecSummary = spec.validate()?;
    let data = data::JobData::load_with(spec, opts.datasets.as_deref())?;
    let (train_set, val_set) = (data.train(), data.validation());
    let (dir, device) = (&opts.out, &opts.device);
    fs::create_dir_all(dir).map_err(io("creating", dir))?;

    let spec_hash = hex(&spec_hash(spec));
    let seed_hex = hex(&opts.seed);
    let model = Model::initial(spec, &opts.seed, data.weights(), device, DType::F32)?;
    let mut opt = Optimizer::new(spec, &model.params)?;

    // Resume, or start with C0 = Init(seed).
    let progress_path = dir.join(PROGRESS_FILE);
    let mut progress = if progress_path.exists() {
        let bytes = fs::read(&progress_path).map_err(io("reading", &progress_path))?;
        let p: Journal = serde_json::from_slice(&bytes)
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
        let p = Journal {
            spec_hash: spec_hash.clone(),
            seed: seed_hex.clone(),
            checkpoints: vec![c0],
            losses: vec![],
        };
        write_journal(dir, &p)?;
        p
    };

    let start_step = opt.step;
    progress.losses.truncate(start_step as usize);
    let started = Instant::now();
    let mut checkpoint_seconds = 0.0;
    let mut halted = None;
    let mut writer = BackgroundWriter::start(dir, progress.clone())?;

    let trajectory = Trajectory { spec, summary: &summary, seed: &opts.seed, train_set, device };
    let run = trajectory.run_steps(
        &model,
        &mut opt,
        start_step..summary.total_steps,
        |model, opt, done, loss_value| {
            progress.losses.push(loss_value);
            if is_checkpoint_step(spec, &summary, done) {
                let t = Instant::now();
                writer.submit(done, host_state(done, model, opt)?, progress.losses.clone())?;
                checkpoint_seconds += t.elapsed().as_secs_f64();
            }
            if let Some(on_step) = &opts.on_step {
                on_step(&Step {
                    done,
                    total: summary.total_steps,
                    loss: loss_value,
                    this_run: done - start_step,
                    seconds: started.elapsed().as_secs_f64(),
                });
            }
            if opts.halt_after_step == Some(done) && done < summary.total_steps {
                halted = Some(done);
                return Ok(false);
            }
            let paused = opts.stop.as_ref().is_some_and(Cancel::is_cancelled);
            if paused && is_checkpoint_step(spec, &summary, done) && done < summary.total_steps {
                halted = Some(done);
                return Ok(false);
            }
            Ok(true)
        },
    );
    // Every checkpoint taken is on disk before the run reports anything, whatever its outcome.
    let t = Instant::now();
    let written = writer.finish();
    checkpoint_seconds += t.elapsed().as_secs_f64();
    // A divergence is an outcome, not an error: the bundle says where, and a verifier can replay it.
    let mut diverged_at = match run {
        Ok(()) => None,
        Err(Error::Diverged { step, .. }) => Some(step),
        Err(e) => return Err(e),
    };
    progress.checkpoints = written?.checkpoints;
    if let Some(done) = halted {
        return Ok(Outcome::Halted(done));
    }
    let train_seconds = started.elapsed().as_secs_f64();

    let (validation_loss, validation_accuracy) = match diverged_at {
        Some(_) => (0.0, 0.0),
        None => evaluate(&model, val_set, device)?,
    };
    if !validation_loss.is_finite() {
        diverged_at = Some(summary.total_steps);
    }
    let metrics = match diverged_at {
        Some(step) => {
            // The checkpoints before the divergence, the losses of the steps before it.
            progress.checkpoints.truncate(spec.checkpoints_before_divergence(step) as usize);
            progress.losses.truncate(step as usize);
            Metrics { validation_loss: 0.0, validation_accuracy: 0.0, final_train_loss: 0.0 }
        }
        None => Metrics {
            validation_loss,
            validation_accuracy,
            final_train_loss: 0.0, // set from the losses below
        },
    };
    let mut manifest =
        trajectory.manifest(opt.lr() as f32, progress.losses, progress.checkpoints, metrics)?;
    manifest.diverged_at = diverged_at;
    manifest.metrics.final_train_loss =
        final_train_loss(&manifest.losses, summary.steps_per_epoch, diverged_at);
    let bytes = manifest
        .to_bytes()
        .map_err(|e| Error::Bundle { path: dir.clone(), reason: e.to_string() })?;
    checkpoint::write_atomic(&dir.join(bundle::MANIFEST_FILE), &bytes)?;
    fs::remove_file(&progress_path).map_err(io("removing", &progress_path))?;
    let root = bundle::root_of(&bytes)?;
    Ok(Outcome::Finished(TrainReport { root, manifest, train_seconds, checkpoint_seconds }))
}
