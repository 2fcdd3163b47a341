#!/usr/bin/env bash
# oxmpi installed the way users install MPI, end to end.
#
# usage: tests/clients/packaging.sh PREFIX [wheel] [deb]      (default: both)
#
# wheel: `cargo xtask wheel --prefix PREFIX`, then a fresh venv gets the wheel, the unmodified
#   mpi4py 4.1.2 wheel and numpy from one `pip install`, and, with only the venv's bin/ on
#   PATH and no LD_LIBRARY_PATH: `python -m oxmpi`; mpi4py finds our libmpi.so.12 without
#   mpirun and without any variable; `mpirun -n 2 python -m mpi4py.bench ringtest` and a few
#   mpi4py test modules; the build systems (buildsystems.sh, C and Fortran) against the venv.
# deb (needs root; CI runs as root): `cargo xtask deb --prefix PREFIX`, lintian without
#   errors, install, switch the mpi/mpirun/mpi-<triplet> alternatives to oxmpi (mpifort,
#   mpif77, mpif90 and mpi-fort.pc with them), run programs built by `mpicc.mpich` and
#   `mpif90.mpich` and ones built by the alternatives' `mpicc` and `mpifort` under
#   `mpirun`, the build systems against the package, then purge it and check that the
#   alternatives are as before and that Debian's MPICH and Open MPI still build and run.
#   The package is purged and the alternatives restored even when a step fails.
set -uo pipefail

