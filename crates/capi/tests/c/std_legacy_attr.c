/* The deprecated MPI-1 attribute functions (MPI_Keyval_create/free, MPI_Attr_put/get/delete)
 * with MPI_NULL_COPY_FN, MPI_DUP_FN and user callbacks, on MPI_COMM_WORLD and a duplicate.
 * In both ABIs; rank 0 prints. */
#include "check.h"

static int deletes;

static int on_delete(MPI_Comm c, int k, void *val, void *extra)
{
    (void)c; (void)k; (void)val;
    CHECK(extra == (void *)&deletes);
    deletes++;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int rank, kdup, knull, flag, *tag_ub;
    void *v;
    MPI_Comm dup;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;

    CHECK_RC(MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag && *tag_ub >= 32767);
    CHECK_RC(MPI_Keyval_create(MPI_DUP_FN, on_delete, &kdup, &deletes));
    CHECK_RC(MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &knull, NULL));
    CHECK_RC(MPI_Attr_put(MPI_COMM_WORLD, kdup, (void *)11));
    CHECK_RC(MPI_Attr_put(MPI_COMM_WORLD, knull, (void *)22));
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_RC(MPI_Attr_get(dup, kdup, &v, &flag));
    CHECK(flag && v == (void *)11);
    CHECK_RC(MPI_Attr_get(dup, knull, &v, &flag));
    CHECK(!flag);
    CHECK_RC(MPI_Attr_delete(dup, kdup));
    CHECK(deletes == 1);
    CHECK_RC(MPI_Attr_get(dup, kdup, &v, &flag));
    CHECK(!flag);
    CHECK_RC(MPI_Comm_free(&dup));
    CHECK_RC(MPI_Attr_delete(MPI_COMM_WORLD, kdup));
    CHECK(deletes == 2);
    CHECK_RC(MPI_Keyval_free(&kdup));
    CHECK_RC(MPI_Keyval_free(&knull));
    CHECK(kdup == MPI_KEYVAL_INVALID && knull == MPI_KEYVAL_INVALID);
    if (rank == 0) {
        printf("MPI_Attr_*/MPI_Keyval_*: %d delete callbacks\n", deletes);
        printf("std_legacy_attr: all checks passed\n");
    }
    CHECK_RC(MPI_Finalize());
    return 0;
}
