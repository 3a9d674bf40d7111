# Hugging Face's own libraries for the tests that prove compatibility with them
# (worker/engine/tests/fine_tune.rs: a GPT-2 built and read back by `transformers`).
# Source it, then `install_hf`; `hf_python` prints the venv's interpreter.
#
# Versions are pinned so a test run is repeatable; torch comes from PyPI (its CUDA wheels: the tests
# use the CPU). Nothing is fetched from a model hub: the tests build their models from configs.

hf_venv="${ERGON_HF_VENV:-$HOME/.cache/ergon-hf/venv}"
hf_packages=(torch==2.15.0 transformers==5.24.0 safetensors numpy)

hf_python() {
    echo "$hf_venv/bin/python"
}

install_hf() {
    if "$hf_venv/bin/python" -c "import torch, transformers, safetensors" 2>/dev/null \
        && [ "$("$hf_venv/bin/python" -c 'import torch, transformers; print(torch.__version__.split("+")[0], transformers.__version__)')" = "2.15.0 5.24.0" ]; then
        return
    fi
    echo "installing torch and transformers into $hf_venv (the Hugging Face round-trip test)"
    python3 -m venv "$hf_venv"
    "$hf_venv/bin/pip" install -q --disable-pip-version-check "${hf_packages[@]}"
}
