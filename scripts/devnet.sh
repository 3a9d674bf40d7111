#!/usr/bin/env bash
# A 4-validator Ergon network on loopback (Alice, Bob, Charlie, Dave; `--chain local`), each validator
# with its trainer daemon beside it: what an operator runs, on one machine.
#
#   scripts/devnet.sh start     start the four validators and their daemons (builds what is missing)
#   scripts/devnet.sh status    which of them run; each node's best and finalized block
#   scripts/devnet.sh stop      stop exactly the processes `start` launched (daemons first)
#
# Ports, node i (0..3): p2p 30333+i, RPC (HTTP + WebSocket, 127.0.0.1 only) 9944+i, Prometheus 9615+i;
# its daemon (`ergon-worker run`, dev key //Name, against node i): bundles 8700+i, metrics 9715+i.
# ERGON_DEVNET_ROLES sets the daemons' roles (default trainer,verifier,driller; `none`: no daemons).
# State lives in $ERGON_DEVNET_DIR (default: ./target-devnet), logs beside it. The nodes and daemons
# are started by the launcher the benchmarks use (scripts/lib/localnet.sh), which keeps the RPC safe.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$here/scripts/lib/localnet.sh"
dir="${ERGON_DEVNET_DIR:-$here/target-devnet}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
node="${ERGON_NODE:-$CARGO_TARGET_DIR/release/ergon-node}"
worker="${ERGON_WORKER:-$CARGO_TARGET_DIR/release/ergon-worker}"
roles="${ERGON_DEVNET_ROLES:-trainer,verifier,driller}"

running() { [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }

start() {
    # Two invocations: built together, cargo would unify their features and rebuild both.
    # Built unless ERGON_NODE names one: the target directory's node may be the test build with the
    # fast runtime (scripts/test.sh), and this network runs the production one.
    [ -n "${ERGON_NODE:-}" ] || (cd "$here" && cargo build --release --locked -p ergon-node)
    [ "$roles" = none ] || [ -x "$worker" ] || (cd "$here" && cargo build --release --locked -p ergon-worker)
    mkdir -p "$dir"
    for i in 0 1 2 3; do
        name="${localnet_names[$i]}"
        if running "$name"; then
            echo "[devnet] $name already runs (pid $(cat "$dir/$name.pid"))"
        else
            start_validator "$i" "$dir" 30333 9944 9615
            echo $! >"$dir/$name.pid"
            echo "[devnet] $name: pid $!, rpc ws://127.0.0.1:$((9944 + i)), log $dir/$name.log"
        fi
    done
    [ "$roles" != none ] || return 0
    for i in 0 1 2 3; do
        name="${localnet_names[$i]}-worker"
        if running "$name"; then
            echo "[devnet] $name already runs (pid $(cat "$dir/$name.pid"))"
        else
            start_validator_worker "$i" "$dir" 9944 $((8700 + i)) $((9715 + i)) "$roles"
            echo $! >"$dir/$name.pid"
            echo "[devnet] $name ($roles): pid $!, metrics http://127.0.0.1:$((9715 + i))/metrics, log $dir/$name.log"
        fi
    done
}

stop() {
    local name pid
    for name in "${localnet_names[@]/%/-worker}" "${localnet_names[@]}"; do
        [ -f "$dir/$name.pid" ] || continue
        pid="$(cat "$dir/$name.pid")"
        # Only signal the process if it is still one we started.
        if kill -0 "$pid" 2>/dev/null && grep -qa -e ergon-node -e ergon-worker "/proc/$pid/cmdline" 2>/dev/null; then
            kill "$pid"
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
            echo "[devnet] stopped $name (pid $pid)"
        fi
        rm -f "$dir/$name.pid"
    done
}

rpc() {
    curl -s -H 'Content-Type: application/json' \
        -d "{\"id\":1,\"jsonrpc\":\"2.0\",\"method\":\"$2\",\"params\":[$3]}" "http://127.0.0.1:$1"
}

status() {
    local i name port best fin_hash fin
    for i in 0 1 2 3; do
        name="${localnet_names[$i]}"
        port=$((9944 + i))
        if running "$name"; then
            best=$(rpc "$port" chain_getHeader "" | sed -n 's/.*"number":"\(0x[0-9a-f]*\)".*/\1/p')
            fin_hash=$(rpc "$port" chain_getFinalizedHead "" | sed -n 's/.*"result":"\(0x[0-9a-f]*\)".*/\1/p')
            fin=$(rpc "$port" chain_getHeader "\"$fin_hash\"" | sed -n 's/.*"number":"\(0x[0-9a-f]*\)".*/\1/p')
            echo "$name: running, best #$((best)), finalized #$((fin))"
        else
            echo "$name: stopped"
        fi
        if running "$name-worker"; then
            echo "$name-worker: running, metrics http://127.0.0.1:$((9715 + i))/metrics"
        else
            echo "$name-worker: stopped"
        fi
    done
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
*) echo "usage: $0 start|status|stop" >&2; exit 2 ;;
esac
