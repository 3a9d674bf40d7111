//! The learning-rate factor of a [`Schedule`] at each optimizer step.
//!
//! The chain only checks that a schedule fits the run ([`check`]); the worker computes the factor
//! ([`factor`], `std`) from integer step counts and ppb with `libm`'s cosine, which is the same
//! Rust code on every machine — the trainer and every verifier derive the same bits.

use crate::{Ppb, Schedule, SpecError};

/// `Ok` if `schedule` fits a run of `total_steps` optimizer steps: warmup and decay together no
/// longer than the run, ratios at most 1, a cosine with at least one step after the warmup.
pub fn check(schedule: &Schedule, total_steps: u64) -> Result<(), SpecError> {
    let at_most_one = |r: Ppb| r.0 <= Ppb::ONE.0;
    let fits = match *schedule {
        Schedule::Constant => true,
        Schedule::WarmupCosine { warmup_steps, min_ratio } => {
            at_most_one(min_ratio) && (warmup_steps as u64) < total_steps
        }
        Schedule::WarmupStableDecay { warmup_steps, decay_steps, min_ratio } => {
            at_most_one(min_ratio) && warmup_steps as u64 + decay_steps as u64 <= total_steps
        }
    };
    fits.then_some(()).ok_or(SpecError::ScheduleTooLong)
}

/// The factor on the peak learning rate at 0-based optimizer step `step` of `total_steps`.
#[cfg(feature = "std")]
pub fn factor(schedule: &Schedule, step: u64, total_steps: u64) -> f64 {
    let warmup = |w: u32| (step < w as u64).then(|| (step + 1) as f64 / w as f64);
    match *schedule {
        Schedule::Constant => 1.0,
        Schedule::WarmupCosine { warmup_steps, min_ratio } => {
            warmup(warmup_steps).unwrap_or_else(|| {
                let (done, span) = (step - warmup_steps as u64, total_steps - warmup_steps as u64);
                // 0 at the first step after the warmup, 1 at the last step of the run.
                let progress = if span <= 1 { 1.0 } else { done as f64 / (span - 1) as f64 };
                let min = min_ratio.to_f64();
                min + (1.0 - min)
                    * 0.5
                    * (1.0 + libm::cos(core::f64::consts::PI * progress.min(1.0)))
            })
        }
        Schedule::WarmupStableDecay { warmup_steps, decay_steps, min_ratio } => {
            warmup(warmup_steps).unwrap_or_else(|| {
                let decay_start = total_steps.saturating_sub(decay_steps as u64);
                if step < decay_start {
                    return 1.0;
                }
                // 1/decay after the first decay step, 1 at the last step.
                let progress = ((step - decay_start + 1) as f64 / decay_steps as f64).min(1.0);
                1.0 - (1.0 - min_ratio.to_f64()) * progress
            })
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn constant_is_one_everywhere() {
        assert!((0..10).all(|s| factor(&Schedule::Constant, s, 10) == 1.0));
    }

    #[test]
    fn cosine_warms_up_then_decays_to_the_floor_at_the_last_step() {
        let s = Schedule::WarmupCosine { warmup_steps: 4, min_ratio: Ppb(100_000_000) };
        let f: Vec<f64> = (0..14).map(|i| factor(&s, i, 14)).collect();
        assert_eq!(&f[..4], &[0.25, 0.5, 0.75, 1.0]);
        assert_eq!(f[4], 1.0, "the first step after the warmup is the peak");
        assert!((f[13] - 0.1).abs() < 1e-12, "the last step reaches the floor: {}", f[13]);
        assert!(f[4..].windows(2).all(|w| w[1] < w[0]), "decays monotonically: {f:?}");
        assert!(
            (f[9] - (0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * 5.0 / 9.0).cos()))).abs()
                < 1e-15
        );
    }

    #[test]
    fn warmup_stable_decay_holds_the_peak_then_decays_linearly() {
        let s = Schedule::WarmupStableDecay { warmup_steps: 2, decay_steps: 4, min_ratio: Ppb(0) };
        let f: Vec<f64> = (0..10).map(|i| factor(&s, i, 10)).collect();
        assert_eq!(f, vec![0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0]);
    }

    #[test]
    fn a_schedule_longer_than_the_run_is_refused() {
        let cos = |w| Schedule::WarmupCosine { warmup_steps: w, min_ratio: Ppb(0) };
        assert_eq!(check(&cos(9), 10), Ok(()));
        assert_eq!(check(&cos(10), 10), Err(SpecError::ScheduleTooLong));
        let wsd = |w, d| Schedule::WarmupStableDecay {
            warmup_steps: w,
            decay_steps: d,
            min_ratio: Ppb(0),
        };
        assert_eq!(check(&wsd(4, 6), 10), Ok(()));
        assert_eq!(check(&wsd(5, 6), 10), Err(SpecError::ScheduleTooLong));
        let above_one = Schedule::WarmupCosine { warmup_steps: 1, min_ratio: Ppb(1_000_000_001) };
        assert_eq!(check(&above_one, 10), Err(SpecError::ScheduleTooLong));
    }
}
