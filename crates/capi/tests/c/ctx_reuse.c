/* Context ids of freed communicators are reused: each part creates and frees a
 * communicator N times (default 20000), checking each new one carries messages.
 *   ctx_reuse dup|split|create|inter [N]   the loop of MPI_Comm_dup, MPI_Comm_split,
 *                                          MPI_Comm_create or MPI_Intercomm_create
 *   ctx_reuse window [N]                   keeps the last 8 communicators made alive
 *                                          (freed oldest first, so freed ids are not the
 *                                          last taken), made in turn by MPI_Comm_dup,
 *                                          MPI_Comm_idup and MPI_Comm_create_group
 *   ctx_reuse inter-window [N]             the same with intercommunicators (4 ids each),
 *                                          made in turn by MPI_Intercomm_create and
 *                                          MPI_Comm_dup of the newest one alive
 *   ctx_reuse shrink-window [N]            the window's pattern with MPIX_Comm_shrink of
 *                                          MPI_COMM_WORLD (no failure: all ranks): its
 *                                          fault-tolerant agreement has no mask exchange
 *                                          and searches for the freed ids instead
 *   ctx_reuse pending                      (3 ranks) rank 1 frees a communicator with an
 *                                          MPI_ANY_SOURCE receive pending on it, which
 *                                          rank 2 matches only after ranks 0 and 1 made
 *                                          and used a new communicator: the new one must
 *                                          not take the freed one's ids meanwhile
 *   ctx_reuse stale|stale-inter [N]        members of a communicator the other ranks are
 *                                          not in (MPI_Comm_split with MPI_UNDEFINED; of an
 *                                          intercommunicator, MPI_Comm_create of each
 *                                          side's first rank) run 1-3 nonblocking
 *                                          collectives on it (stale: and an MPIX_Comm_agree)
 *                                          and free it; a dup of the parent made next takes
 *                                          its ids at every member and must run its own
 *                                          the same way everywhere (the per-communicator
 *                                          counts of the freed one must not carry over)
 *   ctx_reuse hold                         dup until creation fails; report the class and
 *                                          message, free everything, then dup once more
 *   ctx_reuse hold fatal                   the same under MPI_ERRORS_ARE_FATAL: the job
 *                                          ends with the error's one-line report
 * Prints "ctx_reuse: <part> passed" at rank 0 (hold: "ctx_reuse: hold held K, error class
 * C: <message>" too). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void fail(const char *what, int i, int err) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0, cls = 0;
    MPI_Error_class(err, &cls);
    MPI_Error_string(err, msg, &len);
    fprintf(stderr, "rank %d: %s failed at iteration %d (class %d): %s\n", rank, what, i, cls, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* A token around the ring of `c` (its size > 1) or to itself. */
