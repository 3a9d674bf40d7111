//! Checkpoint files cut into fixed-size chunks, each hashed, so that one chunk can be fetched and
//! checked without the rest of the file.

use crate::{sha256, Hash};
use alloc::vec::Vec;

/// Bytes per chunk (the last chunk of a file may be shorter): 1 MiB, so a manifest lists 32 bytes per
/// MiB of checkpoints and an offchain worker fetches at most this much per sample.
pub const CHUNK_SIZE: u64 = 1 << 20;

/// Number of chunks of a file of `file_bytes` bytes (an empty file has none).
pub fn chunk_count(file_bytes: u64) -> u64 {
    file_bytes.div_ceil(CHUNK_SIZE)
}

/// Byte range `[start, end)` of chunk `index` of a file of `file_bytes` bytes, or `None` past the end.
pub fn chunk_range(file_bytes: u64, index: u64) -> Option<(u64, u64)> {
    let start = index.checked_mul(CHUNK_SIZE)?;
    (start < file_bytes).then(|| (start, file_bytes.min(start.saturating_add(CHUNK_SIZE))))
}

/// SHA-256 of each chunk of `data`.
pub fn chunk_hashes(data: &[u8]) -> Vec<Hash> {
    data.chunks(CHUNK_SIZE as usize).map(sha256).collect()
}

/// What a checkpoint file commits to: its hash, length and chunk hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCommitment {
    /// SHA-256 of the whole file.
    pub sha256: Hash,
    /// Length in bytes.
    pub bytes: u64,
    /// SHA-256 of each chunk.
    pub chunks: Vec<Hash>,
}

impl FileCommitment {
    /// The commitment of `data`.
    pub fn of(data: &[u8]) -> Self {
        FileCommitment {
            sha256: sha256(data),
            bytes: data.len() as u64,
            chunks: chunk_hashes(data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_file_exactly() {
        for len in [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 7] {
            let n = chunk_count(len);
            let mut covered = 0;
            for i in 0..n {
                let (a, b) = chunk_range(len, i).expect("in range");
                assert_eq!(a, covered);
                assert!(b > a && b - a <= CHUNK_SIZE);
                covered = b;
            }
            assert_eq!(covered, len);
            assert_eq!(chunk_range(len, n), None);
        }
        assert_eq!(chunk_range(10, u64::MAX), None);
    }

    #[test]
    fn chunk_hashes_match_the_ranges() {
        let data: Vec<u8> = (0..(2 * CHUNK_SIZE + 5)).map(|i| (i % 251) as u8).collect();
        let c = FileCommitment::of(&data);
        assert_eq!(c.chunks.len() as u64, chunk_count(c.bytes));
        for (i, h) in c.chunks.iter().enumerate() {
            let (a, b) = chunk_range(c.bytes, i as u64).unwrap();
            assert_eq!(&sha256(&data[a as usize..b as usize]), h);
        }
    }
}
