/* In-place all-to-all exchanges whose blocks are too large for the shared-memory segment
 * (MPI_Ialltoall, MPI_Ialltoallv, MPI_Ialltoallw with MPI_IN_PLACE): on the segment, with
 * cross-memory copies between the ranks, each pair of ranks trades its two blocks in its
 * progress, each rank half of the bytes, through a 256 KiB bounce buffer.
 *
 * - Ialltoall of MPI_CHAR blocks around the segment's limit per block
 *   (alltoallv_max(p) = (4152 - 8p) / (p - 1) bytes: the largest block through a
 *   buffer), odd lengths (the two halves differ), and across the bounce buffer
 *   (2 * 262144 - 1, + 1: halves of one chunk and a byte, and 2 * 65536 +- 1, the chunk
 *   before); and of MPI_INT blocks.
 * - Ialltoallv and Ialltoallw (MPI_CHAR, byte displacements) with uneven blocks, the same
 *   both ways as in place requires, some empty, some through the segment and some traded
 *   in one collective, laid out in reverse rank order with gaps that must stay untouched.
 * - 12 outstanding in-place ialltoalls (more than the segment's 8 nonblocking buffers)
 *   with iallreduces in between, completed in reverse order.
 * - Rank 0 blocked in receives that the others send only once their in-place alltoallv
 *   completed: rank 0's halves must move while it does not wait for its request.
 * - The same sizes out of place (ialltoall) and for iallgather and iallgatherv (uneven
 *   blocks, gaps), in place and not: where the segment moves them by cross-memory copies,
 *   each rank reads its blocks from the others' buffers.
 * - In-place and out-of-place ialltoall, in-place iallgather and in-place ialltoallv with
 *   one rank posting last, after the others (requests pending, tested) sent it a token;
 *   also with 40000-byte blocks, which on 2 ranks out of place each rank asks its peer to
 *   write into its buffer (the late rank is then a writer the other must wait for).
 * - Igather, iscatter, igatherv and iscatterv (in place and not; v: uneven blocks in
 *   reverse rank order with gaps) of blocks larger than the segment moves by one copy on
 *   two ranks (by message there: the root copies its own block as soon as its transfers
 *   are posted), whose other ranks post only once the root, with its request pending, sent
 *   them a token: the root's own block must be in place at its wait, the gaps untouched.
 * Every result is checked against a local reference. Rank 0 prints whether the in-place
 * ialltoalls ran on the segment (the coll_sm_nonblocking_calls counter rose by their
 * number and no alltoall ran as a schedule of messages) and "coll_nb_trade: all checks
 * passed". Argument: number of rounds. */
#include "check.h"
#include <string.h>

static int rank, size;

/* Byte k of the block from rank i to rank j in test `tag`. */
static unsigned char bv(int i, int j, long k, int tag) {
    return (unsigned char)((i * 31 + j * 17 + k * 7 + tag * 13) % 251 + 1);
}

static void ialltoall_chars(long n, int tag) {
    unsigned char *b = malloc((size_t)n * size);
    for (int j = 0; j < size; j++)
        for (long k = 0; k < n; k++) b[j * n + k] = bv(rank, j, k, tag);
    MPI_Request rq;
    CHECK_RC(MPI_Ialltoall(MPI_IN_PLACE, (int)n, MPI_CHAR, b, (int)n, MPI_CHAR, MPI_COMM_WORLD, &rq));
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int j = 0; j < size; j++)
        for (long k = 0; k < n; k++) CHECK(b[j * n + k] == bv(j, rank, k, tag));
    free(b);
}

static void ialltoall_ints(int n, int tag) {
    int *b = malloc((size_t)n * size * sizeof(int));
    for (int j = 0; j < size; j++)
        for (int k = 0; k < n; k++) b[j * n + k] = rank * 1000003 + j * 1009 + k + tag;
    MPI_Request rq;
    CHECK_RC(MPI_Ialltoall(MPI_IN_PLACE, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD, &rq));
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int j = 0; j < size; j++)
        for (int k = 0; k < n; k++) CHECK(b[j * n + k] == j * 1000003 + rank * 1009 + k + tag);
    free(b);
}

/* Bytes between ranks i and j (either way): none for some pairs, else around `lim` (the
 * segment's limit per block) or well above it. */
