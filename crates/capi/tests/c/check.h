/* Shared helpers of the C test programs: CHECK prints the failed condition with the rank
 * and aborts the job. Each program prints deterministic lines (from rank 0 only, or
 * prefixed with the rank and printed in rank order) so that runs on two libraries can be
 * compared line by line. */
#ifndef OXMPI_TEST_CHECK_H
#define OXMPI_TEST_CHECK_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int check_rank_ __attribute__((unused)) = -1;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "CHECK FAILED on rank %d at %s:%d: %s\n", check_rank_,         \
                    __FILE__, __LINE__, #cond);                                            \
            fflush(stderr);                                                                \
            MPI_Abort(MPI_COMM_WORLD, 99);                                                 \
        }                                                                                  \
    } while (0)

#define CHECK_RC(call) CHECK((call) == MPI_SUCCESS)

/* The error class of a return code (-1 if MPI_Error_class fails). */
static int __attribute__((unused)) class_of_rc(int rc) {
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

#endif
