#!/usr/bin/env bash
# Multi-node jobs on fake nodes that share only the file system (tests/fakenodes/fakenodes.sh:
# own network, PID, IPC, UTS and mount namespaces, host names that resolve nowhere), launched
# by `mpirun` through the nodes' ssh-style agent with no other parameter set: hello (each
# rank on its node), ring, collectives, MPI_Abort on a remote node, a remote rank killed with
# SIGKILL, a rank failing in MPI_Init on a remote node, a node whose link is cut mid-job, and
# SIGTERM to mpirun while a node is cut off, a node's daemon stopped (heartbeats), two
# working interfaces per node (paired and striped).
# Every case must end in time, with the expected output and exit status, and leave no
# process and no job directory on any node (each node has its own TMPDIR).
#
# usage: tests/fakenodes/run.sh PREFIX [NODE_COUNTS...]   (default node counts: 2 4)
#        (FN_SHOW=1 also prints the output of the cases that pass)
#
# More cases (RMA, MPI-IO across nodes): every tests/fakenodes/cases/*.sh is sourced after the
# built-in cases of each node count (before the partition cases, which cut a node off),
# with `fn_mpirun ARGS...`, `fn_expect NAME WANT_RC MAX_SECONDS GREP...` (checks the last
# run), `fn_cc SRC` (compiles into $work), $nodes, $n (ranks: 2 per node) and $work.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
P=$(cd "${1:?usage: run.sh PREFIX [NODE_COUNTS...]}" && pwd)
shift
counts=${*:-2 4}

skip() {
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  echo "!!! fakenodes: SKIPPED, the multi-node tests did not run: $1" >&2
  echo "!!! (scripts/deps.sh installs iproute2 and util-linux; the tests need root)" >&2
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  exit 0
}
[ "$(id -u)" -eq 0 ] || skip "not root"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"

