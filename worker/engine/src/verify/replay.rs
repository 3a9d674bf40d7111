//! The replay of a segment `Cᵢ → Cᵢ₊₁`: the same steps on the same batches from `Cᵢ`, compared with
//! what `Cᵢ₊₁` and the manifest claim, and sketched at a probe step (the replay evidence).

use candle_core::Device;
use ergon_job_spec::JobSpec;

use crate::{
    bundle::{CheckpointEntry, HostTensors},
    data,
    error::Result,
    model::Model,
    optim::Optimizer,
    rng::Seed,
    trajectory,
};

/// All weights of `model`, flattened in parameter order.
pub(super) fn flat_weights(model: &Model) -> Result<Vec<f32>> {
    let mut all = Vec::new();
    for p in &model.params {
        all.extend(p.var.as_tensor().flatten_all()?.to_vec1::<f32>()?);
    }
    Ok(all)
}

/// All weights of `model` in the order the replay evidence projects them: parameter tensors by
/// name (`param.<name>`, the order of a checkpoint's tensors), each flattened.
pub(super) fn evidence_weights(model: &Model) -> Result<Vec<f32>> {
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

/// A segment to replay: its two checkpoints, the end's tensors, the manifest's per-step losses and
/// the key of its replay evidence.
pub(super) struct Segment<'a> {
    pub(super) from: &'a CheckpointEntry,
    pub(super) to: &'a CheckpointEntry,
    pub(super) target: &'a HostTensors,
    pub(super) claimed_losses: &'a [f32],
    pub(super) evidence_key: [u8; 32],
}

/// How a replay compares with what the bundle claims.
pub(super) struct ReplayOutcome {
    /// Relative error and cosine of the weight update.
    pub(super) weights: (f64, f64),
    /// Relative error and cosine of each optimizer state slot after the segment (`momentum`; `m`
    /// and `v`), compared on its own: one norm over both of AdamW's moments would let a garbage
    /// first moment hide behind a large second one.
    pub(super) state: Vec<(&'static str, (f64, f64))>,
    /// Largest gap between a replayed step's loss and the claimed one, relative to max(1, |loss|).
    pub(super) loss_gap: f64,
    /// Tensors the replay produces that the end checkpoint lacks.
    pub(super) missing: Vec<String>,
    /// The probe step and the sketch of the weights there (the replay evidence).
    pub(super) probe: Option<u64>,
    pub(super) sketch: ergon_protocol::Sketch,
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
pub(super) fn replay_segment(
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
    // Optimizer state: what the next segment would start from, each slot on its own.
    let mut state = Vec::new();
    for slot in crate::optim::slot_names(&spec.optimizer) {
        let (mut claimed, mut replayed) = (Vec::new(), Vec::new());
        for (name, tensor) in opt.named_state(&model.params) {
            if name.rsplit('.').next() == Some(*slot) {
                replayed.extend(tensor.flatten_all()?.to_vec1::<f32>()?);
                claimed_of(name, &mut claimed);
            }
        }
        state.push((*slot, compare_updates(&claimed, &replayed)));
    }
    // Per-step losses.
    let claimed_losses =
        segment.claimed_losses.get(from.step as usize..to.step as usize).unwrap_or_default();
    let loss_gap = loss_gap(&losses, claimed_losses);
    Ok(ReplayOutcome { weights, state, loss_gap, missing, probe, sketch })
}

/// The largest gap between a replayed step's loss and the claimed one, relative to
/// `max(1, |claimed|)`; infinite when the counts differ or a gap is not a number.
pub(super) fn loss_gap(replayed: &[f32], claimed: &[f32]) -> f64 {
    if replayed.len() != claimed.len() {
        return f64::INFINITY;
    }
    replayed
        .iter()
        .zip(claimed)
        .map(|(a, b)| (*a as f64 - *b as f64).abs() / (*b as f64).abs().max(1.0))
        .fold(0.0, |worst, gap| if gap.is_nan() { f64::INFINITY } else { worst.max(gap) })
}
