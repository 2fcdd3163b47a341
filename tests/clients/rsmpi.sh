#!/usr/bin/env bash
# rsmpi (the `mpi` crate from crates.io, unmodified) on oxmpi.
#
# usage: tests/clients/rsmpi.sh PREFIX
#
# Builds tests/clients/rsmpi-hello (a standalone crate, not in the oxmpi workspace) with
# PREFIX/bin first in PATH, so rsmpi's build probe (build-probe-mpi) runs our `mpicc -show`
# and mpi-sys compiles its shim and runs bindgen (needs libclang: libclang-dev) on our
# mpi.h; then runs it under PREFIX/bin/mpirun at np=1, 2 and 4 (hello + token ring +
# wildcard receives; every rank checks that MPI_Get_library_version is oxmpi's).
# rsmpi drops the RPATH that `mpicc -show` prints, so the ranks find libmpi.so.12 through
# `mpirun --prefix PREFIX` (which prepends PREFIX/lib to LD_LIBRARY_PATH).
# Target dir: <repo>/target/rsmpi-hello (override with OXMPI_RSMPI_TARGET_DIR).
# Exits non-zero if anything fails; prints "N passed, N failed".
set -uo pipefail

die() {
    echo "$(basename "$0"): $*" >&2
    exit 2
}
[ $# -ge 1 ] || die "usage: $0 PREFIX"
[ -d "$1" ] || die "install prefix '$1' does not exist (cargo xtask install --prefix DIR)"
PREFIX=$(cd "$1" && pwd)
[ -x "$PREFIX/bin/mpicc" ] && [ -x "$PREFIX/bin/mpirun" ] || die "$PREFIX/bin/{mpicc,mpirun} missing"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
crate=$here/rsmpi-hello
export CARGO_TARGET_DIR=${OXMPI_RSMPI_TARGET_DIR:-$repo/target/rsmpi-hello}
export PATH=$PREFIX/bin:$PATH
unset MPI_PKG_CONFIG CRAY_MPICH_DIR MPICC

# mpi-sys's build script does not re-run when the MPI installation changes: rebuild it
# whenever `mpicc -show` or mpi.h differ from the last build.
stamp=$CARGO_TARGET_DIR/oxmpi-mpi-stamp
want=$( (mpicc -show && cat "$PREFIX/include/mpi.h") | sha256sum | cut -d' ' -f1)
mkdir -p "$CARGO_TARGET_DIR"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    cargo clean -q --manifest-path "$crate/Cargo.toml" -p mpi-sys 2>/dev/null || true
fi
echo "rsmpi: mpicc -show: $(mpicc -show)"
start=$SECONDS
if ! cargo build -q --locked --manifest-path "$crate/Cargo.toml"; then
    echo "rsmpi: 0 passed, 1 failed"
    die "cargo build of rsmpi-hello failed"
fi
echo "$want" >"$stamp"
bin=$CARGO_TARGET_DIR/debug/rsmpi-hello
echo "ok    build ($((SECONDS - start))s): NEEDED $(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(libmpi[^]]*\)\]/\1/p')"

passed=1
failed=0
for n in 1 2 4; do
    start=$SECONDS
    out=$(timeout -k 10 120 "$PREFIX/bin/mpirun" --prefix "$PREFIX" -n "$n" "$bin" 2>&1)
    rc=$?
    hellos=$(grep -c "^hello from rank [0-9]* of $n (MPI 4.1, oxmpi" <<<"$out")
    if [ $rc -eq 0 ] && [ "$hellos" -eq "$n" ] && grep -q "^ring ok: $n ranks" <<<"$out"; then
        passed=$((passed + 1))
        echo "ok    mpirun -n $n ($((SECONDS - start))s)"
    else
        failed=$((failed + 1))
        echo "FAIL  mpirun -n $n (exit $rc, $hellos hello lines); output:"
        sed 's/^/      /' <<<"$out"
    fi
done
echo "rsmpi: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
