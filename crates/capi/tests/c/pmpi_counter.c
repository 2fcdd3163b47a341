/* A PMPI tool of our own: preloaded (LD_PRELOAD) or linked before -lmpi, it intercepts a
 * few MPI_ functions, counts the calls and forwards them to their PMPI_ names; at
 * MPI_Finalize each rank prints its counts in rank order. Collectives implemented over
 * point-to-point inside the library must not show up as MPI_Send/MPI_Recv calls. */
#include <mpi.h>
#include <stdio.h>

enum { INIT, SEND, RECV, ISEND, IRECV, WAIT, SENDRECV, BCAST, ALLREDUCE, BARRIER, TYPE_FREE,
       TYPE_COMMIT, TYPE_SIZE, TYPE_SIZE_C, TYPE_GET_EXTENT, TYPE_GET_EXTENT_C, TYPE_GET_ENVELOPE,
       TYPE_GET_ENVELOPE_C, N };
static const char *names[N] = {"Init", "Send", "Recv", "Isend", "Irecv", "Wait",
                               "Sendrecv", "Bcast", "Allreduce", "Barrier", "Type_free",
                               "Type_commit", "Type_size", "Type_size_c", "Type_get_extent",
                               "Type_get_extent_c", "Type_get_envelope", "Type_get_envelope_c"};
static long counts[N];

int MPI_Init(int *argc, char ***argv)
{
    counts[INIT]++;
    return PMPI_Init(argc, argv);
}

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    counts[SEND]++;
    return PMPI_Send(buf, count, dt, dest, tag, comm);
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
             MPI_Status *st)
{
    counts[RECV]++;
    return PMPI_Recv(buf, count, dt, src, tag, comm, st);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    counts[ISEND]++;
    return PMPI_Isend(buf, count, dt, dest, tag, comm, req);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    counts[IRECV]++;
    return PMPI_Irecv(buf, count, dt, src, tag, comm, req);
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
    counts[WAIT]++;
    return PMPI_Wait(req, st);
}

int MPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int dest, int stag, void *rb, int rc,
                 MPI_Datatype rt, int src, int rtag, MPI_Comm comm, MPI_Status *s)
{
    counts[SENDRECV]++;
    return PMPI_Sendrecv(sb, sc, st, dest, stag, rb, rc, rt, src, rtag, comm, s);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    counts[BCAST]++;
    return PMPI_Bcast(buf, count, dt, root, comm);
}

int MPI_Allreduce(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    counts[ALLREDUCE]++;
    return PMPI_Allreduce(sb, rb, count, dt, op, comm);
}

int MPI_Barrier(MPI_Comm comm)
{
    counts[BARRIER]++;
    return PMPI_Barrier(comm);
}

int MPI_Type_free(MPI_Datatype *dt)
{
    counts[TYPE_FREE]++;
    return PMPI_Type_free(dt);
}

int MPI_Type_commit(MPI_Datatype *dt)
{
    counts[TYPE_COMMIT]++;
    return PMPI_Type_commit(dt);
}

int MPI_Type_size(MPI_Datatype dt, int *size)
{
    counts[TYPE_SIZE]++;
    return PMPI_Type_size(dt, size);
}

int MPI_Type_size_c(MPI_Datatype dt, MPI_Count *size)
{
    counts[TYPE_SIZE_C]++;
    return PMPI_Type_size_c(dt, size);
}

int MPI_Type_get_extent(MPI_Datatype dt, MPI_Aint *lb, MPI_Aint *extent)
{
    counts[TYPE_GET_EXTENT]++;
    return PMPI_Type_get_extent(dt, lb, extent);
}

int MPI_Type_get_extent_c(MPI_Datatype dt, MPI_Count *lb, MPI_Count *extent)
{
    counts[TYPE_GET_EXTENT_C]++;
    return PMPI_Type_get_extent_c(dt, lb, extent);
}

int MPI_Type_get_envelope(MPI_Datatype dt, int *ni, int *na, int *nd, int *combiner)
{
    counts[TYPE_GET_ENVELOPE]++;
    return PMPI_Type_get_envelope(dt, ni, na, nd, combiner);
}

int MPI_Type_get_envelope_c(MPI_Datatype dt, MPI_Count *ni, MPI_Count *na, MPI_Count *nc,
                            MPI_Count *nd, int *combiner)
{
    counts[TYPE_GET_ENVELOPE_C]++;
    return PMPI_Type_get_envelope_c(dt, ni, na, nc, nd, combiner);
}

int MPI_Finalize(void)
{
    int rank, size;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int r = 0; r < size; r++) {
        if (r == rank) {
            printf("pmpi rank %d:", rank);
            for (int i = 0; i < N; i++)
                printf(" %s=%ld", names[i], counts[i]);
            printf("\n");
            fflush(stdout);
        }
        PMPI_Barrier(MPI_COMM_WORLD);
    }
    return PMPI_Finalize();
}
