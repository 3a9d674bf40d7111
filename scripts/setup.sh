#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and run Ergon. Idempotent: safe to run again.
#   - Debian packages: clang + libclang (bindgen), lld (fast linker), protobuf-compiler (libp2p),
#     libssl-dev + pkg-config (the node's OpenSSL: .cargo/config.toml's OPENSSL_NO_VENDOR),
#     dataset-fashion-mnist (the training examples' data set)
#   - Rust: the wasm32v1-none target and rust-src (runtime build)
set -euo pipefail

log() { printf '[setup] %s\n' "$*"; }

need_pkgs=()
for pkg in clang libclang-dev lld protobuf-compiler pkg-config libssl-dev dataset-fashion-mnist; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$pkg")
done
if ((${#need_pkgs[@]})); then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    log "installing Debian packages: ${need_pkgs[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"
else
    log "Debian packages present"
fi

if command -v rustup >/dev/null 2>&1; then
    rustup target list --installed | grep -qx wasm32v1-none || { log "adding rust target wasm32v1-none"; rustup target add wasm32v1-none; }
    rustup component list --installed | grep -q '^rust-src' || { log "adding rust-src"; rustup component add rust-src; }
else
    log "rustup not found: install the Rust toolchain first (https://rustup.rs)" >&2
    exit 1
fi
log "done"
