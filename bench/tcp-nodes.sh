#!/usr/bin/env bash
# The tcp path between two fake nodes (tests/fakenodes/fakenodes.sh: each its own network
# namespace on a bridge, launched through the nodes' ssh-style agent), against its raw-socket
# limit measured in the same run: the 8-byte ping-pong (one way, µs) and the 1 MiB stream
# (MB/s) of
#   raw    bench/c/rawtcp.c between the same two namespaces, TCP_NODELAY, non-blocking
#          sockets polled in a loop, as the MPI libraries wait: the limit (the ratios'
#          denominator);
#   rawblk the same with blocking sockets (each message wakes a sleeping process): what a
#          hand-written socket program gets, for reference;
#   oxmpi  oxbench lat,bw over oxmpi's tcp transport (no parameter set);
#   hydra  oxbench built with mpicc.mpich, started by Hydra (MPICH's default netmod);
#   ompi   oxbench built with mpicc.openmpi, `--mca btl tcp,self --bind-to none`. Open MPI
#          binds the 2 ranks of a 2-rank job to a core each by default, but each node's
#          orted picks its own first core, and the fake nodes share one machine's cores:
#          both ranks land on core 0 and each ping-pong turn waits for the scheduler's time
#          slice (about 4 ms one way). `--bind-to none` is what Open MPI users set where
#          nodes share cores (oxmpi and Hydra do not bind ranks on other nodes either).
# With 1 link (one network) and with 2 links (a second network on every node: oxmpi pairs
# the two interfaces and stripes large messages over them, Open MPI is given both in
# btl_tcp_if_include, rawtcp stripes over one connection per network; MPICH uses what its
# netmod picks). Implementations are interleaved within each round; prints every result,
# then per setup and implementation the median and its ratio to raw (issue 14's goal:
# oxmpi's latency at most 1.1x raw, its bandwidth at least 0.9x raw, ahead of both peers).
#
# usage: bench/tcp-nodes.sh PREFIX [ROUNDS]      (default 5 rounds)
# Needs root, iproute2, util-linux, a C compiler; mpich and openmpi are measured when their
# wrappers are installed (scripts/deps.sh installs them). Measure on a quiet machine;
# one round (`tcp-nodes.sh PREFIX 1`, ITERS_SCALE=0.1) only checks the script.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
P=$(cd "${1:?usage: tcp-nodes.sh PREFIX [ROUNDS]}" && pwd)
rounds=${2:-5}
scale=${ITERS_SCALE:-1}
sizes_lat=8
size_bw=1048576

[ "$(id -u)" -eq 0 ] || { echo "tcp-nodes: needs root (network namespaces)" >&2; exit 2; }
. "$root/tests/fakenodes/fakenodes.sh"
work=$(mktemp -d)
trap 'fakenodes_down; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
fakenodes_up 2 || { echo "tcp-nodes: cannot set up 2 fake nodes" >&2; exit 2; }
fakenodes_peers "$work" 1

cc -O2 "$here/c/rawtcp.c" -o "$work/rawtcp" || { echo "tcp-nodes: cannot build rawtcp.c" >&2; exit 2; }
impls=(raw rawblk)
build() { # build NAME CC
  if command -v "$2" >/dev/null && "$2" -O2 "$here/c/oxbench.c" -o "$work/oxbench.$1" 2>"$work/cc.err"; then
    impls+=("$1")
  else
    echo "tcp-nodes: $1 skipped: cannot build oxbench.c with $2" >&2
  fi
}
build oxmpi "$P/bin/mpicc"
build hydra mpicc.mpich
build ompi mpicc.openmpi

