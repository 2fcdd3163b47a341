/* One-sided communication: every window flavor, fence / passive target / PSCW
 * synchronisation, the accumulate family, shared memory queries, attributes, and bad
 * arguments with MPI_ERRORS_RETURN. Runs on any number of ranks >= 2. */
#include "check.h"
#include <stdint.h>
#include <string.h>

static int rank, size;

static int deleted;
static int count_delete(MPI_Win win, int keyval, void *val, void *extra) {
    (void)win;
    (void)keyval;
    (void)extra;
    deleted += *(int *)val;
    return MPI_SUCCESS;
}

/* Put/get/accumulate with fence on a window whose memory is `mem` (5n+4 ints). */
static void fence_epochs(MPI_Win win, int *mem) {
    int n = size;
    for (int i = 0; i < 5 * n + 4; i++) mem[i] = -1;
    MPI_Win_fence(0, win);
    /* Each rank writes its rank into slot [rank] of every target. */
    for (int t = 0; t < size; t++) CHECK_RC(MPI_Put(&rank, 1, MPI_INT, t, rank, 1, MPI_INT, win));
    MPI_Win_fence(0, win);
    for (int i = 0; i < size; i++) CHECK(mem[i] == i);
    /* Get the neighbour's slots back. */
    int got[64];
    int next = (rank + 1) % size;
    CHECK_RC(MPI_Get(got, size, MPI_INT, next, 0, size, MPI_INT, win));
    MPI_Win_fence(0, win);
    for (int i = 0; i < size; i++) CHECK(got[i] == i);
    /* Strided target datatype: two ints into slots n+0 and n+2 of the next rank. */
    MPI_Datatype vec;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int two[2] = {100 + rank, 200 + rank};
    CHECK_RC(MPI_Put(two, 2, MPI_INT, next, n, 1, vec, win));
    MPI_Win_fence(0, win);
    int prev = (rank + size - 1) % size;
    CHECK(mem[n] == 100 + prev && mem[n + 1] == -1 && mem[n + 2] == 200 + prev);
    /* ... and read them back through the same datatype on the origin side. */
    int back[3] = {0, 0, 0};
    CHECK_RC(MPI_Get(back, 1, vec, next, n, 1, vec, win));
    MPI_Win_fence(0, win);
    CHECK(back[0] == 100 + rank && back[2] == 200 + rank && back[1] == 0);
    MPI_Type_free(&vec);
    /* Accumulate: everyone adds rank+1 to slot 2n of rank 0, and maxes into 2n+1. */
    if (rank == 0) {
        mem[2 * n] = 0;
        mem[2 * n + 1] = 0;
    }
    MPI_Win_fence(0, win);
    int v = rank + 1;
    CHECK_RC(MPI_Accumulate(&v, 1, MPI_INT, 0, 2 * n, 1, MPI_INT, MPI_SUM, win));
    CHECK_RC(MPI_Accumulate(&v, 1, MPI_INT, 0, 2 * n + 1, 1, MPI_INT, MPI_MAX, win));
    MPI_Win_fence(0, win);
    if (rank == 0) CHECK(mem[2 * n] == size * (size + 1) / 2 && mem[2 * n + 1] == size);
    MPI_Win_fence(0, win);
}

