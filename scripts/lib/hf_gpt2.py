"""Hugging Face `transformers` side of Ergon's GPT-2 round trip (worker/engine/tests/fine_tune.rs).

    hf_gpt2.py make OUT       a random GPT-2 built by transformers from a config (no download):
                              OUT/hf/{config.json,model.safetensors}, OUT/ids.json (token ids)
                              and OUT/logits.f32 (its logits on them, little-endian f32)
    hf_gpt2.py logits MODEL IDS OUT
                              loads MODEL (a directory, e.g. Ergon's export) with from_pretrained
                              and writes its logits on IDS (a JSON list of lists) to OUT

Prints one JSON line describing what it did.
"""

import json
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

# The tiny GPT-2 the test's spec describes (fine_tune.rs: `gpt2_spec`).
CONFIG = dict(
    vocab_size=97,
    n_positions=24,
    n_embd=32,
    n_layer=2,
    n_head=4,
    n_inner=64,
    activation_function="gelu_new",
    layer_norm_epsilon=1e-5,
    resid_pdrop=0.0,
    embd_pdrop=0.0,
    attn_pdrop=0.0,
    tie_word_embeddings=True,
    bos_token_id=0,
    eos_token_id=0,
)


def logits(model, ids):
    model.eval()
    with torch.no_grad():
        return model(torch.tensor(ids, dtype=torch.long)).logits.to(torch.float32)


def write_f32(path, tensor):
    with open(path, "wb") as f:
        f.write(tensor.contiguous().numpy().astype("<f4").tobytes())


def make(out):
    torch.manual_seed(1234)
    model = GPT2LMHeadModel(GPT2Config(**CONFIG))
    # Every parameter away from its init pattern (unit LayerNorm scales, zero biases), so that a
    # tensor read in the wrong place or orientation changes the logits.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(f"{out}/hf", safe_serialization=True)
    g = torch.Generator().manual_seed(99)
    ids = torch.randint(0, CONFIG["vocab_size"], (3, 16), generator=g).tolist()
    with open(f"{out}/ids.json", "w") as f:
        json.dump(ids, f)
    y = logits(model, ids)
    write_f32(f"{out}/logits.f32", y)
    print(json.dumps({"made": out, "shape": list(y.shape), "transformers": __import__("transformers").__version__}))


def logits_of(model_dir, ids_path, out):
    model = GPT2LMHeadModel.from_pretrained(model_dir)
    with open(ids_path) as f:
        ids = json.load(f)
    y = logits(model, ids)
    write_f32(out, y)
    print(json.dumps({"loaded": model_dir, "shape": list(y.shape)}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "logits":
        logits_of(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"unknown command {cmd}")
