//! The machine as a queue: one computation at a time (the CPU or GPU is shared), with trainings
//! yielding to verifications and drills.
//!
//! A training takes hours; a verification has a commit window of minutes and a drill fewer. So a
//! verification or drill that needs the machine raises `pause`; the training stops at its next
//! checkpoint (losing no step: it resumes from there) and gives the machine up; the waiting work
//! runs in that gap, and the training takes the machine back when nothing urgent is waiting. The
//! lock is fair (first come, first served), so a training that queues again after pausing waits
//! behind the work it paused for.

use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc,
};

use tokio::sync::{Mutex, MutexGuard};

/// The machine's one computation slot.
#[derive(Default)]
pub struct Compute {
    slot: Mutex<()>,
    urgent_waiting: AtomicUsize,
    pause: Arc<AtomicBool>,
}

/// Holding the machine.
pub type Slot<'a> = MutexGuard<'a, ()>;

impl Compute {
    /// A free machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// The flag a training polls at each checkpoint: set while urgent work waits.
    pub fn pause_flag(&self) -> Arc<AtomicBool> {
        self.pause.clone()
    }

    /// Takes the machine for a training (waits behind everything queued before it).
    pub async fn for_training(&self) -> Slot<'_> {
        self.slot.lock().await
    }

    /// Takes the machine for work with a deadline: a running training is asked to pause at its
    /// next checkpoint.
    pub async fn urgently(&self) -> Slot<'_> {
        self.urgent_waiting.fetch_add(1, Ordering::AcqRel);
        self.pause.store(true, Ordering::Release);
        let slot = self.slot.lock().await;
        if self.urgent_waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.pause.store(false, Ordering::Release);
        }
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urgent_work_raises_the_pause_flag_until_it_holds_the_machine() {
        let compute = Arc::new(Compute::new());
        let training = compute.for_training().await;
        assert!(!compute.pause_flag().load(Ordering::Acquire));
        let c = compute.clone();
        let urgent = tokio::spawn(async move {
            let _slot = c.urgently().await;
            c.pause_flag().load(Ordering::Acquire)
        });
        // The training sees the flag while it still holds the machine, then gives it up.
        while !compute.pause_flag().load(Ordering::Acquire) {
            tokio::task::yield_now().await;
        }
        drop(training);
        assert!(!urgent.await.unwrap(), "the flag is down once the urgent work runs");
    }
}
