//! 1. **files**: every checkpoint file the checks read, and its tensors, match the manifest (held
//!    to the spec's layout before anything is read, so a padded bundle never raises the verifier's
//!    memory), and the Merkle root matches the committed one when given. Only the checkpoints the
//!    checks read are re-hashed (the rules' sample, the replayed segments' ends, C0 and the last);
//!    the root over the manifest still commits to every one. Every checkpoint's leaf (`digest`)
//!    must be the hash of the tensor hashes the manifest lists for it: what a part read by byte
//!    ranges, or an end state compared by hash, is checked against; every file read whole must be
//!    its tensors' canonical file ([`bundle::not_canonical`]). **weights**: the chunks the rules
//!    read of the checkpoints not read whole ([`CoordinateSample`]), each matching its hash in the
//!    manifest's chunk list.

use super::super::{
    rule_seed, selection, unreachable, Checkpoints, CoordinateSample, Report, Selection,
    VerifyOptions,
};
use crate::bundle::{self, checkpoint, Inspection, Layout, Manifest};
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
    let mut problems = inspection.problems.clone();
    problems.extend(leaf_problems(&inspection.manifest));
    // Each file read whole (and kept: all of them up to `bundle::MAX_CACHED_BYTES`) is its tensors'
    // canonical file (`bundle::not_canonical`): the layout the rules read other files' chunks by.
    for entry in &inspection.manifest.checkpoints {
        if let Some(host) = inspection.checkpoints.get(&entry.step) {
            match bundle::not_canonical(entry, host) {
                Ok(None) => {}
                Ok(Some(problem)) => problems.push(problem),
                Err(e) => problems.push(e.to_string()),
            }
        }
    }
    let problems = problems.join("; ");
    report.push(
        "files",
        problems.is_empty(),
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

/// The checkpoints whose leaf is not the hash of the tensor hashes the manifest lists for them.
fn leaf_problems(manifest: &Manifest) -> Vec<String> {
    manifest
        .checkpoints
        .iter()
        .filter(|e| {
            let listed: Option<Vec<[u8; 32]>> =
                e.tensors.values().map(|h| bundle::parse_hash(h)).collect();
            listed.is_none_or(|l| hex(&checkpoint::digest(l.iter())) != e.digest)
        })
        .map(|e| format!("{}: digest is not the hash of its tensor hashes", e.file))
        .collect()
}

/// Draws the rules' coordinate sample from the last checkpoint's layout (read whole) and reads it
/// of the rules' checkpoints not read whole ([`Selection::sampled`]), once (the states check and
/// the rules use it); `None` when a chunk does not match its hash or a file is not the layout's
/// (the failing check, with its reasons, is in `report`). A served bundle that cannot be reached
/// is an error, as when its files were downloaded: a daemon retries before it calls it a fail.
pub(in crate::verify) fn check_samples(
    checkpoints: &Checkpoints,
    manifest: &Manifest,
    chosen: &Selection,
    opts: &VerifyOptions,
    report: &mut Report,
) -> crate::error::Result<Option<CoordinateSample>> {
    let Some(last) = manifest.checkpoints.last() else { return Ok(Some(Default::default())) };
    let header = checkpoints
        .uri(last)
        .and_then(|uri| bundle::ranges::read_header(&uri, last, checkpoints.layout));
    let coordinates = match header {
        Ok((map, _)) => CoordinateSample::draw(
            &map,
            last.file_bytes,
            &rule_seed(&opts.challenge, &chosen.segments),
        ),
        Err(e) if unreachable(&e) => return Err(e),
        Err(e) => {
            report.push("weights", false, e.to_string(), "the last checkpoint's layout");
            return Ok(None);
        }
    };
    let mut problems = Vec::new();
    for entry in chosen.sampled.iter().filter_map(|i| manifest.checkpoints.get(*i)) {
        match checkpoints.sample(entry, &coordinates) {
            Ok(_) => {}
            Err(e) if unreachable(&e) => return Err(e),
            Err(e) => problems.push(e.to_string()),
        }
    }
    let passed = problems.is_empty();
    report.push(
        "weights",
        passed,
        if passed {
            format!(
                "{} chunks ({} weights) of {} more checkpoints read; all match",
                coordinates.chunks.len(),
                coordinates.len(),
                chosen.sampled.len()
            )
        } else {
            problems.join("; ")
        },
        "every chunk read matches its hash in the manifest; every file the last one's length",
    );
    Ok(passed.then_some(coordinates))
}
