! Ring over all ranks with `use mpi`: send/recv, MPI_STATUS_IGNORE, statuses, names,
! MPI_Wtime, MPI_Sizeof, strings in and out.
program ring
  use mpi
  implicit none
  integer :: ierr, rank, size, next, prev, token, count, rlen
  integer :: status(MPI_STATUS_SIZE)
  character(len=MPI_MAX_PROCESSOR_NAME) :: host
  character(len=MPI_MAX_OBJECT_NAME) :: cname
  double precision :: t0

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  t0 = MPI_Wtime()
  next = mod(rank + 1, size)
  prev = mod(rank + size - 1, size)
  if (rank == 0) then
    token = 42
    call MPI_Send(token, 1, MPI_INTEGER, next, 7, MPI_COMM_WORLD, ierr)
    call MPI_Recv(token, 1, MPI_INTEGER, prev, 7, MPI_COMM_WORLD, status, ierr)
    call MPI_Get_count(status, MPI_INTEGER, count, ierr)
    if (count /= 1 .or. status(MPI_SOURCE) /= prev .or. status(MPI_TAG) /= 7) then
      print *, 'bad status', status
      call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
    end if
    if (token /= 42 + size - 1) call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
    print '(a,i0)', 'ring: token ', token
  else
    call MPI_Recv(token, 1, MPI_INTEGER, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    token = token + 1
    call MPI_Send(token, 1, MPI_INTEGER, next, 7, MPI_COMM_WORLD, ierr)
  end if
  call MPI_Get_processor_name(host, rlen, ierr)
  if (rlen <= 0 .or. len_trim(host) /= rlen) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  call MPI_Comm_set_name(MPI_COMM_WORLD, 'my world   ', ierr)
  call MPI_Comm_get_name(MPI_COMM_WORLD, cname, rlen, ierr)
  if (cname /= 'my world' .or. rlen /= 8) then
    print *, 'bad name [', trim(cname), ']', rlen
    call MPI_Abort(MPI_COMM_WORLD, 4, ierr)
  end if
  if (MPI_Wtime() < t0 .or. MPI_Wtick() <= 0d0) call MPI_Abort(MPI_COMM_WORLD, 5, ierr)
  call MPI_Sizeof(t0, count, ierr)
  if (count /= 8) call MPI_Abort(MPI_COMM_WORLD, 6, ierr)
  call MPI_Sizeof(status, count, ierr)
  if (count /= 4) call MPI_Abort(MPI_COMM_WORLD, 7, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a)', 'ring: ok'
  call MPI_Finalize(ierr)
end program ring
