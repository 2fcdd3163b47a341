"""oxmpi, installed from its wheel: the MPI library and tools live in the environment's
root (``<venv>/lib/libmpi.so.12``, ``<venv>/bin/mpirun``), where mpi4py finds them.

``python -m oxmpi`` prints the version and the paths; :func:`prefix`, :func:`libmpi`
and :func:`mpirun` return them.
"""

from importlib import metadata as _metadata
from pathlib import Path as _Path

__all__ = [
    "__version__",
    "prefix",
    "libmpi",
    "libmpi_abi",
    "libmpifort",
    "fortran_compiler",
    "mpirun",
]

__version__ = _metadata.version("oxmpi")


def _installed(name: str) -> _Path:
    """The installed path of the wheel's data file ``name`` (``lib/libmpi.so.12``), read
    from the distribution's RECORD, so a venv, ``--user`` and ``--prefix`` installs all work."""
    dist = _metadata.distribution("oxmpi")
    for f in dist.files or ():
        p = _Path(dist.locate_file(f)).resolve()
        if p.as_posix().endswith("/" + name):
            return p
    raise FileNotFoundError(f"oxmpi: {name} is not part of this installation")


def libmpi() -> _Path:
    """The MPICH-ABI library ``libmpi.so.12``."""
    return _installed("lib/libmpi.so.12")


def libmpi_abi() -> _Path:
    """The MPI-5 standard-ABI library ``libmpi_abi.so.1``."""
    return _installed("lib/libmpi_abi.so.1")


def libmpifort() -> _Path:
    """The Fortran bindings ``libmpifort.so.12`` (MPICH's Fortran ABI)."""
    return _installed("lib/libmpifort.so.12")


def fortran_compiler() -> str:
    """The compiler that built the Fortran module files (``mpi.mod``, ``mpi_f08.mod``):
    the first line of its ``--version``. Module files work only with a compatible gfortran."""
    return _installed("share/oxmpi/fortran-compiler.txt").read_text().strip()


def prefix() -> _Path:
    """The install prefix: the directory holding ``bin/``, ``lib/`` and ``include/``."""
    return libmpi().parent.parent


def mpirun() -> _Path:
    """The launcher, ``<prefix>/bin/mpirun``."""
    return _installed("bin/mpirun")