static void check(MPI_Comm c, int i) {
    int r, n, got = -1, err;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    err = MPI_Sendrecv(&i, 1, MPI_INT, (r + 1) % n, 7, &got, 1, MPI_INT, (r + n - 1) % n, 7, c,
                       MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) fail("MPI_Sendrecv", i, err);
    if (got != i) {
        fprintf(stderr, "rank %d: iteration %d got %d\n", rank, i, got);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv) {
    const char *part = argc > 1 ? argv[1] : "dup";
    int n = argc > 2 ? atoi(argv[2]) : 20000, i, err;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (!strcmp(part, "hold")) {
        int cap = 1 << 20, held = 0, cls = 0, len = 0;
        char msg[MPI_MAX_ERROR_STRING] = "";
        MPI_Comm *c = malloc(sizeof(MPI_Comm) * cap);
        if (argc > 2 && !strcmp(argv[2], "fatal"))
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        for (;;) {
            if (held == cap) {
                fprintf(stderr, "rank %d: %d communicators and no error\n", rank, held);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            err = MPI_Comm_dup(MPI_COMM_WORLD, &c[held]);
            if (err != MPI_SUCCESS) break;
            held++;
        }
        MPI_Error_class(err, &cls);
        MPI_Error_string(err, msg, &len);
        if (cls != MPI_ERR_OTHER && cls != MPI_ERR_INTERN) fail("MPI_Comm_dup (class)", held, err);
        if (held > 0) check(c[held - 1], held);
        for (i = 0; i < held; i++) MPI_Comm_free(&c[i]);
        /* Every id is free again: creation works. */
        err = MPI_Comm_dup(MPI_COMM_WORLD, &c[0]);
        if (err != MPI_SUCCESS) fail("MPI_Comm_dup after freeing all", 0, err);
        check(c[0], 1);
        MPI_Comm_free(&c[0]);
        if (rank == 0) printf("ctx_reuse: hold held %d, error class %d: %s\n", held, cls, msg);
        free(c);
    } else if (!strcmp(part, "pending")) {
        MPI_Comm p, c, d;
        MPI_Request r;
        int x = 0, go = 1;
        if (size != 3) {
            fprintf(stderr, "pending needs 3 ranks\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : 1, rank, &p);
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        if (rank == 1) {
            MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 1, c, &r);
            MPI_Comm_free(&c);
            MPI_Comm_dup(p, &d);
            x = -1;
            err = MPI_Recv(&go, 1, MPI_INT, 0, 1, d, MPI_STATUS_IGNORE);
            if (err != MPI_SUCCESS || go != 222) {
                fprintf(stderr, "rank 1: new communicator got %d, not 222\n", go);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            MPI_Send(&go, 1, MPI_INT, 2, 4, MPI_COMM_WORLD);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            if (x != 111) {
                fprintf(stderr, "rank 1: the freed communicator's receive got %d, not 111\n", x);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            MPI_Comm_free(&d);
        } else if (rank == 0) {
            MPI_Comm_free(&c);
            MPI_Comm_dup(p, &d);
            go = 222;
            MPI_Send(&go, 1, MPI_INT, 1, 1, d);
            MPI_Comm_free(&d);
        } else {
            MPI_Recv(&go, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            x = 111;
            MPI_Send(&x, 1, MPI_INT, 1, 1, c);
            MPI_Comm_free(&c);
        }
        MPI_Comm_free(&p);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) printf("ctx_reuse: %s passed\n", part);
    } else if (!strcmp(part, "stale")) {
        for (i = 0; i < n; i++) {
            MPI_Comm sub, d;
            MPI_Request q;
            int v = 1, s = 0, k, flag;
            MPI_Comm_split(MPI_COMM_WORLD, rank < size - 1 ? 0 : MPI_UNDEFINED, 0, &sub);
            if (sub != MPI_COMM_NULL) {
                for (k = 0; k <= i % 3; k++) {
                    MPI_Ibarrier(sub, &q);
                    MPI_Wait(&q, MPI_STATUS_IGNORE);
                }
                flag = 1;
                err = MPIX_Comm_agree(sub, &flag);
                if (err != MPI_SUCCESS) fail("MPIX_Comm_agree(sub)", i, err);
                MPI_Comm_free(&sub);
            }
            err = MPI_Comm_dup(MPI_COMM_WORLD, &d);
            if (err != MPI_SUCCESS) fail("MPI_Comm_dup", i, err);
            err = MPI_Iallreduce(&v, &s, 1, MPI_INT, MPI_SUM, d, &q);
            if (err == MPI_SUCCESS) err = MPI_Wait(&q, MPI_STATUS_IGNORE);
            if (err != MPI_SUCCESS || s != size) fail("MPI_Iallreduce on the dup", i, err);
            flag = 1;
            err = MPIX_Comm_agree(d, &flag);
            if (err != MPI_SUCCESS || flag != 1) fail("MPIX_Comm_agree on the dup", i, err);
            check(d, i);
            MPI_Comm_free(&d);
        }
        if (rank == 0) printf("ctx_reuse: %s passed\n", part);
    } else if (!strcmp(part, "stale-inter")) {
        for (i = 0; i < n; i++) {
            MPI_Comm half, ic, cr, d;
            MPI_Group lg, first;
            MPI_Request q;
            int color = rank % 2, zero = 0, v = 1, s = 0, rsize, k;
            MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
            err = MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 5, &ic);
            if (err != MPI_SUCCESS) fail("MPI_Intercomm_create", i, err);
            MPI_Comm_free(&half);
            MPI_Comm_remote_size(ic, &rsize);
            MPI_Comm_group(ic, &lg);
            MPI_Group_incl(lg, 1, &zero, &first);
            err = MPI_Comm_create(ic, first, &cr);
            if (err != MPI_SUCCESS) fail("MPI_Comm_create(intercommunicator)", i, err);
            if (cr != MPI_COMM_NULL) {
                for (k = 0; k <= i % 3; k++) {
                    MPI_Ibarrier(cr, &q);
                    MPI_Wait(&q, MPI_STATUS_IGNORE);
                }
                MPI_Comm_free(&cr);
            }
            MPI_Group_free(&first);
            MPI_Group_free(&lg);
            err = MPI_Comm_dup(ic, &d);
            if (err != MPI_SUCCESS) fail("MPI_Comm_dup(intercommunicator)", i, err);
            /* The sum of the remote group's ones. */
            err = MPI_Iallreduce(&v, &s, 1, MPI_INT, MPI_SUM, d, &q);
            if (err == MPI_SUCCESS) err = MPI_Wait(&q, MPI_STATUS_IGNORE);
            if (err != MPI_SUCCESS || s != rsize) fail("MPI_Iallreduce on the dup", i, err);
            MPI_Comm_free(&d);
            MPI_Comm_free(&ic);
        }
        if (rank == 0) printf("ctx_reuse: %s passed\n", part);
    } else if (!strcmp(part, "inter-window")) {
        enum { W = 4 };
        MPI_Comm w[W], half;
        int color = rank % 2;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
        for (i = 0; i < W; i++) w[i] = MPI_COMM_NULL;
        for (i = 0; i < n; i++) {
            MPI_Comm *c = &w[i % W], newest = w[(i + W - 1) % W];
            int r, got = -1;
            if (*c != MPI_COMM_NULL) {
                err = MPI_Comm_free(c);
                if (err != MPI_SUCCESS) fail("MPI_Comm_free", i, err);
            }
            if (i % 2 == 0 || newest == MPI_COMM_NULL) {
                err = MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 6, c);
                if (err != MPI_SUCCESS) fail("MPI_Intercomm_create", i, err);
            } else {
                err = MPI_Comm_dup(newest, c);
                if (err != MPI_SUCCESS) fail("MPI_Comm_dup(intercommunicator)", i, err);
            }
            MPI_Comm_rank(*c, &r);
            /* Local rank 0 of each side swaps with the other side's rank 0. */
            if (r == 0) {
                err = MPI_Sendrecv(&i, 1, MPI_INT, 0, 3, &got, 1, MPI_INT, 0, 3, *c, MPI_STATUS_IGNORE);
                if (err != MPI_SUCCESS || got != i) fail("intercommunicator exchange", i, err);
            }
        }
        for (i = 0; i < W; i++)
            if (w[i] != MPI_COMM_NULL) MPI_Comm_free(&w[i]);
        MPI_Comm_free(&half);
        if (rank == 0) printf("ctx_reuse: %s passed\n", part);
    } else if (!strcmp(part, "window") || !strcmp(part, "shrink-window")) {
        enum { W = 8 };
        int shrink = !strcmp(part, "shrink-window");
        MPI_Comm w[W];
        MPI_Group wg;
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        for (i = 0; i < W; i++) w[i] = MPI_COMM_NULL;
        for (i = 0; i < n; i++) {
            MPI_Comm *c = &w[i % W];
            if (*c != MPI_COMM_NULL) {
                err = MPI_Comm_free(c);
                if (err != MPI_SUCCESS) fail("MPI_Comm_free", i, err);
            }
            if (shrink) {
                err = MPIX_Comm_shrink(MPI_COMM_WORLD, c);
                if (err != MPI_SUCCESS) fail("MPIX_Comm_shrink", i, err);
            } else if (i % 3 == 0) {
                err = MPI_Comm_dup(MPI_COMM_WORLD, c);
                if (err != MPI_SUCCESS) fail("MPI_Comm_dup", i, err);
            } else if (i % 3 == 1) {
                MPI_Request r;
                err = MPI_Comm_idup(MPI_COMM_WORLD, c, &r);
                if (err == MPI_SUCCESS) err = MPI_Wait(&r, MPI_STATUS_IGNORE);
                if (err != MPI_SUCCESS) fail("MPI_Comm_idup", i, err);
            } else {
                err = MPI_Comm_create_group(MPI_COMM_WORLD, wg, 9, c);
                if (err != MPI_SUCCESS) fail("MPI_Comm_create_group", i, err);
            }
            check(*c, i);
            /* The oldest one alive still carries messages. */
            check(w[(i + 1) % W] != MPI_COMM_NULL ? w[(i + 1) % W] : *c, i);
        }
        for (i = 0; i < W; i++)
            if (w[i] != MPI_COMM_NULL) MPI_Comm_free(&w[i]);
        MPI_Group_free(&wg);
        if (rank == 0) printf("ctx_reuse: %s passed\n", part);
    } else {
        MPI_Group wg, sub;
        int first = 0;
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_incl(wg, 1, &first, &sub);
        for (i = 0; i < n; i++) {
            MPI_Comm c = MPI_COMM_NULL;
            if (!strcmp(part, "dup")) {
                err = MPI_Comm_dup(MPI_COMM_WORLD, &c);
                if (err != MPI_SUCCESS) fail("MPI_Comm_dup", i, err);
            } else if (!strcmp(part, "split")) {
                err = MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &c);
                if (err != MPI_SUCCESS) fail("MPI_Comm_split", i, err);
            } else if (!strcmp(part, "create")) {
                /* World minus rank 0's group on odd iterations, the whole world on even. */
                err = MPI_Comm_create(MPI_COMM_WORLD, i % 2 ? sub : wg, &c);
                if (err != MPI_SUCCESS) fail("MPI_Comm_create", i, err);
            } else if (!strcmp(part, "inter")) {
                MPI_Comm half;
                int color = rank % 2;
                MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
                err = MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 5, &c);
                if (err != MPI_SUCCESS) fail("MPI_Intercomm_create", i, err);
                MPI_Comm_free(&half);
            } else {
                fprintf(stderr, "unknown part %s\n", part);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            if (c != MPI_COMM_NULL) {
                if (!strcmp(part, "inter")) {
                    int r, got = -1;
                    MPI_Comm_rank(c, &r);
                    /* Rank r of each side swaps with rank r of the other. */
                    err = MPI_Sendrecv(&i, 1, MPI_INT, r, 3, &got, 1, MPI_INT, r, 3, c, MPI_STATUS_IGNORE);
                    if (err != MPI_SUCCESS || got != i) fail("intercommunicator exchange", i, err);
                } else {
                    check(c, i);
                }
                err = MPI_Comm_free(&c);
                if (err != MPI_SUCCESS) fail("MPI_Comm_free", i, err);
            }
        }
        MPI_Group_free(&sub);
        MPI_Group_free(&wg);
        if (rank == 0) printf("ctx_reuse: %s passed\n", part);
    }
    MPI_Finalize();
    return 0;
}
