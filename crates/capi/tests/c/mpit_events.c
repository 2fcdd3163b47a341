/* The tools interface's events (MPI_T_event_*) on 2 ranks: walks every event type;
 * registers, before MPI_Init, callbacks for the switch to rendezvous per peer, for the
 * transport chosen per peer (only at
 * MPI_T_CB_REQUIRE_NONE: delivered at the end of an MPI call), for unexpected arrivals
 * (MPI_T_CB_REQUIRE_THREAD_SAFE: run where the message arrives), and for the btl verbose
 * stream (raised to 20 by a cvar write); sees them fire with their data, timestamps and
 * source; sees the receiver's copy choice for rendezvous messages (pipelined below
 * btl_sm_coop_min_size, then the cooperative single copy once a cvar write lowers it);
 * frees the registrations through their free callbacks. Rank 0 prints deterministic
 * lines. */
#include "check.h"
#include <string.h>

#define T_CHECK(call) CHECK((call) == MPI_SUCCESS)

static int event_index(const char *name)
{
    int i = -1;
    T_CHECK(MPI_T_event_get_index(name, &i));
    return i;
}

/* Every event type: its info, elements and category. */
static void walk_events(void)
{
    int n = 0, in_categories = 0, ncat = 0;
    T_CHECK(MPI_T_event_get_num(&n));
    CHECK(n >= 4);
    for (int i = 0; i < n; i++) {
        char name[256], desc[1024];
        int name_len = sizeof name, desc_len = sizeof desc, verb, bind, num = 0;
        MPI_T_enum en;
        MPI_Info info;
        /* First the number of elements, then the elements. */
        T_CHECK(MPI_T_event_get_info(i, name, &name_len, &verb, NULL, NULL, &num, &en, &info,
                                     desc, &desc_len, &bind));
        CHECK(num > 0 && event_index(name) == i);
        CHECK(verb >= MPI_T_VERBOSITY_USER_BASIC && verb <= MPI_T_VERBOSITY_MPIDEV_ALL);
        CHECK(bind == MPI_T_BIND_NO_OBJECT && en == MPI_T_ENUM_NULL);
        MPI_Datatype *dt = malloc(sizeof(MPI_Datatype) * num);
        MPI_Aint *disp = malloc(sizeof(MPI_Aint) * num);
        T_CHECK(MPI_T_event_get_info(i, NULL, NULL, NULL, dt, disp, &num, NULL, NULL, NULL,
                                     NULL, NULL));
        for (int k = 0; k < num; k++)
            CHECK(dt[k] == MPI_INT || dt[k] == MPI_UNSIGNED || dt[k] == MPI_CHAR ||
                  dt[k] == MPI_UNSIGNED_LONG_LONG);
        if (strcmp(name, "btl_transport_chosen") == 0)
            CHECK(num == 17 && dt[0] == MPI_INT && dt[1] == MPI_CHAR && disp[1] == 4);
        free(dt);
        free(disp);
    }
    T_CHECK(MPI_T_category_get_num(&ncat));
    for (int c = 0; c < ncat; c++) {
        int ne = 0;
        T_CHECK(MPI_T_category_get_num_events(c, &ne));
        int *idx = malloc(sizeof(int) * (ne + 1));
        T_CHECK(MPI_T_category_get_events(c, ne, idx));
        for (int k = 0; k < ne; k++)
            CHECK(idx[k] >= 0 && idx[k] < n);
        free(idx);
        in_categories += ne;
    }
    CHECK(in_categories == n);
    CHECK(MPI_T_event_get_index("no_such_event", &n) == MPI_T_ERR_INVALID_NAME);
    CHECK(MPI_T_event_get_info(1 << 20, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                               NULL, NULL) == MPI_T_ERR_INVALID_INDEX);
}

static int transports, transport_sm, transport_self, transport_ok = 1;
static int unexpected, unexpected_ok = 1, lines, lines_ok = 1, freed;
static MPI_Count last_time = -1;

