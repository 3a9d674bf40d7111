//! What a long computation takes from its caller instead of process-global state: the threads it
//! runs on ([`Threads`]), a way to stop it ([`Cancel`]) and where its progress goes ([`OnStep`]).
//!
//! The engine never reads or sets `RAYON_NUM_THREADS`: a command line builds the pool its
//! `--threads` asks for, a daemon builds one for all its computations, and both pass it in.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

use crate::error::{Error, Result};

/// The CPU threads a computation runs on: a rayon pool the caller owns. candle's CPU kernels (and
/// the engine's own parallel loops) spawn their work onto the pool they are called from, so a
/// computation started through [`Threads::install`] uses these threads and no others.
#[derive(Clone, Debug)]
pub struct Threads(Arc<rayon::ThreadPool>);

impl Threads {
    /// A pool of `count` threads; `0` means one per available core.
    pub fn new(count: usize) -> Result<Self> {
        let count = if count == 0 { available_cores() } else { count };
        rayon::ThreadPoolBuilder::new()
            .num_threads(count)
            .thread_name(|i| format!("ergon-compute-{i}"))
            .build()
            .map(|pool| Self(Arc::new(pool)))
            .map_err(|e| Error::Threads(e.to_string()))
    }

    /// How many threads the pool has.
    pub fn count(&self) -> usize {
        self.0.current_num_threads()
    }

    /// Runs `work` on the pool, blocking the calling thread until it returns.
    pub fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        self.0.install(work)
    }
}

/// Runs `work` on `threads` when given, else on the calling thread's current pool.
pub(crate) fn on<R: Send>(threads: Option<&Threads>, work: impl FnOnce() -> R + Send) -> R {
    match threads {
        Some(t) => t.install(work),
        None => work(),
    }
}

/// The number of cores this process may use.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// A request to stop, shared between the one who asks and the computation that checks it at its
/// safe points: a training at its next checkpoint (it can resume from there), a verification
/// between segments, a drill between products.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A token nobody has raised yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the computations holding this token to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Withdraws the request (the same token can ask again later).
    pub fn reset(&self) {
        self.0.store(false, Ordering::Release);
    }

    /// Whether stopping was asked.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// `Err(Error::Cancelled)` once stopping was asked.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Where a training is, reported after every optimizer step.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// Steps done so far (the one just taken included).
    pub done: u64,
    /// Steps of the whole training.
    pub total: u64,
    /// The loss of the step just taken.
    pub loss: f32,
    /// Steps done by this call (a resumed training starts counting again at zero).
    pub this_run: u64,
    /// Seconds this call has been training.
    pub seconds: f64,
}

/// A callback told about every step: a progress bar, a daemon's metrics. It runs on the training
/// thread, so it must be quick.
pub type OnStep = Arc<dyn Fn(&Step) + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_runs_work_on_its_own_threads() {
        let threads = Threads::new(3).unwrap();
        assert_eq!(threads.count(), 3);
        assert_eq!(threads.install(rayon::current_num_threads), 3);
        let name = threads.install(|| std::thread::current().name().map(str::to_string));
        assert!(name.unwrap().starts_with("ergon-compute-"));
    }

    #[test]
    fn cancel_is_shared_and_can_be_withdrawn() {
        let token = Cancel::new();
        let held = token.clone();
        assert!(held.check().is_ok());
        token.cancel();
        assert!(matches!(held.check(), Err(Error::Cancelled)));
        token.reset();
        assert!(!held.is_cancelled());
    }
}
