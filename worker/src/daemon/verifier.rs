//! The verifier role: stay in the verifier pool, replay the segments the chain draws this daemon for,
//! commit to the verdict and reveal it in time.
//!
//! The verdict, its sketches and the salt are written to the store before the commitment is sent,
//! and the reveal reads them from there: a daemon killed between commit and reveal reveals after its
//! restart instead of being slashed as silent.

use std::{collections::BTreeMap, path::Path, sync::Arc};

use ergon_client::{
    calls,
    chain::{Job, JobState, Phase},
};
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::{compute::Compute, store::Vote, Ctx, MyJobs, RoleError};
use ergon_engine::{
    data::hex,
    verify::{self, VerifyOptions},
};

/// Downloads tried before a bundle that cannot be fetched is voted a fail.
const MAX_ATTEMPTS: u32 = 3;

/// The verifier role's memory between blocks.
pub struct Verifier {
    ctx: Arc<Ctx>,
    /// Verifications running, by (job, round).
    running: BTreeMap<(u64, u32), JoinHandle<()>>,
    /// Failed attempts to verify, by (job, round).
    attempts: BTreeMap<(u64, u32), u32>,
    /// Rounds that could not be revealed (the store lost the vote): logged once.
    lost: std::collections::BTreeSet<(u64, u32)>,
    /// Rounds of jobs pinned to other kernels than this worker's: not verified, logged once.
    other_kernels: std::collections::BTreeSet<(u64, u32)>,
}

