#!/usr/bin/env bash
# Build systems find an installed oxmpi and build against it: CMake's
# find_package(MPI REQUIRED COMPONENTS C), Meson's dependency('mpi'), autotools'
# AC_PROG_CC([mpicc]) and plain pkg-config (oxmpi, mpi, mpich). Each builds
# buildsystems/hello.c, which runs under our mpirun at np=2 and checks it runs on oxmpi.
# The compiler wrapper's probes (-show, -showme:*, -compile_info, -link_info, --version)
# are checked first.
#
# usage: tests/clients/buildsystems.sh PREFIX [LABEL]
#   PREFIX: an install prefix (cargo xtask install), a venv holding the oxmpi wheel, or the
#   Debian package's /usr/lib/<triplet>/oxmpi. LABEL names the work directory
#   (target/buildsystems-LABEL, default "prefix").
# Needs cmake, meson, ninja-build, autoconf, automake, pkg-config (scripts/deps.sh).
set -uo pipefail

die() { echo "buildsystems: $*" >&2; exit 2; }
[ $# -ge 1 ] || die "usage: $0 PREFIX [LABEL]"
[ -x "$1/bin/mpicc" ] || die "$1/bin/mpicc not found (not an oxmpi prefix)"
PREFIX=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$repo/target/buildsystems-${2:-prefix}
for t in cmake meson ninja autoreconf pkg-config; do
    command -v "$t" >/dev/null || die "$t is missing: run scripts/deps.sh"
done
rm -rf "$work"
mkdir -p "$work"
cp -r "$here/buildsystems/." "$work/src"

# Only our MPI is visible: our bin/ first, no other MPI's pkg-config files (Meson asks
# pkg-config for Open MPI's ompi-c before it tries mpicc), no library path.
export PATH="$PREFIX/bin:/usr/local/bin:/usr/bin:/bin"
export PKG_CONFIG_LIBDIR="$PREFIX/lib/pkgconfig"
unset LD_LIBRARY_PATH PKG_CONFIG_PATH MPI_HOME MPICC CC MPICH_CC OMPI_CC OXMPI_CC
libmpi=$(readlink -f "$PREFIX/lib/libmpi.so.12")

STEPS_DIR=$work
# shellcheck source=tests/clients/steps.sh
. "$here/steps.sh"

# The wrapper answers each probe with exit 0 and the right flags.
probes() {
    local out
    out=$(mpicc -show x.c) && [[ $out == *"-I$PREFIX/include"* && $out == *-lmpi ]] || return 1
    for q in -showme:compile --showme:compile -compile_info -compile-info; do
        out=$(mpicc $q) && [[ $out == *"-I$PREFIX/include"* ]] || { echo "$q: $out"; return 1; }
    done
    for q in -showme:link --showme:link -link_info -link-info; do
        out=$(mpicc $q) && [[ $out == *"-L$PREFIX/lib"* && $out == *-lmpi ]] ||
            { echo "$q: $out"; return 1; }
    done
    out=$(mpicc --showme:version) && [[ $out == *oxmpi* ]] || return 1
    # --version is the compiler's own answer (autoconf reads it), without MPI flags.
    out=$(mpicc --version) && [[ $out == *"$(cc --version | head -n1)"* ]] || return 1
    mpicxx -showme:compile | grep -q -- "-I$PREFIX/include" || return 1
    echo "probes ok"
}

# runs_on_oxmpi EXE: EXE loads our libmpi.so.12 and runs at np=2 under our mpirun.
runs_on_oxmpi() {
    local exe=$1 got
    got=$(ldd "$exe" | awk '$1 == "libmpi.so.12" { print $3 }')
    [ "$(readlink -f "$got")" = "$libmpi" ] || { echo "$exe loads '$got', not $libmpi"; return 1; }
    got=$(timeout -k 5 60 "$PREFIX/bin/mpirun" -n 2 "$exe") || { echo "$got"; return 1; }
    echo "$got"
    grep -q '^hello: 2 ranks on oxmpi.*token 1 (expected 1)$' <<<"$got"
}

cmake_client() {
    cmake -S src/cmake -B cmake -G Ninja || return 1
    grep -q "^MPI_C_COMPILER:FILEPATH=$PREFIX/bin/mpicc$" cmake/CMakeCache.txt ||
        { grep MPI_C_COMPILER cmake/CMakeCache.txt; return 1; }
    cmake --build cmake || return 1
    runs_on_oxmpi cmake/hello
}

meson_client() {
    meson setup meson src/meson || return 1
    grep -q "^mpicc found: YES ($PREFIX/bin/mpicc)" meson/meson-logs/meson-log.txt || return 1
    grep -q "^Run-time dependency MPI for c found: YES" meson/meson-logs/meson-log.txt || return 1
    ninja -C meson || return 1
    runs_on_oxmpi meson/hello
}

autotools_client() {
    (cd src/autotools && autoreconf -i) || return 1
    mkdir -p autotools && (cd autotools && ../src/autotools/configure && make) || return 1
    grep -q "^CC='mpicc'$" autotools/config.log || { grep "^CC=" autotools/config.log; return 1; }
    runs_on_oxmpi autotools/hello
}

pkgconfig_client() {
    local n
    for n in oxmpi mpi mpich; do
        pkg-config --exists "$n" || { echo "pkg-config does not know $n"; return 1; }
        # shellcheck disable=SC2046
        cc $(pkg-config --cflags "$n") src/hello.c -o "hello-$n" $(pkg-config --libs "$n") ||
            return 1
        runs_on_oxmpi "./hello-$n" || return 1
    done
}

step wrapper-probes probes
step cmake cmake_client
step meson meson_client
step autotools autotools_client
step pkg-config pkgconfig_client
steps_summary "buildsystems ($PREFIX)"
