//! One-sided communication (MPI-3.1 RMA): windows, put/get, the accumulate family,
//! fence, passive-target locks, PSCW, window attributes, names, info and error handlers.
//!
//! Design: all ranks of a job share a node, so RMA is truly one-sided and never needs the
//! target to call MPI.
//!
//! * Every window has one **shared segment** (a `memfd` created by rank 0 of the window's
//!   communicator, mapped by every rank through `/proc/<pid>/fd/<fd>`). It starts with one
//!   control block per rank (the passive-target reader/writer lock word, the accumulate
//!   mutex, PSCW counters), followed — for `MPI_Win_allocate` and
//!   `MPI_Win_allocate_shared` — by the window memory of every rank. Put/get on those
//!   windows are plain copies through the mapping; `MPI_Win_shared_query` returns the
//!   peer's memory in our mapping (contiguous across ranks for shared windows).
//! * `MPI_Win_create` (user memory) and `MPI_Win_create_dynamic` reach other ranks' memory
//!   with cross-memory attach (`process_vm_readv`/`process_vm_writev`). Creation probes
//!   every peer once; if the kernel denies it (`EPERM`, e.g. Yama `ptrace_scope` 2/3),
//!   creation fails on every rank with `MPI_ERR_RMA_ATTACH` and a message naming the rank.
//! * Operations complete at the origin before the call returns, so `flush*` only order
//!   memory; accumulate-family operations take the target's accumulate mutex, which makes
//!   them atomic with respect to each other.
//! * Fence is a barrier on the window's private communicator (a duplicate of the user's)
//!   between memory fences. PSCW uses monotonic counters in the control blocks: `post`
//!   increments `posted[me]` at each origin, `start` waits for it, `complete` increments
//!   the target's `completed`, `wait`/`test` compare it with the number of expected
//!   completions.
//!
//! Errors of window calls go through the window's error handler (default
//! `MPI_ERRORS_ARE_FATAL`); errors of creation calls through the communicator's.

use crate::comm::Internal;
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::errors::ErrAction;
use crate::ffi::{check_count, copy_cstr, inp, out, read_cstr, ErrorOwner, MpiError, MpiResult};
use crate::state::{lock, Table};
use oxmpi_engine::sys::{cma_copy, memfd, open_peer_fd, Cma, Mapping};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void};
use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// MPICH object type of windows (bits 26-29 of a handle).
const KIND_WIN: u32 = 8;

/// Writer bit of the passive-target lock word (the low bits count readers).
const WRITER: u64 = 1 << 63;

/// Bytes of the fixed part of a control block (lock word, accumulate mutex, completions).
const CTRL_HEAD: usize = 64;

/// Value the CMA probe word holds.
const PROBE_MAGIC: u64 = 0x6f78_6d70_6957_696e;

/// How the memory of one target rank is reached.
#[derive(Clone, Copy, Debug)]
struct Target {
    /// Base address: in our own address space when `local`, else in the target's.
    base: usize,
    /// Window size in bytes (`None` for dynamic windows: any attached address).
    size: Option<usize>,
    disp_unit: isize,
    pid: i32,
    /// True when `base` is an address of this process (own memory or the shared segment).
    local: bool,
}

/// The immutable part of a window, shared with operations running without the table lock.
struct Inner {
    comm: c_int,
    rank: usize,
    nranks: usize,
    flavor: c_int,
    seg: Mapping,
    ctrl_stride: usize,
    targets: Vec<Target>,
}

impl Inner {
    /// Word `i` of rank `r`'s control block.
    fn word(&self, r: usize, off: usize) -> &AtomicU64 {
        debug_assert!(off + 8 <= self.ctrl_stride);
        // SAFETY: the control blocks lie at the start of the segment, `ctrl_stride` bytes
        // each, 8-byte aligned (the mapping is page aligned); the mapping lives as long
        // as `self`. Shared memory is only accessed through atomics here.
        unsafe { &*(self.seg.ptr().add(r * self.ctrl_stride + off) as *const AtomicU64) }
    }
    fn lock_word(&self, r: usize) -> &AtomicU64 {
        self.word(r, 0)
    }
    fn acc_mutex(&self, r: usize) -> &AtomicU64 {
        self.word(r, 8)
    }
    fn completed(&self, r: usize) -> &AtomicU64 {
        self.word(r, 16)
    }
    /// Number of `post`s rank `from` made to rank `r` (as origin).
    fn posted(&self, r: usize, from: usize) -> &AtomicU64 {
        self.word(r, CTRL_HEAD + 8 * from)
    }
}

/// Passive-target lock held by this process on one target.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Held {
    Shared,
    Exclusive,
}

/// A window.
struct Win {
    inner: Arc<Inner>,
    // Attribute storage: `MPI_Win_get_attr` hands out pointers to these, so the window is
    // boxed in the table.
    base: usize,
    size: isize,
    disp_unit: c_int,
    flavor: c_int,
    model: c_int,
    name: String,
    info: Vec<(String, String)>,
    errh: c_int,
    err_action: ErrAction,
    attrs: BTreeMap<c_int, usize>,
    held: BTreeMap<usize, Held>,
    lock_all: bool,
    /// Posts consumed by `start`, per target.
    consumed: Vec<u64>,
    access: Option<Vec<usize>>,
    /// Completions expected by the current (or last) exposure epoch, cumulative.
    expected: u64,
    exposure: bool,
    /// Regions attached to a dynamic window (address, size).
    attached: Vec<(usize, usize)>,
}

static WINS: Mutex<Table<Box<Win>>> = Mutex::new(Table::new(KIND_WIN, 0));

fn wins() -> MutexGuard<'static, Table<Box<Win>>> {
    WINS.lock().unwrap_or_else(|p| p.into_inner())
}

fn bad_win(h: c_int) -> MpiError {
    if h == MPI_WIN_NULL {
        MpiError::new(MPI_ERR_WIN, "MPI_WIN_NULL passed")
    } else {
        MpiError::new(MPI_ERR_WIN, format!("invalid window handle {h:#x}"))
    }
}

/// Run `f` on window `h` under the table lock.
fn with_win<R>(h: c_int, f: impl FnOnce(&mut Win) -> MpiResult<R>) -> MpiResult<R> {
    let mut t = wins();
    let w = t.get_mut(h).ok_or_else(|| bad_win(h))?;
    f(w)
}

fn inner(h: c_int) -> MpiResult<Arc<Inner>> {
    with_win(h, |w| Ok(w.inner.clone()))
}

// ---- entry points with window error handling ----

/// Errors of window calls go to the window's error handler; to the communicator's (or
/// `MPI_COMM_WORLD`'s) when the error names a communicator or the window is invalid.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OnWin(pub c_int);

impl ErrorOwner for OnWin {
    fn raise(&self, func: &str, err: &MpiError) -> c_int {
        let action = if err.comm.is_some() {
            None
        } else {
            wins().get(self.0).map(|w| w.err_action)
        };
        match action {
            None => crate::errors::raise(func, err),
            Some(a) => {
                let mut w = self.0;
                crate::errors::act(func, err, a, &mut w, "the window's error handler")
            }
        }
    }
}

// ---- helpers: internal collectives, system calls ----

/// An error of the library's own collective `what` on the window's communicator: its class,
/// for the window's error handler (not the communicator's).
fn internal(what: &'static str) -> impl Fn(MpiError) -> MpiError {
    move |e| {
        MpiError::new(
            e.code,
            format!("{what} failed inside a window call: {}", e.detail),
        )
    }
}

/// Barrier on the window's private communicator.
fn barrier(comm: c_int) -> MpiResult {
    Internal::of(comm)
        .and_then(|c| c.barrier())
        .map_err(internal("MPI_Barrier"))
}

