//! MPI-IO (MPI-3.1 chapter 13) over POSIX files.
//!
//! * A file handle (`MPI_File`, a pointer in the MPICH ABI) is a small non-zero integer
//!   naming an entry of this module's own table; `MPI_File_c2f` is that integer.
//! * `MPI_File_open` duplicates the communicator (the file's collective traffic never
//!   mixes with the user's), opens the file on rank 0 first (so that `MPI_MODE_CREATE |
//!   MPI_MODE_EXCL` has one winner) and then on the others; a failure anywhere fails the
//!   open everywhere.
//! * Data moves with `pread`/`pwrite` through the file view (`view::ViewMap`): user
//!   buffers are packed/unpacked with the datatype engine, view positions become file
//!   segments (an independent read of several segments reads their range at once:
//!   `access::sieve_range`). Views take the `"native"` (also as `"internal"`) and `"external32"` data
//!   representations (external32: the data converted by `external`, for datatypes whose
//!   external32 size is their native size) and those registered with
//!   `MPI_Register_datarep(_c)` (`datarep`: the user's conversion callbacks, for
//!   representations that keep each predefined type's size).
//! * The shared file pointer is a counter held by rank 0 of the file's group
//!   (`crate::rma::Counter`: the ranks of rank 0's node update it directly, ranks on other
//!   nodes with messages served by rank 0's one-sided progress thread), so ranks that share
//!   only the file system agree on it; a file opened by one process keeps it in local
//!   memory. Atomic mode takes POSIX record locks on the byte ranges it touches (across
//!   nodes as far as the file system honours them).
//! * Collective reads and writes (`_all`, `_at_all`, ordered; blocking, nonblocking and
//!   split) run in two phases (`two_phase`, the `fcoll` framework): one aggregator per node
//!   accesses a contiguous domain of the file in large blocks for everyone; atomic mode and
//!   `fcoll=^two_phase` keep independent I/O. The other collective calls are independent
//!   I/O plus the synchronisation their semantics need (seeks of the shared pointer, size
//!   changes, close); nonblocking calls complete at once and return a completed request;
//!   split collectives run at `_begin` and hand their status over at `_end`.
//! * Errors go through the file's error handler (`MPI_ERRORS_RETURN` by default); errors
//!   of calls without a file (open, delete) through the handler of `MPI_FILE_NULL`.
//!
//! Layout: this file holds the entry points (`PMPI_File_*`) and the error routing to the
//! file's handler (`OnFile`); `file` the handle table, the file object and opening;
//! `view` the file view; `datarep` the data representations; `access` reads and writes through it; `sharedfp` the shared file
//! pointer; `collective` the collectives on the file's private communicator (through
//! `comm::Internal`, never the exported `MPI_*` functions); `two_phase` collective access.

mod access;
mod collective;
mod datarep;
mod file;
mod sharedfp;
mod two_phase;
pub(crate) mod view;

use crate::consts::*;
use crate::datatype::Datatype;
use crate::errors::{CommErrFn, ErrAction, UserErrhandler};
use crate::ffi::{out, ErrorOwner, MpiError, MpiResult};
use crate::request::MpiStatus;
use crate::state::{lock, Group, Info};
use access::{
    access, access_all, check_no_split, completed_request, not_sequential, seek_target,
    split_begin, split_end, write_st, At,
};
use collective::{allgather_i64, barrier, bcast_i64, internal};
use file::{
    action_of, check_amode, files, free_comm, get, handle_behind, info_entries, merge_info,
    open_on, os_class, os_err, path_arg, FileH, View,
};
pub use file::{file_c2f, file_f2c};
use std::ffi::{c_char, c_int, c_void};
use std::os::fd::AsFd;
use std::sync::Arc;
use view::ViewMap;

/// Verbose output of the MPI-IO component (`io_base_verbose`).
static IO: oxmpi_base::output::Stream = oxmpi_base::output::Stream::new("io");

/// `MPI_DISPLACEMENT_CURRENT` of `mpi.h` (for `MPI_File_set_view` in sequential mode).
const MPI_DISPLACEMENT_CURRENT: i64 = -54278278;

/// Errors of file calls go to the file's error handler (of `MPI_FILE_NULL` when the
/// handle, a `usize`, is not an open file).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OnFile(pub usize);

