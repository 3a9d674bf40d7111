#!/usr/bin/env bash
# Measures the weights of Ergon's pallets with frame-benchmarking and regenerates their `weights.rs`
# (a benchmark, not a test). Builds `ergon-node --features runtime-benchmarks` (the `benchmark pallet`
# subcommand; the runtime's benchmark API), runs every benchmark of each pallet in the wasm runtime
# (compiled execution) over STEPS component values (default 50) with REPEAT repetitions (default 20),
# and writes the linear fit through `scripts/weights-template.hbs`. Then prints each call's weight as
# a share of a block and how many fit in one (the runtime test `weights_fit_in_a_block`). Set PALLETS to limit the run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
steps="${STEPS:-50}"
repeat="${REPEAT:-20}"
pallets="${PALLETS:-pallet_trainer_staking pallet_job_market pallet_drilling}"

# frame-benchmarking-cli's storage-benchmark test runtime cannot build its wasm from the registry, and
# `benchmark pallet` does not use it.
SKIP_FRAME_STORAGE_ACCESS_TEST_RUNTIME_WASM_BUILD=1 \
    cargo build --release --locked -p ergon-node --features runtime-benchmarks
# Keep the benchmarking build apart: the next plain build puts the ordinary node back in place.
bench_node="$CARGO_TARGET_DIR/release/ergon-node-benchmarks"
cp "$CARGO_TARGET_DIR/release/ergon-node" "$bench_node"

for pallet in $pallets; do
    dir="pallets/$(echo "${pallet#pallet_}" | tr _ -)"
    echo "== $pallet -> $dir/src/weights.rs (steps $steps, repeat $repeat)"
    "$bench_node" benchmark pallet \
        --chain dev \
        --pallet "$pallet" \
        --extrinsic '*' \
        --steps "$steps" \
        --repeat "$repeat" \
        --wasm-execution compiled \
        --heap-pages 4096 \
        --template scripts/weights-template.hbs \
        --json-file "$CARGO_TARGET_DIR/weights-$pallet.json" \
        --output "$dir/src/weights.rs"
done

# Each call's weight as a share of a block, with the regenerated weights compiled in.
SKIP_WASM_BUILD=1 cargo test --release --locked -p ergon-runtime weights_ -- --nocapture