/// Free the window's private communicator.
fn free_comm(comm: c_int) {
    let _ = crate::comm::free(comm);
}

/// Wait (spinning, then yielding and driving the engine) until `cond` holds.
fn spin_until(mut cond: impl FnMut() -> bool) {
    let mut n = 0u32;
    while !cond() {
        n += 1;
        if n < 64 {
            std::hint::spin_loop();
        } else {
            if let Some(e) = oxmpi_engine::engine() {
                e.progress();
            }
            std::thread::yield_now();
        }
    }
}

fn os_err(e: std::io::Error, rank: usize, pid: i32, what: &str) -> MpiError {
    let class = match e.raw_os_error() {
        Some(libc::EFAULT) => MPI_ERR_RMA_RANGE,
        Some(libc::EPERM) => MPI_ERR_RMA_ATTACH,
        _ => MPI_ERR_OTHER,
    };
    MpiError::new(
        class,
        format!("{what} of rank {rank} (pid {pid}) failed: {e}"),
    )
}

// ---- data movement ----

/// Byte ranges (offset from a target's base, length).
type Ranges = Vec<(isize, usize)>;

/// Byte ranges (offset from the target's base, length) of `count` items of `dt` starting
/// at byte `start`, in type-map order, adjacent ranges merged.
fn ranges(dt: &Datatype, count: usize, start: isize) -> Ranges {
    let mut v: Ranges = Vec::new();
    for i in 0..count {
        let base = start + i as isize * dt.extent();
        for b in &dt.blocks {
            if b.len == 0 {
                continue;
            }
            let off = base + b.disp;
            match v.last_mut() {
                Some(last) if last.0 + last.1 as isize == off => last.1 += b.len,
                _ => v.push((off, b.len)),
            }
        }
    }
    v
}

impl Inner {
    fn target(&self, t: usize) -> Target {
        self.targets[t]
    }

    /// Check a range against the target's window and return its address.
    fn addr(&self, t: usize, off: isize, len: usize) -> MpiResult<usize> {
        let tg = self.target(t);
        if let Some(size) = tg.size {
            if off < 0 || off as usize + len > size {
                mpi_bail!(
                    MPI_ERR_RMA_RANGE,
                    "bytes {off}..{} are outside the {size}-byte window of rank {t}",
                    off + len as isize
                );
            }
        }
        Ok((tg.base as isize).wrapping_add(off) as usize)
    }

    /// Read the ranges of target `t` into one packed buffer.
    fn read(&self, t: usize, rs: &[(isize, usize)]) -> MpiResult<Vec<u8>> {
        let total: usize = rs.iter().map(|r| r.1).sum();
        let mut buf = vec![0u8; total];
        let tg = self.target(t);
        let mut pos = 0;
        for &(off, len) in rs {
            let a = self.addr(t, off, len)?;
            if tg.local {
                // SAFETY: `a` is in our address space: the shared segment (range checked
                // above) or our own window memory / attached region (the MPI contract).
                unsafe { std::ptr::copy(a as *const u8, buf.as_mut_ptr().add(pos), len) };
            } else {
                // SAFETY: `buf[pos..pos + len]` is ours and writable.
                unsafe { cma_copy(tg.pid, buf.as_mut_ptr().add(pos), a as u64, len, Cma::Read) }
                    .map_err(|e| os_err(e, t, tg.pid, "reading the window memory"))?;
            }
            pos += len;
        }
        Ok(buf)
    }

    /// Write one packed buffer over the ranges of target `t`.
    fn write(&self, t: usize, rs: &[(isize, usize)], data: &[u8]) -> MpiResult {
        let tg = self.target(t);
        let mut pos = 0;
        for &(off, len) in rs {
            let a = self.addr(t, off, len)?;
            let len = len.min(data.len() - pos);
            if tg.local {
                // SAFETY: as in `read`, for writing; `data[pos..pos + len]` is in bounds.
                unsafe { std::ptr::copy(data.as_ptr().add(pos), a as *mut u8, len) };
            } else {
                // SAFETY: `data[pos..pos + len]` is readable (cma only reads it when
                // writing to the remote).
                unsafe {
                    cma_copy(
                        tg.pid,
                        data.as_ptr().add(pos).cast_mut(),
                        a as u64,
                        len,
                        Cma::Write,
                    )
                }
                .map_err(|e| os_err(e, t, tg.pid, "writing the window memory"))?;
            }
            pos += len;
        }
        Ok(())
    }

    fn acc_lock(&self, t: usize) {
        let m = self.acc_mutex(t);
        spin_until(|| {
            m.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        });
    }
    fn acc_unlock(&self, t: usize) {
        self.acc_mutex(t).store(0, Ordering::Release);
    }
}

/// Validated arguments of one operation on a target.
struct Access {
    inner: Arc<Inner>,
    /// `None` for `MPI_PROC_NULL`.
    target: Option<usize>,
    start: isize,
}

fn access(win: c_int, target_rank: c_int, target_disp: isize) -> MpiResult<Access> {
    let inner = inner(win)?;
    if target_rank == MPI_PROC_NULL {
        return Ok(Access {
            inner,
            target: None,
            start: 0,
        });
    }
    if target_rank < 0 || target_rank as usize >= inner.nranks {
        mpi_bail!(
            MPI_ERR_RANK,
            "target rank {target_rank} is not in the window's group of {} ranks",
            inner.nranks
        );
    }
    let t = target_rank as usize;
    if target_disp < 0 && inner.flavor != MPI_WIN_FLAVOR_DYNAMIC {
        mpi_bail!(MPI_ERR_DISP, "negative target displacement {target_disp}");
    }
    let start = target_disp.wrapping_mul(inner.targets[t].disp_unit);
    Ok(Access {
        inner,
        target: Some(t),
        start,
    })
}

fn dtype(h: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h)
}

/// Pack `count` items of `h` at `buf`.
fn pack(buf: *const c_void, count: c_int, h: c_int) -> MpiResult<(Arc<Datatype>, Vec<u8>)> {
    let n = check_count(count)?;
    let dt = dtype(h)?;
    let mut v = Vec::new();
    if n > 0 && dt.size > 0 {
        if buf.is_null() && dt.true_lb >= 0 && dt.predefined {
            mpi_bail!(MPI_ERR_BUFFER, "NULL origin buffer");
        }
        // SAFETY: the caller's buffer holds `count` items of the datatype (MPI contract).
        unsafe { pack_into(&dt, n, buf.cast(), &mut v) };
    }
    Ok((dt, v))
}

/// The target ranges of `count` items of `h`, checked against the origin's byte count.
fn target_ranges(
    a: &Access,
    count: c_int,
    h: c_int,
    origin_bytes: usize,
) -> MpiResult<(Arc<Datatype>, Ranges)> {
    let n = check_count(count)?;
    let dt = dtype(h)?;
    if n * dt.size != origin_bytes {
        mpi_bail!(
            MPI_ERR_TYPE,
            "origin data ({origin_bytes} bytes) and target data ({} bytes) differ in size",
            n * dt.size
        );
    }
    let rs = ranges(&dt, n, a.start);
    Ok((dt, rs))
}

#[allow(clippy::too_many_arguments)]
fn do_put(
    origin: *const c_void,
    ocount: c_int,
    otype: c_int,
    trank: c_int,
    tdisp: isize,
    tcount: c_int,
    ttype: c_int,
    win: c_int,
) -> MpiResult {
    let a = access(win, trank, tdisp)?;
    let (_, data) = pack(origin, ocount, otype)?;
    let (_, rs) = target_ranges(&a, tcount, ttype, data.len())?;
    let Some(t) = a.target else { return Ok(()) };
    a.inner.write(t, &rs, &data)
}

