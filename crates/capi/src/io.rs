//! MPI-IO (MPI-3.1 chapter 13) over POSIX files.
//!
//! * A file handle (`MPI_File`, a pointer in the MPICH ABI) is a small non-zero integer
//!   naming an entry of this module's own table; `MPI_File_c2f` is that integer.
//! * `MPI_File_open` duplicates the communicator (the file's collective traffic never
//!   mixes with the user's), opens the file on rank 0 first (so that `MPI_MODE_CREATE |
//!   MPI_MODE_EXCL` has one winner) and then on the others; a failure anywhere fails the
//!   open everywhere.
//! * Data moves with `pread`/`pwrite` through the file view ([`view::ViewMap`]): user
//!   buffers are packed/unpacked with the datatype engine, view positions become file
//!   segments. Only the `"native"` data representation is supported in views
//!   (`MPI_Register_datarep` records names, so duplicates fail as the standard says).
//! * The shared file pointer is an `AtomicI64` in a shared memory file mapped by every
//!   rank (created by rank 0, unlinked as soon as all ranks mapped it); a file opened by
//!   one process keeps it in local memory.
//! * Collective calls are independent I/O plus the synchronisation their semantics need
//!   (ordered access, seeks of the shared pointer, size changes, close); nonblocking
//!   calls complete at once and return a completed request; split collectives run at
//!   `_begin` and hand their status over at `_end`.
//! * Errors go through the file's error handler (`MPI_ERRORS_RETURN` by default); errors
//!   of calls without a file (open, delete) through the handler of `MPI_FILE_NULL`.

pub(crate) mod view;

use crate::backend::EStatus;
use crate::comm::Internal;
use crate::consts::*;
use crate::datatype::{pack_into, status_set_bytes, unpack_from, Datatype};
use crate::errors::{CommErrFn, ErrAction, UserErrhandler};
use crate::ffi::{check_count, out, ErrorOwner, MpiError, MpiResult};
use crate::request::{write_status, MpiStatus, Pending, Request};
use crate::state::{lock, Group, Info};
use oxmpi_engine::sys::Mapping;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use view::ViewMap;

/// `MPI_DISPLACEMENT_CURRENT` of `mpi.h` (for `MPI_File_set_view` in sequential mode).
const MPI_DISPLACEMENT_CURRENT: i64 = -54278278;

/// `MPI_File` as the C side sees it.
type FileH = *mut c_void;

/// The counter behind the shared file pointer.
enum SharedPtr {
    /// A file opened by a single process.
    Local(AtomicI64),
    /// A counter in shared memory (8 bytes), mapped by every rank of the file's group.
    Mapped(Mapping),
}

impl SharedPtr {
    fn get(&self) -> &AtomicI64 {
        match self {
            SharedPtr::Local(a) => a,
            // SAFETY: the mapping is page aligned, at least 8 bytes long and lives as long
            // as `self`; the counter is only accessed through atomics.
            SharedPtr::Mapped(m) => unsafe { &*m.ptr().cast::<AtomicI64>() },
        }
    }
}

/// The current view of a file handle.
#[derive(Clone)]
struct View {
    disp: i64,
    etype: Arc<Datatype>,
    /// The handle the user passed for a predefined etype (`Get_view` returns it).
    etype_h: c_int,
    ftype: Arc<Datatype>,
    ftype_h: c_int,
    map: ViewMap,
    /// Size of the etype in bytes (view positions count etypes).
    esize: u64,
}

/// Mutable per-handle state.
struct FileState {
    view: View,
    /// The individual file pointer, in etypes of the view.
    pos: i64,
    errh: c_int,
    err_action: ErrAction,
    info: Vec<(String, String)>,
    atomic: bool,
    /// The result of a split collective begun and not yet ended.
    split: Option<MpiStatus>,
}

/// An open file.
struct FileObj {
    file: File,
    path: PathBuf,
    amode: c_int,
    /// Private duplicate of the communicator the file was opened on.
    comm: c_int,
    rank: i32,
    group: Vec<i32>,
    shared: SharedPtr,
    st: Mutex<FileState>,
}

