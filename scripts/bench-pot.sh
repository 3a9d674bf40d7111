#!/usr/bin/env bash
# Proof-of-Training benchmark (a benchmark, not a test): for each forger of the attack suite, the
# detection rate over SAMPLES forged bundles (default 20) with SEGMENTS random segments replayed
# (default 4, what one verifier replays on chain), which checks caught it, and what the six full-pass
# rules alone catch; the false-positive rate over SAMPLES honest bundles (different seeds) and
# verification time as a fraction of training,
# how often a verifier that does not replay guesses a segment's sketch wrong, the lazy-trainer table,
# and the verifier's cost on the Fashion-MNIST MLP with and without a dataset cache.
# SAMPLES=0 prints only the lazy-trainer table (the chain's segment assignment, no training).
# The honest-run calibration across thread counts is scripts/calibrate-pot.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ergon-target}"
cargo bench --locked -p ergon-engine --features attacks --bench pot -- "${SAMPLES:-20}" "${SEGMENTS:-4}"
