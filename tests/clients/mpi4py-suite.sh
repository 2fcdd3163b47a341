#!/usr/bin/env bash
# mpi4py's own test suite (from the 4.1.2 sdist) against the unmodified wheel on oxmpi.
#
# usage: tests/clients/mpi4py-suite.sh PREFIX NP [MODULE...]
#
# Runs every test/test_*.py module (or the given module names, e.g. `p2p_obj`) in its own
# `PREFIX/bin/mpirun -n NP python test/main.py -q -i '^test_<m>\.py$'` (MPI4PY_TEST_SPAWN=0,
# OXMPI_MPI4PY_MODULE_TIMEOUT seconds each, default 300), so that a crash or hang in one
# module does not hide the others. Counts are rank 0's unittest summary of each module
# (failures/errors include failing subTests, as unittest reports them).
# Prints one line per module and a total; logs go to <repo>/target/mpi4py-suite/npNP/ (or
# $OXMPI_MPI4PY_LOGS/npNP/).
# Ranks yield the CPU while they wait (OXMPI_MCA_mpi_yield_when_idle=1 unless set): on a
# machine shared with other jobs, busy-polling ranks that are not oversubscribed among
# themselves still compete for the cores, and each message then costs a scheduler timeslice
# (test_cco_ngh_buf at np=2 under a load of ~15 on 2 cores: 174 s wall / 47 s CPU polling,
# 84 s / 13 s yielding).
# Exit status: 0 if every module passed, 1 otherwise.
set -uo pipefail
# shellcheck source=tests/clients/mpi4py-env.sh
. "$(dirname "$0")/mpi4py-env.sh"
[ $# -ge 2 ] || die "usage: $0 PREFIX NP [MODULE...]"
np=$2
shift 2
tests=$(mpi4py_sdist_tests) || exit 2
export OXMPI_MCA_mpi_yield_when_idle=${OXMPI_MCA_mpi_yield_when_idle:-1}
logs=${OXMPI_MPI4PY_LOGS:-$REPO/target/mpi4py-suite}/np$np
mkdir -p "$logs"
if [ $# -gt 0 ]; then
    modules=("$@")
else
    modules=()
    for f in "$tests"/test_*.py; do
        m=$(basename "$f" .py)
        modules+=("${m#test_}")
    done
fi

t_run=0 t_fail=0 t_err=0 t_skip=0
bad=()
start_all=$SECONDS
for m in "${modules[@]}"; do
    log=$logs/test_$m.log
    start=$SECONDS
    timeout -k 10 "${OXMPI_MPI4PY_MODULE_TIMEOUT:-300}" "$MPIRUN" --tag-output -n "$np" \
        "$PY" "$tests/main.py" -q -i "^test_$m\.py\$" >"$log" 2>&1
    rc=$?
    r0=$(sed -n 's/^\[[^,]*,0\]<std[a-z]*>://p' "$log")
    ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in.*/\1/p' <<<"$r0" | tail -n 1)
    summary=$(grep -E '^(OK|FAILED)( \(|$)' <<<"$r0" | tail -n 1)
    count() { sed -n "s/.*[(, ]$1=\([0-9]*\).*/\1/p" <<<"$summary"; }
    f=$(count failures) e=$(count errors) s=$(count skipped)
    ran=${ran:-0} f=${f:-0} e=${e:-0} s=${s:-0}
    t_run=$((t_run + ran)) t_fail=$((t_fail + f)) t_err=$((t_err + e)) t_skip=$((t_skip + s))
    if [ $rc -eq 0 ] && [[ $summary == OK* ]]; then
        state=ok
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        state=TIMEOUT
    elif [[ $summary == FAILED* ]]; then
        state=FAILED
    else
        state="CRASHED(exit $rc)"
    fi
    [ "$state" = ok ] || bad+=("test_$m: $state")
    printf '%-22s %-16s ran %4d  failures %3d  errors %3d  skipped %3d  %4ds\n' \
        "test_$m" "$state" "$ran" "$f" "$e" "$s" $((SECONDS - start))
done
# unittest counts failures/errors per subTest, so they can exceed the number of tests run.
echo "mpi4py suite np=$np: ${#modules[@]} modules ($(( ${#modules[@]} - ${#bad[@]} )) ok, ${#bad[@]} not ok), ran $t_run tests: failures $t_fail, errors $t_err, skipped $t_skip ($((SECONDS - start_all))s); logs in $logs"
if [ ${#bad[@]} -gt 0 ]; then
    printf 'not ok: %s\n' "${bad[@]}"
    exit 1
fi
