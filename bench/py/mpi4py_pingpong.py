"""The mpi4py ping-pong rows of oxmpi-bench (`cargo xtask bench`), at np=2.

It times mpi4py's own benchmark: the function `pingpong` of `mpi4py.bench`, which
`python -m mpi4py.bench pingpong` runs (`Comm.Send`/`Comm.Recv` of NumPy buffers
allocated afresh for each size, a barrier, warm-up round trips, then the mean one-way
time of the timed round trips, by `MPI.Wtime`). One size per call, so that each size gets
a time budget rather than mpi4py's fixed counts (which leave 32 KiB-1 MiB with 200 round
trips, a few milliseconds, in the harness's full mode):

* calibration: per size, calls of 10, 40, 160 ... round trips (2 warm-ups) until one
  lasts an eighth of --budget; from its mean rank 0 sets the size's round trips to fill
  --budget seconds (at least MIN_LOOPS, at most MAX_LOOPS), the same on both ranks
  (broadcast);
* then --samples rounds, each over every size in mpi4py's order (ascending, as a user's
  sweep: a size follows the one below it; --order down for the other way), each call
  with a tenth of its round trips (at least 2) as warm-ups first. After each call rank 0
  prints `pingpong SIZE MEAN_SECONDS ROUND_TRIPS ROUND`.

The harness's row for a size is the median of its rounds' means.
"""

import argparse
import ctypes
import mmap
import os

from mpi4py import MPI
from mpi4py.bench import pingpong

MIN_LOOPS = 20
MAX_LOOPS = 1_000_000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-size", type=int, default=1)
    ap.add_argument("--max-size", type=int, required=True)
    ap.add_argument("--budget", type=float, required=True, help="seconds per size and round")
    ap.add_argument("--samples", type=int, required=True, help="rounds")
    ap.add_argument("--array", default="numpy", help="mpi4py.bench's --array")
    ap.add_argument("--order", choices=["up", "down"], default="up")
    ap.add_argument("--probe-lib", help="probe_lib.c built as a shared library")
    o = ap.parse_args()
    comm = MPI.COMM_WORLD
    probe = placement_probe(comm, o.probe_lib) if o.probe_lib else None
    sizes = [1 << i for i in range(33) if o.min_size <= 1 << i <= o.max_size]
    if o.order == "down":
        sizes.reverse()
    if comm.rank == 0:
        try:
            import numpy  # noqa: F401 (mpi4py.bench falls back to bytearray without it)

            buffers = o.array
        except ImportError:
            buffers = "bytearray"
        print(f"# buffers {buffers}", flush=True)

    def mean(n, loops, skip):
        args = ["-m", str(n), "-n", str(n), "-a", o.array, "-l", str(loops), "-s", str(skip)]
        for kind in ("large", "huge"):
            args += [f"--loop-{kind}", str(loops), f"--skip-{kind}", str(skip)]
        return pingpong(comm, args, verbose=False)[0][1]

    loops = {}
    for n in sizes:
        # 10 round trips, 4 times more until a call lasts an eighth of the budget: a size's
        # first transfers are cold (page faults, a mechanism's first pass; 16 KiB after
        # 8 KiB measured 15.8 us one way in its first three calls of 10 against 2.8 later,
        # and got a fifth of its budget)
        count = 10
        while True:
            t = mean(n, count, 2)
            more = comm.bcast(2 * t * count < o.budget / 8 and count < MAX_LOOPS, root=0)
            if not more:
                break
            count *= 4
        want = int(o.budget / (2 * t)) if t > 0 else MAX_LOOPS
        loops[n] = comm.bcast(max(MIN_LOOPS, min(MAX_LOOPS, want)), root=0)
    for k in range(o.samples):
        if probe:
            probe()
        for n in sizes:
            t = mean(n, loops[n], max(2, loops[n] // 10))
            if comm.rank == 0:
                print(f"pingpong {n} {t:.7e} {loops[n]} {k}", flush=True)
    if probe:
        probe()


def placement_probe(comm, lib_path):
    """The probe function (prints `probe NS` at rank 0), or None where it cannot run.

    Rank 0 creates a POSIX shared-memory object named after its pid, rank 1 maps it,
    rank 0 removes the name once rank 1 answered (nothing stays in /dev/shm); both
    keep the mapping to the end. Only ranks 0 and 1 probe.
    """
    if comm.size < 2:
        return None
    lib = ctypes.CDLL(lib_path)
    lib.oxb_probe.restype = ctypes.c_double
    lib.oxb_probe.argtypes = [ctypes.c_void_p, ctypes.c_int]
    path = f"/dev/shm/oxbench-pyprobe-{os.getpid()}" if comm.rank == 0 else None
    fd, ok = -1, False
    if comm.rank == 0:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            os.ftruncate(fd, mmap.PAGESIZE)
            ok = True
        except OSError as e:
            print(f"# no placement probe: {path}: {e}", flush=True)
    path, ok = comm.bcast((path, ok), root=0)
    mem = None
    if comm.rank == 1 and ok:
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            ok = False
    if comm.rank in (0, 1) and ok:
        mem = mmap.mmap(fd, mmap.PAGESIZE)
    if fd >= 0:
        os.close(fd)
    ok = comm.allreduce(ok, op=MPI.LAND)
    if comm.rank == 0 and fd >= 0:
        os.unlink(path)
    if not ok:
        return None
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mem)) if mem is not None else None

    def run():
        comm.Barrier()
        if comm.rank in (0, 1):
            ns = lib.oxb_probe(addr, int(comm.rank == 0))
            if comm.rank == 0:
                print(f"probe {ns:.1f}", flush=True)
        comm.Barrier()

    run.mem = mem  # keeps the mapping alive
    return run


if __name__ == "__main__":
    main()