impl FileObj {
    fn state(&self) -> MutexGuard<'_, FileState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The table of open files and the error handler of `MPI_FILE_NULL`.
struct Files {
    open: BTreeMap<usize, Arc<FileObj>>,
    next: usize,
    null_errh: c_int,
    null_action: ErrAction,
}

static FILES: Mutex<Files> = Mutex::new(Files {
    open: BTreeMap::new(),
    next: 1,
    null_errh: MPI_ERRORS_RETURN,
    null_action: ErrAction::Return,
});

fn files() -> MutexGuard<'static, Files> {
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

/// The open file of handle `fh`.
fn get(fh: FileH) -> MpiResult<Arc<FileObj>> {
    if fh.is_null() {
        mpi_bail!(MPI_ERR_FILE, "MPI_FILE_NULL passed");
    }
    match files().open.get(&(fh as usize)) {
        Some(f) => Ok(f.clone()),
        None => mpi_bail!(MPI_ERR_FILE, "invalid file handle {:#x}", fh as usize),
    }
}

/// `MPI_File_c2f`: the handle's integer (0 for `MPI_FILE_NULL`).
pub fn file_c2f(fh: *mut c_void) -> c_int {
    let id = fh as usize;
    if files().open.contains_key(&id) {
        id as c_int
    } else {
        0
    }
}

/// `MPI_File_f2c`: the handle of an integer from [`file_c2f`] (`MPI_FILE_NULL` if none).
pub fn file_f2c(f: c_int) -> *mut c_void {
    let id = f as usize;
    if f > 0 && files().open.contains_key(&id) {
        id as FileH
    } else {
        std::ptr::null_mut()
    }
}

/// The error action of file `fh` (of `MPI_FILE_NULL` if it is not open).
fn action_of(fh: usize) -> ErrAction {
    let f = {
        let t = files();
        match t.open.get(&fh) {
            Some(f) => f.clone(),
            None => return t.null_action,
        }
    };
    let a = f.state().err_action;
    a
}

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

// ---- helpers: errors, collectives ----

/// The MPI error class of an OS error.
fn os_class(e: &std::io::Error) -> c_int {
    match e.raw_os_error() {
        Some(libc::ENOENT) => MPI_ERR_NO_SUCH_FILE,
        Some(libc::EEXIST) => MPI_ERR_FILE_EXISTS,
        Some(libc::EACCES) | Some(libc::EPERM) => MPI_ERR_ACCESS,
        Some(libc::EROFS) => MPI_ERR_READ_ONLY,
        Some(libc::ENOSPC) => MPI_ERR_NO_SPACE,
        Some(libc::EDQUOT) => MPI_ERR_QUOTA,
        Some(libc::ETXTBSY) | Some(libc::EBUSY) => MPI_ERR_FILE_IN_USE,
        Some(libc::ENAMETOOLONG)
        | Some(libc::EISDIR)
        | Some(libc::ENOTDIR)
        | Some(libc::ELOOP)
        | Some(libc::EINVAL) => MPI_ERR_BAD_FILE,
        _ => MPI_ERR_IO,
    }
}

fn os_err(e: std::io::Error, what: impl std::fmt::Display) -> MpiError {
    MpiError::new(os_class(&e), format!("{what}: {e}"))
}

/// An error of the library's own collective `what` on the file's communicator, for the
/// file's error handler.
fn internal(what: &'static str) -> impl Fn(MpiError) -> MpiError {
    move |e| MpiError::new(e.code, format!("{what} failed: {}", e.detail))
}

/// Barrier on the file's private communicator.
fn barrier(comm: c_int) -> MpiResult {
    Internal::of(comm)
        .and_then(|c| c.barrier())
        .map_err(internal("barrier"))
}

/// Broadcast `buf` from `root`.
fn bcast(buf: &mut [u8], root: i32, comm: c_int) -> MpiResult {
    Internal::of(comm)
        .and_then(|c| c.bcast(buf, root))
        .map_err(internal("broadcast"))
}

fn bcast_i64(v: i64, root: i32, comm: c_int) -> MpiResult<i64> {
    let mut b = v.to_ne_bytes();
    bcast(&mut b, root, comm)?;
    Ok(i64::from_ne_bytes(b))
}

/// Gather one `i64` from every rank (in rank order) on every rank.
fn allgather_i64(v: i64, comm: c_int) -> MpiResult<Vec<i64>> {
    Internal::of(comm)
        .and_then(|c| c.allgather_i64(&[v]))
        .map_err(internal("allgather"))
}

/// The entries of an info handle (`MPI_INFO_NULL` and `MPI_INFO_ENV` add none).
fn info_entries(h: c_int) -> MpiResult<Vec<(String, String)>> {
    if h == MPI_INFO_NULL || h == MPI_INFO_ENV {
        return Ok(Vec::new());
    }
    match lock().infos.get(h) {
        Some(i) => Ok(i.entries.clone()),
        None => mpi_bail!(MPI_ERR_INFO, "invalid info handle {h:#x}"),
    }
}

fn merge_info(into: &mut Vec<(String, String)>, new: Vec<(String, String)>) {
    for (k, v) in new {
        match into.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.1 = v,
            None => into.push((k, v)),
        }
    }
}

// ---- the shared file pointer ----

/// Where rank 0 creates the shared pointer's counter file.
fn shm_dir() -> PathBuf {
    let d = PathBuf::from("/dev/shm");
    if d.is_dir() {
        d
    } else {
        std::env::temp_dir()
    }
}

