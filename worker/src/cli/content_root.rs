//! `ergon-worker content-root`: the content root of data files, for writing specs.

use std::process::ExitCode;

use ergon_engine::{data, Error};

use super::Outcome;

/// `content-root` options.
#[derive(clap::Args)]
pub struct Args {
    /// Files or URLs, in the order the format names them.
    files: Vec<String>,
}

/// Prints the content root of `files`.
pub fn run(Args { files }: Args) -> Outcome {
    let bytes = files.iter().map(|f| data::fetch(f)).collect::<Result<Vec<_>, Error>>()?;
    println!("{}", data::hex(&data::content_root(bytes.iter().map(|b| b.as_slice()))));
    Ok(ExitCode::SUCCESS)
}
