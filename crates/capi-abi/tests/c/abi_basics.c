/* Standard-ABI specifics of libmpi_abi.so.1: layout, predefined handle values, version
 * queries, handle <-> int conversion, status conversion and constant translation.
 * Built with `mpicc -mpi-abi`; run on 1 or 2 ranks. Prints deterministic lines from
 * rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "CHECK FAILED on rank %d at %s:%d: %s\n", rank, __FILE__,      \
                    __LINE__, #cond);                                                      \
            fflush(stderr);                                                                \
            MPI_Abort(MPI_COMM_WORLD, 99);                                                 \
        }                                                                                  \
    } while (0)
#define CHECK_RC(call) CHECK((call) == MPI_SUCCESS)

#ifndef MPI_ABI_VERSION
#error "not the standard-ABI header"
#endif

static void maxabs_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt)
{
    if (*dt != MPI_INT)
        return;
    for (MPI_Count i = 0; i < *len; i++) {
        int a = abs(((int *)in)[i]), b = abs(((int *)inout)[i]);
        ((int *)inout)[i] = a > b ? a : b;
    }
}

static void say(const char *s)
{
    if (rank == 0)
        printf("%s\n", s);
}

int main(int argc, char **argv)
{
    int major = -7, minor = -7, size, provided = -1;

    /* Callable before MPI_Init. */
    CHECK_RC(MPI_Abi_get_version(&major, &minor));
    CHECK_RC(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    CHECK_RC(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_RC(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(provided == MPI_THREAD_SINGLE || provided == MPI_THREAD_FUNNELED ||
          provided == MPI_THREAD_SERIALIZED || provided == MPI_THREAD_MULTIPLE);
    if (rank == 0)
        printf("abi version %d.%d\n", major, minor);
    int qp = -1;
    CHECK_RC(MPI_Query_thread(&qp));
    CHECK(qp == provided);

    if (rank == 0)
        printf("sizeof MPI_Status %zu MPI_Comm %zu MPI_Aint %zu MPI_Count %zu MPI_Offset %zu\n",
               sizeof(MPI_Status), sizeof(MPI_Comm), sizeof(MPI_Aint), sizeof(MPI_Count),
               sizeof(MPI_Offset));
    if (rank == 0)
        printf("handles world %#lx self %#lx int %#lx sum %#lx request_null %#lx "
               "errors_return %#lx\n",
               (unsigned long)(uintptr_t)MPI_COMM_WORLD, (unsigned long)(uintptr_t)MPI_COMM_SELF,
               (unsigned long)(uintptr_t)MPI_INT, (unsigned long)(uintptr_t)MPI_SUM,
               (unsigned long)(uintptr_t)MPI_REQUEST_NULL,
               (unsigned long)(uintptr_t)MPI_ERRORS_RETURN);

    /* toint / fromint: predefined handles keep their values; user handles round-trip. */
    CHECK(MPI_Comm_toint(MPI_COMM_WORLD) == 0x101);
    CHECK(MPI_Type_toint(MPI_INT) == 0x209);
    CHECK(MPI_Comm_fromint(0x102) == MPI_COMM_SELF);
    MPI_Comm dup;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK((uintptr_t)dup >= 4096);
    CHECK(MPI_Comm_fromint(MPI_Comm_toint(dup)) == dup);
    int cmp = -1;
    CHECK_RC(MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp));
    CHECK(cmp == MPI_CONGRUENT);
    CHECK_RC(MPI_Comm_compare(dup, dup, &cmp));
    CHECK(cmp == MPI_IDENT);
    CHECK_RC(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL);
    say("toint/fromint: ok");

    /* Predefined handles come back with their standard values. */
    MPI_Errhandler eh;
    CHECK_RC(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    CHECK_RC(MPI_Errhandler_free(&eh));
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_RC(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    MPI_Group g;
    CHECK_RC(MPI_Comm_group(MPI_COMM_SELF, &g));
    CHECK((uintptr_t)g >= 4096);
    CHECK_RC(MPI_Group_free(&g));
    CHECK(g == MPI_GROUP_NULL);
    say("predefined handles: ok");

    /* Error classes use the standard's numbers. */
    int cls = -1;
    int rc = MPI_Send(NULL, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
    CHECK(rc != MPI_SUCCESS);
    CHECK_RC(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RANK);
    rc = MPI_Send(NULL, 1, (MPI_Datatype)(uintptr_t)5, 0, 0, MPI_COMM_WORLD);
    CHECK_RC(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_TYPE);
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    CHECK_RC(MPI_Error_string(MPI_ERR_TRUNCATE, msg, &len));
    CHECK(len > 0);
    int myclass = -1, mycode = -1;
    CHECK_RC(MPI_Add_error_class(&myclass));
    CHECK(myclass > MPI_ERR_LASTCODE);
    CHECK_RC(MPI_Add_error_code(myclass, &mycode));
    CHECK_RC(MPI_Error_class(mycode, &cls));
    CHECK(cls == myclass);
    /* Datarep callbacks are converted: a NULL extent function is the library's MPI_ERR_ARG
     * (through MPI_FILE_NULL's handler, which returns errors). */
    rc = MPI_Register_datarep("oxmpi_abi_test", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL,
                              NULL, NULL);
    CHECK_RC(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_ARG);
    say("error classes: ok");

    /* Status: PROC_NULL receive, ANY_SOURCE/ANY_TAG receive, count conversion. */
    MPI_Status st;
    memset(&st, 0x55, sizeof st);
    CHECK_RC(MPI_Recv(NULL, 0, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    int count = -1;
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 0);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int out[3] = {rank, rank * 10, rank * 100}, in[3] = {0, 0, 0};
    MPI_Request req;
    CHECK_RC(MPI_Irecv(in, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req));
    CHECK(req != MPI_REQUEST_NULL);
    CHECK_RC(MPI_Send(out, 3, MPI_INT, next, 40 + rank, MPI_COMM_WORLD));
    CHECK_RC(MPI_Wait(&req, &st));
    CHECK(req == MPI_REQUEST_NULL);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 40 + prev && in[2] == prev * 100);
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 3);
    CHECK_RC(MPI_Get_count(&st, MPI_BYTE, &count));
    CHECK(count == 3 * (int)sizeof(int));
    CHECK_RC(MPI_Get_elements(&st, MPI_SHORT, &count));
    CHECK(count == 3 * (int)sizeof(int) / (int)sizeof(short));
    int flag = -1;
    CHECK_RC(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 0);
    /* Large-count variants. */
    MPI_Count ccount = -1, clb = -1, cext = -1;
    CHECK_RC(MPI_Get_count_c(&st, MPI_INT, &ccount));
    CHECK(ccount == 3);
    CHECK_RC(MPI_Type_get_extent_c(MPI_INT, &clb, &cext));
    CHECK(clb == 0 && cext == (MPI_Count)sizeof(int));
    CHECK_RC(MPI_Send_c(out, 3, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    {
        MPI_Count *cnt = malloc(sizeof(MPI_Count) * size);
        MPI_Aint *dsp = malloc(sizeof(MPI_Aint) * size);
        int *sb = malloc(sizeof(int) * size), *rb = malloc(sizeof(int) * size);
        for (int i = 0; i < size; i++) {
            cnt[i] = 1;
            dsp[i] = i;
            sb[i] = rank * 1000 + i;
            rb[i] = -1;
        }
        CHECK_RC(MPI_Alltoallv_c(sb, cnt, dsp, MPI_INT, rb, cnt, dsp, MPI_INT, MPI_COMM_WORLD));
        for (int i = 0; i < size; i++)
            CHECK(rb[i] == i * 1000 + rank);
        CHECK_RC(MPI_Allgatherv_c(&rank, 1, MPI_INT, rb, cnt, dsp, MPI_INT, MPI_COMM_WORLD));
        for (int i = 0; i < size; i++)
            CHECK(rb[i] == i);
        free(cnt), free(dsp), free(sb), free(rb);
    }
    CHECK_RC(MPI_Recv(in, 3, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    say("status: ok");

    /* MPI_IN_PLACE and the topology/compare constants. */
    int v = rank + 1;
    CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(v == size * (size + 1) / 2);
    int topo = -1;
    CHECK_RC(MPI_Topo_test(MPI_COMM_WORLD, &topo));
    CHECK(topo == MPI_UNDEFINED);
    int dims[1] = {0}, periods[1] = {1};
    MPI_Comm cart;
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, (int[]){size}, periods, 0, &cart));
    CHECK_RC(MPI_Topo_test(cart, &topo));
    CHECK(topo == MPI_CART);
    CHECK_RC(MPI_Cart_get(cart, 1, dims, periods, &v));
    CHECK(dims[0] == size);
    int src = -5, dst = -5;
    CHECK_RC(MPI_Comm_free(&cart));
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, (int[]){size}, (int[]){0}, 0, &cart));
    CHECK_RC(MPI_Cart_shift(cart, 0, 1, &src, &dst));
    CHECK(src == (rank == 0 ? MPI_PROC_NULL : rank - 1));
    CHECK(dst == (rank == size - 1 ? MPI_PROC_NULL : rank + 1));
    CHECK_RC(MPI_Comm_free(&cart));
    say("constants: ok");

    /* Large-count user operation (datatype handle converted in the callback). */
    MPI_Op maxabs;
    /* (one rank: the operation is not applied, so rank 0 contributes a positive value) */
    int neg[2] = {rank == 0 ? 1 : -(rank + 1), rank}, res[2] = {0, 0};
    CHECK_RC(MPI_Op_create_c(maxabs_c, 1, &maxabs));
    CHECK_RC(MPI_Allreduce(neg, res, 2, MPI_INT, maxabs, MPI_COMM_WORLD));
    CHECK(res[0] == size && res[1] == size - 1);
    CHECK_RC(MPI_Op_free(&maxabs));
    CHECK(maxabs == MPI_OP_NULL);
    say("user op (large count): ok");

    /* Attributes: the predefined key MPI_TAG_UB. */
    int *tag_ub = NULL;
    CHECK_RC(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag && *tag_ub >= 32767);
    say("attributes: ok");

    /* MPI_Abi_get_info. */
    MPI_Info info;
    char val[MPI_MAX_INFO_VAL];
    CHECK_RC(MPI_Abi_get_info(&info));
    CHECK_RC(MPI_Info_get(info, "mpi_aint_size", MPI_MAX_INFO_VAL - 1, val, &flag));
    CHECK(flag && strcmp(val, "8") == 0);
    int buflen = 0;
    CHECK_RC(MPI_Info_get_string(info, "mpi_count_size", &buflen, val, &flag));
    CHECK(flag && buflen == 2);
    memset(val, 0, sizeof val);
    CHECK_RC(MPI_Info_get_string(info, "mpi_offset_size", &buflen, val, &flag));
    CHECK(flag && strcmp(val, "8") == 0);
    CHECK_RC(MPI_Info_get_string(info, "no_such_key", &buflen, val, &flag));
    CHECK(!flag);
    CHECK_RC(MPI_Info_free(&info));
    CHECK(info == MPI_INFO_NULL);
    say("abi info: ok");

    CHECK_RC(MPI_Finalize());
    say("abi_basics: all checks passed");
    return 0;
}
