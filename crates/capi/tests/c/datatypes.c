/* Datatypes on one rank: external32 packing (big-endian, the standard's sizes: long 4
 * bytes, long double as IEEE binary128), struct extents padded to the member alignment (the
 * values MPICH 4.0.2 gives on x86-64), a darray layout, and the handles
 * MPI_Type_get_contents returns for derived constituents (the constituent's own handle with
 * a reference of its own while the user holds it, else a new one), MPI_Type_dup and MPI_Type_free
 * with and without attributes. Built with our mpicc and with
 * MPICH's, both run on our library (Debian's MPICH 4.0.2 itself dies with SIGILL on this
 * program, so it is not run on MPICH). */
#include "check.h"
#include <string.h>

static void expect_bytes(const unsigned char *got, const unsigned char *want, int n) {
    for (int i = 0; i < n; i++) CHECK(got[i] == want[i]);
}

static void external32(void) {
    const char *ext = "external32";
    MPI_Aint size;
    CHECK_RC(MPI_Pack_external_size(ext, 3, MPI_LONG, &size));
    CHECK(size == 12);
    CHECK_RC(MPI_Pack_external_size(ext, 1, MPI_LONG_DOUBLE, &size));
    CHECK(size == 16);
    CHECK_RC(MPI_Pack_external_size(ext, 2, MPI_INT, &size));
    CHECK(size == 8);

    unsigned char buf[128];
    MPI_Aint pos = 0;
    long l[2] = {-5, 0x01020304};
    CHECK_RC(MPI_Pack_external(ext, l, 2, MPI_LONG, buf, sizeof buf, &pos));
    CHECK(pos == 8);
    const unsigned char lwant[8] = {0xff, 0xff, 0xff, 0xfb, 1, 2, 3, 4};
    expect_bytes(buf, lwant, 8);
    long lback[2] = {0, 0};
    MPI_Aint upos = 0;
    CHECK_RC(MPI_Unpack_external(ext, buf, pos, &upos, lback, 2, MPI_LONG));
    CHECK(upos == 8 && lback[0] == -5 && lback[1] == 0x01020304);

    /* 1.5 and -3.0 as binary128: sign, 15-bit exponent 0x3fff/0x4000, fraction. */
    long double ld[2] = {1.5L, -3.0L};
    pos = 0;
    CHECK_RC(MPI_Pack_external(ext, ld, 2, MPI_LONG_DOUBLE, buf, sizeof buf, &pos));
    CHECK(pos == 32);
    unsigned char ldwant[32] = {0x3f, 0xff, 0x80};
    ldwant[16] = 0xc0;
    ldwant[17] = 0x00;
    ldwant[18] = 0x80;
    expect_bytes(buf, ldwant, 32);
    long double ldback[2] = {0, 0};
    upos = 0;
    CHECK_RC(MPI_Unpack_external(ext, buf, pos, &upos, ldback, 2, MPI_LONG_DOUBLE));
    CHECK(ldback[0] == 1.5L && ldback[1] == -3.0L);
    /* A value with a full 64-bit mantissa survives the round trip exactly. */
    long double third = 1.0L / 3.0L;
    pos = upos = 0;
    CHECK_RC(MPI_Pack_external(ext, &third, 1, MPI_LONG_DOUBLE, buf, sizeof buf, &pos));
    long double thirdback = 0;
    CHECK_RC(MPI_Unpack_external(ext, buf, pos, &upos, &thirdback, 1, MPI_LONG_DOUBLE));
    CHECK(thirdback == third);

    /* A struct {int; double; short} of 2 elements: members converted one by one. */
    struct s { int i; double d; short h; } sv[2] = {{1, 2.0, -3}, {4, 5.5, 6}}, sb[2];
    int bl[3] = {1, 1, 1};
    MPI_Aint disp[3] = {0, 8, 16};
    MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_SHORT}, st;
    CHECK_RC(MPI_Type_create_struct(3, bl, disp, ty, &st));
    CHECK_RC(MPI_Type_commit(&st));
    MPI_Aint lb, extent;
    CHECK_RC(MPI_Type_get_extent(st, &lb, &extent));
    CHECK(lb == 0 && extent == (MPI_Aint)sizeof(struct s));
    CHECK_RC(MPI_Pack_external_size(ext, 2, st, &size));
    CHECK(size == 2 * (4 + 8 + 2));
    pos = 0;
    CHECK_RC(MPI_Pack_external(ext, sv, 2, st, buf, sizeof buf, &pos));
    const unsigned char swant[14] = {0, 0, 0, 1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfd};
    expect_bytes(buf, swant, 14);
    memset(sb, 0, sizeof sb);
    upos = 0;
    CHECK_RC(MPI_Unpack_external(ext, buf, pos, &upos, sb, 2, st));
    for (int k = 0; k < 2; k++) CHECK(sb[k].i == sv[k].i && sb[k].d == sv[k].d && sb[k].h == sv[k].h);
    CHECK_RC(MPI_Type_free(&st));
    printf("datatypes: external32 ok\n");
}