static int vlen(int i, int j, int lim, int tag) {
    int s = i + j + tag;
    switch (s % 5) {
    case 0: return 0;
    case 1: return lim;
    case 2: return lim + 1;
    case 3: return 3 * lim + 7;
    default: return 70000 + s;
    }
}

/* Rank me's layout: block j (`cnt[j]` bytes) at byte `dsp[j]`, in reverse rank order with
 * a gap of 3 bytes; returns the bytes spanned. */
static int vlayout(int me, int lim, int tag, int *cnt, int *dsp) {
    int at = 2;
    for (int j = size - 1; j >= 0; j--) {
        cnt[j] = vlen(me, j, lim, tag);
        dsp[j] = at;
        at += cnt[j] + 3;
    }
    return at + 2;
}

static unsigned char *vpost(int w, int lim, int tag, MPI_Request *rq) {
    int cnt[64], dsp[64];
    MPI_Datatype ty[64];
    int len = vlayout(rank, lim, tag, cnt, dsp);
    unsigned char *b = malloc(len);
    memset(b, 0xee, len);
    for (int j = 0; j < size; j++) {
        for (int k = 0; k < cnt[j]; k++) b[dsp[j] + k] = bv(rank, j, k, tag);
        ty[j] = MPI_CHAR;
    }
    if (w)
        CHECK_RC(MPI_Ialltoallw(MPI_IN_PLACE, NULL, NULL, NULL, b, cnt, dsp, ty, MPI_COMM_WORLD, rq));
    else
        CHECK_RC(MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_CHAR, b, cnt, dsp, MPI_CHAR, MPI_COMM_WORLD, rq));
    return b;
}

static void vcheck(unsigned char *b, int lim, int tag) {
    int cnt[64], dsp[64];
    int len = vlayout(rank, lim, tag, cnt, dsp);
    unsigned char *want = malloc(len);
    memset(want, 0xee, len);
    for (int j = 0; j < size; j++)
        for (int k = 0; k < cnt[j]; k++) want[dsp[j] + k] = bv(j, rank, k, tag);
    for (int k = 0; k < len; k++) CHECK(b[k] == want[k]);
    free(want);
    free(b);
}

/* Out of place: ialltoall of MPI_CHAR blocks of `n` bytes (the receivers read them from the
 * senders' buffers when the segment moves them by cross-memory copies). */
static void ialltoall_out(long n, int tag) {
    unsigned char *s = malloc((size_t)n * size), *r = malloc((size_t)n * size + 1);
    for (int j = 0; j < size; j++)
        for (long k = 0; k < n; k++) s[j * n + k] = bv(rank, j, k, tag);
    r[n * size] = 0x5a;
    MPI_Request rq;
    CHECK_RC(MPI_Ialltoall(s, (int)n, MPI_CHAR, r, (int)n, MPI_CHAR, MPI_COMM_WORLD, &rq));
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int j = 0; j < size; j++)
        for (long k = 0; k < n; k++) {
            CHECK(r[j * n + k] == bv(j, rank, k, tag));
            CHECK(s[j * n + k] == bv(rank, j, k, tag));
        }
    CHECK(r[n * size] == 0x5a);
    free(s);
    free(r);
}

/* Iallgather (in place or not) of `n` bytes per rank, and iallgatherv with uneven blocks
 * (n + 3q bytes for rank q, none for every third rank) in reverse rank order with gaps. */
