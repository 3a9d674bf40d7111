//! Data files committed chunk by chunk, so that their availability can be checked by sampling.
//!
//! A job's data may be hundreds of gigabytes (64 files of up to 4 GiB per set). Checking that the
//! owner serves it by downloading it whole would make every validator's offchain worker move all
//! of it for one report, past any deadline. So each file is committed by its **chunk list**: the
//! file's length and the SHA-256 of each [`DATA_CHUNK_BYTES`] chunk (the last one shorter),
//!
//! ```text
//! chunk list  = u64le(len) ‖ SHA-256(chunk₀) ‖ SHA-256(chunk₁) ‖ … ‖ SHA-256(chunkₙ₋₁),  n = ⌈len / 1 MiB⌉
//! file digest = SHA-256(chunk list)
//! ```
//!
//! and a dataset's content root is [`crate::content_root`] of its files' digests. The owner serves
//! each http(s) file's chunk list beside it, at [`chunk_list_url`] (`ergon-worker content-root
//! --chunk-lists` and `ergon-worker tokenize` write them). A checker fetches the chunk lists (at
//! most [`MAX_CHUNK_LIST_BYTES`] each, 128 KiB for a 4 GiB file), holds them to the root, and
//! then any chunk by a byte range against its own hash; whoever cannot load the data names the
//! chunk it could not get ([`DataGap`]), so the check looks exactly there. The one definition the
//! worker, the runtime and every client share; test vectors in `tests.rs`.

use alloc::{string::String, vec::Vec};
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;
use sha2::{Digest, Sha256};

/// Bytes per committed chunk of a data file (1 MiB; the last chunk of a file may be shorter).
pub const DATA_CHUNK_BYTES: u64 = 1 << 20;
/// What [`chunk_list_url`] appends to a data file's path.
pub const CHUNK_LIST_SUFFIX: &str = ".chunks";
/// Length of a chunk list's header (the file's length, `u64` little-endian).
const HEADER_BYTES: usize = 8;
/// Largest chunk list: that of a file of [`crate::MAX_DATA_FILE_BYTES`] (131 080 bytes).
pub const MAX_CHUNK_LIST_BYTES: usize =
    HEADER_BYTES + 32 * (crate::MAX_DATA_FILE_BYTES / DATA_CHUNK_BYTES) as usize;

/// A data file's chunk list: its length and the SHA-256 of each of its chunks.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ChunkList {
    /// The file's length in bytes.
    pub len: u64,
    /// SHA-256 of each chunk, in order: ⌈len / [`DATA_CHUNK_BYTES`]⌉ of them.
    pub chunks: Vec<[u8; 32]>,
}

/// Why bytes are not a chunk list.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ChunkListError {
    /// Shorter than its header, or not a whole number of hashes after it.
    Malformed,
    /// The file would be larger than [`crate::MAX_DATA_FILE_BYTES`].
    TooLarge,
    /// The number of hashes is not the number of chunks of a file of the stated length.
    WrongCount,
}

impl ChunkList {
    /// The chunk list of `bytes` (a whole file).
    pub fn of(bytes: &[u8]) -> ChunkList {
        let mut hasher = FileHasher::default();
        hasher.update(bytes);
        hasher.finish()
    }

