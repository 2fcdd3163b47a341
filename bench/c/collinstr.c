/* Instruction counts of one reduction collective per call, for `valgrind --tool=callgrind
 * --collect-atstart=no` on one rank (the others run natively): only the calls are
 * collected (callgrind's client requests), each after a barrier as the standard suites
 * time them, after two uncollected warm-up calls; divide callgrind's total (Ir) by N.
 * After the barrier, rank 0 (the one to run under callgrind) sleeps 20 ms before its call
 * (not collected), so that its peers have posted their part and it seldom waits for them;
 * what waiting remains (peers descheduled on a loaded machine, pipelined algorithms) shows
 * up as spinning in `Seg::wait_all` and the progress loop in the profile.
 *
 * usage: collinstr TEST DTYPE SIZE N [inplace]
 *   TEST   allreduce, reduce (root 0), scan, reduce_scatter_block, reduce_scatter (equal
 *          counts), iallreduce, ireduce, ireduce_scatter_block (post, then wait); the
 *          data movers bcast (root 0),
 *          bcast1 (root 1: rank 0 receives), allgather, allgatherv, alltoall, alltoallv
 *          (v-forms with equal counts and regular displacements, as oxbench calls them); the
 *          rooted v-forms and their references gatherv, scatterv, gather, scatter and the
 *          nonblocking igatherv, iscatterv, igather, iscatter (root $COLLINSTR_ROOT, default
 *          0: the counted rank 0 is the root, 1: a non-root), ibcast (root $COLLINSTR_ROOT),
 *          iallgather, iallgatherv, ialltoall, ialltoallv, alltoallw and ialltoallw (every
 *          block the same size, byte displacements); barrier and ibarrier (DTYPE and SIZE ignored)
 *   DTYPE  2INT, FLOAT_INT, DOUBLE_INT, LONG_INT, SHORT_INT, LONG_DOUBLE_INT (MPI_MINLOC),
 *          or CHAR, INT, DOUBLE (MPI_SUM)
 *   SIZE   bytes of one buffer (of each rank's block for the reduce-scatters and the
 *          gather, scatter and alltoall forms), rounded down to whole items of the type's
 *          extent, as oxbench counts them
 *
 * Output (rank 0): `COLLINSTR test=T dtype=D size=S count=C n=N inplace=I`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

int main(int argc, char **argv) {
  int rank, np;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (argc < 5) {
    if (rank == 0) fprintf(stderr, "usage: collinstr TEST DTYPE SIZE N [inplace]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *test = argv[1], *dname = argv[2];
  long size = atol(argv[3]), n = atol(argv[4]);
  int inplace = argc > 5 && !strcmp(argv[5], "inplace");
  static const struct {
    const char *name;
    MPI_Datatype dt;
    MPI_Op op;
  } types[] = {{"2INT", MPI_2INT, MPI_MINLOC},
               {"FLOAT_INT", MPI_FLOAT_INT, MPI_MINLOC},
               {"DOUBLE_INT", MPI_DOUBLE_INT, MPI_MINLOC},
               {"LONG_INT", MPI_LONG_INT, MPI_MINLOC},
               {"SHORT_INT", MPI_SHORT_INT, MPI_MINLOC},
               {"LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, MPI_MINLOC},
               {"CHAR", MPI_CHAR, MPI_SUM},
               {"INT", MPI_INT, MPI_SUM},
               {"DOUBLE", MPI_DOUBLE, MPI_SUM}};
  int ti = -1;
  for (int i = 0; i < (int)(sizeof types / sizeof types[0]); i++)
    if (!strcmp(types[i].name, dname)) ti = i;
  if (ti < 0) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_Datatype dt = types[ti].dt;
  MPI_Op op = types[ti].op;
  MPI_Aint lb, ext;
  MPI_Type_get_extent(dt, &lb, &ext);
  int count = (int)(size / ext);
  if (count < 1) count = 1;
  size_t bytes = (size_t)count * ext * np; /* room for a reduce-scatter's np blocks */
  char *s = calloc(bytes, 1), *r = calloc(bytes, 1);
  const void *sb = inplace ? MPI_IN_PLACE : s;
  const char *re = getenv("COLLINSTR_ROOT");
  int root = re ? atoi(re) : 0, me = rank == root;
  int *cnt = malloc(np * sizeof(int)), *dsp = malloc(np * sizeof(int));
  int *bdsp = malloc(np * sizeof(int));
  MPI_Datatype *tys = malloc(np * sizeof(MPI_Datatype));
  for (int i = 0; i < np; i++) {
    cnt[i] = count;
    dsp[i] = i * count;
    bdsp[i] = (int)(i * count * ext);
    tys[i] = dt;
  }
  for (long it = -2; it < n; it++) {
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) usleep(20000);
    if (it >= 0) CALLGRIND_TOGGLE_COLLECT;
    if (!strcmp(test, "allreduce"))
      MPI_Allreduce(sb, r, count, dt, op, MPI_COMM_WORLD);
    else if (!strcmp(test, "reduce"))
      MPI_Reduce(inplace && rank != 0 ? s : sb, r, count, dt, op, 0, MPI_COMM_WORLD);
    else if (!strcmp(test, "scan"))
      MPI_Scan(sb, r, count, dt, op, MPI_COMM_WORLD);
    else if (!strcmp(test, "reduce_scatter_block"))
      MPI_Reduce_scatter_block(sb, r, count, dt, op, MPI_COMM_WORLD);
    else if (!strcmp(test, "reduce_scatter"))
      MPI_Reduce_scatter(sb, r, cnt, dt, op, MPI_COMM_WORLD);
    else if (!strcmp(test, "bcast") || !strcmp(test, "bcast1"))
      MPI_Bcast(s, count, dt, test[5] == '1', MPI_COMM_WORLD);
    else if (!strcmp(test, "allgather"))
      MPI_Allgather(sb, count, dt, r, count, dt, MPI_COMM_WORLD);
    else if (!strcmp(test, "allgatherv"))
      MPI_Allgatherv(sb, count, dt, r, cnt, dsp, dt, MPI_COMM_WORLD);
    else if (!strcmp(test, "alltoall"))
      MPI_Alltoall(sb, count, dt, r, count, dt, MPI_COMM_WORLD);
    else if (!strcmp(test, "alltoallv"))
      MPI_Alltoallv(sb, cnt, dsp, dt, r, cnt, dsp, dt, MPI_COMM_WORLD);
    else if (!strcmp(test, "iallreduce"))
      MPI_Iallreduce(sb, r, count, dt, op, MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "ireduce_scatter_block"))
      MPI_Ireduce_scatter_block(sb, r, count, dt, op, MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "ireduce"))
      MPI_Ireduce(inplace && rank != 0 ? s : sb, r, count, dt, op, 0, MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "gatherv"))
      MPI_Gatherv(inplace && me ? MPI_IN_PLACE : s, count, dt, r, cnt, dsp, dt, root,
                  MPI_COMM_WORLD);
    else if (!strcmp(test, "gather"))
      MPI_Gather(inplace && me ? MPI_IN_PLACE : s, count, dt, r, count, dt, root,
                 MPI_COMM_WORLD);
    else if (!strcmp(test, "scatterv"))
      MPI_Scatterv(s, cnt, dsp, dt, inplace && me ? MPI_IN_PLACE : r, count, dt, root,
                   MPI_COMM_WORLD);
    else if (!strcmp(test, "scatter"))
      MPI_Scatter(s, count, dt, inplace && me ? MPI_IN_PLACE : r, count, dt, root,
                  MPI_COMM_WORLD);
    else if (!strcmp(test, "igatherv"))
      MPI_Igatherv(inplace && me ? MPI_IN_PLACE : s, count, dt, r, cnt, dsp, dt, root,
                   MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "igather"))
      MPI_Igather(inplace && me ? MPI_IN_PLACE : s, count, dt, r, count, dt, root,
                  MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "iscatterv"))
      MPI_Iscatterv(s, cnt, dsp, dt, inplace && me ? MPI_IN_PLACE : r, count, dt, root,
                    MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "iscatter"))
      MPI_Iscatter(s, count, dt, inplace && me ? MPI_IN_PLACE : r, count, dt, root,
                   MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "ibcast"))
      MPI_Ibcast(s, count, dt, root, MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "iallgather"))
      MPI_Iallgather(sb, count, dt, r, count, dt, MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "iallgatherv"))
      MPI_Iallgatherv(sb, count, dt, r, cnt, dsp, dt, MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "ialltoall"))
      MPI_Ialltoall(sb, count, dt, r, count, dt, MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "ialltoallv"))
      MPI_Ialltoallv(sb, cnt, dsp, dt, r, cnt, dsp, dt, MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "barrier"))
      MPI_Barrier(MPI_COMM_WORLD);
    else if (!strcmp(test, "ibarrier"))
      MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    else if (!strcmp(test, "alltoallw"))
      MPI_Alltoallw(sb, cnt, bdsp, tys, r, cnt, bdsp, tys, MPI_COMM_WORLD);
    else if (!strcmp(test, "ialltoallw"))
      MPI_Ialltoallw(sb, cnt, bdsp, tys, r, cnt, bdsp, tys, MPI_COMM_WORLD, &rq);
    else
      MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (it >= 0) CALLGRIND_TOGGLE_COLLECT;
  }
  if (rank == 0)
    printf("COLLINSTR test=%s dtype=%s size=%ld count=%d n=%ld inplace=%d root=%d np=%d\n", test,
           dname, size, count, n, inplace, root, np);
  free(s);
  free(r);
  free(cnt);
  free(dsp);
  free(bdsp);
  free(tys);
  MPI_Finalize();
  return 0;
}
