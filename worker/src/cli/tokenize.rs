//! `ergon-worker tokenize`: text, JSONL or parquet to token shards, and the spec's dataset block for them.

use std::{path::PathBuf, process::ExitCode};

use ergon_engine::data::tokenize::{tokenize, TokenizeOptions};

use super::Outcome;

/// `tokenize` options.
#[derive(clap::Args)]
pub struct Args {
    /// A Hugging Face `tokenizer.json` (a local file: nothing is fetched).
    #[arg(long)]
    tokenizer: PathBuf,
    /// Directory for the shards (`shard-00000.bin`, …) and their chunk lists (`shard-00000.bin.chunks`,
    /// served beside them when the shards are served over http(s)).
    #[arg(long)]
    out: PathBuf,
    /// Context length of the samples the printed dataset block counts.
    #[arg(long)]
    seq_len: u32,
    /// A token written after every document, by name (e.g. `<|endoftext|>`).
    #[arg(long)]
    separator: Option<String>,
    /// Most tokens per shard (at most 64 shards).
    #[arg(long, default_value_t = 100_000_000)]
    shard_tokens: usize,
    /// Text files (one document each), JSONL files (one document per line, its `"text"`) or
    /// parquet files (one document per row, its `"text"` column).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Writes the shards and prints the dataset block (JSON) for a spec's `train` or `validation`.
pub fn run(Args { tokenizer, out, seq_len, separator, shard_tokens, files }: Args) -> Outcome {
    let opts = TokenizeOptions { separator, shard_tokens, seq_len };
    let dataset = tokenize(&tokenizer, &files, &out, &opts)?;
    println!("{}", serde_json::to_string_pretty(&dataset).map_err(|e| e.to_string())?);
    Ok(ExitCode::SUCCESS)
}
