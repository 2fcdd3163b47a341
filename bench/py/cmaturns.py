"""Summarises bench/c/cmaturns.c's files of one launch (every rank's turns-RANK.txt in DIR).

usage: python3 cmaturns.py [--summary] [--calls] [--iters] DIR [DIR ...]

Per launch and collective: the iterations (a blocking call, or a post and its wait: its span
is the last rank's return minus the first rank's entry) and every cross-memory copy inside
one, with who copied from whom (the remote pid mapped to its rank), the block of the source
(offset in the source's receive buffer of that iteration over the block size) and its 2 MiB
stretches (address >> 21). Each copy is classed by the other CPUs' copies in the same source
process during it: "alone" (none), "same-mm" (another CPU's copy in that process, other
stretches) or "same-stretch" (another CPU's copy in the same 2 MiB stretch of it), by the
share of its time that overlapped (more than half). Prints per collective: the span
(median, min, max) of the iterations, and the copy time per MiB (median, count) per class for
the fast and the slow iterations (above 1.1 x the launch's fastest-quartile span: slow); per
iteration with --iters: span, the order in which the ranks started copying on each CPU, and
the share of its copy time in each class; --calls prints every copy; --summary prints one
line per launch and collective instead (the span's median, the share of the copy time in
each class, the median copy time per MiB per class, the most frequent order).
Session 52 (spot-checks-wave2.md, s52-slow).
"""

import glob
import os
import statistics
import sys
from collections import defaultdict


def load(d):
    ranks = {}
    for f in sorted(glob.glob(os.path.join(d, "turns-*.txt"))):
        ev, rank, pid = [], None, None
        with open(f) as fh:
            for line in fh:
                w = line.split()
                if w[0] == "P":
                    rank, pid = int(w[1]), int(w[2])
                elif w[0] == "C":
                    ev.append(("C", w[1], int(w[2]), int(w[3]), int(w[4])))
                elif w[0] == "Y":
                    ev.append(("Y", int(w[1])))
                else:
                    ev.append((w[0], int(w[1]), int(w[2]), int(w[3]), int(w[4]), int(w[5]), int(w[6])))
        ranks[rank] = (pid, ev)
    return ranks


def iterations(ranks):
    """Per rank, the list of (name, t0, t1, buf) windows of its collectives in call order."""
    out = {}
    for r, (_, ev) in ranks.items():
        wins, post = [], None
        for e in ev:
            if e[0] != "C":
                continue
            name, t0, t1, buf = e[1:]
            if name.startswith("I"):
                post = (name, t0, buf)
            elif name == "Wait":
                if post:
                    wins.append((post[0], post[1], t1, post[2]))
                    post = None
            else:
                wins.append((name, t0, t1, buf))
        out[r] = wins
    return out


