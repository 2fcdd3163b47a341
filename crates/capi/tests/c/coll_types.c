/* Every predefined (datatype, operation) pair of the reductions, through MPI_Allreduce,
 * MPI_Reduce and MPI_Iallreduce, out of place and in place, at counts that take each
 * path of the collective framework (the shared-memory segment up to 4 KiB, the
 * point-to-point algorithms above it, the large-vector region from 512 KiB), against a
 * reference each rank computes from every rank's contribution (which it can regenerate).
 * Prints "coll_types: all checks passed" on rank 0. */
#include "check.h"
#include <stdint.h>
#include <string.h>

static int rank, size, failures;

/* Value of item k of rank r: small, nonzero for most items, zero for some (logical ops),
 * negative for some (signed types), varying across ranks (max/min/loc). */
static long gen(int r, long k) {
    long v = (k * 7 + r * 13) % 11 - 3;
    return (k % 5 == 4) ? 0 : v;
}

/* Count a wrong item and say which (the first 10); returns 1. */
static int wrong(const char *dt, const char *op, long n, int mode, long k) {
    if (failures++ < 10)
        printf("rank %d: %s %s count %ld mode %d: item %ld wrong\n", rank, dt, op, n, mode, k);
    return 1;
}

#define LOG_OP(o, a, b) \
    ((o) == MPI_LAND ? ((a) && (b)) : (o) == MPI_LOR ? ((a) || (b)) : (!(a) != !(b)))

/* One C type: run every integer (or floating) op at every count. */
#define CHECK_TYPE(T, DT, IS_FLOAT)                                                         \
    do {                                                                                    \
        MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR,              \
                        MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};                              \
        const char *names[] = {"sum", "prod", "max", "min", "land", "lor",                   \
                               "lxor", "band", "bor", "bxor"};                               \
        int nops = (IS_FLOAT) ? 4 : 10;                                                     \
        for (int ci = 0; ci < ncounts; ci++) {                                              \
            long n = counts[ci] / (long)sizeof(T);                                          \
            if (n < 1) n = 1;                                                               \
            T *s = malloc(n * sizeof(T)), *r = malloc(n * sizeof(T)), *w = malloc(n * sizeof(T)); \
            for (int oi = 0; oi < nops; oi++) {                                             \
                MPI_Op o = ops[oi];                                                         \
                for (long k = 0; k < n; k++) {                                              \
                    T acc = (T)gen(0, k);                                                   \
                    for (int q = 1; q < size; q++) {                                        \
                        T x = (T)gen(q, k);                                                 \
                        if (o == MPI_SUM) acc = (T)(acc + x);                               \
                        else if (o == MPI_PROD) acc = (T)(acc * x);                         \
                        else if (o == MPI_MAX) acc = x > acc ? x : acc;                     \
                        else if (o == MPI_MIN) acc = x < acc ? x : acc;                     \
                        else INT_OPS(T, o, acc, x);                                         \
                    }                                                                       \
                    w[k] = acc;                                                             \
                }                                                                           \
                for (int mode = 0; mode < 4; mode++) { /* allreduce, in place, reduce, iallreduce */ \
                    for (long k = 0; k < n; k++) s[k] = (T)gen(rank, k), r[k] = (T)99;     \
                    int root = mode == 2 ? size - 1 : -1;                                   \
                    if (mode == 0) CHECK_RC(MPI_Allreduce(s, r, (int)n, DT, o, MPI_COMM_WORLD)); \
                    if (mode == 1) {                                                        \
                        memcpy(r, s, n * sizeof(T));                                        \
                        CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, r, (int)n, DT, o, MPI_COMM_WORLD)); \
                    }                                                                       \
                    if (mode == 2) {                                                        \
                        if (rank == root) memcpy(r, s, n * sizeof(T));                      \
                        CHECK_RC(MPI_Reduce(rank == root ? MPI_IN_PLACE : s, r, (int)n, DT, o, root, \
                                            MPI_COMM_WORLD));                               \
                    }                                                                       \
                    if (mode == 3) {                                                        \
                        MPI_Request rq;                                                     \
                        CHECK_RC(MPI_Iallreduce(s, r, (int)n, DT, o, MPI_COMM_WORLD, &rq));  \
                        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));                         \
                    }                                                                       \
                    if (mode == 2 && rank != root) continue;                                \
                    for (long k = 0; k < n; k++)                                            \
                        if (memcmp(&r[k], &w[k], sizeof(T)) && wrong(#DT, names[oi], n, mode, k)) \
                            break;                                                          \
                }                                                                           \
            }                                                                               \
            free(s), free(r), free(w);                                                      \
        }                                                                                   \
    } while (0)

