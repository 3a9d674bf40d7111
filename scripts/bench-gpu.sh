#!/usr/bin/env bash
# GPU checks and speed of ergon-worker (a benchmark, not a test; needs an NVIDIA GPU).
#
# For the three examples (Fashion-MNIST MLP and CNN, char transformer) and each seed of SEEDS
# (default 1; SEEDS="1 2 3" to calibrate ε and τ across seeds), a row each:
#   - GPU ↔ CPU replay: the GPU-trained bundle verified on the CPU and the CPU-trained one verified
#     on the GPU, ten segments, at the default ε and τ: largest relative error, smallest cosine,
#     verdict (a GPU-trained CNN bundle always FAILs: convolutional jobs train on the CPU, and the
#     verifier's device check after the replays says so; the replay columns measure it all the
#     same); and the fingerprints of both trainings (the manifest's checkpoint digests and
#     losses, hashed): a CPU training gives the one it gives on any other CPU (compare with the
#     same line from another machine);
#   - on the first seed only, determinism: a second GPU training gives the same fingerprint;
#   - on the first seed only, speed: samples/s of that second GPU training (the first compiles
#     candle's kernels for the GPU, which the driver then caches) against PyTorch on the same GPU
#     (f32, TF32 off), as a ratio.
# Then the drilling workload: result hashes of the CPU and the GPU for three sizes, and the GPU's
# throughput against its f32 peak (an 8192³ product through PyTorch, TF32 off, measured in the run).
# First of all, the engine's CUDA kernels are checked against their CPU twins (its `on_a_gpu_` tests:
# bit for bit, the attention within rounding, graph steps against eager ones): ENGINE_TESTS names a
# built test binary of ergon-engine with the `cuda` feature, else cargo builds and runs them. Then a
# training step of each example, eagerly against its CUDA graph (the engine's `gpu_step` bench:
# GPU_STEP names a built one, else cargo builds and runs it).
#
# Then Ergon's training step against PyTorch's on the same GPU, at GPT-small size (T 256 and T 1024)
# and on the char transformer: ms/step, model TFLOP/s, peak memory and the ratios (see below).
#
# WORKER and WORKER_CUDA name the CPU and CUDA builds (default: this checkout's, built if missing:
# the CUDA one through scripts/setup-cuda.sh). PyTorch is the `python3` on PATH (PYTHON to change).
# The CUDA build needs cuBLAS, cuRAND and the CUDA runtime 13 on the library path (PyTorch's
# cu13 wheels bring them: add their `nvidia/cu13/lib` to LD_LIBRARY_PATH).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
target="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
worker="${WORKER:-$target/release/ergon-worker}"
worker_cuda="${WORKER_CUDA:-$target/cuda/release/ergon-worker}"
python="${PYTHON:-python3}"
threads="${THREADS:-$(nproc)}"
if [ ! -x "$worker" ]; then
    CARGO_TARGET_DIR="$target" cargo build --release --locked -p ergon-worker
fi
if [ ! -x "$worker_cuda" ]; then
    (source "$(scripts/setup-cuda.sh)" && CARGO_TARGET_DIR="$target/cuda" \
        cargo build --release --locked -p ergon-worker --features cuda)
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The kernels on this GPU: they must run (a test that finds no GPU skips, which fails here).
if [ -n "${ENGINE_TESTS:-}" ]; then
    "$ENGINE_TESTS" on_a_gpu --nocapture 2>&1 | tee "$work/kernels.txt"
else
    (source "$(scripts/setup-cuda.sh)" && CARGO_TARGET_DIR="$target/cuda" cargo test --release \
        --locked -p ergon-engine --features cuda on_a_gpu -- --nocapture) 2>&1 | tee "$work/kernels.txt"
fi
if grep -q skipped "$work/kernels.txt" || ! grep -q "test result: ok. [1-9]" "$work/kernels.txt"; then
    echo "the GPU kernel tests did not pass on this GPU" >&2
    exit 1
fi

# A step of each example, eager against the graph, and where its time goes.
for model in ${MODELS:-fashion-mnist-mlp fashion-mnist-cnn char-transformer}; do
    if [ -n "${GPU_STEP:-}" ]; then
        "$GPU_STEP" "worker/examples/$model.json" 200
    else
        (source "$(scripts/setup-cuda.sh)" && CARGO_TARGET_DIR="$target/cuda" cargo bench \
            --profile release --locked -p ergon-engine --features cuda --bench gpu_step -- \
            "worker/examples/$model.json" 200)
    fi
