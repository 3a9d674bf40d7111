"""PyTorch baseline for scripts/bench-train.sh: trains the same model as an Ergon example spec on the
same Fashion-MNIST files, batch size, optimizer and thread count, and prints its throughput.

Usage: torch_train.py SPEC.json THREADS
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


def build(layers):
    mods = []
    for l in layers:
        t = l["type"]
        if t == "Linear":
            mods.append(nn.Linear(l["in_features"], l["out_features"], bias=l["bias"]))
        elif t == "Conv2d":
            mods.append(nn.Conv2d(l["in_channels"], l["out_channels"], l["kernel_size"],
                                  stride=l["stride"], padding=l["padding"], bias=l["bias"]))
        elif t == "MaxPool2d":
            mods.append(nn.MaxPool2d(l["kernel_size"], l["stride"]))
        elif t == "Flatten":
            mods.append(nn.Flatten())
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
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    images, labels = (read_idx(f) for f in spec["train"]["files"])
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    model = build(spec["model"]["layers"])
    opt = spec["optimizer"]
    assert opt["type"] == "Sgd"
    sgd = torch.optim.SGD(model.parameters(), lr=opt["lr"], momentum=opt["momentum"],
                          weight_decay=opt["weight_decay"])
    loss_fn = nn.CrossEntropyLoss()
    bs, n = spec["batch_size"], len(y)
    start = time.perf_counter()
    for _ in range(spec["epochs"]):
        perm = torch.randperm(n)
        for s in range(0, n, bs):
            idx = perm[s:s + bs]
            sgd.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            sgd.step()
    secs = time.perf_counter() - start
    print(f"throughput {n * spec['epochs'] / secs:.0f} samples/s (torch {torch.__version__}, {threads} threads)")


if __name__ == "__main__":
    main()
