//! The version the node reports (`--version`, telemetry, `system_version`): the crate's version and
//! a commit, `SUBSTRATE_CLI_GIT_COMMIT_HASH` when the build sets it (the container build passes the
//! repository's), else `dev`.
//!
//! Not read from git: `substrate-build-script-utils` reran this script on every commit and so
//! recompiled and relinked the node (about 3 minutes of every test run) even when none of its code
//! had changed.

fn main() {
    let commit = std::env::var("SUBSTRATE_CLI_GIT_COMMIT_HASH")
        .map(|hash| hash.trim().to_owned())
        .ok()
        .filter(|hash| !hash.is_empty())
        .unwrap_or_else(|| "dev".to_owned());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=SUBSTRATE_CLI_COMMIT_HASH={commit}");
    println!("cargo:rustc-env=SUBSTRATE_CLI_IMPL_VERSION={version}-{commit}");
    println!("cargo:rerun-if-env-changed=SUBSTRATE_CLI_GIT_COMMIT_HASH");
    println!("cargo:rerun-if-changed=build.rs");
}