static void on_transport(MPI_T_event_instance e, MPI_T_event_registration r,
                         MPI_T_cb_safety s, void *user)
{
    struct {
        int peer;
        char name[16];
    } data;
    int peer = -1, src = -1;
    MPI_Count t;
    transport_ok &= s == MPI_T_CB_REQUIRE_NONE && user == (void *)&transports;
    transport_ok &= MPI_T_event_copy(e, &data) == MPI_SUCCESS;
    transport_ok &= MPI_T_event_read(e, 0, &peer) == MPI_SUCCESS && peer == data.peer;
    transport_ok &= MPI_T_event_get_timestamp(e, &t) == MPI_SUCCESS && t >= last_time;
    transport_ok &= MPI_T_event_get_source(e, &src) == MPI_SUCCESS && src == 0;
    transport_ok &= MPI_T_event_read(e, 17, &peer) == MPI_T_ERR_INVALID_ITEM;
    last_time = t;
    transports++;
    transport_sm += strcmp(data.name, "sm") == 0;
    transport_self += strcmp(data.name, "self") == 0;
    (void)r;
}

static void on_unexpected(MPI_T_event_instance e, MPI_T_event_registration r,
                          MPI_T_cb_safety s, void *user)
{
    int source, tag;
    unsigned long long bytes;
    unexpected_ok &= s == MPI_T_CB_REQUIRE_THREAD_SAFE && user == NULL;
    MPI_T_event_read(e, 1, &tag);
    if (tag != 31337)
        return; /* collective traffic */
    MPI_T_event_read(e, 0, &source);
    MPI_T_event_read(e, 3, &bytes);
    unexpected_ok &= source == 0 && bytes == 40;
    unexpected++;
    (void)r;
}

static void on_line(MPI_T_event_instance e, MPI_T_event_registration r, MPI_T_cb_safety s,
                    void *user)
{
    struct {
        int level;
        char text[252];
    } data;
    lines_ok &= s == MPI_T_CB_REQUIRE_MPI_RESTRICTED;
    lines_ok &= MPI_T_event_copy(e, &data) == MPI_SUCCESS;
    lines_ok &= data.level <= 20 && strlen(data.text) < sizeof data.text;
    lines += strstr(data.text, "reached by") != NULL;
    (void)r;
    (void)user;
}

static int rndv, rndv_ok = 1;

/* pml_ox_rndv_first: the first message to a peer above the eager limit. */
static void on_rndv(MPI_T_event_instance e, MPI_T_event_registration r, MPI_T_cb_safety s,
                    void *user)
{
    struct {
        int peer;
        int pad;
        unsigned long long bytes, eager_limit;
        char transport[16];
    } data;
    unsigned long long bytes = 0;
    rndv_ok &= MPI_T_event_copy(e, &data) == MPI_SUCCESS;
    rndv_ok &= MPI_T_event_read(e, 1, &bytes) == MPI_SUCCESS && bytes == data.bytes;
    rndv_ok &= data.peer == 1 && data.bytes == 100000 && data.eager_limit < data.bytes;
    rndv_ok &= strcmp(data.transport, "sm") == 0;
    rndv++;
    (void)r;
    (void)s;
    (void)user;
}

static int copies, copies_ok = 1;
static char copy_seen[64];

/* pml_ox_copy_choice: how a rendezvous message's data moved, first and on every switch. */
static void on_copy(MPI_T_event_instance e, MPI_T_event_registration r, MPI_T_cb_safety s,
                    void *user)
{
    struct {
        int peer;
        int pad;
        unsigned long long bytes;
        char mechanism[16], previous[16], transport[16];
    } data;
    char mech[16] = "";
    copies_ok &= MPI_T_event_copy(e, &data) == MPI_SUCCESS;
    copies_ok &= MPI_T_event_read(e, 2, mech) == MPI_SUCCESS && mech[0] == data.mechanism[0];
    copies_ok &= data.peer == 0 && data.bytes == 100000 && strcmp(data.transport, "sm") == 0;
    copies_ok &= strcmp(data.mechanism, data.previous) != 0;
    size_t n = strlen(copy_seen);
    snprintf(copy_seen + n, sizeof copy_seen - n, "%s%s->%s", n ? ", " : "", data.previous,
             data.mechanism);
    copies++;
    (void)r;
    (void)s;
    (void)user;
}