. "$here/fakenodes.sh"
work=$(mktemp -d)
FN_N=0
cleanup() {
  fakenodes_down
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "${FN_NS}probe" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "${FN_NS}probe"

fn_cc() {
  local src=$1 out
  out=$work/$(basename "${src%.c}")
  "$P/bin/mpicc" -O1 -I "$root/crates/capi/tests/c" "$src" -o "$out" || {
    echo "fakenodes: cannot compile $src" >&2
    exit 1
  }
}
for s in hello ring allreduce abort; do fn_cc "$root/bin/mpirun/tests/c/$s.c"; done
for s in where kill9 spin; do fn_cc "$here/c/$s.c"; done
fn_cc "$root/crates/capi/tests/c/coll.c"
fn_cc "$root/crates/capi/tests/c/stripe.c"

failures=0
# fn_start ARGS...: starts mpirun on the fake nodes in the background (pid in $bg, output in
# $work/out and $work/err); the clock ($t0) starts now.
fn_start() {
  t0=$(date +%s%N)
  timeout -k 5 120 "$P/bin/mpirun" --hostfile "$FN_DIR/hosts" --mca plm_rsh_agent "$FN_DIR/agent" \
    "$@" >"$work/out" 2>"$work/err" </dev/null &
  bg=$!
}
# fn_finish: waits for it; $rc is its status, $secs the time since $t0.
fn_finish() {
  wait $bg
  rc=$?
  secs=$((($(date +%s%N) - t0) / 1000000))
  secs=$(printf '%d.%03d' $((secs / 1000)) $((secs % 1000)))
}
# fn_mpirun ARGS...: runs mpirun on the fake nodes (stdout, stderr, status, seconds kept).
fn_mpirun() {
  fn_start "$@"
  fn_finish
}
# fn_mid_job ACTION ARGS...: runs the spin program on every slot with mpirun ARGS, runs
# ACTION once the ranks spin, and waits for mpirun; the clock starts at ACTION.
fn_mid_job() {
  local action=$1
  shift
  fn_start "$@" -n $n "$work/spin"
  fn_spinning
  t0=$(date +%s%N)
  $action
  fn_finish
}
# fn_stop_daemon I: stops node I's daemon (SIGSTOP), the process there that was given --head.
fn_stop_daemon() {
  local p
  for p in $(ip netns pids "$FN_NS$1"); do
    case $(cat "/proc/$p/comm" 2>/dev/null) in unshare | sh | ip) continue ;; esac
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '--head ' && kill -STOP "$p"
  done
}
# fn_spinning: waits (up to 60 s) until the spin program's ranks are all in their loop; if
# they are not, the next fn_expect fails and says so (acting earlier tests something else).
fn_spinning() {
  spin_late=1
  for _ in $(seq 1 600); do grep -q spinning "$work/out" && { spin_late=0; break; }; sleep 0.1; done
}
# fn_expect NAME WANT_RC MAX_SECONDS [GREP...]: checks the last run: its status (WANT_RC may
# be alternatives, `137|1`), its time, a line of stdout or stderr matching each GREP, and
# that nothing is left on any node.
fn_expect() {
  local name=$1 want=$2 max=$3 g ok=1 left
  shift 3
  [ "${spin_late:-0}" = 1 ] && { echo "  the ranks were not all spinning within 60 s when the case acted"; ok=0; }
  spin_late=0
  [[ "$rc" =~ ^($want)$ ]] || { echo "  exit status $rc, expected $want"; ok=0; }
  awk -v s="$secs" -v m="$max" 'BEGIN { exit !(s <= m) }' || { echo "  took ${secs}s, limit ${max}s"; ok=0; }
  for g in "$@"; do
    cat "$work/out" "$work/err" | grep -qE -- "$g" || { echo "  no line matches /$g/"; ok=0; }
  done
  # A node that lost its head ends its own processes: give it a few seconds.
  for _ in $(seq 1 50); do
    left=$(fakenodes_pids)
    [ -z "$left" ] && break
    sleep 0.1
  done
  if [ -n "$left" ]; then
    echo "  processes left on the nodes: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ',')" | head -5)"
    for p in $left; do kill -9 "$p" 2>/dev/null; done
    ok=0
  fi
  # A daemon that ends (even after losing its head) removes its job directory; one killed
  # with SIGKILL by design (the case sets dirs_left=1) cannot.
  left=$(ls -d "$FN_DIR"/tmp/*/oxmpi-* 2>/dev/null)
  if [ -n "$left" ] && [ "${dirs_left:-0}" != 1 ]; then
    echo "  job directories left on the nodes: $left"
    ok=0
  fi
  rm -rf "$FN_DIR"/tmp/*/oxmpi-*
  dirs_left=0
  if [ $ok = 1 ]; then
    echo "fakenodes: $nodes nodes: $name: ok (${secs}s)"
    if [ -n "${FN_SHOW:-}" ]; then
      sed 's/^/    stdout: /' "$work/out" | head -20
      sed 's/^/    stderr: /' "$work/err" | head -20
    fi
  else
    echo "fakenodes: $nodes nodes: $name: FAILED"
    sed 's/^/    stdout: /' "$work/out" | head -20
    sed 's/^/    stderr: /' "$work/err" | head -20
    failures=$((failures + 1))
  fi
}

# fn_listeners PID: mpirun PID listens on two addresses or more (the head's for the daemons
# and the name server's), none of them a wildcard; nothing on any node listens on a wildcard.
fn_listeners() {
  local mine wild i
  mine=$(ss -Hltnp | grep -F "pid=$1," | awk '{print $4}')
  wild=$(echo "$mine" | grep -E '^(0\.0\.0\.0|\*|\[::\]):')
  for i in $(seq 1 "$nodes"); do
    wild+=$(ip netns exec "$FN_NS$i" ss -Hltn | awk '{print $4}' | grep -E '^(0\.0\.0\.0|\*|\[::\]):' |
      sed "s/^/n$i: /")
  done
  if [ "$(echo "$mine" | grep -c .)" -lt 2 ] || [ -n "$wild" ]; then
    echo "fakenodes: $nodes nodes: listeners: mpirun on: $(echo $mine); on a wildcard: $(echo $wild)"
    failures=$((failures + 1))
  fi
}
# fn_lines NAME COUNT REGEX: the last run's output has COUNT lines matching REGEX (a
# failure is reported once, not by every rank).
fn_lines() {
  local got
  got=$(cat "$work/out" "$work/err" | grep -cE -- "$3")
  [ "$got" = "$2" ] && return
  echo "fakenodes: $nodes nodes: $1: $got lines match /$3/, expected $2"
  sed 's/^/    stderr: /' "$work/err" | head -20
  failures=$((failures + 1))
}

