//! 2. **manifest**: the manifest describes this spec (spec hash, batch size, step and checkpoint
//!    schedule), the prescribed seed (mandatory: from the job id and the trainer's account bytes),
//!    f32, the kernels revision the job pins and a device of the class declared on chain; its
//!    `final_train_loss` is the one its losses give,
//!    and, given the chain's commitment, its metrics and divergence are the committed ones.

use ergon_job_spec::{JobSpec, SpecSummary};

use super::super::{Report, VerifyOptions};
use crate::{bundle, bundle::Manifest, data::hex, rng::Seed, trajectory};

/// The prescribed seed, when the manifest describes this job and every check so far passed; `None`
/// otherwise (nothing after is meaningful on a bundle that is not what it claims to be).
pub(in crate::verify) fn check(
    spec: &JobSpec,
    summary: &SpecSummary,
    opts: &VerifyOptions,
    m: &Manifest,
    report: &mut Report,
) -> Option<Seed> {
    let mut schedule = trajectory::checkpoint_steps(spec, summary);
    let mut trained_steps = summary.total_steps;
    let steps: Vec<u64> = m.checkpoints.iter().map(|c| c.step).collect();
    let seed = bundle::parse_hash(&m.seed);
    let mut mismatches = Vec::new();
    if m.spec_hash != hex(&trajectory::spec_hash(spec)) {
        mismatches.push("spec hash".to_string());
    }
    if m.environment.kernels != opts.kernels {
        mismatches.push(format!(
            "kernels revision {} where the job pins {}",
            m.environment.kernels, opts.kernels
        ));
    }
    // The class the trainer declared on chain drew the verifiers: a CPU's bundle declared a GPU's
    // would have GPU verifiers replay it on their CPUs, slower than the capacity they declared, and
    // run them out of their window. It fails here, before any replay.
    if let Some(class) = opts.expected_class {
        if !crate::device::manifest_device_is_of(&m.environment.device, class) {
            mismatches.push(format!(
                "device {:?} where the class declared on chain is {class:?}",
                m.environment.device
            ));
        }
    }
    // A diverged bundle holds the checkpoints and losses before its divergence.
    if let Some(step) = m.diverged_at {
        if step > summary.total_steps {
            mismatches.push(format!("diverged at step {step}, after the last"));
        }
        schedule.truncate(spec.checkpoints_before_divergence(step) as usize);
        trained_steps = step.min(summary.total_steps);
    }
    if let Some(expected) = opts.expected_divergence {
        if m.diverged_at != expected {
            mismatches.push(format!(
                "divergence {:?} where the commitment says {expected:?}",
                m.diverged_at
            ));
        }
    }
    if m.batch_size != spec.batch_size
        || m.checkpoint_interval != spec.checkpoint_interval
        || m.steps_per_epoch != summary.steps_per_epoch
        || m.total_steps != summary.total_steps
        || m.losses.len() as u64 != trained_steps
    {
        mismatches.push("step schedule".into());
    }
    if steps != schedule {
        mismatches.push(format!("checkpoint steps {steps:?}"));
    }
    // A job trains in its spec's precision on every device (f32: a GPU with TF32 off): a bundle of
    // another precision was not computed as the job asks, and the replay tolerances do not cover it.
    if m.environment.precision != spec.precision.name() {
        mismatches.push(format!(
            "precision {:?} (the job trains in {})",
            m.environment.precision,
            spec.precision.name()
        ));
    }
    // The claimed training loss is a function of the claimed losses (which the replays check):
    // since format 4 the last epoch's mean, before it the last step's loss (a bundle of an older
    // worker, trained before the change, is judged by its own rule; either is a value, not a
    // choice).
    let train_loss = if m.format_version >= 4 {
        trajectory::final_train_loss(&m.losses, summary.steps_per_epoch, m.diverged_at)
    } else {
        m.losses.last().copied().unwrap_or_default()
    };
    if m.metrics.final_train_loss.to_bits() != train_loss.to_bits() {
        mismatches.push(format!(
            "final_train_loss {} where the losses give {train_loss}",
            m.metrics.final_train_loss
        ));
    }
    if let Some(committed) = opts.expected_metrics {
        let claimed = m.metrics.on_chain();
        if claimed != committed {
            mismatches.push(format!("metrics {claimed:?} where the commitment says {committed:?}"));
        }
    }
    match seed {
        None => mismatches.push("seed is not 32 bytes of hex".into()),
        Some(s) if s != opts.expected_seed => {
            mismatches.push(format!("seed {} ≠ {}", hex(&s), hex(&opts.expected_seed)))
        }
        Some(_) => {}
    }
    report.push(
        "manifest",
        mismatches.is_empty(),
        if mismatches.is_empty() { "matches".into() } else { mismatches.join("; ") },
        "spec hash, batch size, step and checkpoint schedule, seed as prescribed, f32, the \
         job's kernels revision, final_train_loss of the losses, the committed metrics",
    );
    seed.filter(|_| report.passed)
}