/// Collectively create the shared file pointer of a file opened by `size` ranks.
fn shared_ptr(comm: c_int, rank: i32, size: usize, init: i64) -> MpiResult<SharedPtr> {
    if size == 1 {
        return Ok(SharedPtr::Local(AtomicI64::new(init)));
    }
    // Rank 0 creates the counter file and broadcasts its name (empty on failure).
    let mut name = [0u8; 512];
    let mut created: Option<(File, PathBuf)> = None;
    let mut why = String::new();
    if rank == 0 {
        static SEQ: AtomicI64 = AtomicI64::new(0);
        let path = shm_dir().join(format!(
            "oxmpi-shfp-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let made = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|f| f.set_len(8).map(|()| f));
        match made {
            Ok(f) => {
                let b = path.as_os_str().as_bytes();
                if b.len() < name.len() {
                    name[..b.len()].copy_from_slice(b);
                    created = Some((f, path));
                } else {
                    let _ = std::fs::remove_file(&path);
                    why = "counter path too long".into();
                }
            }
            Err(e) => why = format!("{}: {e}", path.display()),
        }
    }
    bcast(&mut name, 0, comm)?;
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    if len == 0 {
        mpi_bail!(
            MPI_ERR_IO,
            "cannot create the shared file pointer counter{}{why}",
            if why.is_empty() { "" } else { ": " }
        );
    }
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(&name[..len]));
    let mapped = match &created {
        Some((f, _)) => Mapping::map(f, 8),
        None => std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .and_then(|f| Mapping::map(&f, 8)),
    };
    let ptr = mapped.map(SharedPtr::Mapped);
    if let (0, Ok(p)) = (rank, &ptr) {
        p.get().store(init, Ordering::SeqCst);
    }
    // Everyone has mapped (or failed) before rank 0 removes the name; the allgather also
    // orders rank 0's initial value before any use.
    let all = allgather_i64(ptr.is_ok() as i64, comm)?;
    if let Some((_, p)) = &created {
        let _ = std::fs::remove_file(p);
    }
    let ptr = ptr.map_err(|e| {
        MpiError::new(
            MPI_ERR_IO,
            format!("cannot map the shared file pointer {}: {e}", path.display()),
        )
    })?;
    if all.iter().any(|&v| v != 1) {
        mpi_bail!(MPI_ERR_IO, "a rank could not map the shared file pointer");
    }
    Ok(ptr)
}

// ---- open, close, delete ----

/// Check an access mode (MPI-3.1 §13.2.1).
fn check_amode(amode: c_int) -> MpiResult {
    let known = MPI_MODE_RDONLY
        | MPI_MODE_WRONLY
        | MPI_MODE_RDWR
        | MPI_MODE_CREATE
        | MPI_MODE_EXCL
        | MPI_MODE_DELETE_ON_CLOSE
        | MPI_MODE_UNIQUE_OPEN
        | MPI_MODE_SEQUENTIAL
        | MPI_MODE_APPEND;
    if amode & !known != 0 {
        mpi_bail!(MPI_ERR_AMODE, "unknown bits in access mode {amode:#x}");
    }
    let access = [MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR]
        .iter()
        .filter(|&&m| amode & m != 0)
        .count();
    if access != 1 {
        mpi_bail!(
            MPI_ERR_AMODE,
            "access mode {amode:#x} needs exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR"
        );
    }
    if amode & MPI_MODE_RDONLY != 0 && amode & (MPI_MODE_CREATE | MPI_MODE_EXCL) != 0 {
        mpi_bail!(
            MPI_ERR_AMODE,
            "MPI_MODE_RDONLY cannot be combined with MPI_MODE_CREATE or MPI_MODE_EXCL"
        );
    }
    if amode & MPI_MODE_RDWR != 0 && amode & MPI_MODE_SEQUENTIAL != 0 {
        mpi_bail!(
            MPI_ERR_AMODE,
            "MPI_MODE_RDWR cannot be combined with MPI_MODE_SEQUENTIAL"
        );
    }
    Ok(())
}

/// Read a file name argument (bytes, not necessarily UTF-8).
fn path_arg(p: *const c_char) -> MpiResult<PathBuf> {
    if p.is_null() {
        mpi_bail!(MPI_ERR_BAD_FILE, "NULL file name");
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    // ROMIO-style file system prefixes ("ufs:", "nfs:") name the POSIX file behind them.
    let bytes = ["ufs:", "nfs:", "file:"]
        .iter()
        .find_map(|pre| bytes.strip_prefix(pre.as_bytes()))
        .unwrap_or(bytes);
    if bytes.is_empty() {
        mpi_bail!(MPI_ERR_BAD_FILE, "empty file name");
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
}

fn open_posix(path: &PathBuf, amode: c_int, create: bool) -> MpiResult<File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(amode & (MPI_MODE_RDONLY | MPI_MODE_RDWR) != 0)
        .write(amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR) != 0);
    if create && amode & MPI_MODE_CREATE != 0 {
        if amode & MPI_MODE_EXCL != 0 {
            o.create_new(true);
        } else {
            o.create(true);
        }
    }
    let f = o.open(path).map_err(|e| os_err(e, path.display()))?;
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        mpi_bail!(MPI_ERR_BAD_FILE, "{} is a directory", path.display());
    }
    Ok(f)
}

fn default_view() -> MpiResult<View> {
    let byte = lock().dtype(MPI_BYTE)?;
    Ok(View {
        disp: 0,
        etype: byte.clone(),
        etype_h: MPI_BYTE,
        ftype: byte,
        ftype_h: MPI_BYTE,
        map: ViewMap::bytes(0),
        esize: 1,
    })
}