#[allow(clippy::too_many_arguments)]
fn do_get(
    origin: *mut c_void,
    ocount: c_int,
    otype: c_int,
    trank: c_int,
    tdisp: isize,
    tcount: c_int,
    ttype: c_int,
    win: c_int,
) -> MpiResult {
    let a = access(win, trank, tdisp)?;
    let n = check_count(ocount)?;
    let odt = dtype(otype)?;
    let (_, rs) = target_ranges(&a, tcount, ttype, n * odt.size)?;
    let Some(t) = a.target else { return Ok(()) };
    let data = a.inner.read(t, &rs)?;
    // SAFETY: the origin buffer holds `ocount` items of the origin datatype.
    unsafe { unpack_from(&odt, n, origin.cast(), &data) };
    Ok(())
}

/// The predefined basic type an accumulate works on, and its size.
fn acc_basic(op: c_int, odt: &Datatype, tdt: &Datatype) -> MpiResult<(c_int, usize)> {
    if !(MPI_MAX..=MPI_NO_OP).contains(&op) {
        if op == MPI_OP_NULL {
            mpi_bail!(MPI_ERR_OP, "MPI_OP_NULL passed");
        }
        mpi_bail!(
            MPI_ERR_OP,
            "operation {op:#x} cannot be used in RMA (only predefined operations can)"
        );
    }
    let (Some(tb), ob) = (tdt.basic, odt.basic) else {
        mpi_bail!(
            MPI_ERR_TYPE,
            "accumulate target datatype mixes different basic types"
        );
    };
    if op != MPI_NO_OP && odt.size > 0 && ob != Some(tb) {
        mpi_bail!(
            MPI_ERR_TYPE,
            "accumulate origin and target datatypes have different basic types"
        );
    }
    let sz = lock().dtype(tb)?.size.max(1);
    Ok((tb, sz))
}

/// Combine `origin` into `cur` (`cur = origin op cur`).
fn combine(op: c_int, basic: c_int, bsize: usize, origin: &[u8], cur: &mut [u8]) -> MpiResult {
    match op {
        MPI_NO_OP => Ok(()),
        MPI_REPLACE => {
            cur.copy_from_slice(origin);
            Ok(())
        }
        _ => {
            let len = cur.len();
            if len == 0 {
                return Ok(());
            }
            // The reduction functions need buffers aligned for the element type: copy
            // into 16-byte aligned storage.
            let words = len.div_ceil(16);
            let mut a = vec![0u128; words];
            let mut b = vec![0u128; words];
            // SAFETY: `a` and `b` hold at least `len` bytes; the sources hold `len` bytes
            // (origin.len() == cur.len() is checked by the callers).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    origin.as_ptr(),
                    a.as_mut_ptr().cast::<u8>(),
                    len.min(origin.len()),
                );
                std::ptr::copy_nonoverlapping(cur.as_ptr(), b.as_mut_ptr().cast::<u8>(), len);
            }
            // SAFETY: both buffers hold len / bsize aligned elements of `basic`.
            let ok = unsafe {
                crate::op::apply_builtin(
                    op,
                    basic,
                    a.as_ptr().cast(),
                    b.as_mut_ptr().cast(),
                    len / bsize,
                )
            };
            if !ok {
                mpi_bail!(
                    MPI_ERR_OP,
                    "operation {op:#x} is not defined for datatype {basic:#x}"
                );
            }
            // SAFETY: `b` holds `len` initialized bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(b.as_ptr().cast::<u8>(), cur.as_mut_ptr(), len)
            };
            Ok(())
        }
    }
}

/// Accumulate (and fetch the previous contents into `result`, if given).
#[allow(clippy::too_many_arguments)]
fn do_accumulate(
    origin: *const c_void,
    ocount: c_int,
    otype: c_int,
    result: Option<(*mut c_void, c_int, c_int)>,
    trank: c_int,
    tdisp: isize,
    tcount: c_int,
    ttype: c_int,
    op: c_int,
    win: c_int,
) -> MpiResult {
    let a = access(win, trank, tdisp)?;
    let (odt, data) = if op == MPI_NO_OP {
        (dtype(otype)?, Vec::new())
    } else {
        pack(origin, ocount, otype)?
    };
    let n = check_count(tcount)?;
    let tdt = dtype(ttype)?;
    let tbytes = n * tdt.size;
    if op != MPI_NO_OP && data.len() != tbytes {
        mpi_bail!(
            MPI_ERR_TYPE,
            "origin data ({} bytes) and target data ({tbytes} bytes) differ in size",
            data.len()
        );
    }
    let (basic, bsize) = acc_basic(op, &odt, &tdt)?;
    let res = match result {
        Some((buf, count, h)) => {
            let rn = check_count(count)?;
            let rdt = dtype(h)?;
            if rn * rdt.size != tbytes {
                mpi_bail!(
                    MPI_ERR_TYPE,
                    "result data ({} bytes) and target data ({tbytes} bytes) differ in size",
                    rn * rdt.size
                );
            }
            Some((buf, rn, rdt))
        }
        None => None,
    };
    let Some(t) = a.target else { return Ok(()) };
    let rs = ranges(&tdt, n, a.start);
    let inner = &a.inner;
    inner.acc_lock(t);
    let r = (|| {
        let mut cur = if op == MPI_REPLACE && res.is_none() {
            vec![0u8; tbytes]
        } else {
            inner.read(t, &rs)?
        };
        let old = res.as_ref().map(|_| cur.clone());
        if op != MPI_NO_OP {
            combine(op, basic, bsize, &data, &mut cur)?;
            inner.write(t, &rs, &cur)?;
        }
        Ok::<_, MpiError>(old)
    })();
    inner.acc_unlock(t);
    if let (Some(old), Some((buf, rn, rdt))) = (r?, res) {
        // SAFETY: the result buffer holds `rn` items of its datatype.
        unsafe { unpack_from(&rdt, rn, buf.cast(), &old) };
    }
    Ok(())
}

/// A request that is already complete (the operation finished at the origin).
fn done_request(request: *mut c_int, win: c_int) -> MpiResult {
    if request.is_null() {
        mpi_bail!(MPI_ERR_ARG, "NULL request pointer");
    }
    let comm = inner(win)?.comm;
    let h = lock().reqs.insert(crate::request::Request {
        comm,
        persistent: None,
        active: Some(crate::request::Pending {
            ereq: None,
            done: None,
            stage: None,
            unpack: None,
            bsend_bytes: 0,
        }),
    });
    out(request, h, "request")
}

// ---- creation and destruction ----

fn round_up(n: usize, a: usize) -> usize {
    n.div_ceil(a) * a
}

fn read_info(info: c_int) -> MpiResult<Vec<(String, String)>> {
    if info == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    match lock().infos.get(info) {
        Some(i) => Ok(i.entries.clone()),
        None => mpi_bail!(MPI_ERR_INFO, "invalid info handle {info:#x}"),
    }
}

