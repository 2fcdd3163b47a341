/* Large messages between every pair of ranks, several in flight at once, checked byte by
 * byte: over tcp with several connections per peer (btl_tcp_links, or two paired interfaces)
 * their fragments are striped over the connections and must land in place. Prints
 * "stripe: ok on N ranks" from rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define INFLIGHT 4

static unsigned char pattern(int from, int msg, size_t i) {
    return (unsigned char)(from * 31 + msg * 7 + i * 13 + (i >> 12));
}

int main(int argc, char **argv) {
    int rank, size, errors = 0;
    const size_t sizes[] = {(size_t)4 << 20, ((size_t)1 << 20) + 4093, 300000};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int s = 0; s < 3; s++) {
        size_t n = sizes[s];
        for (int d = 1; d < size; d++) {
            int to = (rank + d) % size, from = (rank - d + size) % size;
            unsigned char *out[INFLIGHT], *in[INFLIGHT];
            MPI_Request reqs[2 * INFLIGHT];
            for (int m = 0; m < INFLIGHT; m++) {
                out[m] = malloc(n);
                in[m] = malloc(n);
                for (size_t i = 0; i < n; i++) out[m][i] = pattern(rank, m, i);
                MPI_Irecv(in[m], (int)n, MPI_BYTE, from, m, MPI_COMM_WORLD, &reqs[2 * m]);
                MPI_Isend(out[m], (int)n, MPI_BYTE, to, m, MPI_COMM_WORLD, &reqs[2 * m + 1]);
            }
            MPI_Waitall(2 * INFLIGHT, reqs, MPI_STATUSES_IGNORE);
            for (int m = 0; m < INFLIGHT; m++) {
                for (size_t i = 0; i < n; i++) {
                    if (in[m][i] != pattern(from, m, i)) {
                        if (errors++ < 5)
                            fprintf(stderr, "rank %d: message %d of %zu bytes from %d: byte %zu\n",
                                    rank, m, n, from, i);
                        break;
                    }
                }
                free(out[m]);
                free(in[m]);
            }
        }
    }
    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all == 0)
            printf("stripe: ok on %d ranks\n", size);
        else
            printf("stripe: %d errors\n", all);
    }
    MPI_Finalize();
    return all != 0;
}
