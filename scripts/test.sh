#!/usr/bin/env bash
# The test command of the README: installs what is missing, builds the node, runs every test suite,
# then prints a table of each step's wall time and one closing line `N passed, M failed`.
#
#   scripts/test.sh           everything (CI runs this, through .ci/run)
#   scripts/test.sh --quick   the edit-test loop: protocol crates, engine and pallets; no node
#                             build, no processes
#
# Each suite is its own cargo invocation on purpose: cargo unifies features across the packages of one
# invocation, so testing the integration harness (a client-side graph) together with the node would
# rebuild the node's ~1,000 dependencies with other features.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"

quick=false
case "${1:-}" in
    "") ;;
    --quick) quick=true ;;
    -h | --help)
        sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "scripts/test.sh: unknown argument $1 (try --help)" >&2
        exit 2
        ;;
esac

source scripts/lib/steps.sh

setup() {
    scripts/setup.sh
    if ! $quick; then
        # The integration tests drive the user CLI (polkadot.js) too.
        source scripts/lib/client.sh
        install_client
        install_web
        # The engine's Hugging Face round trip compares with transformers itself.
        source scripts/lib/hf.sh
        install_hf
    fi
}

protocol_crates() {
    cargo test --release --locked -p ergon-job-spec -p ergon-bundle -p ergon-drill -p ergon-protocol
    # These crates are shared with the runtime: they must build without std for the wasm target.
    cargo build --release --locked --target wasm32v1-none -p ergon-job-spec -p ergon-bundle \
        -p ergon-drill -p ergon-protocol --no-default-features
}

engine_and_worker() {
    source scripts/lib/hf.sh
    ERGON_HF_PYTHON="$(hf_python)" ERGON_HF_TOKENIZER="$(hf_tokenizer)" \
        cargo test --release --locked -p ergon-engine -p ergon-worker --features ergon-worker/attacks
}

# The same target directory as the CPU build: the CUDA worker shares all but a few dozen of its
# ~570 crates with it (a separate directory built them all a second time). The CUDA binary replaces
# target/release/ergon-worker while this step runs; on the way out, the trap puts the CPU build
# (with the attack suite, which the integration tests run) back: cargo links the fresh artifact
# again without compiling anything. Without a GPU, the tests run against the driver stub, which
# answers "no device": the unit tests (device choice, the CUDA-graph stepper's eager fallback), the
# worker's command-line tests on the CUDA binary's CPU path (a training killed and resumed gives the
# same root; bad input is an error message), and the binary's `check`. The engine's other
# integration tests would run the same CPU code as the step before, so they run there only.
#
# One invocation builds the binary (for the command-line tests) and the unit tests: as a `cargo
# build` and a `cargo test`, the dev-dependencies' features made two graphs, and candle's CUDA
# backend, the engine and the worker were compiled twice (`cargo build --unit-graph`).
cuda_worker() {
    source "$(scripts/setup-cuda.sh)"
    trap 'cargo test --release --locked -p ergon-engine -p ergon-worker \
        --features ergon-worker/attacks --no-run || exit 1' EXIT
    LD_LIBRARY_PATH="$ERGON_CUDA_TEST_LIBRARY_PATH" \
        cargo test --release --locked -p ergon-engine -p ergon-worker --features ergon-worker/cuda \
        --lib --test cli
    LD_LIBRARY_PATH="$ERGON_CUDA_TEST_LIBRARY_PATH" \
        "$CARGO_TARGET_DIR/release/ergon-worker" check --spec worker/examples/fashion-mnist-mlp.json
}

# The pallets' tests and their benchmarks (each run once in the mock runtime, so they keep compiling
# and working) in one invocation: as two (the tests, then the benchmarks' feature set), cargo built
# the FRAME stack twice, about 65 crates more on a fresh machine (`cargo build --unit-graph`).
#
# `-p ergon-node --lib` builds nothing of the node (it has no library) but gives the pallets' graph
# its features, as the runtime tests' below: the Substrate primitives (sp-core, sp-io, sp-trie,
# their cryptography; ~220 crates by `cargo build --unit-graph`) are then compiled once for the
# pallets, the node and the runtime tests, instead of once for the pallets and again for the node.
pallets() {
    cargo test --release --locked -p pallet-compute-power -p pallet-trainer-staking \
        -p pallet-job-market -p pallet-drilling -p pallet-fresh-randomness -p ergon-timeouts \
        -p ergon-node --lib --features ergon-node/try-runtime \
        --features pallet-trainer-staking/runtime-benchmarks,pallet-job-market/runtime-benchmarks \
        --features pallet-drilling/runtime-benchmarks
}

# The integration tests run on the fast runtime (runtime/src/durations.rs: 1.5 s blocks, 25 s
# epochs, windows of a minute or three), which the harness checks; the demo and the images build
# the production one. With `try-runtime` (hooks that only the try-runtime entry points call: blocks
# are authored and imported as without it), so that the runtime tests below reuse its FRAME stack.
fast_node() {
    cargo build --release --locked -p ergon-node --features fast-runtime,try-runtime
}

