#!/usr/bin/env bash
# A/B of two oxmpi installs on the same benchmark binary, by vCPU placement.
#
# usage: scripts/ab-libmpi.sh BEFORE_PREFIX AFTER_PREFIX
#   env: N (rounds, default 6), NP (ranks, default 2), TESTS (oxbench tests, default bw,bibw),
#        SIZES (bytes, default "65536 262144 1048576 4194304")
#
# Needs a harness build (`cargo xtask bench` once): target/oxmpi-bench/build/oxbench_oxmpi and
# the cache-line ping-pong probe `pingpong`. The same oxbench binary runs on both libraries
# (LD_LIBRARY_PATH takes precedence over its RUNPATH; both are libmpi.so.12), launched by each
# prefix's own mpirun, alternating before/after in every round. Before each run the probe
# measures the cache-line round trip between CPUs 0 and 1 (near: < 200 ns, far: otherwise),
# because on a shared VM the two vCPUs may or may not share a cache, and that, not the
# code, decides most large-message results. Prints, per test, size and placement, the
# median of each side, the run counts and after/before (MB/s: > 1 is faster; us: < 1 is
# faster).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_PREFIX AFTER_PREFIX" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/target/oxmpi-bench/build
for f in oxbench_oxmpi pingpong; do
    [ -x "$build/$f" ] || { echo "ab-libmpi: $build/$f missing: run 'cargo xtask bench' once" >&2; exit 2; }
done
before=$1 after=$2
np=${NP:-2}
bind=(--bind-to core)
[ "$np" -gt "$(nproc)" ] && bind=(--oversubscribe)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq 1 "${N:-6}"); do
    for side in before after; do
        if [ "$side" = before ]; then p=$before; else p=$after; fi
        # No reading counts as far (the 200 ns cut-off is the harness's NEAR_RTT_NS).
        rtt=$("$build/pingpong" 2>&1 | sed -n 's/.*rtt_median=\([0-9.]*\).*/\1/p' || true)
        rtt=${rtt:-1e9}
        # shellcheck disable=SC2086
        "$p/bin/mpirun" -n "$np" "${bind[@]}" env LD_LIBRARY_PATH="$p/lib" \
            "$build/oxbench_oxmpi" "${TESTS:-bw,bibw}" 11 1 budget=0.6 \
            ${SIZES:-65536 262144 1048576 4194304} 2>&1 |
            awk -v s="$side" -v r="$rtt" '/^RESULT/ {print s, r, $2, $4, $7}' >>"$out"
    done
done
python3 - "$out" <<'EOF'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    side, rtt, test, size, median = line.split()
    place = "near" if float(rtt) < 200 else "far"
    d[(test.split("=")[1], int(size.split("=")[1]), place, side)].append(float(median.split("=")[1]))
for t, s, pl in sorted({k[:3] for k in d}):
    b, a = d.get((t, s, pl, "before"), []), d.get((t, s, pl, "after"), [])
    if b and a:
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"{t:9} {s:8} {pl:4} before {mb:10.4g} (n={len(b)})  after {ma:10.4g} (n={len(a)})  after/before {ma / mb:.3f}")
EOF
