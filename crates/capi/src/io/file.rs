//! Open files: the handle table, the file object and its state, opening (rank 0 first,
//! then the others), OS error classes, info entries and the collectives a file runs on
//! its private communicator.

use super::collective::{allgather_i64, bcast_i64};
use super::datarep::Rep;
use super::sharedfp::{shared_ptr, SharedPtr};
use super::view::ViewMap;
use crate::consts::*;
use crate::datatype::Datatype;
use crate::errors::ErrAction;
use crate::ffi::{MpiError, MpiResult};
use crate::request::MpiStatus;
use crate::state::lock;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// `MPI_File` as the C side sees it.
pub(super) type FileH = *mut c_void;

/// The current view of a file handle.
#[derive(Clone)]
pub(super) struct View {
    pub(super) disp: i64,
    pub(super) etype: Arc<Datatype>,
    /// The handle the user passed for a predefined etype (`Get_view` returns it).
    pub(super) etype_h: c_int,
    pub(super) ftype: Arc<Datatype>,
    pub(super) ftype_h: c_int,
    pub(super) map: ViewMap,
    /// Size of the etype in bytes (view positions count etypes).
    pub(super) esize: u64,
    /// The data representation.
    pub(super) rep: Rep,
}

/// Mutable per-handle state.
pub(super) struct FileState {
    pub(super) view: View,
    /// The individual file pointer, in etypes of the view.
    pub(super) pos: i64,
    pub(super) errh: c_int,
    pub(super) err_action: ErrAction,
    pub(super) info: Vec<(String, String)>,
    pub(super) atomic: bool,
    /// The result of a split collective begun and not yet ended.
    pub(super) split: Option<MpiStatus>,
}

/// An open file.
pub(super) struct FileObj {
    pub(super) file: File,
    pub(super) path: PathBuf,
    pub(super) amode: c_int,
    /// Private duplicate of the communicator the file was opened on.
    pub(super) comm: c_int,
    pub(super) rank: i32,
    pub(super) group: Vec<i32>,
    pub(super) shared: SharedPtr,
    pub(super) st: Mutex<FileState>,
    /// Whether this process wrote to the file since its last `MPI_File_sync`.
    pub(super) unsynced: Unsynced,
}

/// Whether a process has writes to a file handle that no `MPI_File_sync` has flushed yet.
/// `MPI_File_sync` transfers "all previous writes to fh by the calling process" to the
/// storage device (MPI-4.1 §14.6.1): a process with none since its last successful sync has
/// nothing to transfer, and skips the `fdatasync` (as ROMIO's `dirty_write` does). Every
/// write path notes its write here after it reached the file (so a sync running at the same
/// time on another thread either flushes it or leaves the flag set for the next one).
pub(super) struct Unsynced(AtomicBool);

impl Unsynced {
    /// A handle's flag at open: set when the handle can write (the open may have created
    /// the file), clear for a read-only handle.
    pub(super) fn new(writable: bool) -> Self {
        Unsynced(AtomicBool::new(writable))
    }

