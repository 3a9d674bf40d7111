//! # Checkpoint-bundle commitment
//!
//! What the trainer commits to on chain (`bundle_root`) and what anyone can check of a served bundle
//! without trusting the server. Shared, `no_std`, by the worker (which writes and verifies bundles)
//! and the runtime's availability offchain worker (which samples them over HTTP).
//!
//! - **Merkle root** ([`merkle`]): leaves are `SHA-256(manifest.json)`, then each checkpoint's tensor
//!   digest, in order.
//! - **Chunks** ([`chunks`]): every checkpoint file is cut into [`CHUNK_SIZE`]-byte chunks whose
//!   SHA-256 hashes the manifest lists, so one chunk fetched with an HTTP range request can be checked
//!   on its own: the chunk hash is in the manifest, the manifest is a leaf under the root.
//! - **Manifest index** ([`index`]): the part of `manifest.json` that carries those commitments,
//!   parsed and validated (file names, hash encodings, chunk counts) before anything is fetched.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod chunks;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod index;
pub mod merkle;

pub use chunks::{chunk_count, chunk_hashes, chunk_range, FileCommitment, CHUNK_SIZE};
pub use index::{CheckpointIndex, IndexError, ManifestIndex};
pub use merkle::Hash;

/// File name of the manifest in a bundle (directory or URL).
pub const MANIFEST_FILE: &str = "manifest.json";

/// Largest manifest anyone downloads: validators' availability checks call a larger one
/// unavailable, and verifiers refuse it.
pub const MAX_MANIFEST_BYTES: usize = 8 << 20;

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> Hash {
    use sha2::{Digest, Sha256};
    Sha256::digest(data).into()
}

/// Lower-case hex of `bytes`, `0x`-prefixed (how the manifest writes hashes).
pub fn to_hex(bytes: &[u8]) -> alloc::string::String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = alloc::string::String::with_capacity(2 + 2 * bytes.len());
    s.push_str("0x");
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

/// Parses 32 bytes of hex, with or without `0x`.
pub fn parse_hash(s: &str) -> Option<Hash> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_bad_input() {
        let h = sha256(b"ergon");
        assert_eq!(parse_hash(&to_hex(&h)), Some(h));
        assert_eq!(parse_hash(&to_hex(&h)[2..]), Some(h));
        assert_eq!(parse_hash("0x12"), None);
        assert_eq!(parse_hash(&"zz".repeat(32)), None);
        assert_eq!(parse_hash(&"é".repeat(32)), None);
    }
}
