//! 8. **metrics**: the claimed validation loss and accuracy are what the final weights give (a
//!    diverged bundle claims none: its tail decides).

use super::super::{Report, METRIC_TOLERANCE};
use super::{Bundle, Replayer};
use crate::trajectory;

pub(in crate::verify) fn check(b: &Bundle, r: &mut Replayer, report: &mut Report) {
    let m = b.manifest;
    if let Some(step) = m.diverged_at {
        report.push(
            "metrics",
            true,
            format!("none: diverged at step {step} of {}", b.summary.total_steps),
            "the metrics of a bundle that did not diverge",
        );
        return;
    }
    let Some(last) = m.checkpoints.last() else {
        report.push("metrics", false, "no checkpoint".into(), "a final checkpoint");
        return;
    };
    match b
        .checkpoints
        .load(last, &r.model, &mut r.opt)
        .and_then(|()| trajectory::evaluate(&r.model, r.data.validation(), r.device))
    {
        Ok((loss, accuracy)) => {
            let gap_loss = (loss - m.metrics.validation_loss).abs() as f64;
            let gap_acc = (accuracy - m.metrics.validation_accuracy).abs() as f64;
            report.push(
                "metrics",
                gap_loss <= METRIC_TOLERANCE && gap_acc <= METRIC_TOLERANCE,
                format!(
                    "validation loss {loss:.6} (claimed {:.6}), accuracy {accuracy:.6} (claimed {:.6})",
                    m.metrics.validation_loss, m.metrics.validation_accuracy
                ),
                &format!("both within {METRIC_TOLERANCE:e}"),
            );
        }
        Err(e) => report.push("metrics", false, e.to_string(), "a readable final checkpoint"),
    }
}