static void iallgathers(long n, int ip, int tag) {
    unsigned char *s = malloc(n + 3 * size), *r = malloc((size_t)n * size);
    for (long k = 0; k < n; k++) s[k] = bv(rank, 0, k, tag);
    if (ip)
        for (long k = 0; k < n; k++) r[rank * n + k] = bv(rank, 0, k, tag);
    MPI_Request rq;
    CHECK_RC(MPI_Iallgather(ip ? MPI_IN_PLACE : s, (int)n, MPI_CHAR, r, (int)n, MPI_CHAR, MPI_COMM_WORLD, &rq));
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int j = 0; j < size; j++)
        for (long k = 0; k < n; k++) CHECK(r[j * n + k] == bv(j, 0, k, tag));
    free(r);
    int cnt[64], dsp[64], at = 1;
    for (int q = size - 1; q >= 0; q--) {
        cnt[q] = (q + tag) % 3 == 2 ? 0 : (int)n + 3 * q;
        dsp[q] = at;
        at += cnt[q] + 2;
    }
    unsigned char *v = malloc(at + 1);
    memset(v, 0xee, at + 1);
    for (int k = 0; k < cnt[rank]; k++) {
        s[k] = bv(rank, 1, k, tag);
        if (ip) v[dsp[rank] + k] = s[k];
    }
    CHECK_RC(MPI_Iallgatherv(ip ? MPI_IN_PLACE : s, cnt[rank], MPI_CHAR, v, cnt, dsp, MPI_CHAR, MPI_COMM_WORLD, &rq));
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    unsigned char *want = malloc(at + 1);
    memset(want, 0xee, at + 1);
    for (int q = 0; q < size; q++)
        for (int k = 0; k < cnt[q]; k++) want[dsp[q] + k] = bv(q, 1, k, tag);
    for (int k = 0; k < at + 1; k++) CHECK(v[k] == want[k]);
    free(want);
    free(v);
    free(s);
}

/* Igather, iscatter, igatherv and iscatterv (passes 0-3) of about `n` bytes per rank from
 * `root` (in place at the root: `ip`); the v-forms' block j has n - 3j bytes, laid out in
 * reverse rank order with 5-byte gaps. The other ranks post only after the root, its
 * request pending, sent them a token. */
