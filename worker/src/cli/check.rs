//! `ergon-worker check`: validate a spec and print what it costs.

use std::{path::PathBuf, process::ExitCode};

use ergon_engine::load_spec;

use super::Outcome;

/// `check` options.
#[derive(clap::Args)]
pub struct Args {
    /// The job spec (JSON).
    #[arg(long)]
    spec: PathBuf,
    /// Print one JSON object: `parameters`, `frozen_parameters`, `forward_flops_per_sample`,
    /// `training_flops`, `training_micro_ut`, `steps`, `steps_per_epoch`, `checkpoints` and
    /// `evaluation_ppb` (what one verification's rules and metrics cost, in parts per billion of
    /// the training: `ergon_protocol::overhead`, the chain's number for the fees).
    #[arg(long)]
    json: bool,
}

/// Prints the spec's parameters, FLOPs, work, steps and checkpoints.
pub fn run(Args { spec, json }: Args) -> Outcome {
    let spec = load_spec(&spec)?;
    let s = spec.validate()?;
    if json {
        let evaluation_ppb = ergon_protocol::overhead::overhead_ppb(
            spec.train.samples,
            spec.epochs,
            spec.validation.samples,
        );
        let out = serde_json::json!({
            "parameters": s.parameters,
            "frozen_parameters": s.frozen_parameters,
            "forward_flops_per_sample": s.forward_flops_per_sample.to_string(),
            "training_flops": s.training_flops.to_string(),
            "training_micro_ut": s.training_micro_ut().to_string(),
            "steps": s.total_steps,
            "steps_per_epoch": s.steps_per_epoch,
            "checkpoints": s.checkpoints,
            "evaluation_ppb": evaluation_ppb,
        });
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("parameters        {}", s.parameters);
    if s.frozen_parameters > 0 {
        println!(
            "frozen base       {} parameters (LoRA: the adapters above train)",
            s.frozen_parameters
        );
    }
    println!("forward FLOPs     {} per sample", s.forward_flops_per_sample);
    println!("training FLOPs    {}", s.training_flops);
    println!("training work     {} micro-ut", s.training_micro_ut());
    println!("steps             {} ({} per epoch)", s.total_steps, s.steps_per_epoch);
    println!("checkpoints       {}", s.checkpoints);
    Ok(ExitCode::SUCCESS)
}