impl ErrorOwner for OnFile {
    fn raise(&self, func: &str, err: &MpiError) -> c_int {
        let mut h = self.0 as FileH;
        // A user `MPI_File_errhandler_function` gets a pointer to an `MPI_File`; the
        // stored type names the first parameter `int*`, which is all the C calling
        // convention sees of it.
        let handle = (&mut h as *mut FileH).cast::<c_int>();
        crate::errors::act(
            func,
            err,
            action_of(self.0),
            handle,
            "the file error handler",
        )
    }
}

// ---- open, close, delete ----

mpi_fn! {
    /// `MPI_File_open`.
    fn PMPI_File_open / "MPI_File_open" [OnFile(0)] (comm: c_int, filename: *const c_char, amode: c_int, info: c_int, fh: *mut FileH) {
        lock().comm(comm)?;
        crate::intercomm::require_intra(comm, "MPI_File_open")?;
        if fh.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL pointer passed for fh");
        }
        let path = path_arg(filename)?;
        check_amode(amode)?;
        let info = info_entries(info)?;
        let dup = crate::comm::dup_context(comm).map_err(internal("MPI_Comm_dup"))?;
        let obj = match open_on(dup, path, amode, info) {
            Ok(o) => o,
            Err(e) => {
                free_comm(dup);
                return Err(e);
            }
        };
        let id = {
            let mut t = files();
            let id = t.next;
            t.next += 1;
            t.open.insert(id, Arc::new(obj));
            id
        };
        out(fh, id as FileH, "fh")
    }
}

