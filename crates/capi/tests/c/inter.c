/* Intercommunicators: creation (with errors), queries, point-to-point and probe, every
 * intercommunicator collective (MPI_ROOT / MPI_PROC_NULL roots, reductions in rank order
 * with a non-commutative operation), dup/split/create/merge/compare/free, names and
 * attributes. Runs on 2 or more ranks; each intercommunicator is built twice: halves of
 * the world (equal or off-by-one sizes) and rank 0 against everybody else (unequal sizes).
 * Rank 0 prints one line per finished part. */
#include "check.h"
#include <string.h>

static int wrank, wsize;

/* World ranks of the group "color" of a split: halves (lo = [0, size/2)) or
 * one-vs-rest (lo = {0}). */
static int in_lo(int w, int halves) { return halves ? w < wsize / 2 : w == 0; }

/* Non-commutative, associative: digit strings, (v, n) = v with n decimal digits. */
static void concat(void *in, void *inout, int *len, MPI_Datatype *dt) {
    int *a = in, *b = inout;
    (void)dt;
    for (int i = 0; i < *len; i++) {
        int p = 1;
        for (int k = 0; k < b[2 * i + 1]; k++) p *= 10;
        b[2 * i] = a[2 * i] * p + b[2 * i];
        b[2 * i + 1] += a[2 * i + 1];
    }
}

/* The digits 1..n concatenated (the reduction of contributions j+1 over ranks 0..n-1). */
static int digits(int n) {
    int v = 0;
    for (int j = 0; j < n; j++) v = v * 10 + (j + 1);
    return v;
}

