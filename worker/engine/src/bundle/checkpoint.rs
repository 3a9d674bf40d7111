//! Checkpoint files: named f32 tensors in safetensors, written atomically, and their canonical digest.
//!
//! The digest is computed over the tensors sorted by name (name, shape and little-endian values), not
//! over file bytes, so it does not depend on how a writer lays the file out.

use std::{collections::BTreeMap, fs, io::Write, path::Path};

use candle_core::{DType, Device, Tensor};
use ergon_bundle::FileCommitment;
use safetensors::{tensor::TensorView, SafeTensors};
use sha2::{Digest, Sha256};

use crate::error::{io, Error, Result};

/// SHA-256 of one tensor: `name ‖ rank ‖ dims ‖ f32 LE values`, lengths as u64 LE.
pub fn tensor_hash(name: &str, shape: &[usize], values: &[f32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update((name.len() as u64).to_le_bytes());
    h.update(name.as_bytes());
    h.update((shape.len() as u64).to_le_bytes());
    for d in shape {
        h.update((*d as u64).to_le_bytes());
    }
    for v in values {
        h.update(v.to_le_bytes());
    }
    h.finalize().into()
}

/// Digest of a set of tensors: SHA-256 over their per-tensor hashes in name order.
pub fn digest<'a>(hashes: impl IntoIterator<Item = &'a [u8; 32]>) -> [u8; 32] {
    let mut h = Sha256::new();
    for t in hashes {
        h.update(t);
    }
    h.finalize().into()
}

/// A checkpoint's tensors as f32 values on the host.
#[derive(Clone)]
pub struct HostTensors(pub BTreeMap<String, (Vec<usize>, Vec<f32>)>);

impl HostTensors {
    /// Copies `tensors` to the host as f32.
    pub fn from_tensors(tensors: &BTreeMap<String, Tensor>) -> Result<HostTensors> {
        let mut out = BTreeMap::new();
        for (name, t) in tensors {
            let values = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
            out.insert(name.clone(), (t.dims().to_vec(), values));
        }
        Ok(HostTensors(out))
    }

    /// Per-tensor hashes in name order, computed on the current thread pool (a GPT-2-small
    /// state is 1.5 GB: hashed on one core it would take seconds per checkpoint).
    pub fn hashes(&self) -> BTreeMap<String, [u8; 32]> {
        use rayon::prelude::*;
        let tensors: Vec<_> = self.0.iter().collect();
        tensors.par_iter().map(|(n, (s, v))| ((*n).clone(), tensor_hash(n, s, v))).collect()
    }

    /// Tensors on `device` in `dtype`.
    pub fn to_tensors(&self, device: &Device, dtype: DType) -> Result<BTreeMap<String, Tensor>> {
        let mut out = BTreeMap::new();
        for (name, (shape, values)) in &self.0 {
            out.insert(
                name.clone(),
                Tensor::from_slice(values, shape.as_slice(), device)?.to_dtype(dtype)?,
            );
        }
        Ok(out)
    }

    /// Writes the tensors to `path` atomically (temporary file, fsync, rename); returns what the file
    /// commits to (hash, length, chunk hashes).
    pub fn write(&self, path: &Path) -> Result<FileCommitment> {
        let data = self.to_safetensors(path)?;
        write_atomic(path, &data)?;
        Ok(FileCommitment::of(&data))
    }

    /// What the canonical file of these tensors (the bytes [`HostTensors::write`] writes) commits
    /// to, without writing it. Every checkpoint file must be its tensors' canonical file, so that
    /// a verifier holding the tensors — read whole, or reproduced by its replay — can hold the
    /// file's chunk list to them, and a chunk read alone is a part of the tensors the replay
    /// checks ([`crate::bundle::not_canonical`]).
    pub fn file_commitment(&self) -> Result<FileCommitment> {
        Ok(FileCommitment::of(&self.to_safetensors(Path::new("(canonical)"))?))
    }

