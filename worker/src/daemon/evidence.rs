//! The trainer's own evidence (issue 34, item 2): while its bundle is verified, the trainer replays
//! the segments each round draws from its own bundle, and once the round's verifiers are bound by
//! their commitments it gives the chain its sketches of them (`submit_trainer_evidence`).
//!
//! The trainer holds the true trajectory. Two lazy verifiers that pass a segment with the same
//! guess (the straight chord between its checkpoints) agree with each other but not with the
//! trainer, and the chain disputes the segment: the guessers lose their collateral, partly to the
//! trainer. A round whose verifiers have all revealed settles as soon as the trainer's evidence is
//! in, so the evidence is always sent — empty when this daemon cannot replay its own bundle (a
//! restart that lost it, a forged bundle in the fault tests): the round then settles without it
//! instead of waiting out its reveal window.
//!
//! The sketches are kept in memory only: after a restart they are computed again.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
};

use ergon_client::{
    calls,
    chain::{JobState, Phase, RoundInfo},
};
use ergon_protocol::Sketch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::{Ctx, MyJobs, RoleError};
use ergon_engine::verify::{self, VerifyOptions};

/// A round's evidence: `(segment, sketches of its probe steps)` of every segment this daemon
/// replayed.
type Sketches = Vec<(u32, Vec<Sketch>)>;

/// The trainer's evidence role's memory between blocks.
pub struct Evidence {
    ctx: Arc<Ctx>,
    /// Replays running, by (job, round).
    running: BTreeMap<(u64, u32), JoinHandle<()>>,
    /// Finished replays' evidence, by (job, round), until sent.
    ready: Arc<Mutex<BTreeMap<(u64, u32), Sketches>>>,
    /// Rounds whose evidence was sent (the finalized state shows it a few blocks later).
    sent: BTreeSet<(u64, u32)>,
}

impl Evidence {
    /// The role for `ctx`.
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Evidence { ctx, running: BTreeMap::new(), ready: Default::default(), sent: BTreeSet::new() }
    }

    /// One block's work: replay the segments of this daemon's bundles' new rounds, and send the
    /// evidence of those that reveal.
    pub async fn on_block(&mut self, mine: &MyJobs) -> Result<(), RoleError> {
        self.running.retain(|_, task| !task.is_finished());
        let ctx = self.ctx.clone();
        let mut live = BTreeSet::new();
        for (id, job, round) in mine {
            let (id, Some(round)) = (*id, round) else { continue };
            let JobState::Verifying { trainer, bundle, .. } = &job.state else { continue };
            if *trainer != ctx.me {
                continue;
            }
            let key = (id, round.number);
            live.insert(key);
            if round.trainer_evidence || self.sent.contains(&key) {
                continue;
            }
            let segments = segments(round);
            let ready = self.ready.lock().map(|r| r.get(&key).cloned()).unwrap_or_default();
            match (&round.phase, ready) {
                // Nobody is drawn yet, or nobody left to check.
                (Phase::Drawing, _) => {}
                (Phase::Reveal, Some(sketches)) => {
                    let given: Vec<u32> = sketches.iter().map(|(s, _)| *s).collect();
                    let call = calls::submit_trainer_evidence(id, &sketches);
                    match ctx.send_duty(call, Some(id), "trainer evidence").await {
                        Ok(()) => {
                            info!(job = id, round = round.number, segments = ?given, "evidence given")
                        }
                        // Refused (the round moved on): nothing to retry.
                        Err(e) if e.rejected_as().is_some() => {
                            warn!(job = id, round = round.number, error = %e, "evidence refused")
                        }
                        Err(e) => return Err(e.into()),
                    }
                    self.sent.insert(key);
                }
                (_, Some(_)) => {}
                (Phase::Commit | Phase::Reveal, None) if !self.running.contains_key(&key) => {
                    let target =
                        Own { spec: job.spec.0.clone(), root: bundle.root.0, kernels: job.kernels };
                    let task = tokio::spawn(replay(
                        ctx.clone(),
                        self.ready.clone(),
                        target,
                        id,
                        round.number,
                        segments,
                    ));
                    self.running.insert(key, task);
                }
                _ => {}
            }
        }
        // Rounds that are over are forgotten.
        self.sent.retain(|k| live.contains(k));
        if let Ok(mut ready) = self.ready.lock() {
            ready.retain(|k, _| live.contains(k));
        }
        Ok(())
    }
}

/// Every segment a verifier of `round` replays, sorted, each once.
fn segments(round: &RoundInfo) -> Vec<u32> {
    let mut all: Vec<u32> = round.votes.iter().flat_map(|v| v.segments.iter().copied()).collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// This daemon's own bundle of a job, as committed.
struct Own {
    spec: ergon_job_spec::JobSpec,
    root: [u8; 32],
    kernels: u32,
}

/// Replays `segments` of this daemon's own bundle of job `id` and keeps the sketches of those that
/// pass (none when the bundle cannot be replayed here).
async fn replay(
    ctx: Arc<Ctx>,
    ready: Arc<Mutex<BTreeMap<(u64, u32), Sketches>>>,
    own: Own,
    id: u64,
    round: u32,
    segments: Vec<u32>,
) {
    let slot = ctx.compute.urgently().await;
    info!(job = id, round, ?segments, "replaying the drawn segments of our own bundle");
    let mut opts = VerifyOptions::new(
        ctx.bundles_dir().join(format!("job-{id}")),
        ergon_protocol::seed::job_seed(id, &ctx.me_bytes()),
    );
    opts.segments = segments;
    opts.expected_root = Some(own.root);
    opts.kernels = own.kernels;
    // Only the sketches matter here: the rules are the verifiers' business.
    opts.full_pass = false;
    opts.datasets = Some(ctx.datasets.clone());
    opts.threads = Some(ctx.compute.threads());
    opts.device = ctx.compute.device();
    opts.cancel = Some(ctx.compute.shutdown_token());
    let spec = own.spec;
    let result = tokio::task::spawn_blocking(move || verify::verify(&spec, &opts)).await;
    drop(slot);
    let sketches: Sketches = match result {
        Ok(Ok(report)) => {
            if let Some(check) = report.first_failure() {
                warn!(job = id, round, check = %check.name, "our own bundle fails a check here");
            }
            report.sketches.iter().map(|s| (s.segment, s.sketches())).collect()
        }
        Ok(Err(ergon_engine::Error::Cancelled)) => return,
        Ok(Err(e)) => {
            warn!(job = id, round, error = %e, "cannot replay our own bundle: giving no sketches");
            Vec::new()
        }
        Err(panic) => {
            error!(job = id, round, "the replay crashed: {panic}");
            Vec::new()
        }
    };
    if let Ok(mut ready) = ready.lock() {
        ready.insert((id, round), sketches);
    }
}
