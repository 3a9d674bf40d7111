//! The engine's error type: every failure names what went wrong and where, never a panic.

use std::path::PathBuf;

/// Anything that can stop a training, loading or inspection.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The job spec is invalid.
    #[error("invalid job spec: {0}")]
    Spec(#[from] ergon_job_spec::SpecError),
    /// The job spec file is not valid JSON for a spec.
    #[error("cannot parse job spec {path}: {source}")]
    SpecJson {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A file could not be read or written (missing file, permission, full disk, …).
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("reading", "writing", …).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A data file could not be downloaded.
    #[error("downloading {url}: {reason}")]
    Download {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A committed file set is not served as committed, and its chunk lists locate where
    /// (`ergon_job_spec::chunks`): file `file` of the set, chunk `chunk` — or `None` when the chunk
    /// lists themselves are missing or do not give the root. What a verifier names when it abstains.
    #[error("the {what} is not served as committed{}: {reason}", match .gap {
        Some((file, chunk)) => format!(" (file {file}, chunk {chunk})"),
        None => String::new(),
    })]
    DataGap {
        /// Which set.
        what: &'static str,
        /// File and chunk of the first chunk that could not be fetched or differs.
        gap: Option<(u8, u32)>,
        /// Why.
        reason: String,
    },
    /// The data's content root differs from the one committed in the spec.
    #[error(
        "content root mismatch for {what}: spec commits to {expected}, data hashes to {actual}"
    )]
    ContentRoot {
        /// Which dataset.
        what: &'static str,
        /// The root in the spec.
        expected: String,
        /// The root of the data found.
        actual: String,
    },
    /// A data file is malformed or does not match the spec's format.
    #[error("bad data in {file}: {reason}")]
    Data {
        /// The file (URI).
        file: String,
        /// Why.
        reason: String,
    },
    /// A bundle is incomplete, corrupted, or does not match its spec.
    #[error("bad bundle at {path}: {reason}")]
    Bundle {
        /// The bundle directory or file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A drilling task file is invalid.
    #[error("bad drilling task {path}: {reason}")]
    Task {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Training diverged: the loss of optimizer step `step`, or the state after `step` steps, is
    /// not finite ([`crate::trajectory::ensure_finite_state`]).
    #[error("training diverged at step {step}: a non-finite value ({loss})")]
    Diverged {
        /// The optimizer step.
        step: u64,
        /// The non-finite loss or state value.
        loss: f32,
    },
    /// The job is pinned to kernels this worker does not run: it cannot replay the job's bundles
    /// exactly, so it gives no verdict.
    #[error(
        "the job is pinned to kernels revision {job}, this worker runs revision {ours}: \
         only a worker of revision {job} replays its bundles exactly"
    )]
    OtherKernels {
        /// The job's revision.
        job: u32,
        /// This worker's ([`crate::KERNELS_REVISION`]).
        ours: u32,
    },
    /// A long computation stopped because its caller asked it to ([`crate::Cancel`]).
    #[error("cancelled")]
    Cancelled,
    /// A verification could not load the job's data (the owner's datasets: not served, not
    /// matching their content roots, malformed). Not the trainer's fault: a verifier abstains on
    /// chain rather than failing the bundle.
    #[error("the job's data cannot be loaded: {0}")]
    JobData(Box<Error>),
    /// The thread pool could not be built.
    #[error("cannot start the compute threads: {0}")]
    Threads(String),
    /// The GPU asked for cannot be used (no CUDA build, no driver, no such device).
    #[error("cannot use GPU {ordinal}: {reason}")]
    Gpu {
        /// The CUDA device ordinal asked for.
        ordinal: usize,
        /// Why not.
        reason: String,
    },
    /// An error inside candle (shapes, devices, CUDA).
    #[error("tensor computation: {0}")]
    Candle(#[from] candle_core::Error),
}

/// Result with the worker's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches the action and path to an I/O error.
pub fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { action, path, source }
}

impl Error {
    /// The chunk of the job's data that could not be fetched or differs, when this error (or the
    /// [`Error::JobData`] it wraps) located one: what a verifier names when it abstains
    /// (`jobMarket.abstain`). `None` when nothing was located (the chunk lists themselves, or a
    /// set the error does not name).
    pub fn data_gap(&self) -> Option<ergon_job_spec::DataGap> {
        match self {
            Error::JobData(inner) => inner.data_gap(),
            Error::DataGap { what, gap: Some((file, chunk)), .. } => {
                let set = crate::data::SET_NAMES.iter().position(|name| name == what)?;
                Some(ergon_job_spec::DataGap { set: set as u8, file: *file, chunk: *chunk })
            }
            _ => None,
        }
    }
}
