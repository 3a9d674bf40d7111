//! `ergon-worker content-root`: the content root of data files, for writing specs, and the chunk
//! lists to serve beside them.

use std::process::ExitCode;

use ergon_engine::{data, Error};

use super::Outcome;

/// `content-root` options.
#[derive(clap::Args)]
pub struct Args {
    /// Files or URLs, in the order the format names them.
    files: Vec<String>,
    /// Also write each local file's chunk list beside it (`FILE.chunks`): an owner serving data
    /// over http(s) serves these with the files, or validators find the data unavailable.
    #[arg(long)]
    chunk_lists: bool,
}

/// Prints the content root of `files` (writing their chunk lists with `--chunk-lists`).
pub fn run(Args { files, chunk_lists }: Args) -> Outcome {
    let mut digests = Vec::with_capacity(files.len());
    for file in &files {
        let bytes = data::fetch(file)?;
        digests.push(if chunk_lists {
            let path = file.strip_prefix("file://").unwrap_or(file);
            if data::is_http(path) {
                return Err(Error::Data {
                    file: file.clone(),
                    reason: "--chunk-lists writes beside local files, not URLs".into(),
                }
                .into());
            }
            data::write_chunk_list(std::path::Path::new(path), &bytes)?
        } else {
            ergon_job_spec::file_digest(&bytes)
        });
    }
    println!("{}", data::hex(&ergon_job_spec::content_root(digests)));
    Ok(ExitCode::SUCCESS)
}
