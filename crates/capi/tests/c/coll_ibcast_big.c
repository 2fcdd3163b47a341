/* Nonblocking broadcasts of 256 KiB to 1 MiB, which on more than 2 ranks that yield when idle
 * go through the segment's nonblocking large region: the root copies its data into its slot
 * and its request ends at once; the other ranks copy it out of the root's slot in their
 * progress. Smaller and larger ones (and those of ranks that spin) take other paths.
 *
 * For each size around the bounds and each root:
 * - the root posts broadcast A and tests it at once; the others post A only once the root
 *   sent them a token after that test (and after its post of B), so that nobody has read
 *   anything yet. Rank 0 prints whether the root's request had
 *   ended at its first test ("root ended at its post: yes" if it did for every size from
 *   256 KiB to 1 MiB, "no" if it did for none, "mixed" otherwise; on more than 2 ranks
 *   sizes outside that range must never end there, since their root waits for its
 *   readers).
 * - once A ended, the root overwrites A's buffer (its data must already be elsewhere) and
 *   posts broadcast B (other data) from the same root: B's copy into the root's slot must
 *   wait until every rank has read A out of it, although the root's A ended long before.
 * - every rank checks A and B byte for byte, and that the bytes past the count stay
 *   untouched; A and B are completed in either order.
 * - then three broadcasts from three roots and a 512 KiB allreduce (which shares the large
 *   region) outstanding together, completed in reverse order.
 * Rank 0 prints "coll_ibcast_big: all checks passed" at the end.
 * Argument: number of rounds. */
#include "check.h"
#include <stdint.h>
#include <string.h>

static int rank, size;

static unsigned char val(int round, int root, int which, long k) {
    return (unsigned char)((k * 131 + root * 17 + which * 59 + round * 7 + (k >> 12)) % 251);
}

static void fill(unsigned char *b, long n, int round, int root, int which) {
    for (long k = 0; k < n; k++) b[k] = val(round, root, which, k);
}

static void expect(const unsigned char *b, long n, int round, int root, int which) {
    for (long k = 0; k < n; k++)
        if (b[k] != val(round, root, which, k)) {
            fprintf(stderr, "rank %d: bcast %d from %d of %ld bytes: byte %ld is %d, not %d\n",
                    rank, which, root, n, k, b[k], val(round, root, which, k));
            CHECK(0);
        }
    for (int k = 0; k < 16; k++) CHECK(b[n + k] == 0xa5);
}

/* Buffers of n bytes and a guard of 16 bytes (0xa5) after them; zeroed elsewhere than at
 * the root. */
static unsigned char *buffer(long n) {
    unsigned char *b = malloc((size_t)n + 16);
    CHECK(b != NULL);
    memset(b, 0, (size_t)n);
    memset(b + n, 0xa5, 16);
    return b;
}

/* One size and root: A and B as described above; returns whether the root's A ended at
 * its first test (rank `root` only; 0 elsewhere). */
static int two_from_one_root(long n, int root, int round, int order) {
    unsigned char *a = buffer(n), *b = buffer(n);
    MPI_Request rq[2];
    int ended = 0;
    int token = 0;
    if (rank == root) {
        fill(a, n, round, root, 0);
        fill(b, n, round, root, 1);
        CHECK_RC(MPI_Ibcast(a, (int)n, MPI_UNSIGNED_CHAR, root, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Test(&rq[0], &ended, MPI_STATUS_IGNORE));
        /* Ours again once ended: a rank that still read it from here would see this. */
        if (ended) memset(a, 0x3c, (size_t)n);
        CHECK_RC(MPI_Ibcast(b, (int)n, MPI_UNSIGNED_CHAR, root, MPI_COMM_WORLD, &rq[1]));
        /* Only now may the others post A. */
        for (int r = 0; r < size; r++)
            if (r != root) CHECK_RC(MPI_Send(&token, 1, MPI_INT, r, 7, MPI_COMM_WORLD));
        if (!ended) CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        memset(a, 0x3c, (size_t)n);
        CHECK_RC(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        for (long k = 0; k < n; k++) CHECK(b[k] == val(round, root, 1, k));
    } else {
        /* Nobody reads A before the root tested it and posted B. */
        CHECK_RC(MPI_Recv(&token, 1, MPI_INT, root, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Ibcast(a, (int)n, MPI_UNSIGNED_CHAR, root, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Ibcast(b, (int)n, MPI_UNSIGNED_CHAR, root, MPI_COMM_WORLD, &rq[1]));
        CHECK_RC(MPI_Wait(&rq[order], MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Wait(&rq[1 - order], MPI_STATUS_IGNORE));
        expect(a, n, round, root, 0);
        expect(b, n, round, root, 1);
    }
    free(a);
    free(b);
    return ended;
}

/* Three broadcasts from three roots and an allreduce of 512 KiB outstanding together,
 * completed in reverse order. */
static void mixed(long n, int round) {
    enum { NB = 3 };
    unsigned char *b[NB];
    MPI_Request rq[NB + 1];
    long m = 512 * 1024 / 4;
    int *x = malloc(sizeof(int) * (size_t)m), *y = malloc(sizeof(int) * (size_t)m);
    CHECK(x != NULL && y != NULL);
    for (long k = 0; k < m; k++) x[k] = (int)((k + rank + round) % 1000);
    for (int i = 0; i < NB; i++) {
        int root = (round + i) % size;
        b[i] = buffer(n);
        if (rank == root) fill(b[i], n, round, root, 2 + i);
        CHECK_RC(MPI_Ibcast(b[i], (int)n, MPI_UNSIGNED_CHAR, root, MPI_COMM_WORLD, &rq[i]));
        if (i == 1)
            CHECK_RC(MPI_Iallreduce(x, y, (int)m, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[NB]));
    }
    for (int i = NB; i >= 0; i--) CHECK_RC(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
    for (int i = 0; i < NB; i++) {
        int root = (round + i) % size;
        if (rank != root) expect(b[i], n, round, root, 2 + i);
        free(b[i]);
    }
    for (long k = 0; k < m; k++) {
        long want = 0;
        for (int r = 0; r < size; r++) want += (k + r + round) % 1000;
        CHECK(y[k] == want);
    }
    free(x);
    free(y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    int rounds = argc > 1 ? atoi(argv[1]) : 1;
    /* A blocking collective first: it makes the communicator's segment. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    const long lo = 256 * 1024, hi = 1024 * 1024;
    long sizes[] = {lo - 1, lo, lo + 1, 300001, hi - 1, hi, hi + 1};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    int in_range = 0, at_post = 0, outside = 0;
    for (int round = 0; round < rounds; round++)
        for (int s = 0; s < NS; s++)
            for (int root = 0; root < size; root++) {
                int ended = two_from_one_root(sizes[s], root, round, (s + root) % 2);
                /* Every earlier broadcast ended everywhere before the next size's A. */
                CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
                int any = 0;
                CHECK_RC(MPI_Allreduce(&ended, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
                if (sizes[s] >= lo && sizes[s] <= hi) {
                    in_range++;
                    at_post += any;
                } else {
                    outside += any;
                }
            }
    for (int round = 0; round < rounds; round++) {
        mixed(lo + 5, round);
        mixed(hi, round);
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK(size <= 2 || outside == 0);
        printf("coll_ibcast_big: root ended at its post: %s\n",
               at_post == in_range ? "yes" : at_post == 0 ? "no" : "mixed");
        printf("coll_ibcast_big: all checks passed\n");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