done
# Ergon's step against PyTorch's at real size and on the small example: a byte-level GPT-small
# (scripts/lib/gpt_small_spec.py: 85.6 M parameters) at T 256 × batch 32 and T 1024 × batch 8, and
# the char transformer. Ergon: the gpu_step bench (eager, then through a CUDA graph); PyTorch:
# scripts/lib/torch_step.py (f32 with TF32 off, bf16 autocast with SDPA, a graphed f32 step), the
# data on the GPU, in this run. TFLOP/s from one count of the model's FLOPs for both; peak GPU
# memory as nvidia-smi sees it while each runs.
step_bench() {
    if [ -n "${GPU_STEP:-}" ]; then
        "$GPU_STEP" "$@"
    else
        (source "$(scripts/setup-cuda.sh)" && CARGO_TARGET_DIR="$target/cuda" cargo bench \
            --profile release --locked -p ergon-engine --features cuda --bench gpu_step -- "$@")
    fi
}
# Runs "$@", keeps its JSON lines, and adds one with the peak GPU memory it used.
with_peak_memory() {
    (while sleep 0.25; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; done) \
        > "$work/memory" &
    local poll=$!
    "$@" | grep '^{'
    kill "$poll"
    echo "{\"peak_mib\": $(sort -n "$work/memory" | tail -1)}"
}
text="$work/text.txt"
cat README.md docs/*.md worker/src/*/*.rs > "$text"
root="$("$worker" content-root "$text")"
"$python" scripts/lib/gpt_small_spec.py "$text" "$root" 256 32 "$work/gpt-small-256.json"
"$python" scripts/lib/gpt_small_spec.py "$text" "$root" 1024 8 "$work/gpt-small-1024.json"
printf '\n%-22s %-9s %10s %8s %10s %s\n' spec side ms/step TFLOP/s "peak MiB" "ratio (PyTorch ms / Ergon ms)"
for case in "$work/gpt-small-256.json:10:f32 bf16" "$work/gpt-small-1024.json:10:f32 bf16" \
    "worker/examples/char-transformer.json:200:f32 graph"; do
    IFS=: read -r spec steps variants <<<"$case"
    with_peak_memory step_bench "$spec" "$steps" > "$work/ergon.json"
    # shellcheck disable=SC2086 # the variants are words
    with_peak_memory "$python" scripts/lib/torch_step.py "$spec" "$steps" $variants > "$work/torch.json"
    "$python" - "$spec" "$work/ergon.json" "$work/torch.json" \
        "$("$python" scripts/lib/torch_step.py --flops "$spec")" <<'PY'
import json, os, sys
spec, ergon, torch, flops = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
ergon = [json.loads(l) for l in open(ergon)]
torch = [json.loads(l) for l in open(torch)]
e_ms, e_peak = ergon[0]["graph_ms"], ergon[-1]["peak_mib"]
name = os.path.basename(spec).removesuffix(".json")
tf = lambda ms: flops / (ms / 1e3) / 1e12
print(f"{name:<22} {'ergon':<9} {e_ms:10.2f} {tf(e_ms):8.1f} {e_peak:10d}")
for t in torch[:-1]:
    print(f"{'':<22} {'torch ' + t['variant']:<9} {t['ms']:10.2f} {tf(t['ms']):8.1f} {'':>10} "
          f"{t['ms'] / e_ms:.2f}x")
print(f"{'':<22} memory: Ergon {e_peak} MiB, PyTorch (all variants) {torch[-1]['peak_mib']} MiB: "
      f"{e_peak / torch[-1]['peak_mib']:.2f}x")
PY
done

segments="$(seq -s, 0 9)"

# The checkpoints' digests and the losses of a bundle, hashed: equal for equal trainings.
fingerprint() {
    "$python" - "$1/manifest.json" <<'PY'
import hashlib, json, sys
m = json.load(open(sys.argv[1]))
body = json.dumps([[c["step"], c["digest"]] for c in m["checkpoints"]] + [m["losses"]])
print(hashlib.sha256(body.encode()).hexdigest()[:16])
PY
}
# The samples/s a training printed (in the file given, or on stdin).
throughput() { sed -n 's/^throughput \([0-9]*\) samples.*/\1/p' "$@"; }

