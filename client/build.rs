//! The client's typed API is generated at compile time from `metadata/ergon.scale` by subxt's
//! macro, which does not tell cargo that it read the file: without this, a new runtime's metadata
//! left an old client in the build directory (it then refuses the chain: `Incompatible`).
fn main() {
    println!("cargo:rerun-if-changed=metadata/ergon.scale");
}
