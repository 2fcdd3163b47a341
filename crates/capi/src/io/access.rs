//! Data access: reads and writes through the view (individual, explicit-offset, shared
//! and ordered), byte-range locks for atomic mode, completed requests for nonblocking
//! calls, split collectives and seeks.

use super::collective::{allgather_i64, bcast_i64};
use super::datarep::Rep;
use super::file::{os_err, FileObj, FileState};
use super::two_phase;
use crate::backend::EStatus;
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from};
use crate::ffi::{check_count, out, MpiResult};
use crate::request::{write_status, MpiStatus, Pending, Request};
use crate::state::lock;
use crate::status::status_set_bytes;
use std::ffi::{c_int, c_void};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

/// Which file pointer a data access uses.
#[derive(Clone, Copy)]
pub(super) enum At {
    /// An explicit offset (etypes of the view).
    Offset(i64),
    Individual,
    Shared,
    /// An offset already reserved on the shared file pointer (ordered access).
    Reserved(i64),
    /// Ordered access (`MPI_File_read/write_ordered`): rank order on the shared pointer;
    /// [`access`] reserves the offset collectively and goes on as [`At::Reserved`].
    Ordered,
}

/// Fail for individual file pointers and explicit offsets on a file opened with
/// `MPI_MODE_SEQUENTIAL` (only the shared file pointer exists there).
pub(super) fn not_sequential(f: &FileObj) -> MpiResult {
    if f.amode & MPI_MODE_SEQUENTIAL != 0 {
        mpi_bail!(
            MPI_ERR_UNSUPPORTED_OPERATION,
            "{}: opened with MPI_MODE_SEQUENTIAL: only shared file pointer access is allowed",
            f.path.display()
        );
    }
    Ok(())
}

/// A data access with its checks done: the datatype, where it starts (etypes of the view)
/// and the file segments it touches.
struct Plan {
    dt: std::sync::Arc<crate::datatype::Datatype>,
    /// The datatype's handle (what a user data representation's callbacks get).
    dt_h: c_int,
    n: usize,
    nbytes: usize,
    at: At,
    start: i64,
    esize: u64,
    rep: Rep,
    atomic: bool,
    segs: Vec<(u64, u64)>,
}

impl Plan {
    /// Checks the arguments and the access mode, resolves the file pointer (reserving the
    /// shared pointer's or the ordered range) and maps the access through the view.
    fn new(
        f: &FileObj,
        at: At,
        write: bool,
        buf: *mut c_void,
        count: i64,
        datatype: c_int,
    ) -> MpiResult<Plan> {
        let checked = check_count(count).and_then(|n| {
            let dt = lock().dtype_committed(datatype)?;
            if buf.is_null() && n > 0 && dt.size > 0 && dt.predefined {
                mpi_bail!(MPI_ERR_BUFFER, "NULL buffer with count {n}");
            }
            Ok((n, dt))
        });
        // Ordered access reserves its range collectively: a rank whose arguments are bad
        // still takes part (so nobody waits for it), and then every rank fails.
        let reserved = matches!(at, At::Ordered).then(|| {
            ordered_offset(
                f,
                checked
                    .as_ref()
                    .map(|(n, dt)| n * dt.size)
                    .map_err(|e| e.code),
            )
        });
        let (n, dt) = checked?;
        let at = match reserved {
            Some(o) => At::Reserved(o?),
            None => at,
        };
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
        let s = f.state();
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
            At::Shared => f.shared.fetch_add(netypes)?,
            At::Ordered => unreachable!("ordered access is resolved to At::Reserved on entry"),
        };
        if nbytes > 0 && s.view.map.is_empty() {
            mpi_bail!(
                MPI_ERR_IO,
                "data access through a view whose filetype holds no data"
            );
        }
        Ok(Plan {
            segs: s.view.map.segments(start as u64 * esize, nbytes as u64),
            dt,
            dt_h: datatype,
            n,
            nbytes,
            at,
            start,
            esize,
            rep: s.view.rep.clone(),
            atomic: s.atomic,
        })
    }

    /// The bytes a write puts into the file, in segment order.
    fn pack(&self, buf: *mut c_void) -> MpiResult<Vec<u8>> {
        if let Rep::User(u) = &self.rep {
            if let Some(data) = u.convert_write(buf, &self.dt, self.dt_h, self.n)? {
                return Ok(data);
            }
        }
        let mut data = Vec::with_capacity(self.nbytes);
        // SAFETY: `buf` holds `n` items of `dt` (MPI contract of the write calls).
        unsafe { pack_into(&self.dt, self.n, buf as *const u8, &mut data) };
        if let Rep::External32 = self.rep {
            data = crate::external::file_to_external32(&self.dt, self.n, &data)?;
        }
        Ok(data)
    }

    /// Stores the `data` a read got into `buf`.
    fn unpack(&self, buf: *mut c_void, mut data: Vec<u8>) -> MpiResult {
        if let Rep::User(u) = &self.rep {
            if u.convert_read(buf, &self.dt, self.dt_h, &mut data)? {
                return Ok(());
            }
        }
        let native = if let Rep::External32 = self.rep {
            crate::external::file_from_external32(&self.dt, &data)?
        } else {
            data.shrink_to_fit();
            data
        };
        // SAFETY: `buf` has room for `n` items of `dt` (MPI contract of the read calls).
        unsafe { unpack_from(&self.dt, self.n, buf as *mut u8, &native) };
        Ok(())
    }

    /// Moves the individual pointer past the `done` bytes and makes the status.
    fn finish(&self, f: &FileObj, done: usize) -> MpiStatus {
        if let At::Individual = self.at {
            f.state().pos = self.start + (done as u64 / self.esize) as i64;
        }
        let mut st = MpiStatus {
            source: MPI_ANY_SOURCE,
            tag: MPI_ANY_TAG,
            error: MPI_SUCCESS,
            ..Default::default()
        };
        status_set_bytes(&mut st, done, false);
        st
    }
}

