/* MPI_Dims_create returns dimensions as close to each other as possible, non-increasing
 * (MPI 3.1 §7.5.2). */
#include "check.h"

int main(int argc, char **argv)
{
    int d2[2] = {0, 0}, d3[3] = {0, 0, 0}, fixed[3] = {0, 4, 0};
    CHECK_RC(MPI_Init(&argc, &argv));
    CHECK_RC(MPI_Dims_create(72, 2, d2));
    printf("72 in 2-D: %d x %d\n", d2[0], d2[1]);
    CHECK(d2[0] == 9 && d2[1] == 8);
    CHECK_RC(MPI_Dims_create(72, 3, d3));
    CHECK(d3[0] == 6 && d3[1] == 4 && d3[2] == 3);
    CHECK_RC(MPI_Dims_create(240, 3, fixed));
    CHECK(fixed[0] == 10 && fixed[1] == 4 && fixed[2] == 6);
    d2[0] = d2[1] = 0;
    CHECK_RC(MPI_Dims_create(17, 2, d2));
    CHECK(d2[0] == 17 && d2[1] == 1);
    printf("std_dims: all checks passed\n");
    CHECK_RC(MPI_Finalize());
    return 0;
}
