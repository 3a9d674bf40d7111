#!/usr/bin/env bash
# Builds Ergon's container images and runs the compose smoke test (docker/compose.yml: four
# validators, a trainer daemon beside each, Prometheus): the network finalizes, a job posted with the
# user CLI settles, Prometheus scrapes every node and daemon. Prints the image sizes, the build
# time, and the times from `compose up` to the first finalized block and to the settled job.
#
#   scripts/docker.sh              images, then the smoke test
#   scripts/docker.sh images       the images only
#   scripts/docker.sh smoke        the smoke test only (the images exist)
#   scripts/docker.sh --if-available [...]   the same, but says so and exits 0 when no docker daemon
#                                  answers (what scripts/test.sh runs: CI machines may have none)
#
# Images: ergon-node:dev and ergon-worker:dev from docker/Dockerfile. Where no container registry
# answers (ERGON_DOCKER_OFFLINE=1 forces it), the images the Dockerfile and the compose file name are
# made from Debian packages and tagged with those names: debian:bookworm-slim by debootstrap →
# `docker import`, prom/prometheus:v2.42.0 from Debian's prometheus (docker/prometheus/Dockerfile);
# the binaries are built on the host (one cargo build, in $CARGO_TARGET_DIR) and copied in (the
# Dockerfile's `prebuilt` stage) since the rust image cannot be pulled either. Builds run with host
# networking (apt inside the build reaches Debian's mirror directly).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
compose_file="$here/docker/compose.yml"
project="ergon-smoke"
base_image="debian:bookworm-slim"
prometheus_image="prom/prometheus:v2.42.0"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { printf '[docker] %s\n' "$*"; }

if_available=0
if [ "${1:-}" = --if-available ]; then
    if_available=1
    shift
fi
what="${1:-all}"

# The Debian docker client drives BuildKit without the buildx plugin; a newer client on PATH may
# refuse DOCKER_BUILDKIT=1 without it.
docker_bin="${DOCKER:-docker}"
if [ -x /usr/bin/docker ] && ! "$docker_bin" buildx version > /dev/null 2>&1; then
    docker_bin=/usr/bin/docker
fi
docker() { command "$docker_bin" "$@"; }
compose() {
    if command -v docker-compose > /dev/null 2>&1; then
        docker-compose -p "$project" -f "$compose_file" "$@"
    else
        docker compose -p "$project" -f "$compose_file" "$@"
    fi
}

if ! docker info > /dev/null 2>&1; then
    if [ "$if_available" = 1 ]; then
        log "no docker daemon answers: skipping the image build and the compose smoke test"
        exit 0
    fi
    log "no docker daemon answers: install docker (Debian: apt-get install docker.io docker-compose) and start dockerd" >&2
    exit 1
fi

# Whether an image can be pulled; never when offline is forced.
pullable() {
    [ "${ERGON_DOCKER_OFFLINE:-0}" != 1 ] && timeout 60 docker pull -q "$1" > /dev/null 2>&1
}

# debian:bookworm-slim, pulled or made with debootstrap.
base() {
    docker image inspect "$base_image" > /dev/null 2>&1 && return
    pullable "$base_image" && return
    log "no registry: making $base_image from Debian packages (debootstrap)"
    command -v debootstrap > /dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
    local rootfs
    rootfs="$(mktemp -d)"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > "$rootfs.log" 2>&1 ||
        { tail -20 "$rootfs.log"; exit 1; }
    # What makes the official image slim: no package lists or apt caches kept, and dpkg leaves
    # documentation, manuals and translations out (of this image and of what is installed on it).
    cat > "$rootfs/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
        'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' \
        'path-exclude /usr/share/locale/*' > "$rootfs/etc/dpkg/dpkg.cfg.d/docker"
    rm -rf "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/*
    find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright -delete 2>/dev/null || true
    tar -C "$rootfs" -c . | docker import - "$base_image" > /dev/null
    rm -rf "$rootfs" "$rootfs.log"
}

