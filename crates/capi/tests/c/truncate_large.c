/* Truncation of large messages (2 ranks): a message of 16 KiB or more received into a
 * smaller buffer gives MPI_ERR_TRUNCATE (with MPI_ERRORS_RETURN), a count of the buffer's
 * size, the message's first bytes in the buffer and nothing written past it; the message
 * after it, from the same sender, arrives whole and intact. The cases cover the paths of the
 * transports: a receive shorter than 16 KiB (pml cm on ofi_rxm/ofi_rxd: through a 16 KiB
 * bounce buffer) of a message that fits the bounce buffer and of one longer than it, and
 * receives of 16 KiB or more (the provider's or the engine's rendezvous) of messages up to
 * 1 MiB; each received by MPI_Recv, MPI_Irecv or MPI_Mprobe then MPI_Mrecv (the claimed
 * receive of pml cm). */
#include "check.h"
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define NEXT 5000

static unsigned char byte_at(int seed, size_t i) { return (unsigned char)(seed * 131 + i * 7 + (i >> 9)); }

static unsigned char *pattern(size_t len, int seed)
{
    unsigned char *p = malloc(len ? len : 1);
    CHECK(p != NULL);
    for (size_t i = 0; i < len; i++) p[i] = byte_at(seed, i);
    return p;
}

int main(int argc, char **argv)
{
    int rank, size;
    /* (message length, receive buffer length) */
    static const size_t cases[][2] = {
        {16384, 100},         /* the whole message fits the bounce buffer */
        {20000, 1000},        /* longer than the bounce buffer */
        {100000, 16383},      /* longest receive through the bounce buffer */
        {65536, 16384},       /* shortest receive without it */
        {300000, 200001},     /* rendezvous, most of it placed */
        {1 << 20, 65536},     /* 1 MiB into 64 KiB */
        {(1 << 20) + 13, 0},  /* into nothing */
    };
    const int n = (int)(sizeof cases / sizeof cases[0]);
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2);
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    for (int k = 0; k < n; k++) {
        size_t len = cases[k][0], cap = cases[k][1];
        unsigned char *msg = pattern(len, k), *next = pattern(NEXT, 100 + k);
        if (rank == 0) {
            CHECK_RC(MPI_Send(msg, (int)len, MPI_BYTE, 1, k, MPI_COMM_WORLD));
            CHECK_RC(MPI_Send(next, NEXT, MPI_BYTE, 1, 100 + k, MPI_COMM_WORLD));
        } else {
            unsigned char *buf = malloc(cap + GUARD);
            CHECK(buf != NULL);
            memset(buf, 0xAA, cap + GUARD);
            MPI_Status st;
            int rc, count = -1;
            if (k % 3 == 0) {
                rc = MPI_Recv(buf, (int)cap, MPI_BYTE, 0, k, MPI_COMM_WORLD, &st);
            } else if (k % 3 == 2) {
                /* claimed: the probe sees the whole length, the receive truncates */
                MPI_Message m;
                CHECK_RC(MPI_Mprobe(0, k, MPI_COMM_WORLD, &m, &st));
                CHECK_RC(MPI_Get_count(&st, MPI_BYTE, &count));
                CHECK((size_t)count == len);
                rc = MPI_Mrecv(buf, (int)cap, MPI_BYTE, &m, &st);
                CHECK(m == MPI_MESSAGE_NULL);
            } else {
                /* nonblocking: the error comes from MPI_Wait and sits in the status */
                MPI_Request rq;
                CHECK_RC(MPI_Irecv(buf, (int)cap, MPI_BYTE, 0, k, MPI_COMM_WORLD, &rq));
                rc = MPI_Wait(&rq, &st);
                CHECK(st.MPI_ERROR == rc);
            }
            if (class_of_rc(rc) != MPI_ERR_TRUNCATE)
                fprintf(stderr, "case %d (%zu into %zu): error class %d\n", k, len, cap, class_of_rc(rc));
            CHECK(class_of_rc(rc) == MPI_ERR_TRUNCATE);
            CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == k);
            CHECK_RC(MPI_Get_count(&st, MPI_BYTE, &count));
            if ((size_t)count != cap)
                fprintf(stderr, "case %d (%zu into %zu): count %d\n", k, len, cap, count);
            CHECK((size_t)count == cap);
            CHECK(memcmp(buf, msg, cap) == 0);
            for (size_t i = cap; i < cap + GUARD; i++) CHECK(buf[i] == 0xAA);
            /* the next message from the same sender, whole */
            unsigned char got[NEXT];
            memset(got, 0, NEXT);
            CHECK_RC(MPI_Recv(got, NEXT, MPI_BYTE, 0, 100 + k, MPI_COMM_WORLD, &st));
            CHECK_RC(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK(count == NEXT && memcmp(got, next, NEXT) == 0);
            printf("case %d: %zu B into %zu B: truncated, next intact\n", k, len, cap);
            free(buf);
        }
        free(msg);
        free(next);
    }
    int v = 0;
    CHECK_RC(MPI_Sendrecv(&v, 1, MPI_INT, 1 - rank, 90, &v, 1, MPI_INT, 1 - rank, 90, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Finalize());
    if (rank == 1) printf("truncate_large: all checks passed\n");
    return 0;
}
