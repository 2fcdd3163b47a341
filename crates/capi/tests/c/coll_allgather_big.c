/* Allgather and allgatherv past the shared-memory segment's blocks (point to point), out of
 * place and in place: out of place the first exchange sends our block straight from the
 * send buffer and copies it into the receive buffer afterwards, so the receive buffer is
 * filled with garbage before every call and the contents change from call to call (a block
 * sent from the receive buffer before the copy, or the copy forgotten, shows as garbage or
 * as the previous call's data). Block sizes 1, 4095, 4096, 4097, 16383, 16384, 65536 and
 * 262145 bytes of MPI_CHAR, MPI_INT of the same sizes, a strided type with holes (the
 * holes must stay untouched), and allgatherv with uneven and empty blocks in reverse
 * order with guard bytes between them; blocking and nonblocking (MPI_Iallgather(v) and a
 * wait) in alternate rounds. Prints "coll_allgather_big: all checks passed". */
#include "check.h"
#include <string.h>

static int rank, size;
static int nb; /* 1: MPI_Iallgather(v) and a wait instead */

#define GARBAGE 0x5a
#define GUARD 0x3c

static unsigned char val(int r, int it, size_t k) {
    return (unsigned char)((r * 131 + it * 17 + k * 7 + k / 251) % 253);
}

/* Allgather of `n` bytes per rank, as `count` items of `t` (`ext` bytes apart in memory,
 * the first byte of each item data, the others holes), out of place or in place. */
static void allgather_case(size_t n, MPI_Datatype t, int count, int ext, int in_place, int it) {
    size_t item = n / (size_t)count; /* data bytes per item */
    size_t blk = (size_t)count * (size_t)ext;
    unsigned char *s = malloc(blk + 1), *r = malloc(blk * (size_t)size + 1);
    CHECK(s && r);
    memset(s, GUARD, blk);
    memset(r, GARBAGE, blk * (size_t)size);
    unsigned char *mine = in_place ? r + blk * (size_t)rank : s;
    if (in_place) memset(mine, GUARD, blk);
    for (int i = 0; i < count; i++)
        for (size_t b = 0; b < item; b++) mine[(size_t)i * ext + b] = val(rank, it, (size_t)i * item + b);
    if (ext > (int)item && !in_place) /* holes of the receive buffer: GUARD too */
        for (size_t x = 0; x < blk * (size_t)size; x++)
            if (x % (size_t)ext >= item) r[x] = GUARD;
    if (in_place) {
        for (int j = 0; j < size; j++)
            if (j != rank)
                for (size_t x = 0; x < blk; x++)
                    if (x % (size_t)ext >= item) r[(size_t)j * blk + x] = GUARD;
    }
    const void *sb = in_place ? MPI_IN_PLACE : s;
    if (nb) {
        MPI_Request rq;
        CHECK_RC(MPI_Iallgather(sb, count, t, r, count, t, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    } else
        CHECK_RC(MPI_Allgather(sb, count, t, r, count, t, MPI_COMM_WORLD));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++)
            for (size_t b = 0; b < (size_t)ext; b++) {
                unsigned char got = r[(size_t)j * blk + (size_t)i * ext + b];
                unsigned char want = b < item ? val(j, it, (size_t)i * item + b) : GUARD;
                if (got != want) {
                    fprintf(stderr, "rank %d: %sallgather %zu B %s it %d: block %d item %d byte %zu: %d != %d\n",
                            rank, nb ? "i" : "", n, in_place ? "in place" : "out of place", it, j, i, b, got, want);
                    CHECK(got == want);
                }
            }
    free(s);
    free(r);
}

/* Allgatherv of MPI_CHAR: rank j contributes `cnt(j)` bytes (every third rank none), the
 * blocks laid out in reverse rank order with GUARD gaps of 3 bytes between them. */
static size_t cnt(size_t base, int j) { return j % 3 == 1 ? 0 : base + (size_t)j * 7; }

static void allgatherv_case(size_t base, int in_place, int it) {
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    CHECK(counts && displs);
    size_t end = 3;
    for (int j = size - 1; j >= 0; j--) {
        counts[j] = (int)cnt(base, j);
        displs[j] = (int)end;
        end += (size_t)counts[j] + 3;
    }
    unsigned char *s = malloc(cnt(base, rank) + 1), *r = malloc(end);
    CHECK(s && r);
    memset(r, GUARD, end);
    for (int j = 0; j < size; j++) memset(r + displs[j], GARBAGE, (size_t)counts[j]);
    unsigned char *mine = in_place ? r + displs[rank] : s;
    for (size_t k = 0; k < (size_t)counts[rank]; k++) mine[k] = val(rank, it, k);
    const void *sb = in_place ? MPI_IN_PLACE : s;
    if (nb) {
        MPI_Request rq;
        CHECK_RC(MPI_Iallgatherv(sb, counts[rank], MPI_CHAR, r, counts, displs, MPI_CHAR, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    } else
        CHECK_RC(MPI_Allgatherv(sb, counts[rank], MPI_CHAR, r, counts, displs, MPI_CHAR, MPI_COMM_WORLD));
    for (size_t x = 0; x < end; x++) {
        int in = -1;
        for (int j = 0; j < size; j++)
            if (x >= (size_t)displs[j] && x < (size_t)displs[j] + (size_t)counts[j]) in = j;
        unsigned char want = in < 0 ? GUARD : val(in, it, x - (size_t)displs[in]);
        if (r[x] != want) {
            fprintf(stderr, "rank %d: %sallgatherv base %zu %s it %d: byte %zu (block %d): %d != %d\n", rank,
                    nb ? "i" : "", base, in_place ? "in place" : "out of place", it, x, in, r[x], want);
            CHECK(r[x] == want);
        }
    }
    free(s);
    free(r);
    free(counts);
    free(displs);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    MPI_Datatype strided;
    CHECK_RC(MPI_Type_create_resized(MPI_CHAR, 0, 2, &strided));
    CHECK_RC(MPI_Type_commit(&strided));
    const size_t sizes[] = {1, 4095, 4096, 4097, 16383, 16384, 65536, 262145};
    for (int it = 0; it < 4; it++) {
        nb = it % 2;
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            for (int ip = 0; ip < 2; ip++) {
                allgather_case(n, MPI_CHAR, (int)n, 1, ip, it);
                if (n % 4 == 0) allgather_case(n, MPI_INT, (int)(n / 4), 4, ip, it);
                allgather_case(n, strided, (int)n, 2, ip, it);
                allgatherv_case(n, ip, it);
            }
        }
    }
    CHECK_RC(MPI_Type_free(&strided));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("coll_allgather_big: all checks passed\n");
    MPI_Finalize();
    return 0;
}