impl Verifier {
    /// The role for `ctx`.
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Verifier {
            ctx,
            running: BTreeMap::new(),
            attempts: BTreeMap::new(),
            lost: Default::default(),
            other_kernels: Default::default(),
        }
    }

    /// One block's work: start the verifications drawn, commit the finished ones, reveal. Seats
    /// drawn before the role was turned off are still answered: leaving the pool does not end
    /// them, and a silent seat is slashed.
    pub async fn on_block(&mut self, mine: &MyJobs) -> Result<(), RoleError> {
        let finished: Vec<_> =
            self.running.iter().filter(|(_, t)| t.is_finished()).map(|(k, _)| *k).collect();
        for key in finished {
            if let Some(task) = self.running.remove(&key) {
                if task.await.is_err() {
                    error!(job = key.0, round = key.1, "the verification crashed");
                }
            }
        }
        let ctx = self.ctx.clone();
        for (id, job, round) in mine {
            let (id, Some(round)) = (*id, round) else { continue };
            let Some(seat) = round.votes.iter().find(|v| v.verifier == ctx.me) else { continue };
            let key = (id, round.number);
            let stored = ctx.store.vote(id, round.number)?;
            match round.phase {
                Phase::Commit if seat.commitment.is_none() => match stored {
                    Some(vote) if !vote.committed => self.commit(vote).await?,
                    // Committed: the finalized state shows it a few blocks later.
                    Some(_) => {}
                    None if !self.running.contains_key(&key) => {
                        let Some(mut target) = Target::of(job) else { continue };
                        target.class = ctx.chain.bundle_device(id).await?;
                        // Drawn for a job of other kernels (the entry was left from before an
                        // upgrade of this worker): its replay could fail an honest trainer, so no
                        // vote; the seat's collateral pays for the operator's mistake.
                        if let Err(e) = ergon_engine::runs_kernels(target.kernels) {
                            if self.other_kernels.insert(key) {
                                error!(job = id, round = round.number, "{e}: not verifying");
                            }
                            continue;
                        }
                        let attempts = self.attempts.entry(key).or_insert(0);
                        *attempts += 1;
                        let task = tokio::spawn(verification(
                            ctx.clone(),
                            target,
                            id,
                            round.number,
                            seat.segments.clone(),
                            *attempts,
                        ));
                        self.running.insert(key, task);
                    }
                    None => {}
                },
                Phase::Reveal if seat.commitment.is_some() && seat.verdict.is_none() => {
                    match stored {
                        Some(vote) if !vote.revealed => self.reveal(vote).await?,
                        Some(_) => {}
                        None => {
                            if self.lost.insert(key) {
                                error!(
                                    job = id,
                                    round = round.number,
                                    "committed, but the store holds no vote to reveal"
                                );
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    async fn commit(&self, mut vote: Vote) -> Result<(), RoleError> {
        let ctx = &self.ctx;
        let commitment = ergon_protocol::commitments::verdict(
            vote.job,
            vote.round,
            &ctx.me_bytes(),
            vote.verdict(),
            &vote.evidence(),
            &vote.report_bytes()?,
            &vote.salt_bytes()?,
        );
        let call = calls::commit_verdict(vote.job, commitment);
        ctx.send_duty(call, Some(vote.job), "verdict commitment").await?;
        vote.committed = true;
        ctx.store.put_vote(&vote)?;
        Ok(())
    }

    async fn reveal(&self, mut vote: Vote) -> Result<(), RoleError> {
        let ctx = &self.ctx;
        let call = calls::reveal_verdict(
            vote.job,
            vote.verdict(),
            &vote.evidence(),
            vote.report_bytes()?,
            vote.salt_bytes()?,
        );
        ctx.send_duty(call, Some(vote.job), "verdict reveal").await?;
        info!(job = vote.job, round = vote.round, verdict = ?vote.verdict(), "revealed");
        vote.revealed = true;
        ctx.store.put_vote(&vote)?;
        Ok(())
    }
}

/// What a verification of a job under verification replays against.
struct Target {
    spec: ergon_job_spec::JobSpec,
    uri: String,
    root: [u8; 32],
    trainer: [u8; 32],
    /// The divergence the commitment claims, if any.
    diverged_at: Option<u64>,
    /// The committed final-model hash.
    final_model: [u8; 32],
    /// The committed metrics (losses in millionths, accuracy in parts per million).
    metrics: ergon_engine::bundle::OnChainMetrics,
    /// The kernels revision the job pins.
    kernels: u32,
    /// The device class the trainer declared for the bundle (`BundleDevice`; read apart from the
    /// job, `None` until then).
    class: Option<ergon_protocol::DeviceClass>,
}

impl Target {
    /// The bundle commitment of `job`, if it is being verified.
    fn of(job: &Job) -> Option<Target> {
        let JobState::Verifying { trainer, bundle, .. } = &job.state else { return None };
        Some(Target {
            spec: job.spec.0.clone(),
            uri: String::from_utf8_lossy(&bundle.uri.0).into_owned(),
            root: bundle.root.0,
            trainer: trainer.0,
            diverged_at: bundle.metrics.diverged_at,
            final_model: bundle.final_model_hash.0,
            metrics: ergon_engine::bundle::OnChainMetrics {
                train_loss_micro: bundle.metrics.train_loss_micro,
                validation_loss_micro: bundle.metrics.validation_loss_micro,
                validation_accuracy_ppm: bundle.metrics.validation_accuracy_ppm,
            },
            kernels: job.kernels,
            class: None,
        })
    }
}

/// Replays `segments` of job `id`'s bundle and stores the vote (salt included) for the commitment.
async fn verification(
    ctx: Arc<Ctx>,
    target: Target,
    id: u64,
    round: u32,
    segments: Vec<u32>,
    attempt: u32,
) {
    let dir = ctx.config.data_dir.join("verify").join(format!("job-{id}-round-{round}"));
    let slot = ctx.compute.urgently().await;
    info!(job = id, round, ?segments, uri = %target.uri, diverged_at = ?target.diverged_at, "verifying");
    let (datasets, segs, c) = (ctx.datasets.clone(), segments.clone(), ctx.clone());
    let replay = tokio::task::spawn_blocking(move || {
        let result = replay(&target, &dir, id, segs, &c.compute, datasets);
        let _ = std::fs::remove_dir_all(&dir);
        result
    })
    .await;
    drop(slot);
    let (failed_segment, sketches, report) = match replay {
        Ok(Ok(report)) => {
            let sketches = report
                .evidence()
                .iter()
                .map(|segment| segment.iter().map(|s| (s.exponent, s.deviation, s.scale)).collect())
                .collect();
            let failed = report.failed_segment();
            if let Some(check) = report.first_failure() {
                warn!(job = id, round, check = %check.name, measured = %check.measured, "the bundle fails");
            }
            (failed, if failed.is_none() { sketches } else { Vec::new() }, report.evidence_hash())
        }
        Ok(Err(ergon_engine::Error::Cancelled)) => {
            info!(job = id, round, "verification stopped for shutdown; redone at the next start");
            return;
        }
        // Checked before the task started; never a fail vote on an honest trainer.
        Ok(Err(e @ ergon_engine::Error::OtherKernels { .. })) => {
            error!(job = id, round, "{e}: not verifying");
            return;
        }
        // The bundle or the data could not be fetched (or read): retried while attempts remain.
        Ok(Err(e)) if attempt < MAX_ATTEMPTS => {
            warn!(job = id, round, attempt, error = %e, "verification failed; retrying next block");
            return;
        }
        // The owner's data is missing: not the trainer's fault. Abstain (the chain checks the
        // data; a false abstention is slashed as silence).
        Ok(Err(e @ ergon_engine::Error::JobData(_))) => {
            let gap = e.data_gap();
            warn!(job = id, round, error = %e, ?gap, "the job's data cannot be fetched: abstaining");
            let call = calls::abstain(id, gap);
            if let Err(e) = ctx.send_duty(call, Some(id), "abstention").await {
                error!(job = id, round, error = %e, "the abstention was not accepted");
            }
            return;
        }
        // The bundle could not be fetched: a fail on the first segment (a dispute's verifiers
        // will try to fetch it too).
        Ok(Err(e)) => {
            warn!(job = id, round, error = %e, "the bundle cannot be verified: voting fail");
            let report = error_report_hash(&e.to_string());
            (Some(segments.first().copied().unwrap_or(0)), Vec::new(), report)
        }
        Err(panic) => {
            error!(job = id, round, "the verification crashed: {panic}");
            return;
        }
    };
    let salt = match super::store::random_salt() {
        Ok(salt) => salt,
        Err(e) => {
            error!(job = id, error = %e, "no salt");
            return;
        }
    };
    let vote = Vote {
        job: id,
        round,
        segments,
        failed_segment,
        sketches,
        report: hex(&report),
        salt: hex(&salt),
        committed: false,
        revealed: false,
    };
    info!(job = id, round, verdict = ?vote.verdict(), "verified");
    if let Err(e) = ctx.store.put_vote(&vote) {
        error!(job = id, round, error = %e, "cannot store the vote: it will not be committed");
    }
}

/// The hash a fail without a report reveals: of the error's text.
fn error_report_hash(text: &str) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes()).into()
}

/// Downloads the manifest and the checkpoints the replay of `segments` reads (and no others), and
/// replays them (blocking).
fn replay(
    target: &Target,
    dir: &Path,
    job: u64,
    segments: Vec<u32>,
    compute: &Compute,
    datasets: Arc<ergon_engine::data::DatasetCache>,
) -> ergon_engine::Result<verify::Report> {
    let _ = std::fs::remove_dir_all(dir);
    let seed = ergon_protocol::seed::job_seed(job, &target.trainer);
    let mut opts = VerifyOptions::new(dir.to_path_buf(), seed);
    opts.source = Some(target.uri.clone());
    opts.segments = segments;
    opts.expected_root = Some(target.root);
    opts.expected_divergence = Some(target.diverged_at);
    opts.expected_final_model = Some(target.final_model);
    opts.expected_metrics = Some(target.metrics);
    opts.kernels = target.kernels;
    opts.expected_class = target.class;
    opts.datasets = Some(datasets);
    opts.threads = Some(compute.threads());
    opts.device = compute.device();
    opts.cancel = Some(compute.shutdown_token());
    // The data first: data that cannot be fetched is the owner's problem (an abstention), and
    // the verification finds it in the cache.
    verify::load_job_data(&target.spec, opts.datasets.as_deref())?;
    let fetched = verify::fetch_for(&target.spec, &target.uri, &opts)?;
    info!(job, checkpoints = fetched, "downloaded the checkpoints the verification reads");
    verify::verify(&target.spec, &opts)
}
