/* A 1-D decomposed 2-D Jacobi stencil: each rank owns a band of rows, exchanges halo rows
 * with its neighbours (MPI_Isend/MPI_Irecv/MPI_Waitall) every iteration and agrees on the
 * residual with MPI_Allreduce every 10. Used as the example of `mpirun --profile`:
 *   mpicc stencil.c -o stencil && mpirun -n 4 --profile=prof ./stencil */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX 512
#define ROWS 128
#define ITERS 200

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Rows 0 and ROWS+1 are halos. */
    double *a = calloc((size_t)(ROWS + 2) * NX, sizeof(double));
    double *b = calloc((size_t)(ROWS + 2) * NX, sizeof(double));
    if (rank == 0)
        for (int x = 0; x < NX; x++)
            a[NX + x] = b[NX + x] = 100.0; /* hot top edge */
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double residual = 0.0;
    for (int it = 0; it < ITERS; it++) {
        MPI_Request req[4];
        MPI_Irecv(a, NX, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(a + (size_t)(ROWS + 1) * NX, NX, MPI_DOUBLE, down, 0, MPI_COMM_WORLD, &req[1]);
        MPI_Isend(a + NX, NX, MPI_DOUBLE, up, 0, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(a + (size_t)ROWS * NX, NX, MPI_DOUBLE, down, 1, MPI_COMM_WORLD, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        double local = 0.0;
        for (int y = 1; y <= ROWS; y++)
            for (int x = 1; x < NX - 1; x++) {
                size_t i = (size_t)y * NX + x;
                if (rank == 0 && y == 1)
                    continue;
                b[i] = 0.25 * (a[i - 1] + a[i + 1] + a[i - NX] + a[i + NX]);
                local += fabs(b[i] - a[i]);
            }
        double *t = a;
        a = b;
        b = t;
        if (it % 10 == 9)
            MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("stencil: %d ranks, %d iterations, residual %.3f\n", size, ITERS, residual);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
