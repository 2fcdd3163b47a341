/* Hand-written half of oxmpi's Fortran bindings (libmpifort.so.12): the sentinel common
 * blocks, string conversion, and the functions whose Fortran form differs from the C one
 * (start-up, attributes, callbacks written in Fortran). Each hand-written MPI function has
 * a `FORT_HAND(MPI_X, ...)` line, which tells tools/gen_fort.py not to generate it. */
#include "fort_rt.h"

#include <ISO_Fortran_binding.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FORT_HAND(...)

/* Aligned as gfortran aligns common blocks, so the definitions agree with the modules'. */
struct oxf_priv1 mpipriv1_ __attribute__((aligned(32)));
struct oxf_priv2 mpipriv2_ __attribute__((aligned(32)));
struct oxf_privc mpiprivc_ __attribute__((aligned(32)));
MPI_Fint mpifcmb5_ __attribute__((aligned(32)));
MPI_Fint mpifcmb9_ __attribute__((aligned(32)));

char *oxf_str_in(const char *s, size_t len, int trim_leading)
{
    size_t start = 0;
    while (len > 0 && s[len - 1] == ' ')
        len--;
    if (trim_leading)
        while (start < len && s[start] == ' ')
            start++;
    char *c = malloc(len - start + 1);
    if (c) {
        memcpy(c, s + start, len - start);
        c[len - start] = '\0';
    }
    return c;
}

char *oxf_str_buf(size_t len)
{
    /* The C library writes at most MPI_MAX_LIBRARY_VERSION_STRING characters (the
     * largest MPI_MAX_*), or as many as the caller says it has room for. */
    size_t n = (len > MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING) + 1;
    return calloc(n, 1);
}

void oxf_str_out(char *f, size_t len, char *c, int rc)
{
    if (c && rc == MPI_SUCCESS) {
        size_t n = strlen(c);
        if (n > len)
            n = len;
        memcpy(f, c, n);
        memset(f + n, ' ', len - n);
    }
    free(c);
}

void *oxf_handles(int n, size_t size)
{
    return malloc((n > 0 ? (size_t)n : 1) * size);
}

void oxf_unsupported(const char *name, MPI_Fint *ierr)
{
    (void)name;
    int rc = MPI_ERR_UNSUPPORTED_OPERATION;
    MPI_Comm_call_errhandler(MPI_COMM_WORLD, rc);
    if (ierr)
        *ierr = rc;
}

/* An mpi_f08 procedure (`name`, a Fortran string) given a non-contiguous array section
 * as its buffer, which only programs built against another MPI's `mpi_f08` module pass
 * (ours declares the buffers CONTIGUOUS): MPI_ERR_BUFFER through MPI_COMM_WORLD's error
 * handler, with a one-line explanation. */
void oxf08_noncontig_(const char *name, MPI_Fint *ierr, size_t name_len);
void oxf08_noncontig_(const char *name, MPI_Fint *ierr, size_t name_len)
{
    fprintf(stderr,
            "oxmpi: %.*s: the buffer is a non-contiguous array section, which oxmpi's "
            "mpi_f08 does not take (MPI_SUBARRAYS_SUPPORTED is .FALSE.): pass a "
            "contiguous array\n",
            (int)name_len, name);
    int rc = MPI_ERR_BUFFER;
    MPI_Comm_call_errhandler(MPI_COMM_WORLD, rc);
    if (ierr)
        *ierr = rc;
}

/* Whether the array `d` describes is contiguous: IS_CONTIGUOUS for the mpi_f08 procedures'
 * buffers, from the C descriptor (gfortran calls libgfortran for the intrinsic on an
 * assumed-rank array, and libmpifort.so.12 needs no libgfortran). */
int oxf08_contig(const CFI_cdesc_t *d);
int oxf08_contig(const CFI_cdesc_t *d)
{
    CFI_index_t want = (CFI_index_t)d->elem_len;
    for (int i = 0; i < d->rank; i++) {
        CFI_index_t n = d->dim[i].extent;
        if (n == 0)
            return 1;
        if (n != 1 && d->dim[i].sm != want)
            return 0;
        if (n < 0) /* the last dimension of an assumed-size array */
            return 1;
        want *= n;
    }
    return 1;
}

/* Every name of a hand-written `pmpi_x_`: ALIASES(mpi_x, X) (`X` is the upper-case name
 * without `MPI_`, so that names C defines as macros are not expanded). */
