//! The bidder and trainer roles: bid on open jobs this machine can train in time, train the jobs
//! assigned to it (resuming from the last checkpoint after a restart), serve the bundle and commit
//! it before the deadline.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use ergon_client::{calls, chain::JobState, runtime};
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use ergon_engine::{
    bundle,
    data::hex,
    run::Step,
    train::{self, Outcome, TrainOptions},
    Error,
};

use super::{
    config::Role,
    policy::{self, TrainOn},
    prune,
    store::Training,
    Ctx, MyJobs, RoleError,
};

/// Most jobs looked at per block.
const LIMIT: u32 = 256;

/// The trainer role's memory between blocks (everything that must survive a restart is in the
/// store or on chain).
pub struct Trainer {
    ctx: Arc<Ctx>,
    /// Open jobs already priced (bid on, or declined): each is considered once.
    considered: BTreeSet<u64>,
    /// Trainings in progress, with their step counters.
    running: BTreeMap<u64, (JoinHandle<()>, Arc<AtomicU64>)>,
    /// Ended jobs whose bundle was pruned in this run.
    pruned: BTreeSet<u64>,
}

impl Trainer {
    /// The role for `ctx`.
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Trainer {
            ctx,
            considered: BTreeSet::new(),
            running: BTreeMap::new(),
            pruned: BTreeSet::new(),
        }
    }

    /// One block's work: bid, then train and commit, and prune the bundles of jobs that ended.
    pub async fn on_block(&mut self, now: u32, mine: &MyJobs) -> Result<(), RoleError> {
        if !self.ctx.config.has(Role::Trainer) {
            return Ok(());
        }
        self.running.retain(|_, (task, _)| !task.is_finished());
        self.bid(now, mine).await?;
        self.train(now, mine).await?;
        self.prune(mine);
        Ok(())
    }

    /// Prunes the bundle of each job of ours that ended ([`prune::after`]: no segment of it can be
    /// drawn any more), once per job and run.
    fn prune(&mut self, mine: &MyJobs) {
        for (id, job, _) in mine {
            let ours = match &job.state {
                JobState::Completed { trainer, .. } => *trainer == self.ctx.me,
                JobState::Failed { trainer, .. } => trainer.as_ref() == Some(&self.ctx.me),
                _ => false,
            };
            let Some(keep) = prune::after(&job.state).filter(|_| ours) else { continue };
            if self.running.contains_key(id) || !self.pruned.insert(*id) {
                continue;
            }
            let dir = self.ctx.bundles_dir().join(format!("job-{id}"));
            match prune::prune(&dir, keep) {
                Ok(0) => {}
                Ok(freed) => info!(job = id, freed, ?keep, "the job ended: its bundle is pruned"),
                Err(e) => warn!(job = id, error = %e, "cannot prune the bundle of an ended job"),
            }
        }
    }

    /// Bids on the open jobs the policy takes.
    async fn bid(&mut self, now: u32, mine: &MyJobs) -> Result<(), RoleError> {
        let ctx = &self.ctx;
        let open = ctx.chain.open_jobs(LIMIT).await?;
        let fresh: Vec<_> =
            open.into_iter().filter(|(id, _)| !self.considered.contains(id)).collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let min_price_per_ut = ctx
            .chain
            .at()
            .await?
            .constants()
            .entry(runtime::constants().job_market().min_price_per_ut())
            .map_err(|e| ergon_client::Error::from(ergon_client::subxt::Error::from(e)))?
            .0;
        for (id, job) in fresh {
            if job.owner == ctx.me || now > job.bid_window_end {
                self.considered.insert(id);
                continue;
            }
            // The class it trains on: the bid names it (the floor and its verifiers' fees are
            // that class's) and the bundle declares it.
            let device = ctx.policy.bundle_class(&job.spec.0);
            let price = match ctx.store.training(id)? {
                // Bid before (a restart, or a submission whose outcome was unknown) and seen on
                // chain, or refused: done.
                Some(t) if t.failure.is_some() || mine.iter().any(|(j, ..)| *j == id) => {
                    self.considered.insert(id);
                    continue;
                }
                // Recorded but not seen on chain: sent again at the recorded price (a repeated
                // bid at the same price changes nothing).
                Some(t) => t.price,
                None => {
                    let seconds_left =
                        (ctx.block_time * job.deadline.saturating_sub(now)).as_secs();
                    let price = policy::runs_kernels(job.kernels).and_then(|()| {
                        ctx.policy.price(
                            &job.spec.0,
                            job.work_micro_ut,
                            seconds_left,
                            min_price_per_ut,
                        )
                    });
                    let price = match price {
                        Ok(price) => price,
                        Err(why) => {
                            info!(job = id, "no bid: {why}");
                            self.considered.insert(id);
                            continue;
                        }
                    };
                    // The chain refuses a price above the budget less the fees of every vote the
                    // job may pay (at the floor of the class the bid names): not worth a
                    // transaction's fee.
                    match ctx.chain.bid_ceiling(id, device).await? {
                        Some(ceiling) if price <= ceiling => price,
                        Some(ceiling) => {
                            info!(
                                job = id,
                                price,
                                ceiling,
                                budget = job.budget,
                                "no bid: the asking price is above what the job's budget pays \
                                 once its verifiers' fees are reserved"
                            );
                            self.considered.insert(id);
                            continue;
                        }
                        // Closed since the list was read.
                        None => {
                            self.considered.insert(id);
                            continue;
                        }
                    }
                }
            };
            let mut record = Training::new(id, price);
            ctx.store.put_training(&record)?;
            match ctx.send(calls::bid(id, price, device), Some(id), "bid").await {
                Ok(()) => {
                    info!(job = id, price, work_micro_ut = job.work_micro_ut, "bid placed");
                    self.considered.insert(id);
                }
                Err(e) if e.rejected_as().is_some() => {
                    record.failure = Some(format!("bid refused: {e}"));
                    ctx.store.put_training(&record)?;
                    self.considered.insert(id);
                }
                // Not sent, or not known to be included: looked at again next block.
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Trains the jobs assigned to this daemon and commits their bundles.
    async fn train(&mut self, now: u32, mine: &MyJobs) -> Result<(), RoleError> {
        let ctx = self.ctx.clone();
        for (id, job, _) in mine {
            let id = *id;
            let JobState::Assigned { trainer, price } = &job.state else {
                // Committed (or over): nothing more to send for it.
                if let Some(mut t) = ctx.store.training(id)? {
                    let ours = matches!(&job.state, JobState::Verifying { trainer, .. } if *trainer == ctx.me);
                    if ours && !t.submitted {
                        t.submitted = true;
                        ctx.store.put_training(&t)?;
                    }
                }
                continue;
            };
            if *trainer != ctx.me || now > job.deadline {
                continue;
            }
            let mut record = ctx.store.training(id)?.unwrap_or(Training::new(id, *price));
            if record.submitted || record.failure.is_some() {
                continue;
            }
            match (&record.root, &record.final_model_hash, record.metrics) {
                (Some(root), Some(model), Some((train_loss, val_loss, accuracy))) => {
                    let (Some(root), Some(model)) =
                        (bundle::parse_hash(root), bundle::parse_hash(model))
                    else {
                        error!(
                            job = id,
                            "the store's root or model hash is not hex: cannot commit"
                        );
                        continue;
                    };
                    let uri = format!("{}/job-{id}", ctx.config.public_url());
                    let metrics = calls::ClaimedMetrics {
                        train_loss_micro: train_loss,
                        validation_loss_micro: val_loss,
                        validation_accuracy_ppm: accuracy,
                        diverged_at: record.diverged_at,
                    };
                    let device = ctx.policy.bundle_class(&job.spec);
                    let call = calls::submit_bundle(id, root, &uri, model, metrics, device);
                    match ctx.send(call, Some(id), "bundle commitment").await {
                        Ok(()) => {
                            record.submitted = true;
                            ctx.store.put_training(&record)?;
                        }
                        Err(e) if e.rejected_as().is_some() => {
                            record.failure = Some(format!("commitment refused: {e}"));
                            ctx.store.put_training(&record)?;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                _ if !self.running.contains_key(&id) => {
                    let steps = Arc::new(AtomicU64::new(0));
                    let spec = job.spec.0.clone();
                    let task = tokio::spawn(training(ctx.clone(), id, spec, steps.clone()));
                    self.running.insert(id, (task, steps));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether a training error is the job's fault (its data, its spec): retrying cannot help.
fn is_jobs_fault(e: &Error) -> bool {
    matches!(
        e,
        Error::Spec(_)
            | Error::ContentRoot { .. }
            | Error::Data { .. }
            | Error::DataGap { .. }
            | Error::Diverged { .. }
    )
}

/// Whether a training error is the owner's data not served as committed (located by its chunk
/// lists: [`Error::DataGap`]), and the chunk to name in the report (`None`: the chunk lists).
fn data_not_served(e: &Error) -> Option<Option<ergon_job_spec::DataGap>> {
    match e {
        Error::JobData(inner) => data_not_served(inner),
        Error::DataGap { .. } => Some(e.data_gap()),
        _ => None,
    }
}

/// Trains job `id` to the end, giving the machine up at checkpoints while urgent work waits, and
/// records the bundle's root (or why it failed) in the store.
async fn training(ctx: Arc<Ctx>, id: u64, spec: ergon_job_spec::JobSpec, steps: Arc<AtomicU64>) {
    let seed = ergon_protocol::seed::job_seed(id, &ctx.me_bytes());
    let out = ctx.bundles_dir().join(format!("job-{id}"));
    // The same device at every start, so a resumed training stays on it.
    let on = ctx.policy.train_on(&spec);
    let device = match on {
        TrainOn::Gpu => ctx.compute.device(),
        TrainOn::Cpu => candle_core::Device::Cpu,
    };
    let mut attempts = 0u32;
    let outcome = loop {
        let slot = ctx.compute.for_training().await;
        info!(job = id, ?on, "training (resumes from the last checkpoint if there is one)");
        let counter = steps.clone();
        #[cfg(feature = "attacks")]
        let (stall_at, shutdown) = (ctx.config.stall_training_at, ctx.compute.shutdown_token());
        let opts = TrainOptions {
            threads: Some(ctx.compute.threads()),
            device: device.clone(),
            stop: Some(ctx.compute.pause_token()),
            on_step: Some(Arc::new(move |s: &Step| {
                counter.store(s.done, Ordering::Relaxed);
                #[cfg(feature = "attacks")]
                if stall_at == Some(s.done) && s.this_run == s.done {
                    stall(&shutdown);
                }
            })),
            datasets: Some(ctx.datasets.clone()),
            ..TrainOptions::new(out.clone(), seed)
        };
        let (spec2, out2) = (spec.clone(), out.clone());
        #[cfg(feature = "attacks")]
        let forge = ctx.config.forge;
        let work = tokio::task::spawn_blocking(move || {
            #[cfg(feature = "attacks")]
            if let Some(attack) = forge {
                return forged(attack, &spec2, &out2, &opts);
            }
            finished_or_train(&spec2, &out2, &opts)
        });
        let result = report_progress(&ctx, id, &spec, &steps, work).await;
        drop(slot);
        match result {
            Ok(Ok(Outcome::Halted(step))) if ctx.compute.shutdown_token().is_cancelled() => {
                info!(
                    job = id,
                    step, "stopped at a checkpoint for shutdown; resumes at the next start"
                );
                return;
            }
            Ok(Ok(Outcome::Halted(step))) => {
                info!(job = id, step, "paused at a checkpoint for a verification or drill");
            }
            Ok(Ok(Outcome::Finished(report))) => break Ok(report),
            Ok(Err(e)) if is_jobs_fault(&e) => {
                // The owner's data is not served as committed: not the trainer's fault. Report
                // it (naming the chunk), so the validators check it and the job ends without a
                // slash instead of at the deadline with one.
                if let Some(gap) = data_not_served(&e) {
                    warn!(job = id, error = %e, ?gap, "the job's data is not served: reporting it");
                    let call = calls::report_data_unavailable(id, gap);
                    if let Err(e) = ctx.send_duty(call, Some(id), "data report").await {
                        error!(job = id, error = %e, "the data report was not accepted");
                    }
                }
                break Err(e.to_string());
            }
            Ok(Err(e)) => {
                attempts += 1;
                warn!(job = id, error = %e, attempts, "training failed; retrying");
                if attempts >= 5 {
                    break Err(e.to_string());
                }
                tokio::time::sleep(std::time::Duration::from_secs(5 << attempts.min(4))).await;
            }
            Err(panic) => break Err(format!("the training crashed: {panic}")),
        }
    };
    let Ok(Some(mut record)) = ctx.store.training(id) else {
        error!(job = id, "no training record to complete");
        return;
    };
    match outcome {
        Ok(report) => {
            let m = report.manifest.metrics.on_chain();
            record.root = Some(hex(&report.root));
            record.final_model_hash = Some(report.manifest.final_model_hash.clone());
            record.metrics =
                Some((m.train_loss_micro, m.validation_loss_micro, m.validation_accuracy_ppm));
            record.diverged_at = report.manifest.diverged_at;
            match record.diverged_at {
                Some(step) => warn!(
                    job = id,
                    step,
                    root = %hex(&report.root),
                    "the spec diverged: committing the checkpoints before it (paid for the steps trained)"
                ),
                None => {
                    info!(job = id, root = %hex(&report.root), accuracy = report.manifest.metrics.validation_accuracy, "trained")
                }
            }
        }
        Err(why) => {
            error!(job = id, "training failed for good: {why}");
            record.failure = Some(why);
        }
    }
    if let Err(e) = ctx.store.put_training(&record) {
        error!(job = id, error = %e, "cannot record the training's outcome");
    }
}

/// How often a running training logs its progress.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

/// Awaits `work`, logging job `id`'s steps done, speed and ETA every [`PROGRESS_EVERY`].
async fn report_progress<T>(
    ctx: &Ctx,
    id: u64,
    spec: &ergon_job_spec::JobSpec,
    steps: &AtomicU64,
    work: JoinHandle<T>,
) -> Result<T, tokio::task::JoinError> {
    let total = spec.validate().map(|s| s.total_steps).unwrap_or(0).max(1);
    let started = (std::time::Instant::now(), steps.load(Ordering::Relaxed));
    tokio::pin!(work);
    loop {
        tokio::select! {
            result = &mut work => return result,
            _ = tokio::time::sleep(PROGRESS_EVERY) => {
                let done = steps.load(Ordering::Relaxed);
                let rate = (done.saturating_sub(started.1)) as f64 / started.0.elapsed().as_secs_f64();
                let eta_s = if rate > 0.0 { ((total - done.min(total)) as f64 / rate) as u64 } else { 0 };
                info!(job = id, step = done, total, steps_per_s = format!("{rate:.1}"), eta_s, "training");
                let m = &ctx.metrics;
                m.steps_per_second_milli.store((rate * 1e3) as u64, Ordering::Relaxed);
                m.eta_seconds.store(eta_s, Ordering::Relaxed);
            }
        }
    }
}

/// The stuck machine of the fault tests (`--stall-training-at`): hangs until the daemon is killed
/// or shuts down.
#[cfg(feature = "attacks")]
fn stall(shutdown: &ergon_engine::Cancel) {
    warn!("--stall-training-at: the training hangs here until the daemon is killed");
    while !shutdown.is_cancelled() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The cheating trainer of the fault tests: writes `attack`'s forged bundle into `out` and reports
/// it as trained.
#[cfg(feature = "attacks")]
fn forged(
    attack: ergon_engine::attacks::Attack,
    spec: &ergon_job_spec::JobSpec,
    out: &std::path::Path,
    opts: &TrainOptions,
) -> ergon_engine::Result<Outcome> {
    warn!(attack = %attack.name(), "forging the bundle instead of training (test build)");
    ergon_engine::attacks::forge(attack, spec, &opts.seed, out, 0)?;
    finished(out)
}

/// The bundle finished in `out`, read back and checked.
fn finished(out: &std::path::Path) -> ergon_engine::Result<Outcome> {
    let inspection = bundle::inspect(out)?;
    if !inspection.problems.is_empty() {
        return Err(Error::Bundle {
            path: out.into(),
            reason: format!("finished bundle is damaged: {}", inspection.problems.join("; ")),
        });
    }
    Ok(Outcome::Finished(train::TrainReport {
        root: inspection.root,
        manifest: inspection.manifest,
        train_seconds: 0.0,
        checkpoint_seconds: 0.0,
    }))
}

/// Trains into `out`, or, when a previous run finished the bundle but died before recording it,
/// reads the finished bundle.
fn finished_or_train(
    spec: &ergon_job_spec::JobSpec,
    out: &std::path::Path,
    opts: &TrainOptions,
) -> ergon_engine::Result<Outcome> {
    let manifest_path = out.join(bundle::MANIFEST_FILE);
    if manifest_path.exists() && !out.join(train::PROGRESS_FILE).exists() {
        return finished(out);
    }
    train::train(spec, opts)
}