fn info_true(info: &[(String, String)], key: &str) -> bool {
    info.iter().any(|(k, v)| k == key && v == "true")
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Create a window of `flavor` over the user's communicator `comm`. `size` is this
/// rank's size; `user_base` is the user memory (create) or 0. Returns the handle and the
/// base address of this rank's memory.
fn create(
    comm: c_int,
    flavor: c_int,
    size: isize,
    disp_unit: c_int,
    info: c_int,
    user_base: usize,
) -> MpiResult<(c_int, usize)> {
    lock().comm(comm)?;
    crate::intercomm::require_intra(comm, "an RMA window")?;
    if size < 0 {
        mpi_bail!(MPI_ERR_SIZE, "negative window size {size}");
    }
    if disp_unit <= 0 {
        mpi_bail!(
            MPI_ERR_DISP,
            "displacement unit {disp_unit} is not positive"
        );
    }
    let info = read_info(info)?;
    let wcomm = crate::comm::dup_context(comm).map_err(internal("MPI_Comm_dup"))?;
    match create_on(wcomm, flavor, size as usize, disp_unit, info, user_base) {
        Ok(r) => Ok(r),
        Err(e) => {
            free_comm(wcomm);
            Err(e)
        }
    }
}

fn create_on(
    wcomm: c_int,
    flavor: c_int,
    size: usize,
    disp_unit: c_int,
    info: Vec<(String, String)>,
    user_base: usize,
) -> MpiResult<(c_int, usize)> {
    let coll = Internal::of(wcomm)?;
    let (rank, n) = (coll.rank(), coll.size());
    let probe: Box<u64> = Box::new(PROBE_MAGIC);
    let pid = std::process::id() as i64;
    let mine = [
        pid,
        size as i64,
        disp_unit as i64,
        user_base as i64,
        &*probe as *const u64 as i64,
    ];
    let all = coll
        .allgather_i64(&mine)
        .map_err(internal("MPI_Allgather"))?;
    let row = |r: usize| &all[r * 5..r * 5 + 5];

    // Layout of the shared segment.
    let ctrl_stride = round_up(CTRL_HEAD + 8 * n, 64);
    let page = page_size();
    let data_start = round_up(ctrl_stride * n, page);
    let with_data = flavor == MPI_WIN_FLAVOR_ALLOCATE || flavor == MPI_WIN_FLAVOR_SHARED;
    let pad = if flavor == MPI_WIN_FLAVOR_SHARED && !info_true(&info, "alloc_shared_noncontig") {
        1
    } else {
        64
    };
    let mut data_off = Vec::with_capacity(n);
    let mut total = data_start;
    for r in 0..n {
        data_off.push(total);
        if with_data {
            total += round_up(row(r)[1] as usize, pad);
        }
    }
    let total = total.max(data_start).max(page);

    // Rank 0 creates the segment, everyone maps it.
    let mut fd = None;
    let mut failure = 0i64;
    let mut detail = String::new();
    let mut hdr = [0i64; 2];
    if rank == 0 {
        match memfd("oxmpi-win", total) {
            Ok(f) => fd = Some(f),
            Err(e) => {
                detail = format!("cannot create the window segment ({total} bytes): {e}");
                failure = 1;
            }
        }
        hdr = [pid, fd.as_ref().map_or(-1, |f| i64::from(f.as_raw_fd()))];
    }
    coll.bcast_i64(&mut hdr).map_err(internal("MPI_Bcast"))?;
    let seg = if hdr[1] < 0 {
        if detail.is_empty() {
            detail = "rank 0 could not create the window segment".into();
        }
        failure = failure.max(1);
        None
    } else if let Some(f) = &fd {
        match Mapping::map(f, total) {
            Ok(m) => Some(m),
            Err(e) => {
                failure = 1;
                detail = format!("cannot map the window segment: {e}");
                None
            }
        }
    } else {
        match open_peer_fd(hdr[0] as i32, hdr[1] as i32) {
            Ok(f) => match Mapping::map(&f, total) {
                Ok(m) => Some(m),
                Err(e) => {
                    failure = 1;
                    detail = format!("cannot map rank 0's window segment: {e}");
                    None
                }
            },
            Err(e) => {
                failure = 1;
                detail = format!(
                    "cannot open rank 0's window segment /proc/{}/fd/{}: {e}",
                    hdr[0], hdr[1]
                );
                None
            }
        }
    };

    // Cross-memory attach probe for windows over user memory.
    if seg.is_some() && !with_data {
        for r in (0..n).filter(|&r| r != rank) {
            let mut v = 0u64;
            let (ppid, paddr) = (row(r)[0] as i32, row(r)[4] as usize);
            // SAFETY: `v` is a writable local of 8 bytes.
            let res = unsafe {
                cma_copy(
                    ppid,
                    (&mut v as *mut u64).cast(),
                    paddr as u64,
                    8,
                    Cma::Read,
                )
            };
            match res {
                Ok(()) if v == PROBE_MAGIC => {}
                Ok(()) => {
                    failure = failure.max(2);
                    detail = format!("cross-memory attach to rank {r} read unexpected data");
                }
                Err(e) => {
                    failure = failure.max(2);
                    detail = format!(
                        "process_vm_readv from rank {r} (pid {ppid}) failed: {e}; \
                         MPI_Win_create and MPI_Win_create_dynamic need cross-memory \
                         attach (use MPI_Win_allocate where the kernel denies it)"
                    );
                }
            }
        }
    }
    let worst = coll
        .allreduce_max(failure)
        .map_err(internal("MPI_Allreduce"))?;
    // Every rank opened (or failed to open) the segment by now: close ours; the mappings
    // keep the memory alive.
    drop(fd);
    drop(probe);
    if worst != 0 {
        let class = if worst == 2 {
            MPI_ERR_RMA_ATTACH
        } else {
            MPI_ERR_NO_MEM
        };
        if detail.is_empty() {
            detail = "window creation failed on another rank".into();
        }
        return Err(MpiError::new(class, detail));
    }
    let seg = seg.expect("mapped when no rank failed");

    let targets: Vec<Target> = (0..n)
        .map(|r| {
            let rsize = row(r)[1] as usize;
            let du = row(r)[2] as isize;
            match flavor {
                MPI_WIN_FLAVOR_ALLOCATE | MPI_WIN_FLAVOR_SHARED => Target {
                    base: seg.ptr() as usize + data_off[r],
                    size: Some(rsize),
                    disp_unit: du,
                    pid: row(r)[0] as i32,
                    local: true,
                },
                MPI_WIN_FLAVOR_CREATE => Target {
                    base: row(r)[3] as usize,
                    size: Some(rsize),
                    disp_unit: du,
                    pid: row(r)[0] as i32,
                    local: r == rank,
                },
                // Dynamic windows go through CMA even for our own rank: the kernel
                // checks the address (EFAULT -> MPI_ERR_RMA_RANGE) where a plain copy
                // from a bad displacement would crash.
                _ => Target {
                    base: 0,
                    size: None,
                    disp_unit: 1,
                    pid: row(r)[0] as i32,
                    local: false,
                },
            }
        })
        .collect();
    let base = match flavor {
        MPI_WIN_FLAVOR_DYNAMIC => 0,
        MPI_WIN_FLAVOR_CREATE => user_base,
        _ => targets[rank].base,
    };
    let inner = Arc::new(Inner {
        comm: wcomm,
        rank,
        nranks: n,
        flavor,
        seg,
        ctrl_stride,
        targets,
    });
    let w = Win {
        inner,
        base,
        size: if flavor == MPI_WIN_FLAVOR_DYNAMIC {
            0
        } else {
            size as isize
        },
        disp_unit: if flavor == MPI_WIN_FLAVOR_DYNAMIC {
            1
        } else {
            disp_unit
        },
        flavor,
        model: MPI_WIN_UNIFIED,
        name: String::new(),
        info,
        errh: MPI_ERRORS_ARE_FATAL,
        err_action: ErrAction::Fatal,
        attrs: BTreeMap::new(),
        held: BTreeMap::new(),
        lock_all: false,
        consumed: vec![0; n],
        access: None,
        expected: 0,
        exposure: false,
        attached: Vec::new(),
    };
    let h = wins().insert(Box::new(w));
    Ok((h, base))
}

mpi_fn! {
    /// `MPI_Win_allocate`: window memory in the shared segment.
    fn PMPI_Win_allocate / "MPI_Win_allocate" (size: isize, disp_unit: c_int, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) {
        if baseptr.is_null() || win.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL baseptr or win").on(comm));
        }
        let (h, base) = create(comm, MPI_WIN_FLAVOR_ALLOCATE, size, disp_unit, info, 0).map_err(|e| e.on(comm))?;
        out(baseptr.cast::<*mut c_void>(), base as *mut c_void, "baseptr")?;
        out(win, h, "win")
    }
}

