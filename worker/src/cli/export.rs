//! `ergon-worker export`: a bundle's final model in Hugging Face's layout.

use std::{path::PathBuf, process::ExitCode};

use ergon_engine::{delivery, load_spec};

use super::Outcome;

/// `export` options.
#[derive(clap::Args)]
pub struct Args {
    /// The job spec (JSON) the bundle trained.
    #[arg(long)]
    spec: PathBuf,
    /// Write `config.json` and `model.safetensors` for `transformers` into this directory
    /// (GPT-2-shaped models: `GPT2LMHeadModel`).
    #[arg(long)]
    hf: PathBuf,
    /// A `tokenizer.json` to copy next to the model.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// The bundle directory (a trainer's, or `fetch-model`'s output).
    bundle: PathBuf,
}

/// Checks the final checkpoint against the manifest and writes it out.
pub fn run(Args { spec, hf, tokenizer, bundle }: Args) -> Outcome {
    let spec = load_spec(&spec)?;
    let step = delivery::export_hf(&spec, &bundle, &hf, tokenizer.as_deref())?;
    println!(
        "exported    the model of step {step} to {} (config.json, model.safetensors)",
        hf.display()
    );
    Ok(ExitCode::SUCCESS)
}
