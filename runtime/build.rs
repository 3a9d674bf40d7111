//! Builds the wasm32v1-none runtime blob (embedded in the node as `WASM_BINARY`).

fn main() {
    #[cfg(feature = "std")]
    substrate_wasm_builder::WasmBuilder::build_using_defaults();
}
