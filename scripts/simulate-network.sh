#!/usr/bin/env bash
# A day of the verification market at network scale (issue 37, item 5; a model, not a test): a pool
# of verifiers of several device classes and GPU-hour jobs arriving all day, drawn with the
# protocol's own draw code and the production runtime's own capacity rules, fees and constants
# (runtime/examples/verification_network.rs). Prints one table: rounds staffed, commit to
# settlement, each class's load and download, and the chain's growth.
#   VERIFIERS (10 000) and JOBS_PER_DAY (1 000) size it; FLOOR_DIVISOR (1) shows the same day with
#   the price floors that many times lower (a what-if).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
# The production runtime, natively (no WebAssembly needed for a model).
SKIP_WASM_BUILD=1 cargo run --release --locked -q -p ergon-runtime --example verification_network -- \
    "${VERIFIERS:-10000}" "${JOBS_PER_DAY:-1000}" "${FLOOR_DIVISOR:-1}"
