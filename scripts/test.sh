#!/usr/bin/env bash
# The test command of the README: installs what is missing, builds the node, runs every test suite.
#
# Each suite is its own cargo invocation on purpose: cargo unifies features across the packages of one
# invocation, so testing the integration harness (a client-side graph) together with the node would
# rebuild the node's ~1,000 dependencies with other features.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"

scripts/setup.sh
# The integration tests drive the user CLI (polkadot.js) too.
source scripts/lib/client.sh
install_client

step() { printf '\n== %s\n' "$*"; }

step "job spec, bundle commitment, drilling workloads, engine (training, verifier, attack suite), worker and daemon"
cargo test --release --locked -p ergon-job-spec -p ergon-bundle -p ergon-drill -p ergon-protocol \
    -p ergon-engine -p ergon-worker --features ergon-worker/attacks
# These crates are shared with the runtime: they must build without std for the wasm target.
cargo build --release --locked --target wasm32v1-none -p ergon-job-spec -p ergon-bundle \
    -p ergon-drill -p ergon-protocol --no-default-features

step "the worker's CUDA build (CUDA 13.0 from PyPI wheels, no GPU needed), tested on its CPU path"
# Its own target directory: the CUDA binary must not replace the CPU build that the integration tests
# run. Without a GPU, the tests run against the driver stub, which answers "no device".
(
    source "$(scripts/setup-cuda.sh)"
    export CARGO_TARGET_DIR="$CARGO_TARGET_DIR/cuda"
    cargo build --release --locked -p ergon-worker --features cuda
    LD_LIBRARY_PATH="$ERGON_CUDA_TEST_LIBRARY_PATH" \
        cargo test --release --locked -p ergon-engine -p ergon-worker --features ergon-worker/cuda
)

step "pallets (mock runtimes)"
cargo test --release --locked -p pallet-compute-power -p pallet-trainer-staking -p pallet-job-market \
    -p pallet-drilling -p pallet-fresh-randomness -p ergon-timeouts
# The benchmarks run once each in the mock runtime, so they keep compiling and working.
cargo test --release --locked -p pallet-trainer-staking --features runtime-benchmarks benchmarking
cargo test --release --locked -p pallet-job-market --features runtime-benchmarks benchmarking
cargo test --release --locked -p pallet-drilling --features runtime-benchmarks benchmarking

step "build ergon-node (release; includes the wasm32v1-none runtime)"
cargo build --release --locked -p ergon-node

step "integration tests: real nodes and trainer daemons on loopback, in two lanes"
# The daemon tests run this build's worker (built by the first step, with the attack suite: the
# faults test's cheating trainer). The tests mostly wait for the chain, so they run in two lanes
# (scripts/lib/lanes.sh), balanced by their times here: about 30 minutes each side by side
# (2026-11-27: faults 591 s, dispute 336, lazy_verifiers 387, sybil_validators 468; daemon 433,
# drilling 213, diverge 349, collateral 193, dev_chain 52, data_takedown 324, availability 100,
# local_network 92). The faults-and-load test leaves the final
# state of its 4-validator network in the snapshot, for try_state below.
source scripts/lib/lanes.sh
snapshot="$CARGO_TARGET_DIR/ergon-live-snapshot.json"
rm -f "$snapshot"
cargo test --release --locked -p ergon-integration-tests --lib
ERGON_SNAPSHOT_OUT="$snapshot" run_lanes --release --locked -p ergon-integration-tests -- \
    "faults dispute lazy_verifiers sybil_validators" \
    "daemon drilling diverge collateral dev_chain data_takedown availability local_network"

step "chain client (subxt, generated from the runtime's metadata)"
cargo test --release --locked -p ergon-client

step "runtime tests (Proof-of-Hashrate weights, genesis bonds, equivocation slashing, block shares, the client's metadata is current; native only)"
SKIP_WASM_BUILD=1 cargo test --release --locked -p ergon-runtime --features try-runtime

step "try_state of every pallet on the live network's final state (after its faults and load)"
ERGON_SNAPSHOT="$snapshot" SKIP_WASM_BUILD=1 \
    cargo test --release --locked -p ergon-runtime --features try-runtime snapshot -- --ignored

step "container images and the compose smoke test (skipped where no docker daemon runs)"
scripts/docker.sh --if-available
