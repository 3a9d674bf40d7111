//! The replay of a segment `Cᵢ → Cᵢ₊₁`: the same steps on the same batches from `Cᵢ`, compared with
//! what `Cᵢ₊₁` and the manifest claim, and sketched at a probe step (the replay evidence).

use crate::{
    bundle::{CheckpointEntry, HostTensors},
    data::hex,
    error::Result,
    model::Model,
    optim::Optimizer,
    trajectory::{self, Trajectory},
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

/// Reads the named tensors of a segment's end, each checked against its hash in the manifest.
pub(super) type EndReader<'a> = dyn Fn(&[String]) -> Result<HostTensors> + 'a;

/// A segment to replay: its two checkpoints, how to read the end's tensors, the manifest's per-step
/// losses and the key of its replay evidence.
pub(super) struct Segment<'a> {
    pub(super) from: &'a CheckpointEntry,
    pub(super) to: &'a CheckpointEntry,
    /// Called only for the tensors whose replayed hash differs from the end's committed one.
    pub(super) read_end: &'a EndReader<'a>,
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
    /// How many of the end's tensors the replay reproduced bit for bit (by hash), of how many.
    pub(super) exact: (usize, usize),
    /// Why the end's file (as the manifest lists it) is not the canonical file of the end's
    /// tensors, if it is not ([`crate::bundle::not_canonical`]).
    pub(super) file: Option<String>,
    /// The probe steps and the sketch of the weights at each (the replay evidence).
    pub(super) probes: Vec<u64>,
    pub(super) sketches: Vec<ergon_protocol::Sketch>,
}

/// A segment's replay evidence as it is computed: the projections of the weights at its start and
/// at each of its probe steps, sketched against its end once that is known
/// ([`ergon_protocol::evidence`]: every vector holds the parameter tensors by name, each flattened,
/// as a checkpoint orders them). Eight numbers per probe are kept, never the weights.
pub struct Sketcher {
    signs: ergon_protocol::evidence::Signs,
    from: u64,
    to: u64,
    probes: Vec<u64>,
    start: [f64; ergon_protocol::evidence::SKETCH_DIMS],
    at_probes: Vec<[f64; ergon_protocol::evidence::SKETCH_DIMS]>,
}

impl Sketcher {
    /// The evidence of a segment `from → to` under `key` that starts at the weights `start`.
    pub fn new(key: &[u8; 32], (from, to): (u64, u64), start: &[f32]) -> Self {
        let signs = ergon_protocol::evidence::Signs::new(key, start.len());
        let start_projection = signs.project(start.iter().map(|v| *v as f64));
        Sketcher {
            signs,
            from,
            to,
            probes: ergon_protocol::evidence::probe_steps(from, to),
            start: start_projection,
            at_probes: Vec::new(),
        }
    }

    /// The segment's probe steps.
    pub fn probes(&self) -> &[u64] {
        &self.probes
    }

    /// Whether step `done` (steps done so far) is the next probe.
    pub fn wants(&self, done: u64) -> bool {
        self.probes.get(self.at_probes.len()) == Some(&done)
    }

    /// Takes the weights at the next probe step.
    pub fn take(&mut self, weights: &[f32]) {
        self.at_probes.push(self.signs.project(weights.iter().map(|v| *v as f64)));
    }

    /// The sketches of a verifier that did not replay (all it has are the two checkpoints): the
    /// straight line at every probe, no deviation from the chord to the claimed end `end`.
    pub fn guess_straight(self, end: &[f32]) -> Vec<ergon_protocol::Sketch> {
        let end_projection = self.signs.project(end.iter().map(|v| *v as f64));
        let chord = core::array::from_fn(|j| end_projection[j] - self.start[j]);
        let none = [0.0; ergon_protocol::evidence::SKETCH_DIMS];
        self.probes.iter().map(|_| ergon_protocol::Sketch::quantize(none, chord)).collect()
    }

    fn t(&self, probe: u64) -> f64 {
        if self.to > self.from {
            (probe - self.from) as f64 / (self.to - self.from) as f64
        } else {
            0.0
        }
    }

    /// The sketches of the probes taken, against the claimed end `end`.
    pub fn finish(self, end: &[f32]) -> Vec<ergon_protocol::Sketch> {
        let end_projection = self.signs.project(end.iter().map(|v| *v as f64));
        self.probes
            .iter()
            .zip(&self.at_probes)
            .map(|(p, mid)| {
                ergon_protocol::evidence::sketch_at(self.t(*p), &self.start, mid, &end_projection)
            })
            .collect()
    }
}

