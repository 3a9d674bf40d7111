//! The commitments in a bundle's `manifest.json`, parsed and validated: what the Merkle root and the
//! chunk checks need, nothing else (the full manifest is the worker's business).

use crate::{chunks::chunk_count, merkle, parse_hash, sha256, Hash};
use alloc::{string::String, vec::Vec};
use core::fmt;
use serde::Deserialize;

/// Why a manifest cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexError {
    /// Not JSON of the manifest's shape.
    Json,
    /// The manifest lists no checkpoint.
    NoCheckpoints,
    /// Checkpoint `index` names a file outside the bundle (empty, `/`, `..`).
    BadFileName(usize),
    /// A hash of checkpoint `index` is not 32 bytes of hex.
    BadHash(usize),
    /// Checkpoint `index` lists a different number of chunks than its length implies.
    ChunkCount(usize),
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexError::Json => write!(f, "the manifest is not valid manifest JSON"),
            IndexError::NoCheckpoints => write!(f, "the manifest lists no checkpoint"),
            IndexError::BadFileName(i) => write!(f, "checkpoint {i}: file name escapes the bundle"),
            IndexError::BadHash(i) => write!(f, "checkpoint {i}: a hash is not 32 hex bytes"),
            IndexError::ChunkCount(i) => {
                write!(f, "checkpoint {i}: chunk list does not match the file length")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for IndexError {}

/// One checkpoint's commitments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointIndex {
    /// File name within the bundle.
    pub file: String,
    /// Tensor digest: the checkpoint's Merkle leaf.
    pub digest: Hash,
    /// File length in bytes.
    pub file_bytes: u64,
    /// SHA-256 of each [`crate::CHUNK_SIZE`] chunk of the file.
    pub chunks: Vec<Hash>,
}

/// A manifest's commitments, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestIndex {
    /// SHA-256 of the manifest bytes: the first Merkle leaf.
    pub manifest_hash: Hash,
    /// C0 … Cn.
    pub checkpoints: Vec<CheckpointIndex>,
}

#[derive(Deserialize)]
struct RawManifest {
    checkpoints: Vec<RawCheckpoint>,
}

#[derive(Deserialize)]
struct RawCheckpoint {
    file: String,
    digest: String,
    file_bytes: u64,
    chunks: Vec<String>,
}

/// Whether `name` is a plain file name inside the bundle.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && !name.contains('\\') && !name.contains("..")
}

impl ManifestIndex {
    /// Parses and validates `manifest_bytes` (unknown fields are ignored).
    pub fn parse(manifest_bytes: &[u8]) -> Result<Self, IndexError> {
        let raw: RawManifest =
            serde_json::from_slice(manifest_bytes).map_err(|_| IndexError::Json)?;
        if raw.checkpoints.is_empty() {
            return Err(IndexError::NoCheckpoints);
        }
        let checkpoints = raw
            .checkpoints
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                if !is_plain_file_name(&c.file) {
                    return Err(IndexError::BadFileName(i));
                }
                if c.chunks.len() as u64 != chunk_count(c.file_bytes) {
                    return Err(IndexError::ChunkCount(i));
                }
                let digest = parse_hash(&c.digest).ok_or(IndexError::BadHash(i))?;
                let chunks = c
                    .chunks
                    .iter()
                    .map(|h| parse_hash(h).ok_or(IndexError::BadHash(i)))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(CheckpointIndex { file: c.file, digest, file_bytes: c.file_bytes, chunks })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ManifestIndex { manifest_hash: sha256(manifest_bytes), checkpoints })
    }

    /// The Merkle leaves: the manifest's hash, then each checkpoint digest.
    pub fn leaves(&self) -> Vec<Hash> {
        core::iter::once(self.manifest_hash)
            .chain(self.checkpoints.iter().map(|c| c.digest))
            .collect()
    }

    /// The bundle root these commitments hash to.
    pub fn root(&self) -> Hash {
        merkle::root(&self.leaves())
    }

    /// Total number of chunks over all checkpoint files.
    pub fn total_chunks(&self) -> u64 {
        self.checkpoints.iter().map(|c| c.chunks.len() as u64).sum()
    }

    /// The `n`-th chunk over all files, in order: `(checkpoint index, chunk index)`.
    pub fn nth_chunk(&self, mut n: u64) -> Option<(usize, u64)> {
        for (i, c) in self.checkpoints.iter().enumerate() {
            let len = c.chunks.len() as u64;
            if n < len {
                return Some((i, n));
            }
            n -= len;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{fixtures::manifest_json, CHUNK_SIZE};
    use alloc::{string::String, vec};

    #[test]
    fn parses_a_manifest_and_commits_to_it() {
        let big = vec![7u8; CHUNK_SIZE as usize + 3];
        let bytes = manifest_json(&[("ckpt-0.safetensors", b"abc"), ("ckpt-1.safetensors", &big)]);
        let index = ManifestIndex::parse(&bytes).expect("valid");
        assert_eq!(index.checkpoints.len(), 2);
        assert_eq!(index.total_chunks(), 3);
        assert_eq!(index.nth_chunk(0), Some((0, 0)));
        assert_eq!(index.nth_chunk(2), Some((1, 1)));
        assert_eq!(index.nth_chunk(3), None);
        assert_eq!(index.leaves()[0], sha256(&bytes));
        // Any change to the manifest bytes changes the root.
        let mut other = bytes.clone();
        other.push(b' ');
        assert_ne!(ManifestIndex::parse(&other).unwrap().root(), index.root());
    }

    #[test]
    fn refuses_bad_manifests() {
        assert_eq!(ManifestIndex::parse(b"not json"), Err(IndexError::Json));
        assert_eq!(ManifestIndex::parse(br#"{"checkpoints": []}"#), Err(IndexError::NoCheckpoints));
        let escape = manifest_json(&[("../etc/passwd", b"x")]);
        assert_eq!(ManifestIndex::parse(&escape), Err(IndexError::BadFileName(0)));
        let wrong_count = String::from_utf8(manifest_json(&[("a", b"x")]))
            .unwrap()
            .replace(r#""file_bytes": 1"#, &format!(r#""file_bytes": {}"#, 2 * CHUNK_SIZE));
        assert_eq!(ManifestIndex::parse(wrong_count.as_bytes()), Err(IndexError::ChunkCount(0)));
        let bad_hash =
            String::from_utf8(manifest_json(&[("a", b"x")])).unwrap().replace("0x", "0xzz");
        assert!(matches!(ManifestIndex::parse(bad_hash.as_bytes()), Err(IndexError::BadHash(0))));
    }
}
