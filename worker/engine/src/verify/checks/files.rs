//! 1. **files**: every checkpoint file the checks read, and its tensors, match the manifest (held
//!    to the spec's layout before anything is read, so a padded bundle never raises the verifier's
//!    memory), and the Merkle root matches the committed one when given. Only the checkpoints the
//!    checks read are re-hashed (the rules' sample, the replayed segments' ends, C0 and the last);
//!    the root over the manifest still commits to every one.

use super::super::{selection, Report, Selection, VerifyOptions};
use crate::bundle::{self, Inspection, Layout, Manifest};
use crate::data::hex;

/// The bundle read, and what the later checks read of it; `None` when not even the manifest could
/// be read (the failing check is in `report`).
pub(in crate::verify) fn check(
    opts: &VerifyOptions,
    layout: &Layout,
    report: &mut Report,
) -> Option<(Inspection, Selection)> {
    let mut chosen = Selection::default();
    let select = |m: &Manifest| {
        chosen = selection(opts, m);
        chosen.read.clone()
    };
    let inspection = match bundle::inspect_selected(&opts.bundle, select, Some(layout)) {
        Ok(i) => i,
        Err(e) => {
            report.push("files", false, e.to_string(), "a readable manifest");
            return None;
        }
    };
    report.root = Some(hex(&inspection.root));
    let problems = inspection.problems.join("; ");
    report.push(
        "files",
        inspection.problems.is_empty(),
        if problems.is_empty() {
            format!(
                "{} of {} checkpoint files read; all files and tensors match",
                chosen.read.len(),
                inspection.manifest.checkpoints.len()
            )
        } else {
            problems
        },
        "every file read matches the manifest's hashes",
    );
    if let Some(root) = opts.expected_root {
        report.push(
            "root",
            inspection.root == root,
            hex(&inspection.root),
            &format!("the committed root {}", hex(&root)),
        );
    }
    Some((inspection, chosen))
}
