# Runs the steps of scripts/test.sh and keeps account of them (sourced).
#
# Each step's output goes to the terminal as it comes and to a log; the step's wall time, exit
# status and the test counts of its libtest summaries ("test result: ok. 12 passed; 0 failed; ...",
# one per test binary; cargo has no stable machine-readable test output) and of node --test's
# ("# pass 4", "# fail 0") are recorded. A failed
# step does not stop the others: the table at the end shows every step, so one run tells all that
# is broken. A step that fails without a failed test (a build error) counts as one failure.

STEPS_LOGS="$(mktemp -d)"
STEP_NAMES=()
STEP_SECONDS=()
STEP_PASSED=()
STEP_FAILED=()
STEP_STATUS=()

# run_step <name> <command> [<args>...]: runs one step (a command or a shell function).
run_step() {
    local name="$1"
    shift
    local log="$STEPS_LOGS/${#STEP_NAMES[@]}.log" start=$SECONDS status=0
    printf '\n== %s\n' "$name"
    set +e
    (set -e; "$@") 2>&1 | tee "$log"
    status="${PIPESTATUS[0]}"
    set -e
    record_step "$name" "$log" "$status" $((SECONDS - start))
}

# A step beside others: started from inside a step (start_step_beside, e.g. once the integration
# tests' binaries are built and the lanes only wait for the chain), at the lowest CPU and I/O
# priority, so that it takes only the time the running tests leave; finish_step_beside waits for it
# and enters it in the table with its own wall time. Steps run in subshells, so it reports through
# files, not variables.
BESIDE="$STEPS_LOGS/beside"

# start_step_beside <command> [<args>...]: starts it in the background, output to its own log.
start_step_beside() {
    (
        renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
        ionice -c 3 -p "$BASHPID" >/dev/null 2>&1 || true
        echo "$SECONDS" >"$BESIDE.start"
        set +e
        (set -e; "$@")
        echo "$? $SECONDS" >"$BESIDE.tmp"
        mv "$BESIDE.tmp" "$BESIDE.done"
    ) >"$BESIDE.log" 2>&1 &
}

# finish_step_beside <name> <command> [<args>...]: waits for the step started beside and records it
# under <name>; if it was never started (the step that starts it failed first), runs it now.
finish_step_beside() {
    local name="$1"
    shift
    if [ ! -e "$BESIDE.start" ]; then
        run_step "$name" "$@"
        return
    fi
    while [ ! -e "$BESIDE.done" ]; do sleep 2; done
    local status end
    read -r status end <"$BESIDE.done"
    printf '\n== %s\n' "$name"
    cat "$BESIDE.log"
    record_step "$name" "$BESIDE.log" "$status" $((end - $(cat "$BESIDE.start")))
}

# record_step <name> <log> <status> <seconds>: enters a finished step in the table.
record_step() {
    local name="$1" log="$2" status="$3" seconds="$4"
    local counts passed failed
    counts="$(python3 - "$log" <<'EOF'
import re, sys
passed = failed = 0
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"test result: \w+\. (\d+) passed; (\d+) failed", line.strip())
    if m:
        passed += int(m.group(1))
        failed += int(m.group(2))
    # node --test's TAP summary.
    m = re.match(r"# (pass|fail) (\d+)$", line.strip())
    if m:
        if m.group(1) == "pass":
            passed += int(m.group(2))
        else:
            failed += int(m.group(2))
print(passed, failed)
EOF
)"
    read -r passed failed <<<"$counts"
    if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
    STEP_NAMES+=("$name")
    STEP_SECONDS+=("$seconds")
    STEP_PASSED+=("$passed")
    STEP_FAILED+=("$failed")
    if [ "$status" -eq 0 ]; then STEP_STATUS+=(ok); else STEP_STATUS+=(FAILED); fi
}

# steps_summary: prints the table of steps and the closing line; returns non-zero if any failed.
steps_summary() {
    local i total=0 passed=0 failed=0 width=0
    for i in "${!STEP_NAMES[@]}"; do
        [ "${#STEP_NAMES[$i]}" -gt "$width" ] && width="${#STEP_NAMES[$i]}"
    done
    printf '\n== where the time went\n'
    printf "%-${width}s  %8s  %7s  %6s  %s\n" step time passed failed status
    for i in "${!STEP_NAMES[@]}"; do
        printf "%-${width}s  %5dm%02ds  %7d  %6d  %s\n" "${STEP_NAMES[$i]}" \
            $((STEP_SECONDS[i] / 60)) $((STEP_SECONDS[i] % 60)) "${STEP_PASSED[$i]}" \
            "${STEP_FAILED[$i]}" "${STEP_STATUS[$i]}"
        total=$((total + STEP_SECONDS[i]))
        passed=$((passed + STEP_PASSED[i]))
        failed=$((failed + STEP_FAILED[i]))
    done
    printf "%-${width}s  %5dm%02ds\n" "total of the steps" $((total / 60)) $((total % 60))
    printf "%-${width}s  %5dm%02ds\n" "wall clock (a step beside others overlaps them)" \
        $((SECONDS / 60)) $((SECONDS % 60))
    rm -rf "$STEPS_LOGS"
    printf '%d passed, %d failed\n' "$passed" "$failed"
    [ "$failed" -eq 0 ]
}
