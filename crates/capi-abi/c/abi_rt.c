/* Hand-written part of oxmpi's standard-ABI translation layer: value conversions that
 * need more than a table, and the functions whose conversion needs state (user callbacks
 * through trampolines, MPI_*_toint/fromint, MPI_Abi_*). Every `PMPI_<name>` defined here
 * is skipped by the generator (tools/gen_abi.py), which generates all the others. */
#include "abi_rt.h"
#include "abi_mpich.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int *const OXI_MPI_UNWEIGHTED;
extern int *const OXI_MPI_WEIGHTS_EMPTY;
int OXI_MPIR_Dup_fn(int oldcomm, int keyval, void *extra_state, void *in, void *out, int *flag);

#define WEAK(name) _Pragma(#name)
#define ALIAS(f) WEAK(weak MPI_##f = PMPI_##f)

/* An int no MPICH-ABI rank or tag argument accepts. */
#define OXA_INVALID_INT (-999999)

/* ---------------------------------------------------------------- value conversions */

int oxa_rank_a2i(int v)
{
    switch (v) {
    case MPI_ANY_SOURCE: return -2;
    case MPI_PROC_NULL: return -1;
    case MPI_ROOT: return -3;
    case MPI_UNDEFINED: return v;
    default: return v < 0 ? OXA_INVALID_INT : v;
    }
}

int oxa_rank_i2a(int v)
{
    switch (v) {
    case -2: return MPI_ANY_SOURCE;
    case -1: return MPI_PROC_NULL;
    case -3: return MPI_ROOT;
    default: return v;
    }
}

int oxa_tag_a2i(int v)
{
    if (v == MPI_ANY_TAG)
        return -1;
    return v < 0 ? OXA_INVALID_INT : v;
}

int oxa_tag_i2a(int v) { return v == -1 ? MPI_ANY_TAG : v; }

/* MPI_DISPLACEMENT_CURRENT (MPI_File_set_view/get_view). */
#define OXI_DISPLACEMENT_CURRENT (-54278278LL)
MPI_Offset oxa_disp_a2i(MPI_Offset v) { return v == MPI_DISPLACEMENT_CURRENT ? OXI_DISPLACEMENT_CURRENT : v; }
MPI_Offset oxa_disp_i2a(MPI_Offset v) { return v == OXI_DISPLACEMENT_CURRENT ? MPI_DISPLACEMENT_CURRENT : v; }

/* Distribution arguments of MPI_Type_create_darray: only the default is a constant. */
int oxa_darg_a2i(int v) { return v == MPI_DISTRIBUTE_DFLT_DARG ? oxa_distrib_a2i(v) : v; }

/* User-defined error classes and codes: MPICH hands them out above its MPI_ERR_LASTCODE
 * (0x3fffffff); in the standard ABI they follow MPI_ERR_LASTCODE (16383). */
#define OXI_FIRST_USER_CODE 0x40000000
int oxa_err_i2a_other(int v)
{
    if (v >= OXI_FIRST_USER_CODE)
        return v - OXI_FIRST_USER_CODE + MPI_ERR_LASTCODE + 1;
    return v;
}

int oxa_err_a2i_other(int v)
{
    if (v > MPI_ERR_LASTCODE && v <= MPI_ERR_LASTCODE + 1 + (0x7fffffff - OXI_FIRST_USER_CODE))
        return v - (MPI_ERR_LASTCODE + 1) + OXI_FIRST_USER_CODE;
    return v;
}

/* MPI_File: the MPICH side uses pointers; MPI_FILE_NULL is NULL there. A pointer that
 * happens to be below 4096 is tagged so it cannot look like a predefined handle. */
#define OXA_FILE_TAG ((uintptr_t)1 << 62)
void *oxa_file_a2i(uintptr_t h)
{
    if (h == (uintptr_t)MPI_FILE_NULL)
        return NULL;
    if (h < 4096)
        return (void *)(intptr_t)-1;
    return (void *)(h & ~OXA_FILE_TAG);
}

uintptr_t oxa_file_i2a(void *f)
{
    uintptr_t v = (uintptr_t)f;
    if (v == 0)
        return (uintptr_t)MPI_FILE_NULL;
    return v < 4096 ? v | OXA_FILE_TAG : v;
}

void *oxa_buf_a2i(const void *p)
{
    if (p == MPI_IN_PLACE)
        return OXI_IN_PLACE;
    if (p == MPI_BUFFER_AUTOMATIC)
        return OXI_BUFFER_AUTOMATIC;
    return (void *)p;
}

int *oxa_weights_a2i(const int *p)
{
    if (p == MPI_UNWEIGHTED)
        return OXI_MPI_UNWEIGHTED;
    if (p == MPI_WEIGHTS_EMPTY)
        return OXI_MPI_WEIGHTS_EMPTY;
    return (int *)p;
}

/* The count and cancelled bit travel in MPI_internal[0..1] of the standard status. */
void oxa_status_a2i(const MPI_Status *a, oxi_status *i)
{
    i->count_lo = a->MPI_internal[0];
    i->count_hi_and_cancelled = a->MPI_internal[1];
    i->MPI_SOURCE = oxa_rank_a2i(a->MPI_SOURCE);
    i->MPI_TAG = a->MPI_TAG == MPI_ANY_TAG ? -1 : a->MPI_TAG;
    i->MPI_ERROR = oxa_err_a2i(a->MPI_ERROR);
}

void oxa_status_i2a(const oxi_status *i, MPI_Status *a)
{
    a->MPI_SOURCE = oxa_rank_i2a(i->MPI_SOURCE);
    a->MPI_TAG = oxa_tag_i2a(i->MPI_TAG);
    a->MPI_ERROR = oxa_err_i2a(i->MPI_ERROR);
    a->MPI_internal[0] = i->count_lo;
    a->MPI_internal[1] = i->count_hi_and_cancelled;
    a->MPI_internal[2] = 0;
    a->MPI_internal[3] = 0;
    a->MPI_internal[4] = 0;
}

int *oxa_ints(int *stack, int n)
{
    if (n <= OXA_STACK)
        return stack;
    return malloc(sizeof(int) * (size_t)n);
}

oxi_status *oxa_statuses(oxi_status *stack, int n)
{
    if (n <= OXA_STACK / 4)
        return stack;
    return malloc(sizeof(oxi_status) * (size_t)n);
}

int oxa_nomem(void) { return MPI_ERR_NO_MEM; }

/* A function the layer cannot convert: MPI_ERR_UNSUPPORTED_OPERATION. */
int oxa_unsupported(const char *name) { return oxa_fail(name, MPI_ERR_UNSUPPORTED_OPERATION); }

/* An error detected by the layer itself (error class `cls`, standard-ABI number): through
 * the error handler of MPI_COMM_WORLD, named on stderr first unless that handler returns. */
