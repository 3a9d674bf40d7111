//! Checkpoint bundles: `manifest.json` plus C0 … Cn (`ckpt-<step>.safetensors`), committed to by one
//! Merkle root over the manifest and the checkpoint digests.
//!
//! Leaves: `SHA-256(manifest.json)`, then each checkpoint's tensor digest in order. Each file is also
//! committed chunk by chunk (`ergon-bundle`), which is what the chain's availability checks sample.

pub mod checkpoint;
pub mod layout;
pub mod manifest;
pub mod merkle;
pub mod ranges;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

pub use checkpoint::HostTensors;
pub use layout::Layout;
pub use manifest::{CheckpointEntry, Environment, Manifest, Metrics, OnChainMetrics};

use crate::{
    data::hex,
    error::{io, Error, Result},
};

/// File name of the manifest in a bundle directory.
pub const MANIFEST_FILE: &str = ergon_bundle::MANIFEST_FILE;

/// File name of checkpoint `step`.
pub fn checkpoint_file(step: u64) -> String {
    format!("ckpt-{step:08}.safetensors")
}

/// The bundle root of a manifest's bytes: the same computation as the runtime's availability
/// checks (`ergon_bundle::ManifestIndex`), which also validates names, hashes and chunk lists.
pub fn root_of(manifest_bytes: &[u8]) -> Result<merkle::Hash> {
    ergon_bundle::ManifestIndex::parse(manifest_bytes)
        .map(|index| index.root())
        .map_err(|e| Error::Bundle { path: MANIFEST_FILE.into(), reason: e.to_string() })
}

/// Why checkpoint `entry`'s file, as the manifest lists it (hash, length, chunk list), is not the
/// canonical file of `host` (its tensors, known whole to the verifier): `None` when it is. The
/// manifest commits to a checkpoint twice — its tensor hashes (the Merkle leaf, what a replay is
/// compared with) and its file's chunk list (what a part read by chunks, or an availability
/// sample, is checked against); this holds the two to the same tensors wherever a verifier knows
/// them, so a chunk view that says something else than the tensors fails the segment next to it.
pub fn not_canonical(entry: &CheckpointEntry, host: &HostTensors) -> Result<Option<String>> {
    let file = host.file_commitment()?;
    let listed = file.bytes == entry.file_bytes
        && hex(&file.sha256) == entry.file_sha256
        && file.chunks.iter().map(|h| hex(h)).eq(entry.chunks.iter().cloned());
    Ok((!listed).then(|| {
        format!("{}: the file listed is not the canonical file of its tensors", entry.file)
    }))
}

/// Writes `tensors` to `dir/name` and returns the manifest entry a trainer would list for it as
/// checkpoint `step` (tests' bundles of one checkpoint).
#[cfg(test)]
pub(crate) fn written_entry(
    dir: &Path,
    name: &str,
    step: u64,
    tensors: &HostTensors,
) -> CheckpointEntry {
    let file = tensors.write(&dir.join(name)).expect("written");
    CheckpointEntry {
        step,
        file: name.into(),
        file_sha256: hex(&file.sha256),
        file_bytes: file.bytes,
        chunks: file.chunks.iter().map(|h| hex(h)).collect(),
        digest: hex(&checkpoint::digest(tensors.hashes().values())),
        tensors: tensors.hashes().iter().map(|(n, h)| (n.clone(), hex(h))).collect(),
    }
}

/// Parses `0x…` hex of 32 bytes.
pub use ergon_bundle::parse_hash;

/// Whether a manifest's file name is a plain name inside the bundle (no `/`, `\\`, `..`).
pub use ergon_bundle::index::is_plain_file_name;

/// Downloads the bundle served at `url` (its `manifest.json` and every checkpoint file it lists)
/// into the directory `into`. Names that would escape the directory are refused; what the files
/// contain is for [`inspect`] and the verifier to judge.
pub fn fetch(url: &str, into: &Path) -> Result<Manifest> {
    fetch_selected(url, into, |m| (0..m.checkpoints.len()).collect(), None)
}

/// Like [`fetch`], but downloads only the checkpoints `select` picks from the manifest (by index;
/// the manifest always): a model's user needs the last one only. With the spec's `layout`, a
/// checkpoint the manifest lists with other tensors or more bytes than the spec's state takes is
/// not downloaded (left for [`inspect_selected`] to report), no file is read past the size the
/// manifest gives it, and a file served slower than [`crate::data::bundle_time_limit`] allows is
/// a download error.
pub fn fetch_selected(
    url: &str,
    into: &Path,
    select: impl FnOnce(&Manifest) -> Vec<usize>,
    layout: Option<&Layout>,
) -> Result<Manifest> {
    let base = url.trim_end_matches('/');
    std::fs::create_dir_all(into).map_err(io("creating", into))?;
    let max = ergon_bundle::MAX_MANIFEST_BYTES as u64;
    let manifest_bytes = crate::data::fetch_within(
        &format!("{base}/{MANIFEST_FILE}"),
        max,
        crate::data::bundle_time_limit(max),
    )?;
    let manifest: Manifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| Error::Bundle { path: url.into(), reason: format!("manifest: {e}") })?;
    let path = into.join(MANIFEST_FILE);
    std::fs::write(&path, &manifest_bytes).map_err(io("writing", &path))?;
    for entry in select(&manifest).iter().filter_map(|i| manifest.checkpoints.get(*i)) {
        if !ergon_bundle::index::is_plain_file_name(&entry.file) {
            return Err(Error::Bundle {
                path: url.into(),
                reason: format!("checkpoint name {:?} escapes the bundle", entry.file),
            });
        }
        let uri = format!("{base}/{}", entry.file);
        let bytes = match layout {
            Some(layout) if layout.entry_problem(entry).is_some() => continue,
            // Served at least at the floor rate, or not at all (a verifier then fails the bundle
            // instead of waiting out its window).
            Some(_) => crate::data::fetch_within(
                &uri,
                entry.file_bytes,
                crate::data::bundle_time_limit(entry.file_bytes),
            )?,
            None => crate::data::fetch(&uri)?,
        };
        let path = into.join(&entry.file);
        std::fs::write(&path, bytes).map_err(io("writing", &path))?;
    }
    Ok(manifest)
}