for nodes in $counts; do
  fakenodes_up "$nodes" || { echo "fakenodes: cannot set up $nodes nodes" >&2; exit 1; }
  n=$((2 * nodes))
  want=()
  for r in $(seq 0 $((n - 1))); do want+=("^rank $r on n$((r / 2 + 1))\$"); done
  fn_mpirun -n $n "$work/where"
  fn_expect "hello, every rank on its own node" 0 30 "${want[@]}"
  fn_mpirun -n $n "$work/ring"
  fn_expect "ring" 0 30 "^ring total $((3 * n * (n - 1) / 2))\$"
  fn_mpirun -n $n "$work/allreduce"
  fn_expect "allreduce" 0 30 "^rank $((n - 1)) sum $((n * (n + 1) / 2))\$"
  fn_mpirun -n $n "$work/coll"
  fn_expect "collectives" 0 60 "^coll: all checks passed\$"
  # Rank 1 is on the second node with --map-by node.
  fn_mpirun -n $n --map-by node "$work/abort"
  fn_expect "MPI_Abort on a remote node" 7 5 "rank 1.*(abort|Abort)" \
    "^\[n2:[0-9]+\] oxmpi: rank 1: MPI_Abort called with error code 7\$"
  fn_lines "MPI_Abort on a remote node: one report by the rank" 1 "MPI_Abort called"
  # Whichever is reported first ends the job: the killed rank's signal, or a peer that saw
  # it fail (MPI_ERR_PROC_FAILED in its barrier, fatal).
  fn_mpirun -n $n "$work/kill9"
  fn_expect "kill -9 of a remote rank" "137|1" 5 \
    "rank $((n - 1)) .*signal 9|ProcFailed: .* rank $((n - 1)) failed"
  # Only node 1 has this address: the ranks of the other nodes fail in MPI_Init.
  fn_mpirun -n $n --mca btl_tcp_if_include "$FN_NET.11" "$work/hello"
  fn_expect "a remote rank failing in MPI_Init" 1 5 "btl_tcp_if_include"
  # Only the failing ranks report (each its own cause); the others are ended in their PMI
  # fence without a report of their own.
  fn_lines "a remote rank failing in MPI_Init: the others quiet" 0 "not found|PMI key"
  # Two interfaces per node, the first in btl_tcp_if_include's order on a network that
  # reaches nothing: each pair of nodes tries it first (the include order), gives it up after
  # btl_tcp_connect_timeout with a verbose line, and connects over the second.
  fakenodes_dummy 10.99.0 || { echo "fakenodes: cannot add dummy interfaces" >&2; exit 1; }
  fn_mpirun -n $n --mca btl_tcp_if_include "10.99.0.0/24,$FN_NET.0/24" \
    --mca btl_tcp_connect_timeout 1 --mca btl_base_verbose 10 "$work/ring"
  fn_expect "an interface that reaches nothing is skipped" 0 40 \
    "^ring total $((3 * n * (n - 1) / 2))\$" "cannot reach rank [0-9]+ at 10\.99\.0\.[0-9]+"
  # Two working networks per node (and the dummy one, left out by btl_tcp_if_include): each
  # pair of ranks on different nodes pairs eth0 with eth0 and eth2 with eth2, connects over
  # both in the include order, and stripes large messages over the two connections. The
  # second network's route prefers eth0's address as the source: each connection must come
  # from the address of its pair (as the accepting rank sees it), so replies come back on it.
  fakenodes_second 10.98.0 || { echo "fakenodes: cannot add a second network" >&2; exit 1; }
  fakenodes_second_src 10.98.0 || { echo "fakenodes: cannot set the route's source" >&2; exit 1; }
  fn_mpirun -n $n --mca btl_tcp_if_include "$FN_NET.0/24,10.98.0.0/24" \
    --mca btl_base_verbose 20 "$work/stripe"
  fn_expect "two interfaces per node: paired, bound to the pair's address, striped" 0 60 \
    "^stripe: ok on $n ranks\$" \
    "over 2 connection\(s\): ${FN_NET//./\\.}\.[0-9]+:[0-9]+, 10\.98\.0\.[0-9]+:[0-9]+\$" \
    "accepted rank [0-9]+ over 2 connection\(s\) from ${FN_NET//./\\.}\.[0-9]+:[0-9]+, 10\.98\.0\.[0-9]+:[0-9]+\$" \
    "striped link over 2 connections sent DATA records \[[1-9][0-9]*, [1-9][0-9]*\]"
  if cat "$work/out" "$work/err" |
    grep -qE "accepted rank [0-9]+ over 2 connection\(s\) from .*, ${FN_NET//./\\.}\."; then
    echo "fakenodes: $nodes nodes: a second-network connection came from the first network's address"
    failures=$((failures + 1))
  fi
  fakenodes_second_down
  # The dummy network goes (cases/ofi.sh adds it again for its own cases): while it is
  # there, each job's tcp links first try the pair of dummy interfaces, which no ARP
  # answers, and every job across nodes takes seconds longer (about 6 s at 2 nodes).
  fakenodes_dummy_down
  # A stopped daemon (SIGSTOP): its host still answers the network, so only the heartbeats
  # tell; mpirun names the node within plm_heartbeat_timeout, ends the job and kills the
  # node's agent (nothing is left on any node).
  fn_mid_job "fn_stop_daemon $nodes" --mca plm_heartbeat_interval 0.5 --mca plm_heartbeat_timeout 2
  dirs_left=1
  fn_expect "the last node's daemon stopped mid-job" 1 10 "host n$nodes .*plm_heartbeat_timeout"
  # Listeners are bound to the selected addresses, none to all of them: mpirun's for its
  # daemons (one per address it offers them) and its name server's (--report-uri); nothing
  # on a node listens on a wildcard (the ranks close their tcp listeners once wired up);
  # seen with ss while the job runs.
  fn_start -n $n --report-uri - "$work/spin"
  fn_spinning
  fn_listeners "$(pgrep -P "$bg" -x mpirun)"
  t0=$(date +%s%N)
  kill -TERM $bg
  fn_finish
  fn_expect "listeners bound to the selected addresses" 143 8 "^oxmpi-server:"
  for c in "$here"/cases/*.sh; do
    [ -e "$c" ] && . "$c"
  done
  # A partition: the last node's link is cut while the ranks spin in barriers. mpirun must
  # notice (plm_link_timeout), end the job and exit; the cut-off daemon must notice too and
  # end its ranks (nothing is left on any node).
  fn_mid_job "fakenodes_cut $nodes" --mca plm_link_timeout 2 --mca btl_tcp_link_timeout 2
  fn_expect "the last node cut off mid-job" 1 15 "n$nodes"
  # A signal while a node cannot be reached (default timeouts, far longer than the test):
  # mpirun gives the node up after plm_teardown_timeout and exits with 128+15.
  fakenodes_down
  fakenodes_up "$nodes" || { echo "fakenodes: cannot set up $nodes nodes" >&2; exit 1; }
  fn_start -n $n "$work/spin"
  fn_spinning
  fakenodes_cut "$nodes"
  t0=$(date +%s%N)
  kill -TERM $bg
  fn_finish
  dirs_left=1
  fn_expect "SIGTERM to mpirun while the last node is cut off" 143 8 "n$nodes did not answer within plm_teardown_timeout"
  fakenodes_down
done
if [ $failures -ne 0 ]; then
  echo "fakenodes: $failures case(s) FAILED" >&2
  exit 1
fi
echo "fakenodes: all cases passed"
