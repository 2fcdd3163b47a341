! `use mpi_f08` with a non-contiguous array section as a buffer. Built with our mpifort,
! the module's CONTIGUOUS buffers make the compiler pass a contiguous copy, which a
! blocking call may use. Built against MPICH's module (MPI_SUBARRAYS_SUPPORTED .TRUE.
! there), the section itself reaches our library, which refuses it with MPI_ERR_BUFFER
! instead of reading the wrong elements.
program f08_sections
  use mpi_f08
  implicit none
  integer :: x(10), y(5), i, rank, ierr, cls

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  x = [(i, i = 1, 10)]
  y = 0
  call MPI_Sendrecv(x(1:9:2), 5, MPI_INTEGER, rank, 3, y, 5, MPI_INTEGER, rank, 3, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  if (ierr == MPI_SUCCESS) then
    if (any(y /= [1, 3, 5, 7, 9])) error stop 1
    if (rank == 0) print '(a)', 'sections: copied'
  else
    call MPI_Error_class(ierr, cls)
    if (cls /= MPI_ERR_BUFFER) error stop 2
    if (rank == 0) print '(a)', 'sections: refused'
  end if
  call MPI_Finalize()
end program f08_sections
