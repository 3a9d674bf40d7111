//! `ergon-worker check`: validate a spec and print what it costs.

use std::{path::PathBuf, process::ExitCode};

use ergon_engine::{data, load_spec};

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
    /// Also check that the job's data (and initial weights) is served as committed, the way the
    /// validators' data check reads it: each http(s) file's chunk list (`FILE.chunks`, which must
    /// give the content root) and a few chunks by byte range; local files are hashed. Exit status
    /// 1 with the file and chunk that is not. Adds `data` to `--json`: per file set, its `set`,
    /// `files`, `chunks`, `chunks_checked` and `bytes`.
    #[arg(long)]
    data: bool,
}

/// Chunks of each http(s) file `--data` fetches by byte range (the first, the last and evenly
/// spaced ones).
const DATA_SAMPLES_PER_FILE: u32 = 4;

/// Prints the spec's parameters, FLOPs, work, steps and checkpoints.
pub fn run(Args { spec, json, data }: Args) -> Outcome {
    let spec = load_spec(&spec)?;
    let s = spec.validate()?;
    let mut served = Vec::new();
    if data {
        for ((files, root), what) in spec.committed_files().into_iter().zip(data::SET_NAMES) {
            served.push((what, data::check_served(files, root, what, DATA_SAMPLES_PER_FILE)?));
        }
    }
    if json {
        let evaluation_ppb = ergon_protocol::overhead::overhead_ppb(
            spec.train.samples,
            spec.epochs,
            spec.validation.samples,
        );
        let mut out = serde_json::json!({
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
        if data {
            out["data"] = served
                .iter()
                .map(|(what, s)| {
                    serde_json::json!({
                        "set": what, "files": s.files, "chunks": s.chunks,
                        "chunks_checked": s.chunks_checked, "bytes": s.bytes,
                    })
                })
                .collect();
        }
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
    for (what, s) in &served {
        println!(
            "{what:<17} served as committed: {} files, {} bytes, {} chunks ({} fetched by range)",
            s.files, s.bytes, s.chunks, s.chunks_checked
        );
    }
    Ok(ExitCode::SUCCESS)
}
