# The one launcher of the 4-validator `--chain local` network on loopback (Alice, Bob, Charlie, Dave),
# sourced by scripts/devnet.sh and the bench scripts. Node keys are fixed (0x…01…04) so Alice's peer
# ID, the others' bootnode, is known in advance: dev use only.
#
# The RPC stays safe: it listens on 127.0.0.1 only (the node's default), where `--rpc-methods auto`
# serves the unsafe methods to local callers alone, and CORS keeps the node's default origins
# (localhost and polkadot.js.org apps), never `--rpc-cors all`.
#
#   start_validator I WORK P2P_BASE RPC_BASE PROM_BASE   node I (0..3) on ports BASE+I, state under
#                                                        WORK/<name>, log WORK/<name>.log; its pid in
#                                                        $! ; needs $node (the ergon-node binary)
#   start_localnet WORK P2P_BASE RPC_BASE PROM_BASE      the four, their pids appended to `pids`
#   start_validator_worker I WORK RPC_BASE BUNDLE_PORT METRICS_PORT ROLES
#                                                        validator I's trainer daemon (`ergon-worker
#                                                        run`, dev key //Name) against its own node,
#                                                        data under WORK/<name>-worker, log
#                                                        WORK/<name>-worker.log; its pid in $! ;
#                                                        needs $worker (the ergon-worker binary)

localnet_names=(alice bob charlie dave)
localnet_alice_peer_id="12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp"

start_validator() {
    local i="$1" work="$2" p2p="$3" rpc="$4" prom="$5" name="${localnet_names[$1]}" args
    args=(--chain local "--$name" --validator --base-path "$work/$name"
        --node-key "$(printf '%064x' $((i + 1)))" --port $((p2p + i)) --rpc-port $((rpc + i))
        --prometheus-port $((prom + i)) --no-telemetry --no-mdns)
    [ "$i" -eq 0 ] || args+=(--bootnodes "/ip4/127.0.0.1/tcp/$p2p/p2p/$localnet_alice_peer_id")
    "$node" "${args[@]}" >>"$work/$name.log" 2>&1 &
}

start_localnet() {
    local i
    for i in 0 1 2 3; do
        start_validator "$i" "$@"
        pids+=($!)
    done
}

start_validator_worker() {
    local i="$1" work="$2" rpc="$3" bundle_port="$4" metrics_port="$5" roles="$6"
    local name="${localnet_names[$1]}"
    mkdir -p "$work/$name-worker"
    ERGON_CHAIN="ws://127.0.0.1:$((rpc + i))" ERGON_DEV_KEY="//${name^}" ERGON_ROLES="$roles" \
        ERGON_LISTEN="127.0.0.1:$bundle_port" ERGON_METRICS="127.0.0.1:$metrics_port" \
        ERGON_DATA_DIR="$work/$name-worker" RUST_LOG="${RUST_LOG:-info}" \
        "$worker" run >>"$work/$name-worker.log" 2>&1 &
}
