//! Chain specifications, built from the runtime's genesis presets.

use ergon_runtime::WASM_BINARY;
use sc_service::ChainType;

/// The chain specification type of Ergon (no extensions).
pub type ChainSpec = sc_service::GenericChainSpec;

/// Chain-spec properties so polkadot.js and other clients show balances correctly with no extra
/// configuration: token ERG with 12 decimals, generic SS58 prefix 42.
fn properties() -> sc_service::Properties {
    let mut properties = sc_service::Properties::new();
    properties.insert("tokenSymbol".into(), "ERG".into());
    properties.insert("tokenDecimals".into(), 12.into());
    properties.insert("ss58Format".into(), 42.into());
    properties
}

/// A chain's name, marked where the node embeds the `fast-runtime` build (short slots, epochs and
/// windows for test networks), so that a client or a test harness sees which one runs.
fn name(base: &str) -> String {
    if cfg!(feature = "fast-runtime") {
        format!("{base} {FAST_RUNTIME_MARK}")
    } else {
        base.to_string()
    }
}

/// Appended to the chain's name by a node with the fast runtime.
pub const FAST_RUNTIME_MARK: &str = "(fast runtime)";

fn wasm_binary() -> Result<&'static [u8], String> {
    WASM_BINARY.ok_or_else(|| {
        "The runtime wasm blob is not available: build without SKIP_WASM_BUILD".to_string()
    })
}

/// `--dev`: Alice is the only validator.
pub fn development_chain_spec() -> Result<ChainSpec, String> {
    Ok(ChainSpec::builder(wasm_binary()?, None)
        .with_name(&name("Ergon Development"))
        .with_id("ergon_dev")
        .with_protocol_id("ergon")
        .with_chain_type(ChainType::Development)
        .with_genesis_config_preset_name(sp_genesis_builder::DEV_RUNTIME_PRESET)
        .with_properties(properties())
        .build())
}

/// `--chain local`: Alice, Bob, Charlie and Dave validate.
pub fn local_chain_spec() -> Result<ChainSpec, String> {
    Ok(ChainSpec::builder(wasm_binary()?, None)
        .with_name(&name("Ergon Local Testnet"))
        .with_id("ergon_local")
        .with_protocol_id("ergon")
        .with_chain_type(ChainType::Local)
        .with_genesis_config_preset_name(sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET)
        .with_properties(properties())
        .build())
}
