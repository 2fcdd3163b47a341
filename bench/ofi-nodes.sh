#!/usr/bin/env bash
# The libfabric path between two fake nodes (tests/fakenodes/fakenodes.sh: each its own
# network namespace on a bridge, launched through the nodes' ssh-style agent), all over the
# same provider (FI_PROVIDER, default "tcp;ofi_rxm"), against raw libfabric measured in the
# same run: the 8-byte ping-pong (one way, µs) and the 1 MiB transfer (MB/s) of
#   raw       fi_pingpong (libfabric-bin) -e rdm -m tagged: its usec/xfer at 8 B and its
#             MB/sec at 1 MiB (a ping-pong rate: Debian packages no fi_rdm_tagged_bw, the
#             streaming test of fabtests, so the raw bandwidth row is a lower bound)
#   ox-btl    oxbench lat,bw over oxmpi's ofi btl (--mca btl self,ofi: pml ox, the engine's
#             matching, records as tagged messages), defaults: on tcp;ofi_rxm 4 endpoints
#             per rank (btl_ofi_rails 0, the automatic choice)
#   ox-cm     oxbench over oxmpi's pml cm (--mca pml cm: the provider matches)
#   ox-rails  ox-btl with RAILS endpoints per rank (--mca btl_ofi_rails, default 1: one
#             endpoint, no striping, for comparison with the default)
#   ompi      oxbench built with mpicc.openmpi, --mca pml cm --mca mtl ofi (its
#             mtl_ofi_provider_exclude leaves out the software providers by default, so
#             mtl_ofi_provider_include names ours), --bind-to none: bound, each node's orted
#             puts its rank on the first core, both fake nodes' ranks share core 0 and every
#             ping-pong turn waits a scheduler slice (about 4 ms; see tcp-nodes.sh)
#   mpich     oxbench built with mpicc.mpich, started by Hydra (its ch4 netmod: ofi gets
#             FI_PROVIDER, ucx gets UCX_TLS=tcp)
# Implementations are interleaved within each round; prints every result, then per
# implementation the median and its ratio to Open MPI's OFI MTL and to raw (issue 19's
# goals: 8 B latency at most 0.9x Open MPI's, 1 MiB bandwidth at least 1.1x, at most 10%
# above raw at 8 B).
#
# usage: bench/ofi-nodes.sh PREFIX [ROUNDS]      (default 5 rounds)
#        ONLY="raw ox-btl ompi" bench/ofi-nodes.sh ...   measures only those implementations
#        RAILS=2 ... the endpoints per rank of ox-rails (default 1)
# Needs root, iproute2, util-linux, libfabric-bin; mpich and openmpi are measured when their
# wrappers are installed (scripts/deps.sh installs them). Measure on a quiet machine;
# one round (`ofi-nodes.sh PREFIX 1`, ITERS_SCALE=0.1) only checks the script.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
P=$(cd "${1:?usage: ofi-nodes.sh PREFIX [ROUNDS]}" && pwd)
rounds=${2:-5}
scale=${ITERS_SCALE:-1}
prov=${FI_PROVIDER:-tcp;ofi_rxm}
export FI_PROVIDER=$prov
size_lat=8
size_bw=1048576

[ "$(id -u)" -eq 0 ] || { echo "ofi-nodes: needs root (network namespaces)" >&2; exit 2; }
command -v fi_pingpong >/dev/null || { echo "ofi-nodes: needs fi_pingpong (libfabric-bin)" >&2; exit 2; }
. "$root/tests/fakenodes/fakenodes.sh"
work=$(mktemp -d)
trap 'fakenodes_down; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
fakenodes_up 2 || { echo "ofi-nodes: cannot set up 2 fake nodes" >&2; exit 2; }
fakenodes_peers "$work" 1

impls=(raw)
build() { # build NAME CC
  if command -v "$2" >/dev/null && "$2" -O2 "$here/c/oxbench.c" -o "$work/oxbench.$1" 2>"$work/cc.err"; then
    impls+=("${@:3}")
  else
    echo "ofi-nodes: $1 skipped: cannot build oxbench.c with $2" >&2
  fi
}
build oxmpi "$P/bin/mpicc" ox-btl ox-cm ox-rails
build ompi mpicc.openmpi ompi
build mpich mpicc.mpich mpich
if [ -n "${ONLY:-}" ]; then
  keep=()
  for i in "${impls[@]}"; do case " $ONLY " in *" $i "*) keep+=("$i") ;; esac; done
  impls=("${keep[@]}")
fi