/* Writes integer control variable `name` (an int, or a 64-bit size or count). */
static void write_cvar(const char *name, int v)
{
    int i = -1, count;
    MPI_Datatype dt;
    MPI_T_cvar_handle h;
    long long big = v;
    T_CHECK(MPI_T_cvar_get_index(name, &i));
    T_CHECK(MPI_T_cvar_get_info(i, NULL, NULL, NULL, &dt, NULL, NULL, NULL, NULL, NULL));
    T_CHECK(MPI_T_cvar_handle_alloc(i, NULL, &h, &count));
    T_CHECK(MPI_T_cvar_write(h, dt == MPI_INT ? (void *)&v : (void *)&big));
    T_CHECK(MPI_T_cvar_handle_free(&h));
}

static void on_free(MPI_T_event_registration r, MPI_T_cb_safety s, void *user)
{
    freed += s == MPI_T_CB_REQUIRE_NONE && user == (void *)&freed;
    (void)r;
}

int main(int argc, char **argv)
{
    int provided, rank, size, count;
    CHECK(MPI_T_event_get_num(&count) == MPI_T_ERR_NOT_INITIALIZED);
    T_CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    walk_events();

    /* The btl verbose stream at 20 (it says which transport reaches each peer). */
    int verbose_idx = -1;
    T_CHECK(MPI_T_cvar_get_index("btl_base_verbose", &verbose_idx));
    MPI_T_cvar_handle ch;
    T_CHECK(MPI_T_cvar_handle_alloc(verbose_idx, NULL, &ch, &count));
    int twenty = 20;
    T_CHECK(MPI_T_cvar_write(ch, &twenty));
    T_CHECK(MPI_T_cvar_handle_free(&ch));

    MPI_T_event_registration rt, ru, rl;
    T_CHECK(MPI_T_event_handle_alloc(event_index("btl_transport_chosen"), NULL, MPI_INFO_NULL,
                                     &rt));
    T_CHECK(MPI_T_event_register_callback(rt, MPI_T_CB_REQUIRE_NONE, MPI_INFO_NULL,
                                          &transports, on_transport));
    T_CHECK(MPI_T_event_handle_alloc(event_index("pml_ox_unexpected_arrival"), NULL,
                                     MPI_INFO_NULL, &ru));
    T_CHECK(MPI_T_event_register_callback(ru, MPI_T_CB_REQUIRE_THREAD_SAFE, MPI_INFO_NULL,
                                          NULL, on_unexpected));
    T_CHECK(MPI_T_event_handle_alloc(event_index("btl_verbose_line"), NULL, MPI_INFO_NULL,
                                     &rl));
    T_CHECK(MPI_T_event_register_callback(rl, MPI_T_CB_REQUIRE_MPI_RESTRICTED, MPI_INFO_NULL,
                                          NULL, on_line));
    MPI_T_event_registration rr;
    T_CHECK(MPI_T_event_handle_alloc(event_index("pml_ox_rndv_first"), NULL, MPI_INFO_NULL,
                                     &rr));
    T_CHECK(MPI_T_event_register_callback(rr, MPI_T_CB_REQUIRE_MPI_RESTRICTED, MPI_INFO_NULL,
                                          NULL, on_rndv));
    /* Rendezvous data by the cooperative copy, but only from 1 MB (lowered below). */
    write_cvar("btl_sm_single_copy_mechanism", 2);
    write_cvar("btl_sm_coop_min_size", 1000000);
    MPI_T_event_registration rc;
    T_CHECK(MPI_T_event_handle_alloc(event_index("pml_ox_copy_choice"), NULL, MPI_INFO_NULL,
                                     &rc));
    T_CHECK(MPI_T_event_register_callback(rc, MPI_T_CB_REQUIRE_MPI_RESTRICTED, MPI_INFO_NULL,
                                          NULL, on_copy));
    CHECK(MPI_T_event_register_callback(rl, (MPI_T_cb_safety)99, MPI_INFO_NULL, NULL,
                                        on_line) != MPI_SUCCESS);
    CHECK(MPI_T_event_register_callback(NULL, MPI_T_CB_REQUIRE_NONE, MPI_INFO_NULL, NULL,
                                        on_line) == MPI_T_ERR_INVALID_HANDLE);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2);
    /* Wired up inside MPI_Init, delivered at its end: one per rank. */
    CHECK(transports == 2 && transport_self == 1 && transport_sm == 1 && transport_ok);
    CHECK(lines >= 1 && lines_ok);

    /* Rank 0's message reaches rank 1 before its receive is posted. */
    char buf[40] = {0};
    if (rank == 0)
        MPI_Send(buf, sizeof buf, MPI_CHAR, 1, 31337, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        MPI_Status st;
        MPI_Probe(0, 31337, MPI_COMM_WORLD, &st);
        MPI_Recv(buf, sizeof buf, MPI_CHAR, 0, 31337, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(unexpected == 1 && unexpected_ok);
    } else {
        CHECK(unexpected == 0);
    }

    /* Rank 0 sends rank 1 an eager message, then two above the eager limit: the switch
     * to rendezvous is one event, with the first large message's size. */
    static char big[100000];
    for (int i = 0; i < 3; i++) {
        int n = i == 0 ? 8 : (int)sizeof big;
        if (rank == 0)
            MPI_Send(big, n, MPI_CHAR, 1, 7, MPI_COMM_WORLD);
        else
            MPI_Recv(big, n, MPI_CHAR, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    CHECK(rndv == (rank == 0 ? 1 : 0) && rndv_ok);
    T_CHECK(MPI_T_event_handle_free(rr, NULL, NULL));

    /* Both large messages went by the pipelined copy (below the cooperative copy's
     * minimum): one choice. With the minimum lowered, the next one switches to coop. */
    write_cvar("btl_sm_coop_min_size", 1);
    if (rank == 0)
        MPI_Send(big, sizeof big, MPI_CHAR, 1, 8, MPI_COMM_WORLD);
    else
        MPI_Recv(big, sizeof big, MPI_CHAR, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    T_CHECK(MPI_T_event_handle_free(rc, NULL, NULL));
    CHECK(copies_ok && copies == (rank == 1 ? 2 : 0));
    if (rank == 1)
        MPI_Send(copy_seen, sizeof copy_seen, MPI_CHAR, 0, 9, MPI_COMM_WORLD);
    else
        MPI_Recv(copy_seen, sizeof copy_seen, MPI_CHAR, 1, 9, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);

    T_CHECK(MPI_T_event_set_dropped_handler(rt, NULL));
    T_CHECK(MPI_T_event_handle_free(rt, &freed, on_free));
    T_CHECK(MPI_T_event_handle_free(ru, &freed, on_free));
    T_CHECK(MPI_T_event_handle_free(rl, NULL, NULL));
    CHECK(freed == 2);
    CHECK(MPI_T_event_handle_free(rt, NULL, NULL) == MPI_T_ERR_INVALID_HANDLE);
    if (rank == 0) {
        printf("mpit_events: %d transports (self %d, sm %d), verbose lines seen %d\n",
               transports, transport_self, transport_sm, lines >= 1);
        printf("mpit_events: rendezvous switch events %d\n", rndv);
        printf("mpit_events: copy choices on rank 1: %s\n", copy_seen);
    }
    T_CHECK(MPI_T_finalize());
    MPI_Finalize();
    if (rank == 0)
        printf("mpit_events: all checks passed\n");
    return 0;
}
