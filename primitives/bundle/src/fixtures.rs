//! A test fixture for the crates that check bundles (this one, `ergon-bundle-check`): a manifest
//! committing to given checkpoint files (feature `fixtures`, or this crate's own tests).

use crate::{sha256, to_hex, FileCommitment};
use alloc::{format, string::String, vec::Vec};

/// The bytes of a manifest listing `files` (`(name, contents)`) as checkpoints, with their real
/// chunk hashes and lengths; each digest is the hash of the file's name (a Merkle leaf, checked
/// against the tensors by the worker, not by the manifest's index).
pub fn manifest_json(files: &[(&str, &[u8])]) -> Vec<u8> {
    let entries: Vec<String> = files
        .iter()
        .enumerate()
        .map(|(i, (name, data))| {
            let c = FileCommitment::of(data);
            let chunks: Vec<String> =
                c.chunks.iter().map(|h| format!("\"{}\"", to_hex(h))).collect();
            format!(
                r#"{{"step": {i}, "file": "{name}", "digest": "{}", "file_bytes": {}, "chunks": [{}], "losses": [0.5, 1e-3]}}"#,
                to_hex(&sha256(name.as_bytes())),
                c.bytes,
                chunks.join(",")
            )
        })
        .collect();
    format!(
        r#"{{"format_version": 2, "checkpoints": [{}], "metrics": {{"x": 0.25}}}}"#,
        entries.join(",")
    )
    .into_bytes()
}
