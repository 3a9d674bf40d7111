//! The rules' coordinate sample: what the distance rules read of a checkpoint they do not hold
//! whole.
//!
//! The full-pass rules compare distances between checkpoints (continuity, the distance to the final
//! model, the final model against fresh initializations). Reading every rule checkpoint's weights
//! cost a vote 16 · W bytes (8 GB at GPT-2 small, half of all it read). A distance is estimated as
//! well from a sample of coordinates, so the rules read the same [`RULE_CHUNKS`] chunks of every
//! checkpoint file — 1 MiB each, checked against the chunk list the manifest commits to — and
//! compare the weights inside them. Which chunks is drawn from the rules' seed (the challenge and
//! the drawn segments: unknown when the bundle was committed), among those holding weights.
//!
//! A chunk is a part of the file, not of the tensors the replay checks; every checkpoint the
//! verifier knows whole (read, or reproduced by its replay) must be its tensors' canonical file
//! ([`crate::bundle::not_canonical`]), so a file whose chunks say something else than its tensors
//! fails the segment next to it. Every file has the layout of the last checkpoint's (read whole):
//! the same tensors, shapes and length.

use std::ops::Range;

use super::full_pass::Weights;
use crate::bundle::{ranges::TensorMap, HostTensors};

/// Chunks of each checkpoint file the rules read (1 MiB each): 16 MiB of a GPT-2-small
/// checkpoint's 498 MB of weights, spread over up to 16 tensors.
pub const RULE_CHUNKS: usize = 16;

/// One run of weights inside a sampled chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Piece {
    /// Which of the sampled chunks ([`CoordinateSample::chunks`]) holds it.
    chunk: usize,
    /// The tensor (`param.<name>`).
    tensor: String,
    /// Its values, by index in the flattened tensor.
    values: Range<usize>,
    /// Its bytes within the chunk.
    bytes: Range<usize>,
}

/// The coordinates the rules compare: every weight inside [`RULE_CHUNKS`] chunks of the file
/// layout, in a fixed order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoordinateSample {
    /// The chunk indices read of each file, ascending.
    pub chunks: Vec<u64>,
    pieces: Vec<Piece>,
    /// Whether the chunks hold every weight (a model of ≤ [`RULE_CHUNKS`] MiB of weights).
    pub complete: bool,
    /// The length of every file of the layout.
    pub file_bytes: u64,
}

impl CoordinateSample {
    /// Draws the sample for files laid out as `map` (`file_bytes` long) from `seed`: up to
    /// [`RULE_CHUNKS`] of the chunks that hold weights (`param.*`), uniformly, without replacement.
    pub fn draw(map: &TensorMap, file_bytes: u64, seed: &[u8; 32]) -> Self {
        let size = ergon_bundle::CHUNK_SIZE;
        let weights: Vec<(&String, u64, u64)> = map
            .0
            .iter()
            .filter(|(name, _)| name.starts_with("param."))
            .map(|(name, (_, start, end))| (name, *start, (*end).min(file_bytes)))
            .filter(|(_, start, end)| start < end)
            .collect();
        let mut holding: Vec<u64> =
            weights.iter().flat_map(|(_, start, end)| (start / size)..end.div_ceil(size)).collect();
        holding.sort_unstable();
        holding.dedup();
        let mut stream = ergon_protocol::draw::Stream::new(seed, b"rule-chunks");
        let n = u32::try_from(holding.len()).unwrap_or(u32::MAX);
        let picked = ergon_protocol::draw::sample(&mut stream, n, RULE_CHUNKS as u32);
        let chunks: Vec<u64> = picked.iter().map(|i| holding[*i as usize]).collect();
        let mut pieces = Vec::new();
        for (k, &c) in chunks.iter().enumerate() {
            let (a, b) = (c * size, ((c + 1) * size).min(file_bytes));
            for (name, start, end) in &weights {
                let (from, to) = (a.max(*start), b.min(*end));
                if from >= to {
                    continue;
                }
                // Whole f32 values only (tensors start 4-aligned; a chunk edge cuts none).
                let first = (from - start).div_ceil(4);
                let last = (to - start) / 4;
                if first >= last {
                    continue;
                }
                pieces.push(Piece {
                    chunk: k,
                    tensor: (*name).clone(),
                    values: first as usize..last as usize,
                    bytes: (start + 4 * first - a) as usize..(start + 4 * last - a) as usize,
                });
            }
        }
        CoordinateSample { complete: chunks.len() == holding.len(), chunks, pieces, file_bytes }
    }

    /// The sampled coordinates of a checkpoint's weights held whole (zeros where a tensor is
    /// missing or shorter: the weights of a file that is not the layout's).
    pub fn of_weights(&self, weights: &Weights) -> Vec<f32> {
        self.gather(|name| weights.get(name).map(Vec::as_slice))
    }

    /// [`CoordinateSample::of_weights`] of a checkpoint's tensors (weights and optimizer state).
    pub fn of_host(&self, host: &HostTensors) -> Vec<f32> {
        self.gather(|name| host.0.get(name).map(|(_, values)| values.as_slice()))
    }

