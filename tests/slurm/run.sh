#!/usr/bin/env bash
# Jobs on a real Slurm cluster whose 4 nodes are network+UTS namespaces (own address and host
# name, tests/slurm/up.sh in netns mode), with no oxmpi parameter set: `srun --mpi=pmi2` and
# `mpirun` inside `salloc` (daemons started as overlapping srun steps), on 2 nodes: every
# rank on its node, ring, collectives, one-sided communication (rma.c) and MPI-IO (io.c),
# a rank failing in MPI_Init, kill -9 of a remote rank (also with ULFM on under srun: the
# survivors shrink and reduce), MPI_Abort on a remote node, two
# mpiruns at once in one allocation, MPI_Comm_spawn (from mpirun and under srun), and
# mpi4py's MPI-IO test module (both ways, one rank per node); on 4 nodes: every rank on
# its node, and a rank failing in MPI_Init, killed or aborting on another node.
# Each case checks its status, its output and its time; the cluster is torn down at the end,
# also on failure.
#
# usage: tests/slurm/run.sh PREFIX   (needs root and slurm-wlm + munge, see scripts/deps.sh)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
P=$(cd "${1:?usage: run.sh PREFIX}" && pwd)

skip() {
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  echo "!!! slurm: SKIPPED, the Slurm tests did not run: $1" >&2
  echo "!!! (scripts/deps.sh installs slurm-wlm and munge; the tests need root)" >&2
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  exit 0
}
[ "$(id -u)" -eq 0 ] || skip "not root"
for c in srun slurmctld slurmd munged ip; do command -v $c >/dev/null || skip "no $c"; done
ip netns list | grep -q '^pmi-' && skip "another Slurm test bed runs on this host (pmi-* namespaces)"

