#!/usr/bin/env bash
# The main job of the README: set up the machine, build the node and run a development chain
# (Alice as the only validator, temporary state, RPC on ws://127.0.0.1:9944).
#
# A later milestone extends this into the full demo: a worker taking a training job end to end.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"

scripts/setup.sh
cargo build --release --locked -p ergon-node
echo "[demo] starting a dev chain: connect polkadot.js apps to ws://127.0.0.1:9944 (Ctrl-C stops it)"
exec "$CARGO_TARGET_DIR/release/ergon-node" --dev --tmp --rpc-cors all "$@"
