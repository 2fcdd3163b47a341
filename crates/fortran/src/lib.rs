//! oxmpi's Fortran bindings: `libmpifort.so.12`, `mpif.h` and the `mpi` module.
//!
//! The bindings contain no MPI logic: each Fortran procedure is a C wrapper over the C
//! library `libmpi.so.12` (crate `oxmpi-capi`). `cargo xtask install` (xtask/src/fortran.rs)
//! builds them:
//!
//! 1. `tools/gen_fort.py wrappers` generates one wrapper per function of the MPI-5.0 C
//!    prototypes (`crates/capi-abi/data/mpi5-c-prototypes.txt`) that the installed
//!    `libmpi.so.12` exports, following MPICH's Fortran ABI with gfortran's conventions:
//!    arguments by reference, `ierror` last, hidden `size_t` string lengths after it,
//!    `INTEGER` handles equal to the C handles (`MPI_File` converted with
//!    `MPI_File_f2c`/`_c2f`), LOGICAL as 0/1, the status as the C status's 5 integers, and
//!    the names `mpi_x_`, `mpi_x__`, `mpi_x`, `MPI_X` (weak) and their `pmpi` forms;
//! 2. `c/fort_rt.c` holds MPICH's sentinel common blocks (`mpipriv1_`: `MPI_BOTTOM`,
//!    `MPI_IN_PLACE`, `MPI_STATUS_IGNORE`; `mpipriv2_`: `MPI_STATUSES_IGNORE`,
//!    `MPI_ERRCODES_IGNORE`; `mpiprivc_`; `mpifcmb5_`/`mpifcmb9_`: `MPI_UNWEIGHTED`,
//!    `MPI_WEIGHTS_EMPTY`), recognised by address, and the functions whose Fortran form
//!    differs from C: `MPI_Init(_thread)`, attributes (values, predefined keys, copy and
//!    delete callbacks written in Fortran), user operations, error handlers, generalized
//!    requests, the predefined `MPI_*_NULL_COPY_FN`/`_DUP_FN`/`_NULL_DELETE_FN`;
//! 3. both are linked into `lib/libmpifort.so.12` (links `libmpifort.so` and
//!    `libmpichfort.so.12`, so programs built by Debian's `mpif90.mpich` run on oxmpi);
//! 4. `tools/gen_fort.py mpifh` writes `include/mpif.h` from the C header's values
//!    (MPICH's values; predefined attribute keys are the C key + 1, as in MPICH) and the
//!    `mpi` module (the same declarations plus an explicit interface for every procedure,
//!    as MPICH's has; choice buffers take any type through gfortran's `NO_ARG_CHECK`),
//!    compiled by gfortran into `include/mpi.mod`;
//! 5. `tools/gen_fort.py f08` writes the `mpi_f08` module (`mpi_f08_types`: `TYPE(MPI_Comm)`
//!    and the other handle types with `==`/`/=`, `TYPE(MPI_Status)` with the C layout,
//!    typed constants, the sentinels in the same common blocks, the status conversions;
//!    `mpi_f08`: one generic interface per function) and one procedure per function with
//!    MPICH's names (`MPI_X_f08`, or `MPI_X_f08ts` when it has a choice buffer, declared
//!    `TYPE(*), DIMENSION(..)`, `ASYNCHRONOUS` for nonblocking calls), with optional
//!    `ierror`, calling the legacy wrapper; they are compiled by gfortran into the library.
//!    The large-count functions (`MPI_Send_c`) are in the same generic interfaces under
//!    MPICH's names (`MPI_Send_f08ts_large`), over internal C wrappers (`oxf_pmpi_send_c_`),
//!    wherever their arguments tell them apart from the default-INTEGER forms;
//! 6. `c/mpich_f08.c` and the generated `mpi_f08_compile_constants` data give programs
//!    built against MPICH's own `mpi_f08` module (`mpif90.mpich`) what they take from
//!    `libmpichfort.so.12` besides the procedures: MPICH's `MPIR_F08_*` sentinels (also
//!    recognised by address), handle constants, predefined callbacks and comparisons.
//!
//! The same sources are built a second time over the MPI-5 standard ABI
//! (`gen_fort.py --abi`, `-DOXF_ABI`): `lib/libmpifort_abi.so.1` over `libmpi_abi.so.1`,
//! with `mpif.h` and the modules in `include/abi/`. There the C handles are pointers,
//! converted with `MPI_<kind>_toint`/`_fromint` (arrays of handles one by one), Fortran
//! constants take the standard ABI's values, the status is the C status's 8 integers, and
//! callbacks whose C arguments are handles (user operations, error handlers) go through
//! trampolines.
//!
//! `mpifort` (`mpif77`, `mpif90`: the `mpicc` wrapper under another name) compiles with
//! gfortran and links `-lmpifort -lmpi` (`-mpi-abi`: `-lmpifort_abi -lmpi_abi`). This crate has no Rust API beyond the constants
//! below; its integration tests build Fortran programs against an installed prefix
//! (`OXMPI_TEST_PREFIX`).

/// Soname of the Fortran library.
pub const SONAME: &str = "libmpifort.so.12";

/// The name MPICH-built Fortran programs ask for (a link to [`SONAME`]).
pub const MPICH_NAME: &str = "libmpichfort.so.12";

/// Soname of the Fortran library over the MPI-5 standard ABI (`mpifort -mpi-abi`).
pub const ABI_SONAME: &str = "libmpifort_abi.so.1";
