! `use mpi_f08`: typed handles and comparisons, TYPE(MPI_Status), optional ierror,
! assumed-type/assumed-rank buffers (scalars, arrays, sections), ASYNCHRONOUS nonblocking
! buffers with MPI_F_sync_reg, MPI_IN_PLACE, MPI_STATUS(ES)_IGNORE, a user operation and
! an error handler written against the f08 interfaces, status conversion.
module f08_cb
  use mpi_f08
  use, intrinsic :: iso_c_binding
  implicit none
  integer :: handled = 0
contains
  subroutine prod(invec, inoutvec, len, datatype)
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    integer, pointer :: a(:), b(:)
    call c_f_pointer(invec, a, [len])
    call c_f_pointer(inoutvec, b, [len])
    b = a * b
  end subroutine prod

  subroutine on_error(comm, code)
    type(MPI_Comm) :: comm
    integer :: code
    handled = code
  end subroutine on_error
end module f08_cb

program f08
  use mpi_f08
  use f08_cb
  implicit none
  type(MPI_Comm) :: comm, dup
  type(MPI_Status) :: st, sts(2)
  type(MPI_Request) :: reqs(2)
  type(MPI_Op) :: op
  type(MPI_Errhandler) :: eh
  integer :: rank, np, ierr, x, cnt, i, f_status(MPI_STATUS_SIZE)
  integer, asynchronous :: sbuf(8), rbuf(8)
  double precision :: m(4, 3)
  integer :: v(3)

  call MPI_Init()
  comm = MPI_COMM_WORLD
  call MPI_Comm_rank(comm, rank)
  call MPI_Comm_size(comm, np, ierr)
  if (ierr /= MPI_SUCCESS .or. .not. (comm == MPI_COMM_WORLD)) error stop 1

  ! Scalars and statuses.
  if (rank == 0) then
    x = 99
    call MPI_Send(x, 1, MPI_INTEGER, 1, 5, comm)
  else if (rank == 1) then
    call MPI_Recv(x, 1, MPI_INTEGER, 0, 5, comm, st)
    call MPI_Get_count(st, MPI_INTEGER, cnt)
    if (x /= 99 .or. st%MPI_SOURCE /= 0 .or. st%MPI_TAG /= 5 .or. cnt /= 1) error stop 2
    call MPI_Status_f082f(st, f_status)
    if (f_status(MPI_SOURCE) /= 0 .or. f_status(MPI_TAG) /= 5) error stop 3
  end if

  ! A column of a 2-d array (contiguous section) and a whole 2-d array.
  m = rank
  if (rank == 0) m(:, 2) = [1d0, 2d0, 3d0, 4d0]
  call MPI_Bcast(m(:, 2), 4, MPI_DOUBLE_PRECISION, 0, comm)
  if (m(3, 2) /= 3d0) error stop 4
  call MPI_Allreduce(MPI_IN_PLACE, m, 12, MPI_DOUBLE_PRECISION, MPI_SUM, comm)
  if (m(1, 1) /= dble(np * (np - 1) / 2)) error stop 5

  ! Nonblocking ring with ASYNCHRONOUS buffers.
  sbuf = [(rank * 10 + i, i = 1, 8)]
  call MPI_Irecv(rbuf, 8, MPI_INTEGER, mod(rank + np - 1, np), 1, comm, reqs(1))
  call MPI_Isend(sbuf, 8, MPI_INTEGER, mod(rank + 1, np), 1, comm, reqs(2))
  call MPI_Waitall(2, reqs, sts)
  if (MPI_ASYNC_PROTECTS_NONBLOCKING) continue
  call MPI_F_sync_reg(rbuf)
  if (rbuf(8) /= mod(rank + np - 1, np) * 10 + 8) error stop 6
  if (sts(1)%MPI_SOURCE /= mod(rank + np - 1, np)) error stop 7
  if (reqs(1) /= MPI_REQUEST_NULL) error stop 8
  call MPI_Irecv(rbuf, 8, MPI_INTEGER, mod(rank + np - 1, np), 2, comm, reqs(1))
  call MPI_Isend(sbuf, 8, MPI_INTEGER, mod(rank + 1, np), 2, comm, reqs(2))
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
  if (rank == 0) print '(a)', 'f08 p2p: ok'

  ! User operation with the f08 callback interface.
  call MPI_Op_create(prod, .true., op)
  v = [2, rank + 1, 1]
  call MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_INTEGER, op, comm)
  if (v(1) /= 2**np .or. v(3) /= 1) error stop 9
  call MPI_Op_free(op)
  if (op /= MPI_OP_NULL) error stop 10

  ! Errors: ierror receives the class; without ierror the handler runs.
  call MPI_Comm_dup(comm, dup)
  call MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN)
  call MPI_Send(x, 1, MPI_INTEGER, np, 0, dup, ierr)
  if (ierr == MPI_SUCCESS) error stop 11
  call MPI_Comm_create_errhandler(on_error, eh)
  call MPI_Comm_set_errhandler(dup, eh)
  call MPI_Send(x, 1, MPI_INTEGER, 0, -3, dup)
  call MPI_Error_class(handled, cnt)
  if (cnt /= MPI_ERR_TAG) error stop 12
  call MPI_Errhandler_free(eh)
  call MPI_Comm_free(dup)
  if (dup /= MPI_COMM_NULL) error stop 13
  if (rank == 0) print '(a)', 'f08 callbacks: ok'
  if (MPI_Wtime() <= 0d0) error stop 14
  call MPI_Sizeof(m, cnt)
  if (cnt /= 8) error stop 15
  call MPI_Barrier(comm)
  if (rank == 0) print '(a)', 'f08: ok'
  call MPI_Finalize()
end program f08
