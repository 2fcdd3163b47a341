/* MPI_Type_create_f90_real/complex/integer (MPI 3.1 §17.1.9): the sized type for the
 * requested precision and range, the same handle for the same arguments, the envelope
 * MPI_COMBINER_F90_* with p and r, usable in communication, not freeable. Runs on any
 * number of ranks; rank 0 prints. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size, sz, ni, na, nd, comb, ints[2], rc;
    MPI_Datatype r4, r4b, r8, c16, i4, i8, bad, t;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;

    CHECK_RC(MPI_Type_create_f90_real(6, 30, &r4));
    CHECK_RC(MPI_Type_create_f90_real(6, 30, &r4b));
    CHECK(r4 == r4b);
    CHECK_RC(MPI_Type_size(r4, &sz));
    CHECK(sz == 4);
    CHECK_RC(MPI_Type_create_f90_real(15, MPI_UNDEFINED, &r8));
    CHECK_RC(MPI_Type_size(r8, &sz));
    CHECK(sz == 8);
    CHECK_RC(MPI_Type_create_f90_complex(10, MPI_UNDEFINED, &c16));
    CHECK_RC(MPI_Type_size(c16, &sz));
    CHECK(sz == 16);
    CHECK_RC(MPI_Type_create_f90_integer(9, &i4));
    CHECK_RC(MPI_Type_size(i4, &sz));
    CHECK(sz == 4);
    CHECK_RC(MPI_Type_create_f90_integer(10, &i8));
    CHECK_RC(MPI_Type_size(i8, &sz));
    CHECK(sz == 8);

    CHECK_RC(MPI_Type_get_envelope(r4, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_F90_REAL && ni == 2 && na == 0 && nd == 0);
    CHECK_RC(MPI_Type_get_contents(r4, 2, 0, 0, ints, NULL, NULL));
    CHECK(ints[0] == 6 && ints[1] == 30);
    CHECK_RC(MPI_Type_get_envelope(i8, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_F90_INTEGER && ni == 1);
    if (rank == 0)
        printf("f90 sizes: real(6,30) 4, real(15,-) 8, complex(10,-) 16, integer(9) 4, "
               "integer(10) 8\n");

    {
        double x = rank + 0.5, sum = 0;
        long long n = rank, nsum = 0;
        CHECK_RC(MPI_Allreduce(&x, &sum, 1, r8, MPI_SUM, MPI_COMM_WORLD));
        CHECK(sum == size * (size - 1) / 2.0 + 0.5 * size);
        CHECK_RC(MPI_Allreduce(&n, &nsum, 1, i8, MPI_SUM, MPI_COMM_WORLD));
        CHECK(nsum == (long long)size * (size - 1) / 2);
    }

    {
        /* A struct pads to the f90 type's alignment like to its sized type's:
         * {char; integer(r=3), 2 bytes at 2; char at 4} has extent 6 (mpi4py's dtlib). */
        MPI_Datatype i2, st, types[3] = {MPI_BYTE, MPI_BYTE, MPI_BYTE};
        int blens[3] = {1, 1, 1};
        MPI_Aint disps[3] = {0, 2, 4}, lb, ext;
        CHECK_RC(MPI_Type_create_f90_integer(3, &i2));
        types[1] = i2;
        CHECK_RC(MPI_Type_create_struct(3, blens, disps, types, &st));
        CHECK_RC(MPI_Type_get_extent(st, &lb, &ext));
        CHECK(lb == 0 && ext == 6);
        CHECK_RC(MPI_Type_free(&st));
        types[1] = r8;
        disps[1] = 8;
        disps[2] = 16;
        CHECK_RC(MPI_Type_create_struct(3, blens, disps, types, &st));
        CHECK_RC(MPI_Type_get_extent(st, &lb, &ext));
        CHECK(lb == 0 && ext == 24);
        CHECK_RC(MPI_Type_free(&st));
        if (rank == 0)
            printf("f90 types in structs: padded to their alignment\n");
    }

    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    rc = MPI_Type_create_f90_integer(40, &bad);
    CHECK(rc != MPI_SUCCESS);
    MPI_Error_class(rc, &rc);
    CHECK(rc == MPI_ERR_ARG);
    rc = MPI_Type_create_f90_real(MPI_UNDEFINED, MPI_UNDEFINED, &bad);
    CHECK(rc != MPI_SUCCESS);
    t = r4;
    CHECK(MPI_Type_free(&t) != MPI_SUCCESS);
    if (rank == 0) {
        printf("bad kinds: MPI_ERR_ARG; free refused\n");
        printf("std_f90: all checks passed\n");
    }
    CHECK_RC(MPI_Finalize());
    return 0;
}
