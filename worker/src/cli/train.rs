//! `ergon-worker train`: train a spec into a bundle, with a progress bar.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use ergon_engine::{
    data, load_spec, rng,
    run::Step,
    train::{self, Outcome as Trained, TrainOptions},
};

use super::{parse_account, parse_seed, Outcome};

/// `train` options.
#[derive(clap::Args)]
pub struct Args {
    /// The job spec (JSON).
    #[arg(long)]
    spec: PathBuf,
    /// Bundle directory.
    #[arg(long)]
    out: PathBuf,
    /// Training seed as 64 hex digits; default: derived from --job-id and --trainer.
    #[arg(long, conflicts_with_all = ["job_id", "trainer"])]
    seed: Option<String>,
    /// On-chain job id (seed derivation).
    #[arg(long, default_value_t = 0)]
    job_id: u64,
    /// Trainer account (seed derivation): its raw 32 bytes as 0x-hex (all zeros offline).
    #[arg(long)]
    trainer: Option<String>,
    /// CPU threads for the tensor kernels (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    device: ergon_worker::device::DeviceArgs,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Print the outcome as one JSON object (no progress bar): `root`, `validation_loss`,
    /// `validation_accuracy`, `steps`, `parameters`, `train_seconds`, `checkpoint_seconds`,
    /// `samples_per_second`, `checkpoints`, `checkpoint_bytes` (or `halted_after`).
    #[arg(long)]
    json: bool,
}

/// Trains (or resumes) and prints the root, the metrics and the throughput.
pub fn run(args: Args) -> Outcome {
    let spec = load_spec(&args.spec)?;
    let seed = match args.seed {
        Some(s) => parse_seed(&s)?,
        None => rng::job_seed(args.job_id, &parse_account(args.trainer.as_deref())?),
    };
    let device = args.device.open()?;
    eprintln!("device {}", device.description);
    let device = device.device;
    let summary = spec.validate()?;
    if !device.is_cpu() && !ergon_engine::device::replays_across_devices(&spec) {
        eprintln!(
            "warning: a convolutional or bf16-mixed job trains on the CPU; verifiers fail this \
             bundle's device check (its replay on a CPU is off by more than ε, or not yet \
             measured): train without --cuda to submit it"
        );
    }
    eprintln!(
        "training {} parameters, {} steps, {:.3} ut of work, seed {}",
        summary.parameters,
        summary.total_steps,
        summary.training_micro_ut() as f64 / 1e6,
        data::hex(&seed)
    );
    let bar = progress_bar(summary.total_steps, args.quiet || args.json);
    let on_step = {
        let (bar, batch) = (bar.clone(), spec.batch_size as f64);
        Arc::new(move |s: &Step| {
            bar.set_position(s.done);
            bar.set_message(format!(
                "loss {:.4} | {:.0} samples/s",
                s.loss,
                s.this_run as f64 * batch / s.seconds.max(1e-9)
            ));
        })
    };
    let opts = TrainOptions {
        device,
        threads: Some(super::threads(args.threads)?),
        on_step: Some(on_step),
        ..TrainOptions::new(args.out, seed)
    };
    match train::train(&spec, &opts)? {
        Trained::Finished(r) if args.json => {
            bar.finish_and_clear();
            let samples = spec.train.samples as f64 * spec.epochs as f64;
            let out = serde_json::json!({
                "root": data::hex(&r.root),
                "validation_loss": r.manifest.metrics.validation_loss,
                "validation_accuracy": r.manifest.metrics.validation_accuracy,
                "steps": summary.total_steps,
                "parameters": summary.parameters,
                "train_seconds": r.train_seconds,
                "checkpoint_seconds": r.checkpoint_seconds,
                "samples_per_second": samples / r.train_seconds.max(1e-9),
                "checkpoints": r.manifest.checkpoints.len(),
                "checkpoint_bytes": r.manifest.checkpoints.iter().map(|c| c.file_bytes).sum::<u64>(),
            });
            println!("{out}");
        }
        Trained::Finished(r) => {
            bar.finish_and_clear();
            println!("root {}", data::hex(&r.root));
            println!(
                "validation loss {:.4}, accuracy {:.2}%",
                r.manifest.metrics.validation_loss,
                100.0 * r.manifest.metrics.validation_accuracy
            );
            let samples = spec.train.samples as f64 * spec.epochs as f64;
            println!(
                "trained in {:.1} s ({:.1}% of it on checkpoints)",
                r.train_seconds,
                100.0 * r.checkpoint_seconds / r.train_seconds.max(1e-9)
            );
            println!(
                "throughput {:.0} samples/s (checkpoints included)",
                samples / r.train_seconds.max(1e-9)
            );
        }
        Trained::Halted(step) if args.json => {
            bar.abandon();
            println!("{}", serde_json::json!({ "halted_after": step }));
        }
        Trained::Halted(step) => {
            bar.abandon();
            println!("halted after step {step}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn progress_bar(total: u64, quiet: bool) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} step {pos}/{len} | {msg} | ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}