static void rooted_late(long n, int root, int ip, int tag) {
    int cnt[64], dsp[64], at = 5, token = 0, me = rank == root;
    for (int q = size - 1; q >= 0; q--) {
        cnt[q] = (int)n - 3 * q;
        dsp[q] = at;
        at += cnt[q] + 5;
    }
    size_t len = (size_t)n * size + at;
    unsigned char *s = malloc(len), *r = malloc(len), *want = malloc(len);
    for (int pass = 0; pass < 4; pass++) {
        int v = pass >= 2, gather = pass % 2 == 0;
        /* block j: `c(j)` bytes at `d(j)` of the root's buffer */
#define C(j) (v ? cnt[j] : (int)n)
#define D(j) (v ? dsp[j] : (j) * (int)n)
        memset(r, 0, len);
        memset(want, 0, len);
        for (int j = 0; j < size; j++)
            for (long k = 0; k < C(j); k++) {
                s[D(j) + k] = bv(gather ? j : root, j, k, tag + pass);
                want[D(j) + k] = s[D(j) + k];
            }
        if (gather && !(ip && me)) memmove(s, s + D(rank), C(rank));
        if (gather && ip && me) memcpy(r + D(root), s + D(root), C(root));
        MPI_Request rq = MPI_REQUEST_NULL;
        void *sb = ip && me ? MPI_IN_PLACE : s, *rb = ip && me ? MPI_IN_PLACE : r;
        if (!me) CHECK_RC(MPI_Recv(&token, 1, MPI_INT, root, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        if (pass == 0)
            CHECK_RC(MPI_Igather(sb, (int)n, MPI_CHAR, r, (int)n, MPI_CHAR, root, MPI_COMM_WORLD, &rq));
        else if (pass == 1)
            CHECK_RC(MPI_Iscatter(s, (int)n, MPI_CHAR, rb, (int)n, MPI_CHAR, root, MPI_COMM_WORLD, &rq));
        else if (pass == 2)
            CHECK_RC(MPI_Igatherv(sb, cnt[rank], MPI_CHAR, r, cnt, dsp, MPI_CHAR, root, MPI_COMM_WORLD, &rq));
        else
            CHECK_RC(MPI_Iscatterv(s, cnt, dsp, MPI_CHAR, rb, cnt[rank], MPI_CHAR, root, MPI_COMM_WORLD, &rq));
        if (me)
            for (int q = 0; q < size; q++)
                if (q != root) CHECK_RC(MPI_Send(&token, 1, MPI_INT, q, 8, MPI_COMM_WORLD));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        if (gather && me)
            for (size_t k = 0; k < len; k++) CHECK(r[k] == want[k]);
        if (!gather && !(ip && me)) {
            for (long k = 0; k < C(rank); k++) CHECK(r[k] == want[D(rank) + k]);
            for (size_t k = C(rank); k < len; k++) CHECK(r[k] == 0);
        }
#undef C
#undef D
    }
    free(s);
    free(r);
    free(want);
}

/* All-to-all exchanges whose blocks move by cross-memory copies, with rank `late` posting
 * last: the others post, run the progress with MPI_Test, send it a token with their
 * requests pending, then wait; `late` posts once it has every token. Passes: in-place
 * ialltoall of `n`-byte blocks, the same out of place, in-place iallgather, in-place
 * ialltoallv with uneven blocks (some through the segment, some traded, gaps). Nobody may
 * copy a block of `late` (or trade with it) before its post, nor finish before `late`
 * has read its blocks. */
static void alltoalls_late(long n, int late, int lim, int tag) {
    unsigned char *s = malloc((size_t)n * size), *r = malloc((size_t)n * size + 1);
    for (int pass = 0; pass < 4; pass++) {
        int t = tag + pass, token = 0, flag = 0, me = rank == late;
        MPI_Request rq;
        unsigned char *vb = NULL;
        for (int j = 0; j < size; j++)
            for (long k = 0; k < n; k++) {
                s[j * n + k] = bv(rank, j, k, t);
                r[j * n + k] = pass == 1 ? 0 : pass == 2 ? bv(rank, 0, k, t) : s[j * n + k];
            }
        r[n * size] = 0x5a;
        if (me)
            for (int q = 0; q < size; q++)
                if (q != late) CHECK_RC(MPI_Recv(&token, 1, MPI_INT, q, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        if (pass == 0)
            CHECK_RC(MPI_Ialltoall(MPI_IN_PLACE, (int)n, MPI_CHAR, r, (int)n, MPI_CHAR, MPI_COMM_WORLD, &rq));
        else if (pass == 1)
            CHECK_RC(MPI_Ialltoall(s, (int)n, MPI_CHAR, r, (int)n, MPI_CHAR, MPI_COMM_WORLD, &rq));
        else if (pass == 2)
            CHECK_RC(MPI_Iallgather(MPI_IN_PLACE, (int)n, MPI_CHAR, r, (int)n, MPI_CHAR, MPI_COMM_WORLD, &rq));
        else
            vb = vpost(0, lim, t, &rq);
        if (!me) {
            for (int i = 0; i < 50 && !flag; i++) CHECK_RC(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
            /* every block is needed from `late` (in the v-pass some pairs send nothing) */
            CHECK(!flag || pass == 3);
            CHECK_RC(MPI_Send(&token, 1, MPI_INT, late, 9, MPI_COMM_WORLD));
        }
        if (!flag) CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        if (pass == 3) {
            vcheck(vb, lim, t);
            continue;
        }
        for (int j = 0; j < size; j++)
            for (long k = 0; k < n; k++)
                CHECK(r[j * n + k] == (pass == 2 ? bv(j, 0, k, t) : bv(j, rank, k, t)));
        CHECK(r[n * size] == 0x5a);
    }
    free(s);
    free(r);
}

static unsigned long long counter(MPI_T_pvar_session ses, MPI_T_pvar_handle h) {
    unsigned long long v = 0;
    CHECK_RC(MPI_T_pvar_read(ses, h, &v));
    return v;
}

int main(int argc, char **argv) {
    int provided;
    CHECK_RC(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size >= 2 && size <= 64);
    int rounds = argc > 1 ? atoi(argv[1]) : 1;
    int lim = (4152 - 8 * size) / (size - 1);
    MPI_T_pvar_session ses;
    MPI_T_pvar_handle sm, nbc;
    int idx = -1, cnt;
    CHECK_RC(MPI_T_pvar_session_create(&ses));
    CHECK_RC(MPI_T_pvar_get_index("coll_sm_nonblocking_calls", MPI_T_PVAR_CLASS_COUNTER, &idx));
    CHECK_RC(MPI_T_pvar_handle_alloc(ses, idx, NULL, &sm, &cnt));
    CHECK_RC(MPI_T_pvar_get_index("coll_nbc_alltoallv_linear_calls", MPI_T_PVAR_CLASS_COUNTER, &idx));
    CHECK_RC(MPI_T_pvar_handle_alloc(ses, idx, NULL, &nbc, &cnt));
    /* A blocking collective first: it makes the communicator's segment. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    long sizes[] = {lim - 1, lim, lim + 1, 2 * lim + 1, 65535, 131071, 131073, 524287, 524289};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    unsigned long long sm0 = counter(ses, sm), nbc0 = counter(ses, nbc);
    for (int round = 0; round < rounds; round++)
        for (int s = 0; s < NS; s++) ialltoall_chars(sizes[s], s + 10 * round);
    unsigned long long sm1 = counter(ses, sm), nbc1 = counter(ses, nbc);
    int on_seg = sm1 - sm0 == (unsigned long long)rounds * NS && nbc1 == nbc0, all_on_seg = 0;
    CHECK_RC(MPI_Allreduce(&on_seg, &all_on_seg, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    for (int round = 0; round < rounds; round++) {
        ialltoall_ints(lim / 4 + 1, round);
        ialltoall_ints(40000 + round, round);
        for (int tag = 0; tag < 5; tag++)
            for (int w = 0; w < 2; w++) {
                MPI_Request rq;
                unsigned char *b = vpost(w, lim, tag + 7 * round, &rq);
                CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                vcheck(b, lim, tag + 7 * round);
            }
        for (int s = 0; s < NS; s++) {
            ialltoall_out(sizes[s], 20 + s + round);
            for (int ip = 0; ip < 2; ip++) iallgathers(sizes[s], ip, 30 + 2 * s + ip + round);
        }
        /* more outstanding than the segment has buffers, completed in reverse */
        enum { N = 12 };
        unsigned char *bs[N];
        MPI_Request rq[2 * N];
        int v[N];
        long n = 3 * lim + 1;
        for (int i = 0; i < N; i++) {
            bs[i] = malloc((size_t)n * size);
            for (int j = 0; j < size; j++)
                for (long k = 0; k < n; k++) bs[i][j * n + k] = bv(rank, j, k, 50 + i + round);
            CHECK_RC(MPI_Ialltoall(MPI_IN_PLACE, (int)n, MPI_CHAR, bs[i], (int)n, MPI_CHAR, MPI_COMM_WORLD, &rq[2 * i]));
            v[i] = rank + i;
            CHECK_RC(MPI_Iallreduce(MPI_IN_PLACE, &v[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[2 * i + 1]));
        }
        for (int i = 2 * N - 1; i >= 0; i--) CHECK_RC(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++) {
            for (int j = 0; j < size; j++)
                for (long k = 0; k < n; k++) CHECK(bs[i][j * n + k] == bv(j, rank, k, 50 + i + round));
            CHECK(v[i] == size * (size - 1) / 2 + size * i);
            free(bs[i]);
        }
        alltoalls_late(3 * lim + 1, size - 1 - round % size, lim, 100 + round);
        /* blocks of at least coll_sm_nonblocking_push_min/_many (32 KiB): out of place each
         * rank asks its senders to write their blocks, so a late rank is a writer the others
         * wait for */
        alltoalls_late(40000 + 7 * round, round % size, lim, 110 + round);
        for (int ip = 0; ip < 2; ip++) {
            rooted_late(40000 + ip, (round + ip) % size, ip, 60 + round);
            rooted_late(131071, size - 1, ip, 70 + round);
        }
        /* rank 0 does not wait for its request while the others complete theirs */
        for (int w = 0; w < 2; w++) {
            MPI_Request q;
            int token = 0;
            unsigned char *b = vpost(w, lim, 90 + w + round, &q);
            if (rank == 0) {
                for (int r = 1; r < size; r++)
                    CHECK_RC(MPI_Recv(&token, 1, MPI_INT, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
            } else {
                CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
                CHECK_RC(MPI_Send(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD));
            }
            vcheck(b, lim, 90 + w + round);
        }
    }
    CHECK_RC(MPI_T_pvar_handle_free(ses, &sm));
    CHECK_RC(MPI_T_pvar_handle_free(ses, &nbc));
    CHECK_RC(MPI_T_pvar_session_free(&ses));
    if (rank == 0) {
        printf("coll_nb_trade: in-place ialltoalls on the segment: %s\n", all_on_seg ? "yes" : "no");
        printf("coll_nb_trade: all checks passed\n");
    }
    MPI_Finalize();
    MPI_T_finalize();
    return 0;
}
