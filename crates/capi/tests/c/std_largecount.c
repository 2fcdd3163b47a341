/* The MPI 4 large-count `_c` functions: sizes and counts of types and statuses beyond
 * INT_MAX with their int forms' MPI_UNDEFINED, the _c datatype constructors and their
 * envelope, pack/unpack, small _c sends and receives of every kind, and collectives
 * with MPI_Count count and MPI_Aint displacement arrays, MPI-IO and MPI_Pack_external,
 * persistent collectives, one-sided calls, MPI_Op_create_c and MPI_Register_datarep_c. With the argument
 * `big`, only a message of 2^31 + 24 MPI_CHARs (the harness runs it where the memory
 * allows). Needs 2 ranks; rank 0 prints. */
#include "check.h"
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define BIG (((MPI_Count)1 << 31) + 24)

static unsigned char pattern(MPI_Count i) { return (unsigned char)(i * 7 + (i >> 20)); }

static void big_message(int rank)
{
    unsigned char *buf = malloc(BIG);
    MPI_Status st;
    MPI_Count n = -1, i;
    int small = 0;
    CHECK(buf != NULL);
    if (rank == 0) {
        for (i = 0; i < BIG; i++)
            buf[i] = pattern(i);
        CHECK_RC(MPI_Send_c(buf, BIG, MPI_CHAR, 1, 7, MPI_COMM_WORLD));
    } else {
        memset(buf, 0, BIG);
        CHECK_RC(MPI_Recv_c(buf, BIG, MPI_CHAR, 0, 7, MPI_COMM_WORLD, &st));
        CHECK_RC(MPI_Get_count_c(&st, MPI_CHAR, &n));
        CHECK(n == BIG);
        CHECK_RC(MPI_Get_elements_c(&st, MPI_CHAR, &n));
        CHECK(n == BIG);
        CHECK_RC(MPI_Get_count(&st, MPI_CHAR, &small));
        CHECK(small == MPI_UNDEFINED);
        for (i = 0; i < BIG; i += 4093)
            CHECK(buf[i] == pattern(i));
        for (i = BIG - 4096; i < BIG; i++)
            CHECK(buf[i] == pattern(i));
    }
    free(buf);
}

