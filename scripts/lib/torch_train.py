"""PyTorch baseline for scripts/bench-train.sh: trains the same model as an Ergon example spec on the
same data files (Fashion-MNIST IDX or byte-level text), batch size, optimizer and thread count, and
prints its throughput. DEVICE `cuda` trains on the GPU in f32 with TF32 off (as Ergon's GPU path),
the data held on the GPU.

Usage: torch_train.py SPEC.json THREADS [DEVICE]
"""
import gzip
import json
import sys
import time

import numpy as np
import torch
from torch import nn


def read_idx(path):
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


class Positional(nn.Module):
    """Learned positions added to token embeddings (Ergon's PositionalEmbedding)."""

    def __init__(self, max_len, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, dim) * 0.02)

    def forward(self, x):
        return x + self.weight[: x.shape[1]]


class Block(nn.Module):
    """Ergon's TransformerBlock: pre-norm causal self-attention and a GELU MLP, both residual."""

    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        ctx = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(ctx.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Logits(nn.Module):
    """Flattens `[B, T, vocab]` token logits to `[B·T, vocab]` for the cross-entropy."""

    def forward(self, x):
        return x.reshape(-1, x.shape[-1])


def build(layers):
    mods = []
    for l in layers:
        t = l["type"]
        if t == "Embedding":
            mods.append(nn.Embedding(l["vocab_size"], l["dim"]))
        elif t == "PositionalEmbedding":
            mods.append(Positional(l["max_len"], l["dim"]))
        elif t == "TransformerBlock":
            mods.append(Block(l["dim"], l["heads"], l["hidden"]))
        elif t == "LayerNorm":
            mods.append(nn.LayerNorm(l["dim"]))
        elif t == "Linear":
            mods.append(nn.Linear(l["in_features"], l["out_features"], bias=l["bias"]))
        elif t == "Conv2d":
            mods.append(nn.Conv2d(l["in_channels"], l["out_channels"], l["kernel_size"],
                                  stride=l["stride"], padding=l["padding"], bias=l["bias"]))
        elif t == "MaxPool2d":
            mods.append(nn.MaxPool2d(l["kernel_size"], l["stride"]))
        elif t == "Flatten":
            mods.append(nn.Flatten())
        elif t == "Logits":
            mods.append(Logits())
        elif t == "ReLU":
            mods.append(nn.ReLU())
        elif t == "GELU":
            mods.append(nn.GELU(approximate="tanh"))
        else:
            raise SystemExit(f"layer {t} not supported by this baseline")
    return nn.Sequential(*mods)


def main():
    spec = json.load(open(sys.argv[1]))
    threads = int(sys.argv[2])
    device = torch.device(sys.argv[3] if len(sys.argv) > 3 else "cpu")
    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    fmt = spec["train"]["format"]
    if fmt["type"] == "Text":
        # Sample i: bytes [i·T, (i+1)·T), targets the next byte of each (as Ergon's decoder).
        raw = np.frombuffer(open(spec["train"]["files"][0], "rb").read(), dtype=np.uint8)
        t = fmt["seq_len"]
        count = (len(raw) - 1) // t
        x = torch.from_numpy(raw[: count * t].astype(np.int64).reshape(count, t))
        y = torch.from_numpy(raw[1 : count * t + 1].astype(np.int64).reshape(count, t))
    else:
        images, labels = (read_idx(f) for f in spec["train"]["files"])
        x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
        y = torch.from_numpy(labels.astype(np.int64))
    layers = spec["model"]["layers"]
    model = build(layers + ([{"type": "Logits"}] if fmt["type"] == "Text" else [])).to(device)
    x, y = x.to(device), y.to(device)
    opt = spec["optimizer"]
    if opt["type"] == "Sgd":
        sgd = torch.optim.SGD(model.parameters(), lr=opt["lr"], momentum=opt["momentum"],
                              weight_decay=opt["weight_decay"])
    else:
        sgd = torch.optim.AdamW(model.parameters(), lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]),
                                eps=opt["eps"], weight_decay=opt["weight_decay"])
    loss_fn = nn.CrossEntropyLoss()
    bs, n = spec["batch_size"], len(y)
    start = time.perf_counter()
    for _ in range(spec["epochs"]):
        perm = torch.randperm(n, device=device)
        for s in range(0, n, bs):
            idx = perm[s:s + bs]
            sgd.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx].reshape(-1))
            loss.backward()
            sgd.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - start
    where = f"{threads} threads" if device.type == "cpu" else torch.cuda.get_device_name(device)
    print(f"throughput {n * spec['epochs'] / secs:.0f} samples/s (torch {torch.__version__}, {where})")


if __name__ == "__main__":
    main()
