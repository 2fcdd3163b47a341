/* The tools interface (MPI_T) on 2 ranks: walks every control variable, performance
 * variable, category and event source (the events: mpit_events.c); writes
 * btl_sm_eager_limit before MPI_Init and sees the new path in the performance variables;
 * checks the error codes of misuse. Rank 0 prints deterministic lines (no values that
 * depend on the environment). */
#include "check.h"
#include <string.h>

#define T_CHECK(call) CHECK((call) == MPI_SUCCESS)

static int cvar_index(const char *name)
{
    int i = -1;
    T_CHECK(MPI_T_cvar_get_index(name, &i));
    return i;
}

static int pvar_index(const char *name, int cls)
{
    int i = -1;
    T_CHECK(MPI_T_pvar_get_index(name, cls, &i));
    return i;
}

/* Every control variable: its info, a handle, a read. */
static int walk_cvars(void)
{
    int n = 0, readable = 0;
    T_CHECK(MPI_T_cvar_get_num(&n));
    CHECK(n > 20);
    for (int i = 0; i < n; i++) {
        char name[256], desc[1024];
        int name_len = sizeof name, desc_len = sizeof desc, verb, bind, scope, count;
        MPI_Datatype dt;
        MPI_T_enum en;
        T_CHECK(MPI_T_cvar_get_info(i, name, &name_len, &verb, &dt, &en, desc, &desc_len,
                                    &bind, &scope));
        CHECK(name_len == (int)strlen(name) + 1);
        CHECK(verb >= MPI_T_VERBOSITY_USER_BASIC && verb <= MPI_T_VERBOSITY_MPIDEV_ALL);
        CHECK(bind == MPI_T_BIND_NO_OBJECT);
        CHECK(scope == MPI_T_SCOPE_CONSTANT || scope == MPI_T_SCOPE_READONLY ||
              scope == MPI_T_SCOPE_LOCAL || scope == MPI_T_SCOPE_ALL_EQ);
        int j = -1;
        T_CHECK(MPI_T_cvar_get_index(name, &j));
        CHECK(j == i);
        if (en != MPI_T_ENUM_NULL) {
            int items = 0, v;
            char ename[256], iname[256];
            int elen = sizeof ename, ilen = sizeof iname;
            T_CHECK(MPI_T_enum_get_info(en, &items, ename, &elen));
            CHECK(items > 0 && strcmp(ename, name) == 0);
            T_CHECK(MPI_T_enum_get_item(en, items - 1, &v, iname, &ilen));
            CHECK(MPI_T_enum_get_item(en, items, &v, iname, &ilen) == MPI_T_ERR_INVALID_ITEM);
        }
        MPI_T_cvar_handle h;
        T_CHECK(MPI_T_cvar_handle_alloc(i, NULL, &h, &count));
        if (dt == MPI_INT) {
            int v;
            T_CHECK(MPI_T_cvar_read(h, &v));
        } else if (dt == MPI_COUNT) {
            MPI_Count v;
            T_CHECK(MPI_T_cvar_read(h, &v));
        } else if (dt == MPI_UNSIGNED_LONG_LONG) {
            unsigned long long v;
            T_CHECK(MPI_T_cvar_read(h, &v));
        } else {
            CHECK(dt == MPI_CHAR);
            char *s = malloc(count);
            T_CHECK(MPI_T_cvar_read(h, s));
            CHECK((int)strlen(s) < count);
            free(s);
        }
        readable++;
        T_CHECK(MPI_T_cvar_handle_free(&h));
        CHECK(h == MPI_T_CVAR_HANDLE_NULL);
    }
    return readable == n;
}

