//! The tail of a diverged bundle: from its last checkpoint to the step where the training diverged
//! ([`crate::bundle::Manifest::diverged_at`]). A verifier replays it and confirms that the training
//! diverges there, so a trainer is paid for the steps it trained and nobody is paid for a claim the
//! replay refutes. The tail is the bundle's last segment (`checkpoints.len() - 1`) in draws and
//! disputes, and every verifier of a diverged bundle replays it.

use super::*;
use crate::{
    bundle::{CheckpointEntry, HostTensors},
    data::Samples,
    error::{Error, Result},
    model::Model,
    optim::Optimizer,
    trajectory::{self, Trajectory},
};

/// Steps a replay's divergence may lie from the claimed one. A divergence is an overflow of a
/// quantity growing exponentially, so replays that differ in the last bit can cross `f32::MAX` a step
/// apart on other hardware; the trainer's pay moves by that many steps' worth, nothing more.
pub const DIVERGENCE_TOLERANCE: u64 = 2;

/// What the replay of a tail found.
pub(super) struct TailOutcome {
    /// Where the replay diverged, if it did within [`DIVERGENCE_TOLERANCE`] steps past the claim.
    pub diverged_at: Option<u64>,
    /// Largest gap between a replayed step's loss and the claimed one (steps before the divergence).
    pub loss_gap: f64,
    /// The probe steps of the replay evidence.
    pub probes: Vec<u64>,
    /// The replay evidence: the sketch of the weights at each probe against the chord from the
    /// tail's start to the state just before the divergence.
    pub sketches: Vec<ergon_protocol::Sketch>,
}

/// The inputs of a tail's replay.
pub(super) struct Tail<'a> {
    /// The bundle's last checkpoint (loaded into the model and optimizer already).
    pub from: &'a CheckpointEntry,
    /// The claimed divergence step.
    pub claimed: u64,
    /// The manifest's per-step losses (the steps before the divergence).
    pub claimed_losses: &'a [f32],
    /// The key of its replay evidence.
    pub evidence_key: [u8; 32],
}

/// Replays the tail from its checkpoint to a few steps past the claimed divergence, stopping where
/// the replay diverges (a step's loss, or a checkpoint step's state, not finite; at the last step,
/// the final model's validation loss).
pub(super) fn replay(
    run: &Trajectory,
    val_set: &Samples,
    model: &Model,
    opt: &mut Optimizer,
    tail: &Tail,
) -> Result<TailOutcome> {
    let (spec, summary, device) = (run.spec, run.summary, run.device);
    let (from, claimed) = (tail.from.step, tail.claimed);
    let until = claimed.saturating_add(DIVERGENCE_TOLERANCE + 1).min(summary.total_steps);
    let start = evidence_weights(model)?;
    let mut sketcher = Sketcher::new(&tail.evidence_key, (from, claimed), &start);
    let (mut losses, mut before_divergence) = (Vec::new(), None);
    let replayed = run.run_steps(model, opt, from..until, |model, opt, done, loss| {
        losses.push(loss);
        if sketcher.wants(done) {
            sketcher.take(&evidence_weights(model)?);
        }
        if done == claimed {
            before_divergence = Some(evidence_weights(model)?);
        }
        if trajectory::is_checkpoint_step(spec, summary, done) {
            let host = HostTensors::from_tensors(&trajectory::state_tensors(model, opt))?;
            trajectory::ensure_finite_state(done, &host)?;
        }
        Ok(true)
    });
    let diverged_at = match replayed {
        Err(Error::Diverged { step, .. }) => Some(step),
        Err(e) => return Err(e),
        Ok(()) if until == summary.total_steps => {
            let (validation_loss, _) = trajectory::evaluate(model, val_set, device)?;
            (!validation_loss.is_finite()).then_some(summary.total_steps)
        }
        Ok(()) => None,
    };
    // The losses of the steps before the divergence, replayed against claimed.
    let compared = diverged_at.unwrap_or(until).min(claimed).saturating_sub(from) as usize;
    let claimed_losses =
        tail.claimed_losses.get(from as usize..from as usize + compared).unwrap_or_default();
    let loss_gap = match losses.get(..compared) {
        Some(replayed) if claimed_losses.len() == compared => loss_gap(replayed, claimed_losses),
        _ => f64::INFINITY,
    };
    let end = before_divergence.unwrap_or_else(|| start.clone());
    let probes = sketcher.probes().to_vec();
    let sketches = sketcher.finish(&end);
    let diverged_at = diverged_at.filter(|t| t.abs_diff(claimed) <= DIVERGENCE_TOLERANCE);
    Ok(TailOutcome { diverged_at, loss_gap, probes, sketches })
}

impl TailOutcome {
    /// Whether the replay confirms the claim: it diverges within the tolerance of the claimed step,
    /// and the steps before match the claimed losses.
    pub fn confirms(&self) -> bool {
        self.diverged_at.is_some() && self.loss_gap <= LOSS_TOLERANCE
    }
}

/// A tail check's outcome as the report shows it.
pub(super) struct TailCheck {
    pub(super) passed: bool,
    pub(super) measured: String,
    pub(super) threshold: String,
    pub(super) sketch: Option<SegmentSketch>,
}

/// Replays the tail of the diverged bundle `checkpoints` (from its last checkpoint) and says
/// whether the training diverges where the manifest claims.
pub(super) fn check_tail(
    run: &Trajectory,
    val_set: &Samples,
    (m, checkpoints): (&Manifest, &Checkpoints),
    (model, opt): (&Model, &mut Optimizer),
    evidence_key: [u8; 32],
) -> TailCheck {
    let summary = run.summary;
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
    let outcome = checkpoints
        .load(from, model, opt)
        .and_then(|()| tail::replay(run, val_set, model, opt, &tail));
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
            sketch: Some(SegmentSketch::new(
                m.checkpoints.len().saturating_sub(1) as u32,
                r.probes,
                &r.sketches,
            )),
        },
        Err(e) => TailCheck { passed: false, measured: e.to_string(), threshold, sketch: None },
    }
}