static void collectives(MPI_Comm ic, int lo, int lsize, int rsize, int lrank, MPI_Op cat) {
    int root, i, j;
    MPI_Barrier(ic);
    /* Bcast from every member of each group in turn. */
    for (int g = 0; g < 2; g++) {
        int mine = (g == 0) == lo, n = mine ? lsize : rsize;
        for (root = 0; root < n; root++) {
            int buf[3] = {-1, -1, -1};
            if (mine) {
                if (lrank == root) {
                    for (i = 0; i < 3; i++) buf[i] = 100 * g + root + i;
                    CHECK_RC(MPI_Bcast(buf, 3, MPI_INT, MPI_ROOT, ic));
                } else {
                    CHECK_RC(MPI_Bcast(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, ic));
                }
            } else {
                CHECK_RC(MPI_Bcast(buf, 3, MPI_INT, root, ic));
                for (i = 0; i < 3; i++) CHECK(buf[i] == 100 * g + root + i);
            }
        }
    }
    /* Gather / Gatherv at rank 0 of each group: the root gets one block per remote rank. */
    for (int g = 0; g < 2; g++) {
        int mine = (g == 0) == lo;
        int *rbuf = calloc(2 * (size_t)(rsize + 1) * (rsize + 1), sizeof(int));
        int cnt[64], dsp[64];
        if (mine) {
            int r = lrank == 0 ? MPI_ROOT : MPI_PROC_NULL;
            CHECK_RC(MPI_Gather(NULL, 0, MPI_INT, rbuf, 2, MPI_INT, r, ic));
            if (lrank == 0)
                for (j = 0; j < rsize; j++) CHECK(rbuf[2 * j] == j && rbuf[2 * j + 1] == 7 * j);
            for (j = 0; j < rsize; j++) cnt[j] = j + 1, dsp[j] = j * (rsize + 1);
            CHECK_RC(MPI_Gatherv(NULL, 0, MPI_INT, rbuf, cnt, dsp, MPI_INT, r, ic));
            if (lrank == 0)
                for (j = 0; j < rsize; j++)
                    for (i = 0; i <= j; i++) CHECK(rbuf[j * (rsize + 1) + i] == 1000 * j + i);
        } else {
            int s[2] = {lrank, 7 * lrank}, sv[64];
            CHECK_RC(MPI_Gather(s, 2, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, 0, ic));
            for (i = 0; i <= lrank; i++) sv[i] = 1000 * lrank + i;
            CHECK_RC(MPI_Gatherv(sv, lrank + 1, MPI_INT, NULL, NULL, NULL, MPI_INT, 0, ic));
        }
        free(rbuf);
    }
    /* Scatter / Scatterv from the last rank of each group. */
    for (int g = 0; g < 2; g++) {
        int mine = (g == 0) == lo;
        if (mine) {
            int r = lrank == lsize - 1 ? MPI_ROOT : MPI_PROC_NULL;
            int *s = malloc(sizeof(int) * 3 * (rsize + 1));
            int cnt[64], dsp[64];
            for (j = 0; j < 3 * rsize; j++) s[j] = 50 + j;
            CHECK_RC(MPI_Scatter(s, 3, MPI_INT, NULL, 0, MPI_INT, r, ic));
            for (j = 0; j < rsize; j++) cnt[j] = 1, dsp[j] = rsize - 1 - j;
            CHECK_RC(MPI_Scatterv(s, cnt, dsp, MPI_INT, NULL, 0, MPI_INT, r, ic));
            free(s);
        } else {
            int v[3] = {0, 0, 0}, w = -1;
            CHECK_RC(MPI_Scatter(NULL, 0, MPI_INT, v, 3, MPI_INT, rsize - 1, ic));
            for (i = 0; i < 3; i++) CHECK(v[i] == 50 + 3 * lrank + i);
            CHECK_RC(MPI_Scatterv(NULL, NULL, NULL, MPI_INT, &w, 1, MPI_INT, rsize - 1, ic));
            CHECK(w == 50 + lsize - 1 - lrank);
        }
    }
    /* Allgather(v): every member gets one block per remote rank. */
    {
        int s[2] = {lo * 100 + lrank, lrank}, *r = malloc(sizeof(int) * 2 * rsize);
        int side = lo ? 0 : 100; /* the remote group's offset */
        int cnt[64], dsp[64];
        CHECK_RC(MPI_Allgather(s, 2, MPI_INT, r, 2, MPI_INT, ic));
        for (j = 0; j < rsize; j++) CHECK(r[2 * j] == side + j && r[2 * j + 1] == j);
        for (j = 0; j < rsize; j++) cnt[j] = 1, dsp[j] = rsize - 1 - j;
        CHECK_RC(MPI_Allgatherv(s, 1, MPI_INT, r, cnt, dsp, MPI_INT, ic));
        for (j = 0; j < rsize; j++) CHECK(r[rsize - 1 - j] == side + j);
        free(r);
    }
    /* Alltoall(v,w): block j goes to remote rank j. */
    {
        int *s = malloc(sizeof(int) * rsize), *r = malloc(sizeof(int) * rsize);
        int sc[64], sd[64], rc[64], rd[64];
        MPI_Datatype ts[64];
        for (j = 0; j < rsize; j++) s[j] = 1000 * lo + 10 * lrank + j;
        CHECK_RC(MPI_Alltoall(s, 1, MPI_INT, r, 1, MPI_INT, ic));
        for (j = 0; j < rsize; j++) CHECK(r[j] == 1000 * !lo + 10 * j + lrank);
        for (j = 0; j < rsize; j++) {
            sc[j] = rc[j] = 1;
            sd[j] = j;
            rd[j] = rsize - 1 - j;
            ts[j] = MPI_INT;
        }
        CHECK_RC(MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, ic));
        for (j = 0; j < rsize; j++) CHECK(r[rsize - 1 - j] == 1000 * !lo + 10 * j + lrank);
        for (j = 0; j < rsize; j++) sd[j] *= sizeof(int), rd[j] = j * (int)sizeof(int);
        CHECK_RC(MPI_Alltoallw(s, sc, sd, ts, r, rc, rd, ts, ic));
        for (j = 0; j < rsize; j++) CHECK(r[j] == 1000 * !lo + 10 * j + lrank);
        free(s);
        free(r);
    }
    /* Reduce at rank 0 of each group: the other group's contributions in rank order. */
    for (int g = 0; g < 2; g++) {
        int mine = (g == 0) == lo;
        int pair[2] = {lrank + 1, 1}, res[2] = {0, 0}, sum = -1, x = lrank + 1;
        if (mine) {
            int r = lrank == 0 ? MPI_ROOT : MPI_PROC_NULL;
            CHECK_RC(MPI_Reduce(NULL, res, 1, MPI_2INT, cat, r, ic));
            CHECK_RC(MPI_Reduce(NULL, &sum, 1, MPI_INT, MPI_SUM, r, ic));
            if (lrank == 0) {
                CHECK(res[0] == digits(rsize) && res[1] == rsize);
                CHECK(sum == rsize * (rsize + 1) / 2);
            }
        } else {
            CHECK_RC(MPI_Reduce(pair, NULL, 1, MPI_2INT, cat, 0, ic));
            CHECK_RC(MPI_Reduce(&x, NULL, 1, MPI_INT, MPI_SUM, 0, ic));
        }
    }
    /* Allreduce: each group gets the other group's reduction. */
    {
        int pair[2] = {lrank + 1, 1}, res[2] = {0, 0}, x[2] = {lrank + 1, lo}, s[2];
        CHECK_RC(MPI_Allreduce(pair, res, 1, MPI_2INT, cat, ic));
        CHECK(res[0] == digits(rsize) && res[1] == rsize);
        CHECK_RC(MPI_Allreduce(x, s, 2, MPI_INT, MPI_SUM, ic));
        CHECK(s[0] == rsize * (rsize + 1) / 2 && s[1] == (lo ? 0 : rsize));
    }
    /* Reduce_scatter(_block): both groups contribute vectors of the same length
     * (lsize * rsize items), each side splits the remote reduction by its own counts. */
    {
        int n = lsize * rsize, *s = malloc(sizeof(int) * n), *r = malloc(sizeof(int) * n);
        int cnt[64];
        for (i = 0; i < n; i++) s[i] = i + 1000 * lrank;
        CHECK_RC(MPI_Reduce_scatter_block(s, r, rsize, MPI_INT, MPI_SUM, ic));
        for (i = 0; i < rsize; i++) {
            int k = lrank * rsize + i;
            CHECK(r[i] == rsize * k + 1000 * (rsize * (rsize - 1) / 2));
        }
        /* Uneven counts: everything to the local rank 0. */
        for (i = 0; i < lsize; i++) cnt[i] = i == 0 ? n : 0;
        CHECK_RC(MPI_Reduce_scatter(s, r, cnt, MPI_INT, MPI_SUM, ic));
        if (lrank == 0)
            for (i = 0; i < n; i++) CHECK(r[i] == rsize * i + 1000 * (rsize * (rsize - 1) / 2));
        free(s);
        free(r);
    }
    /* Nonblocking forms. */
    {
        MPI_Request q;
        int v = -1, s = lrank + 1, t = 0;
        if (lo) {
            int r = lrank == 0 ? MPI_ROOT : MPI_PROC_NULL;
            v = 77;
            CHECK_RC(MPI_Ibcast(&v, 1, MPI_INT, r, ic, &q));
        } else {
            CHECK_RC(MPI_Ibcast(&v, 1, MPI_INT, 0, ic, &q));
        }
        CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        CHECK(v == 77);
        CHECK_RC(MPI_Iallreduce(&s, &t, 1, MPI_INT, MPI_SUM, ic, &q));
        CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        CHECK(t == rsize * (rsize + 1) / 2);
        CHECK_RC(MPI_Ibarrier(ic, &q));
        CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
    }
    {
        MPI_Request q;
        MPI_Comm d2;
        int *r = malloc(sizeof(int) * rsize), *s = malloc(sizeof(int) * rsize);
        int x = 10 + lrank, y = -1, sum = 10 * rsize + rsize * (rsize - 1) / 2;
        if (lo) {
            int rt = lrank == 0 ? MPI_ROOT : MPI_PROC_NULL;
            CHECK_RC(MPI_Igather(NULL, 0, MPI_INT, r, 1, MPI_INT, rt, ic, &q));
            CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
            if (lrank == 0)
                for (j = 0; j < rsize; j++) CHECK(r[j] == 10 + j);
            CHECK_RC(MPI_Ireduce(NULL, &y, 1, MPI_INT, MPI_SUM, rt, ic, &q));
            CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
            if (lrank == 0) CHECK(y == sum);
            for (j = 0; j < rsize; j++) r[j] = 20 + j;
            CHECK_RC(MPI_Iscatter(r, 1, MPI_INT, NULL, 0, MPI_INT, rt, ic, &q));
            CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        } else {
            CHECK_RC(MPI_Igather(&x, 1, MPI_INT, NULL, 0, MPI_INT, 0, ic, &q));
            CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Ireduce(&x, NULL, 1, MPI_INT, MPI_SUM, 0, ic, &q));
            CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Iscatter(NULL, 0, MPI_INT, &y, 1, MPI_INT, 0, ic, &q));
            CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
            CHECK(y == 20 + lrank);
        }
        CHECK_RC(MPI_Iallgather(&x, 1, MPI_INT, r, 1, MPI_INT, ic, &q));
        CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (j = 0; j < rsize; j++) CHECK(r[j] == 10 + j);
        for (j = 0; j < rsize; j++) s[j] = 100 * lrank + j;
        CHECK_RC(MPI_Ialltoall(s, 1, MPI_INT, r, 1, MPI_INT, ic, &q));
        CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (j = 0; j < rsize; j++) CHECK(r[j] == 100 * j + lrank);
        CHECK_RC(MPI_Comm_idup(ic, &d2, &q));
        CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Comm_test_inter(d2, &i));
        CHECK(i == 1);
        CHECK_RC(MPI_Comm_remote_size(d2, &i));
        CHECK(i == rsize);
        CHECK_RC(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, d2));
        CHECK(y == sum);
        CHECK_RC(MPI_Comm_free(&d2));
        free(r);
        free(s);
    }
}

