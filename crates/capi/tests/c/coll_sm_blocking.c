/* Blocking collectives of small vectors on the communicator's shared-memory segment:
 * gather, scatter, gatherv, scatterv, allgather, allgatherv, reduce, reduce_scatter_block, reduce_scatter,
 * scan and exscan, in place and not, for every root, at sizes around the segment's buffer
 * (4096 bytes: 1, 56, 57, 1000, 4096 and 4097 bytes per block, and whole vectors on both
 * sides of it; the boundary of one block after a scatterv table; 16384, 32768 and 32769
 * bytes around the single cross-memory copy's limit; 100000 bytes), of MPI_CHAR
 * and of a strided type with holes (packed first). Every result
 * is checked against a local reference (every rank can regenerate every contribution), the
 * holes of the strided type untouched. The rooted ones also run 3 x 8 times in a row with
 * the root moving and no other synchronisation (more collectives than the segment's 8
 * buffers per rank, roots running ahead).
 * Broadcasts around the lane's sizes run back to back with the root moving, 2500 of 64 KiB
 * and of 128 KiB back to back from rank 0; allgathers,
 * reduce-scatters, alltoallvs and alltoalls of 33 B to 1 KiB blocks run back to back, 800
 * calls.
 * MPI_INT reductions and allgatherv with empty blocks (NULL buffers where MPI allows them)
 * check the direct paths on the user's buffers: guard items after every block.
 * Alltoallv and alltoallw with negative displacements (the general path) and negative
 * counts (MPI_ERR_COUNT on every rank).
 * Alltoalls of MPI_INT in place and not, each before a barrier, count as the component's
 * alltoalls, and those barriers do not meet (coll_sm_{alltoall,barrier_meet}_calls).
 * In-place reduces with a non-commutative user op keep rank order; MPI_INT and MPI_DOUBLE
 * reduce-scatters on buffers one byte off their alignment.
 * Rank 0 prints "coll_sm_blocking: sm calls: used" (or "not used": the sum of the
 * coll_sm_{gather,scatter,allgather,reduce,reduce_scatter,scan}_calls counters) and
 * "coll_sm_blocking: all checks passed". */
#include "check.h"
#include <string.h>

static int rank, size;

static signed char val(int r, int k, int what) { return (signed char)((r * 37 + k * 11 + what * 5) % 20); }

/* Started handles on the sm component's counters of these collectives, in one session. */
static const char *counter_names[] = {"coll_sm_gather_calls", "coll_sm_scatter_calls",
                                      "coll_sm_allgather_calls", "coll_sm_reduce_calls",
                                      "coll_sm_reduce_scatter_calls", "coll_sm_scan_calls",
                                      "coll_sm_alltoallv_calls"};
#define NCOUNTERS (int)(sizeof counter_names / sizeof counter_names[0])
static MPI_T_pvar_session session;
static MPI_T_pvar_handle counters[NCOUNTERS];

static void start_counters(void) {
    CHECK(MPI_T_pvar_session_create(&session) == MPI_SUCCESS);
    for (int n = 0; n < NCOUNTERS; n++) {
        int i = -1, count, cont = 1;
        CHECK(MPI_T_pvar_get_index(counter_names[n], MPI_T_PVAR_CLASS_COUNTER, &i) == MPI_SUCCESS);
        CHECK(MPI_T_pvar_handle_alloc(session, i, NULL, &counters[n], &count) == MPI_SUCCESS);
        CHECK(MPI_T_pvar_get_info(i, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                  &cont, NULL) == MPI_SUCCESS);
        if (!cont) CHECK(MPI_T_pvar_start(session, counters[n]) == MPI_SUCCESS);
    }
}

/* The sum of the counters. */
static unsigned long long sm_calls(void) {
    unsigned long long total = 0;
    for (int n = 0; n < NCOUNTERS; n++) {
        unsigned long long v = 0;
        CHECK(MPI_T_pvar_read(session, counters[n], &v) == MPI_SUCCESS);
        total += v;
    }
    return total;
}

/* A block of `n` items of type `t`: CHAR contiguous (1 byte per item), or the strided type
 * (one data byte per 2-byte item, the other a hole). Buffers are bytes. */
typedef struct {
    MPI_Datatype t;
    int ext; /* bytes per item in memory */
} ty;

static void put(const ty *t, signed char *b, int k, signed char v) { b[k * t->ext] = v; }
static signed char get(const ty *t, const signed char *b, int k) { return b[k * t->ext]; }

#define HOLE ((signed char)-77)

static signed char *buf(const ty *t, int items) {
    signed char *b = malloc((size_t)items * t->ext + 1);
    memset(b, HOLE, (size_t)items * t->ext + 1);
    return b;
}

