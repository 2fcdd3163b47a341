/* MPI_Reduce and MPI_Allreduce of every predefined op on the predefined basic types that
 * MPI defines it for (the path that reads a predefined op on a predefined basic type
 * without a datatype reference), against a reference every rank computes itself: counts
 * on both sides of one shared-memory buffer, buffers aligned and one byte off, in place and
 * not, every root; guard bytes after the results must stay untouched. Then MINLOC/MAXLOC
 * on MPI_2INT (a gap-free value-index pair: the same path) and a non-commutative user op
 * on the general path (composition of affine maps, on a contiguous pair type) at every
 * root, which must fold in rank order.
 *
 * Prints (rank 0) "basic ops: ok", "pairs and user ops: ok" and
 * "coll_basic_ops: all checks passed". */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static int rank, size;

/* Rank r's item i (small, so that sums and products of up to 8 of them are exact). */
static long long val(int r, int i) { return (long long)((r * 5 + i * 3) % 7) - 2; }

static MPI_Op ops[10];
static const int counts[] = {1, 7, 64, 1000, 3000};
#define NCOUNTS (int)(sizeof counts / sizeof counts[0])
#define GUARD 16

#define REF_I(k, T, a, b)                                                                      \
    ((k) == 0   ? (T)((a) + (b))                                                               \
     : (k) == 1 ? (T)((a) * (b))                                                               \
     : (k) == 2 ? ((a) > (b) ? (a) : (b))                                                      \
     : (k) == 3 ? ((a) < (b) ? (a) : (b))                                                      \
     : (k) == 4 ? (T)((a) && (b))                                                              \
     : (k) == 5 ? (T)((a) || (b))                                                              \
     : (k) == 6 ? (T)(!(a) != !(b))                                                            \
     : (k) == 7 ? (T)((a) & (b))                                                               \
     : (k) == 8 ? (T)((a) | (b))                                                               \
                : (T)((a) ^ (b)))
#define REF_F(k, T, a, b)                                                                      \
    ((k) == 0   ? (T)((a) + (b))                                                               \
     : (k) == 1 ? (T)((a) * (b))                                                               \
     : (k) == 2 ? ((a) > (b) ? (a) : (b))                                                      \
                : ((a) < (b) ? (a) : (b)))

/* One (type, op k, count, misalignment) case: allreduce out of place and in place, then a
 * reduce at every root out of place and in place. */
