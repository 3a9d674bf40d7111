"""PyTorch baseline for scripts/bench-llm.sh: trains the `transformers` model an Ergon GPT-2 or Llama
spec describes (same config, token shards, batch size, AdamW hyper-parameters and thread count on
the CPU; f32, or for a `Bf16Mixed` spec under `torch.autocast("cpu", dtype=torch.bfloat16)` — f32
master weights and optimizer, bf16 matrix products) for the spec's epochs and prints its throughput
as one JSON line (`tokens_per_second`, `tokens`, `seconds`, `final_loss`).

Usage: torch_llm.py SPEC.json THREADS
"""
import json
import sys
import time

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


def model_of(layers):
    emb = layers[0]
    blocks = [l for l in layers if l["type"] in ("TransformerBlock", "LlamaBlock")]
    tied = layers[-1]["type"] == "TiedEmbeddingHead"
    b = blocks[0]
    if b["type"] == "TransformerBlock":
        return GPT2LMHeadModel(GPT2Config(
            vocab_size=emb["vocab_size"], n_positions=layers[1]["max_len"], n_embd=emb["dim"],
            n_layer=len(blocks), n_head=b["heads"], n_inner=b["hidden"],
            activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0))
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=emb["vocab_size"], hidden_size=emb["dim"], intermediate_size=b["hidden"],
        num_hidden_layers=len(blocks), num_attention_heads=b["heads"],
        num_key_value_heads=b["kv_heads"], rope_theta=float(b["rope_theta"]),
        tie_word_embeddings=tied, attention_bias=False, mlp_bias=False,
        bos_token_id=0, eos_token_id=0))


def main(spec_path, threads):
    torch.set_num_threads(threads)
    spec = json.load(open(spec_path))
    fmt = spec["train"]["format"]
    seq = fmt["seq_len"]
    dtype = np.uint16 if fmt["width"] == "U16" else np.uint32
    windows = []
    for f in spec["train"]["files"]:
        ids = np.fromfile(f, dtype=dtype).astype(np.int64)
        n = (len(ids) - 1) // seq
        windows += [ids[i * seq:i * seq + seq + 1] for i in range(n)]
    data = torch.tensor(np.stack(windows))
    model = model_of(spec["model"]["layers"])
    model.train()
    o = spec["optimizer"]
    opt = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=(o["beta1"], o["beta2"]),
                            eps=o["eps"], weight_decay=o["weight_decay"])
    batch = spec["batch_size"]
    bf16 = spec.get("precision", "F32") == "Bf16Mixed"
    g = torch.Generator().manual_seed(0)
    start, tokens = time.perf_counter(), 0
    for _ in range(spec["epochs"]):
        order = torch.randperm(len(data), generator=g)
        for lo in range(0, len(data), batch):
            x = data[order[lo:lo + batch]]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = model(x[:, :-1], labels=None)
                loss = torch.nn.functional.cross_entropy(
                    out.logits.float().reshape(-1, out.logits.shape[-1]), x[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tokens += x.shape[0] * seq
    secs = time.perf_counter() - start
    print(json.dumps({"tokens_per_second": int(tokens / secs), "tokens": tokens, "seconds": secs,
                      "final_loss": loss.item()}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