/* Start, complete and free a persistent request. */
static void start_free(MPI_Request *r)
{
    CHECK_RC(MPI_Start(r));
    CHECK_RC(MPI_Wait(r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Request_free(r));
}

/* Whether {a, b} is {x, y} (a periodic ring of 2 has the same neighbour on both sides). */
static int pair_is(int a, int b, int x, int y) { return (a == x && b == y) || (a == y && b == x); }

/* Every persistent collective's _c form (MPI_Count counts, MPI_Aint displacements). */
static void persistent_c(int rank)
{
    int in[4], out[8], i, o = 1 - rank, dims[1] = {2}, periods[1] = {1};
    MPI_Count c2[2] = {1, 1};
    MPI_Aint d2[2] = {0, 1}, dw[2] = {0, sizeof(int)};
    MPI_Datatype tw[2] = {MPI_INT, MPI_INT};
    MPI_Request r;
    MPI_Comm w = MPI_COMM_WORLD, ring;
    MPI_Info ni = MPI_INFO_NULL;
    for (i = 0; i < 4; i++)
        in[i] = 10 * rank + i;
#define RESET()                                                                            \
    for (i = 0; i < 8; i++)                                                                \
    out[i] = -1
    RESET();
    out[0] = rank == 0 ? 42 : 0;
    CHECK_RC(MPI_Bcast_init_c(out, 1, MPI_INT, 0, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == 42);
    RESET();
    CHECK_RC(MPI_Reduce_init_c(in, out, 2, MPI_INT, MPI_SUM, 0, w, ni, &r));
    start_free(&r);
    CHECK(rank != 0 || (out[0] == 10 && out[1] == 12));
    RESET();
    CHECK_RC(MPI_Allreduce_init_c(in, out, 2, MPI_INT, MPI_SUM, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == 10 && out[1] == 12);
    RESET();
    CHECK_RC(MPI_Reduce_scatter_block_init_c(in, out, 1, MPI_INT, MPI_SUM, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == 10 + 2 * rank);
    RESET();
    CHECK_RC(MPI_Reduce_scatter_init_c(in, out, c2, MPI_INT, MPI_SUM, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == 10 + 2 * rank);
    RESET();
    CHECK_RC(MPI_Scan_init_c(in, out, 1, MPI_INT, MPI_SUM, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == (rank == 0 ? 0 : 10));
    RESET();
    CHECK_RC(MPI_Exscan_init_c(in, out, 1, MPI_INT, MPI_SUM, w, ni, &r));
    start_free(&r);
    CHECK(rank == 0 || out[0] == 0);
    RESET();
    CHECK_RC(MPI_Gather_init_c(in, 1, MPI_INT, out, 1, MPI_INT, 0, w, ni, &r));
    start_free(&r);
    CHECK(rank != 0 || (out[0] == 0 && out[1] == 10));
    RESET();
    CHECK_RC(MPI_Gatherv_init_c(in, 1, MPI_INT, out, c2, d2, MPI_INT, 0, w, ni, &r));
    start_free(&r);
    CHECK(rank != 0 || (out[0] == 0 && out[1] == 10));
    RESET();
    CHECK_RC(MPI_Scatter_init_c(in, 1, MPI_INT, out, 1, MPI_INT, 0, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == rank);
    RESET();
    CHECK_RC(MPI_Scatterv_init_c(in, c2, d2, MPI_INT, out, 1, MPI_INT, 0, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == rank);
    RESET();
    CHECK_RC(MPI_Allgather_init_c(in, 1, MPI_INT, out, 1, MPI_INT, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == 0 && out[1] == 10);
    RESET();
    CHECK_RC(MPI_Allgatherv_init_c(in, 1, MPI_INT, out, c2, d2, MPI_INT, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == 0 && out[1] == 10);
    RESET();
    CHECK_RC(MPI_Alltoall_init_c(in, 1, MPI_INT, out, 1, MPI_INT, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == rank && out[1] == 10 + rank);
    RESET();
    CHECK_RC(MPI_Alltoallv_init_c(in, c2, d2, MPI_INT, out, c2, d2, MPI_INT, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == rank && out[1] == 10 + rank);
    RESET();
    CHECK_RC(MPI_Alltoallw_init_c(in, c2, dw, tw, out, c2, dw, tw, w, ni, &r));
    start_free(&r);
    CHECK(out[0] == rank && out[1] == 10 + rank);
    CHECK_RC(MPI_Cart_create(w, 1, dims, periods, 0, &ring));
    RESET();
    CHECK_RC(MPI_Neighbor_allgather_init_c(in, 1, MPI_INT, out, 1, MPI_INT, ring, ni, &r));
    start_free(&r);
    CHECK(out[0] == 10 * o && out[1] == 10 * o);
    RESET();
    CHECK_RC(MPI_Neighbor_allgatherv_init_c(in, 1, MPI_INT, out, c2, d2, MPI_INT, ring, ni, &r));
    start_free(&r);
    CHECK(out[0] == 10 * o && out[1] == 10 * o);
    RESET();
    CHECK_RC(MPI_Neighbor_alltoall_init_c(in, 1, MPI_INT, out, 1, MPI_INT, ring, ni, &r));
    start_free(&r);
    CHECK(pair_is(out[0], out[1], 10 * o, 10 * o + 1));
    RESET();
    CHECK_RC(MPI_Neighbor_alltoallv_init_c(in, c2, d2, MPI_INT, out, c2, d2, MPI_INT, ring, ni, &r));
    start_free(&r);
    CHECK(pair_is(out[0], out[1], 10 * o, 10 * o + 1));
    RESET();
    CHECK_RC(MPI_Neighbor_alltoallw_init_c(in, c2, dw, tw, out, c2, dw, tw, ring, ni, &r));
    start_free(&r);
    CHECK(pair_is(out[0], out[1], 10 * o, 10 * o + 1));
    CHECK_RC(MPI_Comm_free(&ring));
#undef RESET
}

/* The one-sided _c functions: windows with MPI_Aint displacement units, MPI_Count counts.
 * A fence follows each look at our window memory: the peer writes it in the next epoch. */
static void rma_c(int rank)
{
    int *base, *shared, *peer, v[2], res[2], mem[2], i, o = 1 - rank;
    MPI_Win win;
    MPI_Request r;
    MPI_Aint qsize = 0, qunit = 0;
    CHECK_RC(MPI_Win_allocate_c(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                                &base, &win));
    for (i = 0; i < 4; i++)
        base[i] = -1;
    v[0] = 100 + rank;
    v[1] = 200 + rank;
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Put_c(v, 2, MPI_INT, o, 0, 2, MPI_INT, win));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(base[0] == 100 + o && base[1] == 200 + o);
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Get_c(res, 2, MPI_INT, o, 0, 2, MPI_INT, win));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(res[0] == 100 + rank && res[1] == 200 + rank);
    CHECK_RC(MPI_Accumulate_c(v, 2, MPI_INT, o, 0, 2, MPI_INT, MPI_SUM, win));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(base[0] == 200 + 2 * o && base[1] == 400 + 2 * o);
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Get_accumulate_c(v, 1, MPI_INT, res, 1, MPI_INT, o, 2, 1, MPI_INT, MPI_SUM, win));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(res[0] == -1 && base[2] == 99 + o);
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Rput_c(v, 1, MPI_INT, o, 3, 1, MPI_INT, win, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(base[3] == 100 + o);
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Rget_c(res, 1, MPI_INT, o, 3, 1, MPI_INT, win, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(res[0] == 100 + rank);
    CHECK_RC(MPI_Raccumulate_c(v, 1, MPI_INT, o, 3, 1, MPI_INT, MPI_SUM, win, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(base[3] == 200 + 2 * o);
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Rget_accumulate_c(v, 1, MPI_INT, res, 1, MPI_INT, o, 3, 1, MPI_INT, MPI_SUM, win,
                                   &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(res[0] == 200 + 2 * rank && base[3] == 300 + 3 * o);
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Win_free(&win));
    mem[0] = mem[1] = 50 + rank;
    CHECK_RC(MPI_Win_create_c(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Get_c(res, 1, MPI_INT, o, 1, 1, MPI_INT, win));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(res[0] == 50 + o);
    CHECK_RC(MPI_Win_free(&win));
    CHECK_RC(MPI_Win_allocate_shared_c(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                                       &shared, &win));
    CHECK_RC(MPI_Win_fence(0, win));
    *shared = 7 + rank;
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Win_shared_query_c(win, o, &qsize, &qunit, &peer));
    CHECK(qsize == sizeof(int) && qunit == sizeof(int) && *peer == 7 + o);
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK_RC(MPI_Win_free(&win));
}

/* A large-count user operation: its length argument is an MPI_Count. */
static MPI_Count user_len = -1;
static void user_twice_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt)
{
    MPI_Count i;
    (void)dt;
    user_len = *len;
    for (i = 0; i < *len; i++)
        ((int *)inout)[i] += 2 * ((int *)in)[i];
}

/* The file extent function of a registered data representation (never called). */
static int file_extent(MPI_Datatype dt, MPI_Aint *extent, void *state)
{
    MPI_Aint lb;
    (void)state;
    return MPI_Type_get_extent(dt, &lb, extent);
}

int main(int argc, char **argv)
{
    int rank, i, ints[4], small, combiner, sbuf[8], rbuf[8];
    MPI_Datatype big, vec, hidx, st, sub;
    MPI_Count sz, n, ni, na, nc, nd, counts[8], pos;
    MPI_Aint lb, ext, addrs[2];
    MPI_Status status;
    MPI_Request req[2];
    MPI_Status sts[2];
    char packed[64];
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (argc > 1 && strcmp(argv[1], "big") == 0) {
        /* The test harness runs this part alone where the memory allows it. */
        big_message(rank);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            printf("std_largecount: a message of 2^31+24 MPI_CHARs with MPI_Send_c/MPI_Recv_c\n");
        MPI_Finalize();
        return 0;
    }

    /* A contiguous type of more than INT_MAX chars: its size only fits the _c forms. */
    CHECK_RC(MPI_Type_contiguous_c(BIG, MPI_CHAR, &big));
    CHECK_RC(MPI_Type_commit(&big));
    CHECK_RC(MPI_Type_size_c(big, &sz));
    CHECK(sz == BIG);
    CHECK_RC(MPI_Type_size(big, &small));
    CHECK(small == MPI_UNDEFINED);
    CHECK_RC(MPI_Type_get_extent_c(big, &n, &sz));
    CHECK(n == 0 && sz == BIG);
    CHECK_RC(MPI_Type_get_true_extent_c(big, &n, &sz));
    CHECK(n == 0 && sz == BIG);
    CHECK_RC(MPI_Pack_size_c(3, big, MPI_COMM_WORLD, &sz));
    CHECK(sz >= 3 * BIG);
    CHECK_RC(MPI_Type_get_envelope_c(big, &ni, &na, &nc, &nd, &combiner));
    CHECK(ni == 0 && na == 0 && nc == 1 && nd == 1 && combiner == MPI_COMBINER_CONTIGUOUS);
    CHECK(class_of_rc(MPI_Type_get_envelope(big, &ints[0], &ints[1], &ints[2], &ints[3])) == MPI_ERR_TYPE);
    CHECK_RC(MPI_Type_free(&big));
    if (rank == 0)
        printf("std_largecount: type of 2^31+24 chars: size and extent only in the _c forms\n");

    /* A status of more than INT_MAX elements. */
    CHECK_RC(MPI_Status_set_elements_x(&status, MPI_INT, (MPI_Count)3 << 30));
    CHECK_RC(MPI_Get_elements_c(&status, MPI_INT, &n));
    CHECK(n == (MPI_Count)3 << 30);
    CHECK_RC(MPI_Get_count_c(&status, MPI_INT, &n));
    CHECK(n == (MPI_Count)3 << 30);
    CHECK_RC(MPI_Get_count(&status, MPI_INT, &small));
    CHECK(small == MPI_UNDEFINED);
    CHECK_RC(MPI_Get_elements(&status, MPI_INT, &small));
    CHECK(small == MPI_UNDEFINED);

    /* The _c constructors and their envelope (MPI 4.1 5.1.13: the large counts). */
    CHECK_RC(MPI_Type_vector_c(4, 1, 2, MPI_INT, &vec));
    CHECK_RC(MPI_Type_commit(&vec));
    CHECK_RC(MPI_Type_size_c(vec, &sz));
    CHECK(sz == 16);
    CHECK_RC(MPI_Type_get_extent(vec, &lb, &ext));
    CHECK(lb == 0 && ext == 28);
    CHECK_RC(MPI_Type_get_envelope_c(vec, &ni, &na, &nc, &nd, &combiner));
    CHECK(ni == 0 && na == 0 && nc == 3 && nd == 1 && combiner == MPI_COMBINER_VECTOR);
    {
        MPI_Datatype old;
        CHECK_RC(MPI_Type_get_contents_c(vec, 0, 0, 3, 1, ints, addrs, counts, &old));
        CHECK(counts[0] == 4 && counts[1] == 1 && counts[2] == 2 && old == MPI_INT);
    }
    {
        MPI_Count bl[2] = {2, 1}, d[2] = {0, 16};
        MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
        CHECK_RC(MPI_Type_create_hindexed_c(2, bl, d, MPI_INT, &hidx));
        CHECK_RC(MPI_Type_size_c(hidx, &sz));
        CHECK(sz == 12);
        CHECK_RC(MPI_Type_create_struct_c(2, bl, d, types, &st));
        CHECK_RC(MPI_Type_size_c(st, &sz));
        CHECK(sz == 16);
        CHECK_RC(MPI_Type_get_extent_c(st, &n, &sz));
        CHECK(n == 0 && sz == 24);
        CHECK_RC(MPI_Type_get_envelope_c(st, &ni, &na, &nc, &nd, &combiner));
        CHECK(ni == 0 && na == 0 && nc == 5 && nd == 2 && combiner == MPI_COMBINER_STRUCT);
    }
    {
        MPI_Count sizes[2] = {4, 6}, subs[2] = {2, 3}, starts[2] = {1, 2};
        CHECK_RC(MPI_Type_create_subarray_c(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub));
        CHECK_RC(MPI_Type_size_c(sub, &sz));
        CHECK(sz == 24);
        CHECK_RC(MPI_Type_get_envelope_c(sub, &ni, &na, &nc, &nd, &combiner));
        CHECK(ni == 2 && na == 0 && nc == 6 && nd == 1 && combiner == MPI_COMBINER_SUBARRAY);
    }
    {
        MPI_Datatype r, ix, ib, hb, hv;
        MPI_Count bl[2] = {1, 2}, d[2] = {3, 0}, hd[2] = {8, 0};
        CHECK_RC(MPI_Type_create_resized_c(MPI_INT, -4, 16, &r));
        CHECK_RC(MPI_Type_get_extent_c(r, &n, &sz));
        CHECK(n == -4 && sz == 16);
        CHECK_RC(MPI_Type_indexed_c(2, bl, d, MPI_INT, &ix));
        CHECK_RC(MPI_Type_size_c(ix, &sz));
        CHECK(sz == 12);
        CHECK_RC(MPI_Type_create_indexed_block_c(2, 2, d, MPI_INT, &ib));
        CHECK_RC(MPI_Type_size_c(ib, &sz));
        CHECK(sz == 16);
        CHECK_RC(MPI_Type_create_hindexed_block_c(2, 3, hd, MPI_SHORT, &hb));
        CHECK_RC(MPI_Type_size_c(hb, &sz));
        CHECK(sz == 12);
        CHECK_RC(MPI_Type_create_hvector_c(3, 2, 100, MPI_CHAR, &hv));
        CHECK_RC(MPI_Type_get_extent_c(hv, &n, &sz));
        CHECK(n == 0 && sz == 202);
        MPI_Type_free(&r);
        MPI_Type_free(&ix);
        MPI_Type_free(&ib);
        MPI_Type_free(&hb);
        MPI_Type_free(&hv);
    }
    if (rank == 0)
        printf("std_largecount: _c constructors, sizes, extents and envelopes\n");

    /* Pack_c/Unpack_c of the vector type (every other int of 8). */
    for (i = 0; i < 8; i++)
        sbuf[i] = 10 + i;
    pos = 0;
    CHECK_RC(MPI_Pack_size_c(1, vec, MPI_COMM_WORLD, &sz));
    CHECK(sz >= 16 && sz <= (MPI_Count)sizeof packed);
    CHECK_RC(MPI_Pack_c(sbuf, 1, vec, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(pos == 16);
    memset(rbuf, 0, sizeof rbuf);
    pos = 0;
    CHECK_RC(MPI_Unpack_c(packed, 16, &pos, rbuf, 4, MPI_INT, MPI_COMM_WORLD));
    CHECK(pos == 16 && rbuf[0] == 10 && rbuf[1] == 12 && rbuf[2] == 14 && rbuf[3] == 16);
    if (rank == 0)
        printf("std_largecount: MPI_Pack_c and MPI_Unpack_c\n");

    /* Small _c point-to-point of every kind between ranks 0 and 1. */
    for (i = 0; i < 8; i++)
        sbuf[i] = 100 * rank + i;
    {
        int peer = 1 - rank;
        CHECK_RC(MPI_Sendrecv_c(sbuf, 8, MPI_INT, peer, 1, rbuf, 8, MPI_INT, peer, 1,
                                MPI_COMM_WORLD, &status));
        CHECK_RC(MPI_Get_count_c(&status, MPI_INT, &n));
        CHECK(n == 8 && rbuf[7] == 100 * peer + 7);
        CHECK_RC(MPI_Irecv_c(rbuf, 1, vec, peer, 2, MPI_COMM_WORLD, &req[0]));
        CHECK_RC(MPI_Isend_c(sbuf, 4, MPI_INT, peer, 2, MPI_COMM_WORLD, &req[1]));
        CHECK_RC(MPI_Waitall(2, req, sts));
        CHECK(rbuf[0] == 100 * peer && rbuf[2] == 100 * peer + 1 && rbuf[6] == 100 * peer + 3);
        if (rank == 0) {
            CHECK_RC(MPI_Ssend_c(sbuf, 2, MPI_INT, 1, 3, MPI_COMM_WORLD));
            CHECK_RC(MPI_Send_init_c(sbuf, 3, MPI_INT, 1, 4, MPI_COMM_WORLD, &req[0]));
            CHECK_RC(MPI_Start(&req[0]));
            CHECK_RC(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Request_free(&req[0]));
        } else {
            MPI_Message msg;
            CHECK_RC(MPI_Mprobe(0, 3, MPI_COMM_WORLD, &msg, &status));
            CHECK_RC(MPI_Mrecv_c(rbuf, 8, MPI_INT, &msg, &status));
            CHECK_RC(MPI_Get_count_c(&status, MPI_INT, &n));
            CHECK(n == 2 && rbuf[1] == 1);
            CHECK_RC(MPI_Recv_init_c(rbuf, 8, MPI_INT, 0, 4, MPI_COMM_WORLD, &req[0]));
            CHECK_RC(MPI_Start(&req[0]));
            CHECK_RC(MPI_Wait(&req[0], &status));
            CHECK_RC(MPI_Get_count_c(&status, MPI_INT, &n));
            CHECK(n == 3);
            CHECK_RC(MPI_Request_free(&req[0]));
        }
        CHECK_RC(MPI_Sendrecv_replace_c(sbuf, 8, MPI_INT, peer, 5, peer, 5, MPI_COMM_WORLD,
                                        MPI_STATUS_IGNORE));
        CHECK(sbuf[5] == 100 * peer + 5);
        CHECK(class_of_rc(MPI_Send_c(sbuf, -1, MPI_INT, peer, 6, MPI_COMM_WORLD)) == MPI_ERR_COUNT);
    }
    if (rank == 0)
        printf("std_largecount: small _c sends and receives\n");

    /* Collectives with MPI_Count counts and MPI_Aint displacements (2 ranks). */
    {
        int size, in[4], outv[8], expect;
        MPI_Count rc[2], one = 1;
        MPI_Aint dis[2];
        MPI_Datatype ts[2] = {MPI_INT, MPI_INT};
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        CHECK(size == 2);
        in[0] = rank + 1;
        CHECK_RC(MPI_Allreduce_c(in, outv, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(outv[0] == 3);
        outv[0] = rank == 0 ? 42 : 0;
        CHECK_RC(MPI_Bcast_c(outv, 1, MPI_INT, 0, MPI_COMM_WORLD));
        CHECK(outv[0] == 42);
        /* rank r contributes r + 1 ints, placed at displacement 4 * r. */
        for (i = 0; i < 4; i++)
            in[i] = 10 * rank + i;
        rc[0] = 1;
        rc[1] = 2;
        dis[0] = 0;
        dis[1] = 4;
        for (i = 0; i < 8; i++)
            outv[i] = -1;
        CHECK_RC(MPI_Allgatherv_c(in, rank + 1, MPI_INT, outv, rc, dis, MPI_INT, MPI_COMM_WORLD));
        CHECK(outv[0] == 0 && outv[1] == -1 && outv[4] == 10 && outv[5] == 11 && outv[6] == -1);
        for (i = 0; i < 8; i++)
            outv[i] = -1;
        CHECK_RC(MPI_Gatherv_c(in, rank + 1, MPI_INT, outv, rc, dis, MPI_INT, 1, MPI_COMM_WORLD));
        if (rank == 1)
            CHECK(outv[0] == 0 && outv[4] == 10 && outv[5] == 11);
        {
            MPI_Count sc[2] = {1, 1}, rcs[2] = {1, 1};
            MPI_Aint sd[2] = {0, 1}, rd[2] = {1, 0}, bsd[2] = {0, 4}, brd[2] = {4, 0};
            CHECK_RC(MPI_Alltoallv_c(in, sc, sd, MPI_INT, outv, rcs, rd, MPI_INT, MPI_COMM_WORLD));
            CHECK(outv[1] == 10 * 0 + rank && outv[0] == 10 * 1 + rank);
            CHECK_RC(MPI_Alltoallw_c(in, sc, bsd, ts, outv, rcs, brd, ts, MPI_COMM_WORLD));
            CHECK(outv[1] == 10 * 0 + rank && outv[0] == 10 * 1 + rank);
        }
        in[0] = rank;
        in[1] = 10 + rank;
        CHECK_RC(MPI_Reduce_scatter_c(in, outv, (MPI_Count[]){1, 1}, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        expect = rank == 0 ? 1 : 21;
        CHECK(outv[0] == expect);
        CHECK_RC(MPI_Reduce_scatter_block_c(in, outv, one, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(outv[0] == expect);
        CHECK_RC(MPI_Iallreduce_c(in, outv, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req[0]));
        CHECK_RC(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
        CHECK(outv[0] == 1 && outv[1] == 11);
        for (i = 0; i < 8; i++)
            outv[i] = -1;
        in[0] = 10 * rank;
        in[1] = 10 * rank + 1;
        CHECK_RC(MPI_Iallgatherv_c(in, rank + 1, MPI_INT, outv, rc, dis, MPI_INT, MPI_COMM_WORLD, &req[0]));
        CHECK_RC(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
        CHECK(outv[0] == 0 && outv[4] == 10 && outv[5] == 11);
        CHECK_RC(MPI_Scan_c(in, outv, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(outv[0] == (rank == 0 ? 0 : 10));
    }
    if (rank == 0)
        printf("std_largecount: collectives with MPI_Count counts and MPI_Aint displacements\n");
    /* A neighbourhood collective on a periodic ring of 2 and MPI_Reduce_local_c. */
    {
        MPI_Comm ring;
        int dims[1] = {2}, periods[1] = {1}, mine = rank + 5, got[2] = {0, 0};
        CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
        CHECK_RC(MPI_Neighbor_allgather_c(&mine, 1, MPI_INT, got, 1, MPI_INT, ring));
        CHECK(got[0] == 6 - rank && got[1] == 6 - rank);
        CHECK_RC(MPI_Ineighbor_alltoall_c(got, 1, MPI_INT, sbuf, 1, MPI_INT, ring, &req[0]));
        CHECK_RC(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
        CHECK(sbuf[0] == 5 + rank && sbuf[1] == 5 + rank);
        CHECK_RC(MPI_Comm_free(&ring));
        got[0] = 3;
        got[1] = 4;
        CHECK_RC(MPI_Reduce_local_c(got, sbuf, 2, MPI_INT, MPI_PROD));
        CHECK(sbuf[0] == 3 * (5 + rank) && sbuf[1] == 4 * (5 + rank));
    }
    if (rank == 0)
        printf("std_largecount: neighbourhood collectives and MPI_Reduce_local_c\n");

    /* MPI-IO and MPI_Pack_external with MPI_Count counts. */
    {
        char path[256];
        const char *tmp = getenv("TMPDIR");
        int pid = (int)getpid(), vals[4], back[4];
        MPI_File fh;
        MPI_Request r;
        MPI_Count epos = 0;
        MPI_Count esz;
        CHECK_RC(MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD));
        snprintf(path, sizeof path, "%s/oxmpi-std-lc-%d", tmp && *tmp ? tmp : "/tmp", pid);
        CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path,
                               MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                               MPI_INFO_NULL, &fh));
        for (i = 0; i < 4; i++)
            vals[i] = 100 * rank + i;
        CHECK_RC(MPI_File_write_at_c(fh, 16 * rank, vals, 2, MPI_INT, &status));
        CHECK_RC(MPI_Get_count_c(&status, MPI_INT, &n));
        CHECK(n == 2);
        CHECK_RC(MPI_File_iwrite_at_c(fh, 16 * rank + 8, vals + 2, 2, MPI_INT, &r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_File_sync(fh));
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_RC(MPI_File_sync(fh));
        CHECK_RC(MPI_File_read_at_all_c(fh, 16 * (1 - rank), back, 4, MPI_INT, &status));
        CHECK_RC(MPI_Get_count_c(&status, MPI_INT, &n));
        CHECK(n == 4 && back[0] == 100 * (1 - rank) && back[3] == 100 * (1 - rank) + 3);
        CHECK_RC(MPI_File_get_type_extent_c(fh, MPI_INT, &esz));
        CHECK(esz == (MPI_Count)sizeof(int));
        CHECK_RC(MPI_File_close(&fh));
        CHECK_RC(MPI_Pack_external_size_c("external32", 4, MPI_INT, &esz));
        CHECK(esz == 16);
        CHECK_RC(MPI_Pack_external_c("external32", vals, 4, MPI_INT, packed, sizeof packed, &epos));
        CHECK(epos == 16 && packed[3] == (char)vals[0]);
        memset(back, 0, sizeof back);
        epos = 0;
        CHECK_RC(MPI_Unpack_external_c("external32", packed, 16, &epos, back, 4, MPI_INT));
        CHECK(epos == 16 && back[1] == vals[1] && back[3] == vals[3]);
    }
    if (rank == 0)
        printf("std_largecount: MPI-IO and MPI_Pack_external_c\n");
    persistent_c(rank);
    if (rank == 0)
        printf("std_largecount: persistent collectives (MPI_*_init_c)\n");
    rma_c(rank);
    if (rank == 0)
        printf("std_largecount: one-sided _c functions and windows\n");
    {
        MPI_Op twice;
        int a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, x = rank + 1, y = 0, rc_i, rc_c;
        CHECK_RC(MPI_Op_create_c(user_twice_c, 1, &twice));
        CHECK_RC(MPI_Reduce_local_c(a, b, 3, MPI_INT, twice));
        CHECK(user_len == 3 && b[0] == 12 && b[2] == 36);
        CHECK_RC(MPI_Allreduce_c(&x, &y, 1, MPI_INT, twice, MPI_COMM_WORLD));
        CHECK(y == 4 || y == 5);
        CHECK_RC(MPI_Op_free(&twice));
        /* Both forms register (in both ABIs); a second registration of a name fails. */
        rc_i = MPI_Register_datarep("oxmpi_lc_rep_i", NULL, NULL, file_extent, NULL);
        rc_c = MPI_Register_datarep_c("oxmpi_lc_rep", NULL, NULL, file_extent, NULL);
        CHECK(rc_i == MPI_SUCCESS && rc_c == MPI_SUCCESS);
        rc_c = MPI_Register_datarep_c("oxmpi_lc_rep", NULL, NULL, file_extent, NULL);
        MPI_Error_class(rc_c, &rc_c);
        CHECK(rc_c == MPI_ERR_DUP_DATAREP);
    }
    if (rank == 0)
        printf("std_largecount: MPI_Op_create_c and MPI_Register_datarep_c\n");
    MPI_Type_free(&vec);
    MPI_Type_free(&hidx);
    MPI_Type_free(&st);
    MPI_Type_free(&sub);

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("std_largecount: all checks passed\n");
    MPI_Finalize();
    return 0;
}