/* Contention on one counter of rank 0 from every rank. */
static void passive_contention(MPI_Win win, int *mem) {
    const int iters = 200;
    int n = size;
    MPI_Win_fence(0, win);
    if (rank == 0) mem[3 * n] = mem[3 * n + 1] = 0;
    MPI_Win_fence(0, win);
    int one = 1, prev;
    long seen_sum = 0;
    for (int i = 0; i < iters; i++) {
        CHECK_RC(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK_RC(MPI_Fetch_and_op(&one, &prev, MPI_INT, 0, 3 * n, MPI_SUM, win));
        CHECK_RC(MPI_Win_unlock(0, win));
        seen_sum += prev;
        /* A read-modify-write made atomic by the exclusive lock. */
        int x;
        CHECK_RC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_RC(MPI_Get(&x, 1, MPI_INT, 0, 3 * n + 1, 1, MPI_INT, win));
        CHECK_RC(MPI_Win_flush(0, win));
        x += 1;
        CHECK_RC(MPI_Put(&x, 1, MPI_INT, 0, 3 * n + 1, 1, MPI_INT, win));
        CHECK_RC(MPI_Win_unlock(0, win));
    }
    long total = 0;
    MPI_Allreduce(&seen_sum, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Win_fence(0, win);
    long k = (long)iters * size;
    /* Every fetched value 0..k-1 is seen exactly once, so they sum to k(k-1)/2. */
    CHECK(total == k * (k - 1) / 2);
    if (rank == 0) {
        CHECK(mem[3 * n] == iters * size);
        CHECK(mem[3 * n + 1] == iters * size);
    }
    /* Compare-and-swap: exactly one rank wins the slot. */
    if (rank == 0) mem[3 * n + 2] = -1;
    MPI_Win_fence(0, win);
    int mine = rank, cmp = -1, old;
    CHECK_RC(MPI_Win_lock_all(0, win));
    CHECK_RC(MPI_Compare_and_swap(&mine, &cmp, &old, MPI_INT, 0, 3 * n + 2, win));
    CHECK_RC(MPI_Win_flush_all(win));
    CHECK_RC(MPI_Win_unlock_all(win));
    int won = old == -1, winners = 0;
    MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(winners == 1);
    MPI_Win_fence(0, win);
    if (rank == 0) CHECK(mem[3 * n + 2] >= 0 && mem[3 * n + 2] < size);
    /* Get_accumulate, Fetch_and_op with NO_OP and REPLACE, request-based operations. */
    MPI_Win_fence(0, win);
    if (rank == 0) mem[3 * n + 3] = 5;
    MPI_Win_fence(0, win);
    if (rank == 1) {
        int add[1] = {10}, res[1] = {0}, cur;
        MPI_Request r;
        CHECK_RC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_RC(MPI_Get_accumulate(add, 1, MPI_INT, res, 1, MPI_INT, 0, 3 * n + 3, 1, MPI_INT,
                                    MPI_SUM, win));
        CHECK_RC(MPI_Win_flush(0, win));
        CHECK(res[0] == 5);
        CHECK_RC(MPI_Fetch_and_op(NULL, &cur, MPI_INT, 0, 3 * n + 3, MPI_NO_OP, win));
        CHECK(cur == 15);
        int seven = 7;
        CHECK_RC(MPI_Fetch_and_op(&seven, &cur, MPI_INT, 0, 3 * n + 3, MPI_REPLACE, win));
        CHECK(cur == 15);
        CHECK_RC(MPI_Rget(&cur, 1, MPI_INT, 0, 3 * n + 3, 1, MPI_INT, win, &r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(cur == 7 && r == MPI_REQUEST_NULL);
        int nine = 9;
        CHECK_RC(MPI_Rput(&nine, 1, MPI_INT, 0, 3 * n + 3, 1, MPI_INT, win, &r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Raccumulate(&one, 1, MPI_INT, 0, 3 * n + 3, 1, MPI_INT, MPI_SUM, win, &r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Win_unlock(0, win));
    }
    MPI_Win_fence(0, win);
    if (rank == 0) CHECK(mem[3 * n + 3] == 10);
    MPI_Win_fence(0, win);
}

static void pscw(MPI_Win win, int *mem) {
    MPI_Group wg, g;
    MPI_Win_get_group(win, &wg);
    int zero = 0;
    MPI_Win_fence(0, win);
    mem[0] = -1;
    MPI_Win_fence(0, win);
    if (rank == 0) {
        MPI_Group_excl(wg, 1, &zero, &g);
        CHECK_RC(MPI_Win_post(g, 0, win));
        int flag = 1;
        /* Nobody can have completed before the barrier below. */
        CHECK_RC(MPI_Win_test(win, &flag));
        CHECK(flag == 0);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_RC(MPI_Win_wait(win));
        for (int i = 1; i < size; i++) CHECK(mem[i] == 10 * i);
    } else {
        MPI_Group_incl(wg, 1, &zero, &g);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_RC(MPI_Win_start(g, 0, win));
        int v = 10 * rank;
        CHECK_RC(MPI_Put(&v, 1, MPI_INT, 0, rank, 1, MPI_INT, win));
        CHECK_RC(MPI_Win_complete(win));
    }
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    MPI_Win_fence(0, win);
}

static void attributes(MPI_Win win, void *base, MPI_Aint bytes, int flavor) {
    void *v;
    int flag;
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_BASE, &v, &flag));
    CHECK(flag && v == base);
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_SIZE, &v, &flag));
    CHECK(flag && *(MPI_Aint *)v == bytes);
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &v, &flag));
    CHECK(flag && *(int *)v == (int)sizeof(int));
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &v, &flag));
    CHECK(flag && *(int *)v == flavor);
    CHECK_RC(MPI_Win_get_attr(win, MPI_WIN_MODEL, &v, &flag));
    CHECK(flag && *(int *)v == MPI_WIN_UNIFIED);
    MPI_Group wg, cg;
    int cmp;
    MPI_Win_get_group(win, &wg);
    MPI_Comm_group(MPI_COMM_WORLD, &cg);
    MPI_Group_compare(wg, cg, &cmp);
    CHECK(cmp == MPI_IDENT);
    MPI_Group_free(&wg);
    MPI_Group_free(&cg);
}

