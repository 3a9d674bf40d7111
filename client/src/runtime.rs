//! The runtime's calls, storage, events, constants and runtime APIs as Rust types, generated at
//! compile time from `metadata/ergon.scale` (the runtime's V16 metadata; regenerate it with
//! `ERGON_BLESS=1 SKIP_WASM_BUILD=1 cargo test --release -p ergon-runtime client_metadata_is_current`).
//!
//! Ergon's own argument types are not regenerated: the job spec, a verdict, a replay sketch, a
//! device class, a data gap and a drilling matrix chain are the
//! protocol crates' types (wrapped in [`subxt::utils::Static`], which encodes them with SCALE), so the
//! worker builds them with the same code the runtime checks them with.

#[subxt::subxt(
    runtime_metadata_path = "metadata/ergon.scale",
    substitute_type(
        path = "ergon_job_spec::JobSpec",
        with = "::subxt::utils::Static<::ergon_job_spec::JobSpec>"
    ),
    substitute_type(
        path = "ergon_protocol::commitments::Verdict",
        with = "::subxt::utils::Static<::ergon_protocol::Verdict>"
    ),
    substitute_type(
        path = "ergon_protocol::evidence::Sketch",
        with = "::subxt::utils::Static<::ergon_protocol::Sketch>"
    ),
    substitute_type(
        path = "ergon_protocol::device::DeviceClass",
        with = "::subxt::utils::Static<::ergon_protocol::DeviceClass>"
    ),
    substitute_type(
        path = "ergon_protocol::device::PerClass<T>",
        with = "::subxt::utils::Static<::ergon_protocol::PerClass<T>>"
    ),
    substitute_type(
        path = "ergon_job_spec::chunks::DataGap",
        with = "::subxt::utils::Static<::ergon_job_spec::DataGap>"
    ),
    substitute_type(
        path = "ergon_drill::MatmulChain",
        with = "::subxt::utils::Static<::ergon_drill::MatmulChain>"
    )
)]
pub mod api {}

pub use api::*;