/* Every category: its info and members, each member index valid. */
static int walk_categories(int ncvar, int npvar)
{
    int n = 0, members = 0;
    T_CHECK(MPI_T_category_get_num(&n));
    CHECK(n > 3);
    for (int i = 0; i < n; i++) {
        char name[256], desc[1024];
        int name_len = sizeof name, desc_len = sizeof desc, nc, np, ns, ne;
        T_CHECK(MPI_T_category_get_info(i, name, &name_len, desc, &desc_len, &nc, &np, &ns));
        int j = -1;
        T_CHECK(MPI_T_category_get_index(name, &j));
        CHECK(j == i);
        T_CHECK(MPI_T_category_get_num_events(i, &ne));
        CHECK(ne >= 0);
        int *idx = malloc(sizeof(int) * (nc + np + ns + ne + 1));
        T_CHECK(MPI_T_category_get_cvars(i, nc, idx));
        for (int k = 0; k < nc; k++)
            CHECK(idx[k] >= 0 && idx[k] < ncvar);
        T_CHECK(MPI_T_category_get_pvars(i, np, idx));
        for (int k = 0; k < np; k++)
            CHECK(idx[k] >= 0 && idx[k] < npvar);
        T_CHECK(MPI_T_category_get_categories(i, ns, idx));
        for (int k = 0; k < ns; k++)
            CHECK(idx[k] > i && idx[k] < n);
        T_CHECK(MPI_T_category_get_events(i, ne, idx));
        free(idx);
        members += nc + np;
    }
    int changed;
    T_CHECK(MPI_T_category_changed(&changed));
    return members == ncvar + npvar;
}

/* Every performance variable: its info, a handle, a read (start/stop when allowed). */
static int walk_pvars(MPI_T_pvar_session s)
{
    int n = 0;
    T_CHECK(MPI_T_pvar_get_num(&n));
    CHECK(n >= 20);
    for (int i = 0; i < n; i++) {
        char name[256], desc[1024];
        int name_len = sizeof name, desc_len = sizeof desc;
        int verb, cls, bind, ro, cont, atomic, count;
        MPI_Datatype dt;
        MPI_T_enum en;
        T_CHECK(MPI_T_pvar_get_info(i, name, &name_len, &verb, &cls, &dt, &en, desc, &desc_len,
                                    &bind, &ro, &cont, &atomic));
        CHECK(pvar_index(name, cls) == i);
        CHECK(dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_DOUBLE);
        MPI_T_pvar_handle h;
        if (bind == MPI_T_BIND_MPI_COMM) {
            /* Needs a communicator (mpit_comm.c); none exists before MPI_Init. */
            CHECK(MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count) != MPI_SUCCESS);
            continue;
        }
        CHECK(bind == MPI_T_BIND_NO_OBJECT);
        T_CHECK(MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count));
        CHECK(count == 1);
        if (cont)
            CHECK(MPI_T_pvar_start(s, h) == MPI_T_ERR_PVAR_NO_STARTSTOP);
        else
            T_CHECK(MPI_T_pvar_start(s, h));
        double d;
        unsigned long long u;
        T_CHECK(MPI_T_pvar_read(s, h, dt == MPI_DOUBLE ? (void *)&d : (void *)&u));
        if (ro)
            CHECK(MPI_T_pvar_reset(s, h) == MPI_T_ERR_PVAR_NO_WRITE);
        if (!cont)
            T_CHECK(MPI_T_pvar_stop(s, h));
        T_CHECK(MPI_T_pvar_handle_free(s, &h));
        CHECK(h == MPI_T_PVAR_HANDLE_NULL);
    }
    return n;
}

/* After MPI_Init: every variable bound to a communicator, on MPI_COMM_WORLD (one value, or
 * an array of one per rank for the per-peer ones); returns how many were walked. */
