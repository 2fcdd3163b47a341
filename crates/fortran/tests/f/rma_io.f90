! One-sided communication and MPI-IO from Fortran; a file error handler in Fortran.
module io_mod
  implicit none
  integer :: file_errors = 0
contains
  subroutine on_file_error(fh, code)
    integer :: fh, code
    file_errors = file_errors + 1
  end subroutine on_file_error
end module io_mod

program rma_io
  use mpi
  use io_mod
  implicit none
  integer :: ierr, rank, np, win, fh, i, eh, cls
  integer :: wbuf(4), got(4)
  integer(kind=MPI_ADDRESS_KIND) :: wsize, disp
  integer(kind=MPI_OFFSET_KIND) :: off, fsize
  integer :: status(MPI_STATUS_SIZE)
  character(len=512) :: path

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)

  ! RMA: every rank puts its rank into slot 1 of its right neighbour's window.
  wbuf = -1
  wsize = 4 * 4
  call MPI_Win_create(wbuf, wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  disp = 0
  call MPI_Put(rank, 1, MPI_INTEGER, mod(rank + 1, np), disp, 1, MPI_INTEGER, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  if (wbuf(1) /= mod(rank + np - 1, np)) then
    print *, 'put', wbuf
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  call MPI_Get(got, 1, MPI_INTEGER, mod(rank + 1, np), disp, 1, MPI_INTEGER, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  if (got(1) /= rank) call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  call MPI_Win_free(win, ierr)
  if (rank == 0) print '(a)', 'rma: ok'

  ! MPI-IO: each rank writes 4 integers at its offset, then reads its neighbour's.
  call get_command_argument(1, path)
  path = trim(path) // '/fortran-io.dat'
  call MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE + MPI_MODE_RDWR, &
                     MPI_INFO_NULL, fh, ierr)
  if (ierr /= MPI_SUCCESS) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  do i = 1, 4
    wbuf(i) = rank * 100 + i
  end do
  off = rank * 16
  call MPI_File_write_at(fh, off, wbuf, 4, MPI_INTEGER, status, ierr)
  call MPI_File_sync(fh, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  off = mod(rank + 1, np) * 16
  call MPI_File_read_at(fh, off, got, 4, MPI_INTEGER, MPI_STATUS_IGNORE, ierr)
  if (got(4) /= mod(rank + 1, np) * 100 + 4) then
    print *, 'io read', got
    call MPI_Abort(MPI_COMM_WORLD, 4, ierr)
  end if
  call MPI_File_get_size(fh, fsize, ierr)
  if (fsize /= 16 * np) call MPI_Abort(MPI_COMM_WORLD, 5, ierr)
  call MPI_File_close(fh, ierr)
  if (fh /= MPI_FILE_NULL) call MPI_Abort(MPI_COMM_WORLD, 6, ierr)
  if (rank == 0) print '(a)', 'io: ok'

  ! A file error handler written in Fortran (MPI_FILE_NULL's handler serves open).
  call MPI_File_create_errhandler(on_file_error, eh, ierr)
  call MPI_File_set_errhandler(MPI_FILE_NULL, eh, ierr)
  call MPI_File_open(MPI_COMM_SELF, trim(path) // '.missing/x', MPI_MODE_RDONLY, &
                     MPI_INFO_NULL, fh, ierr)
  call MPI_Error_class(ierr, cls, ierr)
  if (file_errors /= 1 .or. cls /= MPI_ERR_NO_SUCH_FILE) call MPI_Abort(MPI_COMM_WORLD, 7, ierr)
  call MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN, ierr)
  call MPI_Errhandler_free(eh, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) call MPI_File_delete(path, MPI_INFO_NULL, ierr)
  if (rank == 0) print '(a)', 'rma_io: ok'
  call MPI_Finalize(ierr)
end program rma_io
