/* Runtime of oxmpi's Fortran bindings (libmpifort.so.12): MPICH's sentinel common blocks
 * and the conversions the generated wrappers (fort_gen.c) use. */
#ifndef OXMPI_FORT_RT_H
#define OXMPI_FORT_RT_H

#include <stddef.h>
#include <stdlib.h>
#include <mpi.h>

#ifdef OXF_ABI
/* The standard ABI's header leaves MPI_Fint to the Fortran side: a default INTEGER. */
typedef int MPI_Fint;
#endif

/* MPICH's common blocks (same names, sizes and layout as MPICH's mpif.h), so programs
 * compiled against MPICH's mpif.h or `use mpi` pass the same addresses. A program's own
 * copy of a block (gfortran emits them as common symbols) takes precedence at run time;
 * the library reaches them through its GOT. */
struct oxf_priv1 {
    MPI_Fint bottom;
    MPI_Fint in_place;
    MPI_Fint status_ignore[MPI_F_STATUS_SIZE];
};
struct oxf_priv2 {
    MPI_Fint statuses_ignore[MPI_F_STATUS_SIZE];
    MPI_Fint errcodes_ignore[1];
};
struct oxf_privc {
    char argvs_null[1];
    char argv_null[1];
};
extern struct oxf_priv1 mpipriv1_;
extern struct oxf_priv2 mpipriv2_;
extern struct oxf_privc mpiprivc_;
extern MPI_Fint mpifcmb5_; /* MPI_UNWEIGHTED */
extern MPI_Fint mpifcmb9_; /* MPI_WEIGHTS_EMPTY */

/* Fortran INTEGER handles. Over the MPICH ABI (libmpi.so.12) they are the C handles
 * (`int`; MPI_File is a pointer converted by MPI_File_f2c/_c2f); with OXF_ABI, over the
 * MPI-5 standard ABI (libmpi_abi.so.1), they are MPI_<kind>_toint of the C handles.
 * OXF_H(Comm, f): the C handle of Fortran handle f; OXF_F(Comm, c): the reverse. */
#ifdef OXF_ABI
#define OXF_H(N, f) MPI_##N##_fromint(f)
#define OXF_F(N, c) MPI_##N##_toint(c)
/* Predefined attribute keys have the same value in Fortran and C. */
#define OXF_KEYVAL_OFFSET 0
#else
#define OXF_H(N, f) OXF_H_##N(f)
#define OXF_F(N, c) OXF_F_##N(c)
#define OXF_H_Comm(f) ((MPI_Comm)(f))
#define OXF_H_Type(f) ((MPI_Datatype)(f))
#define OXF_H_Errhandler(f) ((MPI_Errhandler)(f))
#define OXF_H_Group(f) ((MPI_Group)(f))
#define OXF_H_Info(f) ((MPI_Info)(f))
#define OXF_H_Message(f) ((MPI_Message)(f))
#define OXF_H_Op(f) ((MPI_Op)(f))
#define OXF_H_Request(f) ((MPI_Request)(f))
#define OXF_H_Session(f) ((MPI_Session)(f))
#define OXF_H_Win(f) ((MPI_Win)(f))
#define OXF_H_File(f) MPI_File_f2c(f)
#define OXF_F_Comm(c) ((MPI_Fint)(c))
#define OXF_F_Type(c) ((MPI_Fint)(c))
#define OXF_F_Errhandler(c) ((MPI_Fint)(c))
#define OXF_F_Group(c) ((MPI_Fint)(c))
#define OXF_F_Info(c) ((MPI_Fint)(c))
#define OXF_F_Message(c) ((MPI_Fint)(c))
#define OXF_F_Op(c) ((MPI_Fint)(c))
#define OXF_F_Request(c) ((MPI_Fint)(c))
#define OXF_F_Session(c) ((MPI_Fint)(c))
#define OXF_F_Win(c) ((MPI_Fint)(c))
#define OXF_F_File(c) MPI_File_c2f(c)
/* MPICH's Fortran values of the predefined attribute keys are the C keys + 1. */
#define OXF_KEYVAL_OFFSET 1
#endif

