! Callbacks written in Fortran: a user reduction, a communicator error handler,
! attribute copy/delete functions (communicators, datatypes), generalized request
! callbacks; error classes in ierror; predefined attributes.
module cb_mod
  implicit none
  integer :: handler_calls = 0, handler_code = 0
  integer :: copies = 0, deletes = 0
contains
  subroutine absmax(invec, inoutvec, len, datatype)
    integer :: len, datatype
    integer :: invec(len), inoutvec(len)
    integer :: i
    do i = 1, len
      inoutvec(i) = max(abs(invec(i)), abs(inoutvec(i)))
    end do
  end subroutine absmax

  subroutine on_error(comm, code)
    integer :: comm, code
    handler_calls = handler_calls + 1
    handler_code = code
  end subroutine on_error

  subroutine copy_fn(oldcomm, keyval, extra, attr_in, attr_out, flag, ierr)
    use mpi
    integer :: oldcomm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: extra, attr_in, attr_out
    logical :: flag
    copies = copies + 1
    attr_out = attr_in + extra
    flag = .true.
    ierr = MPI_SUCCESS
  end subroutine copy_fn

  subroutine query_fn(extra, status, ierr)
    use mpi
    integer(kind=MPI_ADDRESS_KIND) :: extra
    integer :: status(MPI_STATUS_SIZE), ierr
    call MPI_Status_set_elements(status, MPI_INTEGER, int(extra), ierr)
    call MPI_Status_set_cancelled(status, .false., ierr)
    status(MPI_SOURCE) = MPI_UNDEFINED
    status(MPI_TAG) = MPI_UNDEFINED
    ierr = MPI_SUCCESS
  end subroutine query_fn

  subroutine free_fn(extra, ierr)
    use mpi
    integer(kind=MPI_ADDRESS_KIND) :: extra
    integer :: ierr
    deletes = deletes + 100
    ierr = MPI_SUCCESS
  end subroutine free_fn

  subroutine cancel_fn(extra, complete, ierr)
    use mpi
    integer(kind=MPI_ADDRESS_KIND) :: extra
    logical :: complete
    integer :: ierr
    ierr = MPI_SUCCESS
  end subroutine cancel_fn

  subroutine delete_fn(comm, keyval, attr, extra, ierr)
    use mpi
    integer :: comm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: attr, extra
    deletes = deletes + 1
    ierr = MPI_SUCCESS
  end subroutine delete_fn
end module cb_mod

