/* The accumulate family under contention, with every result checked: each rank (rank 0,
 * the target, too) runs fetch-and-op, compare-and-swap, accumulate and get-accumulate on
 * rank 0's window at once, under lock_all, and over a derived datatype; rank 0 also
 * updates its own memory with loads and stores under an exclusive lock of itself while
 * the others add with fetch-and-op under shared locks. Over osc ofi these run as the
 * provider's atomics (FI_ATOMIC) where the window says so, else as messages: the results
 * must be the same. Prints "rma_atomics: all checks passed on N ranks". */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITER 50

static int rank, size, errors;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            if (errors++ < 10) {                                                           \
                fprintf(stderr, "rank %d line %d: ", rank, __LINE__);                      \
                fprintf(stderr, __VA_ARGS__);                                              \
                fprintf(stderr, "\n");                                                     \
            }                                                                              \
        }                                                                                  \
    } while (0)

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Window layout at rank 0 (in bytes, aligned). */
struct mem {
    int64_t counter;     /* fetch-and-op SUM 1 from everyone */
    int64_t lock_count;  /* incremented under a compare-and-swap spin lock */
    int64_t spin;        /* the spin lock word (0 free, rank + 1 held) */
    double dsum;         /* accumulate SUM of doubles */
    uint64_t bits;       /* accumulate BXOR and BOR */
    int imax;            /* get-accumulate MAX */
    int ivec[8];         /* accumulate SUM through a vector type (every other int) */
    unsigned char b[8];  /* MPI_BYTE BAND */
    int64_t shared;      /* fetch-and-op from others, load/store by rank 0 under exclusive */
    int64_t replaced;    /* MPI_REPLACE then MPI_NO_OP */
};

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct mem *m;
    MPI_Win win;
    MPI_Aint sz = rank == 0 ? (MPI_Aint)sizeof(struct mem) : 0;
    MPI_Win_allocate(sz, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &m, &win);
    if (rank == 0) {
        memset(m, 0, sizeof *m);
        m->imax = -1;
        memset(m->b, 0xff, sizeof m->b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
#define OFF(f) ((MPI_Aint)offsetof(struct mem, f))

    /* 1. fetch-and-op SUM: every fetched value distinct, the sum exact. */
    int64_t one = 1, got[ITER];
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < ITER; i++) {
        MPI_Fetch_and_op(&one, &got[i], MPI_INT64_T, 0, OFF(counter), MPI_SUM, win);
        CHECK(got[i] >= 0 && got[i] < (int64_t)size * ITER, "fetched %lld", (long long)got[i]);
    }
    MPI_Win_unlock_all(win);
    int64_t *all = rank == 0 ? malloc(sizeof(int64_t) * size * ITER) : NULL;
    MPI_Gather(got, ITER, MPI_INT64_T, all, ITER, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(all, (size_t)size * ITER, sizeof(int64_t), cmp_i64);
        for (int i = 0; i < size * ITER; i++)
            CHECK(all[i] == i, "fetch-and-op values not distinct: sorted[%d] = %lld", i,
                  (long long)all[i]);
        free(all);
    }

    /* 2. a compare-and-swap spin lock around a get, put and flush: the count is exact. */
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < ITER / 5; i++) {
        int64_t mine = rank + 1, free_ = 0, prev = -1, v = 0;
        do {
            MPI_Compare_and_swap(&mine, &free_, &prev, MPI_INT64_T, 0, OFF(spin), win);
            MPI_Win_flush(0, win);
        } while (prev != 0);
        MPI_Fetch_and_op(NULL, &v, MPI_INT64_T, 0, OFF(lock_count), MPI_NO_OP, win);
        v++;
        MPI_Fetch_and_op(&v, &prev, MPI_INT64_T, 0, OFF(lock_count), MPI_REPLACE, win);
        CHECK(prev == v - 1, "the lock did not exclude: saw %lld then %lld", (long long)(v - 1),
              (long long)prev);
        MPI_Compare_and_swap(&free_, &mine, &prev, MPI_INT64_T, 0, OFF(spin), win);
        MPI_Win_flush(0, win);
        CHECK(prev == mine, "unlock found %lld", (long long)prev);
    }
    MPI_Win_unlock_all(win);

    /* 3. accumulates of doubles, bits, bytes; get-accumulate MAX; a vector type. */
    MPI_Win_lock_all(0, win);
    double d = 0.5;
    uint64_t bit = 1ull << rank, high = 1ull << (32 + rank % 32);
    for (int i = 0; i < ITER; i++) MPI_Accumulate(&d, 1, MPI_DOUBLE, 0, OFF(dsum), 1, MPI_DOUBLE, MPI_SUM, win);
    MPI_Accumulate(&bit, 1, MPI_UINT64_T, 0, OFF(bits), 1, MPI_UINT64_T, MPI_BXOR, win);
    MPI_Accumulate(&high, 1, MPI_UINT64_T, 0, OFF(bits), 1, MPI_UINT64_T, MPI_BOR, win);
    unsigned char mask[8];
    for (int i = 0; i < 8; i++) mask[i] = (unsigned char)~(1u << ((rank + i) % 8));
    MPI_Accumulate(mask, 8, MPI_BYTE, 0, OFF(b), 8, MPI_BYTE, MPI_BAND, win);
    int mine = 10 * rank + 3, before = -2;
    MPI_Get_accumulate(&mine, 1, MPI_INT, &before, 1, MPI_INT, 0, OFF(imax), 1, MPI_INT,
                       MPI_MAX, win);
    CHECK(before >= -1 && before <= 10 * (size - 1) + 3, "get_accumulate MAX fetched %d", before);
    MPI_Datatype every_other;
    MPI_Type_vector(4, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int adds[4] = {1, 2, 3, 4}, prev4[4] = {-1, -1, -1, -1};
    MPI_Get_accumulate(adds, 4, MPI_INT, prev4, 4, MPI_INT, 0, OFF(ivec), 1,
                       every_other, MPI_SUM, win);
    for (int i = 0; i < 4; i++)
        CHECK(prev4[i] % (i + 1) == 0 && prev4[i] >= 0 && prev4[i] < (i + 1) * size,
              "vector get_accumulate slot %d fetched %d", i, prev4[i]);
    MPI_Win_unlock_all(win);
    MPI_Type_free(&every_other);

    /* 4. rank 0 loads and stores its own memory under an exclusive lock of itself while
     * the others add under shared locks: no update is lost. */
    if (rank == 0) {
        for (int i = 0; i < ITER; i++) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
            int64_t v = m->shared;
            m->shared = v + 1000;
            MPI_Win_unlock(0, win);
        }
    } else {
        for (int i = 0; i < ITER; i++) {
            int64_t old;
            MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
            MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, OFF(shared), MPI_SUM, win);
            MPI_Win_unlock(0, win);
        }
    }

    /* 5. replace, then read back with MPI_NO_OP in the same epoch (ordered). */
    if (rank == size - 1) {
        int64_t v = 4242, old = -1, now = -1;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Accumulate(&v, 1, MPI_INT64_T, 0, OFF(replaced), 1, MPI_INT64_T, MPI_REPLACE, win);
        MPI_Fetch_and_op(NULL, &now, MPI_INT64_T, 0, OFF(replaced), MPI_NO_OP, win);
        CHECK(now == 4242, "MPI_NO_OP after MPI_REPLACE read %lld", (long long)now);
        v = 7;
        MPI_Fetch_and_op(&v, &old, MPI_INT64_T, 0, OFF(replaced), MPI_SUM, win);
        CHECK(old == 4242, "fetch-and-op after replace fetched %lld", (long long)old);
        MPI_Win_unlock(0, win);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        CHECK(m->counter == (int64_t)size * ITER, "counter %lld", (long long)m->counter);
        CHECK(m->lock_count == (int64_t)size * (ITER / 5), "lock_count %lld",
              (long long)m->lock_count);
        CHECK(m->spin == 0, "spin %lld", (long long)m->spin);
        CHECK(m->dsum == 0.5 * ITER * size, "dsum %g", m->dsum);
        uint64_t want = 0;
        for (int r = 0; r < size; r++) want ^= 1ull << r;
        for (int r = 0; r < size; r++) want |= 1ull << (32 + r % 32);
        CHECK(m->bits == want, "bits %llx want %llx", (unsigned long long)m->bits,
              (unsigned long long)want);
        for (int i = 0; i < 8; i++) {
            unsigned char w = 0xff;
            for (int r = 0; r < size; r++) w &= (unsigned char)~(1u << ((r + i) % 8));
            CHECK(m->b[i] == w, "byte %d: %02x want %02x", i, m->b[i], w);
        }
        CHECK(m->imax == 10 * (size - 1) + 3, "imax %d", m->imax);
        for (int i = 0; i < 8; i++)
            CHECK(m->ivec[i] == (i % 2 ? 0 : (i / 2 + 1) * size), "ivec[%d] = %d", i, m->ivec[i]);
        CHECK(m->shared == 1000 * ITER + (int64_t)(size - 1) * ITER, "shared %lld",
              (long long)m->shared);
        CHECK(m->replaced == 4249, "replaced %lld", (long long)m->replaced);
        MPI_Win_unlock(0, win);
    }
    MPI_Win_free(&win);
    int total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total == 0) printf("rma_atomics: all checks passed on %d ranks\n", size);
    MPI_Finalize();
    return total != 0;
}
