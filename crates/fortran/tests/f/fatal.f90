! An erroneous call without ierror under the default MPI_ERRORS_ARE_FATAL ends the job
! through the error handler (use mpi_f08: ierror is optional).
program fatal
  use mpi_f08
  implicit none
  integer :: np, x
  call MPI_Init()
  call MPI_Comm_size(MPI_COMM_WORLD, np)
  x = 1
  call MPI_Send(x, 1, MPI_INTEGER, np + 3, 0, MPI_COMM_WORLD)
  print '(a)', 'fatal: not reached'
  call MPI_Finalize()
end program fatal