program callbacks
  use mpi
  use cb_mod
  implicit none
  integer :: ierr, rank, np, op, eh, key, dup, cls, rlen
  integer :: v(2), buf(1), status(MPI_STATUS_SIZE)
  integer(kind=MPI_ADDRESS_KIND) :: val, extra
  logical :: flag
  character(len=MPI_MAX_ERROR_STRING) :: msg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)

  ! User operation.
  call MPI_Op_create(absmax, .true., op, ierr)
  v(1) = -rank * 3
  v(2) = rank
  call MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
  if (v(1) /= 3 * (np - 1) .or. v(2) /= np - 1) then
    print *, 'user op bad', v
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  call MPI_Op_free(op, ierr)
  if (op /= MPI_OP_NULL) call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  if (rank == 0) print '(a)', 'user op: ok'

  ! Errors returned in ierror.
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Send(buf, 1, MPI_INTEGER, np + 5, 0, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(ierr, cls, ierr)
  if (cls /= MPI_ERR_RANK) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  call MPI_Send(buf, -1, MPI_INTEGER, 0, 0, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(ierr, cls, ierr)
  if (cls /= MPI_ERR_COUNT) call MPI_Abort(MPI_COMM_WORLD, 4, ierr)
  call MPI_Error_string(MPI_ERR_TAG, msg, rlen, ierr)
  if (rlen <= 0 .or. len_trim(msg) /= rlen) call MPI_Abort(MPI_COMM_WORLD, 5, ierr)
  if (rank == 0) print '(a)', 'ierror classes: ok'

  ! An error handler written in Fortran.
  call MPI_Comm_create_errhandler(on_error, eh, ierr)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh, ierr)
  call MPI_Send(buf, 1, MPI_INTEGER, 0, -5, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(handler_code, cls, ierr)
  if (handler_calls /= 1 .or. cls /= MPI_ERR_TAG) then
    print *, 'handler', handler_calls, handler_code
    call MPI_Abort(MPI_COMM_WORLD, 6, ierr)
  end if
  call MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER, ierr)
  if (handler_calls /= 2 .or. handler_code /= MPI_ERR_OTHER) call MPI_Abort(MPI_COMM_WORLD, 7, ierr)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, ierr)
  call MPI_Errhandler_free(eh, ierr)
  if (rank == 0) print '(a)', 'error handler: ok'

  ! Attributes with Fortran copy and delete callbacks.
  extra = 100
  call MPI_Comm_create_keyval(copy_fn, delete_fn, key, extra, ierr)
  val = 5
  call MPI_Comm_set_attr(MPI_COMM_WORLD, key, val, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Comm_get_attr(dup, key, val, flag, ierr)
  if (.not. flag .or. val /= 105 .or. copies /= 1) then
    print *, 'attr', flag, val, copies
    call MPI_Abort(MPI_COMM_WORLD, 8, ierr)
  end if
  call MPI_Comm_free(dup, ierr)
  if (deletes /= 1) call MPI_Abort(MPI_COMM_WORLD, 9, ierr)
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, key, ierr)
  if (deletes /= 2) call MPI_Abort(MPI_COMM_WORLD, 10, ierr)
  call MPI_Comm_free_keyval(key, ierr)
  ! Predefined copy function.
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, key, extra, ierr)
  val = 77
  call MPI_Comm_set_attr(MPI_COMM_WORLD, key, val, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Comm_get_attr(dup, key, val, flag, ierr)
  if (.not. flag .or. val /= 77) call MPI_Abort(MPI_COMM_WORLD, 11, ierr)
  call MPI_Comm_free(dup, ierr)
  ! Predefined attribute: the value, not a pointer.
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, val, flag, ierr)
  if (.not. flag .or. val < 32767) then
    print *, 'tag_ub', flag, val
    call MPI_Abort(MPI_COMM_WORLD, 12, ierr)
  end if
  ! Datatype attributes with the Fortran callbacks.
  copies = 0
  deletes = 0
  call MPI_Type_create_keyval(copy_fn, delete_fn, key, extra, ierr)
  val = 1
  call MPI_Type_contiguous(2, MPI_INTEGER, dup, ierr)
  call MPI_Type_set_attr(dup, key, val, ierr)
  call MPI_Type_get_attr(dup, key, val, flag, ierr)
  if (.not. flag .or. val /= 1) call MPI_Abort(MPI_COMM_WORLD, 13, ierr)
  call MPI_Type_free(dup, ierr)
  if (deletes /= 1) call MPI_Abort(MPI_COMM_WORLD, 14, ierr)
  call MPI_Type_free_keyval(key, ierr)
  if (rank == 0) print '(a)', 'attributes: ok'

  ! A generalized request whose callbacks are written in Fortran.
  extra = 3
  deletes = 0
  call MPI_Grequest_start(query_fn, free_fn, cancel_fn, extra, v(1), ierr)
  call MPI_Grequest_complete(v(1), ierr)
  call MPI_Wait(v(1), status, ierr)
  call MPI_Get_count(status, MPI_INTEGER, v(2), ierr)
  if (v(2) /= 3 .or. v(1) /= MPI_REQUEST_NULL .or. deletes /= 100) then
    print *, 'grequest', v, deletes
    call MPI_Abort(MPI_COMM_WORLD, 15, ierr)
  end if
  if (rank == 0) print '(a)', 'generalized request: ok'
  if (rank == 0) print '(a)', 'callbacks: ok'
  call MPI_Finalize(ierr)
end program callbacks
