//! What a checkpoint of a job may hold, known from the spec before a byte of a bundle is read: the
//! model's parameters (`param.<name>`) and the optimizer's state (`opt.<name>.<slot>`), each with
//! its shape. A checkpoint that lists another tensor, or a file larger than these tensors take, is
//! refused before it is downloaded or read, so a padded bundle never raises a verifier's memory
//! beyond what the spec needs.

use std::collections::BTreeMap;

use super::{CheckpointEntry, HostTensors};

/// Bytes of a safetensors header per tensor beyond its name: `{"dtype":"F32","shape":[…],
/// "data_offsets":[…,…]}` with every number at its widest (20 digits) comes to under 200.
const HEADER_BYTES_PER_TENSOR: u64 = 256;
/// Header bytes besides the tensors' entries: the 8-byte length, braces, alignment padding and
/// room for a short `__metadata__` entry.
const HEADER_BYTES_FIXED: u64 = 1024;

/// The tensors every checkpoint of a job holds, by name, with their shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout(pub BTreeMap<String, Vec<usize>>);

impl Layout {
    /// Values over all tensors.
    pub fn values(&self) -> u64 {
        self.0.values().map(|s| s.iter().map(|d| *d as u64).product::<u64>()).sum()
    }

    /// The largest file a checkpoint of this layout can be: its f32 values and a safetensors
    /// header naming them.
    pub fn max_file_bytes(&self) -> u64 {
        let names: u64 = self.0.keys().map(|n| n.len() as u64).sum();
        4 * self.values()
            + names
            + HEADER_BYTES_PER_TENSOR * self.0.len() as u64
            + HEADER_BYTES_FIXED
    }

    /// Why the manifest's `entry` cannot be a checkpoint of this layout (other tensor names, a
    /// file larger than [`Layout::max_file_bytes`]), or `None`.
    pub fn entry_problem(&self, entry: &CheckpointEntry) -> Option<String> {
        if let Some(problem) = self.names_problem(entry.tensors.keys()) {
            return Some(format!("{}: {problem}", entry.file));
        }
        let max = self.max_file_bytes();
        (entry.file_bytes > max).then(|| {
            format!(
                "{}: {} bytes, more than the {max} a checkpoint of this spec takes",
                entry.file, entry.file_bytes
            )
        })
    }

    /// Why the tensors read from a checkpoint file do not have this layout's names and shapes.
    pub fn tensors_problem(&self, file: &str, tensors: &HostTensors) -> Option<String> {
        if let Some(problem) = self.names_problem(tensors.0.keys()) {
            return Some(format!("{file}: {problem}"));
        }
        let wrong: Vec<String> = tensors
            .0
            .iter()
            .filter(|(name, (shape, _))| self.0.get(*name) != Some(shape))
            .map(|(name, (shape, _))| format!("{name} {shape:?} (the spec's {:?})", self.0[name]))
            .collect();
        (!wrong.is_empty())
            .then(|| format!("{file}: shapes differ from the spec: {}", wrong.join(", ")))
    }

    fn names_problem<'a>(&self, names: impl Iterator<Item = &'a String>) -> Option<String> {
        let names: Vec<&String> = names.collect();
        let extra: Vec<&str> =
            names.iter().filter(|n| !self.0.contains_key(**n)).map(|n| n.as_str()).collect();
        let missing: Vec<&str> =
            self.0.keys().filter(|n| !names.contains(n)).map(|n| n.as_str()).collect();
        let list = |v: &[&str]| {
            let shown: Vec<&str> = v.iter().take(4).copied().collect();
            let more = v.len().saturating_sub(shown.len());
            if more > 0 {
                format!("{} and {more} more", shown.join(", "))
            } else {
                shown.join(", ")
            }
        };
        match (extra.is_empty(), missing.is_empty()) {
            (true, true) => None,
            (false, _) => {
                Some(format!("tensors not in the spec's model and optimizer: {}", list(&extra)))
            }
            (true, false) => Some(format!("tensors of the spec missing: {}", list(&missing))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout(BTreeMap::from([
            ("param.w".to_string(), vec![2, 3]),
            ("opt.w.momentum".to_string(), vec![2, 3]),
        ]))
    }

    fn entry(names: &[&str], file_bytes: u64) -> CheckpointEntry {
        CheckpointEntry {
            step: 1,
            file: "ckpt-00000001.safetensors".into(),
            file_sha256: String::new(),
            file_bytes,
            chunks: vec![],
            digest: String::new(),
            tensors: names.iter().map(|n| (n.to_string(), String::new())).collect(),
        }
    }

    #[test]
    fn a_checkpoint_of_the_spec_fits_and_a_padded_one_is_refused_unread() {
        let l = layout();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.safetensors");
        let tensors =
            HostTensors(l.0.iter().map(|(n, s)| (n.clone(), (s.clone(), vec![1.5; 6]))).collect());
        let written = tensors.write(&path).unwrap();
        assert!(written.bytes <= l.max_file_bytes(), "{} > {}", written.bytes, l.max_file_bytes());
        assert_eq!(l.entry_problem(&entry(&["param.w", "opt.w.momentum"], written.bytes)), None);
        assert_eq!(l.tensors_problem("c", &tensors), None);

        let padded = entry(&["param.w", "opt.w.momentum", "param.pad"], written.bytes);
        let problem = l.entry_problem(&padded).unwrap();
        assert!(problem.contains("not in the spec's model and optimizer: param.pad"), "{problem}");
        let too_big = entry(&["param.w", "opt.w.momentum"], l.max_file_bytes() + 1);
        assert!(l.entry_problem(&too_big).unwrap().contains("more than"));
        let missing = entry(&["param.w"], 10);
        assert!(l.entry_problem(&missing).unwrap().contains("missing: opt.w.momentum"));

        let mut reshaped = tensors.clone();
        reshaped.0.insert("param.w".into(), (vec![3, 2], vec![1.5; 6]));
        assert!(l.tensors_problem("c", &reshaped).unwrap().contains("shapes differ"));
    }
}
