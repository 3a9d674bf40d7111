//! Pruning a bundle once nobody can ask for it any more. A trainer keeps every checkpoint of a
//! committed bundle while its job is being verified: any segment may be drawn, a dispute may draw
//! more, and the chain's availability checks sample chunks of every file; a drawn state it cannot
//! serve is a fail vote and its stake. Once the job has ended the challenge is over: a completed
//! job's owner still fetches the model (the manifest and the last checkpoint,
//! `ergon_engine::delivery`), a failed job's bundle is wanted by no one. What is left of a bundle
//! of N+1 checkpoints of B bytes is then one checkpoint (B) instead of (N+1)·B.

use std::path::Path;

use ergon_client::chain::JobState;
use serde::Deserialize;

/// What a pruned bundle keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// The manifest and the last checkpoint: the model its owner fetches.
    Model,
    /// Nothing: the whole directory goes.
    Nothing,
}

/// What the chain's state of a job this daemon trained lets it prune: nothing while the job may
/// still draw (or dispute) a segment of the bundle.
pub fn after(state: &JobState) -> Option<Keep> {
    match state {
        JobState::Completed { .. } => Some(Keep::Model),
        JobState::Failed { .. } => Some(Keep::Nothing),
        _ => None,
    }
}

#[derive(Deserialize)]
struct Listed {
    checkpoints: Vec<ListedFile>,
}

#[derive(Deserialize)]
struct ListedFile {
    file: String,
}

/// Prunes the bundle in `dir` down to `keep`; returns the bytes freed. A directory already pruned
/// (or never written) frees nothing; a manifest that cannot be read leaves the files alone.
pub fn prune(dir: &Path, keep: Keep) -> std::io::Result<u64> {
    if !dir.is_dir() {
        return Ok(0);
    }
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    if keep == Keep::Nothing {
        let freed = std::fs::read_dir(dir)?.flatten().map(|e| size(&e.path())).sum();
        std::fs::remove_dir_all(dir)?;
        return Ok(freed);
    }
    let manifest = std::fs::read(dir.join(ergon_engine::bundle::MANIFEST_FILE))?;
    let listed: Listed = serde_json::from_slice(&manifest)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut freed = 0;
    let earlier = listed.checkpoints.len().saturating_sub(1);
    for entry in &listed.checkpoints[..earlier] {
        // Only plain names inside the bundle: a manifest is never a path to delete elsewhere.
        if !ergon_engine::bundle::is_plain_file_name(&entry.file) {
            continue;
        }
        let path = dir.join(&entry.file);
        if path.is_file() {
            freed += size(&path);
            std::fs::remove_file(&path)?;
        }
    }
    Ok(freed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(dir: &Path, files: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        let listed: Vec<String> = files.iter().map(|f| format!(r#"{{"file":"{f}"}}"#)).collect();
        let manifest = format!(r#"{{"checkpoints":[{}]}}"#, listed.join(","));
        std::fs::write(dir.join("manifest.json"), manifest).unwrap();
        for f in files.iter().filter(|f| !f.contains('/')) {
            std::fs::write(dir.join(f), [0u8; 100]).unwrap();
        }
    }

    #[test]
    fn a_completed_bundle_keeps_the_model_and_a_failed_one_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("job-1");
        bundle(&dir, &["c0", "c1", "c2"]);
        assert_eq!(prune(&dir, Keep::Model).unwrap(), 200);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["c2", "manifest.json"]);
        // Again: nothing more to free.
        assert_eq!(prune(&dir, Keep::Model).unwrap(), 0);
        assert!(prune(&dir, Keep::Nothing).unwrap() >= 100);
        assert!(!dir.exists());
        assert_eq!(prune(&dir, Keep::Nothing).unwrap(), 0);
    }

    #[test]
    fn a_manifest_never_names_a_file_outside_the_bundle() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("precious");
        std::fs::write(&outside, b"keep me").unwrap();
        let dir = root.path().join("job-2");
        bundle(&dir, &["../precious", "c1"]);
        prune(&dir, Keep::Model).unwrap();
        assert!(outside.exists());
    }

    #[test]
    fn nothing_is_pruned_while_the_job_can_still_draw_a_segment() {
        use ergon_client::runtime::runtime_types::pallet_job_market::types::FailureReason;
        assert_eq!(after(&JobState::Open), None);
        let failed = JobState::Failed { trainer: None, reason: FailureReason::Rejected };
        assert_eq!(after(&failed), Some(Keep::Nothing));
    }
}
