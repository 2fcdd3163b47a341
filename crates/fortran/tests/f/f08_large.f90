! `use mpi_f08`: the large-count forms (MPI_X_c in C) through the generic names, chosen by
! INTEGER(KIND=MPI_COUNT_KIND) counts; the default-INTEGER forms still resolve next to them.
program f08_large
  use mpi_f08
  implicit none
  integer(kind=MPI_COUNT_KIND) :: n, cnt, sz, ext_cnt
  integer :: rank, np, ierr, small, i
  integer :: x(6), y(6)
  double precision :: d(5)
  type(MPI_Status) :: st
  type(MPI_Datatype) :: pair

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, np)

  ! Point to point with a MPI_COUNT_KIND count, MPI_Get_count with a MPI_COUNT_KIND result.
  n = 6_MPI_COUNT_KIND
  if (rank == 0) then
    x = [(10 * i, i = 1, 6)]
    call MPI_Send(x, n, MPI_INTEGER, 1, 7, MPI_COMM_WORLD, ierr)
    if (ierr /= MPI_SUCCESS) error stop 1
  else if (rank == 1) then
    y = -1
    call MPI_Recv(y, n, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, st)
    call MPI_Get_count(st, MPI_INTEGER, cnt)
    if (cnt /= 6_MPI_COUNT_KIND .or. y(6) /= 60 .or. st%MPI_TAG /= 7) error stop 2
    call MPI_Get_count(st, MPI_INTEGER, small)
    if (small /= 6) error stop 3
    call MPI_Get_elements(st, MPI_INTEGER, cnt)
    if (cnt /= 6_MPI_COUNT_KIND) error stop 4
  end if
  if (rank == 0) print '(a)', 'f08 large p2p: ok'

  ! Collectives.
  d = rank
  if (rank == 0) d = [1d0, 2d0, 3d0, 4d0, 5d0]
  call MPI_Bcast(d, 5_MPI_COUNT_KIND, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD)
  if (d(5) /= 5d0) error stop 5
  x = rank + 1
  call MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS .or. x(1) /= np * (np + 1) / 2) error stop 6
  call MPI_Allreduce(x, y, 6_MPI_COUNT_KIND, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
  if (y(6) /= np * (np + 1) / 2) error stop 7
  if (rank == 0) print '(a)', 'f08 large collectives: ok'

  ! Datatypes: a derived type built with a MPI_COUNT_KIND count, its size both ways.
  call MPI_Type_contiguous(2_MPI_COUNT_KIND, MPI_DOUBLE_PRECISION, pair)
  call MPI_Type_commit(pair)
  call MPI_Type_size(pair, sz)
  call MPI_Type_size(pair, small)
  if (sz /= 16_MPI_COUNT_KIND .or. small /= 16) error stop 8
  call MPI_Type_size(MPI_INTEGER, ext_cnt)
  if (ext_cnt /= 4_MPI_COUNT_KIND) error stop 9
  call MPI_Type_free(pair)
  if (rank == 0) print '(a)', 'f08 large datatypes: ok'
  call MPI_Finalize()
end program f08_large
