//! 7. **final_model**: the final-model hash is the hash of the last checkpoint's weights (and the
//!    committed one, when given).

use super::super::Report;
use super::Bundle;
use crate::{
    bundle::{self, checkpoint},
    data::hex,
};

/// Whether there is a final checkpoint to judge the metrics on (the manifest check requires the
/// schedule's checkpoints; its absence is still a failing check).
pub(in crate::verify) fn check(b: &Bundle, report: &mut Report) -> bool {
    let Some(last) = b.manifest.checkpoints.last() else {
        report.push("final_model", false, "no checkpoint".into(), "a final checkpoint");
        return false;
    };
    let weight_hashes: Vec<[u8; 32]> = last
        .tensors
        .iter()
        .filter(|(n, _)| n.starts_with("param."))
        .filter_map(|(_, h)| bundle::parse_hash(h))
        .collect();
    let final_hash = checkpoint::digest(weight_hashes.iter());
    let committed_ok = b.opts.expected_final_model.is_none_or(|e| e == final_hash);
    report.push(
        "final_model",
        hex(&final_hash) == b.manifest.final_model_hash && committed_ok,
        hex(&final_hash),
        "the manifest's (and the committed) final-model hash",
    );
    true
}
