//! `ergon-worker hf-spec`: the job spec of a fine-tune of a Hugging Face model directory on token
//! shards (`ergon_engine::weights::fine_tune`).

use std::{path::PathBuf, process::ExitCode};

use ergon_engine::weights::fine_tune::{fine_tune_spec, Recipe};
use ergon_job_spec::{Dataset, Precision};

use super::Outcome;

/// `hf-spec` options.
#[derive(clap::Args)]
pub struct Args {
    /// A GPT-2 or Llama directory as `save_pretrained` writes it: `config.json` and
    /// `model.safetensors` (nothing is fetched from a hub).
    #[arg(long)]
    model: PathBuf,
    /// The training set: the dataset block `tokenize` printed (JSON), with the model's tokenizer.
    #[arg(long)]
    train: PathBuf,
    /// The validation set, likewise.
    #[arg(long)]
    validation: PathBuf,
    /// Where the spec says the weights file is: the http(s) URL it is served at, its chunk list
    /// beside it (`content-root --chunk-lists`). Default: the local file's path (a dev chain).
    #[arg(long)]
    weights_url: Option<String>,
    /// Passes over the training data.
    #[arg(long, default_value_t = 1)]
    epochs: u32,
    /// Samples per optimizer step.
    #[arg(long, default_value_t = 8)]
    batch_size: u32,
    /// Micro-batches per step (gradient accumulation; must divide the batch size).
    #[arg(long, default_value_t = 1)]
    micro_batches: u32,
    /// Peak learning rate (AdamW, β = (0.9, 0.999), weight decay 0.01 on matrices, gradients
    /// clipped at norm 1).
    #[arg(long, default_value_t = 5e-5)]
    lr: f64,
    /// Linear warmup over this many steps, then a cosine decay to a tenth of the rate (default:
    /// a constant rate).
    #[arg(long)]
    warmup_steps: Option<u32>,
    /// Train LoRA adapters of this rank (alpha twice the rank) on attention and MLP over the
    /// frozen model, instead of every weight.
    #[arg(long)]
    lora_rank: Option<u32>,
    /// `f32`, or `bf16-mixed` (bf16 matrix products, f32 master weights: docs/protocol.md,
    /// *Precision*).
    #[arg(long, default_value = "f32", value_parser = parse_precision)]
    precision: Precision,
    /// Optimizer steps between checkpoints (default: the run's steps over 32).
    #[arg(long)]
    checkpoint_interval: Option<u32>,
    /// Write the spec here (default: standard output).
    #[arg(long)]
    out: Option<PathBuf>,
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    [Precision::F32, Precision::Bf16Mixed]
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| format!("{s:?}: the precisions are f32 and bf16-mixed"))
}

fn dataset(path: &PathBuf) -> Result<Dataset, Box<dyn std::error::Error>> {
    let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    Ok(serde_json::from_slice(&bytes).map_err(|e| {
        format!("{}: not a dataset block (`tokenize`'s output): {e}", path.display())
    })?)
}

/// Writes the spec and prints what it costs (to standard error when the spec goes to standard
/// output).
pub fn run(args: Args) -> Outcome {
    let recipe = Recipe {
        weights_url: args.weights_url,
        epochs: args.epochs,
        batch_size: args.batch_size,
        micro_batches: args.micro_batches,
        lr: args.lr,
        warmup_steps: args.warmup_steps,
        lora_rank: args.lora_rank,
        precision: args.precision,
        checkpoint_interval: args.checkpoint_interval,
    };
    let (spec, ignored) =
        fine_tune_spec(&args.model, dataset(&args.train)?, dataset(&args.validation)?, &recipe)?;
    let text = serde_json::to_string_pretty(&spec)?;
    let s = spec.validate()?;
    let summary = format!(
        "{} trained parameters ({} frozen), {} steps, {} checkpoints, {:.3} ut of work",
        s.parameters,
        s.frozen_parameters,
        s.total_steps,
        s.checkpoints,
        s.training_micro_ut() as f64 / 1e6
    );
    match &args.out {
        Some(out) => {
            std::fs::write(out, text + "\n")
                .map_err(|e| format!("writing {}: {e}", out.display()))?;
            println!("{summary}\nwrote {}", out.display());
        }
        None => {
            println!("{text}");
            eprintln!("{summary}");
        }
    }
    for note in ignored {
        eprintln!("note: the config's {note}");
    }
    Ok(ExitCode::SUCCESS)
}
