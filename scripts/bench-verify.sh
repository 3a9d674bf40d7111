#!/usr/bin/env bash
# What verifying a GPT-shaped job costs against its training (a benchmark, not a test; issue 37,
# item 3), measured on this machine's CPU and projected to GPT-2 small with the formulas of
# docs/protocol.md (*Bytes a verification moves*).
#
# Trains the GPT-small shape at a size a CPU trains in minutes (scripts/lib/gpt_small_spec.py:
# GPT_BLOCKS 2 blocks of GPT_DIM 64 in 4 heads, MLP 256, T 64, batch 32, AdamW) for ≥ 1 000 steps
# (EPOCHS, default 41, on 64 KiB of this repository's text) with a checkpoint every INTERVAL steps
# (default 9: about 110 segments, the GPT-2-small job's cadence); serves the bundle on loopback
# (`ergon-worker serve`) and verifies it as a round's SEATS (default 3) seats do, each replaying 4
# segments (spread over the bundle) and downloading what it reads. Prints, measured in this run:
#   - the training: seconds, and the share its training thread spends on checkpoints (copying the
#     state; the files are written beside the training): target ≤ 5 %;
#   - each vote: seconds (download, reading, replay, rules, metrics: the whole command), its replay
#     alone, bytes downloaded against the formula D_v, verdict; a vote's seconds against the
#     training's (target ≤ 5 %), and the round's (SEATS votes: target ≤ 15 %);
# then the projection to GPT-2 small on a GPU (P = 124.4 M, N = 110, r = 4): the replay's share
# r/N, the evaluation's share (the chain's `overhead`, as simulate-network.sh prints it), the
# download of D_v at 1 Gbit/s against the training's hours at the class's throughput, and the
# checkpoint copies at PCIE_GBPS (an assumption, default 20 GB/s) against the steps between them.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
worker="${WORKER:-$CARGO_TARGET_DIR/release/ergon-worker}"
[ -x "$worker" ] || cargo build --release --locked -p ergon-worker
seats="${SEATS:-3}"
threads="${THREADS:-$(nproc)}"
port="${PORT:-18790}"

work="$(mktemp -d)"
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

head -c 65536 docs/protocol.md > "$work/text.txt"
root="$("$worker" content-root "$work/text.txt")"
GPT_DIM="${DIM:-64}" GPT_HEADS=4 GPT_HIDDEN=$((4 * ${DIM:-64})) GPT_BLOCKS="${BLOCKS:-2}" \
    GPT_EPOCHS="${EPOCHS:-41}" GPT_INTERVAL="${INTERVAL:-9}" \
    python3 scripts/lib/gpt_small_spec.py "$work/text.txt" "$root" 64 32 "$work/spec.json"

"$worker" check --spec "$work/spec.json" --json > "$work/check.json"
echo "training (threads: $threads) ..." >&2
"$worker" train --spec "$work/spec.json" --out "$work/bundle" --seed "$(printf '07%.0s' {1..32})" \
    --threads "$threads" --json > "$work/train.json"

"$worker" serve --dir "$work" --addr "127.0.0.1:$port" > "$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 50); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/bundle/manifest.json" && break
    sleep 0.1
done

segments=$(python3 -c "import json; print(json.load(open('$work/train.json'))['checkpoints'] - 1)")
for seat in $(seq "$seats"); do
    # Seat k replays 4 segments spread over the bundle, none shared with another seat.
    list=$(python3 -c "n=$segments; k=$seat; print(','.join(str((k * 7 + j * n // 4) % n) for j in range(4)))")
    echo "vote $seat: segments $list ..." >&2
    "$worker" verify --spec "$work/spec.json" --bundle "http://127.0.0.1:$port/bundle" \
        --seed "$(printf '07%.0s' {1..32})" --segments "$list" --threads "$threads" --json \
        > "$work/vote-$seat.json" || true
done

