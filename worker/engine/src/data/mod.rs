//! Training and validation data: fetched from a path or an http(s) URL, checked against the content root
//! committed in the spec *before* anything is parsed, then decoded into an in-memory [`Samples`] set.

mod committed;
mod fetch;
mod formats;
pub mod tokenize;

pub use fetch::{
    bundle_time_limit, content_root, downloaded_bytes, fetch, fetch_at_most, fetch_public_only,
    fetch_range, fetch_within, is_http, MAX_FILE_BYTES, MIN_BUNDLE_BYTES_PER_SECOND,
};

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

pub use committed::{check_served, fetch_committed, write_chunk_list, Served, SET_NAMES};

use ergon_job_spec::{DataFormat, Dataset};

use crate::error::{Error, Result};

/// The inputs of a dataset, per its format.
#[derive(Clone, Debug)]
pub enum Inputs {
    /// Float features, `sample_len` per sample, row-major.
    Float(Vec<f32>),
    /// Token ids, `sample_len` per sample.
    Tokens(Vec<u32>),
}

/// A decoded dataset: `len` samples of `sample_len` inputs each, and their targets.
#[derive(Clone, Debug)]
pub struct Samples {
    /// Shape of one input sample (`[1, H, W]`, `[features]` or `[seq_len]`).
    pub sample_shape: Vec<usize>,
    /// The inputs.
    pub inputs: Inputs,
    /// Targets: one class label per sample, or `seq_len` next-byte targets per sample for text.
    pub targets: Vec<u32>,
    /// Targets per sample (1, or `seq_len` for text).
    pub targets_per_sample: usize,
    /// Number of samples.
    pub len: usize,
}

impl Samples {
    /// Number of input values per sample.
    pub fn sample_len(&self) -> usize {
        self.sample_shape.iter().product()
    }

    /// Bytes its inputs and targets take in memory.
    pub fn bytes(&self) -> u64 {
        let inputs = match &self.inputs {
            Inputs::Float(v) => v.len(),
            Inputs::Tokens(v) => v.len(),
        };
        ((inputs + self.targets.len()) * 4) as u64
    }
}

/// A job's training and validation sets, loaded once each (a spec that validates on its training data
/// names the same dataset twice, and it is fetched, hashed and decoded once), and its initial
/// weights when it fine-tunes.
pub struct JobData {
    train: Arc<Samples>,
    validation: Option<Arc<Samples>>,
    /// The initial weights, when the spec names a file ([`crate::weights::load`]).
    weights: Option<Arc<crate::weights::InitialWeights>>,
}

impl JobData {
    /// Loads both sets of `spec` (see [`load`]).
    pub fn load(spec: &ergon_job_spec::JobSpec) -> Result<JobData> {
        Self::load_with(spec, None)
    }

    /// Loads both sets of `spec`, taking those `cache` holds from it and keeping the others there.
    pub fn load_with(
        spec: &ergon_job_spec::JobSpec,
        cache: Option<&DatasetCache>,
    ) -> Result<JobData> {
        let get = |d: &Dataset, what| match cache {
            Some(c) => c.get_or_load(d, what),
            None => load(d, what).map(Arc::new),
        };
        let train = get(&spec.train, SET_NAMES[0])?;
        let validation = if spec.validation == spec.train {
            None
        } else {
            Some(get(&spec.validation, SET_NAMES[1])?)
        };
        let weights = crate::weights::load(spec)?.map(Arc::new);
        Ok(JobData { train, validation, weights })
    }

    /// The initial weights read from the spec's file, `None` when C0 is drawn from the seed.
    pub fn weights(&self) -> Option<&crate::weights::InitialWeights> {
        self.weights.as_deref()
    }

    /// The training set.
    pub fn train(&self) -> &Samples {
        &self.train
    }

    /// The validation set.
    pub fn validation(&self) -> &Samples {
        self.validation.as_deref().unwrap_or(&self.train)
    }
}

