//! `ergon-worker fetch-model`: a completed job's model, checked against its root and evaluated.

use std::{path::PathBuf, process::ExitCode};

use ergon_engine::{data, delivery, load_spec};

use super::{parse_seed, Outcome};

/// `fetch-model` options.
#[derive(clap::Args)]
pub struct Args {
    /// The job spec (JSON; `ergon_job` returns it).
    #[arg(long)]
    spec: PathBuf,
    /// The URL the bundle is served at.
    #[arg(long)]
    bundle: String,
    /// The committed Merkle root (64 hex digits).
    #[arg(long)]
    root: String,
    /// Directory to write the manifest and the final checkpoint to.
    #[arg(long)]
    out: PathBuf,
    /// Also write the model in Hugging Face's layout (`config.json`, `model.safetensors`) into
    /// this directory, as `export --hf` does (GPT-2- and Llama-shaped models).
    #[arg(long)]
    hf: Option<PathBuf>,
    /// With `--hf`: a `tokenizer.json` to copy next to the model.
    #[arg(long, requires = "hf")]
    tokenizer: Option<PathBuf>,
}

/// Downloads the manifest and final checkpoint, checks them, prints the model's accuracy and, with
/// `--hf`, exports it for `transformers`.
pub fn run(Args { spec, bundle: url, root, out, hf, tokenizer }: Args) -> Outcome {
    let spec = load_spec(&spec)?;
    let root = parse_seed(&root)?;
    let model = delivery::fetch_model(&spec, &url, &root, &out)?;
    let claimed = &model.manifest.metrics;
    println!("model       {} (step {})", model.file.display(), model.step);
    println!("root        {} (matches the commitment)", data::hex(&root));
    println!(
        "validation  loss {:.4}, accuracy {:.2}% (claimed {:.4}, {:.2}%)",
        model.validation_loss,
        100.0 * model.validation_accuracy,
        claimed.validation_loss,
        100.0 * claimed.validation_accuracy
    );
    if let Some(hf) = hf {
        delivery::export_hf(&spec, &out, &hf, tokenizer.as_deref())?;
        println!("exported    to {} (config.json, model.safetensors)", hf.display());
    }
    Ok(ExitCode::SUCCESS)
}