mpi_fn! {
    /// `MPI_Win_allocate_shared`: like allocate; the memory of all ranks is contiguous
    /// (unless `alloc_shared_noncontig`) and reachable with `MPI_Win_shared_query`.
    fn PMPI_Win_allocate_shared / "MPI_Win_allocate_shared" (size: isize, disp_unit: c_int, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) {
        if baseptr.is_null() || win.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL baseptr or win").on(comm));
        }
        let (h, base) = create(comm, MPI_WIN_FLAVOR_SHARED, size, disp_unit, info, 0).map_err(|e| e.on(comm))?;
        out(baseptr.cast::<*mut c_void>(), base as *mut c_void, "baseptr")?;
        out(win, h, "win")
    }
}

mpi_fn! {
    /// `MPI_Win_create`: a window over user memory (reached with cross-memory attach).
    fn PMPI_Win_create / "MPI_Win_create" (base: *mut c_void, size: isize, disp_unit: c_int, info: c_int, comm: c_int, win: *mut c_int) {
        if win.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL win").on(comm));
        }
        let (h, _) = create(comm, MPI_WIN_FLAVOR_CREATE, size, disp_unit, info, base as usize).map_err(|e| e.on(comm))?;
        out(win, h, "win")
    }
}

mpi_fn! {
    /// `MPI_Win_create_dynamic`: target displacements are addresses of attached memory.
    fn PMPI_Win_create_dynamic / "MPI_Win_create_dynamic" (info: c_int, comm: c_int, win: *mut c_int) {
        if win.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL win").on(comm));
        }
        let (h, _) = create(comm, MPI_WIN_FLAVOR_DYNAMIC, 0, 1, info, 0).map_err(|e| e.on(comm))?;
        out(win, h, "win")
    }
}

/// Call the delete callbacks of all attributes of window `h` (no lock held).
fn delete_attrs(h: c_int, attrs: BTreeMap<c_int, usize>) -> MpiResult {
    for (k, v) in attrs {
        delete_attr_value(h, k, v)?;
    }
    Ok(())
}

type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;

