//! The six full-pass rules (`rule:*`, [`crate::verify::full_pass`]) on the rules' sample of checkpoints
//! (their coordinate sample, read by chunks where the vote holds a checkpoint only in part): cheap
//! screens before the replay. Four of them assume a converging run (accuracy, steps and
//! distances settle): a diverged bundle is judged by its replay and the two rules about C0.

use super::super::{full_pass_rules, Check, Report};
use super::{Bundle, Replayer};

pub(in crate::verify) fn check(
    b: &Bundle,
    r: &mut Replayer,
    c0: &crate::verify::full_pass::Weights,
    report: &mut Report,
) {
    let m = b.manifest;
    let checks = full_pass_rules(b, r, c0);
    match checks {
        Ok(checks) => {
            let about_c0 = ["rule:initial_distribution", "rule:initial_independence"];
            let applies =
                |c: &Check| m.diverged_at.is_none() || about_c0.contains(&c.name.as_str());
            for check in checks.into_iter().filter(applies) {
                report.passed &= check.passed;
                report.checks.push(check);
            }
        }
        Err(e) => report.push("rules", false, e.to_string(), "checkpoints the rules can read"),
    }
}