/* The holes of `items` items (and the byte after them) are untouched. */
static void holes(const ty *t, const signed char *b, int items) {
    for (int i = 0; i < items * t->ext + 1; i++)
        if (i >= items * t->ext || i % t->ext) CHECK(b[i] == HOLE);
}

static void movement(const ty *t, int n, int inpl) {
    int all = n * size;
    for (int root = 0; root < size; root++) {
        int me_root = rank == root, ip = inpl && me_root;
        /* gather */
        signed char *s = buf(t, n), *r = buf(t, all);
        for (int k = 0; k < n; k++) put(t, s, k, val(rank, k, 1));
        if (ip)
            for (int k = 0; k < n; k++) put(t, r, rank * n + k, val(rank, k, 1));
        CHECK_RC(MPI_Gather(ip ? MPI_IN_PLACE : s, n, t->t, r, n, t->t, root, MPI_COMM_WORLD));
        if (me_root) {
            for (int i = 0; i < size; i++)
                for (int k = 0; k < n; k++) CHECK(get(t, r, i * n + k) == val(i, k, 1));
            holes(t, r, all);
        }
        free(r);
        /* scatter */
        r = buf(t, all);
        for (int i = 0; i < size; i++)
            for (int k = 0; k < n; k++) put(t, r, i * n + k, val(i, k, 2));
        memset(s, HOLE, (size_t)n * t->ext + 1);
        CHECK_RC(MPI_Scatter(r, n, t->t, ip ? MPI_IN_PLACE : s, n, t->t, root, MPI_COMM_WORLD));
        if (!ip) {
            for (int k = 0; k < n; k++) CHECK(get(t, s, k) == val(rank, k, 2));
            holes(t, s, n);
        }
        for (int i = 0; i < size; i++) /* the send buffer is not written */
            for (int k = 0; k < n; k++) CHECK(get(t, r, i * n + k) == val(i, k, 2));
        free(r);
        /* gatherv, scatterv: block i of n - i % 3 items, in reverse rank order */
        int *vc = malloc(size * sizeof(int)), *vd = malloc(size * sizeof(int)), vt = 0;
        for (int i = size - 1; i >= 0; i--) {
            vc[i] = n > 2 ? n - i % 3 : n;
            vd[i] = vt;
            vt += vc[i];
        }
        r = buf(t, vt);
        for (int k = 0; k < vc[rank]; k++) put(t, s, k, val(rank, k, 5));
        if (ip)
            for (int k = 0; k < vc[rank]; k++) put(t, r, vd[rank] + k, val(rank, k, 5));
        CHECK_RC(MPI_Gatherv(ip ? MPI_IN_PLACE : s, vc[rank], t->t, r, vc, vd, t->t, root,
                             MPI_COMM_WORLD));
        if (me_root) {
            for (int i = 0; i < size; i++)
                for (int k = 0; k < vc[i]; k++) CHECK(get(t, r, vd[i] + k) == val(i, k, 5));
            holes(t, r, vt);
        }
        free(r);
        r = buf(t, vt);
        for (int i = 0; i < size; i++)
            for (int k = 0; k < vc[i]; k++) put(t, r, vd[i] + k, val(i, k, 6));
        memset(s, HOLE, (size_t)n * t->ext + 1);
        CHECK_RC(MPI_Scatterv(r, vc, vd, t->t, ip ? MPI_IN_PLACE : s, vc[rank], t->t, root,
                              MPI_COMM_WORLD));
        if (!ip) {
            for (int k = 0; k < vc[rank]; k++) CHECK(get(t, s, k) == val(rank, k, 6));
            holes(t, s, vc[rank]);
        }
        for (int i = 0; i < size; i++) /* the send buffer is not written */
            for (int k = 0; k < vc[i]; k++) CHECK(get(t, r, vd[i] + k) == val(i, k, 6));
        free(r);
        free(vc);
        free(vd);
        /* reduce (SUM of small values: exact in any order) */
        r = buf(t, n);
        for (int k = 0; k < n; k++) put(t, s, k, val(rank, k, 3));
        if (ip) memcpy(r, s, (size_t)n * t->ext);
        CHECK_RC(MPI_Reduce(ip ? MPI_IN_PLACE : s, r, n, t->t, MPI_SUM, root, MPI_COMM_WORLD));
        if (me_root) {
            for (int k = 0; k < n; k++) {
                int sum = 0;
                for (int i = 0; i < size; i++) sum += val(i, k, 3);
                CHECK(get(t, r, k) == (signed char)sum);
            }
            if (!ip) holes(t, r, n);
        }
        free(r);
        free(s);
    }
    /* allgather, allgatherv (block i of n - i % 3 items, in reverse rank order) */
    signed char *s = buf(t, n), *r = buf(t, all);
    for (int k = 0; k < n; k++) put(t, s, k, val(rank, k, 4));
    if (inpl)
        for (int k = 0; k < n; k++) put(t, r, rank * n + k, val(rank, k, 4));
    CHECK_RC(MPI_Allgather(inpl ? MPI_IN_PLACE : s, n, t->t, r, n, t->t, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++)
        for (int k = 0; k < n; k++) CHECK(get(t, r, i * n + k) == val(i, k, 4));
    holes(t, r, all);
    free(r);
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int)), tot = 0;
    for (int i = size - 1; i >= 0; i--) {
        counts[i] = n > 2 ? n - i % 3 : n;
        displs[i] = tot;
        tot += counts[i];
    }
    r = buf(t, tot);
    if (inpl)
        for (int k = 0; k < counts[rank]; k++) put(t, r, displs[rank] + k, val(rank, k, 4));
    CHECK_RC(MPI_Allgatherv(inpl ? MPI_IN_PLACE : s, counts[rank], t->t, r, counts, displs, t->t,
                            MPI_COMM_WORLD));
    for (int i = 0; i < size; i++)
        for (int k = 0; k < counts[i]; k++) CHECK(get(t, r, displs[i] + k) == val(i, k, 4));
    holes(t, r, tot);
    free(r);
    free(s);
    free(counts);
    free(displs);
}

