/* A ring of messages of growing size (eager to several MiB, so rendezvous fragments cross
   the network transports), then both neighbours exchanging large messages at once, a
   synchronous send around the ring and an allreduce. Run by tests/tcp.rs. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s line %d\n", #c, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    size_t max = 4u << 20;
    unsigned char *out = malloc(max), *in = malloc(max);
    for (size_t len = 0; len <= max; len = len ? len * 4 : 1) {
        for (size_t i = 0; i < len; i++) out[i] = (unsigned char)(i * 7 + rank);
        MPI_Status st;
        MPI_Sendrecv(out, (int)len, MPI_BYTE, next, 1, in, (int)len, MPI_BYTE, MPI_ANY_SOURCE,
                     1, MPI_COMM_WORLD, &st);
        int n;
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(n == (int)len && st.MPI_SOURCE == prev);
        for (size_t i = 0; i < len; i++) CHECK(in[i] == (unsigned char)(i * 7 + prev));
    }
    /* Everyone sends a large message to both neighbours before receiving. */
    MPI_Request r[4];
    unsigned char *in2 = malloc(max);
    MPI_Isend(out, (int)max, MPI_BYTE, next, 2, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(out, (int)max, MPI_BYTE, prev, 3, MPI_COMM_WORLD, &r[1]);
    MPI_Irecv(in, (int)max, MPI_BYTE, prev, 2, MPI_COMM_WORLD, &r[2]);
    MPI_Irecv(in2, (int)max, MPI_BYTE, next, 3, MPI_COMM_WORLD, &r[3]);
    MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
    for (size_t i = 0; i < max; i++) {
        CHECK(in[i] == (unsigned char)(i * 7 + prev));
        CHECK(in2[i] == (unsigned char)(i * 7 + next));
    }
    /* Synchronous send around the ring. */
    int token = rank;
    if (rank == 0) {
        MPI_Ssend(&token, 1, MPI_INT, next, 4, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(token == size - 1);
    } else {
        MPI_Recv(&token, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(token == rank - 1);
        token = rank;
        MPI_Ssend(&token, 1, MPI_INT, next, 4, MPI_COMM_WORLD);
    }
    long sum = rank, total;
    MPI_Allreduce(&sum, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == (long)size * (size - 1) / 2);
    if (rank == 0) printf("ring: ok on %d ranks\n", size);
    free(out); free(in); free(in2);
    MPI_Finalize();
    return 0;
}