    /// The tensors as safetensors bytes (f32); `path` names the file in errors.
    pub fn to_safetensors(&self, path: &Path) -> Result<Vec<u8>> {
        let bytes_le: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .0
            .iter()
            .map(|(n, (s, v))| {
                (n.clone(), s.clone(), v.iter().flat_map(|x| x.to_le_bytes()).collect())
            })
            .collect();
        let views = bytes_le
            .iter()
            .map(|(n, s, b)| {
                TensorView::new(safetensors::Dtype::F32, s.clone(), b)
                    .map(|v| (n.clone(), v))
                    .map_err(|e| Error::Bundle { path: path.into(), reason: e.to_string() })
            })
            .collect::<Result<Vec<_>>>()?;
        safetensors::serialize(views, None)
            .map_err(|e| Error::Bundle { path: path.into(), reason: e.to_string() })
    }

    /// Reads the checkpoint at `path`; a truncated, corrupted or non-f32 file is an error, not a panic.
    pub fn read(path: &Path) -> Result<HostTensors> {
        let data = fs::read(path).map_err(io("reading", path))?;
        Self::parse(path, &data)
    }

    /// Parses checkpoint bytes (already read from `path`).
    pub fn parse(path: &Path, data: &[u8]) -> Result<HostTensors> {
        let bad = |reason: String| Error::Bundle { path: path.into(), reason };
        let st = SafeTensors::deserialize(data)
            .map_err(|e| bad(format!("not a safetensors file: {e}")))?;
        let mut out = BTreeMap::new();
        for (name, view) in st.tensors() {
            if view.dtype() != safetensors::Dtype::F32 {
                return Err(bad(format!("tensor {name} is {:?}, expected F32", view.dtype())));
            }
            let values = view
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            out.insert(name, (view.shape().to_vec(), values));
        }
        Ok(HostTensors(out))
    }
}

/// Writes `data` to `path` through a temporary file in the same directory, so a crash never leaves a
/// half-written file under the final name.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp).map_err(io("creating", &tmp))?;
    f.write_all(data).map_err(io("writing", &tmp))?;
    f.sync_all().map_err(io("syncing", &tmp))?;
    drop(f);
    fs::rename(&tmp, path).map_err(io("renaming into", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_round_trip_and_corruption_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.safetensors");
        let mut m = BTreeMap::new();
        m.insert("b".to_string(), (vec![2], vec![1.0f32, -2.0]));
        m.insert("a".to_string(), (vec![1, 1], vec![0.5f32]));
        let t = HostTensors(m);
        t.write(&path).unwrap();
        let back = HostTensors::read(&path).unwrap();
        assert_eq!(back.hashes(), t.hashes());
        let bytes = fs::read(&path).unwrap();
        assert!(HostTensors::parse(&path, &bytes[..bytes.len() / 2]).is_err());
        assert!(HostTensors::parse(&path, b"garbage").is_err());
    }

    #[test]
    fn tensor_hash_covers_name_shape_and_values() {
        let h = tensor_hash("w", &[2], &[1.0, 2.0]);
        assert_ne!(h, tensor_hash("v", &[2], &[1.0, 2.0]));
        assert_ne!(h, tensor_hash("w", &[1, 2], &[1.0, 2.0]));
        assert_ne!(h, tensor_hash("w", &[2], &[1.0, 2.5]));
    }

    /// The canonical file is a protocol rule (every checkpoint file must be it; a verifier holds
    /// the chunk lists it never reads to it): these bytes may not change with a library upgrade.
    /// The vector is Hugging Face's Python `safetensors.numpy.save` of the same arrays.
    #[test]
    fn the_canonical_file_of_fixed_tensors_is_fixed() {
        let t = HostTensors(BTreeMap::from([
            ("opt.w.m".to_string(), (vec![2], vec![0.0f32, -0.5])),
            ("param.b".to_string(), (vec![1], vec![1.5f32])),
            ("param.w".to_string(), (vec![2, 1], vec![0.25f32, -3.0])),
        ]));
        let file = t.file_commitment().unwrap();
        assert_eq!(
            crate::data::hex(&file.sha256),
            "0x18e6febc821d0143d24e13d97c851a11f35501dee2a8b26b97f28e7385a29b2a"
        );
        assert_eq!(file.bytes, 212);
    }
}