#define ALIASES(low, up)                                                              \
    _Pragma(ALIAS_STR(weak p##low = p##low##_))                                       \
    _Pragma(ALIAS_STR(weak p##low##__ = p##low##_))                                   \
    _Pragma(ALIAS_STR(weak PMPI_##up = p##low##_))                                        \
    _Pragma(ALIAS_STR(weak low = p##low##_))                                          \
    _Pragma(ALIAS_STR(weak low##_ = p##low##_))                                       \
    _Pragma(ALIAS_STR(weak low##__ = p##low##_))                                      \
    _Pragma(ALIAS_STR(weak MPI_##up = p##low##_))
#define ALIAS_STR(x) #x

/* ------------------------------------------------------------------ start-up */

FORT_HAND(MPI_Init)
void pmpi_init_(MPI_Fint *ierr);
void pmpi_init_(MPI_Fint *ierr)
{
    int rc = MPI_Init(NULL, NULL);
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_init, INIT)

FORT_HAND(MPI_Init_thread)
void pmpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr);
void pmpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    int rc = MPI_Init_thread(NULL, NULL, *required, provided);
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_init_thread, INIT_THREAD)

FORT_HAND(MPI_Pcontrol)
void pmpi_pcontrol_(MPI_Fint *level, MPI_Fint *ierr);
void pmpi_pcontrol_(MPI_Fint *level, MPI_Fint *ierr)
{
    int rc = MPI_Pcontrol(*level);
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_pcontrol, PCONTROL)

/* MPI_F_SYNC_REG: the call itself is the barrier to the compiler's register caching. */
void pmpi_f_sync_reg_(void *buf);
void pmpi_f_sync_reg_(void *buf)
{
    __asm__ __volatile__("" : : "r"(buf) : "memory");
}
ALIASES(mpi_f_sync_reg, F_SYNC_REG)

/* ------------------------------------------------------------------ attributes */

/* A Fortran copy callback: (oldobj, keyval, extra_state, attr_in, attr_out, flag, ierr). */
typedef void (*oxf_copy_fn)(MPI_Fint *, MPI_Fint *, MPI_Aint *, MPI_Aint *, MPI_Aint *,
                            MPI_Fint *, MPI_Fint *);
/* A Fortran delete callback: (obj, keyval, attr, extra_state, ierr). */
typedef void (*oxf_delete_fn)(MPI_Fint *, MPI_Fint *, MPI_Aint *, MPI_Aint *, MPI_Fint *);

/* What a keyval created from Fortran carries as its C extra_state. Kept for the life of
 * the process (keyvals are few; the C layer may still call the callbacks of a freed key
 * while objects hold its attributes). */
struct oxf_keyval {
    oxf_copy_fn copy;
    oxf_delete_fn del;
    MPI_Aint extra;
};

static int oxf_copy_call(MPI_Fint fold, int keyval, void *extra, void *in, void *out,
                         int *flag)
{
    struct oxf_keyval *k = extra;
    MPI_Fint fkey = keyval, fflag = 0, ierr = MPI_SUCCESS;
    MPI_Aint fin = (MPI_Aint)(intptr_t)in, fout = 0;
    k->copy(&fold, &fkey, &k->extra, &fin, &fout, &fflag, &ierr);
    *flag = fflag != 0;
    *(void **)out = (void *)(intptr_t)fout;
    return ierr;
}

static int oxf_delete_call(MPI_Fint fobj, int keyval, void *val, void *extra)
{
    struct oxf_keyval *k = extra;
    MPI_Fint fkey = keyval, ierr = MPI_SUCCESS;
    MPI_Aint fval = (MPI_Aint)(intptr_t)val;
    k->del(&fobj, &fkey, &fval, &k->extra, &ierr);
    return ierr;
}

static struct oxf_keyval *oxf_keyval_new(void *copy, void *del, MPI_Aint *extra)
{
    struct oxf_keyval *k = malloc(sizeof *k);
    if (k) {
        k->copy = (oxf_copy_fn)copy;
        k->del = (oxf_delete_fn)del;
        k->extra = *extra;
    }
    return k;
}

/* Keyval creation for one object kind `Name` (C handle type `T`), with its trampolines. */
#define KEYVAL_CREATE(low, up, Name, T)                                               \
    static int oxf_copy_##Name(T old, int keyval, void *extra, void *in, void *out,   \
                               int *flag)                                             \
    {                                                                                 \
        return oxf_copy_call(OXF_F(Name, old), keyval, extra, in, out, flag);         \
    }                                                                                 \
    static int oxf_delete_##Name(T obj, int keyval, void *val, void *extra)           \
    {                                                                                 \
        return oxf_delete_call(OXF_F(Name, obj), keyval, val, extra);                 \
    }                                                                                 \
    void p##low##_(void *copy, void *del, MPI_Fint *keyval, MPI_Aint *extra,          \
                   MPI_Fint *ierr);                                                   \
    void p##low##_(void *copy, void *del, MPI_Fint *keyval, MPI_Aint *extra,          \
                   MPI_Fint *ierr)                                                    \
    {                                                                                 \
        struct oxf_keyval *k = oxf_keyval_new(copy, del, extra);                      \
        int rc = k ? MPI_##Name##_create_keyval(oxf_copy_##Name, oxf_delete_##Name,   \
                                                keyval, k)                            \
                   : MPI_ERR_NO_MEM;                                                  \
        if (rc != MPI_SUCCESS)                                                        \
            free(k);                                                                  \
        if (ierr)                                                                     \
            *ierr = rc;                                                               \
    }                                                                                 \
    ALIASES(low, up)


/* Fortran attribute values are INTEGER(KIND=MPI_ADDRESS_KIND) values, stored as the C
 * attribute pointer itself. */
#define SET_ATTR(low, up, Name)                                                       \
    void p##low##_(MPI_Fint *obj, MPI_Fint *keyval, MPI_Aint *val, MPI_Fint *ierr);   \
    void p##low##_(MPI_Fint *obj, MPI_Fint *keyval, MPI_Aint *val, MPI_Fint *ierr)    \
    {                                                                                 \
        int rc = MPI_##Name##_set_attr(OXF_H(Name, *obj), *keyval,                    \
                                       (void *)(intptr_t)*val);                       \
        if (ierr)                                                                     \
            *ierr = rc;                                                               \
    }                                                                                 \
    ALIASES(low, up)


/* The C key of a predefined key's Fortran value, or -1. */
static int oxf_predefined_key(int key)
{
    static const int keys[] = {MPI_TAG_UB,       MPI_HOST,          MPI_IO,
                               MPI_WTIME_IS_GLOBAL, MPI_APPNUM,     MPI_LASTUSEDCODE,
                               MPI_UNIVERSE_SIZE, MPI_WIN_BASE,     MPI_WIN_DISP_UNIT,
                               MPI_WIN_SIZE,     MPI_WIN_CREATE_FLAVOR, MPI_WIN_MODEL};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (key == keys[i] + OXF_KEYVAL_OFFSET)
            return keys[i];
    return -1;
}

/* A predefined attribute's C value (a pointer to the value, except MPI_WIN_BASE) as the
 * Fortran value. */
static MPI_Aint oxf_predefined_value(int ckey, void *p)
{
    if (ckey == MPI_WIN_BASE)
        return (MPI_Aint)(intptr_t)p;
    if (ckey == MPI_WIN_SIZE)
        return *(MPI_Aint *)p;
    return *(int *)p;
}

#define GET_ATTR(low, up, Name)                                                       \
    void p##low##_(MPI_Fint *obj, MPI_Fint *keyval, MPI_Aint *val, MPI_Fint *flag,    \
                   MPI_Fint *ierr);                                                   \
    void p##low##_(MPI_Fint *obj, MPI_Fint *keyval, MPI_Aint *val, MPI_Fint *flag,    \
                   MPI_Fint *ierr)                                                    \
    {                                                                                 \
        int ckey = oxf_predefined_key(*keyval);                                       \
        void *p = NULL;                                                               \
        int f = 0;                                                                    \
        int rc = MPI_##Name##_get_attr(OXF_H(Name, *obj), ckey >= 0 ? ckey : *keyval, \
                                       &p, &f);                                       \
        if (rc == MPI_SUCCESS) {                                                      \
            *flag = f != 0;                                                           \
            if (f)                                                                    \
                *val = ckey >= 0 ? oxf_predefined_value(ckey, p) : (MPI_Aint)(intptr_t)p; \
        }                                                                             \
        if (ierr)                                                                     \
            *ierr = rc;                                                               \
    }                                                                                 \
    ALIASES(low, up)


/* The predefined Fortran copy and delete callbacks (Fortran calling convention), with
 * attribute values of type `T` (MPI_Aint; MPI_Fint for the MPI-1 forms). A copy callback
 * with `dup` copies the value, else it drops the attribute. */
#define COPY_FN(low, up, T, dup)                                                      \
    void p##low##_(MPI_Fint *o, MPI_Fint *k, T *x, T *in, T *out, MPI_Fint *flag,     \
                   MPI_Fint *ierr);                                                   \
    void p##low##_(MPI_Fint *o, MPI_Fint *k, T *x, T *in, T *out, MPI_Fint *flag,     \
                   MPI_Fint *ierr)                                                    \
    {                                                                                 \
        (void)o, (void)k, (void)x;                                                    \
        if (dup)                                                                      \
            *out = *in;                                                               \
        *flag = dup;                                                                  \
        *ierr = MPI_SUCCESS;                                                          \
    }                                                                                 \
    ALIASES(low, up)
#define NULL_DELETE(low, up, T)                                                       \
    void p##low##_(MPI_Fint *o, MPI_Fint *k, T *v, T *x, MPI_Fint *ierr);             \
    void p##low##_(MPI_Fint *o, MPI_Fint *k, T *v, T *x, MPI_Fint *ierr)              \
    {                                                                                 \
        (void)o, (void)k, (void)v, (void)x;                                           \
        *ierr = MPI_SUCCESS;                                                          \
    }                                                                                 \
    ALIASES(low, up)

/* The MPI-1 forms (INTEGER attribute values). */
COPY_FN(mpi_null_copy_fn, NULL_COPY_FN, MPI_Fint, 0)
COPY_FN(mpi_dup_fn, DUP_FN, MPI_Fint, 1)
NULL_DELETE(mpi_null_delete_fn, NULL_DELETE_FN, MPI_Fint)

/* Keyvals, attributes and the predefined callbacks of one object kind (`low`/`UP`: the
 * lower- and upper-case name stems, `mpi_comm`/`COMM`). */
#define ATTR_KIND(Name, T, low, UP)                                                   \
    KEYVAL_CREATE(low##_create_keyval, UP##_CREATE_KEYVAL, Name, T)                   \
    SET_ATTR(low##_set_attr, UP##_SET_ATTR, Name)                                     \
    GET_ATTR(low##_get_attr, UP##_GET_ATTR, Name)                                     \
    COPY_FN(low##_null_copy_fn, UP##_NULL_COPY_FN, MPI_Aint, 0)                       \
    COPY_FN(low##_dup_fn, UP##_DUP_FN, MPI_Aint, 1)                                   \
    NULL_DELETE(low##_null_delete_fn, UP##_NULL_DELETE_FN, MPI_Aint)

FORT_HAND(MPI_Comm_create_keyval, MPI_Comm_set_attr, MPI_Comm_get_attr)
ATTR_KIND(Comm, MPI_Comm, mpi_comm, COMM)
FORT_HAND(MPI_Type_create_keyval, MPI_Type_set_attr, MPI_Type_get_attr)
ATTR_KIND(Type, MPI_Datatype, mpi_type, TYPE)
FORT_HAND(MPI_Win_create_keyval, MPI_Win_set_attr, MPI_Win_get_attr)
ATTR_KIND(Win, MPI_Win, mpi_win, WIN)


/* ------------------------------------------------------------------ user callbacks */

/* C callbacks without state (user operations, error handlers) whose C arguments need
 * converting call the Fortran procedure through one of a fixed set of trampolines, each
 * with its slot holding the Fortran procedure. */
#define OXF_SLOTS 16
#define REPEAT16(M)                                                                   \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)

/* The slot of `fn` in `slots` (an existing one, or a free one taken), or -1. */
static int oxf_slot(void **slots, void *fn)
{
    for (int i = 0; i < OXF_SLOTS; i++) {
        void *expected = NULL;
        if (__atomic_compare_exchange_n(&slots[i], &expected, fn, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST) ||
            expected == fn)
            return i;
    }
    return -1;
}

/* Ends a callback registration that found no free trampoline. */
static int oxf_no_slot(MPI_Fint *ierr)
{
    int rc = MPI_ERR_INTERN;
    MPI_Comm_call_errhandler(MPI_COMM_WORLD, rc);
    if (ierr)
        *ierr = rc;
    return rc;
}

typedef void (*oxf_user_fn)(void *, void *, MPI_Fint *, MPI_Fint *);
typedef void (*oxf_eh_fn)(MPI_Fint *, MPI_Fint *);

#ifdef OXF_ABI
/* User operations: the C datatype argument is a pointer handle. */
static void *oxf_op_slots[OXF_SLOTS];
#define OP_TRAMP(n)                                                                   \
    static void oxf_op_##n(void *in, void *inout, int *len, MPI_Datatype *dt)         \
    {                                                                                 \
        MPI_Fint f = OXF_F(Type, *dt), l = *len;                                      \
        ((oxf_user_fn)oxf_op_slots[n])(in, inout, &l, &f);                            \
    }
REPEAT16(OP_TRAMP)
static MPI_User_function *const oxf_op_tramps[OXF_SLOTS] = {
    oxf_op_0,  oxf_op_1,  oxf_op_2,  oxf_op_3,  oxf_op_4,  oxf_op_5,  oxf_op_6,  oxf_op_7,
    oxf_op_8,  oxf_op_9,  oxf_op_10, oxf_op_11, oxf_op_12, oxf_op_13, oxf_op_14, oxf_op_15};
#endif

/* A Fortran user operation (invec, inoutvec, len, datatype), all by reference; over the
 * MPICH ABI it has the C MPI_User_function's shape (datatypes are `int`). */
FORT_HAND(MPI_Op_create)
void pmpi_op_create_(void *fn, MPI_Fint *commute, MPI_Fint *op, MPI_Fint *ierr);
void pmpi_op_create_(void *fn, MPI_Fint *commute, MPI_Fint *op, MPI_Fint *ierr)
{
#ifdef OXF_ABI
    int slot = oxf_slot(oxf_op_slots, fn);
    if (slot < 0) {
        oxf_no_slot(ierr);
        return;
    }
    MPI_Op c = MPI_OP_NULL;
    int rc = MPI_Op_create(oxf_op_tramps[slot], *commute != 0, &c);
    if (rc == MPI_SUCCESS)
        *op = OXF_F(Op, c);
#else
    int rc = MPI_Op_create((MPI_User_function *)fn, *commute != 0, op);
#endif
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_op_create, OP_CREATE)

/* Error handlers of one object kind `Name` (C handle type `T`): the Fortran handler gets
 * the Fortran handle. */
#define EH_KIND(Name, T, low, up)                                                     \
    static void *oxf_eh_slots_##Name[OXF_SLOTS];                                      \
    static void oxf_eh_call_##Name(int n, T *h, int *code)                            \
    {                                                                                 \
        MPI_Fint f = OXF_F(Name, *h), c = *code;                                      \
        ((oxf_eh_fn)oxf_eh_slots_##Name[n])(&f, &c);                                  \
    }                                                                                 \
    REPEAT16(EH_TRAMP_##Name)                                                         \
    static MPI_##Name##_errhandler_function *const oxf_eh_tramps_##Name[OXF_SLOTS] = { \
        REPEAT16(EH_ADDR_##Name)};                                                    \
    void p##low##_(void *fn, MPI_Fint *eh, MPI_Fint *ierr);                           \
    void p##low##_(void *fn, MPI_Fint *eh, MPI_Fint *ierr)                            \
    {                                                                                 \
        int slot = oxf_slot(oxf_eh_slots_##Name, fn);                                 \
        if (slot < 0) {                                                               \
            oxf_no_slot(ierr);                                                        \
            return;                                                                   \
        }                                                                             \
        MPI_Errhandler c = MPI_ERRHANDLER_NULL;                                       \
        int rc = MPI_##Name##_create_errhandler(oxf_eh_tramps_##Name[slot], &c);      \
        if (rc == MPI_SUCCESS)                                                        \
            *eh = OXF_F(Errhandler, c);                                               \
        if (ierr)                                                                     \
            *ierr = rc;                                                               \
    }                                                                                 \
    ALIASES(low, up)
#define EH_TRAMP(Name, T, n)                                                          \
    static void oxf_eh_##Name##_##n(T *h, int *code, ...) { oxf_eh_call_##Name(n, h, code); }
#define EH_TRAMP_Comm(n) EH_TRAMP(Comm, MPI_Comm, n)
#define EH_TRAMP_Win(n) EH_TRAMP(Win, MPI_Win, n)
#define EH_TRAMP_File(n) EH_TRAMP(File, MPI_File, n)
#define EH_ADDR_Comm(n) oxf_eh_Comm_##n,
#define EH_ADDR_Win(n) oxf_eh_Win_##n,
#define EH_ADDR_File(n) oxf_eh_File_##n,

FORT_HAND(MPI_Comm_create_errhandler)
FORT_HAND(MPI_Win_create_errhandler)
FORT_HAND(MPI_File_create_errhandler)
EH_KIND(Comm, MPI_Comm, mpi_comm_create_errhandler, COMM_CREATE_ERRHANDLER)
EH_KIND(Win, MPI_Win, mpi_win_create_errhandler, WIN_CREATE_ERRHANDLER)
EH_KIND(File, MPI_File, mpi_file_create_errhandler, FILE_CREATE_ERRHANDLER)

/* Generalized requests: the Fortran callbacks and extra_state travel in the C extra_state.
 * The Fortran status is the C status in both ABIs. */
typedef void (*oxf_query_fn)(MPI_Aint *, MPI_Fint *, MPI_Fint *);
typedef void (*oxf_free_fn)(MPI_Aint *, MPI_Fint *);
typedef void (*oxf_cancel_fn)(MPI_Aint *, MPI_Fint *, MPI_Fint *);
struct oxf_greq {
    oxf_query_fn query;
    oxf_free_fn free;
    oxf_cancel_fn cancel;
    MPI_Aint extra;
};

static int oxf_greq_query(void *extra, MPI_Status *status)
{
    struct oxf_greq *g = extra;
    MPI_Fint ierr = MPI_SUCCESS;
    g->query(&g->extra, (MPI_Fint *)status, &ierr);
    return ierr;
}

static int oxf_greq_free(void *extra)
{
    struct oxf_greq *g = extra;
    MPI_Fint ierr = MPI_SUCCESS;
    g->free(&g->extra, &ierr);
    free(g);
    return ierr;
}

static int oxf_greq_cancel(void *extra, int complete)
{
    struct oxf_greq *g = extra;
    MPI_Fint ierr = MPI_SUCCESS, c = complete != 0;
    g->cancel(&g->extra, &c, &ierr);
    return ierr;
}

FORT_HAND(MPI_Grequest_start)
void pmpi_grequest_start_(void *query, void *freefn, void *cancel, MPI_Aint *extra,
                          MPI_Fint *request, MPI_Fint *ierr);
void pmpi_grequest_start_(void *query, void *freefn, void *cancel, MPI_Aint *extra,
                          MPI_Fint *request, MPI_Fint *ierr)
{
    struct oxf_greq *g = malloc(sizeof *g);
    int rc = MPI_ERR_NO_MEM;
    if (g) {
        g->query = (oxf_query_fn)query;
        g->free = (oxf_free_fn)freefn;
        g->cancel = (oxf_cancel_fn)cancel;
        g->extra = *extra;
        MPI_Request c = MPI_REQUEST_NULL;
        rc = MPI_Grequest_start(oxf_greq_query, oxf_greq_free, oxf_greq_cancel, g, &c);
        if (rc == MPI_SUCCESS)
            *request = OXF_F(Request, c);
        else
            free(g);
    }
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_grequest_start, GREQUEST_START)

/* ------------------------------------------------------------------ Fortran-only and MPI-1 */

/* Functions that exist only in Fortran, or were deleted from the standard but are still
 * called by Fortran programs (MPICH's Fortran library has them), over current C ones. Their
 * INTEGER addresses and attribute values must fit in an INTEGER, else MPI_ERR_ARG. */

FORT_HAND(MPI_Address, MPI_Type_struct, MPI_Type_hindexed, MPI_Type_hvector)
FORT_HAND(MPI_Type_extent, MPI_Type_lb, MPI_Type_ub, MPI_Keyval_create, MPI_Keyval_free)
FORT_HAND(MPI_Attr_put, MPI_Attr_get, MPI_Attr_delete, MPI_Errhandler_create)
FORT_HAND(MPI_Errhandler_set, MPI_Errhandler_get, MPI_Type_create_f90_real)
FORT_HAND(MPI_Type_create_f90_complex, MPI_Type_create_f90_integer)

static int oxf_fint(MPI_Aint v, MPI_Fint *out)
{
    *out = (MPI_Fint)v;
    return (MPI_Aint)*out == v ? MPI_SUCCESS : MPI_ERR_ARG;
}

/* Ends a call whose error the C library did not report: through MPI_COMM_WORLD's handler. */
static void oxf_done(int rc, MPI_Fint *ierr)
{
    if (rc != MPI_SUCCESS && rc != MPI_ERR_NO_MEM)
        MPI_Comm_call_errhandler(MPI_COMM_WORLD, rc);
    if (ierr)
        *ierr = rc;
}

void pmpi_address_(void *location, MPI_Fint *address, MPI_Fint *ierr);
void pmpi_address_(void *location, MPI_Fint *address, MPI_Fint *ierr)
{
    MPI_Aint a = 0;
    int rc = MPI_Get_address(FBUF(location), &a);
    if (rc == MPI_SUCCESS)
        rc = oxf_fint(a, address);
    oxf_done(rc, ierr);
}
ALIASES(mpi_address, ADDRESS)

/* Old constructors with INTEGER byte displacements. */
static MPI_Aint *oxf_aints(int n, const MPI_Fint *v)
{
    MPI_Aint *a = malloc((n > 0 ? (size_t)n : 1) * sizeof *a);
    for (int i = 0; a && i < n; i++)
        a[i] = v[i];
    return a;
}

void pmpi_type_struct_(MPI_Fint *count, MPI_Fint *blocklens, MPI_Fint *displs,
                       MPI_Fint *types, MPI_Fint *newtype, MPI_Fint *ierr);
void pmpi_type_struct_(MPI_Fint *count, MPI_Fint *blocklens, MPI_Fint *displs,
                       MPI_Fint *types, MPI_Fint *newtype, MPI_Fint *ierr)
{
    int n = *count > 0 ? *count : 0;
    MPI_Aint *d = oxf_aints(n, displs);
    MPI_Datatype *t = oxf_handles(n, sizeof *t);
    MPI_Datatype c = MPI_DATATYPE_NULL;
    int rc = MPI_ERR_NO_MEM;
    if (d && t) {
        for (int i = 0; i < n; i++)
            t[i] = OXF_H(Type, types[i]);
        rc = MPI_Type_create_struct(*count, blocklens, d, t, &c);
        if (rc == MPI_SUCCESS)
            *newtype = OXF_F(Type, c);
    }
    free(d);
    free(t);
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_type_struct, TYPE_STRUCT)

void pmpi_type_hindexed_(MPI_Fint *count, MPI_Fint *blocklens, MPI_Fint *displs,
                         MPI_Fint *oldtype, MPI_Fint *newtype, MPI_Fint *ierr);
void pmpi_type_hindexed_(MPI_Fint *count, MPI_Fint *blocklens, MPI_Fint *displs,
                         MPI_Fint *oldtype, MPI_Fint *newtype, MPI_Fint *ierr)
{
    MPI_Aint *d = oxf_aints(*count > 0 ? *count : 0, displs);
    MPI_Datatype c = MPI_DATATYPE_NULL;
    int rc = d ? MPI_Type_create_hindexed(*count, blocklens, d, OXF_H(Type, *oldtype), &c)
               : MPI_ERR_NO_MEM;
    if (rc == MPI_SUCCESS)
        *newtype = OXF_F(Type, c);
    free(d);
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_type_hindexed, TYPE_HINDEXED)

void pmpi_type_hvector_(MPI_Fint *count, MPI_Fint *blocklen, MPI_Fint *stride,
                        MPI_Fint *oldtype, MPI_Fint *newtype, MPI_Fint *ierr);
void pmpi_type_hvector_(MPI_Fint *count, MPI_Fint *blocklen, MPI_Fint *stride,
                        MPI_Fint *oldtype, MPI_Fint *newtype, MPI_Fint *ierr)
{
    MPI_Datatype c = MPI_DATATYPE_NULL;
    int rc = MPI_Type_create_hvector(*count, *blocklen, *stride, OXF_H(Type, *oldtype), &c);
    if (rc == MPI_SUCCESS)
        *newtype = OXF_F(Type, c);
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_type_hvector, TYPE_HVECTOR)

/* MPI_TYPE_EXTENT, MPI_TYPE_LB, MPI_TYPE_UB: one INTEGER out of MPI_Type_get_extent. */
#define EXTENT_FN(low, up, expr)                                                      \
    void p##low##_(MPI_Fint *type, MPI_Fint *out, MPI_Fint *ierr);                    \
    void p##low##_(MPI_Fint *type, MPI_Fint *out, MPI_Fint *ierr)                     \
    {                                                                                 \
        MPI_Aint lb = 0, extent = 0;                                                  \
        int rc = MPI_Type_get_extent(OXF_H(Type, *type), &lb, &extent);               \
        if (rc == MPI_SUCCESS)                                                        \
            rc = oxf_fint(expr, out);                                                 \
        oxf_done(rc, ierr);                                                           \
    }                                                                                 \
    ALIASES(low, up)
EXTENT_FN(mpi_type_extent, TYPE_EXTENT, extent)
EXTENT_FN(mpi_type_lb, TYPE_LB, lb)
EXTENT_FN(mpi_type_ub, TYPE_UB, lb + extent)

/* MPI-1 attributes: INTEGER values and extra_state, communicators only. */
typedef void (*oxf_copy1_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                             MPI_Fint *, MPI_Fint *);
typedef void (*oxf_delete1_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);

static int oxf_copy1(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag)
{
    struct oxf_keyval *k = extra;
    MPI_Fint fold = OXF_F(Comm, old), fkey = keyval, fextra = (MPI_Fint)k->extra;
    MPI_Fint fin = (MPI_Fint)(intptr_t)in, fout = 0, fflag = 0, ierr = MPI_SUCCESS;
    ((oxf_copy1_fn)k->copy)(&fold, &fkey, &fextra, &fin, &fout, &fflag, &ierr);
    *flag = fflag != 0;
    *(void **)out = (void *)(intptr_t)fout;
    return ierr;
}

static int oxf_delete1(MPI_Comm comm, int keyval, void *val, void *extra)
{
    struct oxf_keyval *k = extra;
    MPI_Fint fcomm = OXF_F(Comm, comm), fkey = keyval, fextra = (MPI_Fint)k->extra;
    MPI_Fint fval = (MPI_Fint)(intptr_t)val, ierr = MPI_SUCCESS;
    ((oxf_delete1_fn)k->del)(&fcomm, &fkey, &fval, &fextra, &ierr);
    return ierr;
}

void pmpi_keyval_create_(void *copy, void *del, MPI_Fint *keyval, MPI_Fint *extra,
                         MPI_Fint *ierr);
void pmpi_keyval_create_(void *copy, void *del, MPI_Fint *keyval, MPI_Fint *extra,
                         MPI_Fint *ierr)
{
    MPI_Aint x = *extra;
    struct oxf_keyval *k = oxf_keyval_new(copy, del, &x);
    int rc = k ? MPI_Comm_create_keyval(oxf_copy1, oxf_delete1, keyval, k) : MPI_ERR_NO_MEM;
    if (rc != MPI_SUCCESS)
        free(k);
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_keyval_create, KEYVAL_CREATE)

void pmpi_keyval_free_(MPI_Fint *keyval, MPI_Fint *ierr);
void pmpi_keyval_free_(MPI_Fint *keyval, MPI_Fint *ierr)
{
    int k = *keyval;
    int rc = MPI_Comm_free_keyval(&k);
    *keyval = k;
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_keyval_free, KEYVAL_FREE)

void pmpi_attr_put_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *val, MPI_Fint *ierr);
void pmpi_attr_put_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *val, MPI_Fint *ierr)
{
    MPI_Aint v = *val;
    pmpi_comm_set_attr_(comm, keyval, &v, ierr);
}
ALIASES(mpi_attr_put, ATTR_PUT)

void pmpi_attr_get_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *val, MPI_Fint *flag,
                    MPI_Fint *ierr);
void pmpi_attr_get_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *val, MPI_Fint *flag,
                    MPI_Fint *ierr)
{
    MPI_Aint v = 0;
    MPI_Fint rc = MPI_SUCCESS;
    pmpi_comm_get_attr_(comm, keyval, &v, flag, &rc);
    if (rc == MPI_SUCCESS && *flag)
        *val = (MPI_Fint)v;
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_attr_get, ATTR_GET)

void pmpi_attr_delete_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *ierr);
void pmpi_attr_delete_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *ierr)
{
    int rc = MPI_Comm_delete_attr(OXF_H(Comm, *comm), *keyval);
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_attr_delete, ATTR_DELETE)

/* MPI-1 error handlers are communicator error handlers. */
void pmpi_errhandler_create_(void *fn, MPI_Fint *eh, MPI_Fint *ierr);
void pmpi_errhandler_create_(void *fn, MPI_Fint *eh, MPI_Fint *ierr)
{
    pmpi_comm_create_errhandler_(fn, eh, ierr);
}
ALIASES(mpi_errhandler_create, ERRHANDLER_CREATE)

void pmpi_errhandler_set_(MPI_Fint *comm, MPI_Fint *eh, MPI_Fint *ierr);
void pmpi_errhandler_set_(MPI_Fint *comm, MPI_Fint *eh, MPI_Fint *ierr)
{
    int rc = MPI_Comm_set_errhandler(OXF_H(Comm, *comm), OXF_H(Errhandler, *eh));
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_errhandler_set, ERRHANDLER_SET)

void pmpi_errhandler_get_(MPI_Fint *comm, MPI_Fint *eh, MPI_Fint *ierr);
void pmpi_errhandler_get_(MPI_Fint *comm, MPI_Fint *eh, MPI_Fint *ierr)
{
    MPI_Errhandler c = MPI_ERRHANDLER_NULL;
    int rc = MPI_Comm_get_errhandler(OXF_H(Comm, *comm), &c);
    if (rc == MPI_SUCCESS)
        *eh = OXF_F(Errhandler, c);
    if (ierr)
        *ierr = rc;
}
ALIASES(mpi_errhandler_get, ERRHANDLER_GET)

/* MPI_TYPE_CREATE_F90_*: the predefined sized type that has the requested precision and
 * range (MPI_UNDEFINED: any); MPI_ERR_ARG when no type has them. */
static int oxf_f90(MPI_Fint *newtype, MPI_Datatype c, MPI_Fint *ierr)
{
    int rc = c == MPI_DATATYPE_NULL ? MPI_ERR_ARG : MPI_SUCCESS;
    if (rc == MPI_SUCCESS)
        *newtype = OXF_F(Type, c);
    oxf_done(rc, ierr);
    return rc;
}

/* The real kinds: 4, 8 and 16 bytes (IEEE single, double, quadruple). */
static int oxf_real_kind(int p, int r)
{
    static const int prec[] = {6, 15, 33}, range[] = {37, 307, 4931};
    for (int i = 0; i < 3; i++)
        if ((p == MPI_UNDEFINED || p <= prec[i]) && (r == MPI_UNDEFINED || r <= range[i]))
            return i;
    return -1;
}

void pmpi_type_create_f90_real_(MPI_Fint *p, MPI_Fint *r, MPI_Fint *newtype, MPI_Fint *ierr);
void pmpi_type_create_f90_real_(MPI_Fint *p, MPI_Fint *r, MPI_Fint *newtype, MPI_Fint *ierr)
{
    static const MPI_Datatype t[] = {MPI_REAL4, MPI_REAL8, MPI_REAL16};
    int k = oxf_real_kind(*p, *r);
    oxf_f90(newtype, k < 0 ? MPI_DATATYPE_NULL : t[k], ierr);
}
ALIASES(mpi_type_create_f90_real, TYPE_CREATE_F90_REAL)

void pmpi_type_create_f90_complex_(MPI_Fint *p, MPI_Fint *r, MPI_Fint *newtype,
                                   MPI_Fint *ierr);
void pmpi_type_create_f90_complex_(MPI_Fint *p, MPI_Fint *r, MPI_Fint *newtype,
                                   MPI_Fint *ierr)
{
    static const MPI_Datatype t[] = {MPI_COMPLEX8, MPI_COMPLEX16, MPI_COMPLEX32};
    int k = oxf_real_kind(*p, *r);
    oxf_f90(newtype, k < 0 ? MPI_DATATYPE_NULL : t[k], ierr);
}
ALIASES(mpi_type_create_f90_complex, TYPE_CREATE_F90_COMPLEX)

void pmpi_type_create_f90_integer_(MPI_Fint *r, MPI_Fint *newtype, MPI_Fint *ierr);
void pmpi_type_create_f90_integer_(MPI_Fint *r, MPI_Fint *newtype, MPI_Fint *ierr)
{
    static const MPI_Datatype t[] = {MPI_INTEGER1, MPI_INTEGER2, MPI_INTEGER4, MPI_INTEGER8,
                                     MPI_INTEGER16};
    static const int range[] = {2, 4, 9, 18, 38};
    MPI_Datatype c = MPI_DATATYPE_NULL;
    for (int i = 0; i < 5 && c == MPI_DATATYPE_NULL; i++)
        if (*r == MPI_UNDEFINED || *r <= range[i])
            c = t[i];
    oxf_f90(newtype, c, ierr);
}
ALIASES(mpi_type_create_f90_integer, TYPE_CREATE_F90_INTEGER)

/* MPI_CONVERSION_FN_NULL: the predefined no-op data conversion function. */
void pmpi_conversion_fn_null_(void *userbuf, MPI_Fint *datatype, MPI_Fint *count,
                              void *filebuf, MPI_Offset *position, MPI_Aint *extra,
                              MPI_Fint *ierr);
void pmpi_conversion_fn_null_(void *userbuf, MPI_Fint *datatype, MPI_Fint *count,
                              void *filebuf, MPI_Offset *position, MPI_Aint *extra,
                              MPI_Fint *ierr)
{
    (void)userbuf, (void)datatype, (void)count, (void)filebuf, (void)position, (void)extra;
    *ierr = MPI_SUCCESS;
}
ALIASES(mpi_conversion_fn_null, CONVERSION_FN_NULL)

#ifndef OXF_ABI
/* The predefined callbacks as programs built against MPICH's `mpi_f08` name them (module
 * procedures of its `mpi_f08_callbacks`, with the same arguments as ours). */
#define F08_CALLBACK(name, impl) _Pragma(ALIAS_STR(weak __mpi_f08_callbacks_MOD_##name = impl))
F08_CALLBACK(mpi_comm_dup_fn, pmpi_comm_dup_fn_)
F08_CALLBACK(mpi_comm_null_copy_fn, pmpi_comm_null_copy_fn_)
F08_CALLBACK(mpi_comm_null_delete_fn, pmpi_comm_null_delete_fn_)
F08_CALLBACK(mpi_type_dup_fn, pmpi_type_dup_fn_)
F08_CALLBACK(mpi_type_null_copy_fn, pmpi_type_null_copy_fn_)
F08_CALLBACK(mpi_type_null_delete_fn, pmpi_type_null_delete_fn_)
F08_CALLBACK(mpi_win_dup_fn, pmpi_win_dup_fn_)
F08_CALLBACK(mpi_win_null_copy_fn, pmpi_win_null_copy_fn_)
F08_CALLBACK(mpi_win_null_delete_fn, pmpi_win_null_delete_fn_)
F08_CALLBACK(mpi_conversion_fn_null, pmpi_conversion_fn_null_)
F08_CALLBACK(mpi_conversion_fn_null_c, pmpi_conversion_fn_null_)
#endif

/* MPI_SIZEOF of programs built against MPICH's `mpi` module, which calls the specific
 * procedures of its module `mpi_sizeofs` (scalar and array forms of each type). Programs
 * built with our modules use their own generic MPI_Sizeof. */
#define SIZEOF_FN(sfx, bytes)                                                         \
    void __mpi_sizeofs_MOD_mpi_sizeof_##sfx(void *x, MPI_Fint *size, MPI_Fint *ierr);  \
    void __mpi_sizeofs_MOD_mpi_sizeof_##sfx(void *x, MPI_Fint *size, MPI_Fint *ierr)   \
    {                                                                                 \
        (void)x;                                                                      \
        *size = bytes;                                                                \
        *ierr = MPI_SUCCESS;                                                          \
    }
#define SIZEOF_BOTH(sfx, bytes) SIZEOF_FN(sfx, bytes) SIZEOF_FN(sfx##v, bytes)
SIZEOF_BOTH(ch, 1)
SIZEOF_BOTH(cx, 8)
SIZEOF_BOTH(d, 8)
SIZEOF_BOTH(i, 4)
SIZEOF_BOTH(i1, 1)
SIZEOF_BOTH(i2, 2)
SIZEOF_BOTH(i8, 8)
SIZEOF_BOTH(l, 4)
SIZEOF_BOTH(r, 4)
