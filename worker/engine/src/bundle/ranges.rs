//! Parts of a checkpoint read without the rest of it. A safetensors file begins with its header
//! (an 8-byte length, then JSON giving each tensor's dtype, shape and `data_offsets`), so a reader
//! fetches the header, then only the byte ranges of the tensors it wants (HTTP range requests, or
//! seeks into a local file), and checks each tensor against its hash in the manifest (which the
//! checkpoint's Merkle leaf, `digest`, commits to). What a verifier downloads of the checkpoints it
//! does not replay from: the weights the rules evaluate, an end-state tensor its replay disagrees
//! with.
//!
//! The header is not trusted: it only says where to look. A lying header makes the bytes read fail
//! their tensor hash, the trainer's fault like any other altered file.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{checkpoint, CheckpointEntry, HostTensors, Layout};
use crate::{
    data::{self, hex},
    error::{Error, Result},
};

/// Largest gap between two wanted tensors read in one request anyway: fewer requests for bytes
/// the reader would not otherwise need (a few tensors' worth at most).
pub const COALESCE_GAP: u64 = 64 << 10;

/// Where the tensors of a checkpoint file lie: absolute byte ranges `[start, end)` and shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMap(pub BTreeMap<String, (Vec<usize>, u64, u64)>);

#[derive(Deserialize)]
struct RawEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (u64, u64),
}

/// The most header bytes (the 8-byte length included) a checkpoint of `layout` may have: what
/// [`Layout::max_file_bytes`] allows beyond the values.
pub fn max_header_bytes(layout: &Layout) -> u64 {
    layout.max_file_bytes().saturating_sub(4 * layout.values())
}

/// Parses a safetensors header (`json`, found after the 8-byte length) of a file of `file_bytes`
/// bytes into where its f32 tensors lie; anything else (another dtype, ranges out of the file or of
/// the wrong size) is an error naming `file`.
pub fn parse_header(file: &str, json: &[u8], file_bytes: u64) -> Result<TensorMap> {
    let bad = |reason: String| Error::Bundle { path: file.into(), reason };
    let raw: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(json).map_err(|e| bad(format!("safetensors header: {e}")))?;
    let data_start = 8 + json.len() as u64;
    let mut out = BTreeMap::new();
    for (name, value) in raw {
        if name == "__metadata__" {
            continue;
        }
        let entry: RawEntry = serde_json::from_value(value)
            .map_err(|e| bad(format!("safetensors header, tensor {name}: {e}")))?;
        if entry.dtype != "F32" {
            return Err(bad(format!("tensor {name} is {}, expected F32", entry.dtype)));
        }
        let values = entry.shape.iter().try_fold(1u64, |n, d| n.checked_mul(*d as u64));
        let (a, b) = entry.data_offsets;
        let (start, end) = (data_start.saturating_add(a), data_start.saturating_add(b));
        if values.and_then(|v| v.checked_mul(4)) != b.checked_sub(a) || end > file_bytes {
            return Err(bad(format!("tensor {name}: data_offsets {a}..{b} do not fit its shape")));
        }
        out.insert(name, (entry.shape, start, end));
    }
    Ok(TensorMap(out))
}