#ifndef OXF_ABI
/* The sentinels of MPICH's `mpi_f08` module (its `mpi_f08_link_constants`, defined in
 * mpich_f08.c), which programs built by MPICH's mpif90 with `use mpi_f08` pass. */
extern MPI_Fint MPIR_F08_MPI_BOTTOM;
extern MPI_Fint MPIR_F08_MPI_IN_PLACE;
extern MPI_Fint MPIR_F08_MPI_STATUS_IGNORE_OBJ[MPI_F_STATUS_SIZE];
extern MPI_Fint MPIR_F08_MPI_STATUSES_IGNORE_OBJ[MPI_F_STATUS_SIZE];
extern MPI_Fint oxf_f08_unweighted[1] __asm__("__mpi_f08_link_constants_MOD_mpi_unweighted");
extern MPI_Fint oxf_f08_weights_empty[1]
    __asm__("__mpi_f08_link_constants_MOD_mpi_weights_empty");
/* Whether `p` is the address of MPICH's `mpi_f08` sentinel `obj`. */
#define OXF_IS_F08(p, obj) ((void *)(p) == (void *)&(obj))
#else
#define OXF_IS_F08(p, obj) 0
#endif

/* A choice buffer: MPI_BOTTOM and MPI_IN_PLACE by address. */
#define FBUF(p)                                                                       \
    ((void *)(p) == (void *)&mpipriv1_.bottom || OXF_IS_F08(p, MPIR_F08_MPI_BOTTOM)    \
         ? MPI_BOTTOM                                                                 \
         : ((void *)(p) == (void *)&mpipriv1_.in_place ||                             \
                    OXF_IS_F08(p, MPIR_F08_MPI_IN_PLACE)                              \
                ? MPI_IN_PLACE                                                        \
                : (void *)(p)))

/* A status argument (single or array): MPI_STATUS(ES)_IGNORE by address. */
#define FSTATUS(p)                                                                    \
    ((void *)(p) == (void *)mpipriv1_.status_ignore ||                               \
             (void *)(p) == (void *)mpipriv2_.statuses_ignore ||                      \
             OXF_IS_F08(p, MPIR_F08_MPI_STATUS_IGNORE_OBJ) ||                          \
             OXF_IS_F08(p, MPIR_F08_MPI_STATUSES_IGNORE_OBJ)                           \
         ? MPI_STATUS_IGNORE                                                          \
         : (MPI_Status *)(p))

/* A weights array of the distributed-graph constructors. */
#define FWEIGHTS(p, T)                                                                \
    ((void *)(p) == (void *)&mpifcmb5_ || OXF_IS_F08(p, oxf_f08_unweighted)            \
         ? (T)MPI_UNWEIGHTED                                                          \
         : ((void *)(p) == (void *)&mpifcmb9_ || OXF_IS_F08(p, oxf_f08_weights_empty)  \
                ? (T)MPI_WEIGHTS_EMPTY                                                \
                : (T)(p)))

/* A Fortran string argument as a new C string (trailing blanks dropped; leading ones too
 * when `trim_leading`); free() it. */
char *oxf_str_in(const char *s, size_t len, int trim_leading);
/* A C buffer large enough for any string the C library writes into a Fortran argument of
 * `len` characters; free()d by oxf_str_out. */
char *oxf_str_buf(size_t len);
/* Copy the C string `c` into the Fortran argument `f` (blank-padded), then free `c`. */
void oxf_str_out(char *f, size_t len, char *c, int rc);
/* An array of `n` C handles (malloc'd; free() it). */
void *oxf_handles(int n, size_t size);
/* Report a function the Fortran bindings do not provide. */
void oxf_unsupported(const char *name, MPI_Fint *ierr);

#endif