#define CASE_FN(NAME, T, REF)                                                                  \
    static void NAME(MPI_Datatype dt, int k, int n, int off) {                                 \
        size_t z = sizeof(T), len = (size_t)n * z;                                             \
        char *sraw = malloc(len + 1 + GUARD), *rraw = malloc(len + 1 + GUARD);                 \
        char *sb = sraw + off, *rb = rraw + off;                                               \
        T *want = malloc(len);                                                                 \
        for (int i = 0; i < n; i++) {                                                          \
            T acc = (T)val(0, i);                                                              \
            for (int r = 1; r < size; r++) {                                                   \
                T x = (T)val(r, i);                                                            \
                acc = REF(k, T, x, acc);                                                       \
            }                                                                                  \
            want[i] = acc;                                                                     \
        }                                                                                      \
        for (int mode = 0; mode < 2 + 2 * size; mode++) {                                      \
            int all = mode < 2, inpl = mode % 2, root = all ? -1 : (mode - 2) / 2;             \
            int gets = all || rank == root, here = inpl && gets;                               \
            for (int i = 0; i < n; i++) {                                                      \
                T x = (T)val(rank, i);                                                         \
                memcpy((here ? rb : sb) + i * z, &x, z);                                       \
            }                                                                                  \
            if (!here) memset(rb, 0x5a, len);                                                  \
            memset(rb + len, 0xa5, GUARD);                                                     \
            const void *s = here ? MPI_IN_PLACE : sb;                                          \
            if (all)                                                                           \
                CHECK_RC(MPI_Allreduce(s, rb, n, dt, ops[k], MPI_COMM_WORLD));                 \
            else                                                                               \
                CHECK_RC(MPI_Reduce(s, rb, n, dt, ops[k], root, MPI_COMM_WORLD));              \
            if (gets)                                                                          \
                for (int i = 0; i < n; i++) {                                                  \
                    T got;                                                                     \
                    memcpy(&got, rb + i * z, z);                                               \
                    if (got != want[i])                                                        \
                        fprintf(stderr, "rank %d: %s op %d n %d off %d mode %d item %d\n",     \
                                rank, #T, k, n, off, mode, i);                                 \
                    CHECK(got == want[i]);                                                     \
                }                                                                              \
            for (int g = 0; g < GUARD; g++) CHECK((unsigned char)rb[len + g] == 0xa5);         \
        }                                                                                      \
        free(sraw);                                                                            \
        free(rraw);                                                                            \
        free(want);                                                                            \
    }

CASE_FN(case_char, char, REF_I)
CASE_FN(case_schar, signed char, REF_I)
CASE_FN(case_uchar, unsigned char, REF_I)
CASE_FN(case_short, short, REF_I)
CASE_FN(case_ushort, unsigned short, REF_I)
CASE_FN(case_int, int, REF_I)
CASE_FN(case_uint, unsigned, REF_I)
CASE_FN(case_long, long, REF_I)
CASE_FN(case_ulong, unsigned long, REF_I)
CASE_FN(case_llong, long long, REF_I)
CASE_FN(case_ullong, unsigned long long, REF_I)
CASE_FN(case_i8, int8_t, REF_I)
CASE_FN(case_u16, uint16_t, REF_I)
CASE_FN(case_i32, int32_t, REF_I)
CASE_FN(case_u64, uint64_t, REF_I)
CASE_FN(case_float, float, REF_F)
CASE_FN(case_double, double, REF_F)

typedef void (*case_fn)(MPI_Datatype, int, int, int);
static const struct {
    MPI_Datatype dt;
    case_fn f;
    int nops; /* ops[0..nops): 10 for the C integers, 4 (sum, prod, max, min) for floats */
} types[] = {
    {MPI_CHAR, case_char, 1},
    {MPI_SIGNED_CHAR, case_schar, 10},
    {MPI_UNSIGNED_CHAR, case_uchar, 10},
    {MPI_SHORT, case_short, 10},
    {MPI_UNSIGNED_SHORT, case_ushort, 10},
    {MPI_INT, case_int, 10},
    {MPI_UNSIGNED, case_uint, 10},
    {MPI_LONG, case_long, 10},
    {MPI_UNSIGNED_LONG, case_ulong, 10},
    {MPI_LONG_LONG, case_llong, 10},
    {MPI_UNSIGNED_LONG_LONG, case_ullong, 10},
    {MPI_INT8_T, case_i8, 10},
    {MPI_UINT16_T, case_u16, 10},
    {MPI_INT32_T, case_i32, 10},
    {MPI_UINT64_T, case_u64, 10},
    {MPI_FLOAT, case_float, 4},
    {MPI_DOUBLE, case_double, 4},
};

/* inout = in o inout for affine maps x -> m x + c (unsigned, wrapping): not commutative. */
static void compose(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    unsigned *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        unsigned m = a[2 * i] * b[2 * i], c = a[2 * i] * b[2 * i + 1] + a[2 * i + 1];
        b[2 * i] = m;
        b[2 * i + 1] = c;
    }
}

