/* Control variables written after MPI_Init on 2 ranks (MPI_T_cvar_write takes effect when
 * it returns, for the parameters the library re-reads): btl_sm_eager_limit lowered turns a
 * 1000-byte eager send into a rendezvous (pml_ox_eager_limit, pml_ox_rndv_sent),
 * coll_tuned_bcast_algorithm forced to linear moves a broadcast from the shared-memory
 * component to the linear algorithm (coll_*_calls), a parameter fixed at MPI_Init
 * (btl_sm_ring_size) reports MPI_T_SCOPE_CONSTANT and refuses with
 * MPI_T_ERR_CVAR_SET_NEVER. Rank 0 prints deterministic lines. */
#include "check.h"
#include <string.h>

#define T_CHECK(call) CHECK((call) == MPI_SUCCESS)

static MPI_T_pvar_session s;

static int cvar_index(const char *name)
{
    int i = -1;
    T_CHECK(MPI_T_cvar_get_index(name, &i));
    return i;
}

/* A started handle on counter (or size) `name`. */
static MPI_T_pvar_handle pvar(const char *name, int cls)
{
    int i = -1, count;
    MPI_T_pvar_handle h;
    T_CHECK(MPI_T_pvar_get_index(name, cls, &i));
    T_CHECK(MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count));
    CHECK(count == 1);
    int cont = 1;
    T_CHECK(MPI_T_pvar_get_info(i, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                &cont, NULL));
    if (!cont)
        T_CHECK(MPI_T_pvar_start(s, h));
    return h;
}

static unsigned long long readu(MPI_T_pvar_handle h)
{
    unsigned long long v = 0;
    T_CHECK(MPI_T_pvar_read(s, h, &v));
    return v;
}

/* Writes control variable `name` (an unsigned long long or int, as `ull` says). */
static int write_cvar(const char *name, unsigned long long v, int ull)
{
    MPI_T_cvar_handle h;
    int count, iv = (int)v;
    T_CHECK(MPI_T_cvar_handle_alloc(cvar_index(name), NULL, &h, &count));
    int rc = MPI_T_cvar_write(h, ull ? (void *)&v : (void *)&iv);
    T_CHECK(MPI_T_cvar_handle_free(&h));
    return rc;
}

static int scope_of(const char *name)
{
    int scope = -1;
    T_CHECK(MPI_T_cvar_get_info(cvar_index(name), NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                NULL, &scope));
    return scope;
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    T_CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    /* Before MPI_Init every settable parameter may be written. */
    CHECK(scope_of("btl_sm_ring_size") == MPI_T_SCOPE_ALL_EQ);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2);
    T_CHECK(MPI_T_pvar_session_create(&s));
    MPI_T_pvar_handle limit = pvar("pml_ox_eager_limit", MPI_T_PVAR_CLASS_SIZE);
    MPI_T_pvar_handle eager = pvar("pml_ox_eager_sent", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle rndv = pvar("pml_ox_rndv_sent", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle sm_bcast = pvar("coll_sm_bcast_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle linear = pvar("coll_tuned_bcast_linear_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle recv = pvar("coll_tuned_reduce_binomial_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle red_sm = pvar("coll_sm_reduce_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle ibar =
        pvar("coll_nbc_barrier_dissemination_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle ibar_sm = pvar("coll_sm_nonblocking_calls", MPI_T_PVAR_CLASS_COUNTER);

    /* The eager limit: 1000 bytes go eagerly under the default (8192), by rendezvous
     * after the write (on both ranks, as MPI_T_SCOPE_ALL_EQ asks). */
    char buf[1000] = {0};
    int peer = 1 - rank;
    unsigned long long l0 = readu(limit), e0 = readu(eager), r0 = readu(rndv);
    MPI_Sendrecv_replace(buf, sizeof buf, MPI_CHAR, peer, 1, peer, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
    unsigned long long e1 = readu(eager), r1 = readu(rndv);
    CHECK(scope_of("btl_sm_eager_limit") == MPI_T_SCOPE_ALL_EQ);
    T_CHECK(write_cvar("btl_sm_eager_limit", 256, 1));
    unsigned long long l1 = readu(limit);
    MPI_Sendrecv_replace(buf, sizeof buf, MPI_CHAR, peer, 2, peer, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
    unsigned long long e2 = readu(eager), r2 = readu(rndv);
    if (rank == 0)
        printf("mpit_runtime: eager limit %llu then %llu; 1000 bytes eager %llu rndv %llu, "
               "then eager %llu rndv %llu\n",
               l0, l1, e1 - e0, r1 - r0, e2 - e1, r2 - r1);

    /* A collective algorithm: an 8-byte broadcast runs in the shared-memory component
     * until coll_tuned_bcast_algorithm forces the linear algorithm. */
    long long v = 42;
    MPI_Bcast(&v, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    unsigned long long sm0 = readu(sm_bcast), lin0 = readu(linear);
    MPI_Bcast(&v, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    unsigned long long sm1 = readu(sm_bcast), lin1 = readu(linear);
    T_CHECK(write_cvar("coll_tuned_bcast_algorithm", 1, 0));
    MPI_Bcast(&v, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    unsigned long long sm2 = readu(sm_bcast), lin2 = readu(linear);
    T_CHECK(write_cvar("coll_tuned_bcast_algorithm", 0, 0));
    CHECK(v == 42);
    if (rank == 0)
        printf("mpit_runtime: bcast sm %llu linear %llu, forced linear: sm %llu linear %llu\n",
               sm1 - sm0, lin1 - lin0, sm2 - sm1, lin2 - lin1);

    /* Other collectives count their algorithm too, blocking and nonblocking. */
    unsigned long long red0 = readu(recv), redsm0 = readu(red_sm), ib0 = readu(ibar),
                       ibsm0 = readu(ibar_sm);
    long long sum = 0;
    MPI_Reduce(&v, &sum, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rank == 0) {
        CHECK(sum == 84);
        /* A small reduce runs in the shared-memory component. The communicator has a
         * segment by now (the collectives above), so the nonblocking barrier runs there,
         * not as a dissemination schedule. */
        printf("mpit_runtime: reduce sm %llu binomial %llu, ibarrier sm nonblocking %llu "
               "dissemination %llu\n",
               readu(red_sm) - redsm0, readu(recv) - red0, readu(ibar_sm) - ibsm0,
               readu(ibar) - ib0);
    }

    /* Fixed at MPI_Init: constant now, and a write is refused. */
    CHECK(scope_of("btl_sm_ring_size") == MPI_T_SCOPE_CONSTANT);
    CHECK(write_cvar("btl_sm_ring_size", 1 << 20, 1) == MPI_T_ERR_CVAR_SET_NEVER);
    CHECK(scope_of("pml_base_verbose") == MPI_T_SCOPE_LOCAL);
    T_CHECK(write_cvar("pml_base_verbose", 0, 0));
    /* A bad value is refused without changing anything. */
    CHECK(write_cvar("coll_tuned_bcast_algorithm", 1000, 0) == MPI_T_ERR_INVALID);

    T_CHECK(MPI_T_pvar_session_free(&s));
    T_CHECK(MPI_T_finalize());
    MPI_Finalize();
    if (rank == 0)
        printf("mpit_runtime: all checks passed\n");
    return 0;
}