    fn gather<'a>(&self, tensor: impl Fn(&str) -> Option<&'a [f32]>) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.len());
        for p in &self.pieces {
            match tensor(&p.tensor).and_then(|v| v.get(p.values.clone())) {
                Some(values) => out.extend_from_slice(values),
                None => out.extend(std::iter::repeat_n(0.0, p.values.len())),
            }
        }
        out
    }

    /// The sampled coordinates of a checkpoint read as its [`CoordinateSample::chunks`] (in that
    /// order, each already checked against its hash).
    pub fn of_chunks(&self, chunks: &[Vec<u8>]) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.len());
        for p in &self.pieces {
            let bytes = chunks.get(p.chunk).and_then(|c| c.get(p.bytes.clone())).unwrap_or(&[]);
            out.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
            // A short chunk (a file shorter than the layout's) leaves zeros, never a shift.
            out.extend(std::iter::repeat_n(0.0, p.values.len().saturating_sub(bytes.len() / 4)));
        }
        out
    }

    /// Number of coordinates.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.values.len()).sum()
    }

    /// Whether the sample holds no coordinate.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{ranges, CheckpointEntry};
    use std::collections::BTreeMap;

    /// A checkpoint of `weights` values of weights (in two tensors) and as much optimizer state,
    /// written to `dir`; its manifest entry and tensors.
    fn written(dir: &std::path::Path, weights: usize) -> (String, CheckpointEntry, HostTensors) {
        let half = weights / 2;
        let host = HostTensors(BTreeMap::from([
            ("opt.a.m".to_string(), (vec![half], vec![-1.0; half])),
            ("opt.b.m".to_string(), (vec![weights - half], vec![-2.0; weights - half])),
            ("param.a".to_string(), (vec![half], (0..half).map(|i| i as f32).collect())),
            (
                "param.b".to_string(),
                (vec![weights - half], (0..weights - half).map(|i| 0.5 + i as f32).collect()),
            ),
        ]));
        let path = dir.join("c.safetensors");
        let entry = crate::bundle::written_entry(dir, "c.safetensors", 1, &host);
        (path.to_string_lossy().into_owned(), entry, host)
    }

    fn layout(host: &HostTensors) -> crate::bundle::Layout {
        crate::bundle::Layout(host.0.iter().map(|(n, (s, _))| (n.clone(), s.clone())).collect())
    }

    fn weights(host: &HostTensors) -> Weights {
        host.0
            .iter()
            .filter(|(n, _)| n.starts_with("param."))
            .map(|(n, (_, v))| (n.clone(), v.clone()))
            .collect()
    }

    /// A checkpoint of 48 MiB of weights: the sample reads 16 chunks of it (16 MiB, none of the
    /// optimizer's 48 MiB beyond chunks shared with weights), and the values read by chunks are
    /// the values of the tensors at the same coordinates.
    #[test]
    fn reads_sixteen_chunks_and_gives_the_tensors_values_at_the_same_coordinates() {
        let dir = tempfile::tempdir().unwrap();
        let (uri, entry, host) = written(dir.path(), 12 << 20);
        let (map, header) = ranges::read_header(&uri, &entry, &layout(&host)).unwrap();
        let sample = CoordinateSample::draw(&map, entry.file_bytes, &[7; 32]);
        assert_eq!(sample.chunks.len(), RULE_CHUNKS);
        assert!(!sample.complete);
        let (chunks, read) = ranges::read_chunks(&uri, &entry, &sample.chunks).unwrap();
        assert_eq!(read, (RULE_CHUNKS as u64) << 20);
        assert!(header + read < entry.file_bytes / 5, "{read} of {}", entry.file_bytes);
        let by_chunks = sample.of_chunks(&chunks);
        assert_eq!(by_chunks.len(), sample.len());
        assert!(sample.len() > (RULE_CHUNKS - 1) << 18, "{} values", sample.len());
        assert_eq!(by_chunks, sample.of_weights(&weights(&host)));
        // Another seed reads other chunks.
        assert_ne!(CoordinateSample::draw(&map, entry.file_bytes, &[8; 32]).chunks, sample.chunks);
        // A chunk that is not the listed one fails, naming it.
        let mut lying = entry.clone();
        lying.chunks[sample.chunks[0] as usize] = crate::data::hex(&[0; 32]);
        let err = ranges::read_chunks(&uri, &lying, &sample.chunks).unwrap_err().to_string();
        assert!(err.contains("does not match its hash"), "{err}");
    }

    /// A small model's weights lie in fewer chunks than the rules read: the sample is all of them.
    #[test]
    fn a_small_model_is_sampled_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (uri, entry, host) = written(dir.path(), 1000);
        let (map, _) = ranges::read_header(&uri, &entry, &layout(&host)).unwrap();
        let sample = CoordinateSample::draw(&map, entry.file_bytes, &[7; 32]);
        assert!(sample.complete);
        assert_eq!(sample.len(), 1000);
        let (chunks, _) = ranges::read_chunks(&uri, &entry, &sample.chunks).unwrap();
        let mut all: Vec<f32> = weights(&host).into_values().flatten().collect();
        let mut read = sample.of_chunks(&chunks);
        all.sort_by(f32::total_cmp);
        read.sort_by(f32::total_cmp);
        assert_eq!(read, all);
    }
}
