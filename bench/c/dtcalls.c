/* dtcalls.c: ns per call of the datatype calls mpi4py's util.dtlib and test_datatype make
 * (constructors + free, dup, get_envelope_c/get_contents_c, size/extent), best of B batches of N
 * calls (short batches: a batch that a time slice interrupts is not the best). Build with each
 * implementation's mpicc, e.g. -O2 -DN=500 -DB=400; run on 1 rank. -DMULTIPLE initializes at
 * MPI_THREAD_MULTIPLE (as mpi4py does; MPICH then takes its global lock in each call). Open MPI
 * 4.1 has no large-count calls: the int forms stand in, as mpi4py's fallbacks do. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#if MPI_VERSION < 4
/* Open MPI 4.1 has no large-count calls: the int forms, as mpi4py's fallbacks call them. */
typedef long long MPI_Count_;
#define MPI_Count MPI_Count_
static int MPI_Type_create_struct_c(MPI_Count n, const MPI_Count *bl, const MPI_Count *d, const MPI_Datatype *t, MPI_Datatype *o) {
  int b[8]; MPI_Aint a[8]; for (int i = 0; i < n; i++) { b[i] = (int)bl[i]; a[i] = (MPI_Aint)d[i]; }
  return MPI_Type_create_struct((int)n, b, a, t, o); }
static int MPI_Type_get_envelope_c(MPI_Datatype t, MPI_Count *ni, MPI_Count *na, MPI_Count *nc, MPI_Count *nd, int *c) {
  int i, a, d; int rc = MPI_Type_get_envelope(t, &i, &a, &d, c); *ni = i; *na = a; *nc = 0; *nd = d; return rc; }
static int MPI_Type_get_contents_c(MPI_Datatype t, MPI_Count mi, MPI_Count ma, MPI_Count mc, MPI_Count md, int *i, MPI_Aint *a, MPI_Count *c, MPI_Datatype *d) {
  (void)mc; (void)c; return MPI_Type_get_contents(t, (int)mi, (int)ma, (int)md, i, a, d); }
static int MPI_Type_create_resized_c(MPI_Datatype t, MPI_Count lb, MPI_Count e, MPI_Datatype *o) { return MPI_Type_create_resized(t, lb, e, o); }
static int MPI_Type_contiguous_c(MPI_Count n, MPI_Datatype t, MPI_Datatype *o) { return MPI_Type_contiguous((int)n, t, o); }
static int MPI_Type_vector_c(MPI_Count n, MPI_Count b, MPI_Count s, MPI_Datatype t, MPI_Datatype *o) { return MPI_Type_vector((int)n, (int)b, (int)s, t, o); }
static int MPI_Type_create_subarray_c(int nd, const MPI_Count *s, const MPI_Count *u, const MPI_Count *o0, int ord, MPI_Datatype t, MPI_Datatype *o) {
  int a[8], b[8], c[8]; for (int i = 0; i < nd; i++) { a[i] = (int)s[i]; b[i] = (int)u[i]; c[i] = (int)o0[i]; }
  return MPI_Type_create_subarray(nd, a, b, c, ord, t, o); }
static int MPI_Type_size_c(MPI_Datatype t, MPI_Count *s) { int x; int rc = MPI_Type_size(t, &x); *s = x; return rc; }
static int MPI_Type_get_extent_c(MPI_Datatype t, MPI_Count *lb, MPI_Count *e) { MPI_Aint l, x; int rc = MPI_Type_get_extent(t, &l, &x); *lb = l; *e = x; return rc; }
#endif
#ifndef N
#define N 20000
#endif
#ifndef B
#define B 7
#endif
static double best[48]; static const char *names[48]; static int nt;
#define BENCH(name, body) do { double m = 1e30; for (int b = 0; b < B; b++) { double t0 = MPI_Wtime(); \
  for (int it = 0; it < N; it++) { body; } double t = (MPI_Wtime() - t0) / N; if (t < m) m = t; } \
  names[nt] = name; best[nt++] = m; } while (0)
int main(int argc, char **argv) {
#ifdef MULTIPLE
  int provided; MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided != MPI_THREAD_MULTIPLE) printf("provided thread level %d\n", provided);
#else
  MPI_Init(&argc, &argv);