int oxa_fail(const char *name, int cls)
{
    int eh = 0;
    if (OXI_PMPI_Comm_get_errhandler(OXI_COMM_WORLD, &eh) != 0 || eh != OXI_ERRORS_RETURN) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        OXI_PMPI_Error_string(oxa_err_a2i(cls), msg, &len);
        fprintf(stderr, "oxmpi: %s: %s (standard-ABI library libmpi_abi.so.1)\n", name, msg);
        fflush(stderr);
        OXI_PMPI_Comm_call_errhandler(OXI_COMM_WORLD, oxa_err_a2i(cls));
    }
    return cls;
}

/* Length of the datatype arrays of MPI_Alltoallw & co. */
int oxa_comm_peers(MPI_Comm comm)
{
    int c = oxa_h2i((uintptr_t)comm), inter = 0, n = 0;
    if (OXI_PMPI_Comm_test_inter(c, &inter) != 0)
        return 0;
    if ((inter ? OXI_PMPI_Comm_remote_size(c, &n) : OXI_PMPI_Comm_size(c, &n)) != 0)
        return 0;
    return n;
}

/* Size of the local group (MPI_Reduce_scatter's recvcounts). */
int oxa_comm_local_size(MPI_Comm comm)
{
    int n = 0;
    return OXI_PMPI_Comm_size(oxa_h2i((uintptr_t)comm), &n) == 0 ? n : 0;
}

/* Number of neighbours of a process topology (send = 1: out-degree). */
int oxa_neighbors(MPI_Comm comm, int send)
{
    int c = oxa_h2i((uintptr_t)comm), kind = 0, n = 0, in = 0, out = 0, w = 0, rank = 0;
    if (OXI_PMPI_Topo_test(c, &kind) != 0)
        return 0;
    switch (oxa_topo_i2a(kind)) {
    case MPI_CART:
        if (OXI_PMPI_Cartdim_get(c, &n) != 0)
            return 0;
        return 2 * n;
    case MPI_GRAPH:
        if (OXI_PMPI_Comm_rank(c, &rank) != 0 || OXI_PMPI_Graph_neighbors_count(c, rank, &n) != 0)
            return 0;
        return n;
    case MPI_DIST_GRAPH:
        if (OXI_PMPI_Dist_graph_neighbors_count(c, &in, &out, &w) != 0)
            return 0;
        return send ? out : in;
    default:
        return 0;
    }
}

/* ---------------------------------------------------------------- MPI_Abi_* */

int PMPI_Abi_get_version(int *abi_major, int *abi_minor)
{
    if (!abi_major || !abi_minor)
        return MPI_ERR_ARG;
    *abi_major = MPI_ABI_VERSION;
    *abi_minor = MPI_ABI_SUBVERSION;
    return MPI_SUCCESS;
}
ALIAS(Abi_get_version)

int PMPI_Abi_get_info(MPI_Info *info)
{
    static const char *const kv[][2] = {
        {"mpi_aint_size", "8"}, {"mpi_count_size", "8"}, {"mpi_offset_size", "8"}};
    int h = 0, rc;
    if (!info)
        return MPI_ERR_ARG;
    rc = OXI_PMPI_Info_create(&h);
    for (size_t k = 0; rc == 0 && k < sizeof kv / sizeof kv[0]; k++)
        rc = OXI_PMPI_Info_set(h, kv[k][0], kv[k][1]);
    if (rc == 0)
        *info = (MPI_Info)oxa_i2h_info(h);
    return oxa_err_i2a(rc);
}
ALIAS(Abi_get_info)

/* The Fortran side (MPI 5.0 §21.4.1). libmpifort_abi.so.1 is built with the library, by
 * gfortran (cargo xtask install), so the library knows its Fortran properties: the sizes
 * are those of the predefined Fortran datatypes, an optional type is supported when its
 * MPI_Type_size is a size (what the standard's rationale says users check), and .TRUE. and
 * .FALSE. are 1 and 0 for every supported LOGICAL kind. MPI_Abi_set_fortran_info accepts
 * one call whose values agree with those (a Fortran layer confirming them) and refuses
 * contradicting or later calls with MPI_ERR_ABI; MPI_Abi_set_fortran_booleans records one
 * call for a LOGICAL size the library does not know, and refuses the others. */
static const struct {
    const char *key;
    MPI_Datatype type;
} oxa_fortran_sizes[] = {
    {"mpi_logical_size", MPI_LOGICAL},
    {"mpi_integer_size", MPI_INTEGER},
    {"mpi_real_size", MPI_REAL},
    {"mpi_double_precision_size", MPI_DOUBLE_PRECISION},
};

static const struct {
    const char *key;
    MPI_Datatype type;
} oxa_fortran_optional[] = {
    {"mpi_logical1_supported", MPI_LOGICAL1},   {"mpi_logical2_supported", MPI_LOGICAL2},
    {"mpi_logical4_supported", MPI_LOGICAL4},   {"mpi_logical8_supported", MPI_LOGICAL8},
    {"mpi_logical16_supported", MPI_LOGICAL16}, {"mpi_integer1_supported", MPI_INTEGER1},
    {"mpi_integer2_supported", MPI_INTEGER2},   {"mpi_integer4_supported", MPI_INTEGER4},
    {"mpi_integer8_supported", MPI_INTEGER8},   {"mpi_integer16_supported", MPI_INTEGER16},
    {"mpi_real2_supported", MPI_REAL2},         {"mpi_real4_supported", MPI_REAL4},
    {"mpi_real8_supported", MPI_REAL8},         {"mpi_real16_supported", MPI_REAL16},
    {"mpi_complex4_supported", MPI_COMPLEX4},   {"mpi_complex8_supported", MPI_COMPLEX8},
    {"mpi_complex16_supported", MPI_COMPLEX16}, {"mpi_complex32_supported", MPI_COMPLEX32},
    {"mpi_double_complex_supported", MPI_DOUBLE_COMPLEX},
};

/* The size of predefined type t in the library, 0 if the type is not supported. */
static int oxa_fortran_size(MPI_Datatype t)
{
    int size = 0;
    if (OXI_PMPI_Type_size(oxa_h2i((uintptr_t)t), &size) != 0 || size < 0)
        return 0;
    return size;
}

#define NSIZES (sizeof oxa_fortran_sizes / sizeof oxa_fortran_sizes[0])
#define NOPTIONAL (sizeof oxa_fortran_optional / sizeof oxa_fortran_optional[0])

/* The value the library has for Fortran-info key k (of the two tables), in buf. */
static const char *oxa_fortran_value(size_t k, char *buf, size_t len)
{
    if (k < NSIZES) {
        snprintf(buf, len, "%d", oxa_fortran_size(oxa_fortran_sizes[k].type));
        return buf;
    }
    return oxa_fortran_size(oxa_fortran_optional[k - NSIZES].type) > 0 ? "true" : "false";
}

static const char *oxa_fortran_key(size_t k)
{
    return k < NSIZES ? oxa_fortran_sizes[k].key : oxa_fortran_optional[k - NSIZES].key;
}

