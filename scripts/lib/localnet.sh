# Sourced by the bench scripts: start_localnet WORKDIR P2P_BASE RPC_BASE PROM_BASE starts the four
# `--chain local` validators (Alice…Dave) on loopback, node i on ports BASE+i, and appends their pids
# to the caller's `pids` array. Node keys are fixed (0x…01…04) so Alice's peer ID is known.
start_localnet() {
    local work="$1" p2p="$2" rpc="$3" prom="$4" names=(alice bob charlie dave) i args
    for i in 0 1 2 3; do
        args=(--chain local "--${names[$i]}" --validator --base-path "$work/${names[$i]}"
            --node-key "$(printf '%064x' $((i + 1)))" --port $((p2p + i)) --rpc-port $((rpc + i))
            --prometheus-port $((prom + i)) --no-telemetry --no-mdns)
        [ "$i" -eq 0 ] || args+=(--bootnodes "/ip4/127.0.0.1/tcp/$p2p/p2p/12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp")
        "$node" "${args[@]}" >"$work/${names[$i]}.log" 2>&1 &
        pids+=($!)
    done
}
