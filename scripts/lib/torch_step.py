"""PyTorch's training step on a GPU for an Ergon spec, in the variants a practitioner would run
(scripts/bench-gpu.sh): the same model (scripts/lib/torch_train.py builds it), batch size and AdamW,
byte-level text data resident on the GPU, timed with CUDA events after warm-up steps.

Variants: `f32` (eager, TF32 off: the arithmetic of Ergon's f32 path), `bf16` (eager under bf16
autocast, attention through SDPA's fused kernels), and `graph` (the f32 step captured whole in a
CUDA graph, for models small enough that launches dominate). For each it prints one JSON line:

    {"variant": "f32", "ms": …, "tflops": …, "allocated_gb": …, "reserved_gb": …}

with the model FLOPs of `flops()` (the count scripts/bench-gpu.sh applies to Ergon's step too:
`torch_step.py --flops SPEC` prints it).

Usage: torch_step.py SPEC.json STEPS VARIANT...  |  torch_step.py --flops SPEC.json
"""
import json
import sys

import numpy as np
import torch
from torch import nn

from torch_train import build


class Logits(nn.Module):
    def forward(self, x):
        return x.reshape(-1, x.shape[-1])


def flops(spec):
    """Model FLOPs of one training step: 6 per weight of every matrix product per token, and the
    causal attention's 6·T·d per layer per token (forward 2·T·d: half of q·kᵀ and p·v; backward
    twice that)."""
    t = spec["train"]["format"]["seq_len"]
    tokens = spec["batch_size"] * t
    total = 0
    vocab = None
    for l in spec["model"]["layers"]:
        kind = l["type"]
        if kind == "Embedding":
            vocab = l["vocab_size"]
        elif kind == "TransformerBlock":
            d, hidden = l["dim"], l["hidden"]
            total += 6 * tokens * (4 * d * d + 2 * d * hidden) + 6 * tokens * t * d
        elif kind == "Linear":
            total += 6 * tokens * l["in_features"] * l["out_features"]
        elif kind == "TiedEmbeddingHead":
            total += 6 * tokens * vocab * spec["model"]["layers"][0]["dim"]
    return total


def data(spec, device):
    fmt = spec["train"]["format"]
    raw = np.frombuffer(open(spec["train"]["files"][0], "rb").read(), dtype=np.uint8)
    t = fmt["seq_len"]
    count = (len(raw) - 1) // t
    x = torch.from_numpy(raw[: count * t].astype(np.int64).reshape(count, t))
    y = torch.from_numpy(raw[1 : count * t + 1].astype(np.int64).reshape(count, t))
    return x.to(device), y.to(device)


def run(spec, steps, variant):
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    x, y = data(spec, device)
    model = build(spec["model"]["layers"] + [{"type": "Logits"}]).to(device)
    o = spec["optimizer"]
    graph = variant == "graph"
    opt = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=(o["beta1"], o["beta2"]),
                            eps=o["eps"], weight_decay=o["weight_decay"], capturable=graph)
    loss_fn = nn.CrossEntropyLoss()
    bs, n = spec["batch_size"], len(x)
    batches = [torch.arange(s, s + bs, device=device) % n for s in range(0, max(n, bs), bs)]

    def step(xb, yb):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=variant == "bf16"):
            loss = loss_fn(model(xb), yb.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    warm = 5
    torch.cuda.reset_peak_memory_stats()
    if graph:
        sx, sy = x[batches[0]].clone(), y[batches[0]].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warm):
                opt.zero_grad(set_to_none=True)
                step(sx, sy)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            step(sx, sy)

        def one(i):
            sx.copy_(x[batches[i % len(batches)]])
            sy.copy_(y[batches[i % len(batches)]])
            g.replay()
    else:
        def one(i):
            idx = batches[i % len(batches)]
            opt.zero_grad(set_to_none=True)
            step(x[idx], y[idx])

        for i in range(warm):
            one(i)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for i in range(steps):
        one(i)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / steps
    tflops = flops(spec) / (ms / 1e3) / 1e12
    alloc = torch.cuda.max_memory_allocated() / 1e9
    reserved = torch.cuda.max_memory_reserved() / 1e9
    print(json.dumps({"variant": variant, "ms": round(ms, 3), "tflops": round(tflops, 2),
                      "allocated_gb": round(alloc, 3), "reserved_gb": round(reserved, 3)}),
          flush=True)
    del model, opt
    torch.cuda.empty_cache()


def main():
    if sys.argv[1] == "--flops":
        print(flops(json.load(open(sys.argv[2]))))
        return
    spec = json.load(open(sys.argv[1]))
    steps = int(sys.argv[2])
    for variant in sys.argv[3:]:
        run(spec, steps, variant)


if __name__ == "__main__":
    main()