/* Point-to-point and probe: everybody sends its world rank to every remote rank. */
static void p2p(MPI_Comm ic, int lrank, int rsize, const int *remote_world) {
    MPI_Request *q = malloc(sizeof(MPI_Request) * rsize);
    int j, got = 0;
    for (j = 0; j < rsize; j++) CHECK_RC(MPI_Isend(&wrank, 1, MPI_INT, j, 40 + lrank, ic, &q[j]));
    for (j = 0; j < rsize; j++) {
        MPI_Status st;
        int v = -1, flag = 0, count = -1;
        CHECK_RC(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, ic, &st));
        CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rsize && st.MPI_TAG == 40 + st.MPI_SOURCE);
        CHECK_RC(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == 1);
        CHECK_RC(MPI_Iprobe(st.MPI_SOURCE, st.MPI_TAG, ic, &flag, MPI_STATUS_IGNORE));
        CHECK(flag);
        CHECK_RC(MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, ic, &st));
        CHECK(v == remote_world[st.MPI_SOURCE]);
        got |= 1 << st.MPI_SOURCE;
    }
    CHECK(got == (1 << rsize) - 1);
    CHECK_RC(MPI_Waitall(rsize, q, MPI_STATUSES_IGNORE));
    /* A message to MPI_PROC_NULL completes at once. */
    CHECK_RC(MPI_Send(&wrank, 1, MPI_INT, MPI_PROC_NULL, 0, ic));
    free(q);
}

