/* Error handlers and bad input: MPI_ERRORS_RETURN returns the right class for invalid
 * ranks, tags, counts, datatypes, communicators, requests and NULL pointers; a user
 * error handler is called with the communicator and the code; error strings and user
 * error classes. Runs on any number of ranks; output comes from rank 0. */
#include "check.h"
#include <string.h>

static int handler_calls = 0;
static int handler_code = 0;
static MPI_Comm handler_comm = MPI_COMM_NULL;

static void my_handler(MPI_Comm *comm, int *code, ...)
{
    handler_calls++;
    handler_code = *code;
    handler_comm = *comm;
}

static int class_of(int rc)
{
    int c = -1;
    if (MPI_Error_class(rc, &c) != MPI_SUCCESS) return -1;
    return c;
}

#define EXPECT(call, cls)                                                                  \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (class_of(rc_) != (cls)) {                                                      \
            fprintf(stderr, "rank %d: %s returned %d (class %d), expected class %d\n",     \
                    check_rank_, #call, rc_, class_of(rc_), (cls));                        \
            MPI_Abort(MPI_COMM_WORLD, 98);                                                 \
        }                                                                                  \
        if (check_rank_ == 0) printf("%-40s -> %s\n", #cls, "ok");                         \
    } while (0)

int main(int argc, char **argv)
{
    int rank, size, x = 1, flag;
    MPI_Status st;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;

    MPI_Errhandler eh;
    CHECK_RC(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_RC(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);

    EXPECT(MPI_Send(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(&x, 1, MPI_INT, -7, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(&x, 1, MPI_INT, 0, -5, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT(MPI_Recv(&x, 1, MPI_INT, 0, -5, MPI_COMM_WORLD, &st), MPI_ERR_TAG);
    EXPECT(MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT(MPI_Send(&x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT(MPI_Send(&x, 1, (MPI_Datatype)0x12345678, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT(MPI_Send(NULL, 3, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    EXPECT(MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT(MPI_Send(&x, 1, MPI_INT, 0, 0, (MPI_Comm)0x7fffffff), MPI_ERR_COMM);
    EXPECT(MPI_Comm_rank(MPI_COMM_WORLD, NULL), MPI_ERR_ARG);
    EXPECT(MPI_Comm_size((MPI_Comm)-42, &x), MPI_ERR_COMM);
    EXPECT(MPI_Type_free(&(MPI_Datatype){MPI_INT}), MPI_ERR_TYPE);
    {
        MPI_Datatype unc;
        CHECK_RC(MPI_Type_contiguous(2, MPI_INT, &unc));
        int two[2] = {0, 0};
        EXPECT(MPI_Send(two, 1, unc, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
        CHECK_RC(MPI_Type_free(&unc));
    }
    {
        /* a freed request is invalid */
        MPI_Request r;
        CHECK_RC(MPI_Isend(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
        MPI_Request copy = r;
        CHECK_RC(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL);
        EXPECT(MPI_Wait(&copy, &st), MPI_ERR_REQUEST);
        MPI_Request junk = (MPI_Request)0x2c0000ff;
        EXPECT(MPI_Test(&junk, &flag, &st), MPI_ERR_REQUEST);
        EXPECT(MPI_Request_free(&junk), MPI_ERR_REQUEST);
    }
    EXPECT(MPI_Comm_set_errhandler(MPI_COMM_WORLD, (MPI_Errhandler)0x1234), MPI_ERR_ARG);
    {
        /* random and freed handles of every kind, NULL outputs */
        MPI_Op op = (MPI_Op)0x98000042;
        EXPECT(MPI_Op_free(&op), MPI_ERR_OP);
        int y = 0;
        EXPECT(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP);
        if (size <= 8) {
            /* a NULL receive buffer of a reduce-scatter (every rank alike) */
            int xs[8] = {0}, counts[8] = {1, 1, 1, 1, 1, 1, 1, 1};
            EXPECT(MPI_Reduce_scatter_block(xs, NULL, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER);
            EXPECT(MPI_Reduce_scatter(xs, NULL, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        }
        EXPECT(MPI_Group_size((MPI_Group)0x88001234, &y), MPI_ERR_GROUP);
        EXPECT(MPI_Info_set((MPI_Info)0x9c000777, "k", "v"), MPI_ERR_INFO);
        MPI_Datatype bogus = (MPI_Datatype)0x8c0000ff;
        EXPECT(MPI_Type_commit(&bogus), MPI_ERR_TYPE);
        EXPECT(MPI_Type_contiguous(-3, MPI_INT, &bogus), MPI_ERR_COUNT);
        EXPECT(MPI_Irecv(&y, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, NULL), MPI_ERR_ARG);
        EXPECT(MPI_Get_count(NULL, MPI_INT, &y), MPI_ERR_ARG);
        EXPECT(MPI_Comm_size(MPI_COMM_WORLD, NULL), MPI_ERR_ARG);
        EXPECT(MPI_Bcast(&y, 1, MPI_INT, size + 5, MPI_COMM_WORLD), MPI_ERR_ROOT);
        MPI_Request reqs[2];
        CHECK_RC(MPI_Isend(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &reqs[0]));
        reqs[1] = reqs[0];
        CHECK_RC(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
        reqs[0] = MPI_REQUEST_NULL;
        EXPECT(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST);
        EXPECT(MPI_Error_class(-77, &y), MPI_ERR_ARG);
    }
    EXPECT(MPI_Error_string(123456, (char[MPI_MAX_ERROR_STRING]){0}, &x), MPI_ERR_ARG);

    /* error strings are ours and non-empty for every class we return */
    {
        char s[MPI_MAX_ERROR_STRING];
        int len;
        CHECK_RC(MPI_Error_string(MPI_ERR_RANK, s, &len));
        CHECK(len > 0 && strstr(s, "rank") != NULL);
        if (rank == 0) printf("error string: %s\n", s);
    }

    /* user-defined error class, code and string */
    {
        int cls, code, c2, len;
        char s[MPI_MAX_ERROR_STRING];
        CHECK_RC(MPI_Add_error_class(&cls));
        CHECK_RC(MPI_Add_error_code(cls, &code));
        CHECK_RC(MPI_Add_error_string(code, "my own error"));
        CHECK_RC(MPI_Error_class(code, &c2));
        CHECK(c2 == cls);
        CHECK_RC(MPI_Error_string(code, s, &len));
        CHECK(strcmp(s, "my own error") == 0);
        if (rank == 0) printf("user error class/code/string: ok\n");
    }

    /* user error handler: called with the communicator and the code */
    {
        MPI_Errhandler mine;
        CHECK_RC(MPI_Comm_create_errhandler(my_handler, &mine));
        CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, mine));
        int rc = MPI_Send(&x, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD);
        CHECK(handler_calls == 1);
        CHECK(class_of(handler_code) == MPI_ERR_RANK && rc == handler_code);
        CHECK(handler_comm == MPI_COMM_WORLD);
        CHECK_RC(MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER));
        CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER);
        CHECK_RC(MPI_Errhandler_free(&mine));
        CHECK(mine == MPI_ERRHANDLER_NULL);
        /* still attached to the communicator after free */
        MPI_Send(&x, 1, MPI_INT, -9, 0, MPI_COMM_WORLD);
        CHECK(handler_calls == 3);
        CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        if (rank == 0) printf("user error handler: ok\n");
    }

    /* errors on MPI_COMM_SELF use its own handler (still fatal by default), so only
     * check its getter here */
    CHECK_RC(MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);

    CHECK_RC(MPI_Finalize());
    if (rank == 0) printf("errhandler: all checks passed\n");
    return 0;
}
