#!/usr/bin/env bash
# Proof-of-Drilling benchmark (a benchmark, not a test): the machine's peak int8 multiply-add rate (a
# tight vectorized loop on every core), the worker's MatmulChain throughput in ut/hour and as a share
# of that peak, and the naive reference as a same-run baseline. DIM (default 512) and LENGTH (16) size
# the task. Not measured yet: the drilling pallet's share of a block per epoch (no pallet yet).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
cargo bench --locked -p ergon-worker --bench drill -- "${DIM:-512}" "${LENGTH:-16}"
