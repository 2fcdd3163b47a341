# Sourced by the mpi4py client scripts: resolve PREFIX, set up (idempotently) a venv with the
# unmodified mpi4py 4.1.2 binary wheel and numpy, and (on request) unpack mpi4py's sdist for
# its test suite. Everything lives under the repository's target/ directory.
#
# In:  $1 = oxmpi install prefix (from `cargo xtask install --prefix DIR`).
# Env: OXMPI_MPI4PY_VENV (default <repo>/target/venv-mpi4py),
#      OXMPI_MPI4PY_SDIST (default <repo>/target/mpi4py-sdist), PYTHON (default python3).
# Out: PREFIX, VENV, PY, MPIRUN, REPO; mpi4py_sdist_tests prints the sdist's test/ directory.

MPI4PY_VERSION=4.1.2

die() {
    echo "$(basename "$0"): $*" >&2
    exit 2
}

[ $# -ge 1 ] || die "usage: $0 PREFIX"
[ -d "$1" ] || die "install prefix '$1' does not exist (cargo xtask install --prefix DIR)"
PREFIX=$(cd "$1" && pwd)
MPIRUN=$PREFIX/bin/mpirun
[ -x "$MPIRUN" ] || die "$MPIRUN not found"
[ -f "$PREFIX/lib/libmpi.so.12" ] || die "$PREFIX/lib/libmpi.so.12 not found"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${OXMPI_MPI4PY_VENV:-$REPO/target/venv-mpi4py}
PY=$VENV/bin/python

if ! "$PY" -c "import mpi4py, numpy, sys; sys.exit(mpi4py.__version__ != '$MPI4PY_VERSION')" \
    2>/dev/null; then
    echo "mpi4py: setting up $VENV (mpi4py==$MPI4PY_VERSION binary wheel, numpy)"
    "${PYTHON:-python3}" -m venv "$VENV" || die "cannot create venv $VENV"
    # --only-binary: the unmodified wheel from PyPI, never a local source build.
    "$VENV/bin/pip" install -q --only-binary mpi4py "mpi4py==$MPI4PY_VERSION" numpy ||
        die "pip install mpi4py==$MPI4PY_VERSION numpy failed"
fi

# The sdist's test/ directory (downloaded and unpacked once; --no-binary mpi4py:
# its build dependencies come as wheels, not built from source to read the metadata).
mpi4py_sdist_tests() {
    local dir=${OXMPI_MPI4PY_SDIST:-$REPO/target/mpi4py-sdist}
    local tests=$dir/mpi4py-$MPI4PY_VERSION/test
    if [ ! -f "$tests/main.py" ]; then
        mkdir -p "$dir"
        if [ ! -f "$dir/mpi4py-$MPI4PY_VERSION.tar.gz" ]; then
            "$VENV/bin/pip" download -q --no-binary mpi4py --no-deps \
                "mpi4py==$MPI4PY_VERSION" -d "$dir" >&2 || die "pip download of the sdist failed"
        fi
        tar -xzf "$dir/mpi4py-$MPI4PY_VERSION.tar.gz" -C "$dir" || die "cannot unpack the sdist"
    fi
    echo "$tests"
}

# Spawn tests only when asked (MPI4PY_TEST_SPAWN=1: MPI_Comm_spawn works on one node).
export MPI4PY_TEST_SPAWN=${MPI4PY_TEST_SPAWN:-0}
