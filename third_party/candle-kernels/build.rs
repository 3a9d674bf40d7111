//! Compiles candle's dense kernels to PTX, as upstream's build script does, and nothing else:
//! not `quantized.cu` (GGUF matmuls) and not the static MoE/GGUF library (see `src/ffi.rs`).
use cudaforge::{KernelBuilder, Result};
use std::env;
use std::path::PathBuf;

fn main() -> Result<()> {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src");

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bindings = KernelBuilder::new()
        .source_dir("src")
        .arg("--expt-relaxed-constexpr")
        .arg("-std=c++17")
        .arg("-O3")
        .build_ptx()?;
    bindings.write(out_dir.join("ptx.rs"))?;
    Ok(())
}
