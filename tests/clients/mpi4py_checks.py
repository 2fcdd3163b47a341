"""Checks of the unmodified mpi4py binary wheel on oxmpi's libmpi.so.12.

Run under oxmpi's mpirun: ``mpirun -n N python -m mpi4py mpi4py_checks.py PREFIX``
(``-m mpi4py`` aborts the job on an uncaught exception instead of hanging in finalize).
Every check raises (non-zero exit) on failure; rank 0 prints one line per check.
"""

import faulthandler
import os
import sys

# A hung check prints where every rank is before the script's timeout kills the job.
faulthandler.dump_traceback_later(int(os.environ.get("OXMPI_CHECK_TRACEBACK_AFTER", "60")))

prefix = os.path.realpath(sys.argv[1])
ours = os.path.realpath(os.path.join(prefix, "lib", "libmpi.so.12"))

from mpi4py import MPI  # noqa: E402

import numpy as np  # noqa: E402

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()


def say(msg):
    if rank == 0:
        print(f"mpi4py-check: {msg}", flush=True)


def fail(msg):
    print(f"mpi4py-check: FAIL (rank {rank}): {msg}", file=sys.stderr, flush=True)
    comm.Abort(1)


# 1. The wheel loaded OUR library, through its MPICH-ABI extension, and no other libmpi.
with open("/proc/self/maps") as f:
    libs = {
        os.path.realpath(line.split()[-1])
        for line in f
        if len(line.split()) >= 6 and "libmpi" in os.path.basename(line.split()[-1])
    }
if libs != {ours}:
    fail(f"libmpi mapped: {sorted(libs)}; expected only {ours}")
ext = os.path.basename(MPI.__file__)
if ".mpich." not in ext:
    fail(f"extension {ext} is not the MPICH-ABI variant")
if MPI.Get_version() != (4, 1):
    fail(f"MPI.Get_version() = {MPI.Get_version()}")
libver = MPI.Get_library_version()
if not libver.startswith("oxmpi"):
    fail(f"MPI.Get_library_version() = {libver!r}")
if os.environ.get("MPI4PY_LIBMPI") and os.path.realpath(os.environ["MPI4PY_LIBMPI"]) != ours:
    fail(f"MPI4PY_LIBMPI={os.environ['MPI4PY_LIBMPI']} is not {ours}")
if not MPI.Is_initialized() or MPI.Is_finalized():
    fail("MPI not initialized by the import")
want_size = int(os.environ.get("OXMPI_CHECK_SIZE", size))
if size != want_size:
    fail(f"COMM_WORLD size {size}, expected {want_size}")
say(f"import ok: {ext} on {ours} ({libver.splitlines()[0].strip()}), size {size}")

if size >= 2:
    # 2. Pickle-based send/recv (mpi4py uses MPI_Mprobe + MPI_Mrecv for recv).
    obj = {"rank": 0, "list": list(range(100)), "text": "héllo", "nested": (1.5, None)}
    if rank == 0:
        comm.send(obj, dest=1, tag=7)
        back = comm.recv(source=1, tag=8)
        if back != [obj, "pong"]:
            fail(f"pickle pong {back!r}")
    elif rank == 1:
        got = comm.recv(source=0, tag=7)
        if got != obj:
            fail(f"pickle got {got!r}")
        comm.send([got, "pong"], dest=0, tag=8)
    # Larger pickle (beyond small-message paths) with a wildcard source (the tag keeps it
    # apart from the ring messages that other ranks may already send to rank 0).
    big = bytes(range(256)) * 4096  # 1 MiB
    if rank == 1:
        comm.send(big, dest=0, tag=9)
    elif rank == 0:
        st = MPI.Status()
        got = comm.recv(source=MPI.ANY_SOURCE, tag=9, status=st)
        if got != big or st.Get_source() != 1 or st.Get_tag() != 9:
            fail(f"big pickle: len {len(got)}, source {st.Get_source()}, tag {st.Get_tag()}")
    say("pickle send/recv ok")

    # 3. Buffer-based Send/Recv with numpy arrays, status count, nonblocking pair.
    n = 1 << 16
    if rank == 0:
        a = np.arange(n, dtype="f8")
        comm.Send([a, MPI.DOUBLE], dest=1, tag=21)
        r = comm.Isend(np.full(10, 7, dtype="i4"), dest=1, tag=22)
        r.Wait()
    elif rank == 1:
        b = np.empty(n, dtype="f8")
        st = MPI.Status()
        comm.Recv([b, MPI.DOUBLE], source=0, tag=21, status=st)
        if not np.array_equal(b, np.arange(n, dtype="f8")):
            fail("buffer contents differ")
        if st.Get_count(MPI.DOUBLE) != n or st.Get_source() != 0 or st.Get_tag() != 21:
            fail(f"status count {st.Get_count(MPI.DOUBLE)} source {st.Get_source()}")
        c = np.zeros(10, dtype="i4")
        comm.Irecv(c, source=0, tag=22).Wait()
        if not (c == 7).all():
            fail(f"Irecv got {c}")
    say("buffer Send/Recv ok")

    # 4. Ring over all ranks with Sendrecv, then Barrier.
    token = np.array([rank], dtype="i8")
    out = np.empty(1, dtype="i8")
    comm.Sendrecv(token, dest=(rank + 1) % size, recvbuf=out, source=(rank - 1) % size)
    if out[0] != (rank - 1) % size:
        fail(f"ring got {out[0]}")
    comm.Barrier()
    say("ring Sendrecv + Barrier ok")

say("all checks passed")
faulthandler.cancel_dump_traceback_later()