int PMPI_Abi_get_fortran_info(MPI_Info *info)
{
    int h = 0, rc;
    char buf[32];
    if (!info)
        return oxa_fail("MPI_Abi_get_fortran_info (info is NULL)", MPI_ERR_ARG);
    rc = OXI_PMPI_Info_create(&h);
    for (size_t k = 0; rc == 0 && k < NSIZES + NOPTIONAL; k++)
        rc = OXI_PMPI_Info_set(h, oxa_fortran_key(k), oxa_fortran_value(k, buf, sizeof buf));
    if (rc == 0)
        *info = (MPI_Info)oxa_i2h_info(h);
    return oxa_err_i2a(rc);
}
ALIAS(Abi_get_fortran_info)

static pthread_mutex_t oxa_fortran_lock = PTHREAD_MUTEX_INITIALIZER;
static int oxa_fortran_info_set;

int PMPI_Abi_set_fortran_info(MPI_Info info)
{
    int h = oxa_h2i((uintptr_t)info), nkeys = 0, flag = 0, rc = 0, done;
    char have[32], given[64], why[256] = "";
    const char *mine;
    if (info == MPI_INFO_NULL)
        return oxa_fail("MPI_Abi_set_fortran_info (MPI_INFO_NULL)", MPI_ERR_INFO);
    rc = OXI_PMPI_Info_get_nkeys(h, &nkeys);
    if (rc != 0)
        return oxa_err_i2a(rc);
    pthread_mutex_lock(&oxa_fortran_lock);
    done = oxa_fortran_info_set;
    for (size_t k = 0; !done && rc == 0 && k < NSIZES + NOPTIONAL && !why[0]; k++) {
        int vlen = (int)sizeof given - 1;
        rc = OXI_PMPI_Info_get_string(h, oxa_fortran_key(k), &vlen, given, &flag);
        if (rc != 0 || !flag)
            continue;
        mine = oxa_fortran_value(k, have, sizeof have);
        if (k < NSIZES ? atoi(given) != atoi(mine) : strcmp(given, mine) != 0)
            snprintf(why, sizeof why,
                     "MPI_Abi_set_fortran_info (%s=%s, but this library's Fortran bindings have "
                     "%s)",
                     oxa_fortran_key(k), given, mine);
    }
    /* Only a call that is accepted counts as the one that set the properties. */
    if (!done && rc == 0 && !why[0])
        oxa_fortran_info_set = 1;
    pthread_mutex_unlock(&oxa_fortran_lock);
    if (done)
        return oxa_fail("MPI_Abi_set_fortran_info (the Fortran properties were set by an earlier "
                        "call)",
                        MPI_ERR_ABI);
    if (rc != 0)
        return oxa_err_i2a(rc);
    return why[0] ? oxa_fail(why, MPI_ERR_ABI) : MPI_SUCCESS;
}
ALIAS(Abi_set_fortran_info)

/* Fortran booleans: the library's (1 and 0, in the LOGICAL kinds it supports) and one
 * size the user may add. */
static int oxa_bool_size;
static unsigned char *oxa_bool_true, *oxa_bool_false;

static int oxa_logical_known(int size)
{
    static const MPI_Datatype kinds[] = {MPI_LOGICAL1, MPI_LOGICAL2, MPI_LOGICAL4,
                                         MPI_LOGICAL8, MPI_LOGICAL16};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (oxa_fortran_size(kinds[k]) == size)
            return 1;
    return 0;
}

static int oxa_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

int PMPI_Abi_get_fortran_booleans(int logical_size, void *logical_true, void *logical_false,
                                  int *is_set)
{
    if (!oxa_power_of_two(logical_size))
        return oxa_fail("MPI_Abi_get_fortran_booleans (logical_size is not a power of two)",
                        MPI_ERR_ARG);
    if (!logical_true || !logical_false || !is_set)
        return oxa_fail("MPI_Abi_get_fortran_booleans (NULL argument)", MPI_ERR_ARG);
    *is_set = 0;
    if (oxa_logical_known(logical_size)) {
        /* gfortran: .TRUE. is 1 and .FALSE. is 0 in every LOGICAL kind. */
        unsigned char *t = logical_true;
        memset(logical_true, 0, (size_t)logical_size);
        memset(logical_false, 0, (size_t)logical_size);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        t[logical_size - 1] = 1;
#else
        t[0] = 1;
#endif
        *is_set = 1;
        return MPI_SUCCESS;
    }
    pthread_mutex_lock(&oxa_fortran_lock);
    if (oxa_bool_size == logical_size) {
        memcpy(logical_true, oxa_bool_true, (size_t)logical_size);
        memcpy(logical_false, oxa_bool_false, (size_t)logical_size);
        *is_set = 1;
    }
    pthread_mutex_unlock(&oxa_fortran_lock);
    return MPI_SUCCESS;
}
ALIAS(Abi_get_fortran_booleans)

int PMPI_Abi_set_fortran_booleans(int logical_size, void *logical_true, void *logical_false)
{
    int rc = MPI_SUCCESS;
    if (!oxa_power_of_two(logical_size))
        return oxa_fail("MPI_Abi_set_fortran_booleans (logical_size is not a power of two)",
                        MPI_ERR_ARG);
    if (!logical_true || !logical_false)
        return oxa_fail("MPI_Abi_set_fortran_booleans (NULL argument)", MPI_ERR_ARG);
    if (oxa_logical_known(logical_size))
        return oxa_fail("MPI_Abi_set_fortran_booleans (this library's Fortran bindings already "
                        "set the booleans of that size)",
                        MPI_ERR_ABI);
    pthread_mutex_lock(&oxa_fortran_lock);
    if (oxa_bool_size) {
        rc = MPI_ERR_ABI;
    } else {
        oxa_bool_true = malloc((size_t)logical_size);
        oxa_bool_false = malloc((size_t)logical_size);
        if (!oxa_bool_true || !oxa_bool_false) {
            free(oxa_bool_true);
            free(oxa_bool_false);
            oxa_bool_true = oxa_bool_false = NULL;
            rc = MPI_ERR_NO_MEM;
        } else {
            memcpy(oxa_bool_true, logical_true, (size_t)logical_size);
            memcpy(oxa_bool_false, logical_false, (size_t)logical_size);
            oxa_bool_size = logical_size;
        }
    }
    pthread_mutex_unlock(&oxa_fortran_lock);
    if (rc == MPI_ERR_ABI)
        return oxa_fail("MPI_Abi_set_fortran_booleans (set by an earlier call: only the first "
                        "call counts)",
                        MPI_ERR_ABI);
    return rc == MPI_SUCCESS ? rc : oxa_fail("MPI_Abi_set_fortran_booleans", rc);
}
ALIAS(Abi_set_fortran_booleans)

/* ---------------------------------------------------------------- toint / fromint */

static int oxa_toint(uintptr_t h) { return h < 4096 ? (int)h : (int)(uint32_t)h; }
static uintptr_t oxa_fromint(int i) { return i >= 0 && i < 4096 ? (uintptr_t)i : (uint32_t)i; }

#define TOINT(N, T)                                                                        \
    int PMPI_##N##_toint(MPI_##T h) { return oxa_toint((uintptr_t)h); }                    \
    MPI_##T PMPI_##N##_fromint(int i) { return (MPI_##T)oxa_fromint(i); }
