# Sourced by the client scripts: run named steps, keep each one's output, print a summary.
#   step NAME CMD...      run CMD (a command or a shell function) in a subshell in
#                         $STEPS_DIR, output in $STEPS_DIR/NAME.log; "ok NAME" or "FAIL
#                         NAME" and the log's tail
#   steps_summary LABEL   "LABEL: N passed, N failed"; returns 1 if a step failed
# The launches inside the steps carry their own time limits.
STEPS_DIR=${STEPS_DIR:-.}
steps_passed=0
steps_failed=0
steps_failures=()

step() {
    local name=$1 start=$SECONDS
    shift
    if (cd "$STEPS_DIR" && "$@") >"$STEPS_DIR/$name.log" 2>&1 </dev/null; then
        steps_passed=$((steps_passed + 1))
        echo "ok    $name ($((SECONDS - start))s)"
    else
        steps_failed=$((steps_failed + 1))
        steps_failures+=("$name")
        echo "FAIL  $name ($((SECONDS - start))s); last output:"
        tail -n 30 "$STEPS_DIR/$name.log" | sed 's/^/      /'
    fi
}

steps_summary() {
    echo "$1: $steps_passed passed, $steps_failed failed"
    if [ "$steps_failed" -gt 0 ]; then
        echo "$1: failed: ${steps_failures[*]}"
        return 1
    fi
}
