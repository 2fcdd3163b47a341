#!/usr/bin/env bash
# One-sided communication and MPI-IO across nodes that share only the file system (the
# fake nodes of a test bed, or real machines).
#
# usage: tests/nodes/rma-io.sh PREFIX HOSTFILE NP [MPIRUN-ARGS...]
#
# Builds crates/capi/tests/c/rma.c (every synchronisation mode and window flavour) and io.c
# (shared and ordered file pointers, atomic mode, collectives) with PREFIX/bin/mpicc into a
# scratch directory under the repository's target/ (which the nodes must share), then runs
#   rma.c on 2 ranks, one per node (--map-by node): every peer reached with messages;
#   rma.c on NP ranks mapped by slot: windows that mix same-node and other-node peers;
#   io.c on NP ranks, its data files in the scratch directory;
# each with PREFIX/bin/mpirun --hostfile HOSTFILE MPIRUN-ARGS (e.g. the launch agent).
# Exit status 0 when every run printed its success line, 1 otherwise.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 PREFIX HOSTFILE NP [MPIRUN-ARGS...]" >&2; exit 2; }
prefix=$1 hosts=$2 np=$3
shift 3
repo=$(cd "$(dirname "$0")/../.." && pwd)
src=$repo/crates/capi/tests/c
scratch=$(mkdir -p "$repo/target" && mktemp -d "$repo/target/nodes-rma-io.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
for p in rma io; do
    "$prefix/bin/mpicc" -I"$src" "$src/$p.c" -o "$scratch/$p" || exit 1
done
mkdir "$scratch/data"
fail=0
check() { # check NAME EXPECTED-LINE MPIRUN-ARGS...
    local name=$1 want=$2 out
    shift 2
    out=$(timeout -k 10 300 "$prefix/bin/mpirun" --hostfile "$hosts" "$@" 2>&1)
    if grep -qxF "$want" <<<"$out"; then
        echo "ok: $name"
    else
        echo "FAILED: $name"
        sed 's/^/    /' <<<"$out" | tail -n 30
        fail=1
    fi
}
check "rma.c, 2 ranks on 2 nodes" "rma: all checks passed on 2 ranks" \
    "$@" --map-by node -n 2 "$scratch/rma"
check "rma.c, $np ranks by slot" "rma: all checks passed on $np ranks" \
    "$@" -n "$np" "$scratch/rma"
check "io.c, $np ranks" "io: done" "$@" -n "$np" "$scratch/io" "$scratch/data"
left=$(ls -A "$scratch/data")
[ -z "$left" ] || { echo "FAILED: io.c left files behind: $left"; fail=1; }
exit $fail
