//! With the `cuda` feature, compiles the engine's CUDA kernels (`src/ops/*.cu`) to PTX with the
//! `nvcc` on the PATH (scripts/setup-cuda.sh installs it), for `CUDA_COMPUTE_CAP` (default 80:
//! the driver JIT-compiles it for every newer GPU), as candle's own kernels are built.

use std::{env, path::PathBuf, process::Command};

const KERNELS: &[&str] = &["update", "kernels", "attention"];

fn main() {
    for name in KERNELS {
        println!("cargo:rerun-if-changed=src/ops/{name}.cu");
    }
    println!("cargo:rerun-if-changed=src/ops/elementary.cuh");
    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    // Only the CUDA build reads it: a CPU build that tracked it was compiled again whenever it was
    // built once with the CUDA toolchain's environment (scripts/test.sh's CUDA step) and once
    // without (the engine step), every run.
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cap = env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "80".into());
    for name in KERNELS {
        let ptx = out.join(format!("{name}.ptx"));
        // -fmad=false: no multiply-add is contracted, so the kernels round as their CPU twins do.
        let status = Command::new("nvcc")
            .args(["--ptx", &format!("-arch=compute_{cap}"), "-fmad=false", "-o"])
            .arg(&ptx)
            .arg(format!("src/ops/{name}.cu"))
            .status()
            .unwrap_or_else(|e| {
                panic!("running nvcc (source scripts/setup-cuda.sh's env.sh): {e}")
            });
        assert!(status.success(), "nvcc failed on src/ops/{name}.cu");
    }
}
