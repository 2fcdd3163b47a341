! Parallel HDF5 from Fortran (Debian's MPICH-built HDF5 Fortran library): every rank
! writes its block of rows of a 2-d dataset with collective MPI-IO, then every rank reads
! the whole dataset back independently and checks it. Argument: the scratch directory.
program ph5_rows
  use hdf5
  use mpi
  implicit none
  integer, parameter :: ncols = 6, rows_per_rank = 4
  integer :: ierr, rank, np, hdferr, i, j, bad
  integer(hid_t) :: fapl, file, space, mem, dset, dxpl
  integer(hsize_t) :: dims(2), count(2), offset(2)
  integer, allocatable :: mine(:, :), all(:, :)
  character(len=512) :: dir

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  call get_command_argument(1, dir)
  call h5open_f(hdferr)

  ! Fortran order: the dataset is ncols x (rows_per_rank * np); each rank owns a slab.
  dims = [integer(hsize_t) :: ncols, rows_per_rank * np]
  allocate(mine(ncols, rows_per_rank), all(ncols, rows_per_rank * np))
  do j = 1, rows_per_rank
    do i = 1, ncols
      mine(i, j) = 1000 * rank + 10 * j + i
    end do
  end do

  call h5pcreate_f(H5P_FILE_ACCESS_F, fapl, hdferr)
  call h5pset_fapl_mpio_f(fapl, MPI_COMM_WORLD, MPI_INFO_NULL, hdferr)
  call h5fcreate_f(trim(dir) // '/rows.h5', H5F_ACC_TRUNC_F, file, hdferr, access_prp=fapl)
  call h5pclose_f(fapl, hdferr)
  call h5screate_simple_f(2, dims, space, hdferr)
  call h5dcreate_f(file, 'rows', H5T_NATIVE_INTEGER, space, dset, hdferr)
  count = [integer(hsize_t) :: ncols, rows_per_rank]
  offset = [integer(hsize_t) :: 0, rows_per_rank * rank]
  call h5sselect_hyperslab_f(space, H5S_SELECT_SET_F, offset, count, hdferr)
  call h5screate_simple_f(2, count, mem, hdferr)
  call h5pcreate_f(H5P_DATASET_XFER_F, dxpl, hdferr)
  call h5pset_dxpl_mpio_f(dxpl, H5FD_MPIO_COLLECTIVE_F, hdferr)
  call h5dwrite_f(dset, H5T_NATIVE_INTEGER, mine, count, hdferr, &
                  file_space_id=space, mem_space_id=mem, xfer_prp=dxpl)
  if (hdferr /= 0) call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  call h5pclose_f(dxpl, hdferr)
  call h5sclose_f(mem, hdferr)
  call h5sclose_f(space, hdferr)
  call h5dclose_f(dset, hdferr)
  call h5fclose_f(file, hdferr)
  if (rank == 0) print '(a)', 'ph5: collective write ok'

  call h5pcreate_f(H5P_FILE_ACCESS_F, fapl, hdferr)
  call h5pset_fapl_mpio_f(fapl, MPI_COMM_WORLD, MPI_INFO_NULL, hdferr)
  call h5fopen_f(trim(dir) // '/rows.h5', H5F_ACC_RDONLY_F, file, hdferr, access_prp=fapl)
  call h5pclose_f(fapl, hdferr)
  call h5dopen_f(file, 'rows', dset, hdferr)
  call h5dread_f(dset, H5T_NATIVE_INTEGER, all, dims, hdferr)
  if (hdferr /= 0) call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  bad = 0
  do j = 1, rows_per_rank * np
    do i = 1, ncols
      if (all(i, j) /= 1000 * ((j - 1) / rows_per_rank) + 10 * (mod(j - 1, rows_per_rank) + 1) + i) then
        bad = bad + 1
      end if
    end do
  end do
  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (bad /= 0) then
    if (rank == 0) print '(a,i0)', 'ph5: wrong values: ', bad
    call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  end if
  call h5dclose_f(dset, hdferr)
  call h5fclose_f(file, hdferr)
  call h5close_f(hdferr)
  if (rank == 0) print '(a)', 'ph5: read back ok'
  call MPI_Finalize(ierr)
end program ph5_rows