/// One data access: read into or write from `buf`.
pub(super) fn access(
    f: &FileObj,
    at: At,
    write: bool,
    buf: *mut c_void,
    count: i64,
    datatype: c_int,
) -> MpiResult<MpiStatus> {
    let p = Plan::new(f, at, write, buf, count, datatype)?;
    let done = if write {
        let data = p.pack(buf)?;
        let _lock = p.atomic.then(|| RangeLock::new(f, &p.segs, true));
        let done = direct(f, true, &p.segs, &data, &mut []);
        // Also after a failure: part of the data may be in the file.
        f.unsynced.wrote();
        done?
    } else {
        let mut data = vec![0u8; p.nbytes];
        let _lock = p.atomic.then(|| RangeLock::new(f, &p.segs, false));
        let pos = direct(f, false, &p.segs, &[], &mut data)?;
        data.truncate(pos);
        p.unpack(buf, data)?;
        pos
    };
    Ok(p.finish(f, done))
}

/// Reads or writes the file segments `segs` from this process: a write puts `data` (the
/// segments' bytes, in segment order) into them; a read fills `out` the same way, up to the
/// end of the file. Returns the bytes written or read.
pub(super) fn direct(
    f: &FileObj,
    write: bool,
    segs: &[(u64, u64)],
    data: &[u8],
    out: &mut [u8],
) -> MpiResult<usize> {
    let mut pos = 0usize;
    for &(off, len) in segs {
        let end = pos + len as usize;
        if write {
            f.file
                .write_all_at(&data[pos..end], off)
                .map_err(|e| os_err(e, f.path.display()))?;
            pos = end;
        } else {
            pos += read_full(f, &mut out[pos..end], off)?;
            if pos < end {
                break; // the end of the file
            }
        }
    }
    Ok(pos)
}

/// One collective data access (`_all`, `_at_all`, ordered): through the `fcoll` framework's
/// two-phase component ([`two_phase`]), or independently when it is deselected or the file
/// is in atomic mode. A rank whose own checks fail still takes part (with nothing), so the
/// others never wait for it; on the two-phase path (and for ordered access on either)
/// every rank then fails, see [`two_phase`]; on the independent path only the rank itself.
pub(super) fn access_all(
    f: &FileObj,
    at: At,
    write: bool,
    buf: *mut c_void,
    count: i64,
    datatype: c_int,
) -> MpiResult<MpiStatus> {
    // Atomic mode is a collective setting, so every rank takes the same path.
    if !two_phase::enabled() || f.state().atomic {
        return access(f, at, write, buf, count, datatype);
    }
    let plan = Plan::new(f, at, write, buf, count, datatype)
        .and_then(|p| Ok((if write { p.pack(buf)? } else { Vec::new() }, p)));
    let (segs, data, check): (&[(u64, u64)], &[u8], i32) = match &plan {
        Ok((data, p)) => (&p.segs, data, 0),
        Err(e) => (&[], &[], failed_class(e.code)),
    };
    let mut got = vec![0u8; if write { 0 } else { data_len(&plan) }];
    let mine = two_phase::Mine { segs, data, check };
    let done = two_phase::run(f, write, mine, &mut got);
    if write {
        // Every rank of a collective write notes it, the ranks whose pieces an
        // aggregator wrote too: each one's MPI_File_sync then flushes the file itself.
        f.unsynced.wrote();
    }
    let (_, p) = plan?;
    let done = done?;
    if !write {
        got.truncate(done);
        p.unpack(buf, got)?;
    }
    Ok(p.finish(f, done))
}

