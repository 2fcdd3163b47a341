! The Fortran program the build-system clients build (`use mpi`), the counterpart of hello.c:
! each rank checks that it runs on oxmpi, a token goes around the ring, and rank 0 prints
!   hello: 2 ranks on oxmpi <version>, token 1 (expected 1)
! The program stops with a non-zero status if anything is wrong.
program hello
    use mpi
    implicit none
    character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: lib
    integer :: ierr, rank, nranks, length, token, next, prev, bad, all_bad, want, eol

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
    call MPI_Get_library_version(lib, length, ierr)
    eol = index(lib(1:length), achar(10))
    if (eol > 0) length = eol - 1
    bad = 0
    if (lib(1:5) /= 'oxmpi') then
        write (0, '(a,i0,3a)') 'hello: rank ', rank, " runs on '", lib(1:length), "', not oxmpi"
        bad = 1
    end if
    token = 0
    next = mod(rank + 1, nranks)
    prev = mod(rank + nranks - 1, nranks)
    if (nranks > 1) then
        if (rank == 0) then
            call MPI_Send(token, 1, MPI_INTEGER, next, 7, MPI_COMM_WORLD, ierr)
            call MPI_Recv(token, 1, MPI_INTEGER, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
        else
            call MPI_Recv(token, 1, MPI_INTEGER, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
            token = token + rank
            call MPI_Send(token, 1, MPI_INTEGER, next, 7, MPI_COMM_WORLD, ierr)
        end if
    end if
    call MPI_Allreduce(bad, all_bad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
    if (rank == 0) then
        want = nranks * (nranks - 1) / 2
        write (*, '(a,i0,3a,i0,a,i0,a)') 'hello: ', nranks, ' ranks on ', lib(1:length), &
            ', token ', token, ' (expected ', want, ')'
        if (token /= want) all_bad = 1
    end if
    call MPI_Finalize(ierr)
    if (all_bad /= 0) stop 1
end program hello
