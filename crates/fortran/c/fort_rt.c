/* Hand-written half of oxmpi's Fortran bindings (libmpifort.so.12): the sentinel common
 * blocks, string conversion, and the functions whose Fortran form differs from the C one
 * (start-up, attributes, callbacks written in Fortran). Each hand-written MPI function has
 * a `FORT_HAND(MPI_X, ...)` line, which tells tools/gen_fort.py not to generate it. */
#include "fort_rt.h"

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