row='%-18s %4s %-10s %-17s %-17s %-28s %-28s %9s %9s %7s\n'
printf "\n$row" model seed "gpu again" "gpu fingerprint" "cpu fingerprint" "gpu bundle on cpu" \
    "cpu bundle on gpu" "ergon s/s" "torch s/s" ratio
for model in ${MODELS:-fashion-mnist-mlp fashion-mnist-cnn char-transformer}; do
    spec="worker/examples/$model.json"
    first=1
    for n in ${SEEDS:-1}; do
        seed="$(printf '%064x' "$n")"
        g1="$work/$model-$n-gpu1" g2="$work/$model-$n-gpu2" c="$work/$model-$n-cpu"
        "$worker_cuda" train --cuda --spec "$spec" --out "$g1" --seed "$seed" --quiet > "$g1.txt" 2>&1
        "$worker" train --spec "$spec" --out "$c" --seed "$seed" --threads "$threads" --quiet \
            > "$c.txt" 2>&1
        "$worker" verify --spec "$spec" --bundle "$g1" --seed "$seed" --threads "$threads" \
            --segments "$segments" > "$g1.verify" 2>&1 || true
        "$worker_cuda" verify --cuda --spec "$spec" --bundle "$c" --seed "$seed" \
            --segments "$segments" > "$c.verify" 2>&1 || true
        # Determinism and speed on the first seed only: a second GPU training (whose speed is
        # measured once the first has compiled the kernels) and PyTorch.
        same='' ergon='' torch='' ratio=''
        if [ "$first" = 1 ]; then
            "$worker_cuda" train --cuda --spec "$spec" --out "$g2" --seed "$seed" --quiet \
                > "$g2.txt" 2>&1
            same=$([ "$(fingerprint "$g1")" = "$(fingerprint "$g2")" ] && echo same || echo DIFFERS)
            ergon="$(throughput "$g2.txt")"
            torch="$("$python" scripts/lib/torch_train.py "$spec" "$threads" cuda | throughput)"
            ratio="$("$python" -c "print(f'{$ergon / $torch:.2f}x')")"
            first=0
        fi
        printf "$row" "$model" "$n" "$same" "$(fingerprint "$g1")" "$(fingerprint "$c")" \
            "$(python3 scripts/lib/replay_error.py "$g1.verify")" \
            "$(python3 scripts/lib/replay_error.py "$c.verify")" "$ergon" "$torch" "$ratio"
    done
done
echo "(replay columns: largest relative error, smallest cosine, verdict at the default ε and τ;"
echo " ergon s/s: the second GPU training; ratio = ergon / PyTorch on the same GPU)"

# The GPU's f32 peak: the mean of ten 8192³ products after three warm-ups, timed with CUDA events.
peak="$("$python" - <<'PY'
import torch
torch.backends.cuda.matmul.allow_tf32 = False
n = 8192
a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
for _ in range(3):
    a @ b
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for _ in range(10):
    a @ b
end.record()
torch.cuda.synchronize()
print(f"{2 * n**3 * 10 / (start.elapsed_time(end) / 1e3) / 1e9:.0f}")
PY
)"
printf '\nf32 peak of this GPU (PyTorch, 8192³ products, TF32 off): %s GFLOP/s\n' "$peak"

seed="$(printf '%064x' 1)"
printf '\n%-12s %-8s %-68s %-40s %s\n' drill device result throughput "of f32 peak"
for size in 512:16 2048:8 4096:4; do
    task="$work/task-$size.json"
    printf '{"kind": "MatmulChain", "seed": "0x%s", "dim": %s, "length": %s}\n' \
        "$seed" "${size%:*}" "${size#*:}" > "$task"
    for side in cpu gpu; do
        if [ "$side" = cpu ]; then
            out="$("$worker" drill --threads "$threads" --task "$task" 2>&1 || true)"
        else
            out="$("$worker_cuda" drill --cuda --task "$task" 2>&1 || true)"
        fi
        gops="$(sed -n 's/^throughput .*(\([0-9.]*\) Gop\/s)/\1/p' <<<"$out")"
        share=''
        if [ "$side" = gpu ] && [ -n "$gops" ]; then
            share="$("$python" -c "print(f'{$gops / $peak:.1%}')")"
        fi
        printf '%-12s %-8s %-68s %-40s %s\n' "$size" "$side" \
            "$(sed -n 's/^result *//p' <<<"$out")$(grep -i error <<<"$out" || true)" \
            "$(sed -n 's/^throughput *//p' <<<"$out")" "$share"
    done
done