work=$(mktemp -d)
chmod 755 "$work" # munged runs as user munge and must reach its directory below
export OXMPI_SLURM_DIR=$work/s
cleanup() {
  "$here/down.sh" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
SLURM_MODE=netns SLURM_NODES=4 SLURM_CPUS=4 "$here/up.sh" >"$work/up.log" 2>&1 || {
  cat "$work/up.log" >&2
  skip "the cluster did not come up here"
}
on_head=$OXMPI_SLURM_DIR/run-on-head

for s in ring abort; do "$P/bin/mpicc" "$root/bin/mpirun/tests/c/$s.c" -o "$work/$s" || exit 1; done
for s in where kill9 spawn_where; do "$P/bin/mpicc" "$root/tests/fakenodes/c/$s.c" -o "$work/$s" || exit 1; done
for s in coll rma io; do
  "$P/bin/mpicc" -I "$root/crates/capi/tests/c" "$root/crates/capi/tests/c/$s.c" -o "$work/$s" || exit 1
done
"$P/bin/mpicc" "$root/crates/capi/tests/c/ulfm.c" -o "$work/ulfm" || exit 1
mkdir -p "$work/io-data"
# Rank FAILRANK (default 3, on node 2) fails in MPI_Init: an interface that does not exist.
cat >"$work/failinit" <<EOF
#!/bin/sh
[ "\${PMI_RANK:-\$SLURM_PROCID}" = "\${FAILRANK:-3}" ] && export OXMPI_MCA_btl_tcp_if_include=nosuch0
exec $work/where
EOF
chmod +x "$work/failinit"

failures=0
# case NAME WANT_RC MAX_SECONDS GREP COMMAND...: runs COMMAND in the head namespace (WANT_RC and
# GREP are extended regular expressions).
case_() {
  local name=$1 want=$2 max=$3 g=$4 t0 rc secs ok=1
  shift 4
  t0=$(date +%s%N)
  timeout -k 5 "${case_timeout:-60}" "$on_head" "$@" >"$work/out" 2>&1 </dev/null
  rc=$?
  secs=$((($(date +%s%N) - t0) / 1000000))
  secs=$(printf '%d.%03d' $((secs / 1000)) $((secs % 1000)))
  [[ "$rc" =~ ^($want)$ ]] || { echo "  exit status $rc, expected $want"; ok=0; }
  awk -v s="$secs" -v m="$max" 'BEGIN { exit !(s <= m) }' || { echo "  took ${secs}s, limit ${max}s"; ok=0; }
  grep -qE -- "$g" "$work/out" || { echo "  no line matches /$g/"; ok=0; }
  if [ $ok = 1 ]; then
    echo "slurm: $name: ok (${secs}s)"
  else
    echo "slurm: $name: FAILED"
    sed 's/^/    /' "$work/out" | head -20
    failures=$((failures + 1))
  fi
}
# lines_ NAME COUNT REGEX: the last case's output has COUNT lines matching REGEX (a failure
# is reported once, in one line, not by every rank).
lines_() {
  local got
  got=$(grep -cE -- "$3" "$work/out")
  [ "$got" = "$2" ] && return
  echo "slurm: $1: $got lines match /$3/, expected $2"
  sed 's/^/    /' "$work/out" | head -20
  failures=$((failures + 1))
}
srun_() { case_ "srun --mpi=pmi2: $1" "$2" "$3" "$4" srun --mpi=pmi2 -N2 -n4 "${@:5}"; }
salloc_() { case_ "mpirun in salloc: $1" "$2" "$3" "$4" salloc -N2 -n4 "${@:5}"; }

srun_ "every rank on its node" 0 10 "^rank 3 on n2" "$work/where"
srun_ "ring" 0 10 "^ring total 18" "$work/ring"
srun_ "collectives" 0 30 "^coll: all checks passed" "$work/coll"
srun_ "a rank failing in MPI_Init" 137 5 "rank 3: btl_tcp_if_include=nosuch0" "$work/failinit"
srun_ "kill -9 of a remote rank" 137 5 "task 3: Killed" "$work/kill9"
# ULFM under srun (no mpirun): fault tolerance on through the environment, and Slurm keeps
# the step's other tasks running when one is killed (-K0, --kill-on-bad-exit=0). ulfm.c's
# rank 3 (on n2) kills itself; the 3 survivors (on both nodes) revoke, agree, shrink and
# reduce. srun's status is the killed task's.
srun_ "ULFM: the survivors of kill -9 shrink and reduce" 137 10 "^ulfm: rank 0 ok" -K0 \
  --export=ALL,OXMPI_MCA_mpi_ft_enable=true "$work/ulfm"
n=$(grep -cE '^ulfm: rank [0-2] ok$' "$work/out")
[ "$n" = 3 ] || { echo "slurm: ULFM under srun: $n of 3 survivors ok"; failures=$((failures + 1)); }
salloc_ "every rank on its node" 0 10 "^rank 3 on n2" "$P/bin/mpirun" "$work/where"
salloc_ "ring" 0 10 "^ring total 18" "$P/bin/mpirun" "$work/ring"
salloc_ "collectives" 0 30 "^coll: all checks passed" "$P/bin/mpirun" "$work/coll"
salloc_ "a rank failing in MPI_Init" 1 5 "rank 3 on host n2 called abort" "$P/bin/mpirun" "$work/failinit"
# Whichever mpirun hears first ends the job: the killed rank's signal, or a survivor's fatal
# MPIX_ERR_PROC_FAILED in its barrier (as in tests/fakenodes).
salloc_ "kill -9 of a remote rank" "137|1" 5 "rank 3 .*on host n2 exited on signal 9|ProcFailed: .* rank 3 failed" \
  "$P/bin/mpirun" "$work/kill9"
salloc_ "MPI_Abort on a remote node" 7 5 "rank 1 on host n2 called abort with exit code 7" \
  "$P/bin/mpirun" --map-by node "$work/abort"
salloc_ "two mpiruns at once (overlapping daemon steps)" 0 10 "^ring total 18" \
  sh -c "$P/bin/mpirun $work/where & $P/bin/mpirun $work/ring; wait"
# One-sided communication and MPI-IO across the nodes, both ways: rma.c (every window
# flavour and synchronisation mode) on one rank per node, every peer reached with messages
# (windows that mix same-node and other-node peers are a tests/fakenodes case: 4 ranks
# with a progress thread each take over a minute here when the machine is loaded), and
# io.c on 4 ranks (shared and ordered pointers, atomic mode, collectives; its files in
# $work/io-data, which it leaves empty). MPI_Abort on the second node under srun (-m cyclic
# puts rank 1 there).
case_timeout=120 case_ "srun --mpi=pmi2: rma.c, one rank per node" 0 60 "^rma: all checks passed on 2 ranks" \
  srun --mpi=pmi2 -N2 -n2 "$work/rma"
srun_ "io.c, shared pointer and atomic mode" 0 60 "^io: done" "$work/io" "$work/io-data"
srun_ "MPI_Abort on a remote node" "[1-9][0-9]*" 5 "^\[n2:[0-9]+\] oxmpi: rank 1: MPI_Abort called with error code 7" \
  -m cyclic "$work/abort"
lines_ "srun --mpi=pmi2: MPI_Abort on a remote node: one report" 1 "MPI_Abort called"
case_timeout=120 case_ "mpirun in salloc: rma.c, one rank per node" 0 60 "^rma: all checks passed on 2 ranks" \
  salloc -N2 -n2 "$P/bin/mpirun" "$work/rma"
salloc_ "io.c, shared pointer and atomic mode" 0 60 "^io: done" "$P/bin/mpirun" "$work/io" "$work/io-data"
[ -z "$(ls -A "$work/io-data")" ] || {
  echo "slurm: io.c left files behind: $(ls -A "$work/io-data")"
  failures=$((failures + 1))
}
# 4 nodes, 2 ranks each: every rank on its node, and the failures on the last node.
srun4_() { case_ "srun --mpi=pmi2, 4 nodes: $1" "$2" "$3" "$4" srun --mpi=pmi2 -N4 -n8 "${@:5}"; }
salloc4_() { case_ "mpirun in salloc, 4 nodes: $1" "$2" "$3" "$4" salloc -N4 -n8 "${@:5}"; }
srun4_ "every rank on its node" 0 10 "^rank 7 on n4" "$work/where"
srun4_ "a rank failing in MPI_Init" 137 5 "rank 7: btl_tcp_if_include=nosuch0" \
  env FAILRANK=7 "$work/failinit"
lines_ "srun --mpi=pmi2, 4 nodes: a rank failing in MPI_Init: one report" 1 "MPI_Init failed|not found"
srun4_ "kill -9 of a remote rank" 137 5 "task 7: Killed" "$work/kill9"
salloc4_ "every rank on its node" 0 10 "^rank 7 on n4" "$P/bin/mpirun" "$work/where"
salloc4_ "a rank failing in MPI_Init" 1 5 "rank 7 on host n4 called abort" \
  "$P/bin/mpirun" -x FAILRANK=7 "$work/failinit"
# Reported once, by the failing rank (and mpirun's line): the others are ended in their
# PMI fence, which is not released after an abort (not by a node's server, and not by the
# head once the job is ending), without a report of their own.
lines_ "mpirun in salloc, 4 nodes: a rank failing in MPI_Init: one report" 1 "MPI_Init failed|not found"
salloc4_ "kill -9 of a remote rank" "137|1" 5 "rank 7 .*on host n4 exited on signal 9|ProcFailed: .* rank 7 failed" \
  "$P/bin/mpirun" "$work/kill9"
salloc4_ "MPI_Abort on a remote node" 7 5 "rank 1 on host n2 called abort with exit code 7" \
  "$P/bin/mpirun" --map-by node "$work/abort"
# MPI_Comm_spawn (2 slots per node): from mpirun in salloc, children on both nodes' free
# slots, and on a node where mpirun had no daemon yet (started as one more srun step);
# under srun --mpi=pmi2 (PMI-1 and PMI-2 wire) Slurm starts the children as a new step,
# which needs SLURM_OVERLAP (else it stays pending while the parents' step holds the CPUs).
spawn_() { case_ "$1" 0 20 "$2" env SLURM_OVERLAP=1 salloc -N2 --ntasks-per-node=2 "${@:3}"; }
spawn_ "mpirun in salloc: spawn across nodes" "^child 1 of 2 on n2" \
  "$P/bin/mpirun" --map-by node -n 2 "$work/spawn_where" 2 0
spawn_ "mpirun in salloc: spawn onto a node without a daemon yet" "^child 1 of 2 on n2" \
  "$P/bin/mpirun" -n 1 "$work/spawn_where" 2 0
spawn_ "srun --mpi=pmi2: spawn across nodes" "^child 1 of 2 on n2" \
  srun --mpi=pmi2 -n2 "$work/spawn_where" 2 0
spawn_ "srun --mpi=pmi2: spawn over the PMI-2 wire" "^spawn_where: 1 children from root 1 ok" \
  env OXMPI_PMI_VERSION=2 srun --mpi=pmi2 -n2 "$work/spawn_where" 1 1
# The unmodified mpi4py wheel across the two nodes, one rank per node: mpi4py's MPI-IO test
# module (SLURM_MPI4PY_MODULES chooses others; test_rma passes on fake nodes but takes over
# a minute, see tests/fakenodes/cases/mpi4py.sh). Its venv and
# the sdist's tests come from tests/clients/mpi4py-env.sh (cargo xtask test's mpi4py step
# made them); under srun the wheel is pointed at our library as mpirun does.
. "$root/tests/clients/mpi4py-env.sh" "$P"
m4t=$(mpi4py_sdist_tests) || exit 2
for m in ${SLURM_MPI4PY_MODULES:-file}; do
  case_timeout=120 case_ "srun --mpi=pmi2: mpi4py test_$m" 0 100 "^OK( \(|\$)" \
    srun --mpi=pmi2 -N2 -n2 \
    --export=ALL,LD_LIBRARY_PATH="$P/lib",MPI4PY_LIBMPI="$P/lib/libmpi.so.12" \
    "$PY" "$m4t/main.py" -q -i "^test_$m\.py\$"
  case_timeout=120 case_ "mpirun in salloc: mpi4py test_$m" 0 100 "^OK( \(|\$)" \
    salloc -N2 -n2 "$P/bin/mpirun" "$PY" "$m4t/main.py" -q -i "^test_$m\.py\$"
done
if [ $failures -ne 0 ]; then
  echo "slurm: $failures case(s) FAILED" >&2
  exit 1
fi
echo "slurm: all cases passed"
