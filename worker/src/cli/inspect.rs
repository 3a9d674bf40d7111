//! `ergon-worker inspect`: a bundle's manifest summary, every file checked against it.

use std::{path::PathBuf, process::ExitCode};

use ergon_engine::{bundle, data};

use super::Outcome;

/// `inspect` options.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle directory.
    bundle: PathBuf,
}

/// Prints the manifest's summary and any file that does not match it (exit status 1).
pub fn run(Args { bundle: dir }: Args) -> Outcome {
    let report = bundle::inspect(&dir)?;
    let m = &report.manifest;
    println!("spec hash      {}", m.spec_hash);
    println!("seed           {}", m.seed);
    println!(
        "environment    {} {} threads={} [{}]",
        m.environment.device,
        m.environment.precision,
        m.environment.threads,
        m.environment.cpu_features.join(",")
    );
    println!(
        "steps          {} ({} per epoch, batch {})",
        m.total_steps, m.steps_per_epoch, m.batch_size
    );
    println!("checkpoints    {} (every {} steps)", m.checkpoints.len(), m.checkpoint_interval);
    if let (Some(first), Some(last)) = (m.losses.first(), m.losses.last()) {
        println!("loss           {first:.4} → {last:.4}");
    }
    println!(
        "validation     loss {:.4}, accuracy {:.2}%",
        m.metrics.validation_loss,
        100.0 * m.metrics.validation_accuracy
    );
    println!("final model    {}", m.final_model_hash);
    println!("root           {}", data::hex(&report.root));
    if report.problems.is_empty() {
        println!("ok: every checkpoint matches the manifest");
        Ok(ExitCode::SUCCESS)
    } else {
        for p in &report.problems {
            println!("PROBLEM: {p}");
        }
        Ok(ExitCode::FAILURE)
    }
}