TOINT(Comm, Comm)
ALIAS(Comm_toint)
ALIAS(Comm_fromint)
TOINT(Type, Datatype)
ALIAS(Type_toint)
ALIAS(Type_fromint)
TOINT(Errhandler, Errhandler)
ALIAS(Errhandler_toint)
ALIAS(Errhandler_fromint)
TOINT(Group, Group)
ALIAS(Group_toint)
ALIAS(Group_fromint)
TOINT(Info, Info)
ALIAS(Info_toint)
ALIAS(Info_fromint)
TOINT(Message, Message)
ALIAS(Message_toint)
ALIAS(Message_fromint)
TOINT(Op, Op)
ALIAS(Op_toint)
ALIAS(Op_fromint)
TOINT(Request, Request)
ALIAS(Request_toint)
ALIAS(Request_fromint)
TOINT(Session, Session)
ALIAS(Session_toint)
ALIAS(Session_fromint)
TOINT(Win, Win)
ALIAS(Win_toint)
ALIAS(Win_fromint)

/* Files are pointers: integers are indices of a registry (4096 + index). */
#define OXA_MAX_FILES 1024
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t file_ids[OXA_MAX_FILES];
static int file_count;

int PMPI_File_toint(MPI_File file)
{
    uintptr_t h = (uintptr_t)file;
    int r = -1;
    if (h < 4096)
        return (int)h;
    pthread_mutex_lock(&file_lock);
    for (int k = 0; k < file_count; k++)
        if (file_ids[k] == h)
            r = 4096 + k;
    if (r < 0 && file_count < OXA_MAX_FILES) {
        file_ids[file_count] = h;
        r = 4096 + file_count++;
    }
    pthread_mutex_unlock(&file_lock);
    return r;
}
ALIAS(File_toint)

MPI_File PMPI_File_fromint(int file)
{
    uintptr_t h = 0;
    if (file >= 0 && file < 4096)
        return (MPI_File)(uintptr_t)file;
    pthread_mutex_lock(&file_lock);
    if (file >= 4096 && file - 4096 < file_count)
        h = file_ids[file - 4096];
    pthread_mutex_unlock(&file_lock);
    return h ? (MPI_File)h : MPI_FILE_NULL;
}
ALIAS(File_fromint)

/* ---------------------------------------------------------------- status accessors */

int PMPI_Status_get_source(const MPI_Status *status, int *source)
{
    if (!status || !source)
        return MPI_ERR_ARG;
    *source = status->MPI_SOURCE;
    return MPI_SUCCESS;
}
ALIAS(Status_get_source)

int PMPI_Status_get_tag(const MPI_Status *status, int *tag)
{
    if (!status || !tag)
        return MPI_ERR_ARG;
    *tag = status->MPI_TAG;
    return MPI_SUCCESS;
}
ALIAS(Status_get_tag)

int PMPI_Status_get_error(const MPI_Status *status, int *err)
{
    if (!status || !err)
        return MPI_ERR_ARG;
    *err = status->MPI_ERROR;
    return MPI_SUCCESS;
}
ALIAS(Status_get_error)

int PMPI_Status_set_source(MPI_Status *status, int source)
{
    if (!status)
        return MPI_ERR_ARG;
    status->MPI_SOURCE = source;
    return MPI_SUCCESS;
}
ALIAS(Status_set_source)

int PMPI_Status_set_tag(MPI_Status *status, int tag)
{
    if (!status)
        return MPI_ERR_ARG;
    status->MPI_TAG = tag;
    return MPI_SUCCESS;
}
ALIAS(Status_set_tag)

int PMPI_Status_set_error(MPI_Status *status, int err)
{
    if (!status)
        return MPI_ERR_ARG;
    status->MPI_ERROR = err;
    return MPI_SUCCESS;
}
ALIAS(Status_set_error)

int PMPI_Pcontrol(const int level, ...)
{
    return oxa_err_i2a(OXI_PMPI_Pcontrol(level));
}
ALIAS(Pcontrol)

/* ---------------------------------------------------------------- attribute values
 *
 * Predefined attributes whose values are constants (MPI_HOST may be MPI_PROC_NULL, MPI_IO
 * MPI_ANY_SOURCE, MPI_LASTUSEDCODE is an error code, the window flavor and model) are
 * returned through per-thread copies holding the standard-ABI value. */
static __thread int attr_host, attr_io, attr_lastused, attr_flavor, attr_model;

int PMPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag)
{
    int rc = OXI_PMPI_Comm_get_attr(oxa_h2i((uintptr_t)comm), oxa_keyval_a2i(comm_keyval),
                                    attribute_val, flag);
    if (rc == 0 && flag && *flag && attribute_val) {
        int **val = attribute_val;
        if ((comm_keyval == MPI_HOST || comm_keyval == MPI_IO) && *val) {
            int *copy = comm_keyval == MPI_HOST ? &attr_host : &attr_io;
            *copy = oxa_rank_i2a(**val);
            *val = copy;
        } else if (comm_keyval == MPI_LASTUSEDCODE && *val) {
            attr_lastused = oxa_err_i2a(**val);
            *val = &attr_lastused;
        }
    }
    return oxa_err_i2a(rc);
}
ALIAS(Comm_get_attr)

int PMPI_Win_get_attr(MPI_Win win, int win_keyval, void *attribute_val, int *flag)
{
    int rc = OXI_PMPI_Win_get_attr(oxa_h2i((uintptr_t)win), oxa_keyval_a2i(win_keyval),
                                   attribute_val, flag);
    if (rc == 0 && flag && *flag && attribute_val) {
        int **val = attribute_val;
        if (win_keyval == MPI_WIN_CREATE_FLAVOR && *val) {
            attr_flavor = oxa_flavor_i2a(**val);
            *val = &attr_flavor;
        } else if (win_keyval == MPI_WIN_MODEL && *val) {
            attr_model = oxa_model_i2a(**val);
            *val = &attr_model;
        }
    }
    return oxa_err_i2a(rc);
}
ALIAS(Win_get_attr)

/* ---------------------------------------------------------------- info */

/* MPI_Info_get_string (MPI-4) over MPI_Info_get_valuelen and MPI_Info_get. */
int PMPI_Info_get_string(MPI_Info info, const char *key, int *buflen, char *value, int *flag)
{
    int h = oxa_h2i((uintptr_t)info), len = 0, f = 0, rc;
    if (!buflen || !flag || (*buflen > 0 && !value))
        return oxa_fail("MPI_Info_get_string", MPI_ERR_ARG);
    rc = OXI_PMPI_Info_get_valuelen(h, key, &len, &f);
    if (rc == 0 && f && *buflen > 0)
        rc = OXI_PMPI_Info_get(h, key, *buflen - 1 < len ? *buflen - 1 : len, value, &f);
    if (rc == 0) {
        *flag = f;
        if (f)
            *buflen = len + 1;
    }
    return oxa_err_i2a(rc);
}
ALIAS(Info_get_string)

/* ---------------------------------------------------------------- datatype contents
 *
 * Besides the datatype handles, the integers of subarray and darray types hold constants
 * (order, distributions, the default distribution argument). */