fn delete_attr_value(h: c_int, k: c_int, v: usize) -> MpiResult {
    let kv = lock().keyvals.get(k).copied();
    if let Some(kv) = kv {
        if kv.delete != 0 {
            // SAFETY: a non-NULL delete callback registered with MPI_Win_create_keyval.
            let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(kv.delete) };
            // SAFETY: the standard's arguments; no lock is held.
            let r = unsafe { f(h, k, v as *mut c_void, kv.extra as *mut c_void) };
            if r != MPI_SUCCESS {
                mpi_bail!(r, "attribute delete callback failed");
            }
        }
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Win_free`: collective; releases the segment and the private communicator.
    fn PMPI_Win_free / "MPI_Win_free" [OnWin(if win.is_null() { MPI_WIN_NULL } else { win.read_unaligned() })] (win: *mut c_int) {
        let h = inp(win, "win")?;
        let (comm, attrs) = with_win(h, |w| Ok((w.inner.comm, std::mem::take(&mut w.attrs))))?;
        delete_attrs(h, attrs)?;
        fence(Ordering::SeqCst);
        // Nobody may still access our memory when it goes away.
        barrier(comm)?;
        let w = wins().remove(h).ok_or_else(|| bad_win(h))?;
        drop(w);
        free_comm(comm);
        out(win, MPI_WIN_NULL, "win")
    }
}

mpi_fn! {
    /// `MPI_Win_attach`.
    fn PMPI_Win_attach / "MPI_Win_attach" [OnWin(win)] (win: c_int, base: *mut c_void, size: isize) {
        with_win(win, |w| {
            if w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
                mpi_bail!(MPI_ERR_RMA_FLAVOR, "MPI_Win_attach needs a window made by MPI_Win_create_dynamic");
            }
            if size < 0 {
                mpi_bail!(MPI_ERR_SIZE, "negative size {size}");
            }
            w.attached.push((base as usize, size as usize));
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_detach`.
    fn PMPI_Win_detach / "MPI_Win_detach" [OnWin(win)] (win: c_int, base: *const c_void) {
        with_win(win, |w| {
            if w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
                mpi_bail!(MPI_ERR_RMA_FLAVOR, "MPI_Win_detach needs a window made by MPI_Win_create_dynamic");
            }
            match w.attached.iter().position(|a| a.0 == base as usize) {
                Some(i) => {
                    w.attached.remove(i);
                    Ok(())
                }
                None => mpi_bail!(MPI_ERR_RMA_ATTACH, "address {base:p} is not attached to this window"),
            }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_shared_query`: the memory of `rank` in our mapping (shared windows only,
    /// as in MPI-3.1).
    fn PMPI_Win_shared_query / "MPI_Win_shared_query" [OnWin(win)] (win: c_int, rank: c_int, size: *mut isize, disp_unit: *mut c_int, baseptr: *mut c_void) {
        let inner = inner(win)?;
        if inner.flavor != MPI_WIN_FLAVOR_SHARED {
            mpi_bail!(MPI_ERR_RMA_FLAVOR, "MPI_Win_shared_query needs a window with shared memory (MPI_Win_allocate_shared)");
        }
        let r = if rank == MPI_PROC_NULL {
            (0..inner.nranks).find(|&r| inner.targets[r].size != Some(0)).unwrap_or(0)
        } else if rank < 0 || rank as usize >= inner.nranks {
            mpi_bail!(MPI_ERR_RANK, "rank {rank} is not in the window's group");
        } else {
            rank as usize
        };
        let t = inner.targets[r];
        out(size, t.size.unwrap_or(0) as isize, "size")?;
        out(disp_unit, t.disp_unit as c_int, "disp_unit")?;
        out(baseptr.cast::<*mut c_void>(), t.base as *mut c_void, "baseptr")
    }
}

// ---- communication ----

mpi_fn! {
    /// `MPI_Put`.
    fn PMPI_Put / "MPI_Put" [OnWin(win)] (origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, win: c_int) {
        do_put(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win)
    }
}

mpi_fn! {
    /// `MPI_Get`.
    fn PMPI_Get / "MPI_Get" [OnWin(win)] (origin_addr: *mut c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, win: c_int) {
        do_get(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win)
    }
}

mpi_fn! {
    /// `MPI_Accumulate`.
    fn PMPI_Accumulate / "MPI_Accumulate" [OnWin(win)] (origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, op: c_int, win: c_int) {
        do_accumulate(origin_addr, origin_count, origin_datatype, None, target_rank, target_disp, target_count, target_datatype, op, win)
    }
}

mpi_fn! {
    /// `MPI_Get_accumulate`.
    fn PMPI_Get_accumulate / "MPI_Get_accumulate" [OnWin(win)] (origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, result_addr: *mut c_void, result_count: c_int, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, op: c_int, win: c_int) {
        do_accumulate(origin_addr, origin_count, origin_datatype, Some((result_addr, result_count, result_datatype)), target_rank, target_disp, target_count, target_datatype, op, win)
    }
}

mpi_fn! {
    /// `MPI_Fetch_and_op`.
    fn PMPI_Fetch_and_op / "MPI_Fetch_and_op" [OnWin(win)] (origin_addr: *const c_void, result_addr: *mut c_void, datatype: c_int, target_rank: c_int, target_disp: isize, op: c_int, win: c_int) {
        do_accumulate(origin_addr, 1, datatype, Some((result_addr, 1, datatype)), target_rank, target_disp, 1, datatype, op, win)
    }
}

mpi_fn! {
    /// `MPI_Compare_and_swap`.
    fn PMPI_Compare_and_swap / "MPI_Compare_and_swap" [OnWin(win)] (origin_addr: *const c_void, compare_addr: *const c_void, result_addr: *mut c_void, datatype: c_int, target_rank: c_int, target_disp: isize, win: c_int) {
        let a = access(win, target_rank, target_disp)?;
        let dt = dtype(datatype)?;
        if !dt.predefined || dt.basic.is_none() {
            mpi_bail!(MPI_ERR_TYPE, "MPI_Compare_and_swap needs a predefined integer-like datatype");
        }
        let n = dt.size;
        let Some(t) = a.target else { return Ok(()) };
        if origin_addr.is_null() || compare_addr.is_null() || result_addr.is_null() {
            mpi_bail!(MPI_ERR_BUFFER, "NULL origin, compare or result buffer");
        }
        // SAFETY: each buffer holds one element of the predefined datatype.
        let (new, cmp) = unsafe {
            (
                std::slice::from_raw_parts(origin_addr.cast::<u8>(), n).to_vec(),
                std::slice::from_raw_parts(compare_addr.cast::<u8>(), n).to_vec(),
            )
        };
        let rs = [(a.start, n)];
        let inner = &a.inner;
        inner.acc_lock(t);
        let r = (|| {
            let cur = inner.read(t, &rs)?;
            if cur == cmp {
                inner.write(t, &rs, &new)?;
            }
            Ok::<_, MpiError>(cur)
        })();
        inner.acc_unlock(t);
        let cur = r?;
        // SAFETY: the result buffer holds one element (n bytes).
        unsafe { std::ptr::copy_nonoverlapping(cur.as_ptr(), result_addr.cast::<u8>(), n) };
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Rput`: completes at once.
    fn PMPI_Rput / "MPI_Rput" [OnWin(win)] (origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, win: c_int, request: *mut c_int) {
        do_put(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win)?;
        done_request(request, win)
    }
}

mpi_fn! {
    /// `MPI_Rget`: completes at once.
    fn PMPI_Rget / "MPI_Rget" [OnWin(win)] (origin_addr: *mut c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, win: c_int, request: *mut c_int) {
        do_get(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win)?;
        done_request(request, win)
    }
}

mpi_fn! {
    /// `MPI_Raccumulate`: completes at once.
    fn PMPI_Raccumulate / "MPI_Raccumulate" [OnWin(win)] (origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, op: c_int, win: c_int, request: *mut c_int) {
        do_accumulate(origin_addr, origin_count, origin_datatype, None, target_rank, target_disp, target_count, target_datatype, op, win)?;
        done_request(request, win)
    }
}

mpi_fn! {
    /// `MPI_Rget_accumulate`: completes at once.
    fn PMPI_Rget_accumulate / "MPI_Rget_accumulate" [OnWin(win)] (origin_addr: *const c_void, origin_count: c_int, origin_datatype: c_int, result_addr: *mut c_void, result_count: c_int, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: c_int, op: c_int, win: c_int, request: *mut c_int) {
        do_accumulate(origin_addr, origin_count, origin_datatype, Some((result_addr, result_count, result_datatype)), target_rank, target_disp, target_count, target_datatype, op, win)?;
        done_request(request, win)
    }
}

// ---- synchronization ----

fn check_assert(assert: c_int) -> MpiResult {
    let all = MPI_MODE_NOCHECK
        | MPI_MODE_NOSTORE
        | MPI_MODE_NOPUT
        | MPI_MODE_NOPRECEDE
        | MPI_MODE_NOSUCCEED;
    if assert & !all != 0 {
        mpi_bail!(MPI_ERR_ASSERT, "invalid assertion {assert:#x}");
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Win_fence`: memory fence, barrier, memory fence.
    fn PMPI_Win_fence / "MPI_Win_fence" [OnWin(win)] (assert: c_int, win: c_int) {
        check_assert(assert)?;
        let comm = inner(win)?.comm;
        fence(Ordering::SeqCst);
        barrier(comm)?;
        fence(Ordering::SeqCst);
        Ok(())
    }
}

fn acquire(inner: &Inner, t: usize, kind: Held) {
    let w = inner.lock_word(t);
    match kind {
        Held::Exclusive => spin_until(|| {
            w.compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }),
        Held::Shared => spin_until(|| {
            let v = w.load(Ordering::Relaxed);
            v & WRITER == 0
                && w.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        }),
    }
}

/// Take a shared lock on every rank, all or nothing: if one target is held exclusively,
/// drop the ones taken so far and start over, so that `lock_all` never holds shared locks
/// while waiting (a process holding an exclusive lock and waiting for another target
/// cannot deadlock with it).
fn acquire_all_shared(inner: &Inner) {
    spin_until(|| {
        for t in 0..inner.nranks {
            let w = inner.lock_word(t);
            let mut v = w.load(Ordering::Relaxed);
            let got = loop {
                if v & WRITER != 0 {
                    break false;
                }
                match w.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => break true,
                    Err(cur) => v = cur,
                }
            };
            if !got {
                for u in 0..t {
                    release(inner, u, Held::Shared);
                }
                return false;
            }
        }
        true
    });
}

fn release(inner: &Inner, t: usize, kind: Held) {
    let w = inner.lock_word(t);
    match kind {
        Held::Exclusive => w.fetch_and(!WRITER, Ordering::Release),
        Held::Shared => w.fetch_sub(1, Ordering::Release),
    };
}

fn check_target(inner: &Inner, rank: c_int) -> MpiResult<Option<usize>> {
    if rank == MPI_PROC_NULL {
        return Ok(None);
    }
    if rank < 0 || rank as usize >= inner.nranks {
        mpi_bail!(
            MPI_ERR_RANK,
            "rank {rank} is not in the window's group of {} ranks",
            inner.nranks
        );
    }
    Ok(Some(rank as usize))
}

mpi_fn! {
    /// `MPI_Win_lock`.
    fn PMPI_Win_lock / "MPI_Win_lock" [OnWin(win)] (lock_type: c_int, rank: c_int, assert: c_int, win: c_int) {
        let kind = match lock_type {
            MPI_LOCK_EXCLUSIVE => Held::Exclusive,
            MPI_LOCK_SHARED => Held::Shared,
            _ => mpi_bail!(MPI_ERR_LOCKTYPE, "invalid lock type {lock_type}"),
        };
        check_assert(assert)?;
        let inner = inner(win)?;
        let Some(t) = check_target(&inner, rank)? else { return Ok(()) };
        with_win(win, |w| {
            if w.lock_all || w.held.contains_key(&t) {
                mpi_bail!(MPI_ERR_RMA_SYNC, "rank {t} of this window is already locked by this process");
            }
            Ok(())
        })?;
        acquire(&inner, t, kind);
        with_win(win, |w| {
            w.held.insert(t, kind);
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_unlock`.
    fn PMPI_Win_unlock / "MPI_Win_unlock" [OnWin(win)] (rank: c_int, win: c_int) {
        let inner = inner(win)?;
        let Some(t) = check_target(&inner, rank)? else { return Ok(()) };
        let kind = with_win(win, |w| match w.held.remove(&t) {
            Some(k) => Ok(k),
            None => mpi_bail!(MPI_ERR_RMA_SYNC, "rank {t} of this window is not locked by this process"),
        })?;
        fence(Ordering::SeqCst);
        release(&inner, t, kind);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_lock_all`: a shared lock on every rank.
    fn PMPI_Win_lock_all / "MPI_Win_lock_all" [OnWin(win)] (assert: c_int, win: c_int) {
        check_assert(assert)?;
        let inner = inner(win)?;
        with_win(win, |w| {
            if w.lock_all || !w.held.is_empty() {
                mpi_bail!(MPI_ERR_RMA_SYNC, "this window is already locked by this process");
            }
            w.lock_all = true;
            Ok(())
        })?;
        acquire_all_shared(&inner);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_unlock_all`.
    fn PMPI_Win_unlock_all / "MPI_Win_unlock_all" [OnWin(win)] (win: c_int) {
        let inner = inner(win)?;
        with_win(win, |w| {
            if !w.lock_all {
                mpi_bail!(MPI_ERR_RMA_SYNC, "MPI_Win_unlock_all without MPI_Win_lock_all");
            }
            w.lock_all = false;
            Ok(())
        })?;
        fence(Ordering::SeqCst);
        for t in 0..inner.nranks {
            release(&inner, t, Held::Shared);
        }
        Ok(())
    }
}

/// Flush-type calls: operations are complete already; order memory, and check that a
/// passive-target epoch is open.
fn flush(win: c_int, rank: Option<c_int>) -> MpiResult {
    let inner = inner(win)?;
    let t = match rank {
        Some(r) => check_target(&inner, r)?,
        None => None,
    };
    with_win(win, |w| {
        let ok = w.lock_all || t.map_or(!w.held.is_empty(), |t| w.held.contains_key(&t));
        if !ok && rank != Some(MPI_PROC_NULL) {
            mpi_bail!(
                MPI_ERR_RMA_SYNC,
                "no passive-target epoch is open on this window"
            );
        }
        Ok(())
    })?;
    fence(Ordering::SeqCst);
    Ok(())
}

mpi_fn! {
    /// `MPI_Win_flush`.
    fn PMPI_Win_flush / "MPI_Win_flush" [OnWin(win)] (rank: c_int, win: c_int) {
        flush(win, Some(rank))
    }
}

mpi_fn! {
    /// `MPI_Win_flush_local`.
    fn PMPI_Win_flush_local / "MPI_Win_flush_local" [OnWin(win)] (rank: c_int, win: c_int) {
        flush(win, Some(rank))
    }
}

mpi_fn! {
    /// `MPI_Win_flush_all`.
    fn PMPI_Win_flush_all / "MPI_Win_flush_all" [OnWin(win)] (win: c_int) {
        flush(win, None)
    }
}

mpi_fn! {
    /// `MPI_Win_flush_local_all`.
    fn PMPI_Win_flush_local_all / "MPI_Win_flush_local_all" [OnWin(win)] (win: c_int) {
        flush(win, None)
    }
}

mpi_fn! {
    /// `MPI_Win_sync`: a memory fence (the memory model is unified).
    fn PMPI_Win_sync / "MPI_Win_sync" [OnWin(win)] (win: c_int) {
        inner(win)?;
        fence(Ordering::SeqCst);
        Ok(())
    }
}

/// Ranks (in the window's group) of the members of group `g`.
fn group_ranks(win: c_int, g: c_int) -> MpiResult<Vec<usize>> {
    let comm = inner(win)?.comm;
    let st = lock();
    let members = st.group(g)?;
    let cg = &st.comm(comm)?.group;
    members
        .iter()
        .map(|m| {
            cg.iter().position(|x| x == m).ok_or_else(|| {
                MpiError::new(
                    MPI_ERR_GROUP,
                    format!("process {m} of the group is not in the window's group"),
                )
            })
        })
        .collect()
}

mpi_fn! {
    /// `MPI_Win_post`: open an exposure epoch to the origins of `group`.
    fn PMPI_Win_post / "MPI_Win_post" [OnWin(win)] (group: c_int, assert: c_int, win: c_int) {
        check_assert(assert)?;
        let ranks = group_ranks(win, group)?;
        let inner = inner(win)?;
        with_win(win, |w| {
            if w.exposure {
                mpi_bail!(MPI_ERR_RMA_SYNC, "an exposure epoch is already open on this window");
            }
            w.exposure = true;
            w.expected += ranks.len() as u64;
            Ok(())
        })?;
        fence(Ordering::SeqCst);
        for &o in &ranks {
            inner.posted(o, inner.rank).fetch_add(1, Ordering::Release);
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_start`: open an access epoch to the targets of `group` once they posted.
    fn PMPI_Win_start / "MPI_Win_start" [OnWin(win)] (group: c_int, assert: c_int, win: c_int) {
        check_assert(assert)?;
        let ranks = group_ranks(win, group)?;
        let inner = inner(win)?;
        let consumed = with_win(win, |w| {
            if w.access.is_some() {
                mpi_bail!(MPI_ERR_RMA_SYNC, "an access epoch is already open on this window");
            }
            Ok(w.consumed.clone())
        })?;
        for &t in &ranks {
            let p = inner.posted(inner.rank, t);
            spin_until(|| p.load(Ordering::Acquire) > consumed[t]);
        }
        with_win(win, |w| {
            for &t in &ranks {
                w.consumed[t] += 1;
            }
            w.access = Some(ranks);
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_complete`: close the access epoch; tell each target.
    fn PMPI_Win_complete / "MPI_Win_complete" [OnWin(win)] (win: c_int) {
        let inner = inner(win)?;
        let ranks = with_win(win, |w| match w.access.take() {
            Some(r) => Ok(r),
            None => mpi_bail!(MPI_ERR_RMA_SYNC, "MPI_Win_complete without MPI_Win_start"),
        })?;
        fence(Ordering::SeqCst);
        for t in ranks {
            inner.completed(t).fetch_add(1, Ordering::Release);
        }
        Ok(())
    }
}

fn exposure_done(win: c_int, block: bool) -> MpiResult<bool> {
    let inner = inner(win)?;
    let expected = with_win(win, |w| {
        if !w.exposure {
            mpi_bail!(
                MPI_ERR_RMA_SYNC,
                "no exposure epoch is open on this window (MPI_Win_post)"
            );
        }
        Ok(w.expected)
    })?;
    let c = inner.completed(inner.rank);
    if block {
        spin_until(|| c.load(Ordering::Acquire) >= expected);
    } else if c.load(Ordering::Acquire) < expected {
        return Ok(false);
    }
    with_win(win, |w| {
        w.exposure = false;
        Ok(true)
    })
}

mpi_fn! {
    /// `MPI_Win_wait`.
    fn PMPI_Win_wait / "MPI_Win_wait" [OnWin(win)] (win: c_int) {
        exposure_done(win, true).map(|_| ())
    }
}

mpi_fn! {
    /// `MPI_Win_test`.
    fn PMPI_Win_test / "MPI_Win_test" [OnWin(win)] (win: c_int, flag: *mut c_int) {
        if flag.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL flag");
        }
        let done = exposure_done(win, false)?;
        out(flag, done as c_int, "flag")
    }
}

// ---- attributes, group, name, info, error handlers ----

mpi_fn! {
    /// `MPI_Win_get_attr`: the predefined attributes and user keyvals.
    fn PMPI_Win_get_attr / "MPI_Win_get_attr" [OnWin(win)] (win: c_int, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        let v: Option<usize> = with_win(win, |w| {
            Ok(match keyval {
                MPI_WIN_BASE => Some(w.base),
                MPI_WIN_SIZE => Some(&w.size as *const isize as usize),
                MPI_WIN_DISP_UNIT => Some(&w.disp_unit as *const c_int as usize),
                MPI_WIN_CREATE_FLAVOR => Some(&w.flavor as *const c_int as usize),
                MPI_WIN_MODEL => Some(&w.model as *const c_int as usize),
                _ => {
                    if lock().keyvals.get(keyval).is_none() {
                        mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {keyval:#x}");
                    }
                    w.attrs.get(&keyval).copied()
                }
            })
        })?;
        match v {
            Some(v) => {
                out(attribute_val.cast::<*mut c_void>(), v as *mut c_void, "attribute_val")?;
                out(flag, 1, "flag")
            }
            None => out(flag, 0, "flag"),
        }
    }
}

fn predefined_key(k: c_int) -> bool {
    matches!(
        k,
        MPI_WIN_BASE | MPI_WIN_SIZE | MPI_WIN_DISP_UNIT | MPI_WIN_CREATE_FLAVOR | MPI_WIN_MODEL
    )
}

mpi_fn! {
    /// `MPI_Win_set_attr`.
    fn PMPI_Win_set_attr / "MPI_Win_set_attr" [OnWin(win)] (win: c_int, keyval: c_int, attribute_val: *mut c_void) {
        if predefined_key(keyval) {
            mpi_bail!(MPI_ERR_KEYVAL, "predefined window attributes cannot be set");
        }
        if lock().keyvals.get(keyval).is_none() {
            mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {keyval:#x}");
        }
        let old = with_win(win, |w| Ok(w.attrs.insert(keyval, attribute_val as usize)))?;
        if let Some(old) = old {
            delete_attr_value(win, keyval, old)?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_delete_attr`.
    fn PMPI_Win_delete_attr / "MPI_Win_delete_attr" [OnWin(win)] (win: c_int, keyval: c_int) {
        if predefined_key(keyval) {
            mpi_bail!(MPI_ERR_KEYVAL, "predefined window attributes cannot be deleted");
        }
        if lock().keyvals.get(keyval).is_none() {
            mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {keyval:#x}");
        }
        let old = with_win(win, |w| Ok(w.attrs.remove(&keyval)))?;
        match old {
            Some(old) => delete_attr_value(win, keyval, old),
            None => mpi_bail!(MPI_ERR_KEYVAL, "attribute {keyval:#x} is not set on this window"),
        }
    }
}

mpi_fn! {
    /// `MPI_Win_get_group`.
    fn PMPI_Win_get_group / "MPI_Win_get_group" [OnWin(win)] (win: c_int, group: *mut c_int) {
        let comm = inner(win)?.comm;
        let mut st = lock();
        let members = st.comm(comm)?.group.clone();
        let g = st.new_group(members);
        drop(st);
        out(group, g, "group")
    }
}

mpi_fn! {
    /// `MPI_Win_set_name`.
    fn PMPI_Win_set_name / "MPI_Win_set_name" [OnWin(win)] (win: c_int, win_name: *const c_char) {
        let mut s = read_cstr(win_name, "win_name")?;
        s.truncate(MPI_MAX_OBJECT_NAME as usize - 1);
        with_win(win, |w| {
            w.name = s;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_name` (`MPI_WIN_NULL` is named too).
    fn PMPI_Win_get_name / "MPI_Win_get_name" [OnWin(win)] (win: c_int, win_name: *mut c_char, resultlen: *mut c_int) {
        let name = if win == MPI_WIN_NULL {
            "MPI_WIN_NULL".to_string()
        } else {
            with_win(win, |w| Ok(w.name.clone()))?
        };
        let n = copy_cstr(win_name, MPI_MAX_OBJECT_NAME as usize, &name)?;
        out(resultlen, n, "resultlen")
    }
}

mpi_fn! {
    /// `MPI_Win_set_info`.
    fn PMPI_Win_set_info / "MPI_Win_set_info" [OnWin(win)] (win: c_int, info: c_int) {
        let entries = read_info(info)?;
        with_win(win, |w| {
            for (k, v) in entries {
                match w.info.iter_mut().find(|(x, _)| *x == k) {
                    Some(e) => e.1 = v,
                    None => w.info.push((k, v)),
                }
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_info`: a new info object with the window's hints.
    fn PMPI_Win_get_info / "MPI_Win_get_info" [OnWin(win)] (win: c_int, info_used: *mut c_int) {
        if info_used.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL info_used");
        }
        let entries = with_win(win, |w| Ok(w.info.clone()))?;
        let h = lock().infos.insert(crate::state::Info { entries });
        out(info_used, h, "info_used")
    }
}

mpi_fn! {
    /// `MPI_Win_create_errhandler`.
    fn PMPI_Win_create_errhandler / "MPI_Win_create_errhandler" (func: Option<crate::errors::CommErrFn>, errhandler: *mut c_int) {
        let Some(func) = func else { mpi_bail!(MPI_ERR_ARG, "NULL error handler function") };
        if errhandler.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL errhandler");
        }
        let h = lock().errhandlers.insert(crate::errors::UserErrhandler { func });
        out(errhandler, h, "errhandler")
    }
}

mpi_fn! {
    /// `MPI_Win_set_errhandler`.
    fn PMPI_Win_set_errhandler / "MPI_Win_set_errhandler" [OnWin(win)] (win: c_int, errhandler: c_int) {
        let action = lock().errhandler_action(errhandler)?;
        with_win(win, |w| {
            w.errh = errhandler;
            w.err_action = action;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_errhandler`.
    fn PMPI_Win_get_errhandler / "MPI_Win_get_errhandler" [OnWin(win)] (win: c_int, errhandler: *mut c_int) {
        let h = with_win(win, |w| Ok(w.errh))?;
        out(errhandler, h, "errhandler")
    }
}

mpi_fn! {
    /// `MPI_Win_call_errhandler`: invoke the window's error handler with `errorcode`.
    fn PMPI_Win_call_errhandler / "MPI_Win_call_errhandler" [OnWin(win)] (win: c_int, errorcode: c_int) {
        with_win(win, |_| Ok(()))?;
        let e = MpiError::new(errorcode, "raised by MPI_Win_call_errhandler");
        OnWin(win).raise("MPI_Win_call_errhandler", &e);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(blocks: &[(isize, usize)], lb: isize, ub: isize) -> Datatype {
        let mut d = lock().dtype(MPI_BYTE).expect("MPI_BYTE").as_ref().clone();
        d.blocks = blocks
            .iter()
            .map(|&(disp, len)| crate::datatype::Block { disp, len, elem: 1 })
            .collect();
        d.size = blocks.iter().map(|b| b.1).sum();
        d.lb = lb;
        d.ub = ub;
        d
    }

    #[test]
    fn ranges_follow_the_type_map_and_merge_adjacent_blocks() {
        // Two bytes at 0 and 4 in an extent of 8.
        let v = dt(&[(0, 2), (4, 2)], 0, 8);
        assert_eq!(ranges(&v, 2, 16), vec![(16, 2), (20, 2), (24, 2), (28, 2)]);
        // A contiguous type merges into one range across items.
        let c = dt(&[(0, 4)], 0, 4);
        assert_eq!(ranges(&c, 3, 8), vec![(8, 12)]);
        assert!(ranges(&c, 0, 8).is_empty());
    }

    #[test]
    fn combine_applies_predefined_ops() {
        let o = 5i32.to_ne_bytes();
        let mut cur = 7i32.to_ne_bytes();
        combine(MPI_SUM, MPI_INT, 4, &o, &mut cur).expect("sum");
        assert_eq!(i32::from_ne_bytes(cur), 12);
        combine(MPI_REPLACE, MPI_INT, 4, &o, &mut cur).expect("replace");
        assert_eq!(i32::from_ne_bytes(cur), 5);
        combine(MPI_NO_OP, MPI_INT, 4, &9i32.to_ne_bytes(), &mut cur).expect("no_op");
        assert_eq!(i32::from_ne_bytes(cur), 5);
        let e = combine(MPI_BAND, MPI_DOUBLE, 8, &[0; 8], &mut [0; 8]).unwrap_err();
        assert_eq!(e.code, MPI_ERR_OP);
    }

    #[test]
    fn invalid_window_handles_are_rejected() {
        assert_eq!(bad_win(MPI_WIN_NULL).code, MPI_ERR_WIN);
        assert!(inner(MPI_WIN_NULL).is_err());
        assert!(inner(0x1234).is_err());
    }
}