static int copies;
static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag) {
    (void)c, (void)k, (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static void one(int halves) {
    int lo = in_lo(wrank, halves), lsize = 0, rsize = 0, lrank, flag, res, i;
    int lworld[64], rworld[64], nl = 0, nr = 0;
    MPI_Comm intra, ic, dup, sp, cr, merged;
    MPI_Group g, wg, rg;
    MPI_Op cat;
    for (i = 0; i < wsize; i++) {
        if (in_lo(i, halves) == lo) lworld[nl++] = i;
        else rworld[nr++] = i;
    }
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, lo, wrank, &intra));
    /* Leaders: local rank 0; remote leader in world terms. */
    CHECK_RC(MPI_Intercomm_create(intra, 0, MPI_COMM_WORLD, rworld[0], 17, &ic));
    CHECK_RC(MPI_Comm_test_inter(ic, &flag));
    CHECK(flag == 1);
    CHECK_RC(MPI_Comm_test_inter(intra, &flag));
    CHECK(flag == 0);
    CHECK_RC(MPI_Comm_size(ic, &lsize));
    CHECK_RC(MPI_Comm_remote_size(ic, &rsize));
    CHECK_RC(MPI_Comm_rank(ic, &lrank));
    CHECK(lsize == nl && rsize == nr && lworld[lrank] == wrank);
    /* Groups: local = our side, remote = the other side, in rank order. */
    CHECK_RC(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    CHECK_RC(MPI_Comm_remote_group(ic, &rg));
    CHECK_RC(MPI_Group_size(rg, &i));
    CHECK(i == nr);
    {
        int rr[64], ww[64];
        for (i = 0; i < nr; i++) rr[i] = i;
        CHECK_RC(MPI_Group_translate_ranks(rg, nr, rr, wg, ww));
        for (i = 0; i < nr; i++) CHECK(ww[i] == rworld[i]);
    }
    CHECK_RC(MPI_Comm_group(ic, &g));
    CHECK_RC(MPI_Group_rank(g, &i));
    CHECK(i == lrank);
    MPI_Group_free(&g);
    MPI_Group_free(&rg);

    p2p(ic, lrank, rsize, rworld);
    CHECK_RC(MPI_Op_create(concat, 0, &cat));
    collectives(ic, lo, lsize, rsize, lrank, cat);

    /* Calls that are not defined on intercommunicators. */
    CHECK_RC(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
    {
        int x = 1, y;
        MPI_Comm none;
        CHECK(MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, ic) == MPI_ERR_COMM);
        CHECK(MPI_Comm_create_group(ic, wg, 0, &none) == MPI_ERR_COMM);
        CHECK(MPI_Bcast(&x, 1, MPI_INT, rsize, ic) == MPI_ERR_ROOT);
        CHECK(MPI_Exscan(&x, &y, 1, MPI_INT, MPI_SUM, ic) == MPI_ERR_COMM);
        CHECK(MPI_Neighbor_allgather(&x, 1, MPI_INT, &y, 1, MPI_INT, ic) == MPI_ERR_COMM);
        CHECK(MPI_Intercomm_create(ic, 0, MPI_COMM_WORLD, 0, 0, &none) == MPI_ERR_COMM);
        CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        CHECK(MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &none) == MPI_ERR_COMM);
        CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }

    /* Names and attributes; dup copies attributes and keeps the groups. */
    {
        int kv;
        char name[MPI_MAX_OBJECT_NAME];
        void *v;
        CHECK_RC(MPI_Comm_set_name(ic, "inter"));
        CHECK_RC(MPI_Comm_get_name(ic, name, &i));
        CHECK(strcmp(name, "inter") == 0);
        CHECK_RC(MPI_Comm_create_keyval(copy_fn, MPI_COMM_NULL_DELETE_FN, &kv, NULL));
        CHECK_RC(MPI_Comm_set_attr(ic, kv, &copies));
        copies = 0;
        CHECK_RC(MPI_Comm_dup(ic, &dup));
        CHECK(copies == 1);
        CHECK_RC(MPI_Comm_get_attr(dup, kv, &v, &flag));
        CHECK(flag && v == &copies);
        CHECK_RC(MPI_Comm_free_keyval(&kv));
    }
    CHECK_RC(MPI_Comm_test_inter(dup, &flag));
    CHECK(flag);
    CHECK_RC(MPI_Comm_compare(ic, dup, &res));
    CHECK(res == MPI_CONGRUENT);
    CHECK_RC(MPI_Comm_compare(ic, ic, &res));
    CHECK(res == MPI_IDENT);
    CHECK_RC(MPI_Comm_compare(ic, intra, &res));
    CHECK(res == MPI_UNEQUAL);
    /* The dup works on its own and does not see the original's messages. */
    {
        int a = -1;
        if (lrank == 0) {
            int x = 5, y = 6;
            CHECK_RC(MPI_Send(&x, 1, MPI_INT, 0, 3, ic));
            CHECK_RC(MPI_Send(&y, 1, MPI_INT, 0, 3, dup));
            CHECK_RC(MPI_Recv(&a, 1, MPI_INT, 0, 3, dup, MPI_STATUS_IGNORE));
            CHECK(a == 6);
            CHECK_RC(MPI_Recv(&a, 1, MPI_INT, 0, 3, ic, MPI_STATUS_IGNORE));
            CHECK(a == 5);
        }
        collectives(dup, lo, lsize, rsize, lrank, cat);
    }

    /* Split by local rank parity: local side = our parity class, remote = theirs. */
    CHECK_RC(MPI_Comm_split(ic, lrank % 2, -lrank, &sp));
    {
        int el = (lsize + 1 - lrank % 2) / 2, er = (rsize + 1 - lrank % 2) / 2;
        if (er == 0) {
            CHECK(sp == MPI_COMM_NULL);
        } else {
            int s, r, k;
            CHECK(sp != MPI_COMM_NULL);
            CHECK_RC(MPI_Comm_size(sp, &s));
            CHECK_RC(MPI_Comm_remote_size(sp, &r));
            CHECK_RC(MPI_Comm_rank(sp, &k));
            CHECK(s == el && r == er);
            /* Keys are -lrank: the order is reversed. */
            CHECK(k == el - 1 - lrank / 2);
            collectives(sp, lo, s, r, k, cat);
            CHECK_RC(MPI_Comm_free(&sp));
        }
    }
    CHECK_RC(MPI_Comm_split(ic, MPI_UNDEFINED, 0, &sp));
    CHECK(sp == MPI_COMM_NULL);

    /* Create: each side keeps its first member only. */
    {
        int zero = 0;
        MPI_Group lg, sub;
        CHECK_RC(MPI_Comm_group(ic, &lg));
        CHECK_RC(MPI_Group_incl(lg, 1, &zero, &sub));
        CHECK_RC(MPI_Comm_create(ic, sub, &cr));
        if (lrank == 0) {
            int s, r;
            CHECK(cr != MPI_COMM_NULL);
            CHECK_RC(MPI_Comm_size(cr, &s));
            CHECK_RC(MPI_Comm_remote_size(cr, &r));
            CHECK(s == 1 && r == 1);
            collectives(cr, lo, 1, 1, 0, cat);
            CHECK_RC(MPI_Comm_free(&cr));
        } else {
            CHECK(cr == MPI_COMM_NULL);
        }
        MPI_Group_free(&sub);
        MPI_Group_free(&lg);
    }

    /* Merge: high=false first. */
    for (int flip = 0; flip < 2; flip++) {
        int high = flip ? lo : !lo, mr, ms, expect;
        CHECK_RC(MPI_Intercomm_merge(ic, high, &merged));
        CHECK_RC(MPI_Comm_test_inter(merged, &flag));
        CHECK(!flag);
        CHECK_RC(MPI_Comm_size(merged, &ms));
        CHECK_RC(MPI_Comm_rank(merged, &mr));
        CHECK(ms == wsize);
        /* !flip: lo is low, so merged ranks are lo members then the others. */
        expect = (flip ? !lo : lo) ? lrank : nr + lrank;
        CHECK(mr == expect);
        {
            int s = wrank, t = 0;
            CHECK_RC(MPI_Allreduce(&s, &t, 1, MPI_INT, MPI_SUM, merged));
            CHECK(t == wsize * (wsize - 1) / 2);
        }
        CHECK_RC(MPI_Comm_free(&merged));
    }

    /* A merge with equal flags still gives one consistent order. */
    {
        int mr, all[64];
        CHECK_RC(MPI_Intercomm_merge(ic, 1, &merged));
        CHECK_RC(MPI_Comm_rank(merged, &mr));
        CHECK_RC(MPI_Allgather(&wrank, 1, MPI_INT, all, 1, MPI_INT, merged));
        for (i = 0; i < wsize; i++) {
            int seen = 0;
            for (int k = 0; k < wsize; k++) seen += all[k] == i;
            CHECK(seen == 1);
        }
        CHECK(all[mr] == wrank);
        CHECK_RC(MPI_Comm_free(&merged));
    }

    CHECK_RC(MPI_Op_free(&cat));
    CHECK_RC(MPI_Comm_free(&dup));
    CHECK_RC(MPI_Comm_free(&ic));
    CHECK(ic == MPI_COMM_NULL);

    /* Errors: a bad local leader is seen by every caller; bad remote leaders on both
     * sides are reported to every member of both groups. */
    CHECK_RC(MPI_Comm_set_errhandler(intra, MPI_ERRORS_RETURN));
    CHECK(MPI_Comm_remote_size(intra, &i) == MPI_ERR_COMM);
    CHECK(MPI_Comm_remote_group(intra, &g) == MPI_ERR_COMM);
    CHECK(MPI_Intercomm_create(intra, nl, MPI_COMM_WORLD, rworld[0], 1, &ic) == MPI_ERR_RANK);
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Intercomm_create(intra, 0, MPI_COMM_WORLD, wsize, 1, &ic) == MPI_ERR_RANK);
    CHECK(MPI_Intercomm_create(intra, 0, MPI_COMM_WORLD, lworld[0], 2, &ic) == MPI_ERR_RANK);
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    MPI_Group_free(&wg);
    CHECK_RC(MPI_Comm_free(&intra));
    /* The intercommunicator outlives the local communicator it was built from. */
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, lo, wrank, &intra));
    CHECK_RC(MPI_Intercomm_create(intra, 0, MPI_COMM_WORLD, rworld[0], 18, &ic));
    CHECK_RC(MPI_Comm_free(&intra));
    CHECK_RC(MPI_Barrier(ic));
    CHECK_RC(MPI_Comm_free(&ic));
    if (wrank == 0) printf("%s: ok\n", halves ? "halves" : "one-vs-rest");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    check_rank_ = wrank;
    CHECK(wsize >= 2 && wsize <= 32);
    one(1);
    one(0);
    MPI_Barrier(MPI_COMM_WORLD);
    if (wrank == 0) printf("inter: all ok on %d ranks\n", wsize);
    MPI_Finalize();
    return 0;
}
