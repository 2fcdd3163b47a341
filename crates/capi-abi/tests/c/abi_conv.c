/* Conversion paths of the standard-ABI layer that the generic C tests do not reach:
 * arrays of handles sized by the communicator (Alltoallw), datatype envelopes and
 * contents (combiners, handle arrays), split types, rank translation with
 * MPI_PROC_NULL, attribute callbacks incl. the encoded MPI_COMM_DUP_FN /
 * MPI_COMM_NULL_COPY_FN, status arrays of Waitsome/Testall, user error handlers seeing
 * standard-ABI handles and codes, generalized requests. ABI-neutral source: it also
 * builds against the MPICH-ABI header, and prints the same lines there.
 * Run on 2 ranks; deterministic lines from rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1, size = 0;

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

static void say(const char *s)
{
    if (rank == 0)
        printf("%s\n", s);
}

static int deleted = 0, copied = 0;
static int copy_fn(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag)
{
    CHECK(old != MPI_COMM_NULL && extra == (void *)&copied);
    copied++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm comm, int key, void *val, void *extra)
{
    CHECK(comm != MPI_COMM_NULL && extra == (void *)&copied);
    deleted++;
    return MPI_SUCCESS;
}

static MPI_Comm eh_comm = MPI_COMM_NULL;
static int eh_code = -1;
static void my_eh(MPI_Comm *comm, int *code, ...)
{
    eh_comm = *comm;
    eh_code = *code;
}

static int gq_calls = 0;
static int gq(void *extra, MPI_Status *st)
{
    gq_calls++;
    MPI_Status_set_elements(st, MPI_INT, *(int *)extra);
    MPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}
static int gfree(void *extra) { (void)extra; return MPI_SUCCESS; }
static int gcancel(void *extra, int complete) { (void)extra; (void)complete; return MPI_SUCCESS; }

int main(int argc, char **argv)
{
    CHECK_RC(MPI_Init(&argc, &argv));
    CHECK_RC(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_RC(MPI_Comm_size(MPI_COMM_WORLD, &size));

    /* Alltoallw: arrays of datatypes sized by the communicator. */
    {
        int *sb = malloc(sizeof(int) * size), *rb = malloc(sizeof(int) * size);
        int *cnt = malloc(sizeof(int) * size), *dsp = malloc(sizeof(int) * size);
        MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * size);
        for (int i = 0; i < size; i++) {
            sb[i] = rank * 100 + i;
            rb[i] = -1;
            cnt[i] = 1;
            dsp[i] = i * (int)sizeof(int);
            ty[i] = MPI_INT;
        }
        CHECK_RC(MPI_Alltoallw(sb, cnt, dsp, ty, rb, cnt, dsp, ty, MPI_COMM_WORLD));
        for (int i = 0; i < size; i++)
            CHECK(rb[i] == i * 100 + rank);
        free(sb), free(rb), free(cnt), free(dsp), free(ty);
        say("alltoallw: ok");
    }

    /* Datatype envelope and contents. */
    {
        MPI_Datatype vec, st, types[2] = {MPI_INT, MPI_DOUBLE}, got[2];
        int bl[2] = {1, 2}, ni, na, nd, nc, ints[3];
        MPI_Aint disp[2] = {0, 8}, addrs[2];
        CHECK_RC(MPI_Type_vector(3, 1, 2, MPI_INT, &vec));
        CHECK_RC(MPI_Type_get_envelope(vec, &ni, &na, &nd, &nc));
        CHECK(nc == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nd == 1);
        CHECK_RC(MPI_Type_get_contents(vec, 3, 0, 1, ints, addrs, got));
        CHECK(ints[0] == 3 && ints[1] == 1 && ints[2] == 2 && got[0] == MPI_INT);
        CHECK_RC(MPI_Type_create_struct(2, bl, disp, types, &st));
        CHECK_RC(MPI_Type_get_envelope(st, &ni, &na, &nd, &nc));
        CHECK(nc == MPI_COMBINER_STRUCT && nd == 2);
        CHECK_RC(MPI_Type_get_contents(st, ni, na, nd, ints, addrs, got));
        CHECK(got[0] == MPI_INT && got[1] == MPI_DOUBLE && addrs[1] == 8);
        CHECK_RC(MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &nc));
        CHECK(nc == MPI_COMBINER_NAMED);
        int sz = 0;
        CHECK_RC(MPI_Type_size(st, &sz));
        CHECK(sz == (int)(sizeof(int) + 2 * sizeof(double)));
        CHECK_RC(MPI_Type_free(&st));
        CHECK_RC(MPI_Type_free(&vec));
        CHECK(vec == MPI_DATATYPE_NULL);
        MPI_Datatype sub;
        int sizes[2] = {4, 4}, subs[2] = {2, 2}, starts[2] = {1, 1};
        CHECK_RC(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub));
        CHECK_RC(MPI_Type_size(sub, &sz));
        CHECK(sz == 4 * (int)sizeof(int));
        int sints[8];
        CHECK_RC(MPI_Type_get_envelope(sub, &ni, &na, &nd, &nc));
        CHECK(nc == MPI_COMBINER_SUBARRAY && ni == 8 && nd == 1);
        CHECK_RC(MPI_Type_get_contents(sub, 8, 0, 1, sints, addrs, got));
        CHECK(sints[0] == 2 && sints[7] == MPI_ORDER_C && got[0] == MPI_INT);
        CHECK_RC(MPI_Type_free(&sub));
        say("datatype envelope/contents: ok");
    }

    /* Split types and rank translation. */
    {
        MPI_Comm node, none;
        int nsize = 0, r2[3];
        CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                     &node));
        CHECK_RC(MPI_Comm_size(node, &nsize));
        CHECK(nsize >= 1 && nsize <= size);
        CHECK_RC(MPI_Comm_free(&node));
        CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &none));
        CHECK(none == MPI_COMM_NULL);
        MPI_Group wg, sg;
        CHECK_RC(MPI_Comm_group(MPI_COMM_WORLD, &wg));
        CHECK_RC(MPI_Comm_group(MPI_COMM_SELF, &sg));
        int r1[3] = {0, MPI_PROC_NULL, size - 1};
        CHECK_RC(MPI_Group_translate_ranks(wg, 3, r1, sg, r2));
        CHECK(r2[1] == MPI_PROC_NULL);
        CHECK(r2[0] == (rank == 0 ? 0 : MPI_UNDEFINED));
        int cmp = -1;
        CHECK_RC(MPI_Group_compare(wg, sg, &cmp));
        CHECK(cmp == (size == 1 ? MPI_IDENT : MPI_UNEQUAL));
        CHECK_RC(MPI_Group_free(&wg));
        CHECK_RC(MPI_Group_free(&sg));
        say("split type and groups: ok");
    }

    /* Attribute callbacks, the encoded predefined copy functions. */
    {
        int k1, k2, k3, flag;
        void *v;
        MPI_Comm d;
        CHECK_RC(MPI_Comm_create_keyval(copy_fn, delete_fn, &k1, &copied));
        CHECK_RC(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k2, NULL));
        CHECK_RC(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k3,
                                        NULL));
        CHECK(k1 != MPI_KEYVAL_INVALID && k2 != MPI_KEYVAL_INVALID);
        CHECK_RC(MPI_Comm_set_attr(MPI_COMM_WORLD, k1, (void *)11));
        CHECK_RC(MPI_Comm_set_attr(MPI_COMM_WORLD, k2, (void *)22));
        CHECK_RC(MPI_Comm_set_attr(MPI_COMM_WORLD, k3, (void *)33));
        CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        CHECK(copied == 1);
        CHECK_RC(MPI_Comm_get_attr(d, k1, &v, &flag));
        CHECK(flag && v == (void *)11);
        CHECK_RC(MPI_Comm_get_attr(d, k2, &v, &flag));
        CHECK(flag && v == (void *)22);
        CHECK_RC(MPI_Comm_get_attr(d, k3, &v, &flag));
        CHECK(!flag);
        CHECK_RC(MPI_Comm_free(&d));
        CHECK(deleted == 1);
        CHECK_RC(MPI_Comm_delete_attr(MPI_COMM_WORLD, k1));
        CHECK(deleted == 2);
        CHECK_RC(MPI_Comm_free_keyval(&k1));
        CHECK(k1 == MPI_KEYVAL_INVALID);
        CHECK_RC(MPI_Comm_free_keyval(&k2));
        CHECK_RC(MPI_Comm_free_keyval(&k3));
        say("attribute callbacks: ok");
    }

    /* Status arrays: Waitsome / Testall with sources and tags converted. */
    {
        int peer = (rank + 1) % size, from = (rank + size - 1) % size;
        int out[2] = {rank, rank}, in[2] = {-1, -1}, idx[2], n = 0, done = 0, flag = 0;
        MPI_Request r[2];
        MPI_Status st[2];
        CHECK_RC(MPI_Irecv(&in[0], 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &r[0]));
        CHECK_RC(MPI_Irecv(&in[1], 1, MPI_INT, from, MPI_ANY_TAG, MPI_COMM_WORLD, &r[1]));
        CHECK_RC(MPI_Send(&out[0], 1, MPI_INT, peer, 5, MPI_COMM_WORLD));
        CHECK_RC(MPI_Send(&out[1], 1, MPI_INT, peer, 6, MPI_COMM_WORLD));
        while (done < 2) {
            CHECK_RC(MPI_Waitsome(2, r, &n, idx, st));
            CHECK(n != MPI_UNDEFINED);
            for (int i = 0; i < n; i++) {
                CHECK(st[i].MPI_SOURCE == from);
                CHECK(st[i].MPI_TAG == (idx[i] == 0 ? 5 : 6));
            }
            done += n;
        }
        CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
        CHECK_RC(MPI_Waitsome(2, r, &n, idx, st));
        CHECK(n == MPI_UNDEFINED);
        CHECK(in[0] == from && in[1] == from);
        r[0] = MPI_REQUEST_NULL;
        CHECK_RC(MPI_Irecv(NULL, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r[1]));
        while (!flag)
            CHECK_RC(MPI_Testall(2, r, &flag, st));
        CHECK(st[1].MPI_SOURCE == MPI_PROC_NULL && st[1].MPI_TAG == MPI_ANY_TAG);
        say("status arrays: ok");
    }

    /* User error handler: gets the standard-ABI communicator and error code. */
    {
        MPI_Errhandler eh;
        MPI_Comm d;
        int cls = -1, code = -1;
        CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        CHECK_RC(MPI_Comm_create_errhandler(my_eh, &eh));
        CHECK_RC(MPI_Comm_set_errhandler(d, eh));
        CHECK_RC(MPI_Errhandler_free(&eh));
        CHECK(eh == MPI_ERRHANDLER_NULL);
        int rc = MPI_Send(NULL, 1, MPI_INT, size + 3, 0, d);
        CHECK(rc != MPI_SUCCESS && eh_comm == d);
        CHECK_RC(MPI_Error_class(eh_code, &cls));
        CHECK(cls == MPI_ERR_RANK);
        CHECK_RC(MPI_Add_error_class(&cls));
        CHECK_RC(MPI_Add_error_code(cls, &code));
        CHECK_RC(MPI_Comm_call_errhandler(d, code));
        CHECK(eh_code == code);
        int *last = NULL, *host = NULL, flag = 0;
        CHECK_RC(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
        CHECK(flag && *last >= code);
        CHECK_RC(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &host, &flag));
        CHECK(flag && (*host == MPI_PROC_NULL || (*host >= 0 && *host < size)));
        CHECK_RC(MPI_Comm_free(&d));
        say("user error handler: ok");
    }

    /* Generalized request: the query function fills a standard-ABI status. */
    {
        MPI_Request g;
        MPI_Status st;
        int n = 7, count = -1;
        CHECK_RC(MPI_Grequest_start(gq, gfree, gcancel, &n, &g));
        CHECK_RC(MPI_Grequest_complete(g));
        CHECK_RC(MPI_Wait(&g, &st));
        CHECK(g == MPI_REQUEST_NULL && gq_calls == 1);
        CHECK_RC(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == 7);
        CHECK(st.MPI_SOURCE == MPI_UNDEFINED);
        say("generalized request: ok");
    }

    CHECK_RC(MPI_Finalize());
    say("abi_conv: all checks passed");
    return 0;
}