#define OXI_COMBINER_SUBARRAY 13
#define OXI_COMBINER_DARRAY 14
#define OXI_DISTRIBUTE_DFLT_DARG (-49767)

static void contents_ints_i2a(int dt, int max_integers, int *ints)
{
    int ni = 0, na = 0, nd = 0, comb = 0;
    if (!ints || OXI_PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != 0 || ni > max_integers)
        return;
    if (comb == OXI_COMBINER_SUBARRAY && ni >= 2) {
        int n = ints[0];
        if (n >= 0 && 3 * n + 2 == ni)
            ints[3 * n + 1] = oxa_order_i2a(ints[3 * n + 1]);
    } else if (comb == OXI_COMBINER_DARRAY && ni >= 4) {
        int n = ints[2];
        if (n < 0 || 4 * n + 4 != ni)
            return;
        for (int k = 0; k < n; k++) {
            ints[3 + n + k] = oxa_distrib_i2a(ints[3 + n + k]);
            if (ints[3 + 2 * n + k] == OXI_DISTRIBUTE_DFLT_DARG)
                ints[3 + 2 * n + k] = MPI_DISTRIBUTE_DFLT_DARG;
        }
        ints[4 * n + 3] = oxa_order_i2a(ints[4 * n + 3]);
    }
}

int PMPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses,
                           int max_datatypes, int array_of_integers[],
                           MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[])
{
    int dt = oxa_h2i((uintptr_t)datatype);
    int n = array_of_datatypes && max_datatypes > 0 ? max_datatypes : 0;
    int s[OXA_STACK], *t = oxa_ints(s, n);
    if (n > 0 && !t)
        return oxa_nomem();
    for (int k = 0; k < n; k++)
        t[k] = OXA_INVALID_HANDLE;
    int rc = OXI_PMPI_Type_get_contents(dt, max_integers, max_addresses, max_datatypes,
                                        array_of_integers, array_of_addresses,
                                        array_of_datatypes ? t : NULL);
    if (rc == 0) {
        for (int k = 0; k < n; k++)
            array_of_datatypes[k] = (MPI_Datatype)oxa_i2h_datatype(t[k]);
        contents_ints_i2a(dt, max_integers, array_of_integers);
    }
    if (t != s)
        free(t);
    return oxa_err_i2a(rc);
}
ALIAS(Type_get_contents)

/* ---------------------------------------------------------------- trampolines
 *
 * User operations and error handlers get no extra-state argument, so each user function
 * is bound to one of a fixed pool of trampolines (one slot per distinct function, kept
 * for the life of the process: handles may outlive MPI_Op_free/MPI_Errhandler_free while
 * objects still use them). */
#define OXA_SLOTS 64
#define REP64(X)                                                                           \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)  \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29)    \
    X(30) X(31) X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43)    \
    X(44) X(45) X(46) X(47) X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57)    \
    X(58) X(59) X(60) X(61) X(62) X(63)

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;

/* Index of the slot holding fn in table (claiming a free one), or -1 if all are taken. */
static int slot_for(void **table, void *fn)
{
    int k = -1;
    pthread_mutex_lock(&slot_lock);
    for (int i = 0; i < OXA_SLOTS && k < 0; i++)
        if (table[i] == fn)
            k = i;
    for (int i = 0; i < OXA_SLOTS && k < 0; i++)
        if (!table[i]) {
            table[i] = fn;
            k = i;
        }
    pthread_mutex_unlock(&slot_lock);
    return k;
}

static int slots_full(const char *what)
{
    fprintf(stderr, "oxmpi: libmpi_abi.so.1 supports at most %d distinct %s functions\n",
            OXA_SLOTS, what);
    return MPI_ERR_INTERN;
}

/* user operations */
static void *op_fns[OXA_SLOTS];
#define OP_TRAMP(k)                                                                        \
    static void op_tramp_##k(void *in, void *inout, int *len, int *dt)                     \
    {                                                                                      \
        MPI_Datatype d = (MPI_Datatype)oxa_i2h_datatype(*dt);                              \
        ((MPI_User_function *)op_fns[k])(in, inout, len, &d);                              \
    }
REP64(OP_TRAMP)
#define OP_ENTRY(k) (void *)op_tramp_##k,
static void *const op_tramps[OXA_SLOTS] = {REP64(OP_ENTRY)};

int PMPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op)
{
    int h = OXA_INVALID_HANDLE, rc, k;
    if (!user_fn || !op)
        return oxa_err_i2a(OXI_PMPI_Op_create(NULL, commute, op ? &h : NULL));
    k = slot_for(op_fns, (void *)user_fn);
    if (k < 0)
        return slots_full("user operation");
    rc = OXI_PMPI_Op_create(op_tramps[k], commute, &h);
    if (rc == 0)
        *op = (MPI_Op)oxa_i2h_op(h);
    return oxa_err_i2a(rc);
}
ALIAS(Op_create)

/* large-count user operations, run through MPICH-ABI operations with an int length */
static void *op_c_fns[OXA_SLOTS];
#define OP_C_TRAMP(k)                                                                      \
    static void op_c_tramp_##k(void *in, void *inout, int *len, int *dt)                   \
    {                                                                                      \
        MPI_Datatype d = (MPI_Datatype)oxa_i2h_datatype(*dt);                              \
        MPI_Count n = *len;                                                                \
        ((MPI_User_function_c *)op_c_fns[k])(in, inout, &n, &d);                           \
    }
REP64(OP_C_TRAMP)
#define OP_C_ENTRY(k) (void *)op_c_tramp_##k,
static void *const op_c_tramps[OXA_SLOTS] = {REP64(OP_C_ENTRY)};

int PMPI_Op_create_c(MPI_User_function_c *user_fn, int commute, MPI_Op *op)
{
    int h = OXA_INVALID_HANDLE, rc, k;
    if (!user_fn || !op)
        return oxa_err_i2a(OXI_PMPI_Op_create(NULL, commute, op ? &h : NULL));
    k = slot_for(op_c_fns, (void *)user_fn);
    if (k < 0)
        return slots_full("large-count user operation");
    rc = OXI_PMPI_Op_create(op_c_tramps[k], commute, &h);
    if (rc == 0)
        *op = (MPI_Op)oxa_i2h_op(h);
    return oxa_err_i2a(rc);
}
ALIAS(Op_create_c)