/* reduce_scatter_block, reduce_scatter (block i: n + i items), scan, exscan. */
static void reductions(const ty *t, int n, int inpl) {
    int *counts = malloc(size * sizeof(int)), tot = 0, off = 0;
    for (int i = 0; i < size; i++) {
        counts[i] = n + i;
        if (i < rank) off += counts[i];
        tot += counts[i];
    }
    for (int block = 1; block >= 0; block--) {
        int all = block ? n * size : tot, mine = block ? n : counts[rank];
        int from = block ? rank * n : off;
        signed char *s = buf(t, all), *r = buf(t, all);
        for (int k = 0; k < all; k++) put(t, inpl ? r : s, k, val(rank, k, 5));
        if (block)
            CHECK_RC(MPI_Reduce_scatter_block(inpl ? MPI_IN_PLACE : s, r, n, t->t, MPI_SUM,
                                              MPI_COMM_WORLD));
        else
            CHECK_RC(MPI_Reduce_scatter(inpl ? MPI_IN_PLACE : s, r, counts, t->t, MPI_SUM,
                                        MPI_COMM_WORLD));
        for (int k = 0; k < mine; k++) {
            int sum = 0;
            for (int i = 0; i < size; i++) sum += val(i, from + k, 5);
            CHECK(get(t, r, k) == (signed char)sum);
        }
        if (!inpl) holes(t, r, mine);
        free(s);
        free(r);
    }
    for (int ex = 0; ex < 2; ex++) {
        signed char *s = buf(t, n), *r = buf(t, n);
        for (int k = 0; k < n; k++) put(t, inpl ? r : s, k, val(rank, k, 6));
        if (ex)
            CHECK_RC(MPI_Exscan(inpl ? MPI_IN_PLACE : s, r, n, t->t, MPI_SUM, MPI_COMM_WORLD));
        else
            CHECK_RC(MPI_Scan(inpl ? MPI_IN_PLACE : s, r, n, t->t, MPI_SUM, MPI_COMM_WORLD));
        if (!ex || rank > 0) {
            for (int k = 0; k < n; k++) {
                int sum = 0;
                for (int i = 0; i < rank + !ex; i++) sum += val(i, k, 6);
                CHECK(get(t, r, k) == (signed char)sum);
            }
            holes(t, r, n);
        }
        free(s);
        free(r);
    }
    free(counts);
}

/* Alltoallv: rank r sends c(r, j) = n + (r + 2 * j) % 5 bytes to rank j, plus `big` bytes
 * per block from rank 0 (so that only rank 0's data may not fit the segment: every rank
 * must still take the same path); blocks laid out in reverse order with gaps. */
static int a2a_count(int r, int j, int n, int big) { return n + (r + 2 * j) % 5 + (r == 0 ? big : 0); }

