#!/usr/bin/env bash
# Build systems find an installed oxmpi and build against it: CMake's
# find_package(MPI REQUIRED COMPONENTS C Fortran), Meson's dependency('mpi') for c and
# fortran, autotools' AC_PROG_CC([mpicc]) and plain pkg-config (oxmpi, mpi, mpich;
# oxmpi-fort, mpi-fort), and the wrappers mpicc and mpifort themselves. Each builds
# buildsystems/hello.c (all but autotools also hello.f90, with `use mpi`), which runs under
# our mpirun at np=2 and checks it runs on oxmpi. The compiler wrappers' probes (-show,
# -showme:*, -compile_info, -link_info, --version) are checked first.
#
# usage: tests/clients/buildsystems.sh PREFIX [LABEL]
#   PREFIX: an install prefix (cargo xtask install), a venv holding the oxmpi wheel, or the
#   Debian package's /usr/lib/<triplet>/oxmpi. LABEL names the work directory
#   (target/buildsystems-LABEL, default "prefix").
# Needs cmake, meson, ninja-build, autoconf, automake, pkg-config, gfortran (scripts/deps.sh).
set -uo pipefail

die() { echo "buildsystems: $*" >&2; exit 2; }
[ $# -ge 1 ] || die "usage: $0 PREFIX [LABEL]"
[ -x "$1/bin/mpicc" ] || die "$1/bin/mpicc not found (not an oxmpi prefix)"
PREFIX=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$repo/target/buildsystems-${2:-prefix}
for t in cmake meson ninja autoreconf pkg-config gfortran; do
    command -v "$t" >/dev/null || die "$t is missing: run scripts/deps.sh"
done
rm -rf "$work"
mkdir -p "$work"
cp -r "$here/buildsystems/." "$work/src"

# Only our MPI is visible: our bin/ first, no other MPI's pkg-config files (Meson asks
# pkg-config for Open MPI's ompi-c before it tries mpicc), no library path.
export PATH="$PREFIX/bin:/usr/local/bin:/usr/bin:/bin"
export PKG_CONFIG_LIBDIR="$PREFIX/lib/pkgconfig"
unset LD_LIBRARY_PATH PKG_CONFIG_PATH MPI_HOME MPICC CC MPICH_CC OMPI_CC OXMPI_CC \
    MPIFC MPIF90 MPIF77 FC MPICH_FC OMPI_FC OXMPI_FC
libmpi=$(readlink -f "$PREFIX/lib/libmpi.so.12")
libmpifort=$(readlink -f "$PREFIX/lib/libmpifort.so.12")

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
    # mpifort, as CMake's FindMPI (-showme:compile, -showme:link; -compile-info, -link-info;
    # -show; -showme:incdirs, -showme:libdirs) and Meson (--showme:version, --showme:compile,
    # --showme:link) ask it: the include directory holds mpif.h and the modules, the link
    # line has the Fortran library before the C library.
    for q in -showme:compile --showme:compile -compile-info -show -showme:incdirs; do
        out=$(mpifort $q) && [[ $out == *"$PREFIX/include"* ]] || { echo "mpifort $q: $out"; return 1; }
    done
    for q in -showme:link --showme:link -link-info -show; do
        out=$(mpifort $q) && [[ $out == *"-L$PREFIX/lib"* && $out == *"-lmpifort -lmpi"* ]] ||
            { echo "mpifort $q: $out"; return 1; }
    done
    out=$(mpifort -showme:libdirs) && [[ $out == *"$PREFIX/lib"* ]] || return 1
    out=$(mpifort --showme:version) && [[ $out == *oxmpi* ]] || return 1
    for f in mpif.h mpi.mod mpi_f08.mod; do
        [ -f "$PREFIX/include/$f" ] || { echo "no $PREFIX/include/$f"; return 1; }
    done
    out=$(mpif90 --version) && [[ $out == *"$(gfortran --version | head -n1)"* ]] || return 1
    echo "probes ok"
}

