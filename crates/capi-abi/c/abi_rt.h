/* Runtime of oxmpi's standard-ABI translation layer (libmpi_abi.so.1).
 *
 * The layer sits on top of the MPICH-ABI implementation of libmpi.so.12, whose functions
 * are renamed OXI_PMPI_* when libmpi_abi.so.1 is linked (see xtask/src/libmpi.rs).
 *
 * Handle encoding: a standard-ABI handle is pointer-sized. Predefined handles are the
 * standard's integers 1-4095 and map to the MPICH values through generated tables; a
 * user handle carries the 32-bit MPICH handle value zero-extended (all MPICH handles of
 * objects we create are >= 0x80000000, never in the reserved range). MPI_File handles are
 * the MPICH side's pointers, MPI_FILE_NULL (0x118) maps to NULL. */
#ifndef OXMPI_ABI_RT_H
#define OXMPI_ABI_RT_H

#include "mpi.h" /* the standard-ABI header, include/mpi_abi/mpi.h */
#include <stdint.h>

/* The MPICH-ABI MPI_Status (20 bytes). */
typedef struct oxi_status {
    int count_lo;
    int count_hi_and_cancelled;
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
} oxi_status;

#define OXI_STATUS_IGNORE ((oxi_status *)1)
#define OXI_IN_PLACE ((void *)-1)
#define OXI_BUFFER_AUTOMATIC ((void *)-2)
#define OXI_COMM_WORLD 0x44000000
#define OXI_ERRORS_RETURN 0x54000001
#define OXI_ERR_UNSUPPORTED_OPERATION 44
#define OXI_ERR_NO_MEM 34
#define OXI_ERR_OTHER 15

/* An MPICH handle value no object has (kind bits 11, object type 15). */
#define OXA_INVALID_HANDLE (-1)
/* Elements converted on the stack before falling back to malloc. */
#define OXA_STACK 64

/* Generated (abi_gen.c): predefined handles and integer constants. */
int oxa_h2i(uintptr_t h);
uintptr_t oxa_i2h_comm(int i);
uintptr_t oxa_i2h_datatype(int i);
uintptr_t oxa_i2h_errhandler(int i);
uintptr_t oxa_i2h_group(int i);
uintptr_t oxa_i2h_info(int i);
uintptr_t oxa_i2h_message(int i);
uintptr_t oxa_i2h_op(int i);
uintptr_t oxa_i2h_request(int i);
uintptr_t oxa_i2h_session(int i);
uintptr_t oxa_i2h_win(int i);

#define OXA_CONV(g) int oxa_##g##_a2i(int v); int oxa_##g##_i2a(int v);
OXA_CONV(err)
OXA_CONV(thread)
OXA_CONV(compare)
OXA_CONV(topo)
OXA_CONV(combiner)
OXA_CONV(commtype)
OXA_CONV(order)
OXA_CONV(distrib)
OXA_CONV(typeclass)
OXA_CONV(lock)
OXA_CONV(seek)
OXA_CONV(flavor)
OXA_CONV(model)
OXA_CONV(keyval)
OXA_CONV(amode)
OXA_CONV(assert)
OXA_CONV(cbsafety)
OXA_CONV(verbosity)
OXA_CONV(bind)
#undef OXA_CONV

/* Hand-written (abi_rt.c). */
int oxa_rank_a2i(int v);
int oxa_rank_i2a(int v);
int oxa_tag_a2i(int v);
int oxa_tag_i2a(int v);
int oxa_darg_a2i(int v);
MPI_Offset oxa_disp_a2i(MPI_Offset v);
MPI_Offset oxa_disp_i2a(MPI_Offset v);
int oxa_err_a2i_other(int v);
int oxa_err_i2a_other(int v);
void *oxa_file_a2i(uintptr_t h);
uintptr_t oxa_file_i2a(void *f);
void *oxa_buf_a2i(const void *p);
int *oxa_weights_a2i(const int *p);
void oxa_status_a2i(const MPI_Status *a, oxi_status *i);
void oxa_status_i2a(const oxi_status *i, MPI_Status *a);
int *oxa_ints(int *stack, int n);
oxi_status *oxa_statuses(oxi_status *stack, int n);
int oxa_nomem(void);
int oxa_unsupported(const char *name);
int oxa_fail(const char *name, int cls);
int oxa_comm_peers(MPI_Comm comm);
int oxa_comm_local_size(MPI_Comm comm);
int oxa_neighbors(MPI_Comm comm, int send);

#endif
