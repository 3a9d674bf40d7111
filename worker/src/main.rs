//! `ergon-worker`: the command line of Ergon's trainer process (see `cli/`).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
