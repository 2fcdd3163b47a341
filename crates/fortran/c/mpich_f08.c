/* What programs built by MPICH's mpif90 (gfortran) with `use mpi_f08` take from
 * libmpichfort.so.12 besides the procedures themselves (`mpi_send_f08ts_`, ...: ours have
 * MPICH's names and argument passing), over the MPICH ABI only:
 *
 * - the sentinels of MPICH's module `mpi_f08_link_constants`: `MPIR_F08_MPI_BOTTOM`,
 *   `MPIR_F08_MPI_IN_PLACE`, `MPIR_F08_MPI_STATUS(ES)_IGNORE_OBJ` (BIND(C) variables) and
 *   `MPI_UNWEIGHTED`, `MPI_WEIGHTS_EMPTY`, `MPI_ERRCODES_IGNORE`, `MPI_ARGV(S)_NULL`
 *   (module variables), recognised by address like the common blocks (fort_rt.h);
 * - the comparisons of a handle with an INTEGER of MPICH's `mpi_f08_types`
 *   (`comm == MPI_COMM_NULL%MPI_VAL` style: `mpi_comm_f08_eq_f`, ...) and its MPI_SIZEOF
 *   procedures (`mpi_sizeof_xint32`, ...);
 * - the predefined callbacks of its `mpi_f08_callbacks` (aliases in fort_rt.c) and the
 *   handle constants of its `mpi_f08_compile_constants`, which gfortran references as
 *   data when a program passes one as an argument (generated into fort_gen.c by
 *   tools/gen_fort.py).
 *
 * MPICH's derived-type bookkeeping (`__vtab_*`, `__def_init_*`, `__copy_*` of the handle
 * types, used only by polymorphic code) is not provided. */
#include "fort_rt.h"

#ifndef OXF_ABI

/* Aligned as gfortran aligns module variables, so the definitions agree with programs
 * that copy them. */
MPI_Fint MPIR_F08_MPI_BOTTOM __attribute__((aligned(32)));
MPI_Fint MPIR_F08_MPI_IN_PLACE __attribute__((aligned(32)));
MPI_Fint MPIR_F08_MPI_STATUS_IGNORE_OBJ[MPI_F_STATUS_SIZE] __attribute__((aligned(32)));
MPI_Fint MPIR_F08_MPI_STATUSES_IGNORE_OBJ[MPI_F_STATUS_SIZE] __attribute__((aligned(32)));
MPI_Fint oxf_f08_unweighted[1] __attribute__((aligned(32)));
MPI_Fint oxf_f08_weights_empty[1] __attribute__((aligned(32)));
extern MPI_Fint oxf_f08_errcodes_ignore[1]
    __asm__("__mpi_f08_link_constants_MOD_mpi_errcodes_ignore");
MPI_Fint oxf_f08_errcodes_ignore[1] __attribute__((aligned(32)));
extern char oxf_f08_argv_null[1] __asm__("__mpi_f08_link_constants_MOD_mpi_argv_null");
char oxf_f08_argv_null[1] __attribute__((aligned(32)));
extern char oxf_f08_argvs_null[1] __asm__("__mpi_f08_link_constants_MOD_mpi_argvs_null");
char oxf_f08_argvs_null[1] __attribute__((aligned(32)));

/* `a == b`, `a /= b` between a handle (its MPI_VAL) and an INTEGER, both orders:
 * elemental LOGICAL functions of MPICH's mpi_f08_types. */
#define F08_CMP(kind)                                                                 \
    F08_CMP1(kind##_f08_eq_f, ==)                                                     \
    F08_CMP1(kind##_f_eq_f08, ==)                                                     \
    F08_CMP1(kind##_f08_neq_f, !=)                                                    \
    F08_CMP1(kind##_f_neq_f08, !=)
#define F08_CMP1(name, op)                                                            \
    MPI_Fint __mpi_f08_types_MOD_mpi_##name(const MPI_Fint *a, const MPI_Fint *b);    \
    MPI_Fint __mpi_f08_types_MOD_mpi_##name(const MPI_Fint *a, const MPI_Fint *b)     \
    {                                                                                 \
        return *a op *b;                                                              \
    }
F08_CMP(comm)
F08_CMP(datatype)
F08_CMP(errhandler)
F08_CMP(file)
F08_CMP(group)
F08_CMP(info)
F08_CMP(message)
F08_CMP(op)
F08_CMP(request)
F08_CMP(session)
F08_CMP(win)

/* MPI_SIZEOF of MPICH's mpi_f08 (`x` is an assumed-rank descriptor; ierror optional). */
#define F08_SIZEOF(sfx, bytes)                                                        \
    void __mpi_f08_types_MOD_mpi_sizeof_##sfx(void *x, MPI_Fint *size, MPI_Fint *ierr); \
    void __mpi_f08_types_MOD_mpi_sizeof_##sfx(void *x, MPI_Fint *size, MPI_Fint *ierr)  \
    {                                                                                 \
        (void)x;                                                                      \
        *size = bytes;                                                                \
        if (ierr)                                                                     \
            *ierr = MPI_SUCCESS;                                                      \
    }
F08_SIZEOF(character, 1)
F08_SIZEOF(logical, 4)
F08_SIZEOF(xint8, 1)
F08_SIZEOF(xint16, 2)
F08_SIZEOF(xint32, 4)
F08_SIZEOF(xint64, 8)
F08_SIZEOF(xreal32, 4)
F08_SIZEOF(xreal64, 8)
F08_SIZEOF(xreal128, 16)
F08_SIZEOF(xcomplex32, 8)
F08_SIZEOF(xcomplex64, 16)
F08_SIZEOF(xcomplex128, 32)

#endif