# The daemon tests run this build's worker (built by the engine step, with the attack suite: the
# faults test's cheating trainer). The tests mostly wait for the chain, so they run in three lanes
# (scripts/lib/lanes.sh), balanced by their times (docs/testing.md). The faults-and-load test
# leaves the final state of its 4-validator network in the snapshot, for try_state below.
#
# Once the lanes' binaries are built, the builds beside them start (builds_beside, below): the lanes
# leave ~60 % of 2 cores idle (vmstat, 2026-11-29), which they take at the lowest priority. The
# lanes run a copy of the worker, since the CUDA build replaces the target directory's.
snapshot="$CARGO_TARGET_DIR/ergon-live-snapshot.json"
integration() {
    source scripts/lib/lanes.sh
    rm -f "$snapshot"
    cargo test --release --locked -p ergon-integration-tests --lib
    mkdir -p "$CARGO_TARGET_DIR/lanes"
    cp "$CARGO_TARGET_DIR/release/ergon-worker" "$CARGO_TARGET_DIR/lanes/ergon-worker"
    ERGON_WORKER="$CARGO_TARGET_DIR/lanes/ergon-worker" LANES_AFTER_BUILD=start_builds_beside \
        ERGON_SNAPSHOT_OUT="$snapshot" run_lanes --release --locked -p ergon-integration-tests -- \
        "faults lazy_verifiers drilling dev_chain fine_tune draw_prediction" \
        "daemon dispute sybil_validators web availability" \
        "data_takedown diverge local_network collateral user_cli"
}

# The web page: the bundle check compiled to WebAssembly (and its native unit tests), the page built
# with Vite into web/dist, which the web integration test serves to headless Chromium.
web_page() {
    cargo test --release --locked -p ergon-bundle-check
    (cd web && npm run build)
}

chain_client() {
    cargo test --release --locked -p ergon-client "$@"
}

# The polkadot.js client's own rules (units against the protocol's test vectors, amounts, keys, the
# RPC answers' types); its live tests are integration tests (user_cli, daemon).
js_client() {
    node --test scripts/client/test/*.test.mjs
}

# Natively, against the production runtime: Proof-of-Hashrate weights, genesis bonds, equivocation
# slashing, block shares, the durations table, the client's metadata is current.
#
# `-p ergon-node --lib` selects no target of the node (it has none of that kind) but brings its
# features into the invocation's graph: the runtime's dependencies then have the fast node's features
# (the node is built with try-runtime for this) and are reused from its build. Alone, the runtime's
# graph differs from the node's in ~220 crates (sp-core, sp-io, sp-runtime, frame-support and their
# dependents: `cargo build --unit-graph`), which a fresh machine compiled a second time (~12 minutes).
runtime_graph=(-p ergon-runtime -p ergon-node --lib)
runtime_tests() {
    SKIP_WASM_BUILD=1 cargo test --release --locked "${runtime_graph[@]}" \
        --example verification_network --features ergon-runtime/try-runtime,ergon-node/try-runtime "$@"
}

# try_state of every pallet on the live network's final state (after its faults and load), with
# the runtime that produced it.
live_try_state_build() {
    SKIP_WASM_BUILD=1 cargo test --release --locked "${runtime_graph[@]}" \
        --features ergon-runtime/try-runtime,ergon-runtime/fast-runtime,ergon-node/try-runtime "$@"
}
live_try_state() {
    ERGON_SNAPSHOT="$snapshot" live_try_state_build -- --include-ignored snapshot durations
}

# Beside the integration tests: the CUDA step (in a subshell: its toolchain's environment stays
# there), then the test binaries of the steps after them (built only; those steps run them).
builds_beside() {
    (cuda_worker)
    chain_client --no-run
    runtime_tests --no-run
    live_try_state_build --no-run
}
beside_name="beside the integration tests: the worker's CUDA build (CUDA 13.0 from PyPI wheels, \
no GPU needed) and its tests on the CPU path; the test binaries of the steps after them"
start_builds_beside() { start_step_beside builds_beside; }

containers() {
    scripts/docker.sh --if-available
}

run_step "setup (toolchain, system packages, the polkadot.js client)" setup
run_step "job spec, bundle commitment, drilling workloads, protocol rules (+ no_std build)" \
    protocol_crates
if $quick; then
    run_step "engine (training, verifier, attack suite)" \
        cargo test --release --locked -p ergon-engine --features ergon-engine/attacks --lib
    run_step "pallets (mock runtimes) and their benchmarks" pallets
    steps_summary
    exit
fi
run_step "engine (training, verifier, attack suite), worker and daemon" engine_and_worker
run_step "pallets (mock runtimes) and their benchmarks" pallets
run_step "build ergon-node with the fast runtime (wasm32v1-none and native)" fast_node
run_step "the web page (WebAssembly bundle check, Vite build)" web_page
run_step "integration tests: real nodes and trainer daemons on loopback, in three lanes" integration
finish_step_beside "$beside_name" builds_beside
run_step "chain client (subxt, generated from the runtime's metadata)" chain_client
run_step "user client (polkadot.js), offline" js_client
run_step "runtime tests (production runtime, native)" runtime_tests
run_step "try_state on the live network's final state (fast runtime, native)" live_try_state
run_step "container images and the compose smoke test (skipped without docker)" containers
steps_summary
