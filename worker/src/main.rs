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
    keep_freed_memory();
    cli::main()
}

/// A training step allocates and frees the same large tensors again and again (activations, and
/// the gradients candle's backward pass zeroes and adds). glibc's allocator returns freed memory at
/// the top of its heaps to the kernel past a threshold that follows the largest freed block, so the
/// next step faults every page in again, zeroed (measured on the char transformer: a tenth of the
/// time in page faults). Above these limits the memory stays in the process for the next step:
/// blocks up to 32 MiB come from the heaps, and up to 1 GiB of free memory is kept (a training's
/// memory is reserved by the bid's memory check anyway). Measured in alternating runs on two cores:
/// the transformer trains at 641–667 samples/s against 536–581 without it; the MLP and the CNN as
/// fast as before. An operator's `GLIBC_TUNABLES` replaces these settings.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("GLIBC_TUNABLES").is_none() {
        // SAFETY: mallopt only sets parameters of the allocator, which takes its own lock.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        }
    }
}