static void alltoallv_check(int n, int big, int inpl) {
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int)), st = 0, rt = 0;
    for (int j = size - 1; j >= 0; j--) {
        sc[j] = a2a_count(rank, j, n, big), sd[j] = st, st += sc[j] + 3;
        rc[j] = a2a_count(j, rank, n, big), rd[j] = rt, rt += rc[j] + 3;
    }
    signed char *s = malloc(st + 1), *r = malloc(rt + 1);
    memset(r, HOLE, rt + 1);
    for (int j = 0; j < size; j++)
        for (int k = 0; k < sc[j]; k++) s[sd[j] + k] = val(rank, j * 1000 + k, 7);
    if (inpl) {
        /* in place: the receive layout holds the data to send (counts must match) */
        for (int j = 0; j < size; j++)
            for (int k = 0; k < rc[j]; k++) r[rd[j] + k] = val(rank, j * 1000 + k, 7);
        if (big == 0) /* in place needs symmetric counts */
            for (int j = 0; j < size; j++) rc[j] = sc[j] = n, sd[j] = rd[j];
    }
    CHECK_RC(MPI_Alltoallv(inpl ? MPI_IN_PLACE : s, sc, sd, MPI_CHAR, r, rc, rd, MPI_CHAR,
                           MPI_COMM_WORLD));
    for (int j = 0; j < size; j++) {
        for (int k = 0; k < rc[j]; k++) CHECK(r[rd[j] + k] == val(j, rank * 1000 + k, 7));
        if (!inpl)
            for (int k = rc[j]; k < rc[j] + 3; k++) CHECK(r[rd[j] + k] == HOLE);
    }
    free(s), free(r), free(sc), free(sd), free(rc), free(rd);
}

/* Reduce_scatter(_block) and allgatherv of MPI_INT (MPI_MAX) with empty blocks: ranks of
 * odd index get (and give) nothing, and pass a NULL receive (send) buffer when they may;
 * the reduction runs on 4-byte items at block offsets; a guard item after each block (and
 * gaps between the allgatherv blocks) must stay untouched. */
static int ival(int r, int k) { return (r * 7919 + k * 104729) % 100003 - 50000; }

static void empty_blocks(int n, int inpl) {
    enum { GUARD = 0x5a5a5a5a };
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
    int tot = 0, off = 0, span = 0;
    for (int i = 0; i < size; i++) {
        counts[i] = i % 2 ? 0 : n + i;
        displs[i] = span; /* one guard item between allgatherv blocks */
        span += counts[i] + 1;
        if (i < rank) off += counts[i];
        tot += counts[i];
    }
    int mine = counts[rank];
    for (int block = 0; block < 2; block++) {
        /* block: every rank gets n items (none empty); else counts[] */
        int all = block ? n * size : tot, got = block ? n : mine, from = block ? rank * n : off;
        int *s = malloc((all + 1) * sizeof(int)), *r = malloc((all + 1) * sizeof(int));
        for (int k = 0; k <= all; k++) s[k] = r[k] = GUARD;
        for (int k = 0; k < all; k++) (inpl ? r : s)[k] = ival(rank, k);
        if (block)
            CHECK_RC(MPI_Reduce_scatter_block(inpl ? MPI_IN_PLACE : s, r, n, MPI_INT, MPI_MAX,
                                              MPI_COMM_WORLD));
        else
            CHECK_RC(MPI_Reduce_scatter(inpl ? MPI_IN_PLACE : s, !inpl && got == 0 ? NULL : r,
                                        counts, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        for (int k = 0; k < got; k++) {
            int m = ival(0, from + k);
            for (int i = 1; i < size; i++)
                if (ival(i, from + k) > m) m = ival(i, from + k);
            CHECK(r[k] == m);
        }
        CHECK(r[inpl ? all : got] == GUARD);
        free(s);
        free(r);
    }
    int *s = malloc((mine + 1) * sizeof(int)), *r = malloc((span + 1) * sizeof(int));
    for (int k = 0; k <= span; k++) r[k] = GUARD;
    for (int k = 0; k < mine; k++) (inpl ? r + displs[rank] : s)[k] = ival(rank, k + 3);
    CHECK_RC(MPI_Allgatherv(inpl ? MPI_IN_PLACE : mine ? s : NULL, mine, MPI_INT, r, counts,
                            displs, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) {
        for (int k = 0; k < counts[i]; k++) CHECK(r[displs[i] + k] == ival(i, k + 3));
        CHECK(r[displs[i] + counts[i]] == GUARD);
    }
    free(s), free(r), free(counts), free(displs);
}

/* Broadcasts around the lane's line sizes (56 bytes per line, two lines an entry) and its
 * end, and around the single cross-memory copy's limits (one buffer, 32 KiB), back to back
 * with the root moving (roots run ahead: more broadcasts than the lane's 64 entries and the
 * 8 buffers), every byte checked; every fifth one runs while a nonblocking allreduce is
 * pending. */
static void bcast_lanes(void) {
    int sizes[] = {1, 55, 56, 57, 63, 64, 100, 111, 112, 113, 200, 4096, 4097, 16384, 32768, 32769};
    enum { ROUNDS = 150 };
    signed char *b = malloc(32769);
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        int n = sizes[z];
        for (int it = 0; it < ROUNDS; it++) {
            int root = (it / 3) % size; /* the same root three times in a row, then the next */
            int x = rank, sum = 0;
            MPI_Request rq = MPI_REQUEST_NULL;
            if (it % 5 == 0)
                CHECK_RC(MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
            for (int k = 0; k < n; k++) b[k] = rank == root ? val(root, k, it) : -1;
            CHECK_RC(MPI_Bcast(b, n, MPI_CHAR, root, MPI_COMM_WORLD));
            for (int k = 0; k < n; k++) CHECK(b[k] == val(root, k, it));
            CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            if (it % 5 == 0) CHECK(sum == size * (size - 1) / 2);
        }
    }
    free(b);
}

/* Broadcasts of 64 and 128 KiB from rank 0 back to back, 2500 of each, every byte
 * checked: on 2 ranks they go point to point, and over tens of milliseconds the receiver's
 * choice of copy tries the mechanism not in use now and then, so both the pipelined and
 * the cooperative copy carry some of them (np=2, btl_base_verbose 90: 78 of the 64 KiB
 * ones and 32 of the 128 KiB ones measured pipelined, the rest cooperative). */
static void bcast_stream(void) {
    int sizes[] = {65536, 131072};
    enum { ROUNDS = 2500 };
    signed char *b = malloc(131072);
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        int n = sizes[z];
        for (int it = 0; it < ROUNDS; it++) {
            if (rank == 0)
                for (int k = 0; k < n; k++) b[k] = val(0, k, it);
            else
                memset(b, -1, n);
            CHECK_RC(MPI_Bcast(b, n, MPI_CHAR, 0, MPI_COMM_WORLD));
            if (rank != 0)
                for (int k = 0; k < n; k++) CHECK(b[k] == val(0, k, it));
        }
    }
    free(b);
}

/* A started handle on the counter `name` in session `s`. */
static MPI_T_pvar_handle named_counter(MPI_T_pvar_session s, const char *name) {
    int i = -1, count, cont = 1;
    MPI_T_pvar_handle h;
    CHECK(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &i) == MPI_SUCCESS);
    CHECK(MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count) == MPI_SUCCESS);
    CHECK(MPI_T_pvar_get_info(i, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &cont,
                              NULL) == MPI_SUCCESS);
    if (!cont) CHECK(MPI_T_pvar_start(s, h) == MPI_SUCCESS);
    return h;
}