static int walk_bound_pvars(MPI_T_pvar_session s, int size)
{
    int n = 0, walked = 0;
    T_CHECK(MPI_T_pvar_get_num(&n));
    for (int i = 0; i < n; i++) {
        char name[256];
        int name_len = sizeof name, bind, cont, count = -1;
        MPI_Datatype dt;
        T_CHECK(MPI_T_pvar_get_info(i, name, &name_len, NULL, NULL, &dt, NULL, NULL, NULL, &bind,
                                    NULL, &cont, NULL));
        if (bind != MPI_T_BIND_MPI_COMM)
            continue;
        MPI_T_pvar_handle h;
        MPI_Comm c = MPI_COMM_WORLD;
        T_CHECK(MPI_T_pvar_handle_alloc(s, i, &c, &h, &count));
        CHECK(count == (strstr(name, "_peer_") ? size : 1));
        CHECK(dt == MPI_UNSIGNED_LONG_LONG && cont);
        unsigned long long *v = calloc(count, sizeof *v);
        T_CHECK(MPI_T_pvar_read(s, h, v));
        free(v);
        T_CHECK(MPI_T_pvar_handle_free(s, &h));
        walked++;
    }
    return walked;
}

static void walk_sources(void)
{
    int n = 0;
    T_CHECK(MPI_T_source_get_num(&n));
    CHECK(n == 1);
    char name[64], desc[256];
    int nl = sizeof name, dl = sizeof desc;
    MPI_T_source_order ord;
    MPI_Count tps, max, t0, t1;
    MPI_Info info;
    T_CHECK(MPI_T_source_get_info(0, name, &nl, desc, &dl, &ord, &tps, &max, &info));
    CHECK(ord == MPI_T_SOURCE_ORDERED && tps == 1000000000);
    T_CHECK(MPI_T_source_get_timestamp(0, &t0));
    T_CHECK(MPI_T_source_get_timestamp(0, &t1));
    CHECK(t1 >= t0);
    CHECK(MPI_T_source_get_timestamp(1, &t1) == MPI_T_ERR_INVALID_INDEX);
    T_CHECK(MPI_T_event_get_num(&n));
    CHECK(n >= 4); /* walked by mpit_events.c */
    CHECK(MPI_T_event_get_index("none", &n) == MPI_T_ERR_INVALID_NAME);
}