/// The bytes a planned read asks for (0 for a failed plan).
fn data_len<T>(plan: &MpiResult<(T, Plan)>) -> usize {
    plan.as_ref().map_or(0, |(_, p)| p.nbytes)
}

/// Reads into `buf` at `off` until it is full or the file ends; the bytes read.
pub(super) fn read_full(f: &FileObj, buf: &mut [u8], off: u64) -> MpiResult<usize> {
    let mut pos = 0;
    while pos < buf.len() {
        match f.file.read_at(&mut buf[pos..], off + pos as u64) {
            Ok(0) => break,
            Ok(k) => pos += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(os_err(e, f.path.display())),
        }
    }
    Ok(pos)
}

/// A POSIX record lock over the byte range an atomic-mode access touches.
pub(super) struct RangeLock<'a> {
    pub(super) f: &'a FileObj,
    pub(super) start: u64,
    pub(super) len: u64,
}

impl<'a> RangeLock<'a> {
    pub(super) fn new(f: &'a FileObj, segs: &[(u64, u64)], write: bool) -> Option<Self> {
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
    pub(super) fn fcntl(&self, ty: c_int) {
        crate::sys::set_record_lock(self.f.file.as_fd(), ty, self.start, self.len);
    }
}

impl Drop for RangeLock<'_> {
    fn drop(&mut self) {
        self.fcntl(libc::F_UNLCK);
    }
}

/// The error code a failed check passes on to the other ranks (never `MPI_SUCCESS`).
fn failed_class(code: c_int) -> c_int {
    if code > 0 {
        code
    } else {
        MPI_ERR_OTHER
    }
}

/// The offset (etypes of the view) of this rank's `nbytes` in an ordered access: the
/// shared pointer advances by everyone's total, each rank placed in rank order. `nbytes`
/// is the error class instead when this rank's arguments failed their checks: it still
/// takes part, and then every rank fails and the shared pointer stays where it is.
fn ordered_offset(f: &FileObj, nbytes: Result<usize, c_int>) -> MpiResult<i64> {
    let esize = f.state().view.esize;
    // A failed check travels as its negated error class (a count is never negative).
    let mine = match nbytes {
        Ok(b) => (b as u64 / esize) as i64,
        Err(code) => -i64::from(failed_class(code)),
    };
    let all = allgather_i64(mine, f.comm)?;
    if let Some(r) = all.iter().position(|&x| x < 0) {
        mpi_bail!(
            (-all[r]) as c_int,
            "{}: rank {r} of the file's group failed the argument checks of this ordered access; the shared file pointer did not move",
            f.path.display()
        );
    }
    let before: i64 = all[..f.rank as usize].iter().sum();
    let total: i64 = all.iter().sum();
    let base = if f.rank == 0 {
        f.shared.fetch_add(total)?
    } else {
        0
    };
    let base = bcast_i64(base, 0, f.comm)?;
    Ok(base + before)
}

/// Write the status `s` of a file access to the caller's `status`.
pub(super) fn write_st(status: *mut MpiStatus, s: &MpiStatus) {
    write_status(status, s, false);
}

/// Store an already completed request for a nonblocking file access.
pub(super) fn completed_request(request: *mut c_int, s: &MpiStatus) -> MpiResult {
    if request.is_null() {
        mpi_bail!(MPI_ERR_ARG, "NULL pointer passed for request");
    }
    let es = EStatus {
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        error: None,
        count_bytes: crate::status::status_bytes(s),
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
pub(super) fn split_begin(f: &FileObj, r: MpiResult<MpiStatus>) -> MpiResult {
    let s = r?;
    f.state().split = Some(s);
    Ok(())
}

/// Fail if a split collective is active on `f` (one at a time per file handle).
pub(super) fn check_no_split(f: &FileObj) -> MpiResult {
    if f.state().split.is_some() {
        mpi_bail!(
            MPI_ERR_OTHER,
            "a split collective is already active on this file"
        );
    }
    Ok(())
}

/// End the split collective active on `f`: hand its status over.
pub(super) fn split_end(f: &FileObj, status: *mut MpiStatus) -> MpiResult {
    match f.state().split.take() {
        Some(s) => {
            write_st(status, &s);
            Ok(())
        }
        None => mpi_bail!(MPI_ERR_OTHER, "no split collective is active on this file"),
    }
}

/// The new position of a seek (etypes of the view).
pub(super) fn seek_target(
    f: &FileObj,
    s: &FileState,
    cur: i64,
    offset: i64,
    whence: c_int,
) -> MpiResult<i64> {
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
