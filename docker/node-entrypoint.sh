#!/bin/sh
# Entry point of the ergon-node image: inserts the validator's session keys, then starts the node on
# chain $ERGON_CHAIN_SPEC (default local) with its state in /data and RPC on $ERGON_RPC_PORT; the
# arguments are passed on (default: --validator).
#
#   ERGON_KEY_SEED       secret URI of the session keys: //Alice … on dev networks only
#   ERGON_KEY_SEED_FILE  a file whose first line is that URI (a mounted secret: what a real
#                        validator uses; the URI never appears in the environment or in logs)
#
# The same URI gives the BABE (sr25519), GRANDPA (ed25519), availability-attestation (`ergn`,
# sr25519) and heartbeat (`imon`, sr25519) keys, as the chain's dev genesis expects. Inserting a
# key that is there already is a no-op, so a restart does it again harmlessly.
set -eu

chain="${ERGON_CHAIN_SPEC:-local}"
seed="${ERGON_KEY_SEED:-}"
if [ -n "${ERGON_KEY_SEED_FILE:-}" ]; then
    seed="$(grep -v '^#' "$ERGON_KEY_SEED_FILE" | head -n 1)"
fi
if [ -n "$seed" ]; then
    for key in babe:sr25519 gran:ed25519 ergn:sr25519 imon:sr25519; do
        ergon-node key insert --chain "$chain" --base-path /data \
            --key-type "${key%%:*}" --scheme "${key##*:}" --suri "$seed"
    done
fi
exec ergon-node --chain "$chain" --base-path /data --rpc-port "${ERGON_RPC_PORT:-9944}" "$@"