/// Reads the tensors `names` of checkpoint `entry` from `uri` (the file's URL or local path):
/// its header, then the tensors' byte ranges (neighbours within [`COALESCE_GAP`] in one request),
/// each checked against its shape in `layout` and its hash in the manifest. Returns them and the
/// bytes read.
pub fn read_tensors(
    uri: &str,
    entry: &CheckpointEntry,
    names: &[String],
    layout: &Layout,
) -> Result<(HostTensors, u64)> {
    let bad = |reason: String| Error::Bundle { path: entry.file.clone().into(), reason };
    let limit = data::bundle_time_limit;
    let (map, mut read) = read_header(uri, entry, layout)?;
    let mut wanted = Vec::with_capacity(names.len());
    for name in names {
        let (shape, start, end) =
            map.0.get(name).ok_or_else(|| bad(format!("tensor {name} is not in the file")))?;
        if layout.0.get(name) != Some(shape) {
            return Err(bad(format!("tensor {name} has shape {shape:?}, not the spec's")));
        }
        wanted.push((name.as_str(), shape, *start, *end));
    }
    wanted.sort_by_key(|(_, _, start, _)| *start);
    let mut out = BTreeMap::new();
    for group in coalesce(&wanted) {
        let (from, to) = (group[0].2, group.iter().map(|w| w.3).max().unwrap_or(group[0].3));
        let bytes = data::fetch_range(uri, (from, to), limit(to - from))?;
        read += bytes.len() as u64;
        for (name, shape, start, end) in group {
            let slice = &bytes[(start - from) as usize..(end - from) as usize];
            let values: Vec<f32> = slice
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let hash = hex(&checkpoint::tensor_hash(name, shape, &values));
            if entry.tensors.get(*name) != Some(&hash) {
                return Err(bad(format!("tensor {name} does not match its hash in the manifest")));
            }
            out.insert(name.to_string(), ((*shape).clone(), values));
        }
    }
    Ok((HostTensors(out), read))
}

/// The header of checkpoint `entry` at `uri` (its length bounded by what `layout` needs and by
/// the file): where its tensors lie, and the bytes read.
pub fn read_header(
    uri: &str,
    entry: &CheckpointEntry,
    layout: &Layout,
) -> Result<(TensorMap, u64)> {
    let bad = |reason: String| Error::Bundle { path: entry.file.clone().into(), reason };
    let limit = data::bundle_time_limit;
    let prefix = data::fetch_range(uri, (0, 8), limit(8))?;
    let header_len = u64::from_le_bytes(
        prefix
            .as_slice()
            .try_into()
            .map_err(|_| bad("shorter than a safetensors header".into()))?,
    );
    if header_len.saturating_add(8) > max_header_bytes(layout).min(entry.file_bytes) {
        return Err(bad(format!("a safetensors header of {header_len} bytes, more than it needs")));
    }
    let json = data::fetch_range(uri, (8, 8 + header_len), limit(header_len))?;
    Ok((parse_header(&entry.file, &json, entry.file_bytes)?, 8 + header_len))
}

/// Chunks `indices` ([`ergon_bundle::CHUNK_SIZE`] bytes each, the last one shorter) of checkpoint
/// `entry` at `uri`, each checked against its hash in the manifest's chunk list (which the
/// manifest's Merkle leaf commits to): what the rules' coordinate sample reads of a checkpoint.
/// Returns them in the order asked, and the bytes read.
pub fn read_chunks(
    uri: &str,
    entry: &CheckpointEntry,
    indices: &[u64],
) -> Result<(Vec<Vec<u8>>, u64)> {
    let bad = |reason: String| Error::Bundle { path: entry.file.clone().into(), reason };
    let mut out = Vec::with_capacity(indices.len());
    let mut read = 0;
    for &i in indices {
        let (start, end) = ergon_bundle::chunk_range(entry.file_bytes, i)
            .ok_or_else(|| bad(format!("chunk {i} is past the end of the file")))?;
        let listed = entry
            .chunks
            .get(i as usize)
            .ok_or_else(|| bad(format!("chunk {i} is not in the manifest's chunk list")))?;
        let bytes = data::fetch_range(uri, (start, end), data::bundle_time_limit(end - start))?;
        read += bytes.len() as u64;
        if hex(&ergon_bundle::sha256(&bytes)) != *listed {
            return Err(bad(format!("chunk {i} does not match its hash in the manifest")));
        }
        out.push(bytes);
    }
    Ok((out, read))
}

type Wanted<'a> = (&'a str, &'a Vec<usize>, u64, u64);

