#!/usr/bin/env bash
# The main job of the README: a development chain and three trainer daemons doing a real training job
# end to end, with no script choreographing them.
#
# Sets up the machine, builds the node and the worker, starts a dev chain (Alice validating, temporary
# state, RPC on ws://127.0.0.1:9944) and three `ergon-worker run` daemons: Bob as a trainer (bundles
# served on BUNDLE_PORT, default 8700), Charlie and Dave as verifiers and drillers. Each bonds 2 000 ERG on its own
# (the verifiers join the pool). Then Alice, as a user, posts the Fashion-MNIST job with the user
# command line (scripts/client/ergon.mjs post-job) and watches it to settlement (watch-job): Bob's
# daemon bids, wins the job when the bid window closes, trains it, serves and commits the bundle;
# the validator's offchain worker attests it is available; the chain draws the verifiers, whose
# daemons replay their segments, commit and reveal; Bob is paid and credited. Finally fetch-model
# downloads the model, checks it against the committed root and prints its accuracy. The daemons'
# logs are interleaved, prefixed with their names. The chain and the daemons keep running afterwards
# for polkadot.js apps (Ctrl-C stops them); DEMO_EXIT=1 stops right after the job.
# Another spec: scripts/demo.sh path/to/spec.json
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
spec="$(realpath "${1:-worker/examples/fashion-mnist-mlp.json}")"

scripts/setup.sh
source scripts/lib/client.sh
install_client
# Two invocations: built together, cargo would unify their features and rebuild both from scratch.
cargo build --release --locked -p ergon-node
cargo build --release --locked -p ergon-worker

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "[demo] starting a dev chain (log: $work/node.log)"
"$CARGO_TARGET_DIR/release/ergon-node" --dev --tmp --rpc-port 9944 > "$work/node.log" 2>&1 &
node_pid=$!
pids+=("$node_pid")
for _ in $(seq 60); do
    curl -sf -H 'Content-Type: application/json' \
        -d '{"id":1,"jsonrpc":"2.0","method":"system_health","params":[]}' \
        http://127.0.0.1:9944 > /dev/null && break
    kill -0 "$node_pid" 2>/dev/null || { tail -20 "$work/node.log"; exit 1; }
    sleep 1
done

# daemon NAME ROLES PORT: `ergon-worker run` for the dev account //NAME, its log prefixed with its name.
# The trainer asks 100 ERG per ut, so that the demo's amounts read in whole ERG (the job's price
# 8.48 ERG); a daemon without ERGON_PRICE_PER_UT bids the chain's floor (0.05 ERG per ut on a CPU).
daemon() {
    local name="$1" roles="$2" port="$3"
    mkdir -p "$work/$name"
    ERGON_DEV_KEY="//${name^}" ERGON_ROLES="$roles" ERGON_LISTEN="127.0.0.1:$port" \
        ERGON_DATA_DIR="$work/$name" ERGON_BOND=2000 ERGON_PRICE_PER_UT="${ERGON_PRICE_PER_UT:-100}" \
        RUST_LOG="${RUST_LOG:-info}" \
        "$CARGO_TARGET_DIR/release/ergon-worker" run > >(sed -u "s/^/[$name] /" > "$work/$name.log") 2>&1 &
    pids+=("$!")
}
daemon bob trainer "${BUNDLE_PORT:-8700}"
daemon charlie verifier,driller 0
daemon dave verifier,driller 0
tail -q -n +1 -F "$work/bob.log" "$work/charlie.log" "$work/dave.log" 2> /dev/null | grep --line-buffered -v -e '^==>' -e '^$' &
pids+=("$!")

echo "[demo] waiting for the daemons to bond and the verifiers to join the pool"
for name in charlie dave; do
    for _ in $(seq 120); do
        grep -q "joining the verifier pool: in a block" "$work/$name.log" && break
        sleep 1
    done
done

cli() { node scripts/client/ergon.mjs "$@"; }
echo "[demo] Alice posts the job ($spec) with 100 ERG in escrow"
posted="$(cli post-job "$spec" --key //Alice --budget 100 --bid-window 20 --deadline 600 --yes --json)"
job="$(python3 -c 'import json, sys; print(json.load(sys.stdin)["jobs"][0])' <<< "$posted")"
echo "[demo] watching job $job until it settles (the verifier draw waits for the VRF outputs of 16 blocks after the commitment, about 96 s, and for the verifiers' slots, which join the draw at the end of the chain's 5-minute pool epoch)"
cli watch-job "$job"
echo "[demo] fetching the trained model"
cli fetch-model "$job" --out "$work/model"

if [ "${DEMO_EXIT:-0}" != 1 ]; then
    echo "[demo] the chain and the daemons keep running: connect polkadot.js apps to ws://127.0.0.1:9944 (Ctrl-C stops them)"
    wait "$node_pid"
fi