# runs_on_oxmpi EXE [fortran]: EXE loads our libmpi.so.12 (and with "fortran" our
# libmpifort.so.12) and runs at np=2 under our mpirun.
runs_on_oxmpi() {
    local exe=$1 got
    got=$(ldd "$exe" | awk '$1 == "libmpi.so.12" { print $3 }')
    [ "$(readlink -f "$got")" = "$libmpi" ] || { echo "$exe loads '$got', not $libmpi"; return 1; }
    if [ "${2:-}" = fortran ]; then
        got=$(ldd "$exe" | awk '$1 == "libmpifort.so.12" { print $3 }')
        [ "$(readlink -f "$got")" = "$libmpifort" ] ||
            { echo "$exe loads '$got', not $libmpifort"; return 1; }
    fi
    got=$(timeout -k 5 60 "$PREFIX/bin/mpirun" -n 2 "$exe") || { echo "$got"; return 1; }
    echo "$got"
    grep -q '^hello: 2 ranks on oxmpi.*token 1 (expected 1)$' <<<"$got"
}

# The wrappers themselves, as a Makefile would call them.
wrappers_client() {
    mpicc src/hello.c -o hello-mpicc && runs_on_oxmpi ./hello-mpicc || return 1
    mpifort src/hello.f90 -o hello-mpifort && runs_on_oxmpi ./hello-mpifort fortran
}

cmake_client() {
    local h
    cmake -S src/cmake -B cmake -G Ninja | tee cmake-configure.txt
    [ "${PIPESTATUS[0]}" = 0 ] || return 1
    grep -q "^MPI_C_COMPILER:FILEPATH=$PREFIX/bin/mpicc$" cmake/CMakeCache.txt ||
        { grep MPI_C_COMPILER cmake/CMakeCache.txt; return 1; }
    # FindMPI tries mpif90 before mpifort (CMake 3.25's name list).
    grep -Eq "^MPI_Fortran_COMPILER:FILEPATH=$PREFIX/bin/mpif(90|ort|77)$" cmake/CMakeCache.txt ||
        { grep MPI_Fortran_COMPILER cmake/CMakeCache.txt; return 1; }
    # FindMPI's test programs with mpif.h, `use mpi` and `use mpi_f08` all built.
    for h in F77_HEADER F90_MODULE F08_MODULE; do
        grep -q "oxmpi-client: MPI_Fortran_HAVE_$h=TRUE$" cmake-configure.txt || return 1
    done
    cmake --build cmake || return 1
    runs_on_oxmpi cmake/hello && runs_on_oxmpi cmake/hello_f fortran
}

meson_client() {
    meson setup meson src/meson || return 1
    grep -q "^mpicc found: YES ($PREFIX/bin/mpicc)" meson/meson-logs/meson-log.txt || return 1
    grep -q "^Run-time dependency MPI for c found: YES" meson/meson-logs/meson-log.txt || return 1
    grep -q "^mpifort found: YES ($PREFIX/bin/mpifort)" meson/meson-logs/meson-log.txt ||
        return 1
    grep -q "^Run-time dependency MPI for fortran found: YES" meson/meson-logs/meson-log.txt ||
        return 1
    ninja -C meson || return 1
    runs_on_oxmpi meson/hello && runs_on_oxmpi meson/hello_f fortran
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
    for n in oxmpi-fort mpi-fort; do
        pkg-config --exists "$n" || { echo "pkg-config does not know $n"; return 1; }
        # shellcheck disable=SC2046
        gfortran $(pkg-config --cflags "$n") src/hello.f90 -o "hello-$n" $(pkg-config --libs "$n") ||
            return 1
        runs_on_oxmpi "./hello-$n" fortran || return 1
    done
}

step wrapper-probes probes
step wrappers wrappers_client
step cmake cmake_client
step meson meson_client
step autotools autotools_client
step pkg-config pkgconfig_client
steps_summary "buildsystems ($PREFIX)"
