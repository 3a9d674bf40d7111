//! What every verification does besides replaying its segments, as a share of the job's training:
//! the full-pass rules evaluate up to [`RULE_CHECKPOINTS`] checkpoints on [`RULE_VALIDATION_SAMPLES`]
//! validation samples each, and the metrics check evaluates the final model on the whole validation
//! set. The chain pays it in every verifier's fee (the job market's `fees`), the worker's verifier
//! does at most this much (it evaluates the checkpoints it holds whole: C0, its segments' starts
//! and the last, at most [`RULE_CHECKPOINTS`]): one home for both numbers.

/// Checkpoints the full-pass rules evaluate, at most (the first, the last, and a grid drawn from the
/// challenge).
pub const RULE_CHECKPOINTS: u32 = 16;

/// Validation samples each checkpoint the rules read is evaluated on.
pub const RULE_VALIDATION_SAMPLES: u32 = 256;

/// Forward FLOPs every verification spends on the rules and the metrics, besides its replay: the
/// rules' [`RULE_CHECKPOINTS`] × [`RULE_VALIDATION_SAMPLES`] samples and the whole validation set,
/// at `forward_flops_per_sample` each (saturating). The chain counts it with the replay against
/// the round's time limit, so a huge validation set cannot run honest verifiers out of the commit
/// window.
pub fn evaluation_flops(forward_flops_per_sample: u128, validation_samples: u64) -> u128 {
    let evaluated =
        validation_samples as u128 + RULE_CHECKPOINTS as u128 * RULE_VALIDATION_SAMPLES as u128;
    forward_flops_per_sample.saturating_mul(evaluated)
}

/// Parts per billion of a job's training compute that one verification spends on the rules and the
/// metrics: forward passes over `validation_samples + RULE_CHECKPOINTS × RULE_VALIDATION_SAMPLES`
/// samples, against training's forward and backward passes (3 forward) over `train_samples` every
/// epoch. Rounded up; at most 10⁹ (a verification never costs more than training by this count).
pub fn overhead_ppb(train_samples: u64, epochs: u32, validation_samples: u64) -> u64 {
    let evaluated =
        validation_samples as u128 + RULE_CHECKPOINTS as u128 * RULE_VALIDATION_SAMPLES as u128;
    let trained = 3 * train_samples as u128 * epochs as u128;
    if trained == 0 {
        return 1_000_000_000;
    }
    (evaluated * 1_000_000_000).div_ceil(trained).min(1_000_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluation_counts_the_rules_samples_and_the_whole_validation_set() {
        assert_eq!(evaluation_flops(10, 0), 10 * 16 * 256);
        assert_eq!(evaluation_flops(10, 1_000), 10 * (1_000 + 16 * 256));
        assert_eq!(evaluation_flops(u128::MAX, 2), u128::MAX);
    }

    #[test]
    fn fashion_mnist_one_epoch_spends_eight_percent_on_rules_and_metrics() {
        // (10 000 + 16 × 256) / (3 × 60 000) = 0.078311…
        assert_eq!(overhead_ppb(60_000, 1, 10_000), 78_311_112);
        // Ten epochs: a tenth of it.
        assert_eq!(overhead_ppb(60_000, 10, 10_000), 7_831_112);
        assert_eq!(overhead_ppb(0, 1, 10), 1_000_000_000);
        assert_eq!(overhead_ppb(1, 1, u64::MAX), 1_000_000_000);
    }
}
