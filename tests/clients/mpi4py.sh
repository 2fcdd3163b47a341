#!/usr/bin/env bash
# mpi4py (unmodified PyPI binary wheel 4.1.2) on oxmpi's libmpi.so.12.
#
# usage: tests/clients/mpi4py.sh PREFIX
#
# 1. Sets up target/venv-mpi4py (idempotent; see mpi4py-env.sh).
# 2. Under PREFIX/bin/mpirun at np=1, 2 and 4: the import loads OUR library (no system
#    Open MPI/MPICH, MPICH-ABI extension, version 4.1), pickle and buffer send/recv, ring,
#    barrier (mpi4py_checks.py); mpi4py.bench helloworld and ringtest, the ring test also
#    at np=4 with mpirun --profile (every profile file written).
# 3. mpi4py's own test modules environ, toplevel, status, request, p2p_obj, p2p_buf,
#    msgspec, errhandler from its sdist, at np=1 and np=2, one mpirun per module.
#    Set OXMPI_MPI4PY_MODULES="a b" to choose other modules, or "" to skip this step, and
#    MPI4PY_TEST_SPAWN=1 to include the spawn tests (test_spawn, test_dynproc).
# Also a mpi4py.futures MPIPoolExecutor example (workers spawned) under mpirun -n 1.
# Exits non-zero if anything fails; prints a summary line "N passed, N failed".
set -uo pipefail
# shellcheck source=tests/clients/mpi4py-env.sh
. "$(dirname "$0")/mpi4py-env.sh"

here=$(cd "$(dirname "$0")" && pwd)
passed=0
failed=0
failures=()
log=$(mktemp -d "${TMPDIR:-/tmp}/oxmpi-mpi4py.XXXXXX")
trap 'rm -rf "$log"' EXIT

# run NAME TIMEOUT CMD...: run one check, keep its output only on failure.
run() {
    local name=$1 t=$2
    shift 2
    local start=$SECONDS
    if timeout -k 10 "$t" "$@" >"$log/out" 2>&1; then
        passed=$((passed + 1))
        echo "ok    $name ($((SECONDS - start))s)"
    else
        local rc=$?
        failed=$((failed + 1))
        failures+=("$name")
        echo "FAIL  $name (exit $rc, $((SECONDS - start))s); last output:"
        tail -n 40 "$log/out" | sed 's/^/      /'
    fi
}

for n in 1 2 4; do
    run "wheel checks np=$n" 120 env OXMPI_CHECK_SIZE=$n \
        "$MPIRUN" -n "$n" "$PY" -m mpi4py "$here/mpi4py_checks.py" "$PREFIX"
done
# Without our launcher the same checks must notice a wrong library; with MPI4PY_LIBMPI
# pointing at ours they pass as a singleton.
run "wheel checks singleton (MPI4PY_LIBMPI)" 120 env OXMPI_CHECK_SIZE=1 \
    MPI4PY_LIBMPI="$PREFIX/lib/libmpi.so.12" "$PY" -m mpi4py "$here/mpi4py_checks.py" "$PREFIX"
run "mpi4py.bench helloworld np=2" 120 "$MPIRUN" -n 2 "$PY" -m mpi4py.bench helloworld
run "mpi4py.bench ringtest np=2" 120 "$MPIRUN" -n 2 "$PY" -m mpi4py.bench ringtest
# The job profile of the ring test at np=4 (issue 18): every file is written.
run "mpi4py.bench ringtest np=4 --profile" 120 bash -c '"$1" -n 4 --profile="$2" "$3" -m \
    mpi4py.bench ringtest && for f in profile.json matrix.csv functions.csv sizes.csv \
    ranks.csv collectives.csv matrix.png times.png sizes.png index.html; do
    test -s "$2/$f" || { echo "$2/$f missing"; exit 1; }; done' _ "$MPIRUN" "$log/prof" "$PY"
# MPIPoolExecutor starts its workers with MPI_Comm_spawn.
run "mpi4py.futures pool np=1" 120 "$MPIRUN" -n 1 "$PY" -m mpi4py.futures "$here/mpi4py_pool.py"

modules=${OXMPI_MPI4PY_MODULES-environ toplevel status request p2p_obj p2p_buf msgspec errhandler}
if [ -n "$modules" ]; then
    tests=$(mpi4py_sdist_tests) || exit 2
    for m in $modules; do
        for n in 1 2; do
            run "test_$m np=$n" 300 "$MPIRUN" -n "$n" "$PY" "$tests/main.py" -q \
                -i "^test_$m\.py\$"
        done
    done
fi

echo "mpi4py: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
    printf 'mpi4py: failed: %s\n' "${failures[@]}"
    exit 1
fi
