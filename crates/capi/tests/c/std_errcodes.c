/* MPI_LASTUSEDCODE is at least MPI_ERR_LASTCODE (MPI 3.1 §8.5), before and after user
 * error classes and codes are added. */
#include "check.h"

int main(int argc, char **argv)
{
    int *last, flag, cls, code;
    CHECK_RC(MPI_Init(&argc, &argv));
    CHECK_RC(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    CHECK(flag && *last >= MPI_ERR_LASTCODE);
    CHECK_RC(MPI_Add_error_class(&cls));
    CHECK(cls > MPI_ERR_LASTCODE);
    CHECK_RC(MPI_Add_error_code(cls, &code));
    CHECK_RC(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    CHECK(flag && *last >= code && *last >= cls);
    printf("std_errcodes: all checks passed\n");
    CHECK_RC(MPI_Finalize());
    return 0;
}
