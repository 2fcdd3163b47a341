/* MPI 4.x communicator split types (MPI 4.1 §7.4.2): MPI_COMM_TYPE_HW_GUIDED and
 * MPI_COMM_TYPE_RESOURCE_GUIDED follow the info key "mpi_hw_resource_type" (no info, no
 * key or an unknown type: MPI_COMM_NULL; "mpi_shared_memory": the node, here every rank;
 * MPI_UNDEFINED on other ranks leaves them out), MPI_COMM_TYPE_HW_UNGUIDED gives only
 * strictly smaller groups (one node: MPI_COMM_NULL). Prints "split_hw: all checks passed". */
#include "check.h"

static int rank, size;

static void guided(int type, const char *name) {
    MPI_Comm c;
    MPI_Info info;
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, type, 0, MPI_INFO_NULL, &c));
    CHECK(c == MPI_COMM_NULL);
    CHECK_RC(MPI_Info_create(&info));
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, type, 0, info, &c));
    CHECK(c == MPI_COMM_NULL);
    CHECK_RC(MPI_Info_set(info, "mpi_hw_resource_type", "@no-such-resource@"));
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, type, 0, info, &c));
    CHECK(c == MPI_COMM_NULL);
    CHECK_RC(MPI_Info_set(info, "mpi_hw_resource_type", "mpi_shared_memory"));
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, type, size - rank, info, &c));
    CHECK(c != MPI_COMM_NULL);
    int n, r;
    MPI_Comm_size(c, &n);
    MPI_Comm_rank(c, &r);
    CHECK(n == size && r == size - 1 - rank); /* one node; ordered by key */
    CHECK_RC(MPI_Comm_free(&c));
    for (int root = 0; root < size; root++) {
        CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, rank == root ? type : MPI_UNDEFINED, 0,
                                     info, &c));
        if (rank == root) {
            CHECK(c != MPI_COMM_NULL);
            MPI_Comm_size(c, &n);
            CHECK(n == 1);
            CHECK_RC(MPI_Comm_free(&c));
        } else {
            CHECK(c == MPI_COMM_NULL);
        }
    }
    char v[64];
    int flag = 0;
    CHECK_RC(MPI_Info_get_string(info, "mpi_hw_resource_type", &(int){sizeof v}, v, &flag));
    CHECK(flag);
    CHECK_RC(MPI_Info_free(&info));
    if (rank == 0)
        printf("split_hw: %s: ok\n", name);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    guided(MPI_COMM_TYPE_HW_GUIDED, "hw_guided");
    guided(MPI_COMM_TYPE_RESOURCE_GUIDED, "resource_guided");
    /* All ranks share one node: no smaller hardware level is known. */
    MPI_Comm c;
    MPI_Info info;
    CHECK_RC(MPI_Info_create(&info));
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_UNGUIDED, rank, info, &c));
    CHECK(c == MPI_COMM_NULL);
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_SELF, MPI_COMM_TYPE_HW_UNGUIDED, 0, info, &c));
    CHECK(c == MPI_COMM_NULL);
    CHECK_RC(MPI_Info_free(&info));
    if (rank == 0)
        printf("split_hw: hw_unguided on one node: ok\nsplit_hw: all checks passed\n");
    MPI_Finalize();
    return 0;
}
