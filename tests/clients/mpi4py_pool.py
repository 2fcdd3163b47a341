"""A small mpi4py.futures pool: run as `mpirun -n 1 python -m mpi4py.futures mpi4py_pool.py`.

The pool's two workers are started with MPI_Comm_spawn; the squares come back in order.
"""
from mpi4py.futures import MPIPoolExecutor


def square(x):
    return x * x


if __name__ == "__main__":
    with MPIPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(square, range(16)))
    assert got == [x * x for x in range(16)], got
    print("mpi4py.futures pool ok:", got[-1])
