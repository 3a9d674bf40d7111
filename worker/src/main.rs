//! `ergon-worker`: the command line of Ergon's trainer process (see `cli/`).

mod cli;

fn main() -> std::process::ExitCode {
    // candle runs large element-wise ops on a process-wide pool of spinning threads of its own, sized
    // to the machine, beside the rayon pool `--threads` gives every computation: on a busy or small
    // machine the two oversubscribe the cores and the spinning threads steal the matrix products'
    // time (measured: the MLP example trains 2.5× faster on 2 cores without them). Every kernel
    // then runs on the computation's own pool. Set before any thread starts; an operator may still
    // set CANDLE_NUM_THREADS.
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
    cli::main()
}
