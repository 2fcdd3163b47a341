//! Data access: reads and writes through the view (individual, explicit-offset, shared
//! and ordered), byte-range locks for atomic mode, completed requests for nonblocking
//! calls, split collectives and seeks.

use super::collective::{allgather_i64, bcast_i64};
use super::datarep::Rep;
use super::file::{os_err, FileObj, FileState};
use super::two_phase;
use super::IO;
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

/// The widest file range a read of several segments covers with one `pread` (the segments
/// and the holes between them), as ROMIO's data sieving with its `ind_rd_buffer_size`
/// default: a strided read costs one system call instead of one per segment.
pub(super) const SIEVE_MAX: u64 = 4 << 20;

/// The file range `[lo, hi)` one sieving read covers for `segs`, when there are several
/// segments and the range is at most [`SIEVE_MAX`] bytes.
pub(super) fn sieve_range(segs: &[(u64, u64)]) -> Option<(u64, u64)> {
    if segs.len() < 2 {
        return None;
    }
    let lo = segs.iter().map(|s| s.0).min()?;
    let hi = segs.iter().map(|s| s.0 + s.1).max()?;
    (hi - lo <= SIEVE_MAX).then_some((lo, hi))
}

/// Copies the segments `segs` out of `got`, the bytes of the file from offset `lo` up to
/// the end of the file or of the sieving range, into `out` in segment order; stops after
/// the first segment that reaches past what was read (the end of the file), as reading
/// segment by segment does. Returns the bytes placed.
pub(super) fn scatter_sieved(segs: &[(u64, u64)], lo: u64, got: &[u8], out: &mut [u8]) -> usize {
    let end = lo + got.len() as u64;
    let mut pos = 0usize;
    for &(off, len) in segs {
        let k = end.saturating_sub(off).min(len) as usize;
        if k > 0 {
            let from = (off - lo) as usize;
            out[pos..pos + k].copy_from_slice(&got[from..from + k]);
        }
        pos += k;
        if k < len as usize {
            break;
        }
    }
    pos
}

/// Reads or writes the file segments `segs` from this process: a write puts `data` (the
/// segments' bytes, in segment order) into them; a read fills `out` the same way, up to the
/// end of the file (several segments within [`SIEVE_MAX`] bytes with one read of their
/// range, [`sieve_range`]). Returns the bytes written or read.
pub(super) fn direct(
    f: &FileObj,
    write: bool,
    segs: &[(u64, u64)],
    data: &[u8],
    out: &mut [u8],
) -> MpiResult<usize> {
    if let (false, Some((lo, hi))) = (write, sieve_range(segs)) {
        let mut got = vec![0u8; (hi - lo) as usize];
        let n = read_full(f, &mut got, lo)?;
        oxmpi_base::verbose!(
            IO,
            20,
            "io: read of {} segments of {} in one read of {} bytes at {lo} ({n} read)",
            segs.len(),
            f.path.display(),
            hi - lo
        );
        return Ok(scatter_sieved(segs, lo, &got[..n], out));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What reading `segs` one `pread` at a time gets from a file holding `file`.
    fn segment_by_segment(file: &[u8], segs: &[(u64, u64)], out: &mut [u8]) -> usize {
        let mut pos = 0;
        for &(off, len) in segs {
            let avail = file.len().saturating_sub(off as usize).min(len as usize);
            if avail > 0 {
                out[pos..pos + avail].copy_from_slice(&file[off as usize..off as usize + avail]);
            }
            pos += avail;
            if avail < len as usize {
                break;
            }
        }
        pos
    }

    #[test]
    fn a_sieved_read_gets_what_segment_by_segment_reads_get() {
        let file: Vec<u8> = (0..200u8).collect();
        // Strided (every other 4 bytes), irregular, touching, and one segment.
        let cases: [&[(u64, u64)]; 4] = [
            &[(8, 4), (16, 4), (24, 4), (32, 4)],
            &[(3, 1), (5, 7), (40, 2), (90, 30)],
            &[(0, 10), (10, 10)],
            &[(50, 20)],
        ];
        for segs in cases {
            let want_len: u64 = segs.iter().map(|s| s.1).sum();
            // Files ending before, inside and after every segment.
            for size in [0usize, 2, 9, 13, 30, 41, 100, 130, 200] {
                let f = &file[..size];
                let mut want = vec![0u8; want_len as usize];
                let n_want = segment_by_segment(f, segs, &mut want);
                let (lo, hi) = match sieve_range(segs) {
                    Some(r) => r,
                    None => {
                        assert_eq!(segs.len(), 1);
                        continue;
                    }
                };
                let got = &f[(lo as usize).min(size)..(hi as usize).min(size)];
                let mut out = vec![0u8; want_len as usize];
                let n = scatter_sieved(segs, lo, got, &mut out);
                assert_eq!(n, n_want, "{segs:?}, file of {size} bytes");
                assert_eq!(out[..n], want[..n], "{segs:?}, file of {size} bytes");
            }
        }
    }

    #[test]
    fn sieving_covers_several_segments_within_its_bound() {
        assert_eq!(sieve_range(&[(10, 4)]), None, "one segment: read as it is");
        assert_eq!(sieve_range(&[]), None);
        assert_eq!(sieve_range(&[(10, 4), (20, 4)]), Some((10, 24)));
        assert_eq!(
            sieve_range(&[(0, 1), (SIEVE_MAX - 1, 1)]),
            Some((0, SIEVE_MAX))
        );
        assert_eq!(sieve_range(&[(0, 1), (SIEVE_MAX, 1)]), None, "too wide");
    }
}
