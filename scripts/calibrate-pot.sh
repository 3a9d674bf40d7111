#!/usr/bin/env bash
# Calibrates the verifier's replay tolerances ε (relative error) and τ (cosine) on honest runs:
# an example (MODEL, default fashion-mnist-mlp; also fashion-mnist-cnn, char-transformer, gpt2-tiny,
# gpt2-tiny-bf16, llama-tiny — or any spec file, SPEC=path) trained with
# SEEDS seeds (default 10) on 1 and on 2 threads, each bundle verified on the *other* thread count with
# ten segments replayed. Prints one line per run
# and the extremes; docs/pot-calibration.md records a run of it. Needs Debian's dataset-fashion-mnist
# (scripts/setup.sh installs it).
#
# VERIFIER=<path of another ergon-worker binary> verifies with that build instead, to measure the
# spread between two builds' kernels. gemm's AVX-512 kernels against the AVX2 ones the worker uses
# (on a CPU with AVX-512):
#   CARGO_TARGET_DIR=/tmp/avx512 cargo build --release -p ergon-worker --features avx512
#   VERIFIER=/tmp/avx512/release/ergon-worker scripts/calibrate-pot.sh
# WORKER=<path> trains with that binary instead of building the default one.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
if [ -n "${WORKER:-}" ]; then
    worker="$WORKER" # a build made beforehand (another feature set, say): trains
else
    cargo build --release --locked -p ergon-worker
    worker="$CARGO_TARGET_DIR/release/ergon-worker"
fi
verifier="${VERIFIER:-$worker}"
spec=${SPEC:-worker/examples/${MODEL:-fashion-mnist-mlp}.json}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
all_segments="$(seq -s, 0 9)"

echo "seed train-threads verify-threads worst-relative-error worst-cosine verdict"
for s in $(seq 1 "${SEEDS:-10}"); do
    seed="$(printf '%064x' "$s")"
    for t in 1 2; do
        v=$((3 - t))
        out="$work/$s-$t"
        "$worker" train --spec "$spec" --out "$out" --seed "$seed" --threads "$t" --quiet > /dev/null 2>&1
        "$verifier" verify --spec "$spec" --bundle "$out" --seed "$seed" --threads "$v" \
            --segments "$all_segments" --epsilon=1 --tau=-1 > "$out.txt" || true
        echo "$s $t $v $(python3 scripts/lib/replay_error.py "$out.txt")"
        rm -rf "$out"
    done
done | tee "$work/lines"
python3 - "$work/lines" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l[0].isdigit()]
print(f"\n{len(rows)} honest runs: largest relative error {max(float(r[3]) for r in rows):.3e}, "
      f"smallest cosine {min(float(r[4]) for r in rows):.9f}")
PY