/// The bytes of the file at `path`, stopping one byte past `max`.
fn read_at_most(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut data = Vec::new();
    std::fs::File::open(path)?.take(max.saturating_add(1)).read_to_end(&mut data)?;
    Ok(data)
}

/// What `inspect` found in a bundle directory.
pub struct Inspection {
    /// The manifest.
    pub manifest: Manifest,
    /// The Merkle root recomputed from the files.
    pub root: merkle::Hash,
    /// Every mismatch between the manifest and the files (empty when the bundle is intact).
    pub problems: Vec<String>,
    /// The checkpoints read that matched their digest, by step, while they fit in
    /// [`MAX_CACHED_BYTES`]: what the verifier's later checks use instead of reading them again.
    pub checkpoints: BTreeMap<u64, HostTensors>,
}

/// Most checkpoint bytes [`inspect_selected`] keeps in memory.
pub const MAX_CACHED_BYTES: usize = 1 << 30;

/// Reads `dir`'s manifest, re-hashes every checkpoint tensor and file, and recomputes the root.
pub fn inspect(dir: &Path) -> Result<Inspection> {
    inspect_selected(dir, |m| (0..m.checkpoints.len()).collect(), None)
}

/// Like [`inspect`], but re-hashes only the checkpoints `select` picks from the manifest (by index):
/// the root still commits to all of them through the manifest's digests. With the spec's
/// `layout`, every checkpoint the manifest lists is first checked against it (names and file
/// size, [`Layout::entry_problem`]) and one that does not fit is reported and never read; the
/// tensors read must have the layout's shapes.
pub fn inspect_selected(
    dir: &Path,
    select: impl FnOnce(&Manifest) -> Vec<usize>,
    layout: Option<&Layout>,
) -> Result<Inspection> {
    let manifest_path = dir.join(MANIFEST_FILE);
    let bytes = std::fs::read(&manifest_path).map_err(io("reading", &manifest_path))?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| Error::Bundle {
        path: manifest_path.clone(),
        reason: format!("manifest: {e}"),
    })?;
    let mut problems = Vec::new();
    let misfits: Vec<(u64, String)> = match layout {
        Some(layout) => manifest
            .checkpoints
            .iter()
            .filter_map(|e| layout.entry_problem(e).map(|p| (e.step, p)))
            .collect(),
        None => Vec::new(),
    };
    problems.extend(misfits.iter().map(|(_, p)| p.clone()));
    let (mut checkpoints, mut cached_bytes) = (BTreeMap::new(), 0usize);
    let selected = select(&manifest);
    for entry in selected.iter().filter_map(|i| manifest.checkpoints.get(*i)) {
        let path: PathBuf = dir.join(&entry.file);
        if !ergon_bundle::index::is_plain_file_name(&entry.file) {
            problems.push(format!("{}: file name escapes the bundle", entry.file));
            continue;
        }
        if misfits.iter().any(|(step, _)| *step == entry.step) {
            continue;
        }
        // Never more than the manifest says the file holds (plus one byte to see it is longer).
        let data = match read_at_most(&path, entry.file_bytes) {
            Ok(d) => d,
            Err(e) => {
                problems.push(format!("{}: {e}", entry.file));
                continue;
            }
        };
        // The chunk hashes commit to every byte of the file (one pass, instead of also hashing the
        // whole file for `file_sha256`).
        let chunks = ergon_bundle::chunk_hashes(&data);
        if data.len() as u64 != entry.file_bytes
            || chunks.iter().map(|h| hex(h)).ne(entry.chunks.iter().cloned())
        {
            problems.push(format!("{}: file bytes do not match the manifest's chunks", entry.file));
        }
        match HostTensors::parse(&path, &data) {
            Ok(t) => {
                if let Some(problem) = layout.and_then(|l| l.tensors_problem(&entry.file, &t)) {
                    problems.push(problem);
                }
                let hashes = t.hashes();
                let listed: Vec<&String> = entry.tensors.keys().collect();
                let found: Vec<&String> = hashes.keys().collect();
                if listed != found {
                    problems.push(format!("{}: tensor names differ from the manifest", entry.file));
                }
                for (name, h) in &hashes {
                    if entry.tensors.get(name) != Some(&hex(h)) {
                        problems
                            .push(format!("{}: tensor {name} does not match its hash", entry.file));
                    }
                }
                if hex(&checkpoint::digest(hashes.values())) != entry.digest {
                    problems.push(format!("{}: digest does not match", entry.file));
                } else if cached_bytes + data.len() <= MAX_CACHED_BYTES {
                    // Checked against its leaf: later checks may use it without reading it again.
                    cached_bytes += data.len();
                    checkpoints.insert(entry.step, t);
                }
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    let root = root_of(&bytes)?;
    Ok(Inspection { manifest, root, problems, checkpoints })
}