#endif
  int bl[3] = {1, 2, 3}; MPI_Aint d[3] = {0, 8, 32}; MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_INT};
  MPI_Count cbl[3] = {1, 2, 3}, cd[3] = {0, 8, 32};
  MPI_Datatype st, st2, t, dt[4]; MPI_Count ni, na, nc, nd; int comb; int ii[16]; MPI_Aint aa[16]; MPI_Count cc[16];
  MPI_Type_create_struct(3, bl, d, ty, &st);
  MPI_Type_create_struct_c(3, cbl, cd, ty, &st2);
  MPI_Datatype dupd; MPI_Type_dup(st, &dupd);
  MPI_Datatype res; MPI_Type_create_resized(st2, 0, 48, &res);
  MPI_Datatype sts[3] = {st, dupd, MPI_INT};
  MPI_Datatype st3; MPI_Type_create_struct_c(3, cbl, cd, sts, &st3);
  BENCH("get_envelope_c(struct)", MPI_Type_get_envelope_c(st2, &ni, &na, &nc, &nd, &comb));
  BENCH("get_envelope_c(MPI_INT)", MPI_Type_get_envelope_c(MPI_INT, &ni, &na, &nc, &nd, &comb));
  BENCH("get_contents_c(struct basic)", MPI_Type_get_contents_c(st2, 16, 16, 16, 4, ii, aa, cc, dt));
  BENCH("get_contents_c(struct derived)+2 free", MPI_Type_get_contents_c(st3, 16, 16, 16, 4, ii, aa, cc, dt); MPI_Type_free(&dt[0]); MPI_Type_free(&dt[1]));
  BENCH("get_contents_c(resized)+free", MPI_Type_get_contents_c(res, 16, 16, 16, 4, ii, aa, cc, dt); MPI_Type_free(&dt[0]));
  MPI_Datatype con, vec, gone, stg, stgs[2]; /* of derived types: a contiguous and a vector of st, a struct of two freed dups */
  MPI_Type_contiguous_c(3, st, &con); MPI_Type_vector_c(2, 1, 3, st, &vec);
  MPI_Type_dup(st, &stgs[0]); MPI_Type_dup(st2, &stgs[1]); MPI_Type_create_struct_c(2, cbl, cd, stgs, &stg);
  MPI_Type_free(&stgs[0]); MPI_Type_free(&stgs[1]); gone = stg;
  BENCH("get_contents_c(contiguous derived)+free", MPI_Type_get_contents_c(con, 16, 16, 16, 4, ii, aa, cc, dt); MPI_Type_free(&dt[0]));
  BENCH("get_contents_c(vector derived)+free", MPI_Type_get_contents_c(vec, 16, 16, 16, 4, ii, aa, cc, dt); MPI_Type_free(&dt[0]));
  MPI_Datatype veci; MPI_Type_vector(2, 1, 3, st, &veci);
  BENCH("get_contents(vector derived)+free", MPI_Type_get_contents(veci, 16, 16, 4, ii, aa, dt); MPI_Type_free(&dt[0]));
  BENCH("get_contents_c(struct freed dups)+2 free", MPI_Type_get_contents_c(gone, 16, 16, 16, 4, ii, aa, cc, dt); MPI_Type_free(&dt[0]); MPI_Type_free(&dt[1]));
  BENCH("get_envelope_c(vector derived)", MPI_Type_get_envelope_c(vec, &ni, &na, &nc, &nd, &comb));
  MPI_Type_commit(&vec);
  BENCH("commit(committed vector)", MPI_Type_commit(&vec));
  BENCH("dup(MPI_INT)+free", MPI_Type_dup(MPI_INT, &t); MPI_Type_free(&t));
  BENCH("dup(struct)+free", MPI_Type_dup(st2, &t); MPI_Type_free(&t));
  BENCH("create_struct_c(3)+free", MPI_Type_create_struct_c(3, cbl, cd, ty, &t); MPI_Type_free(&t));
  BENCH("create_struct_c(3)+commit+free", MPI_Type_create_struct_c(3, cbl, cd, ty, &t); MPI_Type_commit(&t); MPI_Type_free(&t));
  BENCH("create_resized_c(struct)+free", MPI_Type_create_resized_c(st2, 0, 48, &t); MPI_Type_free(&t));
  BENCH("contiguous_c(3,INT)+free", MPI_Type_contiguous_c(3, MPI_INT, &t); MPI_Type_free(&t));
  MPI_Count sz[2] = {3, 4}, sub[2] = {3, 4}, s0[2] = {0, 0};
  BENCH("subarray_c(2d,DOUBLE)+free", MPI_Type_create_subarray_c(2, sz, sub, s0, MPI_ORDER_C, MPI_DOUBLE, &t); MPI_Type_free(&t));
  MPI_Count sz1, lb1, ex1;
  BENCH("size_c(struct)", MPI_Type_size_c(st2, &sz1));
  BENCH("get_extent_c(struct)", MPI_Type_get_extent_c(st2, &lb1, &ex1));
  BENCH("get_extent_c(MPI_INT)", MPI_Type_get_extent_c(MPI_INT, &lb1, &ex1));
  BENCH("vector_c(3,4,6,INT)+free", MPI_Type_vector_c(3, 4, 6, MPI_INT, &t); MPI_Type_free(&t));
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) for (int i = 0; i < nt; i++) printf("%-40s %8.1f ns\n", names[i], best[i] * 1e9);
  MPI_Finalize();
  return 0;
}
