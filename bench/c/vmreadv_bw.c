/* process_vm_readv bandwidth: child owns an N-byte buffer, parent pulls it with
 * process_vm_readv into its own buffer, repeatedly. Also reports plain memcpy of
 * the same size in the same run for a ratio. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <signal.h>
#include <unistd.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  size_t n=argc>1?strtoull(argv[1],0,0):(4u<<20);
  int S=15; size_t iters=(512ul<<20)/n; if(!iters) iters=1;
  char *remote=aligned_alloc(4096,n); memset(remote,7,n);   /* inherited by child at same VA */
  char *local=aligned_alloc(4096,n); memset(local,1,n);
  int pfd[2]; pipe(pfd);
  pid_t p=fork();
  if(p==0){ /* child: touch its (CoW) copy so pages are private, then sleep */
    memset(remote,9,n); char c=1; write(pfd[1],&c,1); pause(); _exit(0);
  }
  char c; read(pfd[0],&c,1);
  double r[15], m[15];
  for(int s=0;s<S;s++){
    struct iovec l={local,n}, rv={remote,n};
    double t0=now();
    for(size_t i=0;i<iters;i++){ ssize_t k=process_vm_readv(p,&l,1,&rv,1,0); if(k!=(ssize_t)n){perror("pvr");kill(p,SIGKILL);waitpid(p,0,0);return 1;} }
    r[s]=(double)n*iters/(now()-t0)/1e9;
    if(local[0]!=9||local[n-1]!=9){printf("WARN: data mismatch\n");kill(p,SIGKILL);waitpid(p,0,0);return 1;}
    t0=now();
    for(size_t i=0;i<iters;i++){ memcpy(local,remote,n); __asm__ volatile(""::"r"(local):"memory"); }
    m[s]=(double)n*iters/(now()-t0)/1e9;
  }
  kill(p,SIGKILL); waitpid(p,0,0);
  qsort(r,S,sizeof(double),cmp); qsort(m,S,sizeof(double),cmp);
  printf("process_vm_readv size=%zu iters=%zu median=%.2f GB/s best=%.2f GB/s | memcpy same size median=%.2f GB/s\n",n,iters,r[S/2],r[S-1],m[S/2]);
  return 0;
}