iters() { awk -v n="$1" -v s="$scale" 'BEGIN { n = int(n * s); print (n < 10 ? 10 : n) }'; }
bench_args() { echo lat,bw 11 "$scale" $size_lat $size_bw; }
# run_one IMPL: prints "lat US" and "bw MBS" (medians), or nothing if it failed.
run_one() {
  local impl=$1 port=$((20000 + RANDOM % 20000))
  case $impl in
  raw)
    local t
    for t in "lat $size_lat $(iters 20000) 7" "bw $size_bw $(iters 500) 6"; do
      set -- $t
      "$FN_DIR/agent" n2 env FI_PROVIDER="$prov" fi_pingpong -e rdm -m tagged -S "$2" -I "$3" \
        -B "$port" >/dev/null 2>&1 &
      local srv=$!
      sleep 0.5
      timeout -k 5 120 "$FN_DIR/agent" n1 env FI_PROVIDER="$prov" fi_pingpong -e rdm -m tagged \
        -S "$2" -I "$3" -P "$port" "$FN_NET.12" >"$work/out" 2>&1
      wait $srv
      # The row under the header: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
      # (bytes abbreviated: 1m).
      awk -v c="$4" -v t="$1" '$1 != "bytes" && NF >= 8 && $c ~ /^[0-9.]+$/ { v = $c }
        END { if (v != "") print t, v }' "$work/out"
      port=$((port + 1))
    done
    return
    ;;
  ox-btl | ox-cm | ox-rails)
    local sel=(--mca btl self,ofi)
    [ "$impl" = ox-cm ] && sel=(--mca pml cm)
    [ "$impl" = ox-rails ] && sel+=(--mca btl_ofi_rails "${RAILS:-1}")
    timeout -k 5 300 "$P/bin/mpirun" --hostfile "$FN_DIR/hosts" --mca plm_rsh_agent "$FN_DIR/agent" \
      --map-by node -x FI_PROVIDER "${sel[@]}" -n 2 "$work/oxbench.oxmpi" $(bench_args) \
      >"$work/out" 2>&1 </dev/null
    ;;
  ompi)
    timeout -k 5 300 mpirun.openmpi --allow-run-as-root --mca plm_rsh_agent "$work/agent-sh" \
      --hostfile "$FN_DIR/hosts" --map-by node --mca oob_tcp_if_include "$FN_NET.0/24" \
      --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$prov" -x FI_PROVIDER \
      --bind-to none -n 2 \
      "$work/oxbench.ompi" $(bench_args) >"$work/out" 2>&1 </dev/null
    ;;
  mpich)
    timeout -k 5 300 mpiexec.mpich -launcher ssh -launcher-exec "$work/agent-sh" \
      -f "$work/hosts.hydra" -localhost "$FN_NET.1" -n 2 -ppn 1 \
      -genv FI_PROVIDER "$prov" -genv UCX_TLS tcp \
      "$work/oxbench.mpich" $(bench_args) >"$work/out" 2>&1 </dev/null
    ;;
  esac
  awk '/^RESULT/ { t = ""; s = ""; m = ""
      for (i = 1; i <= NF; i++) { split($i, kv, "=")
        if (kv[1] == "test") t = kv[2]; if (kv[1] == "size") s = kv[2]; if (kv[1] == "median") m = kv[2] }
      if ((t == "lat" && s == '$size_lat') || (t == "bw" && s == '$size_bw')) print t, m }' "$work/out"
}

echo "ofi-nodes: 2 nodes, FI_PROVIDER=$prov, ${impls[*]}, $rounds round(s), lat ${size_lat} B, bw ${size_bw} B"
: >"$work/results"
for r in $(seq 1 "$rounds"); do
  for i in "${impls[@]}"; do
    res=$(run_one "$i")
    if [ -z "$res" ]; then
      echo "round $r $i: FAILED; last output:"
      tail -n 5 "$work/out" | sed 's/^/    /'
      for p in $(fakenodes_pids); do kill -9 "$p" 2>/dev/null; done
      continue
    fi
    echo "$res" | while read -r t v; do
      echo "round $r $i: $t $v"
      echo "$r $i $t $v" >>"$work/results"
    done
  done
done
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
med() { awk -v i="$1" -v t="$2" '$2 == i && $3 == t { print $4 }' "$work/results" | median; }
ratio() { awk -v m="${1:-0}" -v r="${2:-0}" 'BEGIN { if (m > 0 && r > 0) printf "%.2f", m / r; else print "n/a" }'; }
for t in lat bw; do
  raw=$(med raw "$t")
  ompi=$(med ompi "$t")
  unit=us
  [ "$t" = bw ] && unit=MB/s
  for i in "${impls[@]}"; do
    m=$(med "$i" "$t")
    echo "ofi-nodes: $t $i median ${m:-n/a} $unit; ${i}/ompi $(ratio "$m" "$ompi"); ${i}/raw $(ratio "$m" "$raw")"
  done
done
