//! Command-line interface: the standard Substrate node flags plus the chain-maintenance subcommands.

/// Subcommands besides running the node.
#[derive(Debug, clap::Subcommand)]
#[allow(clippy::large_enum_variant)]
pub enum Subcommand {
    /// Key management (generate, inspect, insert session keys).
    #[command(subcommand)]
    Key(sc_cli::KeySubcommand),

    /// Build a chain specification (deprecated: use `export-chain-spec`).
    #[deprecated(note = "build-spec will be removed; use export-chain-spec")]
    BuildSpec(sc_cli::BuildSpecCmd),

    /// Export the chain specification of `--chain` as JSON.
    ExportChainSpec(sc_cli::ExportChainSpecCmd),

    /// Validate blocks.
    CheckBlock(sc_cli::CheckBlockCmd),

    /// Export blocks.
    ExportBlocks(sc_cli::ExportBlocksCmd),

    /// Export the state of a given block into a chain spec.
    ExportState(sc_cli::ExportStateCmd),

    /// Import blocks.
    ImportBlocks(sc_cli::ImportBlocksCmd),

    /// Remove the whole chain.
    PurgeChain(sc_cli::PurgeChainCmd),

    /// Revert the chain to a previous state.
    Revert(sc_cli::RevertCmd),

    /// Database metadata.
    ChainInfo(sc_cli::ChainInfoCmd),

    /// Runtime benchmarks (`benchmark pallet` measures the weights in the pallets' `weights.rs`).
    /// Only in a node built with `--features runtime-benchmarks`.
    #[cfg(feature = "runtime-benchmarks")]
    #[command(subcommand)]
    Benchmark(frame_benchmarking_cli::BenchmarkCmd),
}

/// The `ergon-node` command line.
#[derive(Debug, clap::Parser)]
#[command(
    propagate_version = true,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    /// A subcommand; without one, the node runs.
    #[command(subcommand)]
    pub subcommand: Option<Subcommand>,

    /// Flags of a running node (`--dev`, `--chain`, `--validator`, RPC and network options, ...).
    #[clap(flatten)]
    pub run: sc_cli::RunCmd,
}
