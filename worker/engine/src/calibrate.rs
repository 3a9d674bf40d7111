//! This machine's training throughput, measured by training: a daemon prices bids and checks
//! deadlines with it. The reference is the shape of the Fashion-MNIST MLP example (784 → 128 → 10,
//! batch 64, SGD with momentum) on synthetic data in memory, trained through the same
//! [`trajectory::Trajectory::run_steps`] as every job, on the caller's threads.

use std::time::Instant;

use candle_core::{DType, Device};
use ergon_job_spec::{
    Bounded, BoundedString, DataFormat, Dataset, Hash32, JobSpec, Layer, Model as ModelSpec,
    Optimizer as OptimizerSpec, Ppb,
};

use crate::{
    data::{Inputs, Samples},
    error::{Error, Result},
    model::Model,
    optim::Optimizer,
    run::{self, Threads},
    trajectory,
};

/// Samples of the synthetic training set.
const SAMPLES: usize = 4_096;
/// Samples per step.
const BATCH: u32 = 64;

/// The reference spec: the example MLP over a synthetic set of [`SAMPLES`] samples (`None` only
/// if the spec limits shrank below it).
fn reference() -> Option<JobSpec> {
    let data = Dataset {
        format: DataFormat::Csv { features: 784, classes: 10 },
        files: Bounded::new(vec![BoundedString::from_str("memory:calibration")?]).ok()?,
        content_root: Hash32([0; 32]),
        samples: SAMPLES as u64,
    };
    Some(JobSpec {
        model: ModelSpec {
            layers: Bounded::new(vec![
                Layer::Linear { in_features: 784, out_features: 128, bias: true },
                Layer::ReLU,
                Layer::Linear { in_features: 128, out_features: 10, bias: true },
            ])
            .ok()?,
        },
        train: data.clone(),
        validation: data,
        optimizer: OptimizerSpec::Sgd {
            lr: Ppb(50_000_000),
            momentum: Ppb(900_000_000),
            weight_decay: Ppb(0),
        },
        init: Default::default(),
        schedule: Default::default(),
        adapters: Default::default(),
        gradients: Default::default(),
        epochs: 1_000,
        batch_size: BATCH,
        checkpoint_interval: 1_000,
        precision: Default::default(),
    })
}

/// Trains the reference model for about `seconds` (at least a few steps) on `threads` (the
/// caller's pool when none) and returns the training FLOPs per second it reached, as the spec's
/// FLOP count counts them.
pub fn training_flops_per_second(
    threads: Option<&Threads>,
    device: &Device,
    seconds: f64,
) -> Result<f64> {
    run::on(threads, || {
        let spec = reference().ok_or_else(|| Error::Data {
            file: "calibration".into(),
            reason: "the reference spec exceeds the spec limits".into(),
        })?;
        let summary = spec.validate()?;
        // Deterministic pseudo-random inputs: values only matter for not being degenerate.
        let inputs: Vec<f32> =
            (0..SAMPLES * 784).map(|i| ((i * 2_654_435_761) % 1_000) as f32 / 1_000.0).collect();
        let targets: Vec<u32> = (0..SAMPLES as u32).map(|i| i % 10).collect();
        let samples = Samples {
            sample_shape: vec![784],
            inputs: Inputs::Float(inputs),
            targets,
            targets_per_sample: 1,
            len: SAMPLES,
        };
        let seed = [0x5a; 32];
        let model = Model::new(&spec, &seed, device, DType::F32)?;
        let mut opt = Optimizer::new(&spec, &model.params)?;
        // The clock starts after the first step: it allocates what the later ones reuse.
        let (mut started, mut steps) = (Instant::now(), 0u64);
        let run = trajectory::Trajectory {
            spec: &spec,
            summary: &summary,
            seed: &seed,
            train_set: &samples,
            device,
        };
        run.run_steps(&model, &mut opt, 0..summary.total_steps, |_, _, done, _| {
            if done == 1 {
                started = Instant::now();
            } else {
                steps += 1;
            }
            Ok(steps < 5 || started.elapsed().as_secs_f64() < seconds)
        })?;
        let per_step = 3 * summary.forward_flops_per_sample * BATCH as u128;
        Ok(steps as f64 * per_step as f64 / started.elapsed().as_secs_f64().max(1e-9))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_trains_at_a_plausible_rate() {
        let threads = Threads::new(1).unwrap();
        let flops = training_flops_per_second(Some(&threads), &Device::Cpu, 0.2).unwrap();
        // Any CPU of this century: between 10 MFLOP/s and 10 TFLOP/s on one thread.
        assert!((1e7..1e13).contains(&flops), "{flops}");
    }
}
