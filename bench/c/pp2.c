/* Ping-pong of MPI_Send/MPI_Recv with separate send and receive buffers (as mpi4py.bench's
 * pingpong), or one buffer for both (env SAME=1, as oxbench's lat): per size (8-64 KiB),
 * the median and minimum of 7 samples of 2000 round trips' mean one-way time, in us.
 * Sizes from the command line replace the default list (`pp2 16384`); env ALIGN=1 takes
 * the buffers from posix_memalign(4096) instead of malloc (a CMA read pins every page the
 * send buffer touches: session 47, s47-pp16k); env SOFF=B / ROFF=B (with ALIGN=1) start the
 * send / receive buffer B bytes into its first page (NumPy's start 2064-2144 B in).
 * Build with any mpicc (mpicc.mpich's binary runs on oxmpi's libmpi.so.12 too); run at
 * np=2 bound to cores. Session 46 (spot-checks-wave2.md, s46-pp16k). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  MPI_Init(&argc,&argv); int r; MPI_Comm_rank(MPI_COMM_WORLD,&r);
  int same=getenv("SAME")&&atoi(getenv("SAME"));
  int align=getenv("ALIGN")&&atoi(getenv("ALIGN"));
  int soff=getenv("SOFF")?atoi(getenv("SOFF")):0, roff=getenv("ROFF")?atoi(getenv("ROFF")):0;
  int sizes[64]={8192,16384,32768,65536}, ns=4;
  if(argc>1){ ns=0; for(int i=1;i<argc&&ns<64;i++) sizes[ns++]=atoi(argv[i]); }
  for(int k=0;k<ns;k++){ int n=sizes[k];
    char*s,*b,*s0,*b0;
    if(align){ void*p=NULL,*q=NULL; if(posix_memalign(&p,4096,n+soff)||posix_memalign(&q,4096,n+roff)) MPI_Abort(MPI_COMM_WORLD,1); s0=p; b0=same?s0:q; if(same) free(q); s=s0+soff; b=same?s:b0+roff; }
    else { s0=s=malloc(n); b0=b=same?s:malloc(n); }
    memset(s,1,n); memset(b,2,n);
    int it=2000; double v[7];
    for(int smp=-1;smp<7;smp++){
      MPI_Barrier(MPI_COMM_WORLD); double t0=MPI_Wtime();
      for(int i=0;i<it;i++){ if(r==0){MPI_Send(s,n,MPI_BYTE,1,0,MPI_COMM_WORLD);MPI_Recv(b,n,MPI_BYTE,1,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);} else {MPI_Recv(b,n,MPI_BYTE,0,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);MPI_Send(s,n,MPI_BYTE,0,0,MPI_COMM_WORLD);} }
      if(smp>=0) v[smp]=(MPI_Wtime()-t0)/it/2*1e6;
    }
    qsort(v,7,sizeof v[0],cmp);
    if(r==0) printf("pp2 same=%d size=%d median=%.3f min=%.3f\n",same,n,v[3],v[0]);
    free(s0); if(!same) free(b0);
  }
  MPI_Finalize(); return 0;
}
