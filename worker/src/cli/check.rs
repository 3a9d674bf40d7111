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
}

/// Prints the spec's parameters, FLOPs, work, steps and checkpoints.
pub fn run(Args { spec }: Args) -> Outcome {
    let spec = load_spec(&spec)?;
    let s = spec.validate()?;
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
