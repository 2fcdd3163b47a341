/* MPI 4.0/4.1 additions outside the big features: MPI_Isendrecv(_replace) on a ring,
 * MPI_Status_set/get_source/tag/error, MPI_Info_get_string (lengths and truncation),
 * MPI_Info_create_env, MPI_Remove_error_class/code/string, MPI_Type_get_value_index,
 * MPI_Get_hw_resource_info, the MPI 4.1 buffers of communicators and sessions
 * (attach, detach, flush, iflush, MPI_BUFFER_AUTOMATIC), and their bad input (error
 * classes, MPI_ERRORS_RETURN).
 * Prints "mpi4_misc: all checks passed" on rank 0. */
#include "check.h"
#include <string.h>

static int rank, size;

static void say(const char *what) {
    if (rank == 0)
        printf("mpi4_misc: %s: ok\n", what);
}

static void isendrecv(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[64], in[64];
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 64; k++) {
            out[k] = rank * 1000 + k + round;
            in[k] = -1;
        }
        MPI_Request r;
        MPI_Status st;
        CHECK_RC(MPI_Isendrecv(out, 64, MPI_INT, right, 7, in, 64, MPI_INT, left, 7,
                               MPI_COMM_WORLD, &r));
        /* The send buffer may be reused at once only after completion; here we wait. */
        CHECK_RC(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL && st.MPI_SOURCE == left && st.MPI_TAG == 7);
        int n = -1;
        CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == 64);
        for (int k = 0; k < 64; k++)
            CHECK(in[k] == left * 1000 + k + round);
    }
    /* Replace with a strided type: every other int of 32 travels. */
    MPI_Datatype vec;
    CHECK_RC(MPI_Type_vector(16, 1, 2, MPI_INT, &vec));
    CHECK_RC(MPI_Type_commit(&vec));
    int buf[32];
    for (int k = 0; k < 32; k++)
        buf[k] = rank * 100 + k;
    MPI_Request r;
    CHECK_RC(MPI_Isendrecv_replace(buf, 1, vec, right, 3, left, 3, MPI_COMM_WORLD, &r));
    int flag = 0;
    while (!flag)
        CHECK_RC(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    for (int k = 0; k < 32; k++)
        CHECK(buf[k] == (k % 2 == 0 ? left * 100 + k : rank * 100 + k));
    CHECK_RC(MPI_Type_free(&vec));
    /* Many small rounds: the message of the left neighbour has often arrived before the
     * receive is posted, and must not overwrite what is sent. */
    for (int it = 0; it < 200; it++) {
        short sb[3];
        int s = it % 4;
        for (int k = 0; k < s; k++)
            sb[k] = (short)(rank * 10 + it % 7);
        CHECK_RC(MPI_Isendrecv_replace(sb, s, MPI_SHORT, right, 8, left, 8, MPI_COMM_WORLD, &r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int k = 0; k < s; k++)
            CHECK(sb[k] == (short)(left * 10 + it % 7));
    }
    /* MPI_PROC_NULL on both sides completes at once with an empty receive. */
    MPI_Status st;
    CHECK_RC(MPI_Isendrecv(buf, 1, MPI_INT, MPI_PROC_NULL, 0, buf, 1, MPI_INT, MPI_PROC_NULL, 0,
                           MPI_COMM_WORLD, &r));
    CHECK_RC(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL);
    CHECK(class_of_rc(MPI_Isendrecv(buf, 1, MPI_INT, size, 0, buf, 1, MPI_INT, left, 0, MPI_COMM_WORLD,
                            &r)) == MPI_ERR_RANK);
    CHECK(class_of_rc(MPI_Isendrecv_replace(buf, -1, MPI_INT, right, 0, left, 0, MPI_COMM_WORLD, &r)) ==
          MPI_ERR_COUNT);
    say("isendrecv, isendrecv_replace");
}

static void status_fields(void) {
    MPI_Status st;
    memset(&st, 0, sizeof st);
    CHECK_RC(MPI_Status_set_source(&st, 5));
    CHECK_RC(MPI_Status_set_tag(&st, 77));
    CHECK_RC(MPI_Status_set_error(&st, MPI_ERR_TAG));
    CHECK(st.MPI_SOURCE == 5 && st.MPI_TAG == 77 && st.MPI_ERROR == MPI_ERR_TAG);
    int v = 0;
    CHECK_RC(MPI_Status_get_source(&st, &v));
    CHECK(v == 5);
    CHECK_RC(MPI_Status_get_tag(&st, &v));
    CHECK(v == 77);
    CHECK_RC(MPI_Status_get_error(&st, &v));
    CHECK(v == MPI_ERR_TAG);
#ifndef MPI_ABI_VERSION /* Fortran interop: not in the standard ABI */
    /* The Fortran 2008 status conversions (in MPICH's mpi.h and libmpi.so.12). */
    MPI_F08_status f08, f08b;
    MPI_Fint fs[5];
    MPI_Status back;
    CHECK_RC(MPI_Status_c2f08(&st, &f08));
    CHECK(f08.MPI_SOURCE == 5 && f08.MPI_TAG == 77 && f08.MPI_ERROR == MPI_ERR_TAG);
    CHECK_RC(MPI_Status_f082f(&f08, fs));
    CHECK_RC(MPI_Status_f2f08(fs, &f08b));
    CHECK_RC(MPI_Status_f082c(&f08b, &back));
    CHECK(memcmp(&back, &st, sizeof st) == 0);
#endif
    say("status_set/get_source/tag/error");
}

static void infos(void) {
    MPI_Info info;
    CHECK_RC(MPI_Info_create(&info));
    CHECK_RC(MPI_Info_set(info, "color", "ultramarine"));
    char buf[64];
    int len = sizeof buf, flag = 0;
    CHECK_RC(MPI_Info_get_string(info, "color", &len, buf, &flag));
    CHECK(flag == 1 && len == 12 && strcmp(buf, "ultramarine") == 0);
    len = 4; /* room for 3 characters and the NUL: truncated, full length returned */
    CHECK_RC(MPI_Info_get_string(info, "color", &len, buf, &flag));
    CHECK(flag == 1 && len == 12 && strcmp(buf, "ult") == 0);
    len = 0; /* length only */
    CHECK_RC(MPI_Info_get_string(info, "color", &len, NULL, &flag));
    CHECK(flag == 1 && len == 12);
    len = sizeof buf;
    CHECK_RC(MPI_Info_get_string(info, "shape", &len, buf, &flag));
    CHECK(flag == 0);
    CHECK_RC(MPI_Info_free(&info));
    MPI_Info env;
    CHECK_RC(MPI_Info_create_env(0, NULL, &env));
    len = sizeof buf;
    CHECK_RC(MPI_Info_get_string(env, "command", &len, buf, &flag));
    CHECK(flag == 1 && strstr(buf, "mpi4_misc") != NULL);
    CHECK_RC(MPI_Info_free(&env));
    MPI_Info hw;
    CHECK_RC(MPI_Get_hw_resource_info(&hw));
    int nkeys = -1;
    CHECK_RC(MPI_Info_get_nkeys(hw, &nkeys));
    CHECK(nkeys >= 0);
    CHECK_RC(MPI_Info_free(&hw));
    /* Assertions are accepted on communicators. */
    MPI_Info as;
    CHECK_RC(MPI_Info_create(&as));
    CHECK_RC(MPI_Info_set(as, "mpi_assert_no_any_tag", "true"));
    CHECK_RC(MPI_Info_set(as, "mpi_assert_no_any_source", "true"));
    CHECK_RC(MPI_Info_set(as, "mpi_assert_exact_length", "true"));
    CHECK_RC(MPI_Info_set(as, "mpi_assert_allow_overtaking", "false"));
    MPI_Comm c;
    CHECK_RC(MPI_Comm_dup_with_info(MPI_COMM_WORLD, as, &c));
    int x = rank, y = -1;
    CHECK_RC(MPI_Sendrecv(&x, 1, MPI_INT, rank, 1, &y, 1, MPI_INT, rank, 1, c, MPI_STATUS_IGNORE));
    CHECK(y == rank);
    CHECK_RC(MPI_Comm_free(&c));
    CHECK_RC(MPI_Info_free(&as));
    say("info_get_string, info_create_env, get_hw_resource_info, assertions");
}

static void error_classes(void) {
    int ec, code;
    CHECK_RC(MPI_Add_error_class(&ec));
    CHECK_RC(MPI_Add_error_code(ec, &code));
    CHECK_RC(MPI_Add_error_string(code, "a passing problem"));
    /* A class with codes cannot go; a class is not a code. */
    CHECK(class_of_rc(MPI_Remove_error_class(ec)) == MPI_ERR_ARG);
    CHECK(class_of_rc(MPI_Remove_error_code(ec)) == MPI_ERR_ARG);
    CHECK(class_of_rc(MPI_Remove_error_code(MPI_ERR_TAG)) == MPI_ERR_ARG);
    /* A code or class with a string cannot go either. */
    CHECK(class_of_rc(MPI_Remove_error_code(code)) == MPI_ERR_ARG);
    CHECK_RC(MPI_Remove_error_string(code));
    CHECK(class_of_rc(MPI_Remove_error_string(code)) == MPI_ERR_ARG);
    CHECK_RC(MPI_Remove_error_code(code));
    CHECK_RC(MPI_Add_error_string(ec, "a passing class"));
    CHECK(class_of_rc(MPI_Remove_error_class(ec)) == MPI_ERR_ARG);
    CHECK_RC(MPI_Remove_error_string(ec));
    CHECK_RC(MPI_Remove_error_class(ec));
    CHECK(class_of_rc(MPI_Remove_error_class(ec)) == MPI_ERR_ARG);
    say("remove_error_class/code/string");
}

static void value_index(void) {
    MPI_Datatype t;
    CHECK_RC(MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &t));
    CHECK(t == MPI_DOUBLE_INT);
    CHECK_RC(MPI_Type_get_value_index(MPI_INT, MPI_INT, &t));
    CHECK(t == MPI_2INT);
    CHECK_RC(MPI_Type_get_value_index(MPI_FLOAT, MPI_INT, &t));
    CHECK(t == MPI_FLOAT_INT);
    CHECK_RC(MPI_Type_get_value_index(MPI_CHAR, MPI_DOUBLE, &t));
    CHECK(t == MPI_DATATYPE_NULL);
    say("type_get_value_index");
}