static void struct_padding(void) {
    int bl[3] = {1, 2, 3};
    MPI_Aint disp[3] = {1, 27, 71};
    MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_INT}, st, pairs;
    CHECK_RC(MPI_Type_create_struct(3, bl, disp, ty, &st));
    MPI_Aint lb, extent, tlb, textent;
    CHECK_RC(MPI_Type_get_extent(st, &lb, &extent));
    CHECK_RC(MPI_Type_get_true_extent(st, &tlb, &textent));
    CHECK(lb == 1 && extent == 88 && tlb == 1 && textent == 82);
    int one[3] = {1, 1, 1};
    MPI_Aint pd[3] = {0, 32, 64};
    MPI_Datatype pt[3] = {MPI_SHORT_INT, MPI_LONG_DOUBLE_INT, MPI_SHORT_INT};
    CHECK_RC(MPI_Type_create_struct(3, one, pd, pt, &pairs));
    CHECK_RC(MPI_Type_get_extent(pairs, &lb, &extent));
    CHECK(lb == 0 && extent == 80);
    CHECK_RC(MPI_Type_free(&st));
    CHECK_RC(MPI_Type_free(&pairs));
    printf("datatypes: struct padding ok\n");
}

static void darray(void) {
    /* 4x6 ints, rows BLOCK over 2, columns CYCLIC(2) over 3 processes; rank 4 has grid
     * coordinates (1, 1): rows 2-3, columns 2-3. */
    int gs[2] = {4, 6}, ds[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int da[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, ps[2] = {2, 3};
    MPI_Datatype t;
    CHECK_RC(MPI_Type_create_darray(6, 4, 2, gs, ds, da, ps, MPI_ORDER_C, MPI_INT, &t));
    CHECK_RC(MPI_Type_commit(&t));
    int size;
    MPI_Aint lb, extent;
    CHECK_RC(MPI_Type_size(t, &size));
    CHECK_RC(MPI_Type_get_extent(t, &lb, &extent));
    CHECK(size == 4 * 4 && lb == 0 && extent == 24 * 4);
    int a[24], packed[4], pos = 0;
    for (int i = 0; i < 24; i++) a[i] = i;
    CHECK_RC(MPI_Pack(a, 1, t, packed, sizeof packed, &pos, MPI_COMM_SELF));
    CHECK(pos == 16);
    CHECK(packed[0] == 14 && packed[1] == 15 && packed[2] == 20 && packed[3] == 21);
    CHECK_RC(MPI_Type_free(&t));
    printf("datatypes: darray ok\n");
}

/* A struct of a named vector: get_contents returns the vector's own handle with one more
 * reference (as MPICH and Open MPI do), which the caller frees without freeing the vector;
 * once the user has freed the vector's handle, get_contents returns a new handle on the
 * struct's vector (the struct still works), freed like any other, and a second free of it
 * is an error. */
static void contents_handles(void) {
    MPI_Datatype vec, st, got[2], again[2], types[2], stale;
    int bl[2] = {1, 1}, ints[3], ni, na, nd, comb, len;
    MPI_Aint disp[2] = {0, 64}, addrs[2], lb, ext;
    char name[MPI_MAX_OBJECT_NAME];
    CHECK_RC(MPI_Type_vector(3, 1, 2, MPI_INT, &vec));
    CHECK_RC(MPI_Type_set_name(vec, "orig-vec"));
    types[0] = vec;
    types[1] = MPI_DOUBLE;
    CHECK_RC(MPI_Type_create_struct(2, bl, disp, types, &st));
    CHECK_RC(MPI_Type_get_envelope(st, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_STRUCT && ni == 3 && na == 2 && nd == 2);
    CHECK_RC(MPI_Type_get_contents(st, 3, 2, 2, ints, addrs, got));
    CHECK(got[0] == vec && got[1] == MPI_DOUBLE);
    CHECK_RC(MPI_Type_get_contents(st, 3, 2, 2, ints, addrs, again));
    CHECK(again[0] == vec);
    CHECK_RC(MPI_Type_get_name(got[0], name, &len));
    CHECK(strcmp(name, "orig-vec") == 0);
    CHECK_RC(MPI_Type_free(&got[0]));
    CHECK(got[0] == MPI_DATATYPE_NULL);
    CHECK_RC(MPI_Type_free(&again[0]));
    /* The user's own reference is still there. */
    CHECK_RC(MPI_Type_get_extent(vec, &lb, &ext));
    CHECK(lb == 0 && ext == 5 * (MPI_Aint)sizeof(int));
    CHECK_RC(MPI_Type_free(&vec));
    /* Freed by the user, held by the struct: the same handle again (as MPICH and Open MPI
     * return it), name and all, once and then again after its free. */
    CHECK_RC(MPI_Type_get_contents(st, 3, 2, 2, ints, addrs, got));
    CHECK(got[0] == types[0] && got[1] == MPI_DOUBLE);
    CHECK_RC(MPI_Type_free(&got[0]));
    CHECK_RC(MPI_Type_get_contents(st, 3, 2, 2, ints, addrs, got));
    CHECK(got[0] == types[0] && got[1] == MPI_DOUBLE);
    CHECK_RC(MPI_Type_get_name(got[0], name, &len));
    CHECK(strcmp(name, "orig-vec") == 0);
    CHECK_RC(MPI_Type_get_envelope(got[0], &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && nd == 1);
    CHECK_RC(MPI_Type_get_extent(got[0], &lb, &ext));
    CHECK(lb == 0 && ext == 5 * (MPI_Aint)sizeof(int));
    CHECK_RC(MPI_Type_commit(&got[0]));
    stale = got[0];
    CHECK_RC(MPI_Type_free(&got[0]));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(class_of_rc(MPI_Type_free(&stale)) == MPI_ERR_TYPE);
    /* Kept for the struct, but not the user's: every use is an error. */
    CHECK(class_of_rc(MPI_Type_get_extent(stale, &lb, &ext)) == MPI_ERR_TYPE);
    CHECK(class_of_rc(MPI_Type_get_envelope(stale, &ni, &na, &nd, &comb)) == MPI_ERR_TYPE);
    CHECK(class_of_rc(MPI_Type_commit(&stale)) == MPI_ERR_TYPE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    /* Committed since (a copy of the object): a new handle on the struct's. */
    CHECK_RC(MPI_Type_get_contents(st, 3, 2, 2, ints, addrs, got));
    CHECK(got[0] != MPI_DATATYPE_NULL && got[0] != types[0] && got[1] == MPI_DOUBLE);
    CHECK_RC(MPI_Type_get_extent(got[0], &lb, &ext));
    CHECK(lb == 0 && ext == 5 * (MPI_Aint)sizeof(int));
    CHECK_RC(MPI_Type_free(&got[0]));
    CHECK_RC(MPI_Type_commit(&st));
    CHECK_RC(MPI_Type_size(st, &len));
    CHECK(len == 3 * (int)sizeof(int) + (int)sizeof(double));
    CHECK_RC(MPI_Type_free(&st));
    /* MPICH's pair types are direct handles of the datatype kind below the handle table's
     * first index: looked up after the table, they are still the named predefined types. */
    CHECK_RC(MPI_Type_get_envelope(MPI_FLOAT_INT, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_NAMED && ni == 0 && na == 0 && nd == 0);
    CHECK_RC(MPI_Type_get_extent(MPI_SHORT_INT, &lb, &ext));
    CHECK(lb == 0 && ext == (MPI_Aint)sizeof(struct { short s; int i; }));
    printf("datatypes: get_contents handles ok\n");
}

/* Attribute callbacks of dup_and_free: count their calls. */
static int copies_, deletes_;
static int copy_fn(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag) {
    (void)t; (void)key; (void)extra;
    copies_++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Datatype t, int key, void *val, void *extra) {
    (void)t; (void)key; (void)val; (void)extra;
    deletes_++;
    return MPI_SUCCESS;
}

/* MPI_Type_dup and MPI_Type_free with and without attributes: a duplicate has the old
 * type's layout, name and commit state and the envelope of a dup (no integers, addresses
 * or large counts, even of a type made by a large-count constructor); attributes are
 * copied and deleted through their callbacks only where set; a freed handle is invalid and
 * leaves the type it was duplicated from alone; predefined types cannot be freed. */
static void dup_and_free(void) {
    MPI_Count bl[2] = {1, 2}, disp[2] = {0, 8}, ni, na, nc, nd, lb, ext;
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, st, d1, d2, got;
    int comb, key, len, flag;
    char name[MPI_MAX_OBJECT_NAME];
    void *val;
    CHECK_RC(MPI_Type_create_struct_c(2, bl, disp, types, &st));
    CHECK_RC(MPI_Type_set_name(st, "big-struct"));
    CHECK_RC(MPI_Type_commit(&st));
    CHECK_RC(MPI_Type_get_envelope_c(st, &ni, &na, &nc, &nd, &comb));
    CHECK(comb == MPI_COMBINER_STRUCT && ni == 0 && na == 0 && nc == 5 && nd == 2);
    /* Without attributes. */
    CHECK_RC(MPI_Type_dup(st, &d1));
    CHECK_RC(MPI_Type_get_envelope_c(d1, &ni, &na, &nc, &nd, &comb));
    CHECK(comb == MPI_COMBINER_DUP && ni == 0 && na == 0 && nc == 0 && nd == 1);
    CHECK_RC(MPI_Type_get_contents_c(d1, 0, 0, 0, 1, NULL, NULL, NULL, &got));
    CHECK(got == st);
    CHECK_RC(MPI_Type_free(&got));
    CHECK_RC(MPI_Type_get_extent_c(d1, &lb, &ext));
    CHECK(lb == 0 && ext == 24);
    CHECK_RC(MPI_Type_get_name(d1, name, &len));
    CHECK(strcmp(name, "big-struct") == 0);
    CHECK_RC(MPI_Type_free(&d1));
    CHECK(d1 == MPI_DATATYPE_NULL);
    /* With an attribute: copied to the duplicate, deleted with each type. */
    CHECK_RC(MPI_Type_create_keyval(copy_fn, delete_fn, &key, NULL));
    CHECK_RC(MPI_Type_set_attr(st, key, &copies_));
    CHECK_RC(MPI_Type_dup(st, &d2));
    CHECK(copies_ == 1 && deletes_ == 0);
    CHECK_RC(MPI_Type_get_attr(d2, key, &val, &flag));
    CHECK(flag && val == (void *)&copies_);
    CHECK_RC(MPI_Type_free(&d2));
    CHECK(deletes_ == 1 && d2 == MPI_DATATYPE_NULL);
    CHECK_RC(MPI_Type_free(&st));
    CHECK(deletes_ == 2);
    CHECK_RC(MPI_Type_free_keyval(&key));
    /* Errors come back (MPI_ERRORS_RETURN) and change nothing. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Datatype pre = MPI_INT, pair = MPI_FLOAT_INT, stale;
    CHECK(class_of_rc(MPI_Type_free(&pre)) == MPI_ERR_TYPE && pre == MPI_INT);
    CHECK(class_of_rc(MPI_Type_free(&pair)) == MPI_ERR_TYPE && pair == MPI_FLOAT_INT);
    CHECK_RC(MPI_Type_dup(MPI_INT, &d1));
    stale = d1;
    CHECK_RC(MPI_Type_free(&d1));
    CHECK(class_of_rc(MPI_Type_free(&stale)) == MPI_ERR_TYPE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    printf("datatypes: dup and free ok\n");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &check_rank_);
    external32();
    struct_padding();
    darray();
    contents_handles();
    dup_and_free();
    printf("datatypes: all checks passed\n");
    MPI_Finalize();
    return 0;
}
