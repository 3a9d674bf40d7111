#!/usr/bin/env bash
# Training throughput of ergon-worker against PyTorch (a benchmark, not a test).
#
# For the Fashion-MNIST MLP and CNN examples and the char transformer: samples/s of the example's training
# in ergon-worker and in PyTorch (CPU, from PyPI) on the same files, model, batch size, optimizer and thread
# count, measured in this run and printed as a ratio; and the share of ergon-worker's training time its
# training thread spends on checkpoints (copying the state; the files are written beside the training) at
# the example's checkpoint interval. Targets (issue 17): MLP ≥ 1.0×, CNN ≥ 0.8×, checkpoints ≤ 5 %.
#
# PyTorch goes into a virtual environment under ~/.cache/ergon-bench (a large download the first time).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
threads="${THREADS:-$(nproc)}"
venv="$HOME/.cache/ergon-bench/venv"

scripts/setup.sh >/dev/null
cargo build --release --locked -p ergon-worker
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch, numpy" 2>/dev/null; then
    echo "[bench] installing PyTorch from PyPI into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q torch numpy
fi
worker="$CARGO_TARGET_DIR/release/ergon-worker"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

printf '\n%-18s %12s %12s %8s %12s %10s\n' model "ergon (s/s)" "torch (s/s)" ratio checkpoints accuracy
for model in ${MODELS:-fashion-mnist-mlp fashion-mnist-cnn char-transformer}; do
    spec="worker/examples/$model.json"
    out="$("$worker" train --spec "$spec" --out "$work/$model" --threads "$threads" --quiet 2>/dev/null)"
    ergon=$(sed -n 's/^throughput \([0-9]*\) samples.*/\1/p' <<<"$out")
    ckpt=$(sed -n 's/.*(\([0-9.]*\)% of it on checkpoints).*/\1/p' <<<"$out")
    acc=$(sed -n 's/.*accuracy \([0-9.]*%\).*/\1/p' <<<"$out")
    torch=$("$venv/bin/python" scripts/lib/torch_train.py "$spec" "$threads" | sed -n 's/^throughput \([0-9]*\) samples.*/\1/p')
    ratio=$(python3 -c "print(f'{$ergon / $torch:.2f}x')")
    printf '%-18s %12s %12s %8s %11s%% %10s\n' "$model" "$ergon" "$torch" "$ratio" "$ckpt" "$acc"
done
echo "(threads: $threads; ratio = ergon / torch; checkpoints = share of training time spent writing them)"