python3 - "$work" "$seats" <<'EOF'
import json, sys
work, seats = sys.argv[1], int(sys.argv[2])
t = json.load(open(f"{work}/train.json"))
evaluation_share = json.load(open(f"{work}/check.json"))["evaluation_ppb"] / 1e9
votes = [json.load(open(f"{work}/vote-{k}.json")) for k in range(1, seats + 1)]
P, N, steps = t["parameters"], t["checkpoints"] - 1, t["steps"]
B = t["checkpoint_bytes"] / t["checkpoints"]
r, k, rule_chunks = 4, 16, 16 * 2**20
# The rules read the same 16 chunks of 1 MiB of each other checkpoint of their sample (at most the
# whole file of a model smaller than that).
d_v = (r + 1) * B + min(N + 1, k) * min(B, rule_chunks)
print(f"GPT-shaped spec: {P} parameters, {steps} steps, {N} segments, checkpoints of {B / 1e6:.2f} MB")
print(f"training                       {t['train_seconds']:.1f} s; checkpoints {100 * t['checkpoint_seconds'] / t['train_seconds']:.2f} % of it (target ≤ 5 %)")
for i, v in enumerate(votes, 1):
    print(f"vote {i}                         {v['seconds']:.2f} s ({100 * v['seconds'] / t['train_seconds']:.2f} % of the training; "
          f"replay {v['replay_seconds']:.2f} s), downloaded {v['downloaded_bytes'] / 1e6:.2f} MB "
          f"(D_v ≤ {d_v / 1e6:.2f} MB + manifest), {'PASS' if v['passed'] else 'FAIL'}")
T = t["train_seconds"]
mean = sum(v["seconds"] for v in votes) / len(votes)
replayed = sum(v["replay_seconds"] for v in votes) / len(votes)
print(f"a vote / the training          {100 * mean / T:.2f} % (target ≤ 5 %)")
print(f"the round ({seats} votes) / training  {100 * seats * mean / T:.2f} % (target ≤ 15 %)")
# Where a vote's time goes: the replay against r/N of the training (f: a replayed step's cost
# against a trained one's), the rest (start-up, download, reading, rules, metrics) against the
# evaluation the chain prices for this spec (g).
f = (replayed / T) / (r / N)
g = ((mean - replayed) / T) / evaluation_share
print(f"  replay {100 * replayed / T:.2f} % (r/N = {100 * r / N:.2f} %: f = {f:.2f}); the rest "
      f"{100 * (mean - replayed) / T:.2f} % (the chain's evaluation for this spec "
      f"{100 * evaluation_share:.2f} %: g = {g:.2f})")

# GPT-2 small on a GPU, by the formulas (docs/protocol.md) and the chain's own numbers.
# The job of runtime/src/tests.rs (3.67·10⁶ ut, 110 segments) at the GPU class's 1.8·10⁵ ut an
# hour (runtime/src/configs/prices.rs); its vote's work is 3.72 % of the training's, replay and
# evaluation (the chain's `capacity::round_work`, printed by scripts/simulate-network.sh).
P2, N2, work_ut, gpu_ut_h, vote_share = 124.4e6, 110, 3.67e6, 1.8e5, 0.0372
B2 = 12 * P2
hours = work_ut / gpu_ut_h
replay, evaluation = r / N2, vote_share - r / N2
download = ((r + 1) * B2 + k * rule_chunks) / 125e6 / 3600 / hours
pcie = float(__import__("os").environ.get("PCIE_GBPS", "20"))
copy = (N2 + 1) * B2 / (pcie * 1e9) / (hours * 3600)
vote = f * replay + g * evaluation + download
print(f"projected, GPT-2 small on an H200 with Ergon's f32 kernels ({hours:.1f} h of training), with f and g as measured:")
print(f"  a vote: replay {100 * f * replay:.2f} % + the rest {100 * g * evaluation:.2f} % + download of D_v at 1 Gbit/s "
      f"{100 * download:.2f} % = {100 * vote:.2f} % (target ≤ 5 %); the round's 3 votes {300 * vote:.2f} % (≤ 15 %)")
print(f"  checkpoint copies at {pcie:.0f} GB/s: {100 * copy:.3f} % of the training (target ≤ 5 %)")
EOF