static void bad_arguments(MPI_Win win) {
    int x = 0, cls, rc;
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Errhandler eh;
    MPI_Win_get_errhandler(win, &eh);
    CHECK(eh == MPI_ERRORS_RETURN);
    rc = MPI_Put(&x, 1, MPI_INT, size, 0, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK);
    rc = MPI_Put(&x, 1, MPI_INT, 0, 1 << 20, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE);
    rc = MPI_Put(&x, -1, MPI_INT, 0, 0, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT);
    rc = MPI_Put(&x, 1, MPI_DATATYPE_NULL, 0, 0, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TYPE);
    rc = MPI_Win_lock(12345, 0, 0, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_LOCKTYPE);
    rc = MPI_Win_unlock(0, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC);
    rc = MPI_Win_complete(win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC);
    MPI_Op user;
    MPI_Op_create((MPI_User_function *)0x1, 1, &user);
    rc = MPI_Accumulate(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, user, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_OP);
    MPI_Op_free(&user);
    /* MPI 4.0: a window of another flavor answers, without memory to share. */
    {
        MPI_Aint qsize = -1;
        int qunit = 0;
        void *qbase = &qunit;
        CHECK_RC(MPI_Win_shared_query(win, 0, &qsize, &qunit, &qbase));
        CHECK(qsize == 0 && qbase == NULL);
    }
    /* Invalid window handles go to MPI_COMM_WORLD's handler. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Win_fence(0, MPI_WIN_NULL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_WIN);
    rc = MPI_Win_fence(0, (MPI_Win)0x12345);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_WIN);
    MPI_Win w2;
    void *p;
    rc = MPI_Win_allocate(-1, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &p, &w2);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_SIZE);
    rc = MPI_Win_allocate(8, 0, MPI_INFO_NULL, MPI_COMM_WORLD, &p, &w2);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_DISP);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size >= 2 && size <= 16);
    MPI_Aint bytes = (5 * size + 4) * sizeof(int);

    /* MPI_Win_allocate. */
    int *amem;
    MPI_Win win;
    CHECK_RC(MPI_Win_allocate(bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &amem, &win));
    attributes(win, amem, bytes, MPI_WIN_FLAVOR_ALLOCATE);
    fence_epochs(win, amem);
    passive_contention(win, amem);
    pscw(win, amem);
    /* Name, info and a user attribute whose delete callback runs at free. */
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Win_set_name(win, "counters");
    MPI_Win_get_name(win, name, &len);
    CHECK(strcmp(name, "counters") == 0 && len == 8);
    int key, attrval = 3;
    MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, count_delete, &key, NULL);
    CHECK_RC(MPI_Win_set_attr(win, key, &attrval));
    MPI_Info info;
    CHECK_RC(MPI_Win_get_info(win, &info));
    MPI_Info_free(&info);
    bad_arguments(win);
    CHECK_RC(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL && deleted == 3);
    MPI_Win_free_keyval(&key);

    /* MPI_Win_create over user memory (cross-memory attach). */
    int *cmem = malloc(bytes);
    CHECK_RC(MPI_Win_create(cmem, bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    attributes(win, cmem, bytes, MPI_WIN_FLAVOR_CREATE);
    fence_epochs(win, cmem);
    passive_contention(win, cmem);
    pscw(win, cmem);
    CHECK_RC(MPI_Win_free(&win));
    free(cmem);

    /* MPI_Win_create_dynamic: displacements are addresses of attached memory. */
    int *dmem = calloc(size, sizeof(int));
    CHECK_RC(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_RC(MPI_Win_attach(win, dmem, size * sizeof(int)));
    MPI_Aint mine, *addrs = malloc(size * sizeof(MPI_Aint));
    MPI_Get_address(dmem, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD);
    MPI_Win_fence(0, win);
    for (int t = 0; t < size; t++)
        CHECK_RC(MPI_Put(&rank, 1, MPI_INT, t, addrs[t] + rank * sizeof(int), 1, MPI_INT, win));
    MPI_Win_fence(0, win);
    for (int i = 0; i < size; i++) CHECK(dmem[i] == i);
    /* An address that is not mapped, on ourselves and on a peer: an error, not a crash. */
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    for (int t = 0; t < 2; t++) {
        int cls, rc = MPI_Put(&rank, 1, MPI_INT, (rank + t) % size, 16, 1, MPI_INT, win);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RMA_RANGE);
    }
    CHECK_RC(MPI_Win_detach(win, dmem));
    CHECK_RC(MPI_Win_free(&win));
    free(addrs);
    free(dmem);

    /* MPI_Win_allocate_shared on the ranks of this node (all of them on one machine):
       direct load/store into the neighbour's memory. */
    MPI_Comm node;
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int nrank, nsize;
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    int *smem;
    CHECK_RC(MPI_Win_allocate_shared((nrank + 1) * sizeof(int), sizeof(int), MPI_INFO_NULL,
                                     node, &smem, &win));
    for (int i = 0; i <= nrank; i++) smem[i] = 0;
    MPI_Win_fence(0, win);
    int next = (nrank + 1) % nsize;
    MPI_Aint qsize;
    int qunit;
    int *peer;
    CHECK_RC(MPI_Win_shared_query(win, next, &qsize, &qunit, &peer));
    CHECK(qsize == (MPI_Aint)((next + 1) * sizeof(int)) && qunit == (int)sizeof(int));
    peer[next] = 1000 + nrank;
    int *first;
    CHECK_RC(MPI_Win_shared_query(win, 0, &qsize, &qunit, &first));
    /* The memory of all ranks is contiguous: rank r starts r(r+1)/2 ints after rank 0. */
    CHECK(smem == first + nrank * (nrank + 1) / 2);
    MPI_Win_sync(win);
    MPI_Barrier(node);
    MPI_Win_sync(win);
    CHECK(smem[nrank] == 1000 + (nrank + nsize - 1) % nsize);
    CHECK_RC(MPI_Win_free(&win));
    if (nsize < size) {
        /* Across nodes a shared window cannot exist: a clear error, not a hang. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int cls, rc = MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL,
                                              MPI_COMM_WORLD, &smem, &win);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RMA_SHARED);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    MPI_Comm_free(&node);

    /* A window on MPI_COMM_SELF. */
    CHECK_RC(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_SELF, &amem, &win));
    MPI_Win_fence(0, win);
    CHECK_RC(MPI_Put(&rank, 1, MPI_INT, 0, 0, 1, MPI_INT, win));
    MPI_Win_fence(0, win);
    CHECK(amem[0] == rank);
    CHECK_RC(MPI_Win_free(&win));

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("rma: all checks passed on %d ranks\n", size);
    MPI_Finalize();
    return 0;
}
