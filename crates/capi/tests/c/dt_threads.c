/* Datatype handles shared by threads at the level the library provides.
 *
 * Below MPI_THREAD_MULTIPLE the library counts a derived type's references with plain
 * loads and stores (one application thread at a time); at MPI_THREAD_MULTIPLE it must
 * update them atomically. Initialised at the level given as argv[1] ("multiple" or
 * "single"): at MPI_THREAD_MULTIPLE, 4 threads decode a struct of two freed (kept)
 * constituents and free what they get, all at once, while one of them also makes and
 * frees a type of those handles; a lost update shows as a free that fails (the count
 * gone to 0 too early) or a decode that hands back another handle. At MPI_THREAD_SINGLE
 * the main thread runs the same rounds alone. Either way the counts must end where they
 * began: the struct decodes to the same two handles, and frees them once each. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 100000

static MPI_Datatype v, r, s;
static int errors;
static pthread_mutex_t emu = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *what, int rc) {
    pthread_mutex_lock(&emu);
    if (errors++ < 5) fprintf(stderr, "dt_threads: %s failed (rc %d)\n", what, rc);
    pthread_mutex_unlock(&emu);
}

static void *decode(void *arg) {
    int k = (int)(long)arg;
    int ints[8];
    MPI_Aint addrs[8];
    for (int i = 0; i < ROUNDS; i++) {
        MPI_Datatype got[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};
        int rc = MPI_Type_get_contents(s, 3, 2, 2, ints, addrs, got);
        if (rc != MPI_SUCCESS) { fail("MPI_Type_get_contents", rc); return NULL; }
        if (got[0] != v || got[1] != r) { fail("same handles from MPI_Type_get_contents", 0); return NULL; }
        if (k == 0 && i % 5 == 0) {
            MPI_Datatype d;
            rc = MPI_Type_create_resized(got[0], 0, 96, &d);
            if (rc != MPI_SUCCESS || (rc = MPI_Type_free(&d)) != MPI_SUCCESS) fail("resized + free", rc);
        }
        if ((rc = MPI_Type_free(&got[0])) != MPI_SUCCESS) fail("MPI_Type_free (vector)", rc);
        if ((rc = MPI_Type_free(&got[1])) != MPI_SUCCESS) fail("MPI_Type_free (resized)", rc);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int multiple = argc > 1 && !strcmp(argv[1], "multiple");
    int provided, level;
    MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Query_thread(&level);
    if (level != provided || (multiple && provided != MPI_THREAD_MULTIPLE)) {
        printf("dt_threads: provided %d, query %d\n", provided, level);
        return 1;
    }
    MPI_Type_vector(2, 1, 3, MPI_INT, &v);
    MPI_Type_create_resized(v, 0, 64, &r);
    int bl[2] = {1, 2};
    MPI_Aint disp[2] = {0, 64};
    MPI_Datatype ty[2] = {v, r};
    MPI_Type_create_struct(2, bl, disp, ty, &s);
    /* The user's references gone: the struct's holds keep both handles. */
    MPI_Datatype fv = v, fr = r;
    MPI_Type_free(&fv);
    MPI_Type_free(&fr);
    if (multiple) {
        pthread_t th[THREADS];
        for (long k = 0; k < THREADS; k++) pthread_create(&th[k], NULL, decode, (void *)k);
        for (int k = 0; k < THREADS; k++) pthread_join(th[k], NULL);
    } else {
        for (long k = 0; k < THREADS; k++) decode((void *)k);
    }
    /* Every reference taken was dropped: the handles are not the user's any more (a
     * free is an error), and the struct still decodes to them. */
    MPI_Datatype again = v;
    int rc = MPI_Type_free(&again);
    if (rc == MPI_SUCCESS) fail("a stale free refused", rc);
    MPI_Datatype got[2];
    int ints[8];
    MPI_Aint addrs[8];
    rc = MPI_Type_get_contents(s, 3, 2, 2, ints, addrs, got);
    if (rc != MPI_SUCCESS || got[0] != v || got[1] != r) fail("the last decode", rc);
    else {
        if ((rc = MPI_Type_free(&got[0])) != MPI_SUCCESS) fail("the last free (vector)", rc);
        if ((rc = MPI_Type_free(&got[1])) != MPI_SUCCESS) fail("the last free (resized)", rc);
    }
    if ((rc = MPI_Type_free(&s)) != MPI_SUCCESS) fail("the struct's free", rc);
    if (errors == 0) printf("dt_threads: %s ok\n", multiple ? "multiple" : "single");
    else printf("dt_threads: %d errors\n", errors);
    MPI_Finalize();
    return errors != 0;
}