#define INT_OPS(T, o, acc, x)                                                               \
    do {                                                                                    \
        if (o == MPI_BAND) acc = (T)(acc & x);                                              \
        else if (o == MPI_BOR) acc = (T)(acc | x);                                          \
        else if (o == MPI_BXOR) acc = (T)(acc ^ x);                                         \
        else acc = (T)LOG_OP(o, acc, x);                                                    \
    } while (0)
#define NO_INT_OPS(T, o, acc, x) (void)0

/* A value-index pair type with MINLOC and MAXLOC. */
#define CHECK_PAIR(V, DT)                                                                   \
    do {                                                                                    \
        typedef struct { V v; int i; } P;                                                    \
        for (int ci = 0; ci < ncounts; ci++) {                                              \
            long n = counts[ci] / (long)sizeof(P);                                          \
            if (n < 1) n = 1;                                                               \
            P *s = malloc(n * sizeof(P)), *r = malloc(n * sizeof(P)), *w = malloc(n * sizeof(P)); \
            for (int oi = 0; oi < 2; oi++) {                                                \
                MPI_Op o = oi ? MPI_MAXLOC : MPI_MINLOC;                                    \
                for (long k = 0; k < n; k++) {                                              \
                    P acc = {(V)gen(0, k), 0};                                              \
                    for (int q = 1; q < size; q++) {                                        \
                        V x = (V)gen(q, k);                                                 \
                        if (oi ? x > acc.v : x < acc.v) acc.v = x, acc.i = q;                \
                    }                                                                       \
                    w[k] = acc;                                                             \
                }                                                                           \
                for (int mode = 0; mode < 2; mode++) {                                      \
                    for (long k = 0; k < n; k++) {                                          \
                        memset(&s[k], 0, sizeof(P));                                        \
                        s[k].v = (V)gen(rank, k), s[k].i = rank;                            \
                    }                                                                       \
                    memcpy(r, s, n * sizeof(P));                                            \
                    CHECK_RC(MPI_Allreduce(mode ? MPI_IN_PLACE : (void *)s, r, (int)n, DT, o, \
                                           MPI_COMM_WORLD));                                \
                    long bad = 0;                                                           \
                    while (bad < n && r[bad].v == w[bad].v && r[bad].i == w[bad].i) bad++;  \
                    if (bad < n) wrong(#DT, oi ? "maxloc" : "minloc", n, mode, bad);         \
                }                                                                           \
            }                                                                               \
            free(s);                                                                        \
            free(r);                                                                        \
            free(w);                                                                        \
        }                                                                                   \
    } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* bytes: one item, odd small vectors, the segment's 4 KiB, the point-to-point range,
     * and (argument "big") the large-vector region */
    long counts[] = {1, 131, 4096, 65536 + 40, 600 * 1024};
    int ncounts = argc > 1 && !strcmp(argv[1], "big") ? 5 : 4;
    CHECK_TYPE(char, MPI_CHAR, 0);
    CHECK_TYPE(signed char, MPI_SIGNED_CHAR, 0);
    CHECK_TYPE(unsigned char, MPI_UNSIGNED_CHAR, 0);
    CHECK_TYPE(short, MPI_SHORT, 0);
    CHECK_TYPE(unsigned short, MPI_UNSIGNED_SHORT, 0);
    CHECK_TYPE(int, MPI_INT, 0);
    CHECK_TYPE(unsigned, MPI_UNSIGNED, 0);
    CHECK_TYPE(long, MPI_LONG, 0);
    CHECK_TYPE(unsigned long, MPI_UNSIGNED_LONG, 0);
    CHECK_TYPE(long long, MPI_LONG_LONG, 0);
    CHECK_TYPE(int8_t, MPI_INT8_T, 0);
    CHECK_TYPE(uint16_t, MPI_UINT16_T, 0);
    CHECK_TYPE(int64_t, MPI_INT64_T, 0);
#undef INT_OPS
#define INT_OPS NO_INT_OPS
    CHECK_TYPE(float, MPI_FLOAT, 1);
    CHECK_TYPE(double, MPI_DOUBLE, 1);
    CHECK_PAIR(int, MPI_2INT);
    CHECK_PAIR(float, MPI_FLOAT_INT);
    CHECK_PAIR(double, MPI_DOUBLE_INT);
    CHECK_PAIR(long, MPI_LONG_INT);
    CHECK_PAIR(short, MPI_SHORT_INT);
    int all = 0;
    CHECK_RC(MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank == 0 && all == 0) printf("coll_types: all checks passed\n");
    MPI_Finalize();
    return all != 0;
}