static void buffers(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Comm c;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    static char mem[4096];
    int x = rank, y = -1;
    /* No buffer anywhere: a buffered send fails. */
    CHECK(class_of_rc(MPI_Bsend(&x, 1, MPI_INT, right, 1, c)) == MPI_ERR_BUFFER);
    CHECK_RC(MPI_Comm_attach_buffer(c, mem, sizeof mem));
    CHECK(class_of_rc(MPI_Comm_attach_buffer(c, mem, sizeof mem)) == MPI_ERR_BUFFER);
    CHECK_RC(MPI_Bsend(&x, 1, MPI_INT, right, 1, c));
    CHECK_RC(MPI_Recv(&y, 1, MPI_INT, left, 1, c, MPI_STATUS_IGNORE));
    CHECK(y == left);
    /* The communicator's buffer is not the process's. */
    CHECK(class_of_rc(MPI_Bsend(&x, 1, MPI_INT, right, 1, MPI_COMM_WORLD)) == MPI_ERR_BUFFER);
    /* Too big for it. */
    static int big[2048];
    CHECK(class_of_rc(MPI_Bsend(big, 2048, MPI_INT, right, 1, c)) == MPI_ERR_BUFFER);
    CHECK_RC(MPI_Comm_flush_buffer(c));
    MPI_Request r;
    CHECK_RC(MPI_Comm_iflush_buffer(c, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    void *addr = NULL;
    int sz = 0;
    CHECK_RC(MPI_Comm_detach_buffer(c, &addr, &sz));
    CHECK(addr == mem && sz == (int)sizeof mem);
    CHECK(class_of_rc(MPI_Comm_detach_buffer(c, &addr, &sz)) == MPI_ERR_BUFFER);
    /* Automatic: any size. */
    CHECK_RC(MPI_Comm_attach_buffer(c, MPI_BUFFER_AUTOMATIC, 0));
    CHECK_RC(MPI_Bsend(big, 2048, MPI_INT, right, 2, c));
    CHECK_RC(MPI_Recv(big, 2048, MPI_INT, left, 2, c, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Buffer_flush());
    CHECK_RC(MPI_Buffer_iflush(&r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Comm_detach_buffer(c, &addr, &sz));
#ifndef MPI_ABI_VERSION /* the standard ABI returns it unconverted (a known gap) */
    CHECK(addr == MPI_BUFFER_AUTOMATIC);
#endif
    /* The large-count forms (MPI 4.1). */
    MPI_Count csz = 0;
    CHECK_RC(MPI_Comm_attach_buffer_c(c, mem, (MPI_Count)sizeof mem));
    CHECK_RC(MPI_Bsend(&x, 1, MPI_INT, right, 3, c));
    CHECK_RC(MPI_Recv(&y, 1, MPI_INT, left, 3, c, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Comm_detach_buffer_c(c, &addr, &csz));
    CHECK(addr == mem && csz == (MPI_Count)sizeof mem);
    CHECK_RC(MPI_Comm_free(&c));
    /* A session's buffer. */
    MPI_Session s;
    CHECK_RC(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    CHECK_RC(MPI_Session_attach_buffer(s, mem, sizeof mem));
    CHECK_RC(MPI_Session_flush_buffer(s));
    CHECK_RC(MPI_Session_iflush_buffer(s, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Session_detach_buffer(s, &addr, &sz));
    CHECK(addr == mem && sz == (int)sizeof mem);
    CHECK_RC(MPI_Session_attach_buffer_c(s, mem, (MPI_Count)sizeof mem));
    CHECK_RC(MPI_Session_detach_buffer_c(s, &addr, &csz));
    CHECK(addr == mem && csz == (MPI_Count)sizeof mem);
#ifndef MPI_ABI_VERSION /* the standard ABI has MPI_Session_toint/fromint instead */
    CHECK(MPI_Session_f2c(MPI_Session_c2f(s)) == s);
#endif
    CHECK_RC(MPI_Session_finalize(&s));
    say("buffers of communicators and sessions");
}

static void get_status_arrays(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int x = rank, y = -1, idx = -7, flag = 0, outcount = -1, indices[3];
    MPI_Request r[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st[3];
    /* Only null requests. */
    CHECK_RC(MPI_Request_get_status_any(3, r, &idx, &flag, &st[0]));
    CHECK(flag == 1 && idx == MPI_UNDEFINED);
    CHECK_RC(MPI_Request_get_status_some(3, r, &outcount, indices, st));
    CHECK(outcount == MPI_UNDEFINED);
    CHECK_RC(MPI_Irecv(&y, 1, MPI_INT, left, 21, MPI_COMM_WORLD, &r[1]));
    CHECK_RC(MPI_Isend(&x, 1, MPI_INT, right, 21, MPI_COMM_WORLD, &r[2]));
    flag = 0;
    while (!flag)
        CHECK_RC(MPI_Request_get_status_all(3, r, &flag, st));
    CHECK(st[1].MPI_SOURCE == left && st[1].MPI_TAG == 21 && y == left);
    /* Not freed: the handles stay and report again. */
    CHECK(r[1] != MPI_REQUEST_NULL && r[2] != MPI_REQUEST_NULL);
    CHECK_RC(MPI_Request_get_status_any(3, r, &idx, &flag, &st[0]));
    CHECK(flag == 1 && (idx == 1 || idx == 2));
    CHECK_RC(MPI_Request_get_status_some(3, r, &outcount, indices, st));
    CHECK(outcount == 2 && indices[0] == 1 && indices[1] == 2);
    CHECK_RC(MPI_Waitall(3, r, st));
    say("request_get_status_any/all/some");
}

int main(int argc, char **argv) {
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    isendrecv();
    status_fields();
    infos();
    error_classes();
    value_index();
    buffers();
    get_status_arrays();
    CHECK_RC(MPI_Finalize());
    if (rank == 0)
        printf("mpi4_misc: all checks passed\n");
    return 0;
}