images() {
    local started binaries=build
    started=$(date +%s)
    base
    if ! docker image inspect rust:1-bookworm > /dev/null 2>&1 && ! pullable rust:1-bookworm; then
        binaries=prebuilt
        log "no rust image: building the binaries on the host"
        scripts/setup.sh
        # Two invocations: built together, cargo would unify their features.
        cargo build --release --locked -p ergon-node
        cargo build --release --locked -p ergon-worker
        mkdir -p docker/.bin
        cp "$CARGO_TARGET_DIR/release/ergon-node" "$CARGO_TARGET_DIR/release/ergon-worker" docker/.bin/
    fi
    for target in node worker; do
        log "building ergon-$target:dev (binaries: $binaries)"
        DOCKER_BUILDKIT=1 docker build --network host -f docker/Dockerfile --target "$target" \
            --build-arg BINARIES="$binaries" --build-arg GIT_COMMIT="$(git rev-parse --short=11 HEAD)" \
            -t "ergon-$target:dev" . > "/tmp/ergon-docker-$target.log" 2>&1 ||
            { tail -30 "/tmp/ergon-docker-$target.log"; exit 1; }
    done
    if ! docker image inspect "$prometheus_image" > /dev/null 2>&1 && ! pullable "$prometheus_image"; then
        log "no registry: building $prometheus_image from Debian's prometheus"
        DOCKER_BUILDKIT=1 docker build --network host -t "$prometheus_image" docker/prometheus \
            > /tmp/ergon-docker-prometheus.log 2>&1 || { tail -30 /tmp/ergon-docker-prometheus.log; exit 1; }
    fi
    log "images built in $(($(date +%s) - started)) s:"
    docker image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | grep -E '^(ergon-|prom/|debian:)' | sed 's/^/  /'
}

rpc() {
    curl -s -H 'Content-Type: application/json' \
        -d "{\"id\":1,\"jsonrpc\":\"2.0\",\"method\":\"$1\",\"params\":[${2:-}]}" http://127.0.0.1:9944
}

finalized() {
    local hash
    hash=$(rpc chain_getFinalizedHead | sed -n 's/.*"result":"\(0x[0-9a-f]*\)".*/\1/p')
    [ -n "$hash" ] || { echo 0; return; }
    echo $(($(rpc chain_getHeader "\"$hash\"" | sed -n 's/.*"number":"\(0x[0-9a-f]*\)".*/\1/p')))
}

# Waits up to $1 seconds for the command after it to succeed.
wait_until() {
    local limit="$1" t=0
    shift
    until "$@"; do
        t=$((t + 2))
        [ "$t" -lt "$limit" ] || return 1
        sleep 2
    done
}

has_finalized() { [ "$(finalized)" -ge 1 ]; }
joined_pool() { compose logs --no-color "worker-$1" 2>&1 | grep -q 'joining the verifier pool: in a block'; }

smoke() {
    source scripts/lib/client.sh
    install_client
    trap 'compose logs --no-color --tail 40 > /tmp/ergon-docker-smoke.log 2>&1 || true; compose down -v > /dev/null 2>&1 || true' EXIT
    compose down -v > /dev/null 2>&1 || true
    local up job view
    up=$(date +%s)
    compose up -d
    log "waiting for the first finalized block"
    wait_until 300 has_finalized ||
        { log "no finalized block in 300 s (logs: /tmp/ergon-docker-smoke.log)"; exit 1; }
    log "first finalized block $(($(date +%s) - up)) s after compose up"
    log "waiting for the daemons to join the verifier pool"
    for name in alice bob charlie dave; do
        wait_until 300 joined_pool "$name" || { log "worker-$name did not join the pool"; exit 1; }
    done
    log "Ferdie posts the Fashion-MNIST MLP job (100 ERG) with the user CLI"
    job=$(node scripts/client/ergon.mjs post-job worker/examples/fashion-mnist-mlp.json --key //Ferdie \
        --budget 100 --bid-window 20 --deadline 600 --yes --json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["jobs"][0])')
    timeout 1500 node scripts/client/ergon.mjs watch-job "$job" | sed 's/^/  /' || true
    view=$(rpc ergon_job "$job")
    grep -q '"status":"completed"' <<< "$view" || { log "job $job did not complete: $view"; exit 1; }
    log "job $job settled $(($(date +%s) - up)) s after compose up"
    local up_targets
    up_targets=$(curl -s http://127.0.0.1:9090/api/v1/targets | grep -o '"health":"up"' | wc -l)
    log "Prometheus: $up_targets of 8 targets up"
    [ "$up_targets" -eq 8 ] || exit 1
    log "smoke test passed"
}

case "$what" in
all) images; smoke ;;
images) images ;;
smoke) smoke ;;
*) echo "usage: $0 [--if-available] [all|images|smoke]" >&2; exit 2 ;;
esac
