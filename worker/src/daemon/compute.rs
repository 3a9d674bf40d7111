//! The machine as a queue: one computation at a time (the CPU or GPU is shared), with trainings
//! yielding to verifications and drills, all on one thread pool.
//!
//! A training takes hours; a verification has a commit window of minutes and a drill fewer. So a
//! verification or drill that needs the machine raises `pause`; the training stops at its next
//! checkpoint (losing no step: it resumes from there) and gives the machine up; the waiting work
//! runs in that gap, and the training takes the machine back when nothing urgent is waiting. The
//! lock is fair (first come, first served), so a training that queues again after pausing waits
//! behind the work it paused for.
//!
//! At shutdown, [`Compute::shut_down`] raises both tokens for good: a training stops at its next
//! checkpoint, a verification or drill at its next safe point, and nothing takes the machine again.

use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::Device;
use ergon_engine::{Cancel, Threads};
use tokio::sync::{Mutex, MutexGuard};

/// The machine's one computation slot and the threads every computation runs on.
pub struct Compute {
    slot: Mutex<()>,
    urgent_waiting: AtomicUsize,
    pause: Cancel,
    shutdown: Cancel,
    threads: Threads,
    device: Device,
}

/// Holding the machine.
pub type Slot<'a> = MutexGuard<'a, ()>;

impl Compute {
    /// A free machine computing on `threads`.
    pub fn new(threads: Threads) -> Self {
        Self {
            slot: Mutex::new(()),
            urgent_waiting: AtomicUsize::new(0),
            pause: Cancel::new(),
            shutdown: Cancel::new(),
            threads,
            device: Device::Cpu,
        }
    }

    /// The same machine training and verifying on `device`.
    pub fn on(self, device: Device) -> Self {
        Self { device, ..self }
    }

    /// The device trainings and verifications run on.
    pub fn device(&self) -> Device {
        self.device.clone()
    }

    /// The token a training checks at each checkpoint: raised while urgent work waits, and for
    /// good at shutdown.
    pub fn pause_token(&self) -> Cancel {
        self.pause.clone()
    }

    /// The token a verification or drill checks at its safe points: raised at shutdown.
    pub fn shutdown_token(&self) -> Cancel {
        self.shutdown.clone()
    }

    /// The thread pool computations run on.
    pub fn threads(&self) -> Threads {
        self.threads.clone()
    }

    /// Asks every computation to stop at its next safe point, and keeps the tokens raised.
    pub fn shut_down(&self) {
        self.shutdown.cancel();
        self.pause.cancel();
    }

    /// Takes the machine for a training (waits behind everything queued before it).
    pub async fn for_training(&self) -> Slot<'_> {
        self.slot.lock().await
    }

    /// Takes the machine for work with a deadline: a running training is asked to pause at its
    /// next checkpoint.
    pub async fn urgently(&self) -> Slot<'_> {
        self.urgent_waiting.fetch_add(1, Ordering::AcqRel);
        self.pause.cancel();
        let slot = self.slot.lock().await;
        if self.urgent_waiting.fetch_sub(1, Ordering::AcqRel) == 1 && !self.shutdown.is_cancelled()
        {
            self.pause.reset();
        }
        slot
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn compute() -> Arc<Compute> {
        Arc::new(Compute::new(Threads::new(1).unwrap()))
    }

    #[tokio::test]
    async fn urgent_work_raises_the_pause_token_until_it_holds_the_machine() {
        let compute = compute();
        let training = compute.for_training().await;
        assert!(!compute.pause_token().is_cancelled());
        let c = compute.clone();
        let urgent = tokio::spawn(async move {
            let _slot = c.urgently().await;
            c.pause_token().is_cancelled()
        });
        // The training sees the token while it still holds the machine, then gives it up.
        while !compute.pause_token().is_cancelled() {
            tokio::task::yield_now().await;
        }
        drop(training);
        assert!(!urgent.await.unwrap(), "the token is down once the urgent work runs");
    }

    #[tokio::test]
    async fn shutdown_keeps_both_tokens_raised() {
        let compute = compute();
        compute.shut_down();
        drop(compute.urgently().await);
        assert!(compute.pause_token().is_cancelled(), "a training would start again");
        assert!(compute.shutdown_token().is_cancelled());
    }
}