/// `wanted` (sorted by start) in groups read with one request each.
fn coalesce<'a, 'b>(wanted: &'b [Wanted<'a>]) -> Vec<&'b [Wanted<'a>]> {
    let mut groups = Vec::new();
    let mut first = 0;
    for i in 1..=wanted.len() {
        let split = i == wanted.len() || {
            let end = wanted[first..i].iter().map(|w| w.3).max().unwrap_or(0);
            wanted[i].2 > end.saturating_add(COALESCE_GAP)
        };
        if split && first < i {
            groups.push(&wanted[first..i]);
            first = i;
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout(BTreeMap::from([
            ("opt.w.m".to_string(), vec![2, 3]),
            ("opt.w.v".to_string(), vec![2, 3]),
            ("param.b".to_string(), vec![3]),
            ("param.w".to_string(), vec![2, 3]),
        ]))
    }

    /// A checkpoint of [`layout`] written to a file, and its manifest entry.
    fn written(dir: &std::path::Path) -> (String, CheckpointEntry, HostTensors) {
        let tensors = HostTensors(
            layout()
                .0
                .iter()
                .enumerate()
                .map(|(k, (n, s))| {
                    let len = s.iter().product::<usize>();
                    (n.clone(), (s.clone(), (0..len).map(|i| (k * 10 + i) as f32).collect()))
                })
                .collect(),
        );
        let path = dir.join("c.safetensors");
        let entry = crate::bundle::written_entry(dir, "c.safetensors", 3, &tensors);
        (path.to_string_lossy().into_owned(), entry, tensors)
    }

    #[test]
    fn reads_only_the_tensors_asked_for_and_checks_their_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let (uri, entry, tensors) = written(dir.path());
        let weights = vec!["param.b".to_string(), "param.w".to_string()];
        let (read, bytes) = read_tensors(&uri, &entry, &weights, &layout()).unwrap();
        assert_eq!(read.0.keys().collect::<Vec<_>>(), weights.iter().collect::<Vec<_>>());
        assert_eq!(read.0["param.w"], tensors.0["param.w"]);
        // The header and the weights' 9 values: not the optimizer's 12.
        assert!(bytes < entry.file_bytes - 4 * 12 + 1, "{bytes} of {}", entry.file_bytes);

        // A manifest whose hash of a tensor is not the file's: the read fails, naming it.
        let mut lying = entry.clone();
        lying.tensors.insert("param.w".into(), hex(&[0; 32]));
        let err =
            read_tensors(&uri, &lying, &weights, &layout()).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("param.w does not match its hash"), "{err}");
        // A tensor the file does not hold, or one of another shape than the spec's.
        let err =
            read_tensors(&uri, &entry, &["param.x".into()], &layout()).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("not in the file"), "{err}");
        let mut other = layout();
        other.0.insert("param.b".into(), vec![4]);
        let err = read_tensors(&uri, &entry, &weights, &other).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("not the spec's"), "{err}");
    }

    #[test]
    fn a_lying_header_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let (uri, entry, _) = written(dir.path());
        let mut bytes = std::fs::read(&uri).unwrap();
        // Claims a header longer than the file.
        bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&uri, &bytes).unwrap();
        let err =
            read_tensors(&uri, &entry, &["param.w".into()], &layout()).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("more than it needs"), "{err}");
        assert!(parse_header(
            "c",
            br#"{"param.w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,8]}}"#,
            1000
        )
        .is_err());
        assert!(parse_header(
            "c",
            br#"{"param.w":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}"#,
            1000
        )
        .is_err());
        assert!(parse_header("c", b"[1,2]", 1000).is_err());
        let far = br#"{"param.w":{"dtype":"F32","shape":[1],"data_offsets":[996,1000]}}"#;
        assert!(parse_header("c", far, 1000).is_err());
    }

    #[test]
    fn neighbours_are_read_together_and_far_ones_apart() {
        let s = vec![1usize];
        let w: Vec<Wanted> = vec![
            ("a", &s, 0, 4),
            ("b", &s, 4, 8),
            ("c", &s, 8 + COALESCE_GAP, 12 + COALESCE_GAP),
            ("d", &s, 13 + 2 * COALESCE_GAP, 20 + 2 * COALESCE_GAP),
        ];
        let groups: Vec<Vec<&str>> =
            coalesce(&w).iter().map(|g| g.iter().map(|x| x.0).collect()).collect();
        assert_eq!(groups, vec![vec!["a", "b", "c"], vec!["d"]]);
        assert!(coalesce(&[]).is_empty());
    }
}
