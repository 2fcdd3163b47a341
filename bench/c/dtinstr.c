/* dtinstr.c: instructions per iteration of one datatype call sequence under callgrind.
 * The sequence named by argv[1] (dupstruct, dupint, resized, gone, live, con, basic,
 * struct3, contig, vector, resget, vecget, envelope, envint, size, extent, extint, commit) runs ITER times between CALLGRIND_START/STOP_INSTRUMENTATION; argv[2]
 * "multiple" initializes at MPI_THREAD_MULTIPLE. Build with each implementation's mpicc
 * (-O2), run as a singleton:
 *   valgrind --tool=callgrind --instr-atstart=no ./dtinstr gone
 * and divide the total by ITER. The sequences are bench/c/dtcalls.c's rows of the same
 * types (gone: get_contents_c of a struct of two freed dups + 2 frees; live: of a struct
 * of two live derived types + 2 frees; basic: of a struct of basic types; con: of a
 * contiguous of a derived type + free; vector: vector_c(3,4,6,INT) + free; resget:
 * get_contents_c of a resized struct + free; vecget: get_contents of a vector of a
 * derived type (int form) + free; envelope/envint: get_envelope_c of the struct/MPI_INT;
 * size/extent/extint: size_c/get_extent_c of the struct/MPI_INT; commit: commit of a
 * committed vector). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <valgrind/callgrind.h>
#define ITER 10000
int main(int argc, char **argv) {
  int provided = 0;
  if (argc > 2 && !strcmp(argv[2], "multiple")) MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else MPI_Init(&argc, &argv);
  const char *w = argc > 1 ? argv[1] : "dupstruct";
  int bl[3] = {1, 2, 3}; MPI_Aint d[3] = {0, 8, 32}; MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_INT};
  MPI_Count cbl[3] = {1, 2, 3}, cd[3] = {0, 8, 32};
  MPI_Datatype st, st2, t, dt[4]; int ii[16]; MPI_Aint aa[16]; MPI_Count cc[16];
  MPI_Type_create_struct(3, bl, d, ty, &st);
  MPI_Type_create_struct_c(3, cbl, cd, ty, &st2);
  MPI_Datatype dupd; MPI_Type_dup(st, &dupd);
  MPI_Datatype sts[3] = {st, dupd, MPI_INT};
  MPI_Datatype st3; MPI_Type_create_struct_c(3, cbl, cd, sts, &st3);
  MPI_Datatype stgs[2], gone;
  MPI_Type_dup(st, &stgs[0]); MPI_Type_dup(st2, &stgs[1]); MPI_Type_create_struct_c(2, cbl, cd, stgs, &gone);
  MPI_Type_free(&stgs[0]); MPI_Type_free(&stgs[1]);
  MPI_Datatype con; MPI_Type_contiguous_c(3, st, &con);
  MPI_Datatype res; MPI_Type_create_resized(st2, 0, 48, &res);
  MPI_Datatype veci; MPI_Type_vector(2, 1, 3, st, &veci);
  MPI_Count ni, na, nc, nd, sz1, lb1, ex1; int comb;
  static const char *nm[] = {"dupstruct","dupint","resized","gone","live","con","basic","struct3","contig","vector","resget","vecget",
                             "envelope","envint","size","extent","extint","commit"};
  int k = -1; for (int j = 0; j < 18; j++) if (!strcmp(w, nm[j])) k = j;
  if (k == 17) MPI_Type_commit(&veci);
  CALLGRIND_START_INSTRUMENTATION;
  for (int i = 0; i < ITER; i++) {
    if (k == 0) { MPI_Type_dup(st2, &t); MPI_Type_free(&t); }
    else if (k == 1) { MPI_Type_dup(MPI_INT, &t); MPI_Type_free(&t); }
    else if (k == 2) { MPI_Type_create_resized_c(st2, 0, 48, &t); MPI_Type_free(&t); }
    else if (k == 3) { MPI_Type_get_contents_c(gone, 16, 16, 16, 4, ii, aa, cc, dt); MPI_Type_free(&dt[0]); MPI_Type_free(&dt[1]); }
    else if (k == 4) { MPI_Type_get_contents_c(st3, 16, 16, 16, 4, ii, aa, cc, dt); MPI_Type_free(&dt[0]); MPI_Type_free(&dt[1]); }
    else if (k == 5) { MPI_Type_get_contents_c(con, 16, 16, 16, 4, ii, aa, cc, dt); MPI_Type_free(&dt[0]); }
    else if (k == 6) { MPI_Type_get_contents_c(st2, 16, 16, 16, 4, ii, aa, cc, dt); }
    else if (k == 7) { MPI_Type_create_struct_c(3, cbl, cd, ty, &t); MPI_Type_free(&t); }
    else if (k == 8) { MPI_Type_contiguous_c(3, MPI_INT, &t); MPI_Type_free(&t); }
    else if (k == 9) { MPI_Type_vector_c(3, 4, 6, MPI_INT, &t); MPI_Type_free(&t); }
    else if (k == 10) { MPI_Type_get_contents_c(res, 16, 16, 16, 4, ii, aa, cc, dt); MPI_Type_free(&dt[0]); }
    else if (k == 11) { MPI_Type_get_contents(veci, 16, 16, 4, ii, aa, dt); MPI_Type_free(&dt[0]); }
    else if (k == 12) { MPI_Type_get_envelope_c(st2, &ni, &na, &nc, &nd, &comb); }
    else if (k == 13) { MPI_Type_get_envelope_c(MPI_INT, &ni, &na, &nc, &nd, &comb); }
    else if (k == 14) { MPI_Type_size_c(st2, &sz1); }
    else if (k == 15) { MPI_Type_get_extent_c(st2, &lb1, &ex1); }
    else if (k == 16) { MPI_Type_get_extent_c(MPI_INT, &lb1, &ex1); }
    else if (k == 17) { MPI_Type_commit(&veci); }
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  MPI_Finalize();
  return 0;
}
