//! The `ergon-worker` command line: one file per command, each an `Args` struct and a `run`.
//! `run` is the daemon; the others are one-shot tools over the engine.

mod check;
mod content_root;
mod daemon;
mod drill;
mod export;
mod fetch_model;
mod hf_spec;
mod inspect;
mod serve;
mod status;
mod tokenize;
mod train;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ergon_engine::{bundle, rng, Threads};

/// What a command returns: its exit code, or an error printed as `error: …` (exit code 1).
type Outcome = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Parser)]
#[command(
    name = "ergon-worker",
    version,
    about = "Ergon trainer: train job specs into verifiable bundles"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the trainer daemon: follow the chain, bid, train, serve, verify — until SIGINT/SIGTERM.
    /// Every option is also an environment variable (ERGON_*); logs go to stderr (RUST_LOG).
    Run(Box<ergon_worker::daemon::Config>),
    /// Print what a daemon is doing and what it earned: from its store (as its metrics endpoint
    /// counts) and from the chain (its jobs, ECP and bond).
    Status(status::Args),
    /// Train a job spec into a checkpoint bundle (resumes an interrupted run in the same directory).
    Train(train::Args),
    /// Print a bundle's manifest summary and check every file against it and the root.
    Inspect(inspect::Args),
    /// Verify a bundle against its job spec (Proof of Training); exit status 0 = pass, 1 = fail.
    Verify(verify::Args),
    /// Download a completed job's model (the bundle's manifest and final checkpoint), check it
    /// against the committed root, and evaluate it on the spec's validation set.
    FetchModel(fetch_model::Args),
    /// Write a bundle's final model in Hugging Face's layout (`config.json`, `model.safetensors`)
    /// for `transformers` to load without Ergon.
    Export(export::Args),
    /// Validate a job spec and print its parameter count and FLOPs.
    Check(check::Args),
    /// Write the job spec of a fine-tune of a Hugging Face GPT-2 or Llama directory
    /// (`config.json`, `model.safetensors`) on token shards `tokenize` wrote: the model from the
    /// config, the weights by content root, every tensor checked.
    HfSpec(hf_spec::Args),
    /// Encode text or JSONL files with a Hugging Face tokenizer.json into token shards and print
    /// the spec's dataset block for them (files, content root, samples).
    Tokenize(tokenize::Args),
    /// Print the content root of data files (for writing specs).
    ContentRoot(content_root::Args),
    /// Run a Proof-of-Drilling task; print its result hash, difficulty and measured throughput.
    Drill(drill::Args),
    /// Serve bundle directories over HTTP (with byte ranges) for verifiers and availability checks:
    /// `<dir>/<bundle>/manifest.json` is served at `http://<addr>/<bundle>/manifest.json`.
    Serve(serve::Args),
}

/// Parses the command line and runs the command.
pub fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(config) => daemon::run(*config),
        Command::Status(args) => status::run(args),
        Command::Train(args) => train::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Verify(args) => verify::run(args),
        Command::FetchModel(args) => fetch_model::run(args),
        Command::Export(args) => export::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Check(args) => check::run(args),
        Command::HfSpec(args) => hf_spec::run(args),
        Command::ContentRoot(args) => content_root::run(args),
        Command::Drill(args) => drill::run(args),
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A trainer account: its raw 32 bytes as 0x-hex (the seed binds the bytes, never an address text);
/// none is the all-zero account of offline runs.
fn parse_account(s: Option<&str>) -> Result<[u8; 32], String> {
    match s {
        None => Ok([0; 32]),
        Some(s) => bundle::parse_hash(s).ok_or_else(|| {
            format!("trainer {s:?} is not an account's 32 bytes as hex (0x followed by 64 digits)")
        }),
    }
}

/// A seed or root: 32 bytes as hex.
fn parse_seed(s: &str) -> Result<rng::Seed, String> {
    bundle::parse_hash(s).ok_or_else(|| format!("seed {s:?} is not 32 bytes of hex"))
}

/// Bytes as hex, with or without `0x`.
fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim_start_matches("0x");
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return Err(format!("{s:?} is not hex"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("{s:?} is not hex")))
        .collect()
}

/// The pool `--threads` asks for (none: every core).
fn threads(count: Option<usize>) -> Result<Threads, ergon_engine::Error> {
    Threads::new(count.unwrap_or(0))
}

/// A runtime for the async commands (status, serve): current-thread, the work is I/O.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}
