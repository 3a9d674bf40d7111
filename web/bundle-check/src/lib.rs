//! # The delivered model, checked in a browser
//!
//! The web page (`web/`) downloads a completed job's `manifest.json` and final checkpoint from the
//! trainer's bundle server and checks them against the root committed on chain, as
//! `ergon-worker fetch-model` does. It runs this crate compiled to WebAssembly, so the page
//! re-implements none of the commitment: the Merkle tree, the manifest's index and the chunk hashes
//! are `ergon-bundle`'s, the code the worker and the runtime's availability checks run.
//!
//! - [`manifest_root`]: the root a served `manifest.json` commits to (compare with the chain's);
//! - [`check_file`]: a checkpoint file against the length and chunk hashes that manifest lists,
//!   which ties the file's bytes to the root.
//!
//! [`abi`] (on `wasm32` only) exports them over linear memory with plain `extern "C"` functions:
//! no bindgen, no JavaScript generated, `web/src/bundle-check.js` is the whole loader.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{format, string::String};
use ergon_bundle::{to_hex, FileCommitment, Hash, ManifestIndex};

#[cfg(target_arch = "wasm32")]
pub mod abi;

/// The Merkle root `manifest` (a served `manifest.json`'s bytes) commits to, and its index; or why
/// it is not a bundle manifest.
pub fn manifest_root(manifest: &[u8]) -> Result<(Hash, ManifestIndex), String> {
    if manifest.len() > ergon_bundle::MAX_MANIFEST_BYTES {
        return Err(format!(
            "the manifest is {} bytes, more than a bundle's {}",
            manifest.len(),
            ergon_bundle::MAX_MANIFEST_BYTES
        ));
    }
    let index = ManifestIndex::parse(manifest).map_err(|e| format!("{e}"))?;
    Ok((index.root(), index))
}

/// Whether `data` is the checkpoint file `file` that `index` lists: its length and every chunk's
/// hash. The error names the first difference.
pub fn check_file(index: &ManifestIndex, file: &str, data: &[u8]) -> Result<(), String> {
    let listed = index
        .checkpoints
        .iter()
        .find(|c| c.file == file)
        .ok_or_else(|| format!("the manifest lists no checkpoint file {file}"))?;
    if data.len() as u64 != listed.file_bytes {
        return Err(format!(
            "{file} is {} bytes, the manifest commits to {}",
            data.len(),
            listed.file_bytes
        ));
    }
    let found = FileCommitment::of(data);
    match found.chunks.iter().zip(&listed.chunks).position(|(a, b)| a != b) {
        Some(i) => Err(format!(
            "{file}: chunk {i} hashes to {}, the manifest commits to {}",
            to_hex(&found.chunks[i]),
            to_hex(&listed.chunks[i])
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_bundle::{fixtures::manifest_json as manifest, CHUNK_SIZE};

    #[test]
    fn the_root_is_the_bundles_and_a_served_file_must_be_the_committed_one() {
        let big = vec![7u8; CHUNK_SIZE as usize + 10];
        let bytes = manifest(&[("c0.safetensors", b"first"), ("c1.safetensors", &big)]);
        let (root, index) = manifest_root(&bytes).expect("a manifest");
        assert_eq!(root, ManifestIndex::parse(&bytes).unwrap().root());
        assert_eq!(check_file(&index, "c1.safetensors", &big), Ok(()));

        let mut changed = big.clone();
        changed[CHUNK_SIZE as usize + 3] ^= 1;
        let err = check_file(&index, "c1.safetensors", &changed).unwrap_err();
        assert!(err.contains("chunk 1 hashes to"), "{err}");
        let err = check_file(&index, "c1.safetensors", &big[..10]).unwrap_err();
        assert!(err.contains("is 10 bytes"), "{err}");
        let err = check_file(&index, "c9.safetensors", b"first").unwrap_err();
        assert!(err.contains("no checkpoint file c9"), "{err}");
        // Another manifest (one byte of it) is another root.
        let mut other = bytes.clone();
        other[2] = b'S';
        assert!(manifest_root(&other).map(|(r, _)| r != root).unwrap_or(true));
        assert!(manifest_root(b"not json").unwrap_err().contains("not valid manifest JSON"));
    }
}
