#!/usr/bin/env bash
# Training throughput of ergon-worker on small GPT-2 and Llama configs against PyTorch with
# `transformers` (a benchmark, not a test): the same model (config, tied or untied head, grouped-query
# attention), random token shards, batch size, AdamW hyper-parameters and thread count on the CPU,
# measured in this run and printed as tokens/s and a ratio — in f32, and in bf16 mixed precision
# against PyTorch under `torch.autocast("cpu", dtype=torch.bfloat16)` (PRECISIONS="f32 bf16", the
# default; either alone).
#
# Sizes: SIZE=tiny (width 64, 2 blocks, 64 tokens, vocab 4 096; the default) or SIZE=small (width
# 256, 4 blocks, 128 tokens, GPT-2's vocabulary 50 257). PyTorch and transformers come from the venv
# of scripts/lib/hf.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
threads="${THREADS:-$(nproc)}"
size="${SIZE:-tiny}"
source scripts/lib/hf.sh
install_hf
python="$(hf_python)"
cargo build --release --locked -p ergon-worker
worker="$CARGO_TARGET_DIR/release/ergon-worker"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

case "$size" in
    tiny) dim=64 blocks=2 seq=64 vocab=4096 heads=4 kv=2 samples=512 batch=16 ;;
    small) dim=256 blocks=4 seq=128 vocab=50257 heads=8 kv=4 samples=256 batch=8 ;;
    *) echo "SIZE is tiny or small" >&2; exit 2 ;;
esac

# Random token shards (two files) and the specs, written by Python for both sides to read.
"$python" - "$work" "$dim" "$blocks" "$seq" "$vocab" "$heads" "$kv" "$samples" "$batch" "$worker" <<'PY'
import json, subprocess, sys
import numpy as np
work, dim, blocks, seq, vocab, heads, kv, samples, batch, worker = sys.argv[1:]
dim, blocks, seq, vocab, heads, kv, samples, batch = map(int, (dim, blocks, seq, vocab, heads, kv, samples, batch))
rng = np.random.default_rng(0)
files = []
for i in range(2):
    ids = rng.integers(0, vocab, size=(samples // 2) * seq + 1, dtype=np.uint16)
    path = f"{work}/shard-{i}.bin"
    ids.tofile(path)
    files.append(path)
root = subprocess.run([worker, "content-root", *files], capture_output=True, text=True, check=True).stdout.strip()
data = {"format": {"type": "Tokens", "width": "U16", "vocab_size": vocab, "seq_len": seq},
        "files": files, "content_root": root, "samples": samples}
common = {"train": data, "validation": data,
          "optimizer": {"type": "AdamW", "lr": 0.0003, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1},
          "schedule": {"type": "WarmupCosine", "warmup_steps": 4, "min_ratio": 0.1},
          "epochs": 1, "batch_size": batch, "checkpoint_interval": 8}
gpt2 = [{"type": "Embedding", "vocab_size": vocab, "dim": dim}, {"type": "PositionalEmbedding", "max_len": seq, "dim": dim}]
gpt2 += [{"type": "TransformerBlock", "dim": dim, "heads": heads, "hidden": 4 * dim}] * blocks
gpt2 += [{"type": "LayerNorm", "dim": dim}, {"type": "TiedEmbeddingHead"}]
llama = [{"type": "Embedding", "vocab_size": vocab, "dim": dim}]
llama += [{"type": "LlamaBlock", "dim": dim, "heads": heads, "kv_heads": kv, "hidden": 8 * dim // 3 // 8 * 8, "rope_theta": 10000}] * blocks
llama += [{"type": "RMSNorm", "dim": dim}, {"type": "Linear", "in_features": dim, "out_features": vocab, "bias": False}]
for name, layers in (("gpt2", gpt2), ("llama", llama)):
    json.dump({"model": {"layers": layers}, **common}, open(f"{work}/{name}-f32.json", "w"))
    json.dump({"model": {"layers": layers}, **common, "precision": "Bf16Mixed"},
              open(f"{work}/{name}-bf16.json", "w"))
PY

printf '\n%-8s %-6s %-9s %14s %14s %8s\n' model size precision "ergon (tok/s)" "torch (tok/s)" ratio
for model in gpt2 llama; do
    for precision in ${PRECISIONS:-f32 bf16}; do
        spec="$work/$model-$precision.json"
        out="$("$worker" train --spec "$spec" --out "$work/$model-$precision-bundle" --threads "$threads" --json 2>"$work/$model-$precision.log")"
        ergon=$(python3 -c 'import json, sys; print(int(json.loads(sys.argv[1])["samples_per_second"] * int(sys.argv[2])))' "$out" "$seq")
        torch=$("$python" scripts/lib/torch_llm.py "$spec" "$threads" | python3 -c 'import json, sys; print(json.load(sys.stdin)["tokens_per_second"])')
        ratio=$(python3 -c "print(f'{$ergon / $torch:.2f}x')")
        printf '%-8s %-6s %-9s %14s %14s %8s\n' "$model" "$size" "$precision" "$ergon" "$torch" "$ratio"
    done
done
echo "(threads: $threads; on the CPU; ergon includes writing its checkpoints, every 8 steps)"
