/* Per-peer performance variables bound to communicators on 3 ranks: a handle on
 * pml_ox_comm_peer_{msgs,bytes}_{sent,recv} has one value per rank of its communicator
 * (the count MPI_T_pvar_handle_alloc returns is the communicator's size) and counts only
 * the traffic on that communicator with each peer, itself included; readreset, reset and
 * write act on every value. Rank 0 prints deterministic lines. */
#include "check.h"
#include <stdlib.h>
#include <string.h>

#define T_CHECK(call) CHECK((call) == MPI_SUCCESS)
#define N 3

static MPI_T_pvar_session s;

static int index_of(const char *name)
{
    int i = -1, bind = -1, cls = -1;
    T_CHECK(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &i));
    T_CHECK(MPI_T_pvar_get_info(i, NULL, NULL, NULL, &cls, NULL, NULL, NULL, NULL, &bind, NULL,
                                NULL, NULL));
    CHECK(bind == MPI_T_BIND_MPI_COMM && cls == MPI_T_PVAR_CLASS_COUNTER);
    return i;
}

/* A handle on variable `i` bound to `comm`; its count must be `want`. */
static MPI_T_pvar_handle bound(int i, MPI_Comm *comm, int want)
{
    MPI_T_pvar_handle h;
    int count = -1;
    T_CHECK(MPI_T_pvar_handle_alloc(s, i, comm, &h, &count));
    CHECK(count == want);
    return h;
}

static void readv(MPI_T_pvar_handle h, unsigned long long *v)
{
    T_CHECK(MPI_T_pvar_read(s, h, v));
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == N);
    T_CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    T_CHECK(MPI_T_pvar_session_create(&s));
    int ms = index_of("pml_ox_comm_peer_msgs_sent"), bs = index_of("pml_ox_comm_peer_bytes_sent");
    int mr = index_of("pml_ox_comm_peer_msgs_recv"), br = index_of("pml_ox_comm_peer_bytes_recv");

    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    /* b: rank 0 alone, ranks 1 and 2 together (b's rank = world rank - 1). */
    MPI_Comm_split(MPI_COMM_WORLD, rank > 0, rank, &b);
    int bsize = rank > 0 ? 2 : 1;
    MPI_T_pvar_handle hms = bound(ms, &a, N), hbs = bound(bs, &a, N);
    MPI_T_pvar_handle hmr = bound(mr, &a, N), hbr = bound(br, &a, N);
    MPI_T_pvar_handle hbb = bound(bs, &b, bsize);
    MPI_Barrier(MPI_COMM_WORLD);

    /* On a: (rank+1)*(peer+1) bytes to every rank, itself included. */
    char sbuf[N][16] = {{0}}, rbuf[N][16];
    MPI_Request rq[2 * N];
    for (int p = 0; p < N; p++)
        MPI_Irecv(rbuf[p], 16, MPI_CHAR, p, 5, a, &rq[p]);
    for (int p = 0; p < N; p++)
        MPI_Isend(sbuf[p], (rank + 1) * (p + 1), MPI_CHAR, p, 5, a, &rq[N + p]);
    MPI_Waitall(2 * N, rq, MPI_STATUSES_IGNORE);
    /* On b: ranks 1 and 2 exchange 7 bytes; on MPI_COMM_WORLD (not counted): 9 bytes. */
    if (rank > 0) {
        int peer = 1 - (rank - 1);
        MPI_Sendrecv(sbuf[0], 7, MPI_CHAR, peer, 6, rbuf[0], 16, MPI_CHAR, peer, 6, b,
                     MPI_STATUS_IGNORE);
    }
    MPI_Sendrecv(sbuf[0], 9, MPI_CHAR, (rank + 1) % N, 7, rbuf[0], 16, MPI_CHAR,
                 (rank + N - 1) % N, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    unsigned long long vms[N], vbs[N], vmr[N], vbr[N], vb[2] = {0, 0};
    readv(hms, vms);
    readv(hbs, vbs);
    readv(hmr, vmr);
    readv(hbr, vbr);
    readv(hbb, vb);
    if (getenv("MPIT_PEER_DEBUG"))
        for (int p = 0; p < N; p++)
            fprintf(stderr, "rank %d peer %d: %llu %llu %llu %llu\n", rank, p, vms[p], vbs[p],
                    vmr[p], vbr[p]);
    for (int p = 0; p < N; p++) {
        CHECK(vms[p] == 1 && vmr[p] == 1);
        CHECK(vbs[p] == (unsigned long long)((rank + 1) * (p + 1)));
        CHECK(vbr[p] == (unsigned long long)((p + 1) * (rank + 1)));
    }
    if (rank > 0)
        CHECK(vb[rank - 1] == 0 && vb[2 - rank] == 7);
    else
        CHECK(vb[0] == 0);
    if (rank == 0)
        printf("mpit_peer: rank 0 on a: bytes sent %llu %llu %llu, received %llu %llu %llu\n",
               vbs[0], vbs[1], vbs[2], vbr[0], vbr[1], vbr[2]);

    MPI_Barrier(MPI_COMM_WORLD); /* everyone has read before more traffic on a */

    /* readreset returns the values and zeroes them all; write sets every value. */
    unsigned long long z[N];
    T_CHECK(MPI_T_pvar_readreset(s, hbs, z));
    CHECK(memcmp(z, vbs, sizeof z) == 0);
    readv(hbs, z);
    CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
    unsigned long long w[N] = {10, 20, 30};
    T_CHECK(MPI_T_pvar_write(s, hbs, w));
    MPI_Send(sbuf[0], 4, MPI_CHAR, (rank + 1) % N, 8, a);
    MPI_Recv(rbuf[0], 16, MPI_CHAR, (rank + N - 1) % N, 8, a, MPI_STATUS_IGNORE);
    readv(hbs, z);
    for (int p = 0; p < N; p++)
        CHECK(z[p] == w[p] + (p == (rank + 1) % N ? 4 : 0));
    T_CHECK(MPI_T_pvar_reset(s, MPI_T_PVAR_ALL_HANDLES));
    readv(hms, z);
    CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
    if (rank == 0)
        printf("mpit_peer: counts %d on a, %d on b; written 10 20 30, then %llu %llu %llu\n", N,
               bsize, w[0], w[1] + 4, w[2]);

    T_CHECK(MPI_T_pvar_session_free(&s));
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    T_CHECK(MPI_T_finalize());
    MPI_Finalize();
    if (rank == 0)
        printf("mpit_peer: all checks passed\n");
    return 0;
}
