//! The MPI-1 names that MPI 3.0 removed or deprecated but MPICH's `libmpi.so.12` still
//! exports, so that binaries built years ago load and run: each forwards to the function
//! that replaced it (`MPI_Attr_get` is `MPI_Comm_get_attr`, `MPI_Type_struct` is
//! `MPI_Type_create_struct`, ...). Errors are raised by the replacement, through the same
//! error handler, and name it.

use crate::attrs::{CopyFn, DeleteFn};
use crate::comm::{
    PMPI_Comm_create_keyval, PMPI_Comm_delete_attr, PMPI_Comm_free_keyval, PMPI_Comm_get_attr,
    PMPI_Comm_set_attr,
};
use crate::consts::MPI_SUCCESS;
use crate::datatype::{
    PMPI_Type_create_hindexed, PMPI_Type_create_hvector, PMPI_Type_create_struct,
    PMPI_Type_get_extent,
};
use crate::errors::{
    CommErrFn, PMPI_Comm_create_errhandler, PMPI_Comm_get_errhandler, PMPI_Comm_set_errhandler,
};
use std::ffi::{c_int, c_void};

/// Define `PMPI_<old>` (with its weak `MPI_<old>` alias) as a call of its replacement.
macro_rules! legacy {
    ($(#[$meta:meta])* fn $pname:ident / $name:literal ($($arg:ident : $ty:ty),*) => $body:expr) => {
        $(#[$meta])*
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($arg: $ty),*) -> c_int {
            // SAFETY: the arguments are passed on unchanged to the replacement, whose
            // contract (the MPI standard's) is the same as the old function's.
            unsafe { $body }
        }
        mpi_alias!($pname / $name);
    };
}

legacy! {
    /// `MPI_Attr_get` (deprecated): `MPI_Comm_get_attr`.
    fn PMPI_Attr_get / "MPI_Attr_get" (comm: c_int, keyval: c_int, attribute_val: *mut *mut c_void, flag: *mut c_int)
        => PMPI_Comm_get_attr(comm, keyval, attribute_val, flag)
}

legacy! {
    /// `MPI_Attr_put` (deprecated): `MPI_Comm_set_attr`.
    fn PMPI_Attr_put / "MPI_Attr_put" (comm: c_int, keyval: c_int, attribute_val: *mut c_void)
        => PMPI_Comm_set_attr(comm, keyval, attribute_val)
}

legacy! {
    /// `MPI_Attr_delete` (deprecated): `MPI_Comm_delete_attr`.
    fn PMPI_Attr_delete / "MPI_Attr_delete" (comm: c_int, keyval: c_int)
        => PMPI_Comm_delete_attr(comm, keyval)
}

legacy! {
    /// `MPI_Keyval_create` (deprecated): `MPI_Comm_create_keyval`.
    fn PMPI_Keyval_create / "MPI_Keyval_create" (copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void)
        => PMPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state)
}

legacy! {
    /// `MPI_Keyval_free` (deprecated): `MPI_Comm_free_keyval`.
    fn PMPI_Keyval_free / "MPI_Keyval_free" (keyval: *mut c_int)
        => PMPI_Comm_free_keyval(keyval)
}

legacy! {
    /// `MPI_Address` (removed in MPI 3.0): `MPI_Get_address`.
    fn PMPI_Address / "MPI_Address" (location: *const c_void, address: *mut isize)
        => crate::misc::PMPI_Get_address(location, address)
}

legacy! {
    /// `MPI_Type_hvector` (removed in MPI 3.0): `MPI_Type_create_hvector`.
    fn PMPI_Type_hvector / "MPI_Type_hvector" (count: c_int, blocklength: c_int, stride: isize, oldtype: c_int, newtype: *mut c_int)
        => PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype)
}

legacy! {
    /// `MPI_Type_hindexed` (removed in MPI 3.0): `MPI_Type_create_hindexed`.
    fn PMPI_Type_hindexed / "MPI_Type_hindexed" (count: c_int, blocklens: *const c_int, displs: *const isize, oldtype: c_int, newtype: *mut c_int)
        => PMPI_Type_create_hindexed(count, blocklens, displs, oldtype, newtype)
}

legacy! {
    /// `MPI_Type_struct` (removed in MPI 3.0): `MPI_Type_create_struct`.
    fn PMPI_Type_struct / "MPI_Type_struct" (count: c_int, blocklens: *const c_int, displs: *const isize, types: *const c_int, newtype: *mut c_int)
        => PMPI_Type_create_struct(count, blocklens, displs, types, newtype)
}

/// `MPI_Type_get_extent` into locals: its return code, lower bound and extent.
unsafe fn extent(datatype: c_int) -> (c_int, isize, isize) {
    let (mut lb, mut ext) = (0isize, 0isize);
    // SAFETY: two valid output pointers.
    let rc = unsafe { PMPI_Type_get_extent(datatype, &mut lb, &mut ext) };
    (rc, lb, ext)
}

/// Write `v` to `p` when the extent query succeeded and `p` is not NULL; a NULL `p` is
/// passed to `MPI_Type_get_extent` for its error.
unsafe fn extent_out(
    datatype: c_int,
    p: *mut isize,
    pick: impl Fn(isize, isize) -> isize,
) -> c_int {
    if p.is_null() {
        // SAFETY: the replacement reports the NULL output argument.
        return unsafe { PMPI_Type_get_extent(datatype, p, p) };
    }
    // SAFETY: as `extent`.
    let (rc, lb, ext) = unsafe { extent(datatype) };
    if rc == MPI_SUCCESS {
        // SAFETY: `p` is a non-NULL output pointer from the caller.
        unsafe { p.write_unaligned(pick(lb, ext)) };
    }
    rc
}

legacy! {
    /// `MPI_Type_extent` (removed in MPI 3.0): the extent of `MPI_Type_get_extent`.
    fn PMPI_Type_extent / "MPI_Type_extent" (datatype: c_int, extent: *mut isize)
        => extent_out(datatype, extent, |_, e| e)
}

legacy! {
    /// `MPI_Type_lb` (removed in MPI 3.0): the lower bound of `MPI_Type_get_extent`.
    fn PMPI_Type_lb / "MPI_Type_lb" (datatype: c_int, displacement: *mut isize)
        => extent_out(datatype, displacement, |lb, _| lb)
}

legacy! {
    /// `MPI_Type_ub` (removed in MPI 3.0): lower bound plus extent.
    fn PMPI_Type_ub / "MPI_Type_ub" (datatype: c_int, displacement: *mut isize)
        => extent_out(datatype, displacement, |lb, e| lb + e)
}

legacy! {
    /// `MPI_Errhandler_create` (removed in MPI 3.0): `MPI_Comm_create_errhandler`.
    fn PMPI_Errhandler_create / "MPI_Errhandler_create" (function: Option<CommErrFn>, errhandler: *mut c_int)
        => PMPI_Comm_create_errhandler(function, errhandler)
}

legacy! {
    /// `MPI_Errhandler_get` (removed in MPI 3.0): `MPI_Comm_get_errhandler`.
    fn PMPI_Errhandler_get / "MPI_Errhandler_get" (comm: c_int, errhandler: *mut c_int)
        => PMPI_Comm_get_errhandler(comm, errhandler)
}

legacy! {
    /// `MPI_Errhandler_set` (removed in MPI 3.0): `MPI_Comm_set_errhandler`.
    fn PMPI_Errhandler_set / "MPI_Errhandler_set" (comm: c_int, errhandler: c_int)
        => PMPI_Comm_set_errhandler(comm, errhandler)
}
