#!/usr/bin/env bash
# A 4-validator Ergon network on loopback (Alice, Bob, Charlie, Dave; `--chain local`).
#
#   scripts/devnet.sh start     start the four validators (builds ergon-node if needed)
#   scripts/devnet.sh status    show which of them run and their best/finalized block
#   scripts/devnet.sh stop      stop exactly the processes `start` launched
#
# Ports: node i (0..3) listens for p2p on 30333+i, RPC (HTTP + WebSocket) on 9944+i, Prometheus on 9615+i.
# State lives in $ERGON_DEVNET_DIR (default: ./target-devnet), logs in $ERGON_DEVNET_DIR/logs.
# Node keys are fixed (0x…01 to 0x…04) so the peer IDs are known in advance: dev use only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${ERGON_DEVNET_DIR:-$here/target-devnet}"
target="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
node_bin="${ERGON_NODE:-$target/release/ergon-node}"
names=(alice bob charlie dave)
# libp2p peer ID of the ed25519 node key 0x00…01 (Alice's), the others' bootnode.
alice_peer_id="12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp"

node_key() { printf '%064x' "$(($1 + 1))"; }

start() {
    if [ ! -x "$node_bin" ]; then
        echo "[devnet] building ergon-node (release)…"
        (cd "$here" && CARGO_TARGET_DIR="$target" cargo build --release -p ergon-node)
    fi
    mkdir -p "$dir/logs"
    for i in "${!names[@]}"; do
        name="${names[$i]}"
        pidfile="$dir/$name.pid"
        if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            echo "[devnet] $name already runs (pid $(cat "$pidfile"))"
            continue
        fi
        args=(--chain local --"$name" --validator
            --base-path "$dir/$name" --node-key "$(node_key "$i")"
            --port $((30333 + i)) --rpc-port $((9944 + i)) --prometheus-port $((9615 + i))
            --rpc-cors all --no-mdns --no-telemetry)
        if [ "$i" -ne 0 ]; then
            args+=(--bootnodes "/ip4/127.0.0.1/tcp/30333/p2p/$alice_peer_id")
        fi
        "$node_bin" "${args[@]}" >"$dir/logs/$name.log" 2>&1 &
        echo $! >"$pidfile"
        echo "[devnet] $name: pid $!, rpc ws://127.0.0.1:$((9944 + i)), log $dir/logs/$name.log"
    done
}

stop() {
    for name in "${names[@]}"; do
        pidfile="$dir/$name.pid"
        [ -f "$pidfile" ] || continue
        pid="$(cat "$pidfile")"
        # Only signal the process if it is still the ergon-node we started.
        if kill -0 "$pid" 2>/dev/null && grep -q ergon-node "/proc/$pid/cmdline" 2>/dev/null; then
            kill "$pid"
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
            echo "[devnet] stopped $name (pid $pid)"
        fi
        rm -f "$pidfile"
    done
}

rpc() {
    curl -s -H 'Content-Type: application/json' \
        -d "{\"id\":1,\"jsonrpc\":\"2.0\",\"method\":\"$2\",\"params\":[$3]}" "http://127.0.0.1:$1"
}

status() {
    for i in "${!names[@]}"; do
        name="${names[$i]}"
        port=$((9944 + i))
        if [ -f "$dir/$name.pid" ] && kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null; then
            best=$(rpc "$port" chain_getHeader "" | sed -n 's/.*"number":"\(0x[0-9a-f]*\)".*/\1/p')
            fin_hash=$(rpc "$port" chain_getFinalizedHead "" | sed -n 's/.*"result":"\(0x[0-9a-f]*\)".*/\1/p')
            fin=$(rpc "$port" chain_getHeader "\"$fin_hash\"" | sed -n 's/.*"number":"\(0x[0-9a-f]*\)".*/\1/p')
            echo "$name: running, best #$((best)), finalized #$((fin))"
        else
            echo "$name: stopped"
        fi
    done
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
*) echo "usage: $0 start|status|stop" >&2; exit 2 ;;
esac
