"""``python -m oxmpi [--prefix | --libmpi]``: print the version and where the library is."""

import sys

import oxmpi


def main(argv):
    if argv == ["--prefix"]:
        print(oxmpi.prefix())
    elif argv == ["--libmpi"]:
        print(oxmpi.libmpi())
    elif not argv:
        print(f"oxmpi {oxmpi.__version__}")
        print(f"library: {oxmpi.libmpi()}")
        print(f"standard-ABI library: {oxmpi.libmpi_abi()}")
        print(f"Fortran library: {oxmpi.libmpifort()}")
        print(f"Fortran modules built by: {oxmpi.fortran_compiler()}")
        print(f"mpirun: {oxmpi.mpirun()}")
        print(f"prefix: {oxmpi.prefix()}")
    else:
        print("usage: python -m oxmpi [--prefix | --libmpi]", file=sys.stderr)
        return 2
    return 0


sys.exit(main(sys.argv[1:]))
