#!/usr/bin/env bash
# A/B/C... of oxmpi installs, and optionally the peers, on the harness's oxbench, interleaved.
#
# usage: scripts/ab.sh NP TESTS SIZES ROUNDS LABEL=PREFIX... [ompi] [mpich]
#   NP      ranks (past the machine's cores: oversubscribed, pinned by PIN)
#   TESTS   oxbench tests, comma list (lat,bw,bibw,allreduce,iscatterv,...)
#   SIZES   bytes, comma list
#   ROUNDS  rounds; each round launches every label once, the first label rotating
#   LABEL=PREFIX  an oxmpi install (`cargo xtask install --prefix PREFIX`, or a copy of one)
#   ompi, mpich   Debian's Open MPI (mpirun.openmpi) and MPICH (mpiexec.hydra), as the harness runs them
# env:
#   OPTS     extra oxbench options, space separated (inplace=1 clock=span dtype=INT ...)
#   PIN      block (ranks 0..NP/2-1 on CPU 0, the rest on CPU 1, default) or cyclic (rank r on
#            CPU r mod 2) when NP exceeds the cores; pinned by the harness's pin wrapper, and
#            timed with clock=span as the collectives matrix does (OPTS may override it)
#   SAMPLES  samples per (test, size) (default 11); BUDGET seconds per (test, size) (default 0.6)
#   RAW=1    also print every launch's RESULT medians
#   NEARSPLIT=NS  split near launches by their probes: near1 (all below NS ns, e.g. 75: the
#            ~55 ns class of vCPU pairs) and near2 (the rest below 200 ns, the ~100 ns class);
#            Open MPI leads at 1-2 KiB latency in the second class only (session 47)
#
# Needs a harness build (`cargo xtask bench` once, any mode): target/oxmpi-bench/build holds
# oxbench_oxmpi (run on every label's libmpi through LD_LIBRARY_PATH), oxbench_ompi,
# oxbench_mpich and pin. Every launch probes its vCPU placement inside oxbench (probe=1: rank 0
# and a rank on the other CPU bounce a cache line before every sample); a launch whose probes
# are all below 200 ns counts as near, all above as far, otherwise mixed. Prints, per test, size
# and placement, each label's median over its launches (of each launch's median) with the
# launch count, and its speed against the first label (> 1: faster).
set -euo pipefail
[ $# -ge 5 ] || { sed -n '2,24p' "$0" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/target/oxmpi-bench/build
np=$1 tests=$2 sizes=${3//,/ } rounds=$4
shift 4
labels=("$@")
cores=$(nproc)
for f in oxbench_oxmpi pin; do
    [ -x "$build/$f" ] || { echo "ab.sh: $build/$f missing: run 'cargo xtask bench --smoke' once" >&2; exit 2; }
done
pin=() peer=1 clock=()
if [ "$np" -gt "$cores" ]; then
    cpus=()
    for ((r = 0; r < np; r++)); do
        if [ "${PIN:-block}" = cyclic ]; then cpus+=($((r % cores))); else cpus+=($((r * cores / np))); fi
    done
    pin=("$build/pin" "$(IFS=,; echo "${cpus[*]}")")
    [ "${PIN:-block}" = cyclic ] || peer=$((np / cores))
    clock=(clock=span) # as the collectives matrix: per-rank clocks miss oversubscribed waits
fi
out=$(mktemp /tmp/ab-XXXXXX.txt)
echo "ab.sh: raw results in $out" >&2
# shellcheck disable=SC2206
opts=(probe=1 probe_peer=$peer budget="${BUDGET:-0.6}" "${clock[@]}" ${OPTS:-})
n=${#labels[@]}
for ((round = 0; round < rounds; round++)); do
    for ((k = 0; k < n; k++)); do
        l=${labels[(k + round) % n]}
        case $l in
        ompi)
            [ -x "$build/oxbench_ompi" ] || { echo "ab.sh: $build/oxbench_ompi missing" >&2; exit 2; }
            if [ "$np" -gt "$cores" ]; then b=(--oversubscribe --bind-to none); else b=(--bind-to core --map-by core); fi
            cmd=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun.openmpi -np "$np" "${b[@]}"
                "${pin[@]}" "$build/oxbench_ompi")
            name=ompi ;;
        mpich)
            [ -x "$build/oxbench_mpich" ] || { echo "ab.sh: $build/oxbench_mpich missing" >&2; exit 2; }
            if [ "$np" -gt "$cores" ]; then b=(); else b=(-bind-to core); fi
            cmd=(mpiexec.hydra -np "$np" "${b[@]}" "${pin[@]}" "$build/oxbench_mpich")
            name=mpich ;;
        *=*)
            name=${l%%=*} p=${l#*=}
            if [ "$np" -gt "$cores" ]; then b=(--oversubscribe); else b=(--bind-to core); fi
            cmd=("$p/bin/mpirun" -n "$np" "${b[@]}" env LD_LIBRARY_PATH="$p/lib" "${pin[@]}" "$build/oxbench_oxmpi") ;;
        *) echo "ab.sh: '$l' is neither LABEL=PREFIX, ompi nor mpich" >&2; exit 2 ;;
        esac
        # shellcheck disable=SC2086
        timeout 600 "${cmd[@]}" "$tests" "${SAMPLES:-11}" 1 "${opts[@]}" $sizes 2>&1 |
            awk -v l="$name" -v r="$round" '/^RESULT/ {print l, r, $0}' >>"$out" ||
            echo "ab.sh: round $round $name failed" >&2
    done
done
python3 - "$out" "${RAW:-0}" "${NEARSPLIT:-0}" "${labels[@]}" <<'EOF'
import collections, statistics, sys
path, raw, split = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3])
labels = [l.split("=")[0] for l in sys.argv[4:]]
d, units = collections.defaultdict(list), {}
for line in open(path):
    f = line.split()
    label, rnd = f[0], f[1]
    kv = dict(x.split("=", 1) for x in f[3:] if "=" in x)
    probes = [float(x) for x in kv.get("probe", "").split(";") if x]
    place = "?" if not probes else "near" if max(probes) < 200 else "far" if min(probes) >= 200 else "mixed"
    if place == "near" and split > 0:
        place = "near1" if max(probes) < split else "near2"
    key = (kv["test"], int(kv["size"]), place)
    d[key + (label,)].append(float(kv["median"]))
    units[kv["test"]] = kv["unit"]
    if raw:
        print(f"raw r{rnd} {label:8} {kv['test']:10} {kv['size']:>8} {place:5} {kv['median']}")
w = max(8, *(len(l) for l in labels))
for t, s, pl in sorted({k[:3] for k in d}):
    u, first = units[t], d.get((t, s, pl, labels[0]))
    cols = []
    for l in labels:
        v = d.get((t, s, pl, l))
        if not v:
            cols.append(f"{l:>{w}} {'-':>9}      ")
            continue
        m = statistics.median(v)
        c = f"{l:>{w}} {m:9.4g} n={len(v):<2}"
        if first and l != labels[0]:
            f0 = statistics.median(first)
            c += f" {(m / f0 if u == 'MB/s' else f0 / m):5.2f}x"
        cols.append(c)
    print(f"{t:12} {s:8} {pl:5} {u:4} " + "  ".join(cols))
EOF