static unsigned long long read_counter(MPI_T_pvar_session s, MPI_T_pvar_handle h) {
    unsigned long long v = 0;
    CHECK(MPI_T_pvar_read(s, h, &v) == MPI_SUCCESS);
    return v;
}

/* Alltoallv and alltoallw of MPI_CHAR on edges of their fast paths, which read the caller's
 * count and displacement arrays in place: negative displacements (legal: both buffers are
 * passed at their end, every block before it, in reverse rank order with a 2-byte gap)
 * must take the general path and land right, the gaps untouched; a negative count (each
 * rank's own block, then the next rank's, on the send side, then on the receive side: every
 * rank fails, none waits for another) must fail with MPI_ERR_COUNT and leave the receive
 * buffer alone, with those negative displacements and with non-negative ones (only with
 * these do the fast paths read the counts: with a negative displacement they leave the
 * call to the general path whatever its counts, so a count read as 0 there went unseen). */
static void alltoallv_edges(void) {
    enum { N = 3, STEP = N + 2 };
    int span = size * STEP;
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    MPI_Datatype *ty = malloc(size * sizeof(MPI_Datatype));
    signed char *s = malloc(span), *r = malloc(span);
    signed char *send = s + span, *recv = r + span;
    for (int j = 0; j < size; j++) {
        sc[j] = rc[j] = N, sd[j] = rd[j] = -(j + 1) * STEP, ty[j] = MPI_CHAR;
        for (int k = 0; k < N; k++) send[sd[j] + k] = val(rank, j * 1000 + k, 9);
    }
    for (int w = 0; w < 2; w++) {
        memset(r, HOLE, span);
        if (w)
            CHECK_RC(MPI_Alltoallw(send, sc, sd, ty, recv, rc, rd, ty, MPI_COMM_WORLD));
        else
            CHECK_RC(MPI_Alltoallv(send, sc, sd, MPI_CHAR, recv, rc, rd, MPI_CHAR, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++)
            for (int k = 0; k < STEP; k++)
                CHECK(recv[rd[j] + k] == (k < N ? val(j, rank * 1000 + k, 9) : HOLE));
    }
    MPI_Comm c;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    CHECK_RC(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    CHECK_RC(MPI_Barrier(c)); /* makes its segment: the fast paths then see the counts */
    int *pd = malloc(size * sizeof(int)); /* block j at j * STEP from the buffers' start */
    for (int j = 0; j < size; j++) pd[j] = j * STEP;
    for (int pos = 0; pos < 2; pos++)
        for (int who = 0; who < 2; who++)
            for (int side = 0; side < 2; side++)
                for (int w = 0; w < 2; w++) {
                    int *neg = side ? rc : sc, *d = pos ? pd : sd, at = (rank + who) % size;
                    signed char *sb = pos ? s : send, *rb = pos ? r : recv;
                    neg[at] = -1;
                    memset(r, HOLE, span);
                    int e = w ? MPI_Alltoallw(sb, sc, d, ty, rb, rc, d, ty, c)
                              : MPI_Alltoallv(sb, sc, d, MPI_CHAR, rb, rc, d, MPI_CHAR, c);
                    int cls = MPI_SUCCESS;
                    MPI_Error_class(e, &cls);
                    if (cls != MPI_ERR_COUNT)
                        fprintf(stderr,
                                "rank %d: %s, count -1 for rank %d on the %s side, displacements %s: "
                                "error class %d\n",
                                rank, w ? "MPI_Alltoallw" : "MPI_Alltoallv", at, side ? "receive" : "send",
                                pos ? "non-negative" : "negative", cls);
                    CHECK(cls == MPI_ERR_COUNT);
                    for (int i = 0; i < span; i++) CHECK(r[i] == HOLE);
                    neg[at] = N;
                }
    CHECK_RC(MPI_Comm_free(&c));
    free(s), free(r), free(sc), free(sd), free(rc), free(rd), free(ty), free(pd);
}

/* Small alltoalls of a basic type (the C library's paths on the user's buffers), out of
 * place and in place, each followed by a barrier: each counts as an alltoall of the
 * component when it runs there, so the barrier after it knows a collective came between and
 * does not meet (a barrier meets only right after a barrier); the data are checked too. */
static void alltoall_counted(void) {
    MPI_T_pvar_session s;
    CHECK(MPI_T_pvar_session_create(&s) == MPI_SUCCESS);
    int sb[64], rb[64];
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    MPI_T_pvar_handle ha = named_counter(s, "coll_sm_alltoall_calls");
    MPI_T_pvar_handle hm = named_counter(s, "coll_sm_barrier_meet_calls");
    MPI_T_pvar_handle hb = named_counter(s, "coll_sm_barrier_calls");
    unsigned long long a0 = read_counter(s, ha), m0 = read_counter(s, hm), b0 = read_counter(s, hb);
    for (int round = 0; round < 4; round++) {
        for (int j = 0; j < size; j++) {
            sb[j] = rank * 1000 + j + round;
            rb[j] = -1;
        }
        if (round % 2 == 0) {
            CHECK_RC(MPI_Alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, MPI_COMM_WORLD));
        } else {
            for (int j = 0; j < size; j++) rb[j] = sb[j];
            CHECK_RC(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, 1, MPI_INT,
                                  MPI_COMM_WORLD));
        }
        for (int j = 0; j < size; j++) CHECK(rb[j] == j * 1000 + rank + round);
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    }
    unsigned long long a = read_counter(s, ha) - a0, m = read_counter(s, hm) - m0,
                       b = read_counter(s, hb) - b0;
    /* On the component (its barriers counted) every alltoall is; off it, neither. */
    CHECK(a == (b > 0 ? 4 : 0));
    CHECK(m == 0);
    CHECK(MPI_T_pvar_session_free(&s) == MPI_SUCCESS);
}

