#!/usr/bin/env bash
# Start-up across fake nodes that share only the file system (tests/fakenodes/fakenodes.sh:
# own network, PID, IPC, UTS and mount namespaces, launched through their ssh-style agent):
# the wall time of a hello job (bench/c/hello.c: MPI_Init + MPI_Finalize) on NODES nodes x
# PPN ranks for oxmpi's mpirun, MPICH's Hydra (mpiexec.mpich, its ssh launcher set to the
# same agent) and Open MPI's mpirun (plm_rsh_agent set to the same agent). Implementations
# are interleaved within each round; prints every launch, then per implementation the
# median time and the median of the per-round ratios to oxmpi (issue 14's goal: oxmpi at
# most 0.25x Hydra).
#
# usage: bench/startup-nodes.sh PREFIX [ROUNDS]      (default 11 rounds; NODES=4 PPN=8)
# Needs root, iproute2, util-linux, mpich and openmpi (scripts/deps.sh installs them).
# Measure on a quiet machine; one round (`startup-nodes.sh PREFIX 1`) only checks the script.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
P=$(cd "${1:?usage: startup-nodes.sh PREFIX [ROUNDS]}" && pwd)
rounds=${2:-11}
nodes=${NODES:-4}
ppn=${PPN:-8}
np=$((nodes * ppn))

[ "$(id -u)" -eq 0 ] || { echo "startup-nodes: needs root (network namespaces)" >&2; exit 2; }
. "$root/tests/fakenodes/fakenodes.sh"
work=$(mktemp -d)
trap 'fakenodes_down; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
fakenodes_up "$nodes" || { echo "startup-nodes: cannot set up $nodes fake nodes" >&2; exit 2; }
fakenodes_peers "$work" "$ppn"

impls=()
build() { # build NAME CC: hello.c with CC, the implementation is measured if that works
  if command -v "$2" >/dev/null && "$2" -O1 "$root/bench/c/hello.c" -o "$work/hello.$1" 2>"$work/cc.err"; then
    impls+=("$1")
  else
    echo "startup-nodes: $1 skipped: cannot build hello.c with $2" >&2
  fi
}
build oxmpi "$P/bin/mpicc"
build hydra mpicc.mpich
build ompi mpicc.openmpi

# One launch script per implementation: a hello job on every slot.
cat >"$work/run.oxmpi" <<EOS
exec "$P/bin/mpirun" --hostfile "$FN_DIR/hosts" --mca plm_rsh_agent "$FN_DIR/agent" \
  -n $np "$work/hello.oxmpi"
EOS
cat >"$work/run.hydra" <<EOS
exec mpiexec.mpich -launcher ssh -launcher-exec "$work/agent-sh" -f "$work/hosts.hydra" \
  -localhost "$FN_NET.1" -n $np "$work/hello.hydra"
EOS
cat >"$work/run.ompi" <<EOS
exec mpirun.openmpi --allow-run-as-root --mca plm_rsh_agent "$work/agent-sh" \
  --hostfile "$FN_DIR/hosts" --mca oob_tcp_if_include "$FN_NET.0/24" \
  --mca btl_tcp_if_include "$FN_NET.0/24" -n $np "$work/hello.ompi"
EOS

echo "startup-nodes: $nodes nodes x $ppn ranks, $rounds round(s), ${impls[*]}"
: >"$work/times"
for r in $(seq 1 "$rounds"); do
  for i in "${impls[@]}"; do
    t0=$(date +%s%N)
    timeout -k 5 120 sh "$work/run.$i" >"$work/out" 2>&1 </dev/null
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    lines=$(grep -c '^RSS prog=hello' "$work/out")
    if [ $rc -ne 0 ] || [ "$lines" -ne $np ]; then
      echo "round $r $i: FAILED (exit $rc, $lines of $np ranks reported); last output:"
      tail -n 5 "$work/out" | sed 's/^/    /'
      for p in $(fakenodes_pids); do kill -9 "$p" 2>/dev/null; done
      continue
    fi
    echo "round $r $i: $ms ms"
    echo "$r $i $ms" >>"$work/times"
  done
done
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for i in "${impls[@]}"; do
  m=$(awk -v i="$i" '$2 == i { print $3 }' "$work/times" | median)
  ratio=$(awk -v i="$i" '$2 == "oxmpi" { o[$1] = $3 } $2 == i { t[$1] = $3 }
    END { for (r in o) if (r in t && t[r] > 0) print o[r] / t[r] }' "$work/times" | median)
  echo "startup-nodes: $i median ${m:-n/a} ms; oxmpi/$i median of per-round ratios ${ratio:-n/a}"
done
