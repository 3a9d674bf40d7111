//! `ergon-worker serve`: the bundle server alone, until SIGINT or SIGTERM.

use std::{path::PathBuf, process::ExitCode};

use ergon_worker::serve::Server;

use super::Outcome;

/// `serve` options.
#[derive(clap::Args)]
pub struct Args {
    /// Directory whose files are served.
    #[arg(long)]
    dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8700")]
    addr: String,
}

/// Serves `dir` until a signal, then finishes the transfers in flight.
pub fn run(Args { dir, addr }: Args) -> Outcome {
    super::runtime()?.block_on(async {
        let server = Server::bind(&addr, &dir).await?;
        println!("serving {} at http://{}/", dir.display(), server.local_addr()?);
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        server
            .run(async move {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            })
            .await?;
        Ok(ExitCode::SUCCESS)
    })
}