/* Rooted collectives back to back with the root moving: roots and non-roots run ahead of
 * each other by up to the whole loop (no synchronisation but the collectives). */
static void back_to_back(void) {
    enum { N = 24, B = 40 };
    signed char s[B], r[64 * B];
    for (int it = 0; it < N; it++) {
        int root = it % size;
        for (int k = 0; k < B; k++) s[k] = val(rank, k, it);
        if (it % 2 == 0) {
            CHECK_RC(MPI_Gather(s, B, MPI_CHAR, r, B, MPI_CHAR, root, MPI_COMM_WORLD));
            if (rank == root)
                for (int i = 0; i < size; i++)
                    for (int k = 0; k < B; k++) CHECK(r[i * B + k] == val(i, k, it));
        } else {
            for (int i = 0; i < size; i++)
                for (int k = 0; k < B; k++) r[i * B + k] = val(i, k, it + 100);
            CHECK_RC(MPI_Scatter(r, B, MPI_CHAR, s, B, MPI_CHAR, root, MPI_COMM_WORLD));
            for (int k = 0; k < B; k++) CHECK(s[k] == val(rank, k, it + 100));
        }
    }
}

/* Values with a period of 251 rounds (val's repeats every 4). */
static signed char lval(int r, int k, int it) { return (signed char)((r * 131 + k * 7 + it * 29) % 251); }