/* error handlers: comm, win, file, session */
#define EH_KIND(kind, Kind, mtype, conv)                                                   \
    static void *kind##_eh_fns[OXA_SLOTS];                                                 \
    static void kind##_eh_call(int k, mtype *h, int *code)                                 \
    {                                                                                      \
        MPI_##Kind a = (MPI_##Kind)conv(*h);                                               \
        int e = oxa_err_i2a(*code);                                                        \
        ((MPI_##Kind##_errhandler_function *)kind##_eh_fns[k])(&a, &e);                    \
    }
EH_KIND(comm, Comm, int, oxa_i2h_comm)
EH_KIND(win, Win, int, oxa_i2h_win)
EH_KIND(file, File, void *, oxa_file_i2a)
EH_KIND(session, Session, int, oxa_i2h_session)

#define COMM_EH(k)                                                                         \
    static void comm_eh_##k(int *h, int *code, ...) { comm_eh_call(k, h, code); }
#define WIN_EH(k)                                                                          \
    static void win_eh_##k(int *h, int *code, ...) { win_eh_call(k, h, code); }
#define FILE_EH(k)                                                                         \
    static void file_eh_##k(void **h, int *code, ...) { file_eh_call(k, h, code); }
#define SESSION_EH(k)                                                                      \
    static void session_eh_##k(int *h, int *code, ...) { session_eh_call(k, h, code); }
REP64(COMM_EH)
REP64(WIN_EH)
REP64(FILE_EH)
REP64(SESSION_EH)
#define COMM_EH_ENTRY(k) (void *)comm_eh_##k,
#define WIN_EH_ENTRY(k) (void *)win_eh_##k,
#define FILE_EH_ENTRY(k) (void *)file_eh_##k,
#define SESSION_EH_ENTRY(k) (void *)session_eh_##k,
static void *const comm_eh_tramps[OXA_SLOTS] = {REP64(COMM_EH_ENTRY)};
static void *const win_eh_tramps[OXA_SLOTS] = {REP64(WIN_EH_ENTRY)};
static void *const file_eh_tramps[OXA_SLOTS] = {REP64(FILE_EH_ENTRY)};
static void *const session_eh_tramps[OXA_SLOTS] = {REP64(SESSION_EH_ENTRY)};

#define CREATE_EH(kind, Kind)                                                              \
    int PMPI_##Kind##_create_errhandler(MPI_##Kind##_errhandler_function *fn,              \
                                        MPI_Errhandler *errhandler)                        \
    {                                                                                      \
        int h = OXA_INVALID_HANDLE, rc, k;                                                 \
        if (!fn || !errhandler)                                                            \
            return oxa_err_i2a(                                                            \
                OXI_PMPI_##Kind##_create_errhandler(NULL, errhandler ? &h : NULL));        \
        k = slot_for(kind##_eh_fns, (void *)fn);                                           \
        if (k < 0)                                                                         \
            return slots_full(#kind " error handler");                                     \
        rc = OXI_PMPI_##Kind##_create_errhandler(kind##_eh_tramps[k], &h);                 \
        if (rc == 0)                                                                       \
            *errhandler = (MPI_Errhandler)oxa_i2h_errhandler(h);                           \
        return oxa_err_i2a(rc);                                                            \
    }
CREATE_EH(comm, Comm)
ALIAS(Comm_create_errhandler)
CREATE_EH(win, Win)
ALIAS(Win_create_errhandler)
CREATE_EH(file, File)
ALIAS(File_create_errhandler)
CREATE_EH(session, Session)
ALIAS(Session_create_errhandler)

/* ---------------------------------------------------------------- attribute keyvals
 *
 * Copy and delete callbacks receive the extra state: the MPICH side gets a trampoline and
 * a small record with the user's functions and extra state (kept for the process life,
 * since attributes may outlive MPI_*_free_keyval). */
struct oxa_keyval {
    void *copy; /* user function, or (void*)0 = NULL_COPY_FN, (void*)1 = DUP_FN */
    void *del;  /* user function or NULL */
    void *extra;
};

#define KEYVAL_KIND(kind, Kind, HT, conv)                                                      \
    static int kind##_copy_tramp(int old, int keyval, void *extra, void *in, void *out,    \
                                 int *flag)                                                \
    {                                                                                      \
        struct oxa_keyval *kv = extra;                                                     \
        if (kv->copy == NULL) {                                                            \
            *flag = 0;                                                                     \
            return 0;                                                                      \
        }                                                                                  \
        if (kv->copy == (void *)1) {                                                       \
            *(void **)out = in;                                                            \
            *flag = 1;                                                                     \
            return 0;                                                                      \
        }                                                                                  \
        return oxa_err_a2i(((MPI_##Kind##_copy_attr_function *)kv->copy)(                  \
            (HT)conv(old), oxa_keyval_i2a(keyval), kv->extra, in, out, flag));     \
    }                                                                                      \
    static int kind##_delete_tramp(int h, int keyval, void *val, void *extra)              \
    {                                                                                      \
        struct oxa_keyval *kv = extra;                                                     \
        if (!kv->del)                                                                      \
            return 0;                                                                      \
        return oxa_err_a2i(((MPI_##Kind##_delete_attr_function *)kv->del)(                 \
            (HT)conv(h), oxa_keyval_i2a(keyval), val, kv->extra));                 \
    }                                                                                      \
    int PMPI_##Kind##_create_keyval(MPI_##Kind##_copy_attr_function *copy_fn,              \
                                    MPI_##Kind##_delete_attr_function *delete_fn,          \
                                    int *keyval, void *extra_state)                        \
    {                                                                                      \
        int k = 0, rc;                                                                     \
        struct oxa_keyval *kv = malloc(sizeof *kv);                                        \
        if (!kv)                                                                           \
            return MPI_ERR_NO_MEM;                                                         \
        kv->copy = (void *)copy_fn;                                                        \
        kv->del = (void *)delete_fn;                                                       \
        kv->extra = extra_state;                                                           \
        rc = OXI_PMPI_##Kind##_create_keyval((void *)kind##_copy_tramp,                    \
                                             (void *)kind##_delete_tramp,                  \
                                             keyval ? &k : NULL, kv);                      \
        if (rc == 0)                                                                       \
            *keyval = oxa_keyval_i2a(k);                                                   \
        else                                                                               \
            free(kv);                                                                      \
        return oxa_err_i2a(rc);                                                            \
    }

KEYVAL_KIND(comm, Comm, MPI_Comm, oxa_i2h_comm)
ALIAS(Comm_create_keyval)
KEYVAL_KIND(type, Type, MPI_Datatype, oxa_i2h_datatype)
ALIAS(Type_create_keyval)
KEYVAL_KIND(win, Win, MPI_Win, oxa_i2h_win)
ALIAS(Win_create_keyval)

/* The deprecated MPI-1 names: MPI_Attr_get converts the predefined attribute values as
 * MPI_Comm_get_attr does; MPI_Keyval_create's callbacks have MPI_Comm_create_keyval's
 * types (MPI_DUP_FN is 1 and MPI_NULL_COPY_FN 0 here too). */
int PMPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag)
{
    return PMPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}
ALIAS(Attr_get)

int PMPI_Keyval_create(MPI_Copy_function *copy_fn, MPI_Delete_function *delete_fn, int *keyval,
                       void *extra_state)
{
    return PMPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state);
}
ALIAS(Keyval_create)

/* ---------------------------------------------------------------- MPI_Comm_idup
 *
 * The new communicator's handle is written when the duplication completes, on a library
 * thread: oxmpi-capi's oxmpi_abi_comm_idup stores it through store_comm, which converts
 * it into the caller's MPI_Comm (a converted temporary would be gone by then). */
int oxmpi_abi_comm_idup(int comm, int info, void (*store)(void *, int), void *newcomm,
                        int *request);

static void store_comm(void *dst, int h) { *(MPI_Comm *)dst = (MPI_Comm)oxa_i2h_comm(h); }

int PMPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm,
                             MPI_Request *request)
{
    int t_request = OXA_INVALID_HANDLE;
    int rc = oxmpi_abi_comm_idup(oxa_h2i((uintptr_t)comm), oxa_h2i((uintptr_t)info),
                                 newcomm ? store_comm : NULL, newcomm,
                                 request ? &t_request : NULL);
    if (rc == 0 && request)
        *request = (MPI_Request)oxa_i2h_request(t_request);
    return oxa_err_i2a(rc);
}
ALIAS(Comm_idup_with_info)

int PMPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request)
{
    return PMPI_Comm_idup_with_info(comm, MPI_INFO_NULL, newcomm, request);
}
ALIAS(Comm_idup)

/* ---------------------------------------------------------------- user data representations
 *
 * The MPICH side calls its conversion and extent callbacks with MPICH datatype handles and
 * passes extra_state back: it gets trampolines and a record of the user's functions and
 * extra state (kept for the process life: representations are never removed). */
struct oxa_datarep {
    void *read, *write; /* MPI_Datarep_conversion_function(_c)* or NULL */
    MPI_Datarep_extent_function *extent;
    void *extra;
};

static int datarep_extent(int dt, MPI_Aint *extent, void *st)
{
    struct oxa_datarep *r = st;
    return oxa_err_a2i(r->extent((MPI_Datatype)oxa_i2h_datatype(dt), extent, r->extra));
}

#define DATAREP_CONV(name, field, CT, FT)                                                  \
    static int name(void *userbuf, int dt, CT count, void *filebuf, MPI_Offset position,   \
                    void *st)                                                              \
    {                                                                                      \
        struct oxa_datarep *r = st;                                                        \
        return oxa_err_a2i(((FT *)r->field)(userbuf, (MPI_Datatype)oxa_i2h_datatype(dt),   \
                                            count, filebuf, position, r->extra));          \
    }
DATAREP_CONV(datarep_read, read, int, MPI_Datarep_conversion_function)
DATAREP_CONV(datarep_write, write, int, MPI_Datarep_conversion_function)
DATAREP_CONV(datarep_read_c, read, MPI_Count, MPI_Datarep_conversion_function_c)
DATAREP_CONV(datarep_write_c, write, MPI_Count, MPI_Datarep_conversion_function_c)

static int register_datarep(const char *datarep, void *read, void *write,
                            MPI_Datarep_extent_function *extent, void *extra, int large)
{
    int rc;
    struct oxa_datarep *r = malloc(sizeof *r);
    if (!r)
        return MPI_ERR_NO_MEM;
    r->read = read;
    r->write = write;
    r->extent = extent;
    r->extra = extra;
    /* NULL stays NULL (MPI_CONVERSION_FN_NULL; a NULL extent function is the library's
     * MPI_ERR_ARG). */
    if (large)
        rc = OXI_PMPI_Register_datarep_c(datarep, read ? (void *)datarep_read_c : NULL,
                                         write ? (void *)datarep_write_c : NULL,
                                         extent ? (void *)datarep_extent : NULL, r);
    else
        rc = OXI_PMPI_Register_datarep(datarep, read ? (void *)datarep_read : NULL,
                                       write ? (void *)datarep_write : NULL,
                                       extent ? (void *)datarep_extent : NULL, r);
    if (rc != 0)
        free(r);
    return oxa_err_i2a(rc);
}

int PMPI_Register_datarep(const char *datarep, MPI_Datarep_conversion_function *read_conversion_fn,
                          MPI_Datarep_conversion_function *write_conversion_fn,
                          MPI_Datarep_extent_function *dtype_file_extent_fn, void *extra_state)
{
    return register_datarep(datarep, (void *)read_conversion_fn, (void *)write_conversion_fn,
                            dtype_file_extent_fn, extra_state, 0);
}
ALIAS(Register_datarep)

int PMPI_Register_datarep_c(const char *datarep,
                            MPI_Datarep_conversion_function_c *read_conversion_fn,
                            MPI_Datarep_conversion_function_c *write_conversion_fn,
                            MPI_Datarep_extent_function *dtype_file_extent_fn, void *extra_state)
{
    return register_datarep(datarep, (void *)read_conversion_fn, (void *)write_conversion_fn,
                            dtype_file_extent_fn, extra_state, 1);
}
ALIAS(Register_datarep_c)

/* ---------------------------------------------------------------- generalized requests */

struct oxa_greq {
    MPI_Grequest_query_function *query;
    MPI_Grequest_free_function *free_fn;
    MPI_Grequest_cancel_function *cancel;
    void *extra;
};

static int greq_query(void *extra, oxi_status *st)
{
    struct oxa_greq *g = extra;
    MPI_Status a;
    int rc;
    oxa_status_i2a(st, &a);
    rc = g->query(g->extra, &a);
    oxa_status_a2i(&a, st);
    return oxa_err_a2i(rc);
}

static int greq_free(void *extra)
{
    struct oxa_greq *g = extra;
    int rc = g->free_fn(g->extra);
    free(g);
    return oxa_err_a2i(rc);
}

static int greq_cancel(void *extra, int complete)
{
    struct oxa_greq *g = extra;
    return oxa_err_a2i(g->cancel(g->extra, complete));
}

int PMPI_Grequest_start(MPI_Grequest_query_function *query_fn,
                        MPI_Grequest_free_function *free_fn,
                        MPI_Grequest_cancel_function *cancel_fn, void *extra_state,
                        MPI_Request *request)
{
    int h = OXA_INVALID_HANDLE, rc;
    struct oxa_greq *g;
    if (!query_fn || !free_fn || !cancel_fn || !request)
        return oxa_err_i2a(OXI_PMPI_Grequest_start(NULL, NULL, NULL, extra_state, NULL));
    g = malloc(sizeof *g);
    if (!g)
        return MPI_ERR_NO_MEM;
    g->query = query_fn;
    g->free_fn = free_fn;
    g->cancel = cancel_fn;
    g->extra = extra_state;
    rc = OXI_PMPI_Grequest_start((void *)greq_query, (void *)greq_free, (void *)greq_cancel,
                                 g, &h);
    if (rc == 0)
        *request = (MPI_Request)oxa_i2h_request(h);
    else
        free(g);
    return oxa_err_i2a(rc);
}
ALIAS(Grequest_start)

/* ---------------------------------------------------------------- tools interface events
 *
 * The library calls event callbacks with MPICH's safety levels (0-3) and the info
 * datatypes are MPICH handles: each registration keeps, per safety level, the user's
 * callback and user data; the library gets a trampoline and a pointer to that slot. */

struct oxa_tcb {
    MPI_T_event_cb_function *fn;
    void *user;
};
struct oxa_treg {
    void *reg;
    struct oxa_tcb cb[4];
    MPI_T_event_dropped_cb_function *dropped;
    struct oxa_treg *next;
};
static struct oxa_treg *tregs;
static pthread_mutex_t treg_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot of registration `reg` (made if `make`), under treg_lock. */
static struct oxa_treg *treg_find(void *reg, int make)
{
    struct oxa_treg *r;
    for (r = tregs; r; r = r->next)
        if (r->reg == reg)
            return r;
    if (!make || !(r = calloc(1, sizeof *r)))
        return NULL;
    r->reg = reg;
    r->next = tregs;
    tregs = r;
    return r;
}

