/* Alltoall, alltoallv and alltoallw, in place and not, with blocks on both sides of the
 * shared-memory segment's buffer (4 KiB per rank), of 64 KiB per rank (the 2-rank
 * out-of-place cross-memory limit before) and of the in-place trade's 256 KiB bounce buffer: uneven and
 * zero counts, gaps between blocks that must stay untouched, alltoallw with a strided
 * derived type on either side, with predefined types of different sizes per peer and with
 * MPI_INT for every peer.
 * Every result is checked against values each rank can regenerate. Prints
 * "coll_a2a_large: all checks passed" on rank 0. */
#include "check.h"
#include <string.h>

#define GAP ((char)0x5a)

static char val(int from, int to, int k, int what) {
    return (char)((from * 131 + to * 31 + k * 7 + what * 17) % 251);
}

/* Int item k of the block rank `from` sends to rank `to`. */
static int ival(int from, int to, int k) { return from * 1000003 + to * 1009 + k; }

/* Bytes rank i sends to rank j in place: symmetric, some zero. */
static int sym(int i, int j, int base) { return base / 4 * ((i + j) % 3) + (i + j) % 5; }
/* Bytes rank i sends to rank j out of place: uneven, not symmetric. */
static int asym(int i, int j, int base) { return base / 4 * ((2 * i + j) % 3) + (i + 3 * j) % 7; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    const int bases[] = {0, 8, 1000, 1024, 4096, 5000, 40000, 70000, 300000, 1200000};
    int *c = malloc(size * sizeof(int)), *d = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    MPI_Datatype *ts = malloc(size * sizeof(MPI_Datatype)), *tr = malloc(size * sizeof(MPI_Datatype));
    /* A strided type: one char out of every two. */
    MPI_Datatype strided;
    MPI_Type_vector(1, 1, 2, MPI_CHAR, &strided);
    MPI_Type_create_resized(strided, 0, 2, &strided);
    MPI_Type_commit(&strided);
    for (unsigned b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        int base = bases[b];
        /* Alltoall in place and not: `blk` bytes per peer. */
        int blk = base / size + 1;
        char *s = malloc((size_t)blk * size), *r = malloc((size_t)blk * size);
        for (int j = 0; j < size; j++)
            for (int k = 0; k < blk; k++) s[j * blk + k] = val(rank, j, k, 1);
        memcpy(r, s, (size_t)blk * size);
        CHECK_RC(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, blk, MPI_CHAR, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++)
            for (int k = 0; k < blk; k++) CHECK(r[j * blk + k] == val(j, rank, k, 1));
        memset(r, 0, (size_t)blk * size);
        CHECK_RC(MPI_Alltoall(s, blk, MPI_CHAR, r, blk, MPI_CHAR, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++)
            for (int k = 0; k < blk; k++) CHECK(r[j * blk + k] == val(j, rank, k, 1));
        free(s);
        free(r);
        /* Alltoallv (and alltoallw of MPI_CHAR) in place: gaps of 3 bytes. */
        for (int w = 0; w < 2; w++) {
            int o = 0;
            for (int j = 0; j < size; j++) {
                c[j] = sym(rank, j, base);
                d[j] = o;
                o += c[j] + 3;
                ts[j] = MPI_CHAR;
            }
            char *v = malloc(o + 1);
            memset(v, GAP, o + 1);
            for (int j = 0; j < size; j++)
                for (int k = 0; k < c[j]; k++) v[d[j] + k] = val(rank, j, k, 2 + w);
            if (w)
                CHECK_RC(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, v, c, d, ts, MPI_COMM_WORLD));
            else
                CHECK_RC(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, v, c, d, MPI_CHAR, MPI_COMM_WORLD));
            for (int j = 0; j < size; j++) {
                for (int k = 0; k < c[j]; k++) CHECK(v[d[j] + k] == val(j, rank, k, 2 + w));
                for (int g = 0; g < 3; g++) CHECK(v[d[j] + c[j] + g] == GAP);
            }
            free(v);
        }
        /* Alltoallv out of place, uneven. */
        int so = 0, ro = 0;
        for (int j = 0; j < size; j++) {
            c[j] = asym(rank, j, base);
            d[j] = so;
            so += c[j] + 1;
            rc[j] = asym(j, rank, base);
            rd[j] = ro;
            ro += rc[j] + 2;
        }
        s = malloc(so + 1);
        r = malloc(ro + 1);
        for (int j = 0; j < size; j++)
            for (int k = 0; k < c[j]; k++) s[d[j] + k] = val(rank, j, k, 4);
        memset(r, GAP, ro + 1);
        CHECK_RC(MPI_Alltoallv(s, c, d, MPI_CHAR, r, rc, rd, MPI_CHAR, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++) {
            for (int k = 0; k < rc[j]; k++) CHECK(r[rd[j] + k] == val(j, rank, k, 4));
            CHECK(r[rd[j] + rc[j]] == GAP);
        }
        /* Alltoallw out of place: to and from even peers as MPI_SHORT (the counts are
         * halved), else MPI_CHAR; then with the strided type on the send side. */
        for (int j = 0; j < size; j++) {
            int sh = (j % 2 == 0) && (rank % 2 == 0);
            ts[j] = tr[j] = sh ? MPI_SHORT : MPI_CHAR;
        }
        int *sc = malloc(size * sizeof(int)), *rcn = malloc(size * sizeof(int));
        for (int j = 0; j < size; j++) {
            /* Both sides of a pair agree: shorts only between two even ranks. */
            int sh = (j % 2 == 0) && (rank % 2 == 0);
            sc[j] = sh ? c[j] / 2 : c[j];
            rcn[j] = sh ? rc[j] / 2 : rc[j];
        }
        memset(r, GAP, ro + 1);
        CHECK_RC(MPI_Alltoallw(s, sc, d, ts, r, rcn, rd, tr, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++) {
            int n = (tr[j] == MPI_SHORT) ? rcn[j] * 2 : rcn[j];
            for (int k = 0; k < n; k++) CHECK(r[rd[j] + k] == val(j, rank, k, 4));
            CHECK(r[rd[j] + n] == GAP);
        }
        /* Alltoallw out of place with one type, MPI_INT, for every block (made in one
         * loop, not per block): byte displacements, a one-int gap after each block, uneven
         * and zero counts. */
        {
            int *ic = malloc(size * sizeof(int)), *id = malloc(size * sizeof(int));
            int *jc = malloc(size * sizeof(int)), *jd = malloc(size * sizeof(int));
            int io = 0, jo = 0;
            for (int j = 0; j < size; j++) {
                ic[j] = asym(rank, j, base) / 4;
                id[j] = io * (int)sizeof(int);
                io += ic[j] + 1;
                jc[j] = asym(j, rank, base) / 4;
                jd[j] = jo * (int)sizeof(int);
                jo += jc[j] + 1;
                ts[j] = tr[j] = MPI_INT;
            }
            int *si = malloc((io + 1) * sizeof(int)), *ri = malloc((jo + 1) * sizeof(int));
            for (int j = 0; j < size; j++)
                for (int k = 0; k < ic[j]; k++) si[id[j] / 4 + k] = ival(rank, j, k);
            for (int k = 0; k <= jo; k++) ri[k] = -1;
            CHECK_RC(MPI_Alltoallw(si, ic, id, ts, ri, jc, jd, tr, MPI_COMM_WORLD));
            for (int j = 0; j < size; j++) {
                for (int k = 0; k < jc[j]; k++) CHECK(ri[jd[j] / 4 + k] == ival(j, rank, k));
                CHECK(ri[jd[j] / 4 + jc[j]] == -1);
            }
            free(si); free(ri); free(ic); free(id); free(jc); free(jd);
        }
        /* Strided send: item k of block j is byte 2k of a block laid out at d2[j]. */
        int *d2 = malloc(size * sizeof(int));
        int o2 = 0;
        for (int j = 0; j < size; j++) {
            d2[j] = o2;
            o2 += 2 * c[j] + 2;
            ts[j] = strided;
            tr[j] = MPI_CHAR;
        }
        char *s2 = malloc(o2 + 1);
        memset(s2, 0, o2 + 1);
        for (int j = 0; j < size; j++)
            for (int k = 0; k < c[j]; k++) s2[d2[j] + 2 * k] = val(rank, j, k, 5);
        memset(r, GAP, ro + 1);
        CHECK_RC(MPI_Alltoallw(s2, c, d2, ts, r, rc, rd, tr, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++) {
            for (int k = 0; k < rc[j]; k++) CHECK(r[rd[j] + k] == val(j, rank, k, 5));
            CHECK(r[rd[j] + rc[j]] == GAP);
        }
        /* Strided receive side in place: pieces of sym() items, every other byte. */
        o2 = 0;
        for (int j = 0; j < size; j++) {
            c[j] = sym(rank, j, base);
            d2[j] = o2;
            o2 += 2 * c[j] + 2;
            tr[j] = strided;
        }
        free(s2);
        s2 = malloc(o2 + 1);
        memset(s2, GAP, o2 + 1);
        for (int j = 0; j < size; j++)
            for (int k = 0; k < c[j]; k++) s2[d2[j] + 2 * k] = val(rank, j, k, 6);
        CHECK_RC(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, s2, c, d2, tr, MPI_COMM_WORLD));
        for (int j = 0; j < size; j++) {
            for (int k = 0; k < c[j]; k++) {
                CHECK(s2[d2[j] + 2 * k] == val(j, rank, k, 6));
                CHECK(s2[d2[j] + 2 * k + 1] == GAP);
            }
        }
        free(s2);
        free(d2);
        free(sc);
        free(rcn);
        free(s);
        free(r);
    }
    MPI_Type_free(&strided);
    free(c); free(d); free(rc); free(rd); free(ts); free(tr);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("coll_a2a_large: all checks passed\n");
    MPI_Finalize();
    return 0;
}
