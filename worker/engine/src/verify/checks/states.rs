//! 3. **states**: every checkpoint read (whole, or the rules' chunks) holds only finite values and is not
//!    degenerate (not every weight zero); **optimizer**: every state read whole is one an honest run
//!    reaches (AdamW's moments bounded by each other, a state that moves the weights, a second
//!    moment that decays no faster than β₂ between reads, a momentum not reset: [`crate::verify`]'s
//!    `optimizer.rs`).

use std::borrow::Cow;

use super::super::{optimizer, state_defects, Report};
use super::Bundle;
use crate::bundle::HostTensors;

/// Whether the states are sane (the optimizer's reachability is reported, and judged with the
/// verdict, but does not stop the checks after it).
pub(in crate::verify) fn check(b: &Bundle, report: &mut Report) -> bool {
    let (spec, m) = (b.spec, b.manifest);
    // Each checkpoint read once for both checks: its sanity, and whether its optimizer state is
    // one an honest run reaches (on its own and from the one read before it), wherever the
    // segments were drawn.
    let (mut bad, mut unreachable) = (Vec::new(), Vec::new());
    let mut previous: Option<(u64, Cow<HostTensors>)> = None;
    for &i in &b.chosen.read {
        let entry = &m.checkpoints[i];
        let host = match b.checkpoints.tensors(entry) {
            Ok(host) => host,
            Err(e) => {
                bad.push(format!("step {}: {e}", entry.step));
                continue;
            }
        };
        bad.extend(state_defects(entry.step, &host));
        unreachable.extend(optimizer::state_defects(&spec.optimizer, entry.step, &host));
        if let Some((step, earlier)) = &previous {
            let (earlier, later) = ((*step, earlier.as_ref()), (entry.step, host.as_ref()));
            unreachable.extend(optimizer::decay_defects(&spec.optimizer, earlier, later));
        }
        previous = Some((entry.step, host));
    }
    drop(previous);
    // The checkpoints of which the rules read chunks only: the sanity of the weights read (all
    // zero counts only when the chunks hold every weight).
    for entry in b.chosen.sampled.iter().filter_map(|i| m.checkpoints.get(*i)) {
        match b.checkpoints.sample(entry, &b.coordinates) {
            Ok(values) => {
                if let Some(v) = values.iter().find(|v| !v.is_finite()) {
                    bad.push(format!("step {}: a weight holds {v}", entry.step));
                } else if b.coordinates.complete && values.iter().all(|v| *v == 0.0) {
                    bad.push(format!("step {}: every weight is zero", entry.step));
                }
            }
            Err(e) => bad.push(format!("step {}: {e}", entry.step)),
        }
    }
    report.push(
        "states",
        bad.is_empty(),
        if bad.is_empty() {
            format!(
                "{} checkpoints finite and not degenerate ({} of them by the rules' chunks)",
                b.chosen.read.len() + b.chosen.sampled.len(),
                b.chosen.sampled.len()
            )
        } else {
            bad.join("; ")
        },
        "every value finite; not every weight zero",
    );
    if !report.passed {
        return false;
    }
    report.push(
        "optimizer",
        unreachable.is_empty(),
        if unreachable.is_empty() {
            format!("{} optimizer states reachable", b.chosen.read.len())
        } else {
            unreachable.join("; ")
        },
        "each state one an honest run reaches: AdamW's m² within the bound v sets, an update \
         direction of root mean square ≥ 1e-5, v decaying no faster than β₂; SGD's momentum not reset",
    );
    true
}