/* Posts of more than the stamp's line, up to 1 KiB (allgather blocks in the ring cells
 * above 112 B, a reduce-scatter's other block, an alltoallv's table and block and an
 * alltoall's blocks in the buffers), back to back with no other synchronisation, new values every round and more
 * rounds than the buffers and cells (so each is rewritten while the peer may still be
 * reading or about to read it): a reader that took data before its stamp, or a poster that
 * rewrote a buffer or cell before the reader was done with it, gives values of another
 * round. */
static void lined_back_to_back(void) {
    int sizes[] = {33, 57, 112, 113, 200, 256, 500, 1000, 1024};
    enum { ROUNDS = 200, MAXN = 1024 };
    signed char *s = malloc(64 * MAXN), *r = malloc(64 * MAXN);
    int sc[64], sd[64], rc[64], rd[64];
    for (int it = 0; it < ROUNDS; it++) {
        int n = sizes[it % (sizeof sizes / sizeof sizes[0])];
        /* allgather */
        for (int k = 0; k < n; k++) s[k] = lval(rank, k, it);
        CHECK_RC(MPI_Allgather(s, n, MPI_CHAR, r, n, MPI_CHAR, MPI_COMM_WORLD));
        for (int i = 0; i < size; i++)
            for (int k = 0; k < n; k++) CHECK(r[i * n + k] == lval(i, k, it));
        /* reduce_scatter_block of n items per rank */
        for (int i = 0; i < size; i++)
            for (int k = 0; k < n; k++) s[i * n + k] = lval(rank, i * n + k, it + 1);
        CHECK_RC(MPI_Reduce_scatter_block(s, r, n, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD));
        for (int k = 0; k < n; k++) {
            int sum = 0;
            for (int i = 0; i < size; i++) sum += lval(i, rank * n + k, it + 1);
            CHECK(r[k] == (signed char)sum);
        }
        /* alltoallv, n bytes per block, reverse layout */
        for (int j = 0; j < size; j++) {
            sc[j] = rc[j] = n;
            sd[j] = rd[j] = (size - 1 - j) * n;
            for (int k = 0; k < n; k++) s[sd[j] + k] = lval(rank, j * 7 + k, it + 2);
        }
        CHECK_RC(MPI_Alltoallv(s, sc, sd, MPI_CHAR, r, rc, rd, MPI_CHAR, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++)
            for (int k = 0; k < n; k++) CHECK(r[rd[j] + k] == lval(j, rank * 7 + k, it + 2));
        /* alltoall, n bytes per block, out of place and in place on alternate rounds (each
         * rank posts only the blocks for the others: a reader taking the block at another
         * place, or a rank losing its own, gives other values) */
        for (int j = 0; j < size; j++)
            for (int k = 0; k < n; k++) s[j * n + k] = lval(rank, j * 5 + k, it + 3);
        if (it % 2) {
            memcpy(r, s, (size_t)size * (size_t)n);
            CHECK_RC(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_CHAR, r, n, MPI_CHAR, MPI_COMM_WORLD));
        } else {
            CHECK_RC(MPI_Alltoall(s, n, MPI_CHAR, r, n, MPI_CHAR, MPI_COMM_WORLD));
        }
        for (int j = 0; j < size; j++)
            for (int k = 0; k < n; k++) CHECK(r[j * n + k] == lval(j, rank * 5 + k, it + 3));
    }
    free(s), free(r);
}

/* A non-commutative user op: the left operand ("first"), associative; x0 o x1 o ... = x0. */
static void first_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    memcpy(inout, in, (size_t)*len * sizeof(int));
}