iters() { awk -v n="$1" -v s="$scale" 'BEGIN { n = int(n * s); print (n < 10 ? 10 : n) }'; }
# run_one IMPL LINKS: prints "lat US" and "bw MBS" (medians), or nothing if it failed.
run_one() {
  local impl=$1 links=$2 inc="$FN_NET.0/24" hosts="$FN_NET.12" port=$((20000 + RANDOM % 20000))
  if [ "$links" = 2 ]; then
    inc="$FN_NET.0/24,10.98.0.0/24"
    hosts="$FN_NET.12,10.98.0.12"
  fi
  case $impl in
  raw | rawblk)
    local t wait=spin
    [ "$impl" = rawblk ] && wait=block
    for t in "lat $sizes_lat $(iters 20000)" "bw $size_bw $(iters 500)"; do
      set -- $t
      timeout -k 5 130 "$FN_DIR/agent" n2 "$work/rawtcp" server "$port" >/dev/null 2>&1 &
      local srv=$!
      timeout -k 5 120 "$FN_DIR/agent" n1 "$work/rawtcp" client "$hosts" "$port" "$1" "$2" "$3" "$links" \
        "$wait" >"$work/out" 2>&1
      wait $srv
      grep -q "^RESULT" "$work/out" || {
        echo "links $links $impl: $1 FAILED; last output:" >&2
        tail -n 3 "$work/out" | sed 's/^/    /' >&2
      }
      sed -n "s/^RESULT test=\([a-z]*\) .* median=\([0-9.]*\) .*/\1 \2/p" "$work/out"
      sed -n "s/^RESULT test=\([a-z]*\) .* \(sndbuf=[0-9]* rcvbuf=[0-9]*\).*/$impl $1 socket buffers after the run: \2/p" \
        "$work/out" >>"$work/bufs"
      port=$((port + 1))
    done
    return
    ;;
  oxmpi)
    timeout -k 5 300 "$P/bin/mpirun" --hostfile "$FN_DIR/hosts" --mca plm_rsh_agent "$FN_DIR/agent" \
      --map-by node -n 2 "$work/oxbench.oxmpi" lat,bw 11 "$scale" $sizes_lat $size_bw \
      >"$work/out" 2>&1 </dev/null
    ;;
  hydra)
    timeout -k 5 300 mpiexec.mpich -launcher ssh -launcher-exec "$work/agent-sh" \
      -f "$work/hosts.hydra" -localhost "$FN_NET.1" -n 2 -ppn 1 \
      "$work/oxbench.hydra" lat,bw 11 "$scale" $sizes_lat $size_bw >"$work/out" 2>&1 </dev/null
    ;;
  ompi)
    timeout -k 5 300 mpirun.openmpi --allow-run-as-root --mca plm_rsh_agent "$work/agent-sh" \
      --hostfile "$FN_DIR/hosts" --map-by node --mca oob_tcp_if_include "$FN_NET.0/24" \
      --mca btl tcp,self --mca btl_tcp_if_include "$inc" --bind-to none -n 2 \
      "$work/oxbench.ompi" lat,bw 11 "$scale" $sizes_lat $size_bw >"$work/out" 2>&1 </dev/null
    ;;
  esac
  awk '/^RESULT/ { t = ""; s = ""; m = ""
      for (i = 1; i <= NF; i++) { split($i, kv, "=")
        if (kv[1] == "test") t = kv[2]; if (kv[1] == "size") s = kv[2]; if (kv[1] == "median") m = kv[2] }
      if ((t == "lat" && s == '$sizes_lat') || (t == "bw" && s == '$size_bw')) print t, m }' "$work/out"
}

echo "tcp-nodes: 2 nodes, ${impls[*]}, $rounds round(s), lat ${sizes_lat} B, bw ${size_bw} B"
: >"$work/results"
for links in 1 2; do
  if [ "$links" = 2 ]; then
    fakenodes_second 10.98.0 || { echo "tcp-nodes: cannot add a second network" >&2; exit 2; }
  fi
  for r in $(seq 1 "$rounds"); do
    for i in "${impls[@]}"; do
      res=$(run_one "$i" "$links")
      if [ -z "$res" ]; then
        echo "links $links round $r $i: FAILED; last output:"
        tail -n 5 "$work/out" | sed 's/^/    /'
        for p in $(fakenodes_pids); do kill -9 "$p" 2>/dev/null; done
        continue
      fi
      echo "$res" | while read -r t v; do
        echo "links $links round $r $i: $t $v"
        echo "$links $r $i $t $v" >>"$work/results"
      done
    done
  done
done
[ -s "$work/bufs" ] && sort -u "$work/bufs" | sed 's/^/tcp-nodes: /'
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for links in 1 2; do
  for t in lat bw; do
    raw=$(awk -v l="$links" -v t="$t" '$1 == l && $3 == "raw" && $4 == t { print $5 }' "$work/results" | median)
    for i in "${impls[@]}"; do
      m=$(awk -v l="$links" -v i="$i" -v t="$t" '$1 == l && $3 == i && $4 == t { print $5 }' "$work/results" | median)
      ratio=$(awk -v m="${m:-0}" -v r="${raw:-0}" 'BEGIN { if (m > 0 && r > 0) printf "%.2f", m / r; else print "n/a" }')
      unit=us
      [ "$t" = bw ] && unit=MB/s
      echo "tcp-nodes: links $links $t $i median ${m:-n/a} $unit; ${i}/raw $ratio"
    done
  done
done