/// The collective part of `MPI_File_open` on the private communicator `comm`.
fn open_on(
    comm: c_int,
    path: PathBuf,
    amode: c_int,
    info: Vec<(String, String)>,
) -> MpiResult<FileObj> {
    let (rank, size, group) = {
        let st = lock();
        let c = st.comm(comm)?;
        (c.rank, c.size as usize, c.group.clone())
    };
    // Rank 0 opens (and creates) first; the others open the file it made.
    let mut first: MpiResult<File> = Err(MpiError::new(MPI_ERR_OTHER, "not opened"));
    let mut code0 = MPI_SUCCESS;
    if rank == 0 {
        first = open_posix(&path, amode, true);
        if let Err(e) = &first {
            code0 = e.code;
        }
    }
    let code0 = bcast_i64(code0 as i64, 0, comm)? as c_int;
    if code0 != MPI_SUCCESS {
        return match first {
            Err(e) if rank == 0 => Err(e),
            _ => Err(MpiError::new(
                code0,
                format!("{}: rank 0 could not open the file", path.display()),
            )),
        };
    }
    let mine = if rank == 0 {
        first
    } else {
        open_posix(&path, amode, false)
    };
    let codes = allgather_i64(mine.as_ref().map_or_else(|e| e.code, |_| 0) as i64, comm)?;
    let file = mine?;
    if let Some((r, &c)) = codes.iter().enumerate().find(|(_, &c)| c != 0) {
        return Err(MpiError::new(
            c as c_int,
            format!("{}: rank {r} could not open the file", path.display()),
        ));
    }
    let init = if amode & MPI_MODE_APPEND != 0 {
        file.metadata()
            .map_err(|e| os_err(e, path.display()))?
            .len() as i64
    } else {
        0
    };
    let shared = shared_ptr(comm, rank, size, init)?;
    let view = default_view()?;
    Ok(FileObj {
        file,
        path,
        amode,
        comm,
        rank,
        group,
        shared,
        st: Mutex::new(FileState {
            view,
            pos: init,
            errh: MPI_ERRORS_RETURN,
            err_action: ErrAction::Return,
            info,
            atomic: false,
            split: None,
        }),
    })
}

/// Free the file's private communicator.
fn free_comm(c: c_int) {
    let _ = crate::comm::free(c);
}

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
        files().open.remove(&(h as usize));
        free_comm(f.comm);
        out(fh, std::ptr::null_mut(), "fh")?;
        if f.amode & MPI_MODE_DELETE_ON_CLOSE != 0 && f.rank == 0 {
            std::fs::remove_file(&f.path).map_err(|e| os_err(e, f.path.display()))?;
        }
        Ok(())
    }
}