/// Decoded datasets kept between jobs, keyed by what decides their content: the content root (the
/// files' bytes, checked when first loaded), the format and the sample count; where the files were
/// fetched from does not matter. A verifier that checks many jobs on the same data (a daemon) loads
/// each dataset once instead of fetching, hashing and decoding it for every job.
///
/// The cache holds at most its budget of decoded bytes: past it, the datasets used least recently
/// are dropped (a job still using one keeps its own reference, so nothing is freed under it).
pub struct DatasetCache {
    budget_bytes: u64,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    sets: BTreeMap<DatasetKey, Entry>,
    /// Incremented on every use: an entry's `used` orders the evictions.
    clock: u64,
}

struct Entry {
    samples: Arc<Samples>,
    bytes: u64,
    used: u64,
}

/// What decides a decoded dataset: content root, format (as text) and sample count.
type DatasetKey = ([u8; 32], String, u64);

impl Default for DatasetCache {
    fn default() -> Self {
        Self::with_budget(u64::MAX)
    }
}

impl DatasetCache {
    /// An empty cache without a size limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache that keeps at most `budget_bytes` of decoded data (the last dataset loaded
    /// is kept even when it alone is larger).
    pub fn with_budget(budget_bytes: u64) -> Self {
        Self { budget_bytes, state: Mutex::new(CacheState::default()) }
    }

    /// `data`'s samples: from the cache, or loaded ([`load`], content root checked) and kept.
    pub fn get_or_load(&self, data: &Dataset, what: &'static str) -> Result<Arc<Samples>> {
        let key = (data.content_root.0, format!("{:?}", data.format), data.samples);
        if let Ok(mut state) = self.state.lock() {
            state.clock += 1;
            let now = state.clock;
            if let Some(hit) = state.sets.get_mut(&key) {
                hit.used = now;
                return Ok(hit.samples.clone());
            }
        }
        // Loaded outside the lock: another job may load another dataset meanwhile.
        let loaded = Arc::new(load(data, what)?);
        if let Ok(mut state) = self.state.lock() {
            state.clock += 1;
            let entry = Entry { samples: loaded.clone(), bytes: loaded.bytes(), used: state.clock };
            state.sets.insert(key.clone(), entry);
            // Least recently used first, never the one just loaded.
            while state.sets.values().map(|e| e.bytes).sum::<u64>() > self.budget_bytes {
                let oldest = state
                    .sets
                    .iter()
                    .filter(|(k, _)| **k != key)
                    .min_by_key(|(_, e)| e.used)
                    .map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => state.sets.remove(&k),
                    None => break,
                };
            }
        }
        Ok(loaded)
    }

    /// Datasets held.
    pub fn len(&self) -> usize {
        self.state.lock().map(|s| s.sets.len()).unwrap_or_default()
    }

    /// Whether it holds no dataset.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decoded bytes held.
    pub fn bytes(&self) -> u64 {
        self.state.lock().map(|s| s.sets.values().map(|e| e.bytes).sum()).unwrap_or_default()
    }
}

/// Fetches `data`'s files, checks their content root and decodes them. `what` names the set in errors.
pub fn load(data: &Dataset, what: &'static str) -> Result<Samples> {
    let files = fetch_committed(data.files.as_slice(), &data.content_root, what)?;
    let samples = match data.format {
        DataFormat::Idx { height, width, classes } => {
            formats::idx(&files[0], &files[1], height as usize, width as usize, classes)?
        }
        DataFormat::Csv { features, classes } => {
            formats::csv(&files[0], features as usize, classes)?
        }
        DataFormat::Text { seq_len } => formats::text(&files[0], seq_len as usize),
        DataFormat::Tokens { width, vocab_size, seq_len } => {
            formats::tokens(&files, width, vocab_size, seq_len as usize)?
        }
    };
    if samples.len as u64 != data.samples {
        return Err(Error::Data {
            file: files[0].0.clone(),
            reason: format!(
                "the spec says {} samples, the data holds {}",
                data.samples, samples.len
            ),
        });
    }
    Ok(samples)
}

/// Lowercase hex with `0x` (the manifest's encoding of hashes).
pub use ergon_bundle::to_hex as hex;
