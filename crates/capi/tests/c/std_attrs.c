/* Attribute caching (MPI 3.1 §6.7): a keyval freed while attributes use it stays valid for
 * them (their delete callbacks run when the communicator or datatype is freed); copy
 * callbacks of a freed keyval still run on MPI_Comm_dup; MPI_COMM_SELF's attributes are
 * deleted first in MPI_Finalize, in reverse order of setting; a callback's error comes back
 * through the object's error handler (MPI_ERRORS_RETURN is not fatal); MPI_Type_free runs
 * the delete callbacks. Runs on any number of ranks; rank 0 prints. */
#include "check.h"

static int deletes, copies, fail_delete, fail_copy;
static int order[8], norder;

static int count_delete(MPI_Comm c, int k, void *val, void *extra)
{
    (void)c; (void)k; (void)val; (void)extra;
    deletes++;
    return fail_delete ? MPI_ERR_OTHER : MPI_SUCCESS;
}

static int count_copy(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c; (void)k; (void)extra;
    copies++;
    if (fail_copy)
        return MPI_ERR_OTHER;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int type_delete(MPI_Datatype t, int k, void *val, void *extra)
{
    (void)t; (void)k; (void)val; (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

static int self_delete(MPI_Comm c, int k, void *val, void *extra)
{
    (void)k; (void)extra;
    int finalized = 1;
    MPI_Finalized(&finalized);
    /* Still inside MPI_Finalize: MPI calls are allowed. */
    if (!finalized && c == MPI_COMM_SELF && norder < 8)
        order[norder++] = (int)(long)val;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int rank, k, k2, ks[3], cls, rc, flag;
    void *v;
    MPI_Comm dup, dup2;
    MPI_Datatype t;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;

    /* A keyval freed while an attribute uses it. */
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_RC(MPI_Comm_create_keyval(count_copy, count_delete, &k, NULL));
    CHECK_RC(MPI_Comm_set_attr(dup, k, (void *)42));
    k2 = k;
    CHECK_RC(MPI_Comm_free_keyval(&k));
    CHECK(k == MPI_KEYVAL_INVALID);
    CHECK_RC(MPI_Comm_get_attr(dup, k2, &v, &flag));
    CHECK(flag && v == (void *)42);
    CHECK_RC(MPI_Comm_dup(dup, &dup2));
    CHECK(copies == 1);
    CHECK_RC(MPI_Comm_free(&dup2));
    CHECK_RC(MPI_Comm_free(&dup));
    CHECK(deletes == 2);
    if (rank == 0)
        printf("freed keyval: %d copy, %d delete callbacks\n", copies, deletes);

    /* A second keyval created and freed twice over its life. */
    CHECK_RC(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL));
    CHECK_RC(MPI_Comm_free_keyval(&k));
    CHECK_RC(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL));
    CHECK_RC(MPI_Comm_free_keyval(&k));

    /* Callback errors go to the communicator's handler: MPI_ERRORS_RETURN returns them. */
    deletes = copies = 0;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_RC(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    CHECK_RC(MPI_Comm_create_keyval(count_copy, count_delete, &k, NULL));
    CHECK_RC(MPI_Comm_set_attr(dup, k, (void *)1));
    fail_delete = 1;
    rc = MPI_Comm_delete_attr(dup, k);
    CHECK(rc != MPI_SUCCESS);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_OTHER);
    CHECK_RC(MPI_Comm_set_attr(dup, k, (void *)2));
    rc = MPI_Comm_free(&dup);
    CHECK(rc != MPI_SUCCESS && dup != MPI_COMM_NULL);
    fail_delete = 0;
    CHECK_RC(MPI_Comm_set_attr(dup, k, (void *)3));
    fail_copy = 1;
    rc = MPI_Comm_dup(dup, &dup2);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_OTHER);
    fail_copy = 0;
    CHECK_RC(MPI_Comm_free(&dup));
    CHECK_RC(MPI_Comm_free_keyval(&k));
    if (rank == 0)
        printf("callback errors: returned (MPI_ERR_OTHER)\n");

    /* MPI_Type_free runs the delete callbacks, also of a freed keyval. */
    deletes = 0;
    CHECK_RC(MPI_Type_contiguous(2, MPI_INT, &t));
    CHECK_RC(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete, &k, NULL));
    CHECK_RC(MPI_Type_set_attr(t, k, (void *)7));
    CHECK_RC(MPI_Type_free_keyval(&k));
    CHECK_RC(MPI_Type_free(&t));
    CHECK(deletes == 1 && t == MPI_DATATYPE_NULL);
    if (rank == 0)
        printf("datatype free: %d delete callback\n", deletes);

    /* MPI_COMM_SELF's attributes, deleted in reverse order of setting at finalize. */
    for (int i = 0; i < 3; i++) {
        CHECK_RC(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &ks[i], NULL));
        CHECK_RC(MPI_Comm_set_attr(MPI_COMM_SELF, ks[i], (void *)(long)(i + 1)));
    }
    CHECK_RC(MPI_Comm_free_keyval(&ks[1]));
    CHECK_RC(MPI_Finalize());
    CHECK(norder == 3 && order[0] == 3 && order[1] == 2 && order[2] == 1);
    if (rank == 0) {
        printf("MPI_COMM_SELF at finalize: deleted %d %d %d\n", order[0], order[1], order[2]);
        printf("std_attrs: all checks passed\n");
    }
    return 0;
}
