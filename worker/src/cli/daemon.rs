//! `ergon-worker run`: the daemon, on a multi-threaded async runtime.

use std::{io::IsTerminal, process::ExitCode, time::Duration};

use ergon_worker::daemon::{self, Config};

use super::Outcome;

/// How long the runtime waits at exit for blocking work (a training reaching its checkpoint).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(60);

/// Runs the daemon; a fatal error exits with its own code (2 configuration, 3 chain, 4 store).
pub fn run(config: Config) -> Outcome {
    tracing_subscriber::fmt()
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(daemon::run(config));
    // A training asked to stop finishes its step and writes its checkpoint; don't wait forever.
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(fatal) => {
            eprintln!("error: {fatal}");
            Ok(ExitCode::from(fatal.exit_code()))
        }
    }
}
