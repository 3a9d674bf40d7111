#!/usr/bin/env bash
# Measures the chain itself (a benchmark, not a test):
#   1. dev chain: mean block time and empty-slot rate over 20 blocks (from BABE slot numbers);
#   2. 4-validator local network: wall time from start to the first finalized block.
# Expected with slot 2 s and c = 1/3: 6 s per block, 2/3 of slots empty.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
. scripts/lib/localnet.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
node="$CARGO_TARGET_DIR/release/ergon-node"
# Always built: the target directory's node may be the test build with the fast runtime
# (scripts/test.sh); the benchmark measures the production one (cargo only relinks if it is).
cargo build --release --locked -p ergon-node
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
blocks="${BLOCKS:-20}"

echo "== dev chain: block time over $blocks blocks"
"$node" --dev --tmp --rpc-port 19944 --port 31333 --prometheus-port 19615 --no-telemetry --no-mdns \
    >"$work/dev.log" 2>&1 &
pids+=($!)
python3 - "$blocks" <<'PY'
import sys, time
sys.path.insert(0, "scripts/lib")
from chain_stats import *
n = int(sys.argv[1])
wait_rpc(19944)
# Skip block 1 (its slot is relative to genesis, not to a previous block).
while best_number(19944) < n + 2:
    time.sleep(1)
s = block_stats(19944, 2, n + 2)
print(f"blocks {s['blocks']}, slots {s['slots']}, mean block time {s['mean_block_time_s']:.2f} s "
      f"(target 6.00 s), empty-slot rate {s['empty_slot_rate']:.3f} (expected 0.667)")
PY
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true; pids=()

echo "== local network (4 validators): time to first finalized block"
start=$(date +%s.%N)
start_localnet "$work" 31340 19950 19620
python3 - "$start" <<'PY'
import sys, time
sys.path.insert(0, "scripts/lib")
from chain_stats import *
start = float(sys.argv[1])
for p in range(19950, 19954):
    wait_rpc(p)
rpc_up = time.time() - start
while True:
    try:
        if all(finalized_number(p) >= 1 for p in range(19950, 19954)):
            break
    except Exception:
        pass
    time.sleep(0.25)
print(f"RPC up after {rpc_up:.1f} s; first block finalized on all 4 nodes after {time.time() - start:.1f} s")
PY