/// Replays `segment` from its start (already loaded into `model` and `opt`) and compares every
/// state it produces with the claimed end.
pub(super) fn replay_segment(
    run: &Trajectory,
    model: &Model,
    opt: &mut Optimizer,
    segment: &Segment,
) -> Result<ReplayOutcome> {
    let (from, to) = (segment.from, segment.to);
    let before = flat_weights(model)?;
    let mut sketcher =
        Sketcher::new(&segment.evidence_key, (from.step, to.step), &evidence_weights(model)?);
    let mut losses = Vec::new();
    run.run_steps(model, opt, from.step..to.step, |model, _, done, loss| {
        losses.push(loss);
        if sketcher.wants(done) {
            sketcher.take(&evidence_weights(model)?);
        }
        Ok(true)
    })?;
    // The end state by hash: a replay on the trainer's class of device reproduces it bit for bit,
    // and then nothing of the end is read. Only the tensors that differ are read (by byte range)
    // and measured against the tolerances.
    let replayed_state = HostTensors::from_tensors(&trajectory::state_tensors(model, opt))?;
    let (mut absent, mut differing) = (Vec::new(), Vec::new());
    for (name, hash) in replayed_state.hashes() {
        match segment.to.tensors.get(&name) {
            None => absent.push(name),
            Some(claimed) if *claimed != hex(&hash) => differing.push(name),
            Some(_) => {}
        }
    }
    let exact = (replayed_state.0.len() - absent.len() - differing.len(), replayed_state.0.len());
    // The claimed end: the replay's own tensors where their hashes match (no copy when all do),
    // the differing ones as read, and without what the end lacks (reported as missing below).
    let target = if differing.is_empty() && absent.is_empty() {
        std::borrow::Cow::Borrowed(&replayed_state)
    } else {
        let mut claimed = replayed_state.clone();
        if !differing.is_empty() {
            claimed.0.extend((segment.read_end)(&differing)?.0);
        }
        for name in &absent {
            claimed.0.remove(name);
        }
        std::borrow::Cow::Owned(claimed)
    };
    let target = target.as_ref();
    // The end's file must be the canonical file of those tensors, so that the chunks the rules
    // read of it (and the chain's availability samples) are parts of what this replay checked.
    let file = match absent.is_empty() {
        true => crate::bundle::not_canonical(segment.to, target)?,
        false => None,
    };
    let mut missing = Vec::new();
    let mut claimed_of = |name: String, out: &mut Vec<f32>| match target.0.get(&name) {
        Some((_, values)) => out.extend_from_slice(values),
        None => missing.push(name),
    };
    // The replay's values, from the host copy already hashed (not copied off the device again).
    let replayed_of = |name: &str, out: &mut Vec<f32>| {
        if let Some((_, values)) = replayed_state.0.get(name) {
            out.extend_from_slice(values);
        }
    };
    // Weights: the update from the start, claimed against replayed.
    let (mut claimed, mut replayed) = (Vec::with_capacity(before.len()), Vec::new());
    for p in &model.params {
        let name = format!("param.{}", p.name);
        replayed_of(&name, &mut replayed);
        claimed_of(name, &mut claimed);
    }
    let delta =
        |after: &[f32]| -> Vec<f32> { after.iter().zip(&before).map(|(a, b)| a - b).collect() };
    let weights = compare_updates(&delta(&claimed), &delta(&replayed));
    let probes = sketcher.probes().to_vec();
    let sketches = sketcher.finish(&checkpoint_evidence_weights(target));
    // Optimizer state: what the next segment would start from, each slot on its own.
    let mut state = Vec::new();
    for slot in crate::optim::slot_names(&run.spec.optimizer) {
        let (mut claimed, mut replayed) = (Vec::new(), Vec::new());
        for (name, _) in opt.named_state(&model.params) {
            if name.rsplit('.').next() == Some(*slot) {
                replayed_of(&name, &mut replayed);
                claimed_of(name, &mut claimed);
            }
        }
        state.push((*slot, compare_updates(&claimed, &replayed)));
    }
    // Per-step losses.
    let claimed_losses =
        segment.claimed_losses.get(from.step as usize..to.step as usize).unwrap_or_default();
    let loss_gap = loss_gap(&losses, claimed_losses);
    Ok(ReplayOutcome { weights, state, loss_gap, missing, exact, file, probes, sketches })
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
