//! `ergon-worker status`: what a daemon is doing and what it earned.

use std::{path::PathBuf, process::ExitCode};

use super::Outcome;

/// `status` options.
#[derive(clap::Args)]
pub struct Args {
    /// The daemon's data directory.
    #[arg(long, env = "ERGON_DATA_DIR")]
    data_dir: PathBuf,
    /// The node's WebSocket RPC.
    #[arg(long, env = "ERGON_CHAIN", default_value = "ws://127.0.0.1:9944")]
    chain: String,
}

/// Prints the store's totals beside the chain's view of the account.
pub fn run(Args { data_dir, chain }: Args) -> Outcome {
    let report =
        super::runtime()?.block_on(ergon_worker::daemon::status::report(&data_dir, &chain))?;
    print!("{report}");
    Ok(ExitCode::SUCCESS)
}