/* A commutative user op: integer sum. */
static void sum_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* Reduces of n ints in place at every root with a non-commutative user op (the result is
 * rank 0's contribution: the fold keeps rank order even where a commutative one may take
 * the peer's first) and a commutative one; then MPI_INT and MPI_DOUBLE sums
 * (reduce_scatter_block, reduce_scatter, in place and not) on buffers one byte off their
 * type's alignment, which the predefined-type fast paths reduce through aligned copies. */
static void order_and_alignment(int n) {
    MPI_Op first, sum;
    MPI_Op_create(first_op, 0, &first);
    MPI_Op_create(sum_op, 1, &sum);
    int *r = malloc((size_t)n * sizeof(int));
    for (int root = 0; root < size; root++)
        for (int o = 0; o < 2; o++) {
            for (int k = 0; k < n; k++) r[k] = (rank + 1) * 1000 + k;
            CHECK_RC(MPI_Reduce(rank == root ? MPI_IN_PLACE : r, rank == root ? r : NULL, n,
                                MPI_INT, o ? sum : first, root, MPI_COMM_WORLD));
            if (rank == root)
                for (int k = 0; k < n; k++) {
                    int want = o ? size * (size + 1) / 2 * 1000 + size * k : 1000 + k;
                    CHECK(r[k] == want);
                }
        }
    free(r);
    MPI_Op_free(&first);
    MPI_Op_free(&sum);
    for (int dbl = 0; dbl < 2; dbl++) {
        size_t z = dbl ? sizeof(double) : sizeof(int), all = (size_t)n * size;
        MPI_Datatype t = dbl ? MPI_DOUBLE : MPI_INT;
        char *sb = malloc(all * z + 1), *rb = malloc(all * z + 1);
        char *s = sb + 1, *rr = rb + 1; /* one byte off */
        for (int block = 0; block < 2; block++)
            for (int inpl = 0; inpl < 2; inpl++) {
                for (size_t k = 0; k < all; k++) {
                    int v = rank * 7 + (int)k;
                    double d = v;
                    memcpy((inpl ? rr : s) + k * z, dbl ? (void *)&d : (void *)&v, z);
                }
                int *counts = malloc(size * sizeof(int));
                for (int i = 0; i < size; i++) counts[i] = n;
                if (block)
                    CHECK_RC(MPI_Reduce_scatter_block(inpl ? MPI_IN_PLACE : s, rr, n, t, MPI_SUM,
                                                      MPI_COMM_WORLD));
                else
                    CHECK_RC(MPI_Reduce_scatter(inpl ? MPI_IN_PLACE : s, rr, counts, t, MPI_SUM,
                                                MPI_COMM_WORLD));
                for (int k = 0; k < n; k++) {
                    int v, want = 0;
                    double d;
                    for (int i = 0; i < size; i++) want += i * 7 + rank * n + k;
                    if (dbl) {
                        memcpy(&d, rr + (size_t)k * z, z);
                        v = (int)d;
                    } else
                        memcpy(&v, rr + (size_t)k * z, z);
                    CHECK(v == want);
                }
                free(counts);
            }
        free(sb);
        free(rb);
    }
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init(&argc, &argv);
    CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size <= 64);
    MPI_Datatype strided;
    MPI_Type_create_resized(MPI_CHAR, 0, 2, &strided);
    MPI_Type_commit(&strided);
    ty types[2] = {{MPI_CHAR, 1}, {strided, 2}};
    MPI_Barrier(MPI_COMM_WORLD); /* makes the segment */
    start_counters();
    unsigned long long before = sm_calls();
    /* per-block sizes around one buffer, and whole vectors (size blocks) across it */
    /* (a buffer holds 4152 bytes after its stamp word: 4152 - 8 * size is the largest
     * block that fits after a scatterv table, e.g. one 4 KiB block at np=2; 100000: point
     * to point, in place without a copy of the root's block) */
    int sizes[] = {1, 56, 57, 1000, 4096 / size, 4096 / size + 1, 4096, 4097,
                   4152 - 8 * size, 4153 - 8 * size, 16384, 32768, 32769, 100000};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        for (int ti = 0; ti < 2; ti++)
            for (int inpl = 0; inpl < 2; inpl++) {
                movement(&types[ti], sizes[z], inpl);
                reductions(&types[ti], sizes[z], inpl);
            }
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        if (sizes[z] * size < 5000) {
            alltoallv_check(sizes[z], 0, 0);
            alltoallv_check(sizes[z], 0, 1);
            alltoallv_check(sizes[z], 4096, 0); /* only rank 0's data does not fit */
        }
    /* in place and not, blocks that fit a buffer's table only without the rank's own */
    int own = (4152 - 8 - 8 * size) / (size - 1);
    for (int inpl = 0; inpl < 2; inpl++) {
        alltoallv_check(own, 0, inpl);
        alltoallv_check(own + 1, 0, inpl);
    }
    alltoallv_edges();
    /* 4-byte items: vectors of 1 KiB around the 4 KiB buffer at every rank count */
    int isizes[] = {1, 14, 15, 1024 / size - 8, 1024 / size, 1024 / size + 1, 1100};
    for (size_t z = 0; z < sizeof isizes / sizeof isizes[0]; z++)
        for (int inpl = 0; inpl < 2; inpl++) empty_blocks(isizes[z] > 0 ? isizes[z] : 1, inpl);
    back_to_back();
    lined_back_to_back();
    alltoall_counted();
    bcast_lanes();
    bcast_stream();
    /* 4 B to 4 KiB vectors (the segment's buffers), 4100 B ints (past them) */
    int osizes[] = {1, 4, 1024 / size, 1024, 1025};
    for (size_t z = 0; z < sizeof osizes / sizeof osizes[0]; z++) order_and_alignment(osizes[z]);
    unsigned long long used = sm_calls() - before;
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        printf("coll_sm_blocking: sm calls: %s\n", used ? "used" : "not used");
        printf("coll_sm_blocking: all checks passed\n");
    }
    MPI_Type_free(&strided);
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
