/* MPI_MINLOC and MPI_MAXLOC on MPI_LONG_DOUBLE_INT: reductions (MPI_Reduce,
 * MPI_Allreduce, MPI_Reduce_local) and accumulates (MPI_Accumulate). Needs 2 ranks; rank 0
 * prints. */
#include "check.h"

typedef struct { long double v; int i; } ldi;

int main(int argc, char **argv)
{
    int rank;
    ldi in[2], out[2], mx[2], a, b;
    MPI_Win win;
    ldi *base;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;

    /* Element 0: rank 1 has the smaller value; element 1: a tie (lower index wins). */
    in[0].v = rank == 0 ? 2.5L : 1.5L;
    in[0].i = 10 + rank;
    in[1].v = 7.0L;
    in[1].i = 20 + rank;
    CHECK_RC(MPI_Allreduce(in, out, 2, MPI_LONG_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
    CHECK(out[0].v == 1.5L && out[0].i == 11 && out[1].v == 7.0L && out[1].i == 20);
    CHECK_RC(MPI_Reduce(in, mx, 2, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, 0, MPI_COMM_WORLD));
    if (rank == 0)
        CHECK(mx[0].v == 2.5L && mx[0].i == 10 && mx[1].v == 7.0L && mx[1].i == 20);
    a.v = -1.0L; a.i = 3;
    b.v = -1.0L; b.i = 5;
    CHECK_RC(MPI_Reduce_local(&a, &b, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC));
    CHECK(b.v == -1.0L && b.i == 3);
    if (rank == 0)
        printf("reductions: minloc (%.1Lf, %d) (%.1Lf, %d), maxloc (%.1Lf, %d)\n", out[0].v,
               out[0].i, out[1].v, out[1].i, mx[0].v, mx[0].i);

    CHECK_RC(MPI_Win_allocate(2 * sizeof(ldi), sizeof(ldi), MPI_INFO_NULL, MPI_COMM_WORLD,
                              &base, &win));
    base[0].v = 5.0L; base[0].i = 0;
    base[1].v = 5.0L; base[1].i = 0;
    CHECK_RC(MPI_Win_fence(0, win));
    /* Every rank accumulates its pairs into rank 0's window. */
    in[0].v = rank == 0 ? 4.0L : 3.0L;
    in[0].i = 30 + rank;
    in[1].v = rank == 0 ? 6.0L : 9.0L;
    in[1].i = 40 + rank;
    CHECK_RC(MPI_Accumulate(in, 1, MPI_LONG_DOUBLE_INT, 0, 0, 1, MPI_LONG_DOUBLE_INT,
                            MPI_MINLOC, win));
    CHECK_RC(MPI_Accumulate(&in[1], 1, MPI_LONG_DOUBLE_INT, 0, 1, 1, MPI_LONG_DOUBLE_INT,
                            MPI_MAXLOC, win));
    CHECK_RC(MPI_Win_fence(0, win));
    if (rank == 0) {
        CHECK(base[0].v == 3.0L && base[0].i == 31);
        CHECK(base[1].v == 9.0L && base[1].i == 41);
        printf("accumulate: minloc (%.1Lf, %d), maxloc (%.1Lf, %d)\n", base[0].v, base[0].i,
               base[1].v, base[1].i);
    }
    CHECK_RC(MPI_Win_fence(0, win));
    /* Two pairs in one accumulate (packed data of padded elements). */
    if (rank == 1) {
        ldi two[2] = {{1.0L, 50}, {1.0L, 51}};
        CHECK_RC(MPI_Accumulate(two, 2, MPI_LONG_DOUBLE_INT, 0, 0, 2, MPI_LONG_DOUBLE_INT,
                                MPI_MINLOC, win));
    }
    CHECK_RC(MPI_Win_fence(0, win));
    if (rank == 0)
        CHECK(base[0].v == 1.0L && base[0].i == 50 && base[1].v == 1.0L && base[1].i == 51);
    CHECK_RC(MPI_Win_free(&win));
    if (rank == 0)
        printf("std_minloc_ld: all checks passed\n");
    CHECK_RC(MPI_Finalize());
    return 0;
}