mpi_fn! {
    /// `MPI_File_close`.
    fn PMPI_File_close / "MPI_File_close" [OnFile(handle_behind(fh))] (fh: *mut FileH) {
        let h = crate::ffi::inp(fh, "fh")?;
        let f = get(h)?;
        if f.state().split.is_some() {
            mpi_bail!(MPI_ERR_OTHER, "MPI_File_close with a split collective still active");
        }
        barrier(f.comm)?;
        f.shared.free()?;
        files().open.remove(&(h as usize));
        free_comm(f.comm);
        out(fh, std::ptr::null_mut(), "fh")?;
        if f.amode & MPI_MODE_DELETE_ON_CLOSE != 0 && f.rank == 0 {
            std::fs::remove_file(&f.path).map_err(|e| os_err(e, f.path.display()))?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_delete`.
    fn PMPI_File_delete / "MPI_File_delete" [OnFile(0)] (filename: *const c_char, info: c_int) {
        let path = path_arg(filename)?;
        info_entries(info)?;
        std::fs::remove_file(&path).map_err(|e| os_err(e, path.display()))
    }
}

// ---- error handlers ----

mpi_fn! {
    /// `MPI_File_create_errhandler`.
    fn PMPI_File_create_errhandler / "MPI_File_create_errhandler" [OnFile(0)] (func: Option<CommErrFn>, errhandler: *mut c_int) {
        let Some(func) = func else { mpi_bail!(MPI_ERR_ARG, "NULL error handler function") };
        let h = lock().errhandlers.insert(UserErrhandler { func, refs: 1 });
        out(errhandler, h, "errhandler")
    }
}

mpi_fn! {
    /// `MPI_File_set_errhandler` (`MPI_FILE_NULL`: the handler of failing opens/deletes).
    fn PMPI_File_set_errhandler / "MPI_File_set_errhandler" [OnFile(file as usize)] (file: FileH, errhandler: c_int) {
        let action = lock().errhandler_action(errhandler)?;
        if file.is_null() {
            let mut t = files();
            t.null_errh = errhandler;
            t.null_action = action;
            return Ok(());
        }
        let f = get(file)?;
        let mut s = f.state();
        s.errh = errhandler;
        s.err_action = action;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_errhandler`.
    fn PMPI_File_get_errhandler / "MPI_File_get_errhandler" [OnFile(file as usize)] (file: FileH, errhandler: *mut c_int) {
        let h = if file.is_null() { files().null_errh } else { get(file)?.state().errh };
        out(errhandler, crate::errors::handed_out(h), "errhandler")
    }
}

mpi_fn! {
    /// `MPI_File_call_errhandler`.
    fn PMPI_File_call_errhandler / "MPI_File_call_errhandler" [OnFile(fh as usize)] (fh: FileH, errorcode: c_int) {
        if !fh.is_null() {
            get(fh)?;
        }
        let fatal = matches!(action_of(fh as usize), ErrAction::Fatal);
        if !(fatal && errorcode == MPI_SUCCESS) {
            let e = MpiError::new(errorcode, "raised by MPI_File_call_errhandler");
            OnFile(fh as usize).raise("MPI_File_call_errhandler", &e);
        }
        Ok(())
    }
}

// ---- file manipulation and queries ----

mpi_fn! {
    /// `MPI_File_get_size`.
    fn PMPI_File_get_size / "MPI_File_get_size" [OnFile(fh as usize)] (fh: FileH, size: *mut i64) {
        let f = get(fh)?;
        let n = f.file.metadata().map_err(|e| os_err(e, f.path.display()))?.len();
        out(size, n as i64, "size")
    }
}

mpi_fn! {
    /// `MPI_File_set_size` (collective: rank 0 truncates/extends and broadcasts the result).
    fn PMPI_File_set_size / "MPI_File_set_size" [OnFile(fh as usize)] (fh: FileH, size: i64) {
        let f = get(fh)?;
        if size < 0 {
            mpi_bail!(MPI_ERR_ARG, "negative file size {size}");
        }
        if f.amode & MPI_MODE_RDONLY != 0 {
            mpi_bail!(MPI_ERR_READ_ONLY, "{}: file opened read-only", f.path.display());
        }
        // Rank 0 resizes; the broadcast of its result tells the others it is done.
        let mut code = MPI_SUCCESS;
        let mut why = String::new();
        if f.rank == 0 {
            if let Err(e) = f.file.set_len(size as u64) {
                code = os_class(&e);
                why = format!(": {e}");
            }
            f.unsynced.wrote();
        }
        let code = bcast_i64(code as i64, 0, f.comm)? as c_int;
        if code != MPI_SUCCESS {
            mpi_bail!(code, "{}: setting the size to {size} failed{why}", f.path.display());
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_preallocate` (collective; rank 0 allocates).
    fn PMPI_File_preallocate / "MPI_File_preallocate" [OnFile(fh as usize)] (fh: FileH, size: i64) {
        let f = get(fh)?;
        if size < 0 {
            mpi_bail!(MPI_ERR_ARG, "negative size {size}");
        }
        if f.amode & MPI_MODE_RDONLY != 0 {
            mpi_bail!(MPI_ERR_READ_ONLY, "{}: file opened read-only", f.path.display());
        }
        let mut code = MPI_SUCCESS;
        if f.rank == 0 && size > 0 {
            if let Err(e) = crate::sys::fallocate(f.file.as_fd(), size) {
                code = os_class(&e);
            }
            f.unsynced.wrote();
        }
        let code = bcast_i64(code as i64, 0, f.comm)? as c_int;
        if code != MPI_SUCCESS {
            mpi_bail!(code, "{}: preallocating {size} bytes failed", f.path.display());
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_sync`: flushes this process's writes to the storage device
    /// (`fdatasync`), or does nothing when this process has not written to the handle
    /// since its last sync (MPI-4.1 §14.6.1: the call transfers "all previous writes to fh
    /// by the calling process"; the second sync of the standard's sync, barrier, sync
    /// recipe has none). Collective by the standard, but it synchronises nothing between
    /// processes (the recipe's barrier is in the program). `io_base_verbose` 10 reports
    /// each call's choice.
    fn PMPI_File_sync / "MPI_File_sync" [OnFile(fh as usize)] (fh: FileH) {
        let f = get(fh)?;
        let flushed = f
            .unsynced
            .sync(|| f.file.sync_data())
            .map_err(|e| os_err(e, f.path.display()))?;
        oxmpi_base::verbose!(
            IO,
            10,
            "io: MPI_File_sync {} on rank {} of the file's group: {}",
            f.path.display(),
            f.rank,
            if flushed {
                "fdatasync (writes since the last sync)"
            } else {
                "no writes by this process since the last sync, nothing to flush"
            }
        );
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_group`.
    fn PMPI_File_get_group / "MPI_File_get_group" [OnFile(fh as usize)] (fh: FileH, group: *mut c_int) {
        let f = get(fh)?;
        let h = lock().groups.insert(Group { members: f.group.clone() });
        out(group, h, "group")
    }
}

mpi_fn! {
    /// `MPI_File_get_amode`.
    fn PMPI_File_get_amode / "MPI_File_get_amode" [OnFile(fh as usize)] (fh: FileH, amode: *mut c_int) {
        let f = get(fh)?;
        out(amode, f.amode, "amode")
    }
}

mpi_fn! {
    /// `MPI_File_set_info`.
    fn PMPI_File_set_info / "MPI_File_set_info" [OnFile(fh as usize)] (fh: FileH, info: c_int) {
        let f = get(fh)?;
        let new = info_entries(info)?;
        merge_info(&mut f.state().info, new);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_info`: a new info object with the hints in use.
    fn PMPI_File_get_info / "MPI_File_get_info" [OnFile(fh as usize)] (fh: FileH, info_used: *mut c_int) {
        let f = get(fh)?;
        let entries = f.state().info.clone();
        let h = lock().infos.insert(Info { entries });
        out(info_used, h, "info_used")
    }
}

mpi_fn! {
    /// `MPI_File_set_atomicity` (collective).
    fn PMPI_File_set_atomicity / "MPI_File_set_atomicity" [OnFile(fh as usize)] (fh: FileH, flag: c_int) {
        // Collective by the standard, but nothing needs synchronising: atomic mode only
        // makes this process lock the byte ranges it accesses.
        let f = get(fh)?;
        f.state().atomic = flag != 0;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_atomicity`.
    fn PMPI_File_get_atomicity / "MPI_File_get_atomicity" [OnFile(fh as usize)] (fh: FileH, flag: *mut c_int) {
        let f = get(fh)?;
        let a = f.state().atomic;
        out(flag, a as c_int, "flag")
    }
}

/// The extent in the file of `datatype` (the `"native"` representation: its extent).
fn file_type_extent(fh: FileH, datatype: c_int) -> MpiResult<isize> {
    let f = get(fh)?;
    let dt = lock().dtype(datatype)?;
    let rep = f.state().view.rep.clone();
    if let datarep::Rep::User(u) = rep {
        // A predefined type's file extent is what the representation says; a derived
        // type keeps its native geometry (checked to be the file's).
        if dt.predefined && crate::external::basic_types(&dt)? == [datatype] {
            return u.file_extent(datatype);
        }
        u.check(&dt)?;
    }
    Ok(dt.extent())
}

mpi_fn! {
    /// `MPI_File_get_type_extent` (the datatype's extent in the view's data representation).
    fn PMPI_File_get_type_extent / "MPI_File_get_type_extent" [OnFile(fh as usize)] (fh: FileH, datatype: c_int, extent: *mut isize) {
        out(extent, file_type_extent(fh, datatype)?, "extent")
    }
}

mpi_fn! {
    /// `MPI_File_get_type_extent_c` (the extent as an `MPI_Count`).
    fn PMPI_File_get_type_extent_c / "MPI_File_get_type_extent_c" [OnFile(fh as usize)] (fh: FileH, datatype: c_int, extent: *mut i64) {
        out(extent, file_type_extent(fh, datatype)? as i64, "extent")
    }
}

// ---- views ----

mpi_fn! {
    /// `MPI_File_set_view` (collective; resets the individual and shared file pointers).
    fn PMPI_File_set_view / "MPI_File_set_view" [OnFile(fh as usize)] (fh: FileH, disp: i64, etype: c_int, filetype: c_int, datarep: *const c_char, info: c_int) {
        let f = get(fh)?;
        // Every rank checks its arguments, then all agree: a rank whose view is refused
        // must not leave the others waiting in the collective (MPI 3.1 §13.3).
        let mine = new_view(&f, disp, etype, filetype, datarep, info);
        let codes = allgather_i64(mine.as_ref().err().map_or(0, |e| i64::from(e.code)), f.comm)?;
        let (view, new_info) = mine?;
        if let Some(&c) = codes.iter().find(|&&c| c != 0) {
            let r = codes.iter().position(|&c| c != 0).unwrap_or(0);
            mpi_bail!(c as c_int, "MPI_File_set_view failed on rank {r} of the file's group");
        }
        {
            let mut s = f.state();
            s.view = view;
            s.pos = 0;
            merge_info(&mut s.info, new_info);
        }
        if f.rank == 0 {
            f.shared.store(0)?;
        }
        barrier(f.comm)
    }
}

/// The view `MPI_File_set_view` asks for on this rank, with the info entries to merge.
fn new_view(
    f: &file::FileObj,
    disp: i64,
    etype: c_int,
    filetype: c_int,
    datarep: *const c_char,
    info: c_int,
) -> MpiResult<(View, Vec<(String, String)>)> {
    let name = crate::ffi::read_cstr(datarep, "datarep")?;
    let Some(rep) = datarep::Rep::named(&name) else {
        mpi_bail!(
            MPI_ERR_UNSUPPORTED_DATAREP,
            "data representation \"{name}\" is not defined (\"native\", \"internal\", \"external32\" or one registered with MPI_Register_datarep)"
        );
    };
    let (et, ft) = {
        let st = lock();
        (st.dtype_committed(etype)?, st.dtype_committed(filetype)?)
    };
    if let datarep::Rep::User(u) = &rep {
        u.check(&et)?;
        u.check(&ft)?;
    }
    // A filetype must be made of etypes (MPI 3.1 §13.3: MPI_ERR_IO otherwise).
    if et.size == 0 {
        mpi_bail!(MPI_ERR_IO, "the etype holds no data");
    }
    if ft.size % et.size != 0 {
        mpi_bail!(
            MPI_ERR_IO,
            "the filetype ({} bytes) is not made of etypes ({} bytes)",
            ft.size,
            et.size
        );
    }
    let new_info = info_entries(info)?;
    let disp = if disp == MPI_DISPLACEMENT_CURRENT {
        if f.amode & MPI_MODE_SEQUENTIAL == 0 {
            mpi_bail!(
                MPI_ERR_ARG,
                "MPI_DISPLACEMENT_CURRENT needs MPI_MODE_SEQUENTIAL"
            );
        }
        let s = f.state();
        let pos = f.shared.load()?.max(0) as u64 * s.view.esize;
        s.view.map.byte_offset(pos) as i64
    } else {
        disp
    };
    if disp < 0 {
        mpi_bail!(MPI_ERR_ARG, "negative displacement {disp}");
    }
    let map = ViewMap::new(
        disp as u64,
        ft.blocks.iter().map(|b| (b.disp, b.len)),
        ft.extent(),
    )
    .map_err(|e| MpiError::new(MPI_ERR_IO, format!("filetype cannot define a view: {e:?}")))?;
    let esize = et.size as u64;
    let view = View {
        disp,
        etype: et,
        etype_h: etype,
        ftype: ft,
        ftype_h: filetype,
        map,
        esize,
        rep,
    };
    Ok((view, new_info))
}

mpi_fn! {
    /// `MPI_File_get_view`: derived etype/filetype come back as new handles.
    fn PMPI_File_get_view / "MPI_File_get_view" [OnFile(fh as usize)] (fh: FileH, disp: *mut i64, etype: *mut c_int, filetype: *mut c_int, datarep: *mut c_char) {
        let f = get(fh)?;
        let v = f.state().view.clone();
        let handle = |t: &Arc<Datatype>, h: c_int| {
            if t.predefined {
                h
            } else {
                lock().types.insert(t.clone())
            }
        };
        out(disp, v.disp, "disp")?;
        out(etype, handle(&v.etype, v.etype_h), "etype")?;
        out(filetype, handle(&v.ftype, v.ftype_h), "filetype")?;
        crate::ffi::copy_cstr(datarep, MPI_MAX_DATAREP_STRING as usize, v.rep.name())?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_byte_offset`: absolute byte offset of a view position.
    fn PMPI_File_get_byte_offset / "MPI_File_get_byte_offset" [OnFile(fh as usize)] (fh: FileH, offset: i64, disp: *mut i64) {
        let f = get(fh)?;
        if offset < 0 {
            mpi_bail!(MPI_ERR_ARG, "negative offset {offset}");
        }
        let s = f.state();
        let b = s.view.map.byte_offset(offset as u64 * s.view.esize);
        drop(s);
        out(disp, b as i64, "disp")
    }
}

mpi_fn_c! {
    /// `MPI_Register_datarep` (and `MPI_Register_datarep_c`, whose conversion functions take
    /// `MPI_Count` counts): a data representation for file views, converted by the user's
    /// callbacks (`datarep`); a name already defined fails with `MPI_ERR_DUP_DATAREP`.
    fn PMPI_Register_datarep / "MPI_Register_datarep", PMPI_Register_datarep_c / "MPI_Register_datarep_c" [OnFile(0)] (datarep: *const c_char, read_conversion_fn: *mut c_void, write_conversion_fn: *mut c_void, dtype_file_extent_fn: *mut c_void, extra_state: *mut c_void) {
        let name = crate::ffi::read_cstr(datarep, "datarep")?;
        datarep::register(
            name,
            read_conversion_fn,
            write_conversion_fn,
            dtype_file_extent_fn,
            extra_state,
            <Count as crate::ffi::CountArg>::LARGE,
        )
    }
}

// ---- data access ----

/// Blocking accesses that take an explicit offset.
macro_rules! access_at {
    ($($how:ident $pname:ident $name:literal $cpname:ident $cname:literal $write:literal $bt:ty;)*) => {$(
        mpi_fn_c! {
            #[doc = concat!("`", $name, "`.")]
            fn $pname / $name, $cpname / $cname [OnFile(fh as usize)] (fh: FileH, offset: i64, buf: $bt, count: Count, datatype: c_int, status: *mut MpiStatus) {
                let f = get(fh)?;
                let s = $how(&f, At::Offset(offset), $write, buf as *mut c_void, count.into(), datatype)?;
                write_st(status, &s);
                Ok(())
            }
        }
    )*};
}

access_at! {
    access PMPI_File_read_at "MPI_File_read_at" PMPI_File_read_at_c "MPI_File_read_at_c" false *mut c_void;
    access PMPI_File_write_at "MPI_File_write_at" PMPI_File_write_at_c "MPI_File_write_at_c" true *const c_void;
    access_all PMPI_File_read_at_all "MPI_File_read_at_all" PMPI_File_read_at_all_c "MPI_File_read_at_all_c" false *mut c_void;
    access_all PMPI_File_write_at_all "MPI_File_write_at_all" PMPI_File_write_at_all_c "MPI_File_write_at_all_c" true *const c_void;
}

/// Blocking accesses through a file pointer (individual or shared; `Ordered` for the
/// collective shared-pointer forms).
macro_rules! access_ptr {
    ($($how:ident $pname:ident $name:literal $cpname:ident $cname:literal $write:literal $at:ident $bt:ty;)*) => {$(
        mpi_fn_c! {
            #[doc = concat!("`", $name, "`.")]
            fn $pname / $name, $cpname / $cname [OnFile(fh as usize)] (fh: FileH, buf: $bt, count: Count, datatype: c_int, status: *mut MpiStatus) {
                let f = get(fh)?;
                let s = access_ptr!(@go $how $at, &f, $write, buf as *mut c_void, count.into(), datatype)?;
                write_st(status, &s);
                Ok(())
            }
        }
    )*};
    (@go $how:ident $at:ident, $f:expr, $w:expr, $b:expr, $c:expr, $d:expr) => { $how($f, At::$at, $w, $b, $c, $d) };
}

access_ptr! {
    access PMPI_File_read "MPI_File_read" PMPI_File_read_c "MPI_File_read_c" false Individual *mut c_void;
    access PMPI_File_write "MPI_File_write" PMPI_File_write_c "MPI_File_write_c" true Individual *const c_void;
    access_all PMPI_File_read_all "MPI_File_read_all" PMPI_File_read_all_c "MPI_File_read_all_c" false Individual *mut c_void;
    access_all PMPI_File_write_all "MPI_File_write_all" PMPI_File_write_all_c "MPI_File_write_all_c" true Individual *const c_void;
    access PMPI_File_read_shared "MPI_File_read_shared" PMPI_File_read_shared_c "MPI_File_read_shared_c" false Shared *mut c_void;
    access PMPI_File_write_shared "MPI_File_write_shared" PMPI_File_write_shared_c "MPI_File_write_shared_c" true Shared *const c_void;
    access_all PMPI_File_read_ordered "MPI_File_read_ordered" PMPI_File_read_ordered_c "MPI_File_read_ordered_c" false Ordered *mut c_void;
    access_all PMPI_File_write_ordered "MPI_File_write_ordered" PMPI_File_write_ordered_c "MPI_File_write_ordered_c" true Ordered *const c_void;
}

/// Nonblocking accesses with an explicit offset (complete at once).
macro_rules! iaccess_at {
    ($($how:ident $pname:ident $name:literal $cpname:ident $cname:literal $write:literal $bt:ty;)*) => {$(
        mpi_fn_c! {
            #[doc = concat!("`", $name, "` (completes at once).")]
            fn $pname / $name, $cpname / $cname [OnFile(fh as usize)] (fh: FileH, offset: i64, buf: $bt, count: Count, datatype: c_int, request: *mut c_int) {
                let f = get(fh)?;
                if request.is_null() {
                    mpi_bail!(MPI_ERR_ARG, "NULL pointer passed for request");
                }
                let s = $how(&f, At::Offset(offset), $write, buf as *mut c_void, count.into(), datatype)?;
                completed_request(request, &s)
            }
        }
    )*};
}

iaccess_at! {
    access PMPI_File_iread_at "MPI_File_iread_at" PMPI_File_iread_at_c "MPI_File_iread_at_c" false *mut c_void;
    access PMPI_File_iwrite_at "MPI_File_iwrite_at" PMPI_File_iwrite_at_c "MPI_File_iwrite_at_c" true *const c_void;
    access_all PMPI_File_iread_at_all "MPI_File_iread_at_all" PMPI_File_iread_at_all_c "MPI_File_iread_at_all_c" false *mut c_void;
    access_all PMPI_File_iwrite_at_all "MPI_File_iwrite_at_all" PMPI_File_iwrite_at_all_c "MPI_File_iwrite_at_all_c" true *const c_void;
}

/// Nonblocking accesses through a file pointer (complete at once).
macro_rules! iaccess_ptr {
    ($($how:ident $pname:ident $name:literal $cpname:ident $cname:literal $write:literal $at:ident $bt:ty;)*) => {$(
        mpi_fn_c! {
            #[doc = concat!("`", $name, "` (completes at once).")]
            fn $pname / $name, $cpname / $cname [OnFile(fh as usize)] (fh: FileH, buf: $bt, count: Count, datatype: c_int, request: *mut c_int) {
                let f = get(fh)?;
                if request.is_null() {
                    mpi_bail!(MPI_ERR_ARG, "NULL pointer passed for request");
                }
                let s = $how(&f, At::$at, $write, buf as *mut c_void, count.into(), datatype)?;
                completed_request(request, &s)
            }
        }
    )*};
}

iaccess_ptr! {
    access PMPI_File_iread "MPI_File_iread" PMPI_File_iread_c "MPI_File_iread_c" false Individual *mut c_void;
    access PMPI_File_iwrite "MPI_File_iwrite" PMPI_File_iwrite_c "MPI_File_iwrite_c" true Individual *const c_void;
    access_all PMPI_File_iread_all "MPI_File_iread_all" PMPI_File_iread_all_c "MPI_File_iread_all_c" false Individual *mut c_void;
    access_all PMPI_File_iwrite_all "MPI_File_iwrite_all" PMPI_File_iwrite_all_c "MPI_File_iwrite_all_c" true Individual *const c_void;
    access PMPI_File_iread_shared "MPI_File_iread_shared" PMPI_File_iread_shared_c "MPI_File_iread_shared_c" false Shared *mut c_void;
    access PMPI_File_iwrite_shared "MPI_File_iwrite_shared" PMPI_File_iwrite_shared_c "MPI_File_iwrite_shared_c" true Shared *const c_void;
}

/// Split collectives with an explicit offset: `_begin` runs the access.
macro_rules! split_at {
    ($($how:ident $pname:ident $name:literal $cpname:ident $cname:literal $write:literal $bt:ty;)*) => {$(
        mpi_fn_c! {
            #[doc = concat!("`", $name, "` (the access runs here; `_end` returns its status).")]
            fn $pname / $name, $cpname / $cname [OnFile(fh as usize)] (fh: FileH, offset: i64, buf: $bt, count: Count, datatype: c_int) {
                let f = get(fh)?;
                check_no_split(&f)?;
                split_begin(&f, $how(&f, At::Offset(offset), $write, buf as *mut c_void, count.into(), datatype))
            }
        }
    )*};
}

split_at! {
    access_all PMPI_File_read_at_all_begin "MPI_File_read_at_all_begin" PMPI_File_read_at_all_begin_c "MPI_File_read_at_all_begin_c" false *mut c_void;
    access_all PMPI_File_write_at_all_begin "MPI_File_write_at_all_begin" PMPI_File_write_at_all_begin_c "MPI_File_write_at_all_begin_c" true *const c_void;
}

/// Split collectives through a file pointer.
macro_rules! split_ptr {
    ($($how:ident $pname:ident $name:literal $cpname:ident $cname:literal $write:literal $at:ident $bt:ty;)*) => {$(
        mpi_fn_c! {
            #[doc = concat!("`", $name, "` (the access runs here; `_end` returns its status).")]
            fn $pname / $name, $cpname / $cname [OnFile(fh as usize)] (fh: FileH, buf: $bt, count: Count, datatype: c_int) {
                let f = get(fh)?;
                check_no_split(&f)?;
                let r = access_ptr!(@go $how $at, &f, $write, buf as *mut c_void, count.into(), datatype);
                split_begin(&f, r)
            }
        }
    )*};
}

split_ptr! {
    access_all PMPI_File_read_all_begin "MPI_File_read_all_begin" PMPI_File_read_all_begin_c "MPI_File_read_all_begin_c" false Individual *mut c_void;
    access_all PMPI_File_write_all_begin "MPI_File_write_all_begin" PMPI_File_write_all_begin_c "MPI_File_write_all_begin_c" true Individual *const c_void;
    access_all PMPI_File_read_ordered_begin "MPI_File_read_ordered_begin" PMPI_File_read_ordered_begin_c "MPI_File_read_ordered_begin_c" false Ordered *mut c_void;
    access_all PMPI_File_write_ordered_begin "MPI_File_write_ordered_begin" PMPI_File_write_ordered_begin_c "MPI_File_write_ordered_begin_c" true Ordered *const c_void;
}

/// The `_end` halves of the split collectives.
macro_rules! split_end {
    ($($pname:ident $name:literal $bt:ty;)*) => {$(
        mpi_fn! {
            #[doc = concat!("`", $name, "`.")]
            fn $pname / $name [OnFile(fh as usize)] (fh: FileH, _buf: $bt, status: *mut MpiStatus) {
                let f = get(fh)?;
                split_end(&f, status)
            }
        }
    )*};
}

split_end! {
    PMPI_File_read_all_end "MPI_File_read_all_end" *mut c_void;
    PMPI_File_write_all_end "MPI_File_write_all_end" *const c_void;
    PMPI_File_read_at_all_end "MPI_File_read_at_all_end" *mut c_void;
    PMPI_File_write_at_all_end "MPI_File_write_at_all_end" *const c_void;
    PMPI_File_read_ordered_end "MPI_File_read_ordered_end" *mut c_void;
    PMPI_File_write_ordered_end "MPI_File_write_ordered_end" *const c_void;
}

// ---- file pointers ----

mpi_fn! {
    /// `MPI_File_seek`.
    fn PMPI_File_seek / "MPI_File_seek" [OnFile(fh as usize)] (fh: FileH, offset: i64, whence: c_int) {
        let f = get(fh)?;
        not_sequential(&f)?;
        let mut s = f.state();
        let cur = s.pos;
        s.pos = seek_target(&f, &s, cur, offset, whence)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_position`.
    fn PMPI_File_get_position / "MPI_File_get_position" [OnFile(fh as usize)] (fh: FileH, offset: *mut i64) {
        let f = get(fh)?;
        not_sequential(&f)?;
        let p = f.state().pos;
        out(offset, p, "offset")
    }
}

mpi_fn! {
    /// `MPI_File_seek_shared` (collective; rank 0 moves the shared pointer).
    fn PMPI_File_seek_shared / "MPI_File_seek_shared" [OnFile(fh as usize)] (fh: FileH, offset: i64, whence: c_int) {
        let f = get(fh)?;
        if !matches!(whence, MPI_SEEK_SET | MPI_SEEK_CUR | MPI_SEEK_END) {
            mpi_bail!(MPI_ERR_ARG, "invalid whence {whence}");
        }
        barrier(f.comm)?;
        let mut code = MPI_SUCCESS;
        if f.rank == 0 {
            let s = f.state();
            let moved = f
                .shared
                .load()
                .and_then(|cur| seek_target(&f, &s, cur, offset, whence))
                .and_then(|new| f.shared.store(new));
            if let Err(e) = moved {
                code = e.code;
            }
        }
        let code = bcast_i64(code as i64, 0, f.comm)? as c_int;
        if code != MPI_SUCCESS {
            mpi_bail!(code, "MPI_File_seek_shared to {offset} (whence {whence}) failed");
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_position_shared`.
    fn PMPI_File_get_position_shared / "MPI_File_get_position_shared" [OnFile(fh as usize)] (fh: FileH, offset: *mut i64) {
        let f = get(fh)?;
        out(offset, f.shared.load()?, "offset")
    }
}

/// `MPI_File_c2f`: the integer naming an open file (0 for `MPI_FILE_NULL` or a closed file).
#[no_mangle]
pub extern "C" fn PMPI_File_c2f(f: *mut c_void) -> c_int {
    file_c2f(f)
}
crate::ffi::mpi_alias!(PMPI_File_c2f / "MPI_File_c2f");

/// `MPI_File_f2c`: the file an integer from `MPI_File_c2f` names (`MPI_FILE_NULL` if none).
#[no_mangle]
pub extern "C" fn PMPI_File_f2c(f: c_int) -> *mut c_void {
    file_f2c(f)
}
crate::ffi::mpi_alias!(PMPI_File_f2c / "MPI_File_f2c");
