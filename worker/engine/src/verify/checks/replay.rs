//! 5. **replay**: for each challenged segment `Cᵢ → Cᵢ₊₁`, load `Cᵢ` (weights and optimizer state),
//!    run the same steps on the same batches (the seed's PRF), and compare everything the replay
//!    produces with what `Cᵢ₊₁` and the manifest claim. `Cᵢ₊₁` is compared by hash first: each
//!    tensor the replay reproduces bit for bit (the trainer's class of device) is not read at all,
//!    and only those that differ are read, by byte ranges, and measured: the weight update
//!    (relative error ≤ ε and cosine ≥ τ), each optimizer state slot on its own (the same bounds)
//!    and every step's loss
//!    (within [`LOSS_TOLERANCE`]); `Cᵢ₊₁`'s file must be the canonical file of the tensors compared
//!    (what the rules' chunks of it are read against); on the way, sketch the weights at the segment's probe steps (the
//!    replay evidence a pass reveals on chain).
//!
//! 9. For a bundle whose training diverged, its **tail** (the last checkpoint to the divergence) is
//!    replayed by every verifier: as its last segment when drawn for it (`replay[k]`, with a
//!    sketch), or else as the `divergence` check; it must diverge where the manifest says.

use super::super::{
    check_tail, replay_segment, unreachable, Report, Segment, SegmentSketch, LOSS_TOLERANCE,
};
use super::{Bundle, Replayer};
use crate::{error::Result, trajectory::Trajectory};

/// Replays the chosen segments (when `opts.replay`) and a diverged bundle's tail; errors only for
/// a cancelled verification.
pub(in crate::verify) fn check(b: &Bundle, r: &mut Replayer, report: &mut Report) -> Result<()> {
    let (spec, opts, m) = (b.spec, b.opts, b.manifest);
    if opts.replay {
        report.segments = b.chosen.segments.clone();
    }
    let started = std::time::Instant::now();
    // A diverged bundle's tail (its last checkpoint to the divergence) is replayed by everyone: as
    // a drawn segment with its evidence, or else as a check of the bundle as a whole.
    let tail_index = m.diverged_at.map(|_| m.checkpoints.len().saturating_sub(1) as u32);
    if let (Some(_), Some(cancel)) = (tail_index, &opts.cancel) {
        cancel.check()?;
    }
    let run = Trajectory {
        spec,
        summary: b.summary,
        seed: &b.seed,
        train_set: r.data.train(),
        device: r.device,
    };
    let val_set = r.data.validation();
    let tail = tail_index.map(|i| {
        let key = ergon_protocol::evidence::key(&b.root, i);
        let state = (&r.model, &mut r.opt);
        check_tail(&run, val_set, (m, &b.checkpoints), state, key)
    });
    let mut tail_replayed = false;
    for &i in &report.segments.clone() {
        if let Some(cancel) = &opts.cancel {
            cancel.check()?;
        }
        let name = format!("replay[{i}]");
        if let (Some(tail), true) = (&tail, Some(i) == tail_index) {
            if let Some(sketch) = &tail.sketch {
                report.sketches.push(sketch.clone());
            }
            report.push(name, tail.passed, tail.measured.clone(), &tail.threshold);
            tail_replayed = true;
            continue;
        }
        let (Some(from), Some(to)) =
            (m.checkpoints.get(i as usize), m.checkpoints.get(i as usize + 1))
        else {
            report.push(name, false, "no such segment".into(), "a segment of the bundle");
            continue;
        };
        if let Err(e) = b.checkpoints.load(from, &r.model, &mut r.opt) {
            report.push(name, false, e.to_string(), "a readable checkpoint");
            continue;
        }
        let threshold = format!(
            "weights and each optimizer state slot: relative error ≤ {:e} and cosine ≥ {}; every \
             step's loss within {LOSS_TOLERANCE:e} (trained on {}, replayed on {})",
            opts.epsilon, opts.tau, m.environment.device, r.replayed_on
        );
        let read_end = |names: &[String]| b.checkpoints.some(to, names);
        let segment = Segment {
            from,
            to,
            read_end: &read_end,
            claimed_losses: &m.losses,
            evidence_key: ergon_protocol::evidence::key(&b.root, i),
        };
        let replayed = replay_segment(&run, &r.model, &mut r.opt, &segment);
        match replayed {
            Ok(out) => {
                report.sketches.push(SegmentSketch::new(i, out.probes.clone(), &out.sketches));
                let within = |(rel, cos): (f64, f64)| rel <= opts.epsilon && cos >= opts.tau;
                let passed = within(out.weights)
                    && out.state.iter().all(|(_, s)| within(*s))
                    && out.loss_gap <= LOSS_TOLERANCE
                    && out.missing.is_empty()
                    && out.file.is_none();
                let state: Vec<String> = out
                    .state
                    .iter()
                    .map(|(slot, (rel, cos))| {
                        format!("optimizer {slot} relative error {rel:.3e}, cosine {cos:.6}")
                    })
                    .collect();
                let mut measured = format!(
                    "steps {}..{}: {} of {} end tensors bit-exact by hash; relative error {:.3e}, \
                     cosine {:.6}; {}; max loss gap {:.2e}",
                    from.step,
                    to.step,
                    out.exact.0,
                    out.exact.1,
                    out.weights.0,
                    out.weights.1,
                    state.join("; "),
                    out.loss_gap
                );
                if !out.missing.is_empty() {
                    measured.push_str(&format!(
                        "; missing from the checkpoint: {}",
                        out.missing.join(", ")
                    ));
                }
                if let Some(file) = &out.file {
                    measured.push_str(&format!("; {file}"));
                }
                report.push(name, passed, measured, &threshold);
            }
            // The end's differing tensors could not be fetched: retried, as a download is.
            Err(e) if unreachable(&e) => return Err(e),
            Err(e) => report.push(name, false, e.to_string(), &threshold),
        }
    }
    if let (Some(tail), false) = (tail, tail_replayed) {
        report.push("divergence", tail.passed, tail.measured, &tail.threshold);
    }
    report.replay_seconds = started.elapsed().as_secs_f64();
    Ok(())
}