static void treg_remove(void *reg)
{
    struct oxa_treg **p;
    pthread_mutex_lock(&treg_lock);
    for (p = &tregs; *p; p = &(*p)->next)
        if ((*p)->reg == reg) {
            struct oxa_treg *r = *p;
            *p = r->next;
            free(r);
            break;
        }
    pthread_mutex_unlock(&treg_lock);
}

static void t_event_tramp(void *inst, void *reg, int safety, void *slot)
{
    struct oxa_tcb *c = slot;
    c->fn((MPI_T_event_instance)inst, (MPI_T_event_registration)reg,
          (MPI_T_cb_safety)oxa_cbsafety_i2a(safety), c->user);
}

static void t_dropped_tramp(MPI_Count count, void *reg, int source, int safety, void *slot)
{
    struct oxa_treg *r;
    MPI_T_event_dropped_cb_function *fn = NULL;
    pthread_mutex_lock(&treg_lock);
    if ((r = treg_find(reg, 0)))
        fn = r->dropped;
    pthread_mutex_unlock(&treg_lock);
    if (fn)
        fn(count, (MPI_T_event_registration)reg, source,
           (MPI_T_cb_safety)oxa_cbsafety_i2a(safety), ((struct oxa_tcb *)slot)->user);
}

int PMPI_T_event_register_callback(MPI_T_event_registration event_registration,
                                   MPI_T_cb_safety cb_safety, MPI_Info info, void *user_data,
                                   MPI_T_event_cb_function *event_cb_function)
{
    int level = oxa_cbsafety_a2i(cb_safety), rc;
    struct oxa_treg *r;
    if (level < 0 || level > 3)
        return oxa_err_i2a(OXI_PMPI_T_event_register_callback(
            (void *)event_registration, level, oxa_h2i((uintptr_t)info), user_data, NULL));
    pthread_mutex_lock(&treg_lock);
    r = treg_find((void *)event_registration, 1);
    if (r) {
        r->cb[level].fn = event_cb_function;
        r->cb[level].user = user_data;
    }
    pthread_mutex_unlock(&treg_lock);
    if (!r)
        return oxa_nomem();
    rc = OXI_PMPI_T_event_register_callback((void *)event_registration, level,
                                            oxa_h2i((uintptr_t)info), &r->cb[level],
                                            event_cb_function ? (void *)t_event_tramp : NULL);
    return oxa_err_i2a(rc);
}
ALIAS(T_event_register_callback)

int PMPI_T_event_set_dropped_handler(MPI_T_event_registration event_registration,
                                     MPI_T_event_dropped_cb_function *dropped_cb_function)
{
    struct oxa_treg *r;
    int rc = OXI_PMPI_T_event_set_dropped_handler(
        (void *)event_registration, dropped_cb_function ? (void *)t_dropped_tramp : NULL);
    if (rc != 0)
        return oxa_err_i2a(rc);
    pthread_mutex_lock(&treg_lock);
    r = treg_find((void *)event_registration, 1);
    if (r)
        r->dropped = dropped_cb_function;
    pthread_mutex_unlock(&treg_lock);
    return r ? MPI_SUCCESS : oxa_nomem();
}
ALIAS(T_event_set_dropped_handler)

/* The free callback runs before the library's handle_free returns: its slot lives on the
 * stack. */
struct oxa_tfree {
    MPI_T_event_free_cb_function *fn;
    void *user;
};

static void t_free_tramp(void *reg, int safety, void *slot)
{
    struct oxa_tfree *f = slot;
    f->fn((MPI_T_event_registration)reg, (MPI_T_cb_safety)oxa_cbsafety_i2a(safety), f->user);
}

int PMPI_T_event_handle_free(MPI_T_event_registration event_registration, void *user_data,
                             MPI_T_event_free_cb_function *free_cb_function)
{
    struct oxa_tfree f = {free_cb_function, user_data};
    int rc = OXI_PMPI_T_event_handle_free((void *)event_registration, &f,
                                          free_cb_function ? (void *)t_free_tramp : NULL);
    if (rc == 0)
        treg_remove((void *)event_registration);
    return oxa_err_i2a(rc);
}
ALIAS(T_event_handle_free)

int PMPI_T_event_get_info(int event_index, char *name, int *name_len, int *verbosity,
                          MPI_Datatype array_of_datatypes[], MPI_Aint array_of_displacements[],
                          int *num_elements, MPI_T_enum *enumtype, MPI_Info *info, char *desc,
                          int *desc_len, int *bind)
{
    int n = array_of_datatypes && num_elements && *num_elements > 0 ? *num_elements : 0;
    int s_dt[OXA_STACK], *t_dt = oxa_ints(s_dt, n), t_verb = 0, t_info = 0, t_bind = 0, rc;
    if (n > 0 && !t_dt)
        return oxa_nomem();
    rc = OXI_PMPI_T_event_get_info(event_index, name, name_len, verbosity ? &t_verb : NULL,
                                   array_of_datatypes ? t_dt : NULL, array_of_displacements,
                                   num_elements, (void **)enumtype, info ? &t_info : NULL, desc,
                                   desc_len, bind ? &t_bind : NULL);
    if (rc == 0) {
        int got = num_elements && *num_elements < n ? *num_elements : n;
        for (int i = 0; i < got; i++)
            array_of_datatypes[i] = (MPI_Datatype)oxa_i2h_datatype(t_dt[i]);
        if (verbosity)
            *verbosity = oxa_verbosity_i2a(t_verb);
        if (info)
            *info = (MPI_Info)oxa_i2h_info(t_info);
        if (bind)
            *bind = oxa_bind_i2a(t_bind);
    }
    if (t_dt != s_dt)
        free(t_dt);
    return oxa_err_i2a(rc);
}
ALIAS(T_event_get_info)

/* A performance variable bound to a communicator reads the MPI_Comm obj_handle points to:
 * the library gets a pointer to its MPICH handle. */
int PMPI_T_pvar_handle_alloc(MPI_T_pvar_session pe_session, int pvar_index, void *obj_handle,
                             MPI_T_pvar_handle *handle, int *count)
{
    int bind = 0, t_comm = OXA_INVALID_HANDLE;
    void *obj = obj_handle;
    if (OXI_PMPI_T_pvar_get_info(pvar_index, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                 &bind, NULL, NULL, NULL) == 0 &&
        oxa_bind_i2a(bind) == MPI_T_BIND_MPI_COMM && obj_handle) {
        t_comm = oxa_h2i((uintptr_t) * (MPI_Comm *)obj_handle);
        obj = &t_comm;
    }
    return oxa_err_i2a(
        OXI_PMPI_T_pvar_handle_alloc((void *)pe_session, pvar_index, obj, (void **)handle, count));
}
ALIAS(T_pvar_handle_alloc)
