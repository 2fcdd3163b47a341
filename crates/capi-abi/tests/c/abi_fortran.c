/* The Fortran side of the standard ABI (MPI 5.0 §21.4.1): MPI_Abi_get_fortran_info gives
 * the 23 keys, its sizes are the Fortran types' MPI_Type_size and each optional type is
 * "supported" exactly when its size is a size; MPI_Abi_set_fortran_info refuses values
 * that contradict the library's Fortran bindings, accepts agreeing ones once, and refuses
 * every later call with MPI_ERR_ABI; MPI_Abi_get_fortran_booleans gives gfortran's 1 and 0
 * for the supported LOGICAL kinds, MPI_ERR_ARG for a size that is not a power of two and
 * is_set false for an unknown size, which MPI_Abi_set_fortran_booleans then sets once.
 * Built with `mpicc -mpi-abi`; 1 rank. */
/* CHECK and CHECK_RC of oxmpi-capi's C tests. */
#include "../../../capi/tests/c/check.h"
#include <string.h>

#ifndef MPI_ABI_VERSION
#error "not the standard-ABI header"
#endif

static int type_size(MPI_Datatype t)
{
    int s = 0;
    if (MPI_Type_size(t, &s) != MPI_SUCCESS || s == MPI_UNDEFINED || s < 0)
        return 0;
    return s;
}

static const struct {
    const char *name;
    MPI_Datatype t;
} sizes[] = {{"logical", MPI_LOGICAL},
             {"integer", MPI_INTEGER},
             {"real", MPI_REAL},
             {"double_precision", MPI_DOUBLE_PRECISION}};

static const struct {
    const char *name;
    MPI_Datatype t;
} optional[] = {
    {"logical1", MPI_LOGICAL1},   {"logical2", MPI_LOGICAL2},   {"logical4", MPI_LOGICAL4},
    {"logical8", MPI_LOGICAL8},   {"logical16", MPI_LOGICAL16}, {"integer1", MPI_INTEGER1},
    {"integer2", MPI_INTEGER2},   {"integer4", MPI_INTEGER4},   {"integer8", MPI_INTEGER8},
    {"integer16", MPI_INTEGER16}, {"real2", MPI_REAL2},         {"real4", MPI_REAL4},
    {"real8", MPI_REAL8},         {"real16", MPI_REAL16},       {"complex4", MPI_COMPLEX4},
    {"complex8", MPI_COMPLEX8},   {"complex16", MPI_COMPLEX16}, {"complex32", MPI_COMPLEX32},
    {"double_complex", MPI_DOUBLE_COMPLEX},
};

int main(int argc, char **argv)
{
    MPI_Info info, mine;
    char key[64], val[MPI_MAX_INFO_VAL];
    int flag, nkeys, supported = 0, is_set = -1;
    unsigned int t4 = 7, f4 = 7;
    unsigned char t32[32], f32[32], g32[32], h32[32];
    CHECK_RC(MPI_Init(&argc, &argv));
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    /* The info object. */
    CHECK_RC(MPI_Abi_get_fortran_info(&info));
    CHECK(info != MPI_INFO_NULL);
    CHECK_RC(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 23);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        snprintf(key, sizeof key, "mpi_%s_size", sizes[k].name);
        CHECK_RC(MPI_Info_get(info, key, MPI_MAX_INFO_VAL - 1, val, &flag));
        CHECK(flag && atoi(val) == type_size(sizes[k].t) && atoi(val) > 0);
    }
    for (size_t k = 0; k < sizeof optional / sizeof optional[0]; k++) {
        snprintf(key, sizeof key, "mpi_%s_supported", optional[k].name);
        CHECK_RC(MPI_Info_get(info, key, MPI_MAX_INFO_VAL - 1, val, &flag));
        CHECK(flag && (strcmp(val, "true") == 0 || strcmp(val, "false") == 0));
        CHECK((strcmp(val, "true") == 0) == (type_size(optional[k].t) > 0));
        supported += strcmp(val, "true") == 0;
    }
    CHECK_RC(MPI_Info_get(info, "mpi_integer_size", MPI_MAX_INFO_VAL - 1, val, &flag));
    printf("abi_fortran: info: 23 keys, integer size %s, %d of 19 optional types supported\n",
           val, supported);

    /* Setting: a contradiction is refused, agreeing values are taken once. */
    CHECK_RC(MPI_Info_create(&mine));
    CHECK_RC(MPI_Info_set(mine, "mpi_integer_size", strcmp(val, "8") ? "8" : "4"));
    CHECK(class_of_rc(MPI_Abi_set_fortran_info(mine)) == MPI_ERR_ABI);
    CHECK_RC(MPI_Info_free(&mine));
    CHECK_RC(MPI_Abi_set_fortran_info(info));
    CHECK(class_of_rc(MPI_Abi_set_fortran_info(info)) == MPI_ERR_ABI);
    CHECK_RC(MPI_Info_free(&info));
    printf("abi_fortran: set_fortran_info: contradiction MPI_ERR_ABI, agreeing values "
           "accepted once, then MPI_ERR_ABI\n");

    /* Booleans. */
    CHECK_RC(MPI_Abi_get_fortran_booleans(4, &t4, &f4, &is_set));
    CHECK(is_set && t4 == 1 && f4 == 0);
    CHECK(class_of_rc(MPI_Abi_get_fortran_booleans(3, &t4, &f4, &is_set)) == MPI_ERR_ARG);
    CHECK(class_of_rc(MPI_Abi_set_fortran_booleans(4, &t4, &f4)) == MPI_ERR_ABI);
    is_set = -1;
    CHECK_RC(MPI_Abi_get_fortran_booleans(32, g32, h32, &is_set));
    CHECK(is_set == 0);
    memset(t32, 0xff, sizeof t32);
    memset(f32, 0, sizeof f32);
    CHECK_RC(MPI_Abi_set_fortran_booleans(32, t32, f32));
    CHECK_RC(MPI_Abi_get_fortran_booleans(32, g32, h32, &is_set));
    CHECK(is_set == 1 && memcmp(g32, t32, 32) == 0 && memcmp(h32, f32, 32) == 0);
    CHECK(class_of_rc(MPI_Abi_set_fortran_booleans(32, t32, f32)) == MPI_ERR_ABI);
    CHECK(class_of_rc(MPI_Abi_set_fortran_booleans(64, t32, f32)) == MPI_ERR_ABI);
    printf("abi_fortran: booleans: LOGICAL*4 1/0 set by the library; 32 bytes set once\n");

    printf("abi_fortran: all checks passed\n");
    MPI_Finalize();
    return 0;
}