/// The file handle `*fh` (0 if `fh` is NULL), for routing the errors of `MPI_File_close`.
fn handle_behind(fh: *mut FileH) -> usize {
    if fh.is_null() {
        return 0;
    }
    // SAFETY: a non-NULL `MPI_File*` from the caller points to a readable handle.
    (unsafe { fh.read_unaligned() }) as usize
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
        let h = lock().errhandlers.insert(UserErrhandler { func });
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
        out(errhandler, h, "errhandler")
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
            // SAFETY: posix_fallocate on our open file descriptor.
            let e = unsafe { libc::posix_fallocate(f.file.as_raw_fd(), 0, size) };
            if e != 0 {
                code = os_class(&std::io::Error::from_raw_os_error(e));
            }
        }
        let code = bcast_i64(code as i64, 0, f.comm)? as c_int;
        if code != MPI_SUCCESS {
            mpi_bail!(code, "{}: preallocating {size} bytes failed", f.path.display());
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_sync`: flushes this process's writes to the storage device. Collective
    /// by the standard, but it synchronises nothing between processes (the standard's
    /// consistency recipe is sync, barrier, sync with the barrier in the program).
    fn PMPI_File_sync / "MPI_File_sync" [OnFile(fh as usize)] (fh: FileH) {
        let f = get(fh)?;
        f.file.sync_data().map_err(|e| os_err(e, f.path.display()))
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

mpi_fn! {
    /// `MPI_File_get_type_extent` (the `"native"` representation: the datatype's extent).
    fn PMPI_File_get_type_extent / "MPI_File_get_type_extent" [OnFile(fh as usize)] (fh: FileH, datatype: c_int, extent: *mut isize) {
        get(fh)?;
        let t = lock().dtype(datatype)?;
        out(extent, t.extent(), "extent")
    }
}

// ---- views ----

mpi_fn! {
    /// `MPI_File_set_view` (collective; resets the individual and shared file pointers).
    fn PMPI_File_set_view / "MPI_File_set_view" [OnFile(fh as usize)] (fh: FileH, disp: i64, etype: c_int, filetype: c_int, datarep: *const c_char, info: c_int) {
        let f = get(fh)?;
        let rep = crate::ffi::read_cstr(datarep, "datarep")?;
        if rep != "native" {
            mpi_bail!(
                MPI_ERR_UNSUPPORTED_DATAREP,
                "data representation \"{rep}\" is not supported (only \"native\")"
            );
        }
        let (et, ft) = {
            let st = lock();
            (st.dtype_committed(etype)?, st.dtype_committed(filetype)?)
        };
        if et.size == 0 {
            mpi_bail!(MPI_ERR_TYPE, "the etype holds no data");
        }
        if ft.size % et.size != 0 {
            mpi_bail!(MPI_ERR_TYPE, "the filetype ({} bytes) is not made of etypes ({} bytes)", ft.size, et.size);
        }
        let new_info = info_entries(info)?;
        let disp = if disp == MPI_DISPLACEMENT_CURRENT {
            if f.amode & MPI_MODE_SEQUENTIAL == 0 {
                mpi_bail!(MPI_ERR_ARG, "MPI_DISPLACEMENT_CURRENT needs MPI_MODE_SEQUENTIAL");
            }
            let s = f.state();
            let pos = f.shared.get().load(Ordering::SeqCst).max(0) as u64 * s.view.esize;
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
        .map_err(|e| MpiError::new(MPI_ERR_TYPE, format!("filetype cannot define a view: {e:?}")))?;
        let esize = et.size as u64;
        barrier(f.comm)?;
        {
            let mut s = f.state();
            s.view = View {
                disp,
                etype: et,
                etype_h: etype,
                ftype: ft,
                ftype_h: filetype,
                map,
                esize,
            };
            s.pos = 0;
            merge_info(&mut s.info, new_info);
        }
        if f.rank == 0 {
            f.shared.get().store(0, Ordering::SeqCst);
        }
        barrier(f.comm)
    }
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
        crate::ffi::copy_cstr(datarep, MPI_MAX_DATAREP_STRING as usize, "native")?;
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

/// Names registered with `MPI_Register_datarep`.
static DATAREPS: Mutex<Vec<String>> = Mutex::new(Vec::new());

mpi_fn! {
    /// `MPI_Register_datarep`: the name is recorded (a second registration fails with
    /// `MPI_ERR_DUP_DATAREP`); views accept only `"native"`, so a file view using the new
    /// representation fails with `MPI_ERR_UNSUPPORTED_DATAREP`.
    fn PMPI_Register_datarep / "MPI_Register_datarep" [OnFile(0)] (datarep: *const c_char, _read_conversion_fn: *mut c_void, _write_conversion_fn: *mut c_void, dtype_file_extent_fn: *mut c_void, _extra_state: *mut c_void) {
        let name = crate::ffi::read_cstr(datarep, "datarep")?;
        if name.is_empty() || name.len() >= MPI_MAX_DATAREP_STRING as usize {
            mpi_bail!(MPI_ERR_ARG, "data representation name of {} bytes", name.len());
        }
        if dtype_file_extent_fn.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL dtype_file_extent_fn");
        }
        let mut reps = DATAREPS.lock().unwrap_or_else(|p| p.into_inner());
        if ["native", "internal", "external32"].contains(&name.as_str()) || reps.contains(&name) {
            mpi_bail!(MPI_ERR_DUP_DATAREP, "data representation \"{name}\" is already defined");
        }
        reps.push(name);
        Ok(())
    }
}

// ---- data access ----

/// Which file pointer a data access uses.
#[derive(Clone, Copy)]
enum At {
    /// An explicit offset (etypes of the view).
    Offset(i64),
    Individual,
    Shared,
    /// An offset already reserved on the shared file pointer (ordered access).
    Reserved(i64),
}

/// Fail for individual file pointers and explicit offsets on a file opened with
/// `MPI_MODE_SEQUENTIAL` (only the shared file pointer exists there).
fn not_sequential(f: &FileObj) -> MpiResult {
    if f.amode & MPI_MODE_SEQUENTIAL != 0 {
        mpi_bail!(
            MPI_ERR_UNSUPPORTED_OPERATION,
            "{}: opened with MPI_MODE_SEQUENTIAL: only shared file pointer access is allowed",
            f.path.display()
        );
    }
    Ok(())
}

/// One data access: read into or write from `buf`.
fn access(
    f: &FileObj,
    at: At,
    write: bool,
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
) -> MpiResult<MpiStatus> {
    let n = check_count(count)?;
    let dt = lock().dtype_committed(datatype)?;
    if buf.is_null() && n > 0 && dt.size > 0 && dt.predefined {
        mpi_bail!(MPI_ERR_BUFFER, "NULL buffer with count {n}");
    }
    if write && f.amode & MPI_MODE_RDONLY != 0 {
        mpi_bail!(
            MPI_ERR_READ_ONLY,
            "{}: file opened read-only",
            f.path.display()
        );
    }
    if !write && f.amode & MPI_MODE_WRONLY != 0 {
        mpi_bail!(
            MPI_ERR_ACCESS,
            "{}: file opened write-only",
            f.path.display()
        );
    }
    if matches!(at, At::Offset(_) | At::Individual) {
        not_sequential(f)?;
    }
    let nbytes = n * dt.size;
    let mut s = f.state();
    let esize = s.view.esize;
    let netypes = (nbytes as u64 / esize) as i64;
    let start = match at {
        At::Offset(o) | At::Reserved(o) => {
            if o < 0 {
                mpi_bail!(MPI_ERR_ARG, "negative offset {o}");
            }
            o
        }
        At::Individual => s.pos,
        At::Shared => f.shared.get().fetch_add(netypes, Ordering::SeqCst),
    };
    let segs = s.view.map.segments(start as u64 * esize, nbytes as u64);
    let atomic = s.atomic;
    let done = if write {
        let mut data = Vec::with_capacity(nbytes);
        // SAFETY: `buf` holds `n` items of `dt` (MPI contract of the write calls).
        unsafe { pack_into(&dt, n, buf as *const u8, &mut data) };
        let _lock = atomic.then(|| RangeLock::new(f, &segs, true));
        let mut pos = 0usize;
        for &(off, len) in &segs {
            let len = len as usize;
            f.file
                .write_all_at(&data[pos..pos + len], off)
                .map_err(|e| os_err(e, f.path.display()))?;
            pos += len;
        }
        pos
    } else {
        let mut data = vec![0u8; nbytes];
        let _lock = atomic.then(|| RangeLock::new(f, &segs, false));
        let mut pos = 0usize;
        'segs: for &(off, len) in &segs {
            let end = pos + len as usize;
            let mut o = off;
            while pos < end {
                match f.file.read_at(&mut data[pos..end], o) {
                    Ok(0) => break 'segs,
                    Ok(k) => {
                        pos += k;
                        o += k as u64;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(os_err(e, f.path.display())),
                }
            }
        }
        // SAFETY: `buf` has room for `n` items of `dt` (MPI contract of the read calls).
        unsafe { unpack_from(&dt, n, buf as *mut u8, &data[..pos]) };
        pos
    };
    if let At::Individual = at {
        s.pos = start + (done as u64 / esize) as i64;
    }
    drop(s);
    let mut st = MpiStatus {
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        error: MPI_SUCCESS,
        ..Default::default()
    };
    status_set_bytes(&mut st, done, false);
    Ok(st)
}

/// A POSIX record lock over the byte range an atomic-mode access touches.
struct RangeLock<'a> {
    f: &'a FileObj,
    start: u64,
    len: u64,
}

impl<'a> RangeLock<'a> {
    fn new(f: &'a FileObj, segs: &[(u64, u64)], write: bool) -> Option<Self> {
        let start = segs.iter().map(|s| s.0).min()?;
        let end = segs.iter().map(|s| s.0 + s.1).max()?;
        let l = RangeLock {
            f,
            start,
            len: end - start,
        };
        l.fcntl(if write { libc::F_WRLCK } else { libc::F_RDLCK });
        Some(l)
    }
    fn fcntl(&self, ty: c_int) {
        // SAFETY: `flock` is a plain C struct; zero is a valid initial value.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = ty as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = self.start as libc::off_t;
        fl.l_len = self.len as libc::off_t;
        loop {
            // SAFETY: F_SETLKW with a valid flock struct on our open descriptor.
            let r = unsafe { libc::fcntl(self.f.file.as_raw_fd(), libc::F_SETLKW, &fl) };
            if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
    }
}

impl Drop for RangeLock<'_> {
    fn drop(&mut self) {
        self.fcntl(libc::F_UNLCK);
    }
}

/// Ordered access (`MPI_File_read/write_ordered`): rank order on the shared pointer.
fn ordered(
    f: &FileObj,
    write: bool,
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
) -> MpiResult<MpiStatus> {
    let n = check_count(count)?;
    let dt = lock().dtype_committed(datatype)?;
    let esize = f.state().view.esize;
    let mine = ((n * dt.size) as u64 / esize) as i64;
    let all = allgather_i64(mine, f.comm)?;
    let before: i64 = all[..f.rank as usize].iter().sum();
    let total: i64 = all.iter().sum();
    let base = if f.rank == 0 {
        f.shared.get().fetch_add(total, Ordering::SeqCst)
    } else {
        0
    };
    let base = bcast_i64(base, 0, f.comm)?;
    access(f, At::Reserved(base + before), write, buf, count, datatype)
}

fn write_st(status: *mut MpiStatus, s: &MpiStatus) {
    write_status(status, s, false);
}

/// Store an already completed request for a nonblocking file access.
fn completed_request(request: *mut c_int, s: &MpiStatus) -> MpiResult {
    if request.is_null() {
        mpi_bail!(MPI_ERR_ARG, "NULL pointer passed for request");
    }
    let es = EStatus {
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        error: None,
        count_bytes: crate::datatype::status_bytes(s),
        cancelled: false,
    };
    let h = lock().reqs.insert(Request {
        comm: MPI_COMM_SELF,
        persistent: None,
        active: Some(Pending {
            ereq: None,
            done: Some(es),
            stage: None,
            unpack: None,
            bsend_bytes: 0,
        }),
    });
    out(request, h, "request")
}

/// Begin a split collective: run it and keep its status for `_end`.
fn split_begin(f: &FileObj, r: MpiResult<MpiStatus>) -> MpiResult {
    let s = r?;
    f.state().split = Some(s);
    Ok(())
}

fn check_no_split(f: &FileObj) -> MpiResult {
    if f.state().split.is_some() {
        mpi_bail!(
            MPI_ERR_OTHER,
            "a split collective is already active on this file"
        );
    }
    Ok(())
}

fn split_end(f: &FileObj, status: *mut MpiStatus) -> MpiResult {
    match f.state().split.take() {
        Some(s) => {
            write_st(status, &s);
            Ok(())
        }
        None => mpi_bail!(MPI_ERR_OTHER, "no split collective is active on this file"),
    }
}

/// Blocking accesses that take an explicit offset.
macro_rules! access_at {
    ($($pname:ident $name:literal $write:literal $bt:ty;)*) => {$(
        mpi_fn! {
            #[doc = concat!("`", $name, "`.")]
            fn $pname / $name [OnFile(fh as usize)] (fh: FileH, offset: i64, buf: $bt, count: c_int, datatype: c_int, status: *mut MpiStatus) {
                let f = get(fh)?;
                let s = access(&f, At::Offset(offset), $write, buf as *mut c_void, count, datatype)?;
                write_st(status, &s);
                Ok(())
            }
        }
    )*};
}

access_at! {
    PMPI_File_read_at "MPI_File_read_at" false *mut c_void;
    PMPI_File_write_at "MPI_File_write_at" true *const c_void;
    PMPI_File_read_at_all "MPI_File_read_at_all" false *mut c_void;
    PMPI_File_write_at_all "MPI_File_write_at_all" true *const c_void;
}

/// Blocking accesses through a file pointer (individual or shared; `ordered` for the
/// collective shared-pointer forms).
macro_rules! access_ptr {
    ($($pname:ident $name:literal $write:literal $at:ident $bt:ty;)*) => {$(
        mpi_fn! {
            #[doc = concat!("`", $name, "`.")]
            fn $pname / $name [OnFile(fh as usize)] (fh: FileH, buf: $bt, count: c_int, datatype: c_int, status: *mut MpiStatus) {
                let f = get(fh)?;
                let s = access_ptr!(@go $at, &f, $write, buf as *mut c_void, count, datatype)?;
                write_st(status, &s);
                Ok(())
            }
        }
    )*};
    (@go Ordered, $f:expr, $w:expr, $b:expr, $c:expr, $d:expr) => { ordered($f, $w, $b, $c, $d) };
    (@go $at:ident, $f:expr, $w:expr, $b:expr, $c:expr, $d:expr) => { access($f, At::$at, $w, $b, $c, $d) };
}

access_ptr! {
    PMPI_File_read "MPI_File_read" false Individual *mut c_void;
    PMPI_File_write "MPI_File_write" true Individual *const c_void;
    PMPI_File_read_all "MPI_File_read_all" false Individual *mut c_void;
    PMPI_File_write_all "MPI_File_write_all" true Individual *const c_void;
    PMPI_File_read_shared "MPI_File_read_shared" false Shared *mut c_void;
    PMPI_File_write_shared "MPI_File_write_shared" true Shared *const c_void;
    PMPI_File_read_ordered "MPI_File_read_ordered" false Ordered *mut c_void;
    PMPI_File_write_ordered "MPI_File_write_ordered" true Ordered *const c_void;
}

/// Nonblocking accesses with an explicit offset (complete at once).
macro_rules! iaccess_at {
    ($($pname:ident $name:literal $write:literal $bt:ty;)*) => {$(
        mpi_fn! {
            #[doc = concat!("`", $name, "` (completes at once).")]
            fn $pname / $name [OnFile(fh as usize)] (fh: FileH, offset: i64, buf: $bt, count: c_int, datatype: c_int, request: *mut c_int) {
                let f = get(fh)?;
                if request.is_null() {
                    mpi_bail!(MPI_ERR_ARG, "NULL pointer passed for request");
                }
                let s = access(&f, At::Offset(offset), $write, buf as *mut c_void, count, datatype)?;
                completed_request(request, &s)
            }
        }
    )*};
}

iaccess_at! {
    PMPI_File_iread_at "MPI_File_iread_at" false *mut c_void;
    PMPI_File_iwrite_at "MPI_File_iwrite_at" true *const c_void;
    PMPI_File_iread_at_all "MPI_File_iread_at_all" false *mut c_void;
    PMPI_File_iwrite_at_all "MPI_File_iwrite_at_all" true *const c_void;
}

/// Nonblocking accesses through a file pointer (complete at once).
macro_rules! iaccess_ptr {
    ($($pname:ident $name:literal $write:literal $at:ident $bt:ty;)*) => {$(
        mpi_fn! {
            #[doc = concat!("`", $name, "` (completes at once).")]
            fn $pname / $name [OnFile(fh as usize)] (fh: FileH, buf: $bt, count: c_int, datatype: c_int, request: *mut c_int) {
                let f = get(fh)?;
                if request.is_null() {
                    mpi_bail!(MPI_ERR_ARG, "NULL pointer passed for request");
                }
                let s = access(&f, At::$at, $write, buf as *mut c_void, count, datatype)?;
                completed_request(request, &s)
            }
        }
    )*};
}

iaccess_ptr! {
    PMPI_File_iread "MPI_File_iread" false Individual *mut c_void;
    PMPI_File_iwrite "MPI_File_iwrite" true Individual *const c_void;
    PMPI_File_iread_all "MPI_File_iread_all" false Individual *mut c_void;
    PMPI_File_iwrite_all "MPI_File_iwrite_all" true Individual *const c_void;
    PMPI_File_iread_shared "MPI_File_iread_shared" false Shared *mut c_void;
    PMPI_File_iwrite_shared "MPI_File_iwrite_shared" true Shared *const c_void;
}

/// Split collectives with an explicit offset: `_begin` runs the access.
macro_rules! split_at {
    ($($pname:ident $name:literal $write:literal $bt:ty;)*) => {$(
        mpi_fn! {
            #[doc = concat!("`", $name, "` (the access runs here; `_end` returns its status).")]
            fn $pname / $name [OnFile(fh as usize)] (fh: FileH, offset: i64, buf: $bt, count: c_int, datatype: c_int) {
                let f = get(fh)?;
                check_no_split(&f)?;
                split_begin(&f, access(&f, At::Offset(offset), $write, buf as *mut c_void, count, datatype))
            }
        }
    )*};
}

split_at! {
    PMPI_File_read_at_all_begin "MPI_File_read_at_all_begin" false *mut c_void;
    PMPI_File_write_at_all_begin "MPI_File_write_at_all_begin" true *const c_void;
}

/// Split collectives through a file pointer.
macro_rules! split_ptr {
    ($($pname:ident $name:literal $write:literal $at:ident $bt:ty;)*) => {$(
        mpi_fn! {
            #[doc = concat!("`", $name, "` (the access runs here; `_end` returns its status).")]
            fn $pname / $name [OnFile(fh as usize)] (fh: FileH, buf: $bt, count: c_int, datatype: c_int) {
                let f = get(fh)?;
                check_no_split(&f)?;
                let r = access_ptr!(@go $at, &f, $write, buf as *mut c_void, count, datatype);
                split_begin(&f, r)
            }
        }
    )*};
}

split_ptr! {
    PMPI_File_read_all_begin "MPI_File_read_all_begin" false Individual *mut c_void;
    PMPI_File_write_all_begin "MPI_File_write_all_begin" true Individual *const c_void;
    PMPI_File_read_ordered_begin "MPI_File_read_ordered_begin" false Ordered *mut c_void;
    PMPI_File_write_ordered_begin "MPI_File_write_ordered_begin" true Ordered *const c_void;
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

/// The new position of a seek (etypes of the view).
fn seek_target(f: &FileObj, s: &FileState, cur: i64, offset: i64, whence: c_int) -> MpiResult<i64> {
    let new = match whence {
        MPI_SEEK_SET => offset,
        MPI_SEEK_CUR => cur + offset,
        MPI_SEEK_END => {
            let size = f
                .file
                .metadata()
                .map_err(|e| os_err(e, f.path.display()))?
                .len();
            let data = s.view.map.data_before(size);
            data.div_ceil(s.view.esize) as i64 + offset
        }
        _ => mpi_bail!(MPI_ERR_ARG, "invalid whence {whence}"),
    };
    if new < 0 {
        mpi_bail!(MPI_ERR_ARG, "seek to a negative position {new}");
    }
    Ok(new)
}

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
            let cur = f.shared.get().load(Ordering::SeqCst);
            match seek_target(&f, &s, cur, offset, whence) {
                Ok(new) => f.shared.get().store(new, Ordering::SeqCst),
                Err(e) => code = e.code,
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
        out(offset, f.shared.get().load(Ordering::SeqCst), "offset")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amode_rules() {
        assert!(check_amode(MPI_MODE_RDONLY).is_ok());
        assert!(check_amode(MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL).is_ok());
        assert!(check_amode(MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL | MPI_MODE_APPEND).is_ok());
        for bad in [
            0,
            MPI_MODE_RDONLY | MPI_MODE_WRONLY,
            MPI_MODE_RDONLY | MPI_MODE_CREATE,
            MPI_MODE_RDONLY | MPI_MODE_EXCL,
            MPI_MODE_RDWR | MPI_MODE_SEQUENTIAL,
            MPI_MODE_RDWR | 0x10000,
        ] {
            assert_eq!(
                check_amode(bad).unwrap_err().code,
                MPI_ERR_AMODE,
                "{bad:#x}"
            );
        }
    }

    #[test]
    fn os_errors_map_to_io_classes() {
        let c = |e| os_class(&std::io::Error::from_raw_os_error(e));
        assert_eq!(c(libc::ENOENT), MPI_ERR_NO_SUCH_FILE);
        assert_eq!(c(libc::EEXIST), MPI_ERR_FILE_EXISTS);
        assert_eq!(c(libc::EACCES), MPI_ERR_ACCESS);
        assert_eq!(c(libc::ENOSPC), MPI_ERR_NO_SPACE);
        assert_eq!(c(libc::EISDIR), MPI_ERR_BAD_FILE);
        assert_eq!(c(libc::EIO), MPI_ERR_IO);
    }

    #[test]
    fn unknown_handles_convert_to_null() {
        assert_eq!(file_c2f(std::ptr::null_mut()), 0);
        assert_eq!(file_c2f(0x7777 as FileH), 0);
        assert!(file_f2c(0).is_null());
        assert!(file_f2c(-3).is_null());
        assert!(file_f2c(0x7777).is_null());
    }

    #[test]
    fn merge_info_replaces_and_appends() {
        let mut i = vec![("a".to_string(), "1".to_string())];
        merge_info(
            &mut i,
            vec![("b".into(), "2".into()), ("a".into(), "3".into())],
        );
        assert_eq!(i, vec![("a".into(), "3".into()), ("b".into(), "2".into())]);
    }
}