    /// Its bytes, as served beside the file: `u64le(len) ‖ hashes`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + 32 * self.chunks.len());
        out.extend_from_slice(&self.len.to_le_bytes());
        for hash in &self.chunks {
            out.extend_from_slice(hash);
        }
        out
    }

    /// Reads a served chunk list, checking that it describes a file of at most
    /// [`crate::MAX_DATA_FILE_BYTES`] with exactly one hash per chunk.
    pub fn parse(bytes: &[u8]) -> Result<ChunkList, ChunkListError> {
        if bytes.len() < HEADER_BYTES || !(bytes.len() - HEADER_BYTES).is_multiple_of(32) {
            return Err(ChunkListError::Malformed);
        }
        let (header, hashes) = bytes.split_at(HEADER_BYTES);
        let mut len = [0u8; HEADER_BYTES];
        len.copy_from_slice(header);
        let len = u64::from_le_bytes(len);
        if len > crate::MAX_DATA_FILE_BYTES {
            return Err(ChunkListError::TooLarge);
        }
        if (hashes.len() / 32) as u64 != chunk_count(len) {
            return Err(ChunkListError::WrongCount);
        }
        let chunks = hashes
            .chunks_exact(32)
            .map(|h| {
                let mut hash = [0u8; 32];
                hash.copy_from_slice(h);
                hash
            })
            .collect();
        Ok(ChunkList { len, chunks })
    }

    /// The file's digest: SHA-256 of [`ChunkList::encode`].
    pub fn digest(&self) -> [u8; 32] {
        Sha256::digest(self.encode()).into()
    }

    /// The byte range `[start, end)` of chunk `index`, if the file has it.
    pub fn range(&self, index: u32) -> Option<(u64, u64)> {
        let start = u64::from(index).checked_mul(DATA_CHUNK_BYTES)?;
        (start < self.len).then(|| (start, (start + DATA_CHUNK_BYTES).min(self.len)))
    }

    /// The first chunk of `bytes` (the file as served) that differs from this list — a chunk whose
    /// hash differs, or the first one missing from a file served short — or `None` when `bytes` is
    /// the file. A file served longer than listed names its last chunk (no committed chunk is
    /// missing; whoever checks by ranges sees it served).
    pub fn first_difference(&self, bytes: &[u8]) -> Option<u32> {
        let served = ChunkList::of(bytes);
        if served == *self {
            return None;
        }
        let same = self.chunks.iter().zip(&served.chunks).take_while(|(a, b)| a == b).count();
        Some(same.min(self.chunks.len().saturating_sub(1)) as u32)
    }
}

/// Number of chunks of a file of `len` bytes.
pub fn chunk_count(len: u64) -> u64 {
    len.div_ceil(DATA_CHUNK_BYTES)
}

/// Hashes a file chunk by chunk as its bytes arrive (a download need not be held whole to get its
/// chunk list).
#[derive(Clone, Default)]
pub struct FileHasher {
    len: u64,
    current: Sha256,
    in_current: u64,
    chunks: Vec<[u8; 32]>,
}

impl FileHasher {
    /// Adds the next bytes of the file.
    pub fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = (DATA_CHUNK_BYTES - self.in_current) as usize;
            let (now, rest) = bytes.split_at(room.min(bytes.len()));
            self.current.update(now);
            self.in_current += now.len() as u64;
            self.len += now.len() as u64;
            if self.in_current == DATA_CHUNK_BYTES {
                self.chunks.push(core::mem::take(&mut self.current).finalize().into());
                self.in_current = 0;
            }
            bytes = rest;
        }
    }

    /// Bytes added so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was added yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk list of the bytes added.
    pub fn finish(mut self) -> ChunkList {
        if self.in_current > 0 {
            self.chunks.push(self.current.finalize().into());
        }
        ChunkList { len: self.len, chunks: self.chunks }
    }
}

/// The digest of a whole file (SHA-256 of its chunk list).
pub fn file_digest(bytes: &[u8]) -> [u8; 32] {
    ChunkList::of(bytes).digest()
}

/// Where the chunk list of the http(s) data file at `url` is served: the same URL with
/// [`CHUNK_LIST_SUFFIX`] appended to its path (before any query or fragment).
pub fn chunk_list_url(url: &str) -> String {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    let mut out = String::with_capacity(url.len() + CHUNK_LIST_SUFFIX.len());
    out.push_str(&url[..end]);
    out.push_str(CHUNK_LIST_SUFFIX);
    out.push_str(&url[end..]);
    out
}

/// A chunk of a job's data that someone could not get: the `chunk`-th chunk of file `file` of the
/// spec's `set`-th committed file set ([`crate::JobSpec::committed_files`]: 0 training data, 1
/// validation data, 2 initial weights). Named in a data report, so that the validators' check
/// fetches that chunk rather than only random ones: an owner who withholds one chunk of a
/// terabyte is found at once.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct DataGap {
    /// Index of the file set in [`crate::JobSpec::committed_files`].
    pub set: u8,
    /// Index of the file in the set, in spec order.
    pub file: u8,
    /// Index of the chunk in the file.
    pub chunk: u32,
}
