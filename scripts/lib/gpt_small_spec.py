"""Writes the spec of a byte-level GPT-small (12 blocks of width 768 in 12 heads, MLP 3072, 85.6 M
parameters at T 256) training on one text file, for scripts/bench-gpu.sh: the shape of GPT-2 small
with a byte vocabulary, so that any text is its data.

Usage: gpt_small_spec.py DATA CONTENT_ROOT SEQ_LEN BATCH OUT.json
(CONTENT_ROOT from `ergon-worker content-root DATA`.)

The same shape smaller, and longer runs (scripts/bench-verify.sh): GPT_DIM, GPT_HEADS, GPT_HIDDEN,
GPT_BLOCKS set the widths and depth; GPT_EPOCHS and GPT_INTERVAL the epochs and the checkpoint
interval (default 1 and 1).
"""
import json
import os
import sys

data, root, seq, batch, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
env = lambda name, default: int(os.environ.get(name, default))
d, heads, hidden, blocks, vocab = (env("GPT_DIM", 768), env("GPT_HEADS", 12), env("GPT_HIDDEN", 3072),
                                   env("GPT_BLOCKS", 12), 256)
samples = (os.path.getsize(data) - 1) // seq
text = {"format": {"type": "Text", "seq_len": seq}, "files": [data], "content_root": root,
        "samples": samples}
spec = {
    "model": {"layers": [{"type": "Embedding", "vocab_size": vocab, "dim": d},
                         {"type": "PositionalEmbedding", "max_len": seq, "dim": d}]
              + [{"type": "TransformerBlock", "dim": d, "heads": heads, "hidden": hidden}] * blocks
              + [{"type": "LayerNorm", "dim": d},
                 {"type": "Linear", "in_features": d, "out_features": vocab, "bias": True}]},
    "train": text,
    "validation": text,
    "optimizer": {"type": "AdamW", "lr": 3e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
                  "weight_decay": 0.1},
    "epochs": env("GPT_EPOCHS", 1),
    "batch_size": batch,
    "checkpoint_interval": env("GPT_INTERVAL", 1),
}
json.dump(spec, open(out, "w"), indent=1)
