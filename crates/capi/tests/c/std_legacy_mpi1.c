/* The MPI-1 functions MPI 3.0 removed that MPICH's mpi.h still declares and libmpi.so.12
 * exports: MPI_Address, MPI_Type_hvector/hindexed/struct, MPI_Type_extent/lb/ub,
 * MPI_Errhandler_create/get/set. MPICH ABI only (the standard ABI has none of them). */
#include "check.h"

static int handled;

static void on_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm; (void)code;
    handled++;
}

int main(int argc, char **argv)
{
    int rank, bl[2] = {1, 2}, rc;
    struct { int i; double d[2]; } s;
    MPI_Aint a0, a1, d[2], ext, lb, ub;
    MPI_Datatype ty[2] = {MPI_INT, MPI_DOUBLE}, st, hv, hi;
    MPI_Errhandler eh, got;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;

    CHECK_RC(MPI_Address(&s.i, &a0));
    CHECK_RC(MPI_Address(&s.d[0], &a1));
    d[0] = 0;
    d[1] = a1 - a0;
    CHECK(d[1] == 8);
    CHECK_RC(MPI_Type_struct(2, bl, d, ty, &st));
    CHECK_RC(MPI_Type_commit(&st));
    CHECK_RC(MPI_Type_extent(st, &ext));
    CHECK_RC(MPI_Type_lb(st, &lb));
    CHECK_RC(MPI_Type_ub(st, &ub));
    CHECK(ext == (MPI_Aint)sizeof s && lb == 0 && ub == (MPI_Aint)sizeof s);
    CHECK_RC(MPI_Type_hvector(3, 1, 16, MPI_INT, &hv));
    CHECK_RC(MPI_Type_extent(hv, &ext));
    CHECK(ext == 36);
    CHECK_RC(MPI_Type_hindexed(2, bl, d, MPI_INT, &hi));
    CHECK_RC(MPI_Type_ub(hi, &ub));
    CHECK(ub == 16);
    if (rank == 0)
        printf("struct extent %ld, hvector extent 36, hindexed ub 16\n", (long)sizeof s);

    CHECK_RC(MPI_Errhandler_create(on_error, &eh));
    CHECK_RC(MPI_Errhandler_set(MPI_COMM_WORLD, eh));
    CHECK_RC(MPI_Errhandler_get(MPI_COMM_WORLD, &got));
    CHECK(got == eh);
    CHECK_RC(MPI_Errhandler_free(&got));
    rc = MPI_Send(NULL, -1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    CHECK(rc != MPI_SUCCESS && handled == 1);
    CHECK_RC(MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_RC(MPI_Errhandler_free(&eh));
    if (rank == 0) {
        printf("MPI_Errhandler_create/set/get: handler called %d time\n", handled);
        printf("std_legacy_mpi1: all checks passed\n");
    }
    MPI_Type_free(&st);
    MPI_Type_free(&hv);
    MPI_Type_free(&hi);
    CHECK_RC(MPI_Finalize());
    return 0;
}
