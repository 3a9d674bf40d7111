# Runs the integration test binaries in parallel lanes (sourced by scripts/test.sh).
#
# The integration tests spend most of their time waiting for the chain (even on the fast runtime's
# 0.5 s slots and 25 s epochs: draws 16 blocks after a commitment, bid windows), not computing, so
# three lanes of them share 2 cores without slowing each other much.
# Each lane runs its tests one at a time, with its own loopback port window (`ERGON_TEST_PORTS`); a
# test's output is printed whole when it ends, then a summary of every test with its time.

# run_lanes <cargo test arguments> -- <lane> [<lane>...]
#   A lane is a space-separated list of test target names (`tests/tests/<name>.rs`). Every test
#   target of the package must be in exactly one lane. Returns non-zero if any test failed.
#   $LANES_AFTER_BUILD, if set, is run once the binaries are built, before the lanes start.
run_lanes() {
    local cargo_args=() lanes=()
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do cargo_args+=("$1"); shift; done
    shift
    lanes=("$@")

    local work
    work="$(mktemp -d)"
    # Build every test binary first, and learn where cargo put each one.
    cargo test "${cargo_args[@]}" --no-run --message-format=json >"$work/build.json"
    python3 - "$work/build.json" >"$work/executables" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") \
            and msg["target"]["kind"] == ["test"]:
        print(msg["target"]["name"], msg["executable"])
EOF
    local listed
    listed="$(cut -d' ' -f1 "$work/executables" | sort | tr '\n' ' ')"
    if [ "$listed" != "$(printf '%s\n' ${lanes[*]} | sort | tr '\n' ' ')" ]; then
        echo "run_lanes: the lanes ($(echo ${lanes[*]})) must list every test target once: $listed" >&2
        rm -rf "$work"
        return 1
    fi

    # Whatever waits for the cargo lock to be free (scripts/test.sh: the builds beside the lanes).
    if [ -n "${LANES_AFTER_BUILD:-}" ]; then "$LANES_AFTER_BUILD"; fi

    # Disjoint shares of free_port's default window, 20000–31999 (tests/src/lib.rs), which stays
    # below the ephemeral range (32768+).
    local lane_count="${#lanes[@]}" pids=() i
    local span=$(( 12000 / lane_count ))
    for i in "${!lanes[@]}"; do
        (
            export ERGON_TEST_PORTS="$(( 20000 + i * span ))-$(( 20000 + (i + 1) * span - 1 ))"
            # This checkout, as `cargo test` would tell the binaries (`tests::repo_dir`): a binary
            # cargo reuses from another checkout sharing the target directory (CI's clone, or this
            # one after CI) was compiled with that checkout's path, which may be gone or stale.
            export CARGO_MANIFEST_DIR="$PWD/tests"
            for name in ${lanes[$i]}; do
                exe="$(awk -v n="$name" '$1 == n { print $2 }' "$work/executables")"
                start=$(date +%s)
                if "$exe" --test-threads=1 >"$work/$name.log" 2>&1; then verdict=ok; else verdict=FAILED; fi
                seconds=$(( $(date +%s) - start ))
                echo "$name $verdict ${seconds}s (lane $((i + 1)))" >>"$work/summary"
                {
                    flock 9
                    printf '\n-- %s: %s in %ss (lane %s of %s)\n' "$name" "$verdict" "$seconds" \
                        "$((i + 1))" "$lane_count"
                    cat "$work/$name.log"
                } 9>"$work/print.lock"
            done
        ) &
        pids+=("$!")
    done
    for i in "${pids[@]}"; do wait "$i" || true; done

    printf '\n-- integration tests, %s lanes:\n' "$lane_count"
    sort -k3 -n -r "$work/summary" | sed 's/^/   /'
    local failed=0
    grep -q " FAILED " "$work/summary" && failed=1
    [ "$(wc -l <"$work/summary")" -eq "$(wc -l <"$work/executables")" ] || failed=1
    rm -rf "$work"
    return "$failed"
}
