#!/usr/bin/env bash
# Installs the CUDA 13.0 toolchain that builds `ergon-worker --features cuda`, on any x86_64 Linux machine,
# with or without a GPU, and prints the path of a file to source before the build:
#
#     source "$(scripts/setup-cuda.sh)"
#     cargo build --release --locked -p ergon-worker --features cuda
#
# Why PyPI wheels: Debian only packages CUDA 11.8, and candle's kernels need a CUDA 12+ nvcc. NVIDIA publishes
# the toolkit's parts as wheels; they are pinned here to exact versions (CUDA 13.0, the driver 580 line), so
# every build compiles the same kernels. Idempotent; the toolchain lives outside the clone (1.2 GB), in
# $ERGON_CUDA_HOME (default ~/.cache/ergon-cuda/13.0).
#
# What a build machine without a GPU lacks is the driver's `libcuda.so.1`: the linker only needs its symbols,
# so a stub library that defines them is built here. It only goes on a library path to run a CUDA
# build's tests on a machine without a GPU (where it answers "no device").
set -euo pipefail

log() { printf '[setup-cuda] %s\n' "$*" >&2; }

root="${ERGON_CUDA_HOME:-$HOME/.cache/ergon-cuda/13.0}"
cu="$root/nvidia/cu13"
# The wheels of CUDA 13.0 update 0 (cuBLAS 13.1 is the one released with it).
wheels=(
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96
    nvidia-cuda-cccl==13.0.85 nvidia-cublas==13.1.0.3 nvidia-cuda-nvrtc==13.0.88 nvidia-curand==10.4.0.35
)
stamp="$root/.installed"

if [ "$(cat "$stamp" 2>/dev/null)" != "${wheels[*]}" ]; then
    log "installing CUDA 13.0 wheels into $root (about 1.2 GB)"
    rm -rf "$root"
    mkdir -p "$root"
    python3 -m pip install -q --disable-pip-version-check --no-deps --target "$root" "${wheels[@]}"
    # nvcc looks for the libraries under lib64; the linker wants unversioned names.
    ln -sfn lib "$cu/lib64"
    (
        cd "$cu/lib"
        for l in cublas cublasLt cudart nvrtc; do ln -sf "lib$l.so.13" "lib$l.so"; done
        ln -sf libcurand.so.10 libcurand.so
    )
    echo "${wheels[*]}" >"$stamp"
fi

# The driver stub: one symbol per driver function cudarc declares, read from the cudarc sources the lock
# file pins (so a cudarc bump brings its new functions along). The stub reports "no device" if ever called.
if [ ! -e "$cu/lib/stubs/libcuda.so" ]; then
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    cudarc_version="$(sed -n '/^name = "cudarc"$/{n;s/^version = "\(.*\)"$/\1/p}' "$here/Cargo.lock")"
    (cd "$here" && cargo fetch --locked >/dev/null 2>&1) || true
    sys="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"cudarc-$cudarc_version"/src/driver/sys/mod.rs | head -n1)"
    [ -f "$sys" ] || { log "cudarc $cudarc_version sources not found (cargo fetch failed?)"; exit 1; }
    log "building the libcuda.so.1 link stub from cudarc $cudarc_version"
    mkdir -p "$cu/lib/stubs"
    grep -oE '^pub unsafe fn cu[A-Za-z0-9_]+' "$sys" | sed 's/^pub unsafe fn //' | sort -u |
        awk '{ printf "int %s(void) { return 100; /* CUDA_ERROR_NO_DEVICE */ }\n", $1 }' >"$cu/lib/stubs/cuda_stub.c"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$cu/lib/stubs/libcuda.so" "$cu/lib/stubs/cuda_stub.c"
    ln -sf libcuda.so "$cu/lib/stubs/libcuda.so.1"
fi

cat >"$root/env.sh" <<EOF
# Source this file before building ergon-worker with --features cuda (written by scripts/setup-cuda.sh).
export CUDA_HOME="$cu"
export PATH="$cu/bin:\$PATH"
# cudarc: the CUDA API version to bind (13.0), instead of asking nvcc.
export CUDARC_CUDA_VERSION=13000
# candle-kernels: the GPU architecture to compile for, instead of asking nvidia-smi. 80 (Ampere) PTX is
# JIT-compiled by the driver for every newer GPU too (Hopper, Blackwell); set 90 for Hopper-only cubins.
export CUDA_COMPUTE_CAP="\${CUDA_COMPUTE_CAP:-80}"
# Only for running a CUDA build's tests on a machine without a GPU: the CUDA libraries and the driver
# stub (which answers "no device"). A GPU host uses its own driver instead of the stub.
export ERGON_CUDA_TEST_LIBRARY_PATH="$cu/lib:$cu/lib/stubs"
EOF
log "toolchain ready: nvcc $("$cu/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
echo "$root/env.sh"