die() { echo "packaging: $*" >&2; exit 2; }
[ $# -ge 1 ] || die "usage: $0 PREFIX [wheel] [deb]"
[ -f "$1/lib/libmpi.so.12" ] || die "$1 is not an installed oxmpi prefix"
PREFIX=$(cd "$1" && pwd)
shift
parts=${*:-wheel deb}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
STEPS_DIR=$repo/target/packaging-test
rm -rf "$STEPS_DIR"
mkdir -p "$STEPS_DIR"
# shellcheck source=tests/clients/steps.sh
. "$here/steps.sh"
packages=$repo/target/packages
hello=$here/buildsystems/hello.c
hello_f=$here/buildsystems/hello.f90

# --- the wheel ---------------------------------------------------------------------------
venv=$repo/target/venv-oxmpi-wheel
# In the venv: only its bin/ on PATH, nothing else that could find an MPI.
in_venv() {
    timeout -k 10 300 env -i HOME="$HOME" PATH="$venv/bin" TMPDIR="${TMPDIR:-/tmp}" \
        MPI4PY_TEST_SPAWN=0 "$@"
}

wheel_build() {
    rm -f "$packages"/oxmpi-*.whl
    cargo xtask wheel --prefix "$PREFIX" --out "$packages" || return 1
    ls "$packages"/oxmpi-*-py3-none-manylinux_*_x86_64.whl
}

wheel_install() {
    local whl
    whl=$(ls "$packages"/oxmpi-*.whl) || return 1
    rm -rf "$venv"
    "${PYTHON:-python3}" -m venv "$venv" || return 1
    "$venv/bin/pip" install -q --disable-pip-version-check --only-binary mpi4py \
        "$whl" "mpi4py==4.1.2" numpy || return 1
    [ -x "$venv/bin/mpirun" ] && [ -x "$venv/bin/mpicc" ] && [ -f "$venv/lib/libmpi.so.12" ] &&
        [ -x "$venv/bin/mpifort" ] && [ -x "$venv/bin/mpif90" ] &&
        [ -f "$venv/lib/libmpifort.so.12" ] && [ -f "$venv/include/mpi_f08.mod" ] &&
        [ -f "$venv/include/mpif.h" ] && [ -f "$venv/lib/pkgconfig/oxmpi-fort.pc" ]
}

wheel_python_m_oxmpi() {
    local out
    out=$(in_venv python -m oxmpi) || return 1
    echo "$out"
    grep -qx "oxmpi [0-9.]*" <<<"$out" && grep -qx "library: $venv/lib/libmpi.so.12" <<<"$out" &&
        grep -qx "Fortran modules built by: GNU Fortran .*" <<<"$out"
}

# mpi4py finds the wheel's library by itself: no mpirun, no MPI4PY_LIBMPI.
wheel_mpi4py_finds_it() {
    local out
    out=$(in_venv python -c '
from mpi4py import MPI
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libmpi" in l or "libmpich" in l]
print(MPI.Get_library_version().splitlines()[0])
print("\n".join(sorted(set(maps))))') || return 1
    echo "$out"
    [ "$(sed -n 1p <<<"$out" | cut -c1-5)" = oxmpi ] || return 1
    [ "$(sed -n '2,$p' <<<"$out")" = "$venv/lib/libmpi.so.12" ]
}

wheel_ringtest() {
    in_venv mpirun -n 2 python -m mpi4py.bench ringtest
}

wheel_mpi4py_tests() {
    local tests m
    # mpi4py-env.sh finds the venv complete (mpi4py 4.1.2, numpy) and unpacks the sdist.
    # shellcheck source=tests/clients/mpi4py-env.sh
    tests=$(OXMPI_MPI4PY_VENV=$venv; . "$here/mpi4py-env.sh" "$venv" && mpi4py_sdist_tests) ||
        return 1
    for m in environ toplevel status p2p_obj p2p_buf cco_obj; do
        echo "== test_$m np=2"
        in_venv mpirun -n 2 python "$tests/main.py" -q -i "^test_$m\.py\$" || return 1
    done
}

if [[ " $parts " == *" wheel "* ]]; then
    step wheel-build wheel_build
    step wheel-install wheel_install
    step wheel-python-m-oxmpi wheel_python_m_oxmpi
    step wheel-mpi4py-finds-libmpi wheel_mpi4py_finds_it
    step wheel-mpi4py-bench-ringtest wheel_ringtest
    step wheel-mpi4py-tests wheel_mpi4py_tests
    step wheel-buildsystems bash "$here/buildsystems.sh" "$venv" wheel
fi

# --- the Debian package ------------------------------------------------------------------
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
alternatives=(mpi mpirun "mpi-$triplet")
saved=()
# Alternatives as they were: "name status value" per line.
save_alternatives() {
    local a
    for a in "${alternatives[@]}"; do
        saved+=("$a $(update-alternatives --query "$a" 2>/dev/null |
            awk '/^Status:/ { s = $2 } /^Value:/ { v = $2 } END { print s, v }')")
    done
}
alternatives_now() {
    local a
    for a in "${alternatives[@]}"; do
        echo "$a $(update-alternatives --query "$a" 2>/dev/null |
            awk '/^Status:/ { s = $2 } /^Value:/ { v = $2 } END { print s, v }')"
    done
}
restore_alternatives() {
    local line a s v
    for line in "${saved[@]}"; do
        read -r a s v <<<"$line"
        if [ "$s" = manual ] && [ -e "$v" ]; then
            update-alternatives --quiet --set "$a" "$v" || true
        elif [ -n "$s" ]; then
            update-alternatives --quiet --auto "$a" || true
        fi
    done
}
deb_cleanup() {
    if dpkg-query -W -f='${Status}' oxmpi 2>/dev/null | grep -q installed; then
        dpkg --purge oxmpi >/dev/null 2>&1 || echo "packaging: could not purge oxmpi" >&2
    fi
    restore_alternatives
}

deb_build() {
    rm -f "$packages"/oxmpi_*.deb
    cargo xtask deb --prefix "$PREFIX" --out "$packages" || return 1
    ls "$packages"/oxmpi_*.deb || return 1
    # The Fortran modules are gfortran's: the package names the compiler and module format.
    local format
    format=$(gzip -dc "$PREFIX/include/mpi.mod" | sed -n "1s/^GFORTRAN module version '\([0-9]*\)'.*/\1/p")
    dpkg-deb -f "$packages"/oxmpi_*.deb Recommends Description | tee /dev/stderr |
        grep -q "gfortran-mod-$format" || { echo "no gfortran-mod-$format"; return 1; }
}

deb_lintian() {
    lintian --fail-on error --tag-display-limit 0 "$packages"/oxmpi_*.deb
}

deb_install_and_switch() {
    dpkg -i "$packages"/oxmpi_*.deb || return 1
    update-alternatives --set mpi /usr/bin/mpicc.oxmpi &&
        update-alternatives --set mpirun /usr/bin/mpirun.oxmpi &&
        update-alternatives --set "mpi-$triplet" "/usr/lib/$triplet/oxmpi/include" || return 1
    readlink -f /usr/bin/mpicc /usr/bin/mpirun "/usr/include/$triplet/mpi" \
        "/usr/lib/$triplet/libmpi.so" "/usr/lib/$triplet/pkgconfig/mpi.pc" \
        /usr/bin/mpifort "/usr/lib/$triplet/libmpifort.so" "/usr/lib/$triplet/pkgconfig/mpi-fort.pc"
    # The Fortran wrappers are slaves of `mpi`, as MPICH's and Open MPI's are.
    local out f
    out=$(update-alternatives --display mpi) || return 1
    echo "$out"
    for f in mpif77 mpif90 mpifort; do
        grep -qx "  slave $f: /usr/bin/$f.oxmpi" <<<"$out" || { echo "no slave $f"; return 1; }
    done
}

# run_np2 WANT CMD...: CMD, a launch of hello at np=2, prints the hello line on library WANT
# (oxmpi, MPICH, Open MPI), which hello checks too.
run_np2() {
    local want=$1 out
    shift
    out=$(timeout -k 5 60 "$@" "$want") || { echo "$out"; return 1; }
    echo "$out"
    grep -q "^hello: 2 ranks on $want.*token 1 (expected 1)\$" <<<"$out"
}

deb_alternatives_mpicc() {
    /usr/bin/mpicc "$hello" -o hello-alt || return 1
    ldd hello-alt | grep "libmpi.so.12 => /usr/lib/$triplet/oxmpi/lib/libmpi.so.12" || return 1
    run_np2 oxmpi /usr/bin/mpirun -n 2 ./hello-alt || return 1
    # pkg-config's `mpi` is the alternative's oxmpi.pc.
    # shellcheck disable=SC2046
    cc $(pkg-config --cflags mpi) "$hello" -o hello-pc $(pkg-config --libs mpi) &&
        run_np2 oxmpi /usr/bin/mpirun -n 2 ./hello-pc || return 1
    # Fortran: the alternatives' mpifort, and pkg-config's `mpi-fort`.
    /usr/bin/mpifort "$hello_f" -o hello-alt-f || return 1
    ldd hello-alt-f | grep "libmpifort.so.12 => /usr/lib/$triplet/oxmpi/lib/libmpifort.so.12" ||
        return 1
    run_np2 oxmpi /usr/bin/mpirun -n 2 ./hello-alt-f || return 1
    # shellcheck disable=SC2046
    gfortran $(pkg-config --cflags mpi-fort) "$hello_f" -o hello-pc-f $(pkg-config --libs mpi-fort) &&
        run_np2 oxmpi /usr/bin/mpirun -n 2 ./hello-pc-f
}

deb_mpich_built() {
    mpicc.mpich "$hello" -o hello-mpich || return 1
    # A binary of Debian's MPICH needs libmpich.so.12: the package's private lib/ has it.
    LD_LIBRARY_PATH=/usr/lib/$triplet/oxmpi/lib run_np2 oxmpi /usr/bin/mpirun -n 2 ./hello-mpich ||
        return 1
    # A Fortran one needs libmpichfort.so.12 and libmpich.so.12: both in the private lib/.
    mpif90.mpich "$hello_f" -o hello-mpich-f || return 1
    LD_LIBRARY_PATH=/usr/lib/$triplet/oxmpi/lib run_np2 oxmpi /usr/bin/mpirun -n 2 ./hello-mpich-f
}

deb_purge_leaves_others() {
    dpkg --purge oxmpi || return 1
    restore_alternatives
    local now
    now=$(alternatives_now)
    [ "$now" = "$(printf '%s\n' "${saved[@]}")" ] ||
        { echo "alternatives before: ${saved[*]}"; echo "after: $now"; return 1; }
    [ ! -e "/usr/lib/$triplet/libmpi.so.12" ] || { echo "libmpi.so.12 left behind"; return 1; }
    mpicc.mpich "$hello" -o hello-mpich2 && run_np2 MPICH mpiexec.mpich -n 2 ./hello-mpich2 ||
        return 1
    mpicc.openmpi "$hello" -o hello-ompi &&
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            run_np2 "Open MPI" mpirun.openmpi --oversubscribe -n 2 ./hello-ompi
}

if [[ " $parts " == *" deb "* ]]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "packaging: SKIPPED the Debian package test: it installs into /usr and needs root" \
            "(CI runs as root)"
    else
        for t in lintian dpkg-deb dpkg-shlibdeps mpicc.mpich mpif90.mpich mpicc.openmpi; do
            command -v "$t" >/dev/null || die "$t is missing: run scripts/deps.sh"
        done
        if dpkg-query -W -f='${Status}' oxmpi 2>/dev/null | grep -q installed; then
            die "a Debian package oxmpi is already installed; not touching it"
        fi
        save_alternatives
        trap deb_cleanup EXIT
        trap 'exit 130' INT TERM
        step deb-build deb_build
        step deb-lintian deb_lintian
        step deb-install deb_install_and_switch
        step deb-alternatives-mpicc deb_alternatives_mpicc
        step deb-mpich-built deb_mpich_built
        step deb-buildsystems bash "$here/buildsystems.sh" "/usr/lib/$triplet/oxmpi" deb
        step deb-purge-leaves-mpich-and-openmpi deb_purge_leaves_others
    fi
fi

steps_summary packaging
