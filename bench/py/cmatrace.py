"""Summarises bench/c/cmatrace.c's files of a 2-rank rendezvous ping-pong.

usage: python3 cmatrace.py DIR/cmatrace-0.txt DIR/cmatrace-1.txt

Merges the ranks' process_vm_readv calls by start time and prints the median (p10, p90) of
a read's length, of the gap from the end of one rank's read to the start of the other
rank's next read (the FIN, the return to the application, its next send's
request-to-send, the peer's matching), and of one way (end to end of successive reads),
in ns. Session 47 (spot-checks-wave2.md, s47-pp16k).
"""

import statistics
import sys


def main():
    ev = []
    for f in sys.argv[1:]:
        with open(f) as fh:
            for line in fh:
                r, a, b = line.split()
                ev.append((int(a), int(b), r))
    ev.sort()
    turns = [i for i in range(len(ev) - 1) if ev[i + 1][2] != ev[i][2]]
    series = {
        "read": [b - a for a, b, _ in ev],
        "gap": [ev[i + 1][0] - ev[i][1] for i in turns],
        "one way": [ev[i + 1][1] - ev[i][1] for i in turns],
    }
    out = [f"reads {len(ev)}"]
    for name, v in series.items():
        if not v:
            continue
        s = sorted(v)
        q = lambda p: s[int(p * (len(s) - 1))]  # noqa: E731
        out.append(f"{name} {statistics.median(v):.0f} ({q(0.1)}, {q(0.9)})")
    print(" | ".join(out))


if __name__ == "__main__":
    main()