static void pairs_and_user_ops(void) {
    enum { N = 40 };
    MPI_Op op;
    MPI_Datatype aff;
    CHECK_RC(MPI_Op_create(compose, 0, &op));
    CHECK_RC(MPI_Type_contiguous(2, MPI_UNSIGNED, &aff));
    CHECK_RC(MPI_Type_commit(&aff));
    unsigned want[2 * N], buf[2 * N], in[2 * N];
    for (int i = 0; i < N; i++) {
        want[2 * i] = 1;
        want[2 * i + 1] = 0;
        for (int r = size - 1; r >= 0; r--) { /* x0 o (x1 o (... o x_{n-1})) */
            unsigned m = (unsigned)(r + 2 + i), c = (unsigned)(r * 7 + i);
            unsigned c2 = m * want[2 * i + 1] + c;
            want[2 * i] *= m;
            want[2 * i + 1] = c2;
        }
    }
    for (int mode = 0; mode < 2 + 2 * size; mode++) {
        int all = mode < 2, inpl = mode % 2, root = all ? -1 : (mode - 2) / 2;
        int gets = all || rank == root, here = inpl && gets;
        for (int i = 0; i < N; i++) {
            in[2 * i] = (unsigned)(rank + 2 + i);
            in[2 * i + 1] = (unsigned)(rank * 7 + i);
        }
        if (here) memcpy(buf, in, sizeof buf);
        const void *s = here ? MPI_IN_PLACE : in;
        if (all)
            CHECK_RC(MPI_Allreduce(s, buf, N, aff, op, MPI_COMM_WORLD));
        else
            CHECK_RC(MPI_Reduce(s, buf, N, aff, op, root, MPI_COMM_WORLD));
        if (gets)
            for (int i = 0; i < 2 * N; i++) CHECK(buf[i] == want[i]);
    }
    /* MINLOC / MAXLOC on MPI_2INT: value (i * 3 + rank) % size ties broken by lowest index. */
    for (int loc = 0; loc < 2; loc++)
        for (int mode = 0; mode < 2 + 2 * size; mode++) {
            int all = mode < 2, inpl = mode % 2, root = all ? -1 : (mode - 2) / 2;
            int gets = all || rank == root, here = inpl && gets;
            int p[2 * N], q[2 * N];
            for (int i = 0; i < N; i++) {
                p[2 * i] = (i * 3 + rank) % (size > 2 ? size - 1 : size);
                p[2 * i + 1] = rank;
            }
            if (here) memcpy(q, p, sizeof q);
            const void *s = here ? MPI_IN_PLACE : p;
            MPI_Op o = loc ? MPI_MAXLOC : MPI_MINLOC;
            if (all)
                CHECK_RC(MPI_Allreduce(s, q, N, MPI_2INT, o, MPI_COMM_WORLD));
            else
                CHECK_RC(MPI_Reduce(s, q, N, MPI_2INT, o, root, MPI_COMM_WORLD));
            if (gets)
                for (int i = 0; i < N; i++) {
                    int bv = 0, bi = -1, m = size > 2 ? size - 1 : size;
                    for (int r = 0; r < size; r++) {
                        int v = (i * 3 + r) % m;
                        if (bi < 0 || (loc ? v > bv : v < bv)) bv = v, bi = r;
                    }
                    CHECK(q[2 * i] == bv && q[2 * i + 1] == bi);
                }
        }
    MPI_Type_free(&aff);
    MPI_Op_free(&op);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    MPI_Op o[10] = {MPI_SUM,  MPI_PROD, MPI_MAX,  MPI_MIN,  MPI_LAND,
                    MPI_LOR,  MPI_LXOR, MPI_BAND, MPI_BOR,  MPI_BXOR};
    memcpy(ops, o, sizeof ops);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int k = 0; k < types[t].nops; k++)
            for (int c = 0; c < NCOUNTS; c++)
                for (int off = 0; off < 2; off++) types[t].f(types[t].dt, k, counts[c], off);
    /* MPI_C_BOOL: the logical ops. */
    for (int k = 4; k < 7; k++)
        for (int off = 0; off < 2; off++) {
            int n = 9;
            bool s[10], r[10], want[9];
            for (int i = 0; i < n; i++) {
                bool acc = (i + 0) % 3 == 0;
                for (int q = 1; q < size; q++) {
                    bool x = (i + q) % 3 == 0;
                    acc = k == 4 ? (x && acc) : k == 5 ? (x || acc) : (x != acc);
                }
                want[i] = acc;
                s[off + i] = (i + rank) % 3 == 0;
            }
            CHECK_RC(MPI_Allreduce(s + off, r + off, n, MPI_C_BOOL, ops[k], MPI_COMM_WORLD));
            for (int i = 0; i < n; i++) CHECK(r[off + i] == want[i]);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("basic ops: ok\n");
    pairs_and_user_ops();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("pairs and user ops: ok\n");
        printf("coll_basic_ops: all checks passed\n");
    }
    MPI_Finalize();
    return 0;
}
