#!/usr/bin/env bash
# The main job of the README: a development chain plus a worker doing a real training job end to end.
#
# Sets up the machine, builds the node and the worker, starts a dev chain (Alice validating, temporary
# state, RPC on ws://127.0.0.1:9944), then drives the whole job with polkadot.js
# (scripts/client/demo.mjs): Bob, Charlie and Dave bond; Alice posts the Fashion-MNIST MLP job; Bob
# bids, trains it with ergon-worker, serves the bundle over HTTP (`ergon-worker serve`, port
# BUNDLE_PORT, default 8700) and commits it; Alice's offchain worker attests that it is available;
# the chain draws verifiers who download it and replay segments with `ergon-worker verify`, commit and
# reveal; Bob is paid and credited. The chain keeps
# running afterwards for polkadot.js apps (Ctrl-C stops it); DEMO_EXIT=1 stops right after the job.
# Another spec: scripts/demo.sh path/to/spec.json
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
spec="$(realpath "${1:-worker/examples/fashion-mnist-mlp.json}")"

scripts/setup.sh
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
    echo "[demo] installing nodejs and npm (polkadot.js client)"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
# Two invocations: built together, cargo would unify their features and rebuild both from scratch.
cargo build --release --locked -p ergon-node
cargo build --release --locked -p ergon-worker
(cd scripts/client && npm ci --no-audit --no-fund --loglevel=error)

work="$(mktemp -d)"
node_pid=""
serve_pid=""
cleanup() {
    for pid in $node_pid $serve_pid; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "[demo] starting a dev chain (log: $work/node.log)"
"$CARGO_TARGET_DIR/release/ergon-node" --dev --tmp --rpc-cors all --rpc-port 9944 > "$work/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 60); do
    curl -sf -H 'Content-Type: application/json' \
        -d '{"id":1,"jsonrpc":"2.0","method":"system_health","params":[]}' \
        http://127.0.0.1:9944 > /dev/null && break
    kill -0 "$node_pid" 2>/dev/null || { tail -20 "$work/node.log"; exit 1; }
    sleep 1
done

# Bob's bundles are served over HTTP, where verifiers and the validator's availability checks fetch them.
bundle_addr="127.0.0.1:${BUNDLE_PORT:-8700}"
mkdir -p "$work/bundles"
"$CARGO_TARGET_DIR/release/ergon-worker" serve --dir "$work/bundles" --addr "$bundle_addr" > "$work/serve.log" 2>&1 &
serve_pid=$!

node scripts/client/demo.mjs "$spec" "$CARGO_TARGET_DIR/release/ergon-worker" "$work/bundles" "http://$bundle_addr"

if [ "${DEMO_EXIT:-0}" != 1 ]; then
    echo "[demo] the chain keeps running: connect polkadot.js apps to ws://127.0.0.1:9944 (Ctrl-C stops it)"
    wait "$node_pid"
fi