static unsigned long long readu(MPI_T_pvar_session s, MPI_T_pvar_handle h)
{
    unsigned long long v;
    T_CHECK(MPI_T_pvar_read(s, h, &v));
    return v;
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    /* Misuse before initialization. */
    int n;
    CHECK(MPI_T_cvar_get_num(&n) == MPI_T_ERR_NOT_INITIALIZED);
    T_CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    T_CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided)); /* counted */
    T_CHECK(MPI_T_finalize());

    int ncvar, npvar;
    T_CHECK(MPI_T_cvar_get_num(&ncvar));
    CHECK(walk_cvars());
    MPI_T_pvar_session s;
    T_CHECK(MPI_T_pvar_session_create(&s));
    npvar = walk_pvars(s);
    CHECK(walk_categories(ncvar, npvar));
    walk_sources();
    CHECK(MPI_T_cvar_get_index("no_such_parameter", &n) == MPI_T_ERR_INVALID_NAME);
    CHECK(MPI_T_cvar_get_info(ncvar, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) ==
          MPI_T_ERR_INVALID_INDEX);

    /* Before the first communication: lower the eager limit to 64 bytes. */
    MPI_T_cvar_handle eager;
    int count;
    T_CHECK(MPI_T_cvar_handle_alloc(cvar_index("btl_sm_eager_limit"), NULL, &eager, &count));
    unsigned long long limit = 64, back = 0;
    T_CHECK(MPI_T_cvar_write(eager, &limit));
    T_CHECK(MPI_T_cvar_read(eager, &back));
    CHECK(back == 64);
    /* A read-only one cannot be written. */
    int ro = -1;
    for (int i = 0; i < ncvar && ro < 0; i++) {
        int scope;
        T_CHECK(MPI_T_cvar_get_info(i, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &scope));
        if (scope == MPI_T_SCOPE_CONSTANT)
            ro = i;
    }
    if (ro >= 0) {
        MPI_T_cvar_handle h;
        char buf[1024];
        T_CHECK(MPI_T_cvar_handle_alloc(ro, NULL, &h, &count));
        T_CHECK(MPI_T_cvar_read(h, buf));
        CHECK(MPI_T_cvar_write(h, buf) == MPI_T_ERR_CVAR_SET_NEVER);
        T_CHECK(MPI_T_cvar_handle_free(&h));
    }

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2);
    /* Still writable after MPI_Init (the library re-reads it: mpit_runtime.c). */
    T_CHECK(MPI_T_cvar_write(eager, &limit));
    T_CHECK(MPI_T_cvar_handle_free(&eager));

    MPI_T_pvar_handle h_eager, h_rndv, h_limit, h_sent, h_wait;
    T_CHECK(MPI_T_pvar_handle_alloc(s, pvar_index("pml_ox_eager_sent", MPI_T_PVAR_CLASS_COUNTER),
                                    NULL, &h_eager, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, pvar_index("pml_ox_rndv_sent", MPI_T_PVAR_CLASS_COUNTER),
                                    NULL, &h_rndv, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, pvar_index("pml_ox_eager_limit", MPI_T_PVAR_CLASS_SIZE),
                                    NULL, &h_limit, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, pvar_index("btl_sm_msgs_sent", MPI_T_PVAR_CLASS_COUNTER),
                                    NULL, &h_sent, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, pvar_index("pml_ox_wait_time", MPI_T_PVAR_CLASS_TIMER),
                                    NULL, &h_wait, &count));
    T_CHECK(MPI_T_pvar_start(s, MPI_T_PVAR_ALL_HANDLES));
    T_CHECK(MPI_T_pvar_reset(s, MPI_T_PVAR_ALL_HANDLES));

    char small[32] = {0}, big[100] = {0};
    if (rank == 0) {
        MPI_Send(small, sizeof small, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Send(big, sizeof big, MPI_CHAR, 1, 2, MPI_COMM_WORLD);
        MPI_Recv(small, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(small, sizeof small, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(big, sizeof big, MPI_CHAR, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(small, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
    }
    T_CHECK(MPI_T_pvar_stop(s, MPI_T_PVAR_ALL_HANDLES));
    unsigned long long e = readu(s, h_eager), r = readu(s, h_rndv), l = readu(s, h_limit);
    unsigned long long sent = readu(s, h_sent);
    double waited;
    T_CHECK(MPI_T_pvar_read(s, h_wait, &waited));
    CHECK(waited >= 0.0);
    if (rank == 0) {
        CHECK(sent == 2);
        printf("mpit: eager limit %llu, eager sends %llu, rendezvous sends %llu\n", l, e, r);
    }
    unsigned long long zero;
    T_CHECK(MPI_T_pvar_readreset(s, h_sent, &zero));
    CHECK(readu(s, h_sent) == 0);
    unsigned long long seven = 7;
    T_CHECK(MPI_T_pvar_write(s, h_sent, &seven));
    CHECK(readu(s, h_sent) == 7);
    CHECK(MPI_T_pvar_read(s, MPI_T_PVAR_ALL_HANDLES, &zero) == MPI_T_ERR_INVALID_HANDLE);
    int nbound = walk_bound_pvars(s, size);
    CHECK(nbound >= 8);
    T_CHECK(MPI_T_pvar_session_free(&s));
    CHECK(s == MPI_T_PVAR_SESSION_NULL);
    if (rank == 0)
        printf("mpit: %d cvars, %d pvars walked, %d bound to MPI_COMM_WORLD\n", ncvar > 20,
               npvar >= 20, nbound >= 8);
    T_CHECK(MPI_T_finalize());
    CHECK(MPI_T_finalize() == MPI_T_ERR_NOT_INITIALIZED);
    MPI_Finalize();
    if (rank == 0)
        printf("mpit: all checks passed\n");
    return 0;
}