def q(v, p):
    s = sorted(v)
    return s[int(p * (len(s) - 1))]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show_calls, show_iters = "--calls" in sys.argv, "--iters" in sys.argv
    summary = "--summary" in sys.argv
    for d in args:
        ranks = load(d)
        if not ranks:
            continue
        p = len(ranks)
        rank_of = {pid: r for r, (pid, _) in ranks.items()}
        wins = iterations(ranks)
        nit = min(len(w) for w in wins.values())
        # every copy: (rank, kind, remote rank, addr, len, cpu, t0, t1)
        copies = []
        for r, (_, ev) in ranks.items():
            for e in ev:
                if e[0] in "RW" and e[1] in rank_of:
                    copies.append((r, e[0], rank_of[e[1]], e[2], e[3], e[4], e[5], e[6]))
        copies.sort(key=lambda c: c[6])
        # iteration index of a copy: the rank's window holding its start
        def it_of(c):
            for i, w in enumerate(wins[c[0]][:nit]):
                if w[1] <= c[6] <= w[2]:
                    return i
            return None

        per_it = defaultdict(list)
        for c in copies:
            i = it_of(c)
            if i is not None:
                per_it[i].append(c)

        def cls(c, its):
            r, _, src, addr, ln, cpu, t0, t1 = c
            st = (addr >> 21, (addr + ln - 1) >> 21)
            same_mm = same_st = 0
            for o in its:
                if o is c or o[5] == cpu or o[2] != src:
                    continue
                ov = min(t1, o[7]) - max(t0, o[6])
                if ov <= 0:
                    continue
                ost = (o[3] >> 21, (o[3] + o[4] - 1) >> 21)
                if ost[0] <= st[1] and st[0] <= ost[1]:
                    same_st += ov
                else:
                    same_mm += ov
            dur = max(t1 - t0, 1)
            if same_st > dur / 2:
                return "same-stretch"
            if same_st + same_mm > dur / 2:
                return "same-mm"
            return "alone"

        names = sorted({wins[0][i][0] for i in range(nit)})
        for name in names:
            its = [i for i in range(nit) if wins[0][i][0] == name]
            span = {i: max(wins[r][i][2] for r in wins) - min(wins[r][i][1] for r in wins) for i in its}
            spans = list(span.values())
            fastq = q(spans, 0.25)
            if not summary:
                print(f"{d} {name}: {len(its)} iterations, span us median {statistics.median(spans)/1e3:.1f}"
                      f" min {min(spans)/1e3:.1f} max {max(spans)/1e3:.1f} (p25 {fastq/1e3:.1f})")
            stats = defaultdict(list)
            orders, shares = defaultdict(int), defaultdict(int)
            busy, busy_us = [], []  # per iteration: the busier CPU's copy time (over the span)
            for i in its:
                per_cpu = defaultdict(int)
                for c in per_it[i]:
                    per_cpu[c[5]] += c[7] - c[6]
                busy.append(max(per_cpu.values() or [0]) / max(span[i], 1))
                busy_us.append(max(per_cpu.values() or [0]) / 1e3)
                slow = span[i] > 1.1 * fastq
                block = None
                share = defaultdict(int)
                first = {}
                for c in per_it[i]:
                    k = cls(c, per_it[i])
                    us_mib = (c[7] - c[6]) / 1e3 / (c[4] / 2**20) if c[4] else 0
                    stats[("slow" if slow else "fast", c[1], k)].append(us_mib)
                    share[k] += c[7] - c[6]
                    if c[0] not in first.setdefault(c[5], []):
                        first[c[5]].append(c[0])
                    if show_calls:
                        off = (c[3] - wins[c[2]][i][3]) >> 10
                        print(f"  it{i} r{c[0]}@cpu{c[5]} {c[1]} r{c[2]} at {off}K st {c[3]>>21} "
                              f"{(c[6]-wins[0][i][1])/1e3:.1f}-{(c[7]-wins[0][i][1])/1e3:.1f} "
                              f"{(c[7]-c[6])/1e3:.1f}us {c[4]>>10}K {k}")
                order = " ".join(f"cpu{cp}:" + "<".join(map(str, rs)) for cp, rs in sorted(first.items()))
                orders[order] += 1
                for k, v in share.items():
                    shares[k] += v
                if show_iters:
                    t00 = min(wins[r][i][1] for r in wins)
                    cs = defaultdict(list)
                    for c in per_it[i]:
                        cs[c[0]].append(c)
                    ys = defaultdict(int)
                    for r, (_, ev) in ranks.items():
                        ys[r] = sum(1 for e in ev if e[0] == "Y" and wins[r][i][1] <= e[1] <= wins[r][i][2])
                    print("    " + " ".join(
                        f"r{r}[in {(wins[r][i][1]-t00)/1e3:.0f} copy "
                        + (f"{(min(c[6] for c in cs[r])-t00)/1e3:.0f}-{(max(c[7] for c in cs[r])-t00)/1e3:.0f}" if cs[r] else "-")
                        + f" out {(wins[r][i][2]-t00)/1e3:.0f} y{ys[r]}]" for r in sorted(wins)))
                    tot = sum(share.values()) or 1
                    sh = " ".join(f"{k} {100*v/tot:.0f}%" for k, v in sorted(share.items()))
                    print(f"  it{i} {'SLOW' if slow else 'fast'} span {span[i]/1e3:.1f} {order} | {sh}")
            tot = sum(shares.values()) or 1
            if summary:
                rate = lambda k: statistics.median(  # noqa: E731
                    [x for (m, _, c), v in stats.items() if c == k for x in v] or [0])
                top = max(orders.items(), key=lambda x: x[1])
                print(f"{d} {name:10} span {statistics.median(spans)/1e3:7.1f} same-stretch "
                      f"{100*shares['same-stretch']/tot:3.0f}% same-mm {100*shares['same-mm']/tot:3.0f}% "
                      f"us/MiB alone {rate('alone'):5.1f} same-mm {rate('same-mm'):5.1f} "
                      f"same-stretch {rate('same-stretch'):5.1f} | copying {statistics.median(busy_us):5.0f} us, "
                      f"{100*statistics.median(busy):3.0f}% "
                      f"of the span | top order {top[0]} x{top[1]}/{len(its)}")
                continue
            print("  copy time: " + " ".join(f"{k} {100*v/tot:.0f}%" for k, v in sorted(shares.items()))
                  + " | orders: " + ", ".join(f"{o} x{c}" for o, c in sorted(orders.items(), key=lambda x: -x[1])[:4]))
            for key in sorted(stats):
                v = stats[key]
                print(f"  {key[0]:4} {key[1]} {key[2]:12} us/MiB median {statistics.median(v):6.1f}"
                      f" p10 {q(v, .1):6.1f} p90 {q(v, .9):6.1f} n {len(v)}")


if __name__ == "__main__":
    main()
