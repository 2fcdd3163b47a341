/* The loop of mpi4py's test_cco_vec / test_cco_nb_vec testGatherv3 and testScatterv3 in C:
 * for predefined types of 1 to 32 bytes and a strided vector type, every root and
 * every count 0..size, a Barrier / Gatherv / Barrier sequence (non-roots pass NULL receive
 * buffer, counts and displacements, as mpi4py does for recvbuf=None), then Igatherv+Wait,
 * Scatterv and Iscatterv+Wait, on MPI_COMM_WORLD (shared-memory barrier) and on a
 * duplicate. Every received element is checked. Prints "coll_vloop: all checks passed". */
#include "check.h"
#include <string.h>

static void run(MPI_Comm comm, MPI_Datatype type, int rank, int size) {
    MPI_Aint lb, ext;
    int tsize;
    CHECK_RC(MPI_Type_get_extent(type, &lb, &ext));
    CHECK_RC(MPI_Type_size(type, &tsize));
    int *cnt = malloc(size * sizeof(int)), *dis = malloc(size * sizeof(int));
    CHECK(cnt && dis);
    for (int root = 0; root < size; root++) {
        for (int count = 0; count <= size; count++) {
            size_t sb = (size_t)count * ext + 1, rb = (size_t)count * size * ext + 1;
            unsigned char *s = malloc(sb), *r = malloc(rb);
            CHECK(s && r);
            for (int i = 0; i < size; i++) {
                cnt[i] = count;
                dis[i] = i * count;
            }
            for (int mode = 0; mode < 4; mode++) {
                unsigned char v = (unsigned char)(16 * mode + root + 1);
                memset(s, v, sb);
                memset(r, 0xee, rb);
                MPI_Request q = MPI_REQUEST_NULL;
                int me = rank == root;
                if (mode < 2) {
                    CHECK_RC(MPI_Barrier(comm));
                    if (mode == 0)
                        CHECK_RC(MPI_Gatherv(s, count, type, me ? r : NULL, me ? cnt : NULL,
                                             me ? dis : NULL, type, root, comm));
                    else {
                        CHECK_RC(MPI_Igatherv(s, count, type, r, cnt, dis, type, root, comm, &q));
                        CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
                    }
                    CHECK_RC(MPI_Barrier(comm));
                    /* Packed data of a vector item sits at its blocks; holes keep 0xee. */
                    if (me)
                        for (int i = 0; i < count * size; i++)
                            for (MPI_Aint b = 0; b < ext; b++) {
                                unsigned char x = r[i * ext + b];
                                CHECK(x == v || (tsize < ext && x == 0xee));
                            }
                } else {
                    memset(r, v, rb);
                    memset(s, 0xee, sb);
                    if (mode == 2)
                        CHECK_RC(MPI_Scatterv(me ? r : NULL, me ? cnt : NULL, me ? dis : NULL,
                                              type, s, count, type, root, comm));
                    else {
                        CHECK_RC(MPI_Iscatterv(r, cnt, dis, type, s, count, type, root, comm, &q));
                        CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
                    }
                    CHECK_RC(MPI_Barrier(comm));
                    for (int i = 0; i < count; i++)
                        for (MPI_Aint b = 0; b < ext; b++) {
                            unsigned char x = s[i * ext + b];
                            CHECK(x == v || (tsize < ext && x == 0xee));
                        }
                }
            }
            free(s);
            free(r);
        }
    }
    free(cnt);
    free(dis);
}

int main(int argc, char **argv) {
    int rank, size;
    CHECK_RC(MPI_Init(&argc, &argv));
    CHECK_RC(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_RC(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank_ = rank;
    MPI_Datatype vec;
    CHECK_RC(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    CHECK_RC(MPI_Type_commit(&vec));
    /* 1, 2, 4, 8, 16 and 32 bytes, a bool, and a vector with holes. */
    MPI_Datatype types[] = {MPI_SIGNED_CHAR, MPI_SHORT,       MPI_INT,
                            MPI_DOUBLE,      MPI_LONG_DOUBLE, MPI_C_LONG_DOUBLE_COMPLEX,
                            MPI_C_BOOL,      vec};
    int nt = (int)(sizeof types / sizeof types[0]);
    MPI_Comm dup;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_Comm comms[] = {MPI_COMM_WORLD, dup};
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < nt; t++)
            run(comms[c], types[t], rank, size);
    CHECK_RC(MPI_Comm_free(&dup));
    CHECK_RC(MPI_Type_free(&vec));
    if (rank == 0)
        printf("coll_vloop: all checks passed\n");
    CHECK_RC(MPI_Finalize());
    return 0;
}