    /// Notes a write, or a size change, by this process (call after it reached the file).
    pub(super) fn wrote(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// `MPI_File_sync`'s flush: runs `flush` if this process wrote since the last
    /// successful flush and returns whether it ran; a failed flush leaves the writes
    /// pending for the next sync.
    pub(super) fn sync(
        &self,
        flush: impl FnOnce() -> std::io::Result<()>,
    ) -> std::io::Result<bool> {
        if !self.0.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        flush().inspect_err(|_| self.wrote())?;
        Ok(true)
    }
}

impl FileObj {
    pub(super) fn state(&self) -> MutexGuard<'_, FileState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The table of open files and the error handler of `MPI_FILE_NULL`.
pub(super) struct Files {
    pub(super) open: BTreeMap<usize, Arc<FileObj>>,
    pub(super) next: usize,
    pub(super) null_errh: c_int,
    pub(super) null_action: ErrAction,
}

/// The open files.
static FILES: Mutex<Files> = Mutex::new(Files {
    open: BTreeMap::new(),
    next: 1,
    null_errh: MPI_ERRORS_RETURN,
    null_action: ErrAction::Return,
});

/// The table of open files, locked (a poisoned lock is taken over).
pub(super) fn files() -> MutexGuard<'static, Files> {
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

/// The open file of handle `fh`.
pub(super) fn get(fh: FileH) -> MpiResult<Arc<FileObj>> {
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
pub(super) fn action_of(fh: usize) -> ErrAction {
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

/// The MPI error class of an OS error.
pub(super) fn os_class(e: &std::io::Error) -> c_int {
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

/// An OS error of `what` as an MPI error of the matching I/O class.
pub(super) fn os_err(e: std::io::Error, what: impl std::fmt::Display) -> MpiError {
    MpiError::new(os_class(&e), format!("{what}: {e}"))
}

/// The entries of an info handle (`MPI_INFO_NULL` and `MPI_INFO_ENV` add none).
pub(super) fn info_entries(h: c_int) -> MpiResult<Vec<(String, String)>> {
    if h == MPI_INFO_NULL || h == MPI_INFO_ENV {
        return Ok(Vec::new());
    }
    match lock().infos.get(h) {
        Some(i) => Ok(i.entries.clone()),
        None => mpi_bail!(MPI_ERR_INFO, "invalid info handle {h:#x}"),
    }
}

/// Set the entries of `new` in `into` (replacing values of existing keys).
pub(super) fn merge_info(into: &mut Vec<(String, String)>, new: Vec<(String, String)>) {
    for (k, v) in new {
        match into.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.1 = v,
            None => into.push((k, v)),
        }
    }
}

/// Check an access mode (MPI-3.1 §13.2.1).
pub(super) fn check_amode(amode: c_int) -> MpiResult {
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
pub(super) fn path_arg(p: *const c_char) -> MpiResult<PathBuf> {
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

/// Open `path` on this rank with the POSIX flags of `amode` (`create`: allowed to create
/// it, only rank 0 is).
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

/// The view of a freshly opened file: displacement 0, etype and filetype `MPI_BYTE`.
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
        rep: Rep::Native,
    })
}

/// The collective part of `MPI_File_open` on the private communicator `comm`.
pub(super) fn open_on(
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
    let shared = shared_ptr(comm, size, init)?;
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
        unsynced: Unsynced::new(amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR) != 0),
    })
}

/// Free the file's private communicator.
pub(super) fn free_comm(c: c_int) {
    let _ = crate::comm::free(c);
}

/// The file handle `*fh` (0 if `fh` is NULL), for routing the errors of `MPI_File_close`.
pub(super) fn handle_behind(fh: *mut FileH) -> usize {
    if fh.is_null() {
        return 0;
    }
    // SAFETY: a non-NULL `MPI_File*` from the caller points to a readable handle.
    (unsafe { fh.read_unaligned() }) as usize
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
    fn sync_flushes_only_what_this_process_wrote_since_the_last_sync() {
        let flushes = std::cell::Cell::new(0);
        let flush = || {
            flushes.set(flushes.get() + 1);
            Ok(())
        };
        // Read-only: never anything to flush; writable: the open may have created the file.
        assert!(!Unsynced::new(false).sync(flush).unwrap());
        let u = Unsynced::new(true);
        assert!(u.sync(flush).unwrap());
        assert!(!u.sync(flush).unwrap());
        assert_eq!(flushes.get(), 1);
        // A write, then the sync, barrier, sync recipe: one flush.
        u.wrote();
        assert!(u.sync(flush).unwrap());
        assert!(!u.sync(flush).unwrap());
        assert_eq!(flushes.get(), 2);
        // A failed flush keeps the writes for the next sync.
        u.wrote();
        let failing = || Err(std::io::Error::from_raw_os_error(libc::EIO));
        assert!(u.sync(failing).is_err());
        assert!(u.sync(flush).unwrap());
        assert_eq!(flushes.get(), 3);
        // A write noted while a flush runs (another thread) is flushed by the next sync.
        u.wrote();
        assert!(u
            .sync(|| {
                u.wrote();
                Ok(())
            })
            .unwrap());
        assert!(u.sync(flush).unwrap());
        assert!(!u.sync(flush).unwrap());
        assert_eq!(flushes.get(), 4);
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
