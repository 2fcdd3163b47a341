#!/usr/bin/env bash
# Which mpi4py 4.1.2 tests skip on oxmpi and on MPICH 5.0.2 (the PyPI `mpich` wheel), in the
# same run, and the per-test difference.
#
# usage: tests/clients/mpi4py-skips.sh PREFIX NP [MODULE...]
#
# Each module of the sdist's test/ runs verbosely (`main.py -v`) once under
# our `PREFIX/bin/mpirun` with the unmodified mpi4py wheel on our libmpi.so.12, and once
# under the wheel's own Hydra `mpiexec` with the same mpi4py wheel on MPICH's libmpi.so.12
# (a second venv, target/venv-mpich4py, holding mpi4py, numpy and `mpich`). Rank 0's
# verbose unittest output goes to LOGS/{oxmpi,mpich}/npNP/test_<m>.log; the skipped test ids
# (with their reasons) to LOGS/{oxmpi,mpich}-npNP.skips, and the two lists are compared:
#   only-oxmpi-npNP.txt   tests only oxmpi skips (what is left for us to implement)
#   only-mpich-npNP.txt   tests only MPICH skips
# LOGS is $OXMPI_MPI4PY_LOGS or <repo>/target/mpi4py-skips. Prints per-module skip counts
# of both and the totals. Exit status: 0 (the comparison is a report, not a verdict).
# test_spawn and test_dynproc run as tests/clients/mpi4py-suite.sh runs them: with
# MPI4PY_TEST_SPAWN from the environment (0 unless set, mpi4py-env.sh), for both libraries.
set -uo pipefail
# shellcheck source=tests/clients/mpi4py-env.sh
. "$(dirname "$0")/mpi4py-env.sh"
[ $# -ge 2 ] || die "usage: $0 PREFIX NP [MODULE...]"
np=$2
shift 2
tests=$(mpi4py_sdist_tests) || exit 2
MVENV=${OXMPI_MPICH4PY_VENV:-$REPO/target/venv-mpich4py}
if ! "$MVENV/bin/python" -c "import mpi4py, numpy, sys; sys.exit(mpi4py.__version__ != '$MPI4PY_VERSION')" \
    2>/dev/null || [ ! -x "$MVENV/bin/mpiexec" ]; then
    echo "mpich: setting up $MVENV (mpi4py==$MPI4PY_VERSION, numpy, mpich==5.0.2 wheels)"
    "${PYTHON:-python3}" -m venv "$MVENV" || die "cannot create venv $MVENV"
    "$MVENV/bin/pip" install -q --only-binary :all: "mpi4py==$MPI4PY_VERSION" numpy \
        "mpich==5.0.2" || die "pip install of the mpich wheel failed"
fi
export OXMPI_MCA_mpi_yield_when_idle=${OXMPI_MCA_mpi_yield_when_idle:-1}
logs=${OXMPI_MPI4PY_LOGS:-$REPO/target/mpi4py-skips}
mkdir -p "$logs/oxmpi/np$np" "$logs/mpich/np$np"
if [ $# -gt 0 ]; then
    modules=("$@")
else
    modules=()
    for f in "$tests"/test_*.py; do
        m=$(basename "$f" .py)
        modules+=("${m#test_}")
    done
fi

# Rank 0's stderr (unittest's verbose lines) into $1; the others' into $1.rankN.
rank_wrapper='r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; out=$0; [ "$r" = 0 ] || out=$0.rank$r
exec "$@" 2>"$out"'

# The skipped test ids and reasons of a verbose unittest log, one per line.
skips() {
    sed -n "s/^\([A-Za-z0-9_]*\) (\([A-Za-z0-9_.]*\)) \.\.\. skipped \(.*\)$/\2 \3/p" "$1"
}

: >"$logs/oxmpi-np$np.skips"
: >"$logs/mpich-np$np.skips"
rm -f "$logs/oxmpi-np$np.errors" "$logs/mpich-np$np.errors"
# Per module: the skips of each library, then each one's exit status and seconds.
printf '%-22s %8s %8s   %s\n' module oxmpi mpich '(exit/seconds: oxmpi mpich)'
for m in "${modules[@]}"; do
    took=()
    for impl in oxmpi mpich; do
        start=$SECONDS
        log=$logs/$impl/np$np/test_$m.log
        rm -f "$log" "$log".rank*
        if [ $impl = oxmpi ]; then
            launch=("$MPIRUN" -n "$np") py=$PY
        else
            launch=("$MVENV/bin/mpiexec" -n "$np") py=$MVENV/bin/python
        fi
        timeout -k 10 "${OXMPI_MPI4PY_MODULE_TIMEOUT:-300}" "${launch[@]}" \
            sh -c "$rank_wrapper" "$log" "$py" "$tests/main.py" -v -i "^test_$m\.py\$" \
            >/dev/null 2>"$log.launcher"
        rc=$?
        took+=("$rc/$((SECONDS - start))s")
        [ $rc -eq 0 ] || echo "test_$m on $impl: exit $rc (see $log)" >>"$logs/$impl-np$np.errors"
        skips "$log" >>"$logs/$impl-np$np.skips"
    done
    printf '%-22s %8d %8d   %s %s\n' "test_$m" "$(skips "$logs/oxmpi/np$np/test_$m.log" | wc -l)" \
        "$(skips "$logs/mpich/np$np/test_$m.log" | wc -l)" "${took[@]}"
done
ids() { cut -d' ' -f1 "$1" | sort -u; }
comm -23 <(ids "$logs/oxmpi-np$np.skips") <(ids "$logs/mpich-np$np.skips") >"$logs/only-oxmpi-np$np.txt"
comm -13 <(ids "$logs/oxmpi-np$np.skips") <(ids "$logs/mpich-np$np.skips") >"$logs/only-mpich-np$np.txt"
echo "np=$np skipped: oxmpi $(wc -l <"$logs/oxmpi-np$np.skips"), mpich $(wc -l <"$logs/mpich-np$np.skips");" \
    "only oxmpi $(wc -l <"$logs/only-oxmpi-np$np.txt"), only mpich $(wc -l <"$logs/only-mpich-np$np.txt")" \
    "(lists in $logs)"
