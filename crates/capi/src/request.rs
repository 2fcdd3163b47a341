//! Requests, messages and statuses: starting point-to-point operations on the engine
//! (packing non-contiguous data), completing them (unpacking), and the
//! wait/test/cancel/free family.
//!
//! Two kinds of request handles exist. Table requests (persistent, buffered, derived
//! datatypes, generalized requests, nonblocking collectives, RMA and I/O requests) live in
//! `State::reqs` behind the library lock. Fast requests (`MPI_Isend`/`MPI_Irecv` of a
//! predefined contiguous datatype) are one engine request each and live in a lock-free
//! slot table (see "Fast request handles" below); the wait/test family completes them
//! without the library lock and writes their statuses directly. Such operations that
//! complete inside their start call have no engine request: a send shares the stateless
//! `SEND_DONE` handle, a receive (its message had arrived) gets a lock-free
//! completed-request slot that holds its status (see "Requests completed at start").
//! Small nonblocking collectives on the shared-memory segment are light requests, slots of
//! `oxmpi_coll::nbc::light` completed without the library lock (see "Light requests").

use crate::backend::{self, EReq, EStatus, SendMode};
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::{check_count, inp, out, slice_out, MpiError, MpiResult};
use crate::grequest::GreqTest;
use crate::icoll::sched::light_slot;
use crate::state::{lock, State};
use crate::status::status_set_bytes;
use oxmpi_coll::nbc::light;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

pub(crate) use crate::objects::{Message, Pending, Persist, Request, Unpack};
pub(crate) use crate::status::empty_status;
pub use crate::status::MpiStatus;

/// True for `MPI_STATUS_IGNORE`/`MPI_STATUSES_IGNORE` (`(MPI_Status*)1`) and NULL.
pub(crate) fn ignored(p: *mut MpiStatus) -> bool {
    p.is_null() || p as usize == 1
}

/// Write a status unless it is ignored. `set_error` also writes `MPI_ERROR` (only the
/// multiple-completion calls do that).
pub(crate) fn write_status(p: *mut MpiStatus, s: &MpiStatus, set_error: bool) {
    if ignored(p) {
        return;
    }
    // SAFETY: a non-ignored status pointer from the caller points to an MPI_Status.
    unsafe {
        let old_err = (*p).error;
        p.write_unaligned(MpiStatus {
            error: if set_error { s.error } else { old_err },
            ..*s
        });
    }
}

impl Pending {
    /// An operation that is complete already, with status `s` (no engine request,
    /// nothing staged or to unpack).
    #[inline]
    pub fn done(s: EStatus) -> Pending {
        Pending {
            ereq: None,
            done: Some(s),
            stage: None,
            unpack: None,
            bsend_bytes: 0,
        }
    }
}

/// The status of an operation completed without a message of its own (a buffered send,
/// a request completed at once): any source, any tag, no data.
pub(crate) const NO_MESSAGE: EStatus = EStatus {
    source: MPI_ANY_SOURCE,
    tag: MPI_ANY_TAG,
    ..EStatus::PROC_NULL
};

/// Validate a rank argument (`allow_any`: `MPI_ANY_SOURCE` allowed).
pub(crate) fn check_rank(r: i32, size: i32, allow_any: bool) -> MpiResult {
    if r == MPI_PROC_NULL || (allow_any && r == MPI_ANY_SOURCE) || (0..size).contains(&r) {
        Ok(())
    } else {
        mpi_bail!(
            MPI_ERR_RANK,
            "rank {r} is not in the communicator (size {size})"
        )
    }
}

/// Validate a tag argument (`allow_any`: `MPI_ANY_TAG` allowed).
pub(crate) fn check_tag(t: i32, allow_any: bool) -> MpiResult {
    if (allow_any && t == MPI_ANY_TAG) || (0..=backend::TAG_UB).contains(&t) {
        Ok(())
    } else {
        mpi_bail!(MPI_ERR_TAG, "tag {t} is outside 0..={}", backend::TAG_UB)
    }
}

/// Validate a buffer: NULL is only allowed for empty messages or derived types
/// (`MPI_BOTTOM` with absolute displacements).
fn check_buf(buf: *const c_void, count: usize, dt: &Datatype) -> MpiResult {
    if buf.is_null() && count > 0 && dt.size > 0 && dt.predefined {
        mpi_bail!(MPI_ERR_BUFFER, "NULL buffer with count {count}");
    }
    Ok(())
}

/// Start a send on the engine. The lock is held by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_send(
    st: &mut State,
    buf: *const c_void,
    count: i64,
    datatype: c_int,
    dest: i32,
    tag: i32,
    comm: c_int,
    mode: SendMode,
) -> MpiResult<Pending> {
    let dt = st.dtype_committed(datatype);
    start_send_typed(st, buf, count, dt, dest, tag, comm, mode)
}

/// [`start_send`] with the datatype object (a persistent request holds it, so that the
/// user may free the handle), or the error of looking it up.
#[allow(clippy::too_many_arguments)]
fn start_send_typed(
    st: &mut State,
    buf: *const c_void,
    count: i64,
    dt: MpiResult<Arc<Datatype>>,
    dest: i32,
    tag: i32,
    comm: c_int,
    mode: SendMode,
) -> MpiResult<Pending> {
    let (ecomm, size) = {
        let c = st.comm(comm)?;
        (c.ecomm, c.size)
    };
    let go = || -> MpiResult<Pending> {
        let n = check_count(count)?;
        let dt = dt?;
        check_rank(dest, size, false)?;
        check_tag(tag, false)?;
        check_buf(buf, n, &dt)?;
        if dest == MPI_PROC_NULL {
            return Ok(Pending::done(EStatus::PROC_NULL));
        }
        let eng = backend::engine()?;
        let len = n * dt.size;
        let mut bsend_bytes = 0;
        // SAFETY: the MPI send contract: `buf` holds `count` items of `datatype`.
        let (ptr, stage) = unsafe { send_source(buf, n, &dt, mode == SendMode::Buffered) };
        if mode == SendMode::Buffered {
            bsend_bytes = reserve_bsend(st, comm, len)?;
        }
        // Buffered sends are copied by us (above) and sent as standard sends; the attached
        // buffer only does the accounting.
        let emode = if mode == SendMode::Buffered {
            SendMode::Standard
        } else {
            mode
        };
        // SAFETY: `ptr` points to `len` readable bytes: the user's contiguous buffer (MPI
        // contract: it stays valid until completion) or our staging vector, which the
        // returned Pending keeps alive until completion.
        let ereq = unsafe { eng.isend(ptr, len, dest, tag, ecomm, emode) }.map_err(backend::err)?;
        Ok(Pending {
            ereq: Some(ereq),
            done: None,
            stage,
            unpack: None,
            bsend_bytes,
        })
    };
    go().map_err(|e| e.on(comm))
}

/// `MPI_BUFFER_AUTOMATIC` (`(void*)-2`): the library finds the room itself.
pub(crate) const BUFFER_AUTOMATIC: usize = -2_isize as usize;

/// Account `len` bytes of a buffered send on `comm` against its buffer: the
/// communicator's (MPI 4.1), else the process's, else a session's (the sessions'
/// communicators are not told apart). Every pending buffered send counts.
fn reserve_bsend(st: &mut State, comm: c_int, len: usize) -> MpiResult<usize> {
    let need = len + MPI_BSEND_OVERHEAD as usize;
    reap_orphans(st);
    let attached = st
        .bsend_buffers
        .get(&comm)
        .copied()
        .or(st.bsend_buffer)
        .or_else(|| {
            let sessions = crate::handles::direct_base(crate::handles::kind::SESSION) as c_int;
            st.bsend_buffers
                .iter()
                .find(|(h, _)| *h & !0x03ff_ffff == sessions)
                .map(|(_, b)| *b)
        });
    let Some((addr, cap)) = attached else {
        mpi_bail!(
            MPI_ERR_BUFFER,
            "buffered send without an attached buffer (MPI_Buffer_attach)"
        );
    };
    if addr == BUFFER_AUTOMATIC {
        return Ok(need);
    }
    let used: usize = st.orphans.iter().map(|p| p.bsend_bytes).sum();
    if used + need > cap {
        mpi_bail!(
            MPI_ERR_BUFFER,
            "attached buffer too small: {cap} bytes, {used} in use, {need} needed"
        );
    }
    Ok(need)
}

/// Start a receive on the engine. The lock is held by the caller.
pub(crate) fn start_recv(
    st: &mut State,
    buf: *mut c_void,
    count: i64,
    datatype: c_int,
    source: i32,
    tag: i32,
    comm: c_int,
) -> MpiResult<Pending> {
    let dt = st.dtype_committed(datatype);
    start_recv_typed(st, buf, count, dt, source, tag, comm)
}

/// [`start_recv`] with the datatype object, or the error of looking it up.
fn start_recv_typed(
    st: &mut State,
    buf: *mut c_void,
    count: i64,
    dt: MpiResult<Arc<Datatype>>,
    source: i32,
    tag: i32,
    comm: c_int,
) -> MpiResult<Pending> {
    let (ecomm, size) = {
        let c = st.comm(comm)?;
        (c.ecomm, c.size)
    };
    let go = || -> MpiResult<Pending> {
        let n = check_count(count)?;
        let dt = dt?;
        check_rank(source, size, true)?;
        check_tag(tag, true)?;
        check_buf(buf, n, &dt)?;
        if source == MPI_PROC_NULL {
            return Ok(Pending::done(EStatus::PROC_NULL));
        }
        let eng = backend::engine()?;
        let (ptr, len, stage, unpack) = recv_target(buf, n, &dt);
        // SAFETY: `ptr` points to `len` writable bytes: the user's contiguous buffer (MPI
        // contract) or our staging vector, kept alive by the returned Pending.
        let ereq = unsafe { eng.irecv(ptr, len, source, tag, ecomm) }.map_err(backend::err)?;
        Ok(Pending {
            ereq: Some(ereq),
            done: None,
            stage,
            unpack,
            bsend_bytes: 0,
        })
    };
    go().map_err(|e| e.on(comm))
}

/// Where a send of `n` items of `dt` at `buf` reads its bytes: the user's buffer itself when
/// the type is contiguous (and `copy` is false), else a packed copy, returned with the
/// pointer so that the caller keeps it alive until the send completes.
///
/// # Safety
/// `buf` holds `n` items of `dt` (the MPI send contract).
pub(crate) unsafe fn send_source(
    buf: *const c_void,
    n: usize,
    dt: &Datatype,
    copy: bool,
) -> (*const u8, Option<Vec<u8>>) {
    if dt.is_contiguous() && !copy {
        let off = dt.blocks.first().map_or(0, |b| b.disp);
        (buf.cast::<u8>().wrapping_offset(off), None)
    } else {
        let mut v = Vec::new();
        // SAFETY: guaranteed by the caller.
        unsafe { pack_into(dt, n, buf.cast(), &mut v) };
        (v.as_ptr(), Some(v))
    }
}

/// Where to receive: the user buffer if contiguous, else a staging buffer.
#[allow(clippy::type_complexity)]
pub(crate) fn recv_target(
    buf: *mut c_void,
    n: usize,
    dt: &Arc<Datatype>,
) -> (*mut u8, usize, Option<Vec<u8>>, Option<Unpack>) {
    let len = n * dt.size;
    if dt.is_contiguous() {
        let off = dt.blocks.first().map_or(0, |b| b.disp);
        (buf.cast::<u8>().wrapping_offset(off), len, None, None)
    } else {
        let mut v = vec![0u8; len];
        let p = v.as_mut_ptr();
        (
            p,
            len,
            Some(v),
            Some(Unpack {
                dt: dt.clone(),
                count: n,
                buf: buf as usize,
            }),
        )
    }
}

/// Finish a completed operation: unpack, build the MPI status and the error code.
pub(crate) fn finish(p: Pending, s: EStatus) -> (MpiStatus, c_int) {
    if let (Some(u), Some(stage)) = (&p.unpack, &p.stage) {
        let n = s.count_bytes.min(stage.len());
        // SAFETY: `u.buf` is the user's receive buffer for `u.count` items of `u.dt` (MPI
        // contract: valid until completion, which is now).
        unsafe { unpack_from(&u.dt, u.count, u.buf as *mut u8, &stage[..n]) };
    }
    let code = s.error.map_or(MPI_SUCCESS, backend::class_code);
    let mut st = MpiStatus {
        source: s.source,
        tag: s.tag,
        error: code,
        ..Default::default()
    };
    status_set_bytes(&mut st, s.count_bytes, s.cancelled);
    (st, code)
}

/// Block until a pending operation of a blocking call completes (no lock held) and finish
/// it.
pub(crate) fn wait_pending(p: Pending) -> MpiResult<(MpiStatus, c_int)> {
    let s = match (p.ereq, p.done) {
        (Some(r), _) => backend::engine()?.wait_blocking(r),
        (None, Some(s)) => s,
        (None, None) => EStatus::PROC_NULL,
    };
    Ok(finish(p, s))
}

/// Test an orphaned operation list (freed requests, buffered sends) and drop the ones
/// that completed.
pub(crate) fn reap_orphans(st: &mut State) {
    let Some(eng) = oxmpi_engine::engine() else {
        return;
    };
    st.orphans.retain(|p| match p.ereq {
        Some(r) => eng.test(r).is_none(),
        None => false,
    });
}

// ---------------------------------------------------------------------------------------
// Fast request handles
// ---------------------------------------------------------------------------------------
//
// Most nonblocking operations (a contiguous predefined datatype on an ordinary
// communicator, not persistent, not buffered) are one engine request with nothing to do at
// completion but converting its status. Such a request gets a "fast" handle: slot `i` of
// `FAST`, which holds the engine request id and the communicator (for its error handler).
// Starting, testing, waiting for and freeing it take no library lock: the slot is claimed
// with a compare-and-swap (a plain load and store while one thread reaches the library, see
// `claim`) and released by the call that completes or frees the request.
// Concurrent use of one request by two threads is erroneous in MPI, so the slot needs no
// other synchronisation (the engine's own lock orders the engine request's life).
//
// The slot index is the low bits of the engine request id (the engine's slab index: small
// and unique among live requests). If the slot is taken anyway (more live requests than
// slots, or another id layout), the request goes into the locked request table instead:
// still correct, only slower.

/// Number of fast request slots.
const FAST_SLOTS: usize = 1 << 16;

/// The handle bits of fast requests (see [`crate::handles::FAST_REQUEST_BASE`]).
const FAST_BASE: u32 = crate::handles::FAST_REQUEST_BASE;

/// One fast request slot.
struct FastSlot {
    /// The engine request id; 0 = free.
    ereq: AtomicU64,
    /// The communicator handle of the operation.
    comm: AtomicI32,
}

static FAST: [FastSlot; FAST_SLOTS] = [const {
    FastSlot {
        ereq: AtomicU64::new(0),
        comm: AtomicI32::new(0),
    }
}; FAST_SLOTS];

/// Claims a free slot word `a` (`free` -> `to`): a compare-and-swap, or while `solo` (the
/// engine's lock is not shared, [`oxmpi_engine::Engine::lock_shared`]: the thread that
/// calls is the only one that reaches the library, and the switch to shared happens on
/// it before another thread can start) a plain load and store.
#[inline(always)]
fn claim(a: &AtomicU64, free: u64, to: u64, solo: bool) -> bool {
    if solo {
        if a.load(Ordering::Relaxed) != free {
            return false;
        }
        a.store(to, Ordering::Relaxed);
        return true;
    }
    a.compare_exchange(free, to, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
}

/// The request handle of a started engine request `r` of communicator `comm`: a fast
/// handle if its slot is free, else an entry of the request table. `solo`: see [`claim`].
#[inline]
pub(crate) fn new_engine_request(r: EReq, comm: c_int, solo: bool) -> c_int {
    let i = r.0 as usize & (FAST_SLOTS - 1);
    let slot = &FAST[i];
    if r.0 != 0 && claim(&slot.ereq, 0, r.0, solo) {
        slot.comm.store(comm, Ordering::Relaxed);
        return (FAST_BASE | i as u32) as c_int;
    }
    table_request(r, comm)
}

pub(crate) use crate::handles::SEND_DONE;

/// The handle of an operation that finished when it started, with status `s`: the shared
/// [`SEND_DONE`] for a plain completed send, else a completed-request slot (see "Requests
/// completed at start" below), or a completed request of the table when no slot is free.
/// `solo`: see [`claim`].
#[inline(always)]
pub(crate) fn completed_request(s: EStatus, comm: c_int, solo: bool) -> c_int {
    if is_plain_send_status(&s) {
        return SEND_DONE;
    }
    completed_slot(s, comm, solo)
}

/// [`completed_request`] of an operation with a status to keep.
#[inline(never)]
fn completed_slot(s: EStatus, comm: c_int, solo: bool) -> c_int {
    done_insert(&s, comm, solo).unwrap_or_else(|| completed_table(s, comm))
}

/// [`completed_request`] when every probed completed-request slot is taken.
#[cold]
fn completed_table(s: EStatus, comm: c_int) -> c_int {
    lock().reqs.insert(Request {
        comm,
        persistent: None,
        active: Some(Pending {
            ereq: None,
            done: Some(s),
            stage: None,
            unpack: None,
            bsend_bytes: 0,
        }),
    })
}

/// Whether `s` is the status the engine gives a completed send (what [`SEND_DONE`] stands
/// for).
#[inline]
fn is_plain_send_status(s: &EStatus) -> bool {
    s.source == MPI_ANY_SOURCE
        && s.tag == MPI_ANY_TAG
        && s.error.is_none()
        && s.count_bytes == 0
        && !s.cancelled
}

/// The completion of a [`SEND_DONE`] request: the empty status of a completed send.
#[inline]
fn send_done() -> Completed {
    Completed {
        status: SEND_DONE_STATUS,
        code: MPI_SUCCESS,
        freed: true,
        comm: MPI_COMM_WORLD,
    }
}

/// The status of a [`SEND_DONE`] request (what [`status_of`] makes of the engine's status
/// of a completed send: any source, any tag, no bytes, not cancelled).
const SEND_DONE_STATUS: MpiStatus = MpiStatus {
    count_lo: 0,
    count_hi_and_cancelled: 0,
    source: MPI_ANY_SOURCE,
    tag: MPI_ANY_TAG,
    error: MPI_SUCCESS,
};

/// [`new_engine_request`] when the fast slot is taken.
#[cold]
fn table_request(r: EReq, comm: c_int) -> c_int {
    lock().reqs.insert(Request {
        comm,
        persistent: None,
        active: Some(Pending {
            ereq: Some(r),
            done: None,
            stage: None,
            unpack: None,
            bsend_bytes: 0,
        }),
    })
}

/// The slot of fast handle `h` (`None`: not a fast handle).
#[inline]
fn fast_slot(h: c_int) -> Option<&'static FastSlot> {
    let hu = h as u32;
    if hu & 0xff00_0000 != FAST_BASE {
        return None;
    }
    FAST.get((hu & 0x00ff_ffff) as usize)
}

/// The engine request and communicator of the live fast request in `slot` (handle `h`).
#[inline]
fn fast_get(slot: &FastSlot, h: c_int) -> MpiResult<(EReq, c_int)> {
    match slot.ereq.load(Ordering::Relaxed) {
        0 => mpi_bail!(MPI_ERR_REQUEST, "invalid request handle {h:#x}"),
        r => Ok((EReq(r), slot.comm.load(Ordering::Relaxed))),
    }
}

/// Free a fast slot (its request completed or was freed).
#[inline]
fn fast_release(slot: &FastSlot) {
    slot.ereq.store(0, Ordering::Release);
}

// ---------------------------------------------------------------------------------------
// Requests completed at start
// ---------------------------------------------------------------------------------------
//
// A nonblocking receive whose message had already arrived (an unexpected eager message, a
// receive from `MPI_PROC_NULL`, a small message to ourselves) completes inside `MPI_Irecv`
// ([`oxmpi_engine::Engine::irecv_started`]) and leaves no engine request behind. Unlike a
// completed send (the shared [`SEND_DONE`]) it has a status to keep until its completion
// call: it gets a slot of `DONE`, which holds the MPI status and the communicator. Claiming
// a slot is one compare-and-swap (see `claim`) at a moving cursor (a few probes, then the
// locked table);
// the completion call (wait/test family, `MPI_Request_free`) reads the status and releases
// the slot with one store. As with the fast slots, concurrent use of one request by two
// threads is erroneous in MPI; the user's own synchronisation that hands a request to
// another thread orders the slot's contents for it.

/// Number of completed-request slots.
const DONE_SLOTS: usize = 1 << 12;

/// The handle bits of completed-request slot 0: fast handles with index bit 16 set (above
/// every fast slot index, below [`SEND_DONE`]'s); slot `i` is `DONE_BASE | i`.
const DONE_BASE: u32 = FAST_BASE | 0x0001_0000;

/// Slots probed from the cursor before falling back to the locked table.
const DONE_PROBES: usize = 8;

/// `DoneSlot::state` of a free slot.
const DONE_FREE: u64 = 0;
/// `DoneSlot::state` while the claiming thread writes the status.
const DONE_FILLING: u64 = 1;
/// `DoneSlot::state` bit of a live request (the low 32 bits hold its communicator).
const DONE_LIVE: u64 = 1 << 63;

/// One completed-request slot: the MPI status of a finished operation.
#[repr(align(32))]
struct DoneSlot {
    /// [`DONE_FREE`], [`DONE_FILLING`], or [`DONE_LIVE`] | communicator handle.
    state: AtomicU64,
    /// `source | tag << 32`.
    src_tag: AtomicU64,
    /// `count_lo | count_hi_and_cancelled << 32`.
    count: AtomicU64,
    /// `MPI_ERROR` (the completion's error code).
    error: AtomicI32,
}

static DONE: [DoneSlot; DONE_SLOTS] = [const {
    DoneSlot {
        state: AtomicU64::new(DONE_FREE),
        src_tag: AtomicU64::new(0),
        count: AtomicU64::new(0),
        error: AtomicI32::new(0),
    }
}; DONE_SLOTS];

/// Where the next claim starts probing (a hint: threads racing on it only probe the same
/// slots, and the compare-and-swap gives each slot to one of them). It only moves forward
/// (modulo the table), so a sliding window of live requests never blocks it.
static DONE_NEXT: AtomicUsize = AtomicUsize::new(0);

/// Store the completion `s` of an operation on `comm` in a free slot; its handle, or `None`
/// if the probed slots are all taken.
#[inline]
fn done_insert(s: &EStatus, comm: c_int, solo: bool) -> Option<c_int> {
    let (m, code) = status_of(s);
    let start = DONE_NEXT.load(Ordering::Relaxed);
    for k in 0..DONE_PROBES {
        let i = start.wrapping_add(k) & (DONE_SLOTS - 1);
        let slot = &DONE[i];
        if slot.state.load(Ordering::Relaxed) != DONE_FREE
            || !claim(&slot.state, DONE_FREE, DONE_FILLING, solo)
        {
            continue;
        }
        slot.src_tag.store(
            m.source as u32 as u64 | (m.tag as u32 as u64) << 32,
            Ordering::Relaxed,
        );
        slot.count.store(
            m.count_lo as u32 as u64 | (m.count_hi_and_cancelled as u32 as u64) << 32,
            Ordering::Relaxed,
        );
        slot.error.store(code, Ordering::Relaxed);
        slot.state
            .store(DONE_LIVE | comm as u32 as u64, Ordering::Release);
        DONE_NEXT.store(i + 1, Ordering::Relaxed);
        return Some((DONE_BASE | i as u32) as c_int);
    }
    // A run of live slots (requests kept a long time): the next claim starts past it
    // instead of failing on it again.
    DONE_NEXT.store(start.wrapping_add(DONE_PROBES), Ordering::Relaxed);
    None
}

/// The slot of completed-request handle `h` (`None`: not such a handle).
#[inline]
fn done_slot(h: c_int) -> Option<&'static DoneSlot> {
    let hu = h as u32;
    if hu & !(DONE_SLOTS as u32 - 1) != DONE_BASE {
        return None;
    }
    Some(&DONE[(hu as usize) & (DONE_SLOTS - 1)])
}

/// The status (its `error` is the completion's error code) and communicator held by
/// `slot`; `None` if the slot is not live (a stale or invalid handle).
#[inline]
fn done_read(slot: &DoneSlot) -> Option<(MpiStatus, c_int)> {
    let state = slot.state.load(Ordering::Acquire);
    if state & DONE_LIVE == 0 {
        return None;
    }
    let st = slot.src_tag.load(Ordering::Relaxed);
    let count = slot.count.load(Ordering::Relaxed);
    let status = MpiStatus {
        count_lo: count as u32 as c_int,
        count_hi_and_cancelled: (count >> 32) as u32 as c_int,
        source: st as u32 as c_int,
        tag: (st >> 32) as u32 as c_int,
        error: slot.error.load(Ordering::Relaxed),
    };
    Some((status, state as u32 as c_int))
}

/// The error for a completed-request handle `h` whose slot is not live.
#[cold]
fn done_invalid(h: c_int) -> MpiError {
    MpiError::new(MPI_ERR_REQUEST, format!("invalid request handle {h:#x}"))
}

/// The completion held by live slot `slot` (handle `h`); the slot stays live.
#[inline]
fn done_get(slot: &DoneSlot, h: c_int) -> MpiResult<Completed> {
    let (status, comm) = done_read(slot).ok_or_else(|| done_invalid(h))?;
    Ok(Completed {
        status,
        code: status.error,
        freed: true,
        comm,
    })
}

/// Free live slot `slot` (its request completed or was freed).
#[inline]
fn done_release(slot: &DoneSlot) {
    slot.state.store(DONE_FREE, Ordering::Release);
}

/// Complete the request of live slot `slot` (handle `h`): its completion; the slot is free
/// again.
#[inline]
fn done_take(slot: &DoneSlot, h: c_int) -> MpiResult<Completed> {
    let c = done_get(slot, h)?;
    done_release(slot);
    Ok(c)
}

/// The MPI status of a completed engine operation and its error code.
#[inline]
pub(crate) fn status_of(s: &EStatus) -> (MpiStatus, c_int) {
    let code = s.error.map_or(MPI_SUCCESS, backend::class_code);
    let mut m = MpiStatus {
        source: s.source,
        tag: s.tag,
        error: code,
        ..Default::default()
    };
    status_set_bytes(&mut m, s.count_bytes, s.cancelled);
    (m, code)
}

// ---------------------------------------------------------------------------------------
// Completion: wait/test and their any/some/all forms
// ---------------------------------------------------------------------------------------

/// A completed request.
struct Completed {
    status: MpiStatus,
    code: c_int,
    /// The handle was released (not persistent): the caller sets it to `MPI_REQUEST_NULL`.
    freed: bool,
    /// The request's communicator (its error handler reports a failure).
    comm: c_int,
}

/// Outcome of testing one request handle.
enum Tested {
    /// Null or inactive: an empty status.
    Empty,
    NotDone,
    Done(Completed),
}

/// Outcome of testing a request of the table (lock held).
enum Locked {
    Empty,
    NotDone,
    Done(MpiStatus, c_int, bool),
    /// A completed generalized request, removed from the tables: its callbacks run once
    /// the lock is released ([`crate::grequest::finish`]).
    Greq(crate::grequest::Greq),
    /// The completed round of a persistent collective (its internal request, removed from
    /// the tables); the persistent request stays, inactive.
    Round(crate::grequest::Greq),
}

/// The partitioned operation of request `h`, if it is one.
pub(crate) fn part_of(st: &State, h: c_int) -> Option<Arc<dyn crate::objects::Partitioned>> {
    st.reqs.get(h)?.persistent.as_ref()?.part.clone()
}

/// The internal request of the round in progress of persistent collective `h`, if `h` is
/// one and is active.
pub(crate) fn running_round(st: &State, h: c_int) -> Option<c_int> {
    st.reqs.get(h)?.persistent.as_ref()?.coll.as_ref()?.running
}

/// Test request `h` of the table (lock held); completes and frees it (or deactivates a
/// persistent one) when done.
fn test_locked(st: &mut State, h: c_int) -> MpiResult<Locked> {
    if let Some(inner) = running_round(st, h) {
        return Ok(match crate::grequest::take_if_complete(st, inner) {
            Some(GreqTest::Done(g)) => {
                let coll = st.reqs.get_mut(h).and_then(|r| r.persistent.as_mut());
                if let Some(c) = coll.and_then(|p| p.coll.as_mut()) {
                    c.running = None;
                }
                Locked::Round(g)
            }
            Some(GreqTest::NotDone) => Locked::NotDone,
            None => mpi_bail!(
                MPI_ERR_INTERN,
                "lost the round of persistent collective {h:#x}"
            ),
        });
    }
    if let Some(p) = part_of(st, h) {
        return Ok(match p.test(true)? {
            Some((status, code)) => Locked::Done(status, code, false),
            None if p.is_active() => Locked::NotDone,
            None => Locked::Empty,
        });
    }
    match crate::grequest::take_if_complete(st, h) {
        Some(GreqTest::NotDone) => return Ok(Locked::NotDone),
        Some(GreqTest::Done(g)) => return Ok(Locked::Greq(g)),
        None => {}
    }
    let Some(req) = st.reqs.get_mut(h) else {
        mpi_bail!(MPI_ERR_REQUEST, "invalid request handle {h:#x}");
    };
    let Some(p) = req.active.as_mut() else {
        return Ok(Locked::Empty);
    };
    let s = match (p.ereq, p.done) {
        (Some(r), _) => match backend::engine()?.test(r) {
            Some(s) if failure_pending(&s) => {
                let (status, code) = status_of(&s);
                return Ok(Locked::Done(status, code, false));
            }
            Some(s) => s,
            None => return Ok(Locked::NotDone),
        },
        (None, Some(s)) => s,
        (None, None) => EStatus::PROC_NULL,
    };
    let p = req.active.take().expect("checked above");
    let (status, code) = finish(p, s);
    let freed = req.persistent.is_none();
    if freed {
        st.reqs.remove(h);
    }
    Ok(Locked::Done(status, code, freed))
}

/// Whether `s` says a wildcard receive is failure-pending (ULFM's
/// `MPIX_ERR_PROC_FAILED_PENDING`): reported like a completion with that error, but the
/// request stays active and its handle valid.
#[inline]
fn failure_pending(s: &EStatus) -> bool {
    s.error == Some(oxmpi_engine::ErrorClass::ProcFailedPending)
}

/// The [`Tested`] of a failure-pending request (its handle stays).
fn pending_failure(s: &EStatus, comm: c_int) -> Tested {
    let (status, code) = status_of(s);
    Tested::Done(Completed {
        status,
        code,
        freed: false,
        comm,
    })
}

/// Turn a table outcome into a [`Tested`] (no lock held: runs generalized request
/// callbacks).
fn unlocked(t: Locked, comm: c_int) -> Tested {
    match t {
        Locked::Empty => Tested::Empty,
        Locked::NotDone => Tested::NotDone,
        Locked::Done(status, code, freed) => Tested::Done(Completed {
            status,
            code,
            freed,
            comm,
        }),
        Locked::Greq(g) => greq_done(&g, true, comm),
        Locked::Round(g) => greq_done(&g, false, comm),
    }
}

/// Finish completed generalized request `g` (no lock held); `freed`: the user's handle is
/// released (not the round of a persistent collective).
fn greq_done(g: &crate::grequest::Greq, freed: bool, comm: c_int) -> Tested {
    let (status, code) = crate::grequest::finish(g);
    Tested::Done(Completed {
        status,
        code,
        freed,
        comm,
    })
}

/// The communicator a table request belongs to (for error handling).
fn req_comm(st: &State, h: c_int) -> c_int {
    st.reqs.get(h).map_or(MPI_COMM_WORLD, |r| r.comm)
}

/// The communicator of any request handle (for error handling).
fn handle_comm(h: c_int) -> c_int {
    if h == SEND_DONE {
        return MPI_COMM_WORLD;
    }
    if let Some(slot) = done_slot(h) {
        return done_get(slot, h).map_or(MPI_COMM_WORLD, |c| c.comm);
    }
    if let Some(i) = light_slot(h) {
        return light::owner(i);
    }
    match fast_slot(h) {
        Some(slot) => slot.comm.load(Ordering::Relaxed),
        None => req_comm(&lock(), h),
    }
}

/// Test request handle `h` once (no lock held).
#[inline]
fn test_handle(h: c_int) -> MpiResult<Tested> {
    if h == MPI_REQUEST_NULL {
        return Ok(Tested::Empty);
    }
    if h == SEND_DONE {
        return Ok(Tested::Done(send_done()));
    }
    if let Some(slot) = done_slot(h) {
        return done_take(slot, h).map(Tested::Done);
    }
    if let Some(slot) = fast_slot(h) {
        let (r, comm) = fast_get(slot, h)?;
        return Ok(match backend::engine()?.test(r) {
            None => Tested::NotDone,
            Some(s) if failure_pending(&s) => pending_failure(&s, comm),
            Some(s) => {
                fast_release(slot);
                let (status, code) = status_of(&s);
                Tested::Done(Completed {
                    status,
                    code,
                    freed: true,
                    comm,
                })
            }
        });
    }
    // Light requests after the point-to-point fast handles: a point-to-point test pays no
    // compare for them.
    if let Some(i) = light_slot(h) {
        let comm = light_owner(i, h)?;
        return Ok(match light::test(i) {
            Some(r) => Tested::Done(light_completed(r, comm)),
            None => Tested::NotDone,
        });
    }
    let mut st = lock();
    let comm = req_comm(&st, h);
    let t = test_locked(&mut st, h).map_err(|e| e.on(comm))?;
    drop(st);
    Ok(unlocked(t, comm))
}

/// Wait for request handle `h` (no lock held while blocking): `Empty` or `Done`.
#[inline]
fn wait_handle(h: c_int) -> MpiResult<Tested> {
    if h == MPI_REQUEST_NULL {
        return Ok(Tested::Empty);
    }
    if h == SEND_DONE {
        return Ok(Tested::Done(send_done()));
    }
    if let Some(slot) = done_slot(h) {
        return done_take(slot, h).map(Tested::Done);
    }
    if let Some(slot) = fast_slot(h) {
        let (r, comm) = fast_get(slot, h)?;
        let s = backend::engine()?.wait(r);
        if failure_pending(&s) {
            return Ok(pending_failure(&s, comm));
        }
        fast_release(slot);
        let (status, code) = status_of(&s);
        return Ok(Tested::Done(Completed {
            status,
            code,
            freed: true,
            comm,
        }));
    }
    // Light requests after the point-to-point fast handles (no compare on their path).
    if let Some(i) = light_slot(h) {
        return light_wait(i, h);
    }
    wait_table(h)
}

/// [`wait_handle`] for a request of the table.
fn wait_table(h: c_int) -> MpiResult<Tested> {
    loop {
        let mut st = lock();
        let comm = req_comm(&st, h);
        match test_locked(&mut st, h).map_err(|e| e.on(comm))? {
            Locked::NotDone => {
                // Block in the engine without holding our lock.
                let ereq = st
                    .reqs
                    .get(h)
                    .and_then(|r| r.active.as_ref())
                    .and_then(|p| p.ereq);
                drop(st);
                if let Some(r) = ereq {
                    let s = backend::engine()?.wait(r);
                    if failure_pending(&s) {
                        return Ok(pending_failure(&s, comm));
                    }
                    let mut st = lock();
                    let Some(req) = st.reqs.get_mut(h) else {
                        mpi_bail!(MPI_ERR_REQUEST, "request {h:#x} was freed while waiting");
                    };
                    let Some(mut p) = req.active.take() else {
                        return Ok(Tested::Empty);
                    };
                    p.ereq = None;
                    let (status, code) = finish(p, s);
                    let freed = req.persistent.is_none();
                    if freed {
                        st.reqs.remove(h);
                    }
                    return Ok(Tested::Done(Completed {
                        status,
                        code,
                        freed,
                        comm,
                    }));
                }
                // A generalized request, completed by another thread (or, for a
                // nonblocking collective, by advancing its schedule here): keep polling.
                let eng = backend::engine()?;
                if !crate::icoll::sched::progress_pending() {
                    eng.progress();
                    std::thread::yield_now();
                } else if eng.yields_when_idle() {
                    // Oversubscribed (or mpi_yield_when_idle): the ranks this schedule
                    // waits for need the CPU.
                    std::thread::yield_now();
                }
            }
            t => {
                drop(st);
                return Ok(unlocked(t, comm));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Light requests: nonblocking collectives on the shared-memory segment
// ---------------------------------------------------------------------------------------
//
// A small nonblocking collective on the communicator's segment with nothing to unpack at
// completion is a slot of `oxmpi_coll::nbc::light` (handle: `icoll::sched::light_handle`):
// testing it advances the collective (post once its buffer is free, then look at the
// stamps its result needs) and, once it ended, frees the slot; no library lock, no
// generalized request. Its status is the empty one of a collective, with its error code.

/// The communicator of live light request `i` (handle `h`), or the invalid-handle error.
#[inline]
fn light_owner(i: usize, h: c_int) -> MpiResult<c_int> {
    if !light::is_live(i) {
        mpi_bail!(MPI_ERR_REQUEST, "invalid request handle {h:#x}");
    }
    Ok(light::owner(i))
}

/// The completion of a light request of `comm` that ended with `r`.
#[inline]
fn light_completed(r: oxmpi_coll::Result<()>, comm: c_int) -> Completed {
    let code = match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => backend::err(e).code,
    };
    Completed {
        status: MpiStatus {
            error: code,
            ..SEND_DONE_STATUS
        },
        code,
        freed: true,
        comm,
    }
}

// Turns a [`light_wait`] that yields when idle looks again without yielding while its
// collective waits only for ranks pinned to another CPU ([`light::remote_only`]), before
// it yields at every turn again: those ranks run on their own CPU, and a yield would hand
// ours to a rank that may only wait (for us, e.g. in the next barrier) and yield back.
// Bounded, so that a rank of our CPU with work of its own waits for it a short time: as
// long as the segment's own waits for such ranks.
use oxmpi_coll::sm::REMOTE_SPIN;

/// Whether a [`light_wait`] that yields when idle looks again without yielding: its
/// collective waits only for ranks pinned to another CPU (`remote`), for at most
/// [`REMOTE_SPIN`] turns (`spun` so far).
#[inline]
fn spins_for_remote(remote: bool, spun: u32) -> bool {
    remote && spun < REMOTE_SPIN
}

/// [`wait_handle`] for light request `i`: advance it until it ends; every 32nd turn (every
/// turn when the engine yields while idle) the other collectives and the transports too.
/// When the engine yields, a wait for ranks pinned to another CPU alone looks again
/// without yielding, a bounded time ([`spins_for_remote`]).
fn light_wait(i: usize, h: c_int) -> MpiResult<Tested> {
    let comm = light_owner(i, h)?;
    // Ended at the first look (the other ranks were there): no engine to look up.
    if let Some(r) = light::test(i) {
        return Ok(Tested::Done(light_completed(r, comm)));
    }
    let yields = backend::engine()?.yields_when_idle();
    let (mut turns, mut spun) = (0u32, 0u32);
    loop {
        if let Some(r) = light::test(i) {
            return Ok(Tested::Done(light_completed(r, comm)));
        }
        turns = turns.wrapping_add(1);
        let spin = yields && spins_for_remote(light::remote_only(i), spun);
        spun += u32::from(spin);
        if spin {
            if turns % 32 == 0 {
                crate::icoll::sched::progress_pending();
                backend::engine()?.progress();
            }
            std::hint::spin_loop();
        } else if yields || turns % 32 == 0 {
            poll()?;
        } else {
            std::hint::spin_loop();
        }
    }
}

/// One progress step of a wait/test call that found nothing complete: the active
/// nonblocking collectives (their requests are generalized requests completed when their
/// schedules end) and the engine's transports.
///
/// When the engine yields while idle (oversubscribed node or `mpi_yield_when_idle`), so
/// does this: the wait loops that call it would otherwise spin through their time slice
/// while the ranks they wait for are descheduled. So do the test-like calls that find
/// nothing done (`MPI_Parrived`, `MPI_Win_test`): a program calls them in a loop.
pub(crate) fn poll() -> MpiResult {
    crate::icoll::sched::progress_pending();
    let eng = backend::engine()?;
    eng.progress();
    if eng.yields_when_idle() {
        std::thread::yield_now();
    }
    Ok(())
}

/// Raise an error code obtained from a completed operation on `comm`.
fn op_error(code: c_int, comm: c_int, what: &str) -> MpiError {
    let detail = if code == MPI_ERR_TRUNCATE {
        format!("{what}: the message is longer than the receive buffer")
    } else if code == MPIX_ERR_PROC_FAILED_PENDING {
        "a receive from any source stays pending: a member of its communicator failed \
         (MPIX_Comm_failure_ack lets it match again)"
            .to_string()
    } else {
        what.to_string()
    };
    MpiError::new(code, detail).on(comm)
}

/// Complete a single-completion call: write the status, map the error.
pub(crate) fn complete_single(
    status: *mut MpiStatus,
    s: Option<MpiStatus>,
    code: c_int,
    comm: c_int,
    what: &str,
) -> MpiResult {
    write_status(status, &s.unwrap_or_else(empty_status), code != MPI_SUCCESS);
    if code != MPI_SUCCESS {
        return Err(op_error(code, comm, what));
    }
    Ok(())
}

/// The error of a multiple-completion call some of whose requests failed (the first
/// failed request's communicator handles it).
fn in_status(comm: c_int) -> MpiError {
    MpiError::new(
        MPI_ERR_IN_STATUS,
        "a request completed with an error (see the statuses)",
    )
    .on(comm)
}

/// Status `i` of an array of statuses (or the ignore marker itself).
#[inline]
fn nth_status(statuses: *mut MpiStatus, i: usize) -> *mut MpiStatus {
    if ignored(statuses) {
        statuses
    } else {
        statuses.wrapping_add(i)
    }
}

mpi_fn! {
    /// `MPI_Wait`.
    fn PMPI_Wait / "MPI_Wait" (request: *mut c_int, status: *mut MpiStatus) {
        let h = inp(request, "request")?;
        match wait_handle(h)? {
            Tested::Done(c) => {
                if c.freed {
                    out(request, MPI_REQUEST_NULL, "request")?;
                }
                if c.code == MPI_SUCCESS && ignored(status) {
                    return Ok(());
                }
                complete_single(status, Some(c.status), c.code, c.comm, "request completed with an error")
            }
            _ => complete_single(status, None, MPI_SUCCESS, MPI_COMM_WORLD, ""),
        }
    }
}

mpi_fn! {
    /// `MPI_Test`.
    fn PMPI_Test / "MPI_Test" (request: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) {
        let h = inp(request, "request")?;
        if flag.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL flag");
        }
        match test_handle(h)? {
            Tested::NotDone => {
                if fast_slot(h).is_none() {
                    // (The engine's test of a fast request progressed already.)
                    poll()?;
                }
                out(flag, 0, "flag")
            }
            Tested::Empty => {
                out(flag, 1, "flag")?;
                complete_single(status, None, MPI_SUCCESS, MPI_COMM_WORLD, "")
            }
            Tested::Done(c) => {
                if c.freed {
                    out(request, MPI_REQUEST_NULL, "request")?;
                }
                // A failure-pending receive has not completed (ULFM).
                out(flag, c_int::from(c.code != MPIX_ERR_PROC_FAILED_PENDING), "flag")?;
                complete_single(status, Some(c.status), c.code, c.comm, "request completed with an error")
            }
        }
    }
}

/// Testall's check: whether every request in `reqs` is complete, without completing any
/// (table requests that are done keep their status for the completion that follows).
fn all_done(reqs: &[c_int]) -> MpiResult<bool> {
    for &h in reqs {
        if h == MPI_REQUEST_NULL || h == SEND_DONE {
            continue;
        }
        if let Some(slot) = done_slot(h) {
            done_get(slot, h)?;
            continue;
        }
        if let Some(i) = light_slot(h) {
            light_owner(i, h)?;
            if light::peek(i, |_| ()).is_none() {
                poll()?;
                return Ok(false);
            }
            continue;
        }
        if let Some(slot) = fast_slot(h) {
            let (r, _) = fast_get(slot, h)?;
            if backend::engine()?.request_status(r).is_none() {
                return Ok(false);
            }
            continue;
        }
        let mut st = lock();
        if crate::grequest::is_incomplete(&st, running_round(&st, h).unwrap_or(h)) {
            drop(st);
            poll()?;
            return Ok(false);
        }
        if let Some(p) = part_of(&st, h) {
            if p.is_active() && p.test(false)?.is_none() {
                drop(st);
                poll()?;
                return Ok(false);
            }
            continue;
        }
        let Some(r) = st.reqs.get_mut(h) else {
            mpi_bail!(MPI_ERR_REQUEST, "invalid request handle {h:#x}");
        };
        if let Some(p) = r.active.as_mut() {
            if let Some(e) = p.ereq {
                // Testing frees the engine request: keep its status for the completion.
                match backend::engine()?.test(e) {
                    // Reported by the completion that follows; the request stays.
                    Some(s) if failure_pending(&s) => {}
                    Some(s) => {
                        p.ereq = None;
                        p.done = Some(s);
                    }
                    None => return Ok(false),
                }
            }
        }
    }
    Ok(true)
}

/// Most fast requests `MPI_Waitall` hands to the engine at once ([`wait_fast_run`]).
const WAIT_RUN: usize = 64;

/// Waitall's run of consecutive fast requests from index `start` (at most [`WAIT_RUN`],
/// ending before the first other handle or invalid fast handle): waits for them with
/// [`oxmpi_engine::Engine::wait_each`], which takes the engine's lock once for all the
/// complete ones instead of once per request, and writes their statuses (`failed`: the
/// communicator of the first failed request). Returns the index after the run (`start`
/// if there was none: the caller's general path reports the handle's error).
fn wait_fast_run(
    reqs: &mut [c_int],
    start: usize,
    statuses: *mut MpiStatus,
    failed: &mut Option<c_int>,
) -> MpiResult<usize> {
    let mut ids = [EReq(0); WAIT_RUN];
    let mut k = 0;
    let mut end = start;
    while end < reqs.len() && k < WAIT_RUN {
        let Some(Ok((r, _))) = fast_slot(reqs[end]).map(|slot| fast_get(slot, reqs[end])) else {
            break;
        };
        ids[k] = r;
        k += 1;
        end += 1;
    }
    if k == 0 {
        return Ok(start);
    }
    backend::engine()?.wait_each(&ids[..k], |j, s| {
        let i = start + j;
        let h = &mut reqs[i];
        let Some(slot) = fast_slot(*h) else {
            return;
        };
        let comm = slot.comm.load(Ordering::Relaxed);
        // A failure-pending receive (ULFM) keeps its handle, as with `wait_handle`.
        if !failure_pending(&s) {
            fast_release(slot);
            *h = MPI_REQUEST_NULL;
        }
        let (status, code) = status_of(&s);
        write_status(nth_status(statuses, i), &status, true);
        if code != MPI_SUCCESS && failed.is_none() {
            *failed = Some(comm);
        }
    });
    Ok(end)
}

/// Shared body of Waitall (blocking) and Testall.
fn all(
    count: c_int,
    requests: *mut c_int,
    flag: Option<*mut c_int>,
    statuses: *mut MpiStatus,
) -> MpiResult {
    let n = check_count(count)?;
    let reqs = slice_out(requests, n, "array_of_requests")?;
    if let Some(flag) = flag {
        // Testall: complete all or none.
        if !all_done(reqs)? {
            return out(flag, 0, "flag");
        }
        out(flag, 1, "flag")?;
    }
    let mut failed = None;
    let mut i = 0;
    while i < reqs.len() {
        let sp = nth_status(statuses, i);
        let h = &mut reqs[i];
        // Requests that completed at start (the bulk of a window of small messages): no
        // `Completed` to build.
        if *h == SEND_DONE {
            *h = MPI_REQUEST_NULL;
            write_status(sp, &SEND_DONE_STATUS, true);
            i += 1;
            continue;
        }
        if let Some(slot) = done_slot(*h) {
            let (m, comm) = done_read(slot).ok_or_else(|| done_invalid(*h))?;
            done_release(slot);
            *h = MPI_REQUEST_NULL;
            write_status(sp, &m, true);
            if m.error != MPI_SUCCESS && failed.is_none() {
                failed = Some(comm);
            }
            i += 1;
            continue;
        }
        // A run of fast requests (a window of receives): waited for under one engine lock.
        if flag.is_none() && fast_slot(*h).is_some() {
            let next = wait_fast_run(reqs, i, statuses, &mut failed)?;
            if next > i {
                i = next;
                continue;
            }
        }
        let h = &mut reqs[i];
        match wait_handle(*h)? {
            Tested::Done(c) => {
                if c.freed {
                    *h = MPI_REQUEST_NULL;
                }
                write_status(sp, &c.status, true);
                if c.code != MPI_SUCCESS && failed.is_none() {
                    failed = Some(c.comm);
                }
            }
            _ => write_status(sp, &empty_status(), true),
        }
        i += 1;
    }
    match failed {
        Some(comm) => Err(in_status(comm)),
        None => Ok(()),
    }
}

mpi_fn! {
    /// `MPI_Waitall`.
    fn PMPI_Waitall / "MPI_Waitall" (count: c_int, requests: *mut c_int, statuses: *mut MpiStatus) {
        all(count, requests, None, statuses)
    }
}

mpi_fn! {
    /// `MPI_Testall`.
    fn PMPI_Testall / "MPI_Testall" (count: c_int, requests: *mut c_int, flag: *mut c_int, statuses: *mut MpiStatus) {
        if flag.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL flag");
        }
        all(count, requests, Some(flag), statuses)
    }
}

/// Shared body of Waitany/Testany: one pass over the array; returns true if something
/// completed (or everything is null). A failure-pending receive (ULFM) is reported like a
/// completion with `MPIX_ERR_PROC_FAILED_PENDING`, its index given and its handle kept;
/// Testany's `flag` is then 0 (the request did not complete).
fn any_pass(
    reqs: &mut [c_int],
    index: *mut c_int,
    flag: Option<*mut c_int>,
    status: *mut MpiStatus,
) -> MpiResult<bool> {
    let mut all_empty = true;
    for (i, h) in reqs.iter_mut().enumerate() {
        if *h == MPI_REQUEST_NULL {
            continue;
        }
        match test_handle(*h)? {
            Tested::Empty => {}
            Tested::NotDone => all_empty = false,
            Tested::Done(c) => {
                if c.freed {
                    *h = MPI_REQUEST_NULL;
                }
                out(index, i as c_int, "index")?;
                if let Some(flag) = flag {
                    out(
                        flag,
                        c_int::from(c.code != MPIX_ERR_PROC_FAILED_PENDING),
                        "flag",
                    )?;
                }
                return complete_single(
                    status,
                    Some(c.status),
                    c.code,
                    c.comm,
                    "request completed with an error",
                )
                .map(|_| true);
            }
        }
    }
    if all_empty {
        out(index, MPI_UNDEFINED, "index")?;
        write_status(status, &empty_status(), false);
        return Ok(true);
    }
    Ok(false)
}

mpi_fn! {
    /// `MPI_Waitany`.
    fn PMPI_Waitany / "MPI_Waitany" (count: c_int, requests: *mut c_int, index: *mut c_int, status: *mut MpiStatus) {
        let n = check_count(count)?;
        let reqs = slice_out(requests, n, "array_of_requests")?;
        loop {
            if any_pass(reqs, index, None, status)? {
                return Ok(());
            }
            poll()?;
        }
    }
}

mpi_fn! {
    /// `MPI_Testany`.
    fn PMPI_Testany / "MPI_Testany" (count: c_int, requests: *mut c_int, index: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) {
        let n = check_count(count)?;
        let reqs = slice_out(requests, n, "array_of_requests")?;
        if flag.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL flag");
        }
        if any_pass(reqs, index, Some(flag), status)? {
            out(flag, 1, "flag")
        } else {
            poll()?;
            out(index, MPI_UNDEFINED, "index")?;
            out(flag, 0, "flag")
        }
    }
}

/// Shared body of Waitsome/Testsome: one pass; returns the number completed, or
/// `MPI_UNDEFINED` when every request is null/inactive. When one failed it writes that
/// number to `outcount` before returning `MPI_ERR_IN_STATUS` (a failure-pending receive,
/// ULFM, counts with its status's error `MPIX_ERR_PROC_FAILED_PENDING` and its handle kept).
fn some_pass(
    reqs: &mut [c_int],
    indices: *mut c_int,
    statuses: *mut MpiStatus,
    outcount: *mut c_int,
) -> MpiResult<c_int> {
    let mut all_empty = true;
    let mut done = 0usize;
    let mut failed = None;
    let idx = slice_out(indices, reqs.len(), "array_of_indices")?;
    for (i, h) in reqs.iter_mut().enumerate() {
        if *h == MPI_REQUEST_NULL {
            continue;
        }
        match test_handle(*h)? {
            Tested::Empty => {}
            Tested::NotDone => all_empty = false,
            Tested::Done(c) => {
                all_empty = false;
                if c.freed {
                    *h = MPI_REQUEST_NULL;
                }
                idx[done] = i as c_int;
                write_status(nth_status(statuses, done), &c.status, true);
                if c.code != MPI_SUCCESS && failed.is_none() {
                    failed = Some(c.comm);
                }
                done += 1;
            }
        }
    }
    if let Some(comm) = failed {
        out(outcount, done as c_int, "outcount")?;
        return Err(in_status(comm));
    }
    Ok(if all_empty {
        MPI_UNDEFINED
    } else {
        done as c_int
    })
}

mpi_fn! {
    /// `MPI_Waitsome`.
    fn PMPI_Waitsome / "MPI_Waitsome" (incount: c_int, requests: *mut c_int, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) {
        let n = check_count(incount)?;
        let reqs = slice_out(requests, n, "array_of_requests")?;
        loop {
            let k = some_pass(reqs, indices, statuses, outcount)?;
            if k != 0 {
                return out(outcount, k, "outcount");
            }
            poll()?;
        }
    }
}

mpi_fn! {
    /// `MPI_Testsome`.
    fn PMPI_Testsome / "MPI_Testsome" (incount: c_int, requests: *mut c_int, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) {
        let n = check_count(incount)?;
        let reqs = slice_out(requests, n, "array_of_requests")?;
        let k = some_pass(reqs, indices, statuses, outcount)?;
        if k == 0 {
            poll()?;
        }
        out(outcount, k, "outcount")
    }
}

mpi_fn! {
    /// `MPI_Request_get_status`: like MPI_Test but does not free the request.
    fn PMPI_Request_get_status / "MPI_Request_get_status" (request: c_int, flag: *mut c_int, status: *mut MpiStatus) {
        if flag.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL flag");
        }
        if request == MPI_REQUEST_NULL {
            out(flag, 1, "flag")?;
            write_status(status, &empty_status(), false);
            return Ok(());
        }
        if request == SEND_DONE {
            out(flag, 1, "flag")?;
            let c = send_done();
            return complete_single(status, Some(c.status), c.code, c.comm, "");
        }
        if let Some(slot) = done_slot(request) {
            let c = done_get(slot, request)?;
            out(flag, 1, "flag")?;
            return complete_single(status, Some(c.status), c.code, c.comm, "request completed with an error");
        }
        if let Some(i) = light_slot(request) {
            let comm = light_owner(i, request)?;
            let code = light::peek(i, |r| r.as_ref().map_or_else(|e| backend::class_code(e.class()), |()| MPI_SUCCESS));
            let Some(code) = code else {
                poll()?;
                return out(flag, 0, "flag");
            };
            out(flag, 1, "flag")?;
            let s = MpiStatus { error: code, ..SEND_DONE_STATUS };
            return complete_single(status, Some(s), code, comm, "request completed with an error");
        }
        if let Some(slot) = fast_slot(request) {
            let (r, comm) = fast_get(slot, request)?;
            return match backend::engine()?.request_status(r) {
                None => out(flag, 0, "flag"),
                Some(s) => {
                    // a failure-pending receive (ULFM) has not completed
                    out(flag, c_int::from(!failure_pending(&s)), "flag")?;
                    let (m, code) = status_of(&s);
                    complete_single(status, Some(m), code, comm, "request completed with an error")
                }
            };
        }
        let comm = handle_comm(request);
        let inner = running_round(&lock(), request).unwrap_or(request);
        if let Some(q) = crate::grequest::peek(inner) {
            return match q {
                None => {
                    poll()?;
                    out(flag, 0, "flag")
                }
                Some((s, code)) => {
                    out(flag, 1, "flag")?;
                    complete_single(status, Some(s), code, comm, "the query function of the generalized request failed")
                }
            };
        }
        let mut st = lock();
        if let Some(p) = part_of(&st, request) {
            let t = p.test(false)?;
            let active = p.is_active();
            drop(st);
            return match t {
                Some((s, code)) => {
                    out(flag, 1, "flag")?;
                    complete_single(status, Some(s), code, comm, "partitioned operation failed")
                }
                None if active => {
                    poll()?;
                    out(flag, 0, "flag")
                }
                None => {
                    out(flag, 1, "flag")?;
                    write_status(status, &empty_status(), false);
                    Ok(())
                }
            };
        }
        let Some(req) = st.reqs.get_mut(request) else {
            mpi_bail!(MPI_ERR_REQUEST, "invalid request handle {request:#x}");
        };
        let Some(p) = req.active.as_mut() else {
            drop(st);
            out(flag, 1, "flag")?;
            write_status(status, &empty_status(), false);
            return Ok(());
        };
        if let Some(e) = p.ereq {
            match backend::engine()?.test(e) {
                Some(s) if failure_pending(&s) => {
                    // not complete: the engine request stays (ULFM)
                    drop(st);
                    out(flag, 0, "flag")?;
                    let (ms, code) = status_of(&s);
                    return complete_single(status, Some(ms), code, comm, "request completed with an error");
                }
                Some(s) => {
                    p.ereq = None;
                    p.done = Some(s);
                }
                None => {
                    drop(st);
                    return out(flag, 0, "flag");
                }
            }
        }
        let s = p.done.unwrap_or(EStatus::PROC_NULL);
        drop(st);
        let (ms, code) = status_of(&s);
        out(flag, 1, "flag")?;
        complete_single(status, Some(ms), code, comm, "request completed with an error")
    }
}

/// `MPI_Request_get_status` of `h` (its error returned, not raised): `Some(status)` if
/// complete (inactive and null requests included).
fn peek_status(h: c_int) -> MpiResult<Option<MpiStatus>> {
    let (mut flag, mut s) = (0, empty_status());
    // SAFETY: valid output pointers.
    crate::ffi::quietly(|| unsafe { PMPI_Request_get_status(h, &mut flag, &mut s) })?;
    Ok((flag != 0).then_some(s))
}

mpi_fn! {
    /// `MPI_Request_get_status_any` (MPI 4.1): like `MPI_Testany`, without freeing.
    fn PMPI_Request_get_status_any / "MPI_Request_get_status_any" (count: c_int, array_of_requests: *const c_int, index: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) {
        let reqs = crate::ffi::slice_in(array_of_requests, check_count(count)?, "array_of_requests")?;
        let mut any_active = false;
        for (i, &h) in reqs.iter().enumerate() {
            if h == MPI_REQUEST_NULL {
                continue;
            }
            any_active = true;
            if let Some(s) = peek_status(h)? {
                out(index, i as c_int, "index")?;
                out(flag, 1, "flag")?;
                write_status(status, &s, false);
                return Ok(());
            }
        }
        out(flag, c_int::from(!any_active), "flag")?;
        out(index, MPI_UNDEFINED, "index")?;
        if !any_active {
            // The empty status, its error field included (MPI 4.1 §3.7.3).
            write_status(status, &empty_status(), true);
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Request_get_status_all` (MPI 4.1): like `MPI_Testall`, without freeing.
    fn PMPI_Request_get_status_all / "MPI_Request_get_status_all" (count: c_int, array_of_requests: *const c_int, flag: *mut c_int, array_of_statuses: *mut MpiStatus) {
        let reqs = crate::ffi::slice_in(array_of_requests, check_count(count)?, "array_of_requests")?;
        let mut got = Vec::with_capacity(reqs.len());
        for &h in reqs {
            match peek_status(h)? {
                Some(s) => got.push(s),
                None => return out(flag, 0, "flag"),
            }
        }
        for (i, s) in got.iter().enumerate() {
            write_status(nth_status(array_of_statuses, i), s, true);
        }
        out(flag, 1, "flag")
    }
}

mpi_fn! {
    /// `MPI_Request_get_status_some` (MPI 4.1): like `MPI_Testsome`, without freeing.
    fn PMPI_Request_get_status_some / "MPI_Request_get_status_some" (incount: c_int, array_of_requests: *const c_int, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut MpiStatus) {
        let reqs = crate::ffi::slice_in(array_of_requests, check_count(incount)?, "array_of_requests")?;
        if reqs.iter().all(|&h| h == MPI_REQUEST_NULL) {
            return out(outcount, MPI_UNDEFINED, "outcount");
        }
        let mut n = 0;
        for (i, &h) in reqs.iter().enumerate() {
            if h == MPI_REQUEST_NULL {
                continue;
            }
            if let Some(s) = peek_status(h)? {
                out(array_of_indices.wrapping_add(n), i as c_int, "array_of_indices")?;
                write_status(nth_status(array_of_statuses, n), &s, true);
                n += 1;
            }
        }
        out(outcount, n as c_int, "outcount")
    }
}

mpi_fn! {
    /// `MPI_Cancel`.
    fn PMPI_Cancel / "MPI_Cancel" (request: *mut c_int) {
        let h = inp(request, "request")?;
        if h == SEND_DONE {
            // Complete already: cancelling fails (MPI_Test_cancelled says false).
            return Ok(());
        }
        if let Some(slot) = done_slot(h) {
            // Complete already (matched at start): cancelling fails.
            return done_get(slot, h).map(|_| ());
        }
        if let Some(i) = light_slot(h) {
            // A collective is not cancelled (MPI: erroneous to try).
            return light_owner(i, h).map(|_| ());
        }
        if let Some(slot) = fast_slot(h) {
            let (r, _) = fast_get(slot, h)?;
            backend::engine()?.cancel(r);
            return Ok(());
        }
        let comm = handle_comm(h);
        if let Some(rc) = crate::grequest::cancel(h) {
            return crate::grequest::callback_result(rc, comm, "cancel");
        }
        let st = lock();
        let Some(req) = st.reqs.get(h) else {
            mpi_bail!(MPI_ERR_REQUEST, "invalid request handle {h:#x}");
        };
        if let Some(e) = req.active.as_ref().and_then(|p| p.ereq) {
            backend::engine()?.cancel(e);
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Request_free`: an active operation completes in the background.
    fn PMPI_Request_free / "MPI_Request_free" (request: *mut c_int) {
        let h = inp(request, "request")?;
        if h == SEND_DONE {
            return out(request, MPI_REQUEST_NULL, "request");
        }
        if let Some(slot) = done_slot(h) {
            done_take(slot, h)?;
            return out(request, MPI_REQUEST_NULL, "request");
        }
        if let Some(i) = light_slot(h) {
            light_owner(i, h)?;
            // Ends in the background (the thread that ends it frees the slot).
            light::free(i);
            return out(request, MPI_REQUEST_NULL, "request");
        }
        if let Some(slot) = fast_slot(h) {
            let (r, _) = fast_get(slot, h)?;
            backend::engine()?.request_free(r);
            fast_release(slot);
            return out(request, MPI_REQUEST_NULL, "request");
        }
        let comm = handle_comm(h);
        if let Some(rc) = crate::grequest::request_free(h) {
            out(request, MPI_REQUEST_NULL, "request")?;
            return crate::grequest::callback_result(rc, comm, "free");
        }
        let mut st = lock();
        let round = running_round(&st, h);
        let Some(req) = st.reqs.remove(h) else {
            mpi_bail!(MPI_ERR_REQUEST, "invalid request handle {h:#x}");
        };
        if let Some(p) = req.persistent.as_ref().and_then(|p| p.part.as_ref()) {
            let left = p.release();
            st.orphans.extend(left);
        }
        if let Some(p) = req.active {
            if p.ereq.is_some() {
                st.orphans.push(p);
            }
        }
        drop(st);
        if let Some(inner) = round {
            // An active persistent collective: its round finishes in the background.
            crate::grequest::request_free(inner);
        }
        out(request, MPI_REQUEST_NULL, "request")
    }
}

/// `MPI_Status_set_source`/`_tag`/`_error` and `MPI_Status_get_*` (MPI 4.1): the field of
/// `MPI_Status` each one names.
macro_rules! status_fields {
    ($($set:ident $sname:literal, $get:ident $gname:literal, $field:ident;)*) => {$(
        mpi_fn! {
            #[doc = concat!("`", $sname, "` (MPI 4.1).")]
            fn $set / $sname (status: *mut MpiStatus, value: c_int) {
                let mut s = inp(status, "status")?;
                s.$field = value;
                out(status, s, "status")
            }
        }
        mpi_fn! {
            #[doc = concat!("`", $gname, "` (MPI 4.1).")]
            fn $get / $gname (status: *const MpiStatus, value: *mut c_int) {
                let s = inp(status, "status")?;
                out(value, s.$field, "value")
            }
        }
    )*};
}
status_fields! {
    PMPI_Status_set_source "MPI_Status_set_source", PMPI_Status_get_source "MPI_Status_get_source", source;
    PMPI_Status_set_tag "MPI_Status_set_tag", PMPI_Status_get_tag "MPI_Status_get_tag", tag;
    PMPI_Status_set_error "MPI_Status_set_error", PMPI_Status_get_error "MPI_Status_get_error", error;
}

mpi_fn! {
    /// `MPI_Test_cancelled`.
    fn PMPI_Test_cancelled / "MPI_Test_cancelled" (status: *const MpiStatus, flag: *mut c_int) {
        let s = inp(status, "status")?;
        out(flag, s.count_hi_and_cancelled & 1, "flag")
    }
}

mpi_fn! {
    /// `MPI_Status_set_cancelled`.
    fn PMPI_Status_set_cancelled / "MPI_Status_set_cancelled" (status: *mut MpiStatus, flag: c_int) {
        let mut s = inp(status.cast_const(), "status")?;
        s.count_hi_and_cancelled = (s.count_hi_and_cancelled & !1) | (flag != 0) as c_int;
        out(status, s, "status")
    }
}

/// Create a persistent request.
fn persistent(comm: c_int, p: Persist, request: *mut c_int) -> MpiResult {
    let st = lock();
    let (size,) = {
        let c = st.comm(comm)?;
        (c.size,)
    };
    let chk = || -> MpiResult<Arc<Datatype>> {
        check_count(p.count)?;
        let dt = st.dtype_committed(p.datatype)?;
        check_rank(p.peer, size, p.send.is_none())?;
        check_tag(p.tag, p.send.is_none())?;
        Ok(dt)
    };
    // The request holds the datatype: it works after MPI_Type_free (MPI 3.1 §4.1.9).
    let dt = chk().map_err(|e| e.on(comm))?;
    hand_out_persistent(st, comm, Persist { dt: Some(dt), ..p }, request)
}

/// Store persistent request `p` (inactive) in the table and hand its handle out (releases
/// the lock).
pub(crate) fn hand_out_persistent(
    mut st: std::sync::MutexGuard<'_, State>,
    comm: c_int,
    p: Persist,
    request: *mut c_int,
) -> MpiResult {
    let h = st.reqs.insert(Request {
        comm,
        persistent: Some(p),
        active: None,
    });
    drop(st);
    out(request, h, "request")
}

/// Create persistent collective request on `comm` whose every `MPI_Start` runs `start`
/// (the caller validated the arguments).
pub(crate) fn persistent_coll(
    comm: c_int,
    start: Arc<crate::objects::CollStart>,
    request: *mut c_int,
) -> MpiResult {
    if request.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
    }
    let coll = crate::objects::PersistColl {
        start,
        running: None,
    };
    let p = Persist::special(Some(coll), None);
    hand_out_persistent(lock(), comm, p, request)
}

macro_rules! persistent_send {
    ($pname:ident, $name:literal, $cpname:ident, $cname:literal, $mode:expr) => {
        mpi_fn_c! {
            /// Persistent send request.
            fn $pname / $name, $cpname / $cname (buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
                persistent(comm, Persist { send: Some($mode), buf: buf as usize, count: count.into(), datatype, dt: None, peer: dest, tag, coll: None, part: None }, request)
            }
        }
    };
}
persistent_send!(
    PMPI_Send_init,
    "MPI_Send_init",
    PMPI_Send_init_c,
    "MPI_Send_init_c",
    SendMode::Standard
);
persistent_send!(
    PMPI_Ssend_init,
    "MPI_Ssend_init",
    PMPI_Ssend_init_c,
    "MPI_Ssend_init_c",
    SendMode::Sync
);
persistent_send!(
    PMPI_Rsend_init,
    "MPI_Rsend_init",
    PMPI_Rsend_init_c,
    "MPI_Rsend_init_c",
    SendMode::Ready
);
persistent_send!(
    PMPI_Bsend_init,
    "MPI_Bsend_init",
    PMPI_Bsend_init_c,
    "MPI_Bsend_init_c",
    SendMode::Buffered
);

mpi_fn_c! {
    /// `MPI_Recv_init`.
    fn PMPI_Recv_init / "MPI_Recv_init", PMPI_Recv_init_c / "MPI_Recv_init_c" (buf: *mut c_void, count: Count, datatype: c_int, source: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        persistent(comm, Persist { send: None, buf: buf as usize, count: count.into(), datatype, dt: None, peer: source, tag, coll: None, part: None }, request)
    }
}

/// Start one persistent request (lock held). A persistent collective is not started
/// here: its start function is returned, for [`start_round`] without the lock.
fn start_one(st: &mut State, h: c_int) -> MpiResult<Option<Arc<crate::objects::CollStart>>> {
    if fast_slot(h).is_some() || done_slot(h).is_some() || light_slot(h).is_some() || h == SEND_DONE
    {
        mpi_bail!(
            MPI_ERR_REQUEST,
            "MPI_Start on a request that is not persistent"
        );
    }
    let Some(req) = st.reqs.get(h) else {
        mpi_bail!(MPI_ERR_REQUEST, "invalid request handle {h:#x}");
    };
    let Some(p) = req.persistent.clone() else {
        mpi_bail!(
            MPI_ERR_REQUEST,
            "MPI_Start on a request that is not persistent"
        );
    };
    if req.active.is_some() || p.coll.as_ref().is_some_and(|c| c.running.is_some()) {
        mpi_bail!(MPI_ERR_REQUEST, "MPI_Start on an active request");
    }
    if let Some(c) = p.coll {
        return Ok(Some(c.start));
    }
    if let Some(part) = p.part {
        if part.is_active() {
            mpi_bail!(MPI_ERR_REQUEST, "MPI_Start on an active request");
        }
        part.start().map_err(|e| e.on(req.comm))?;
        return Ok(None);
    }
    let comm = req.comm;
    let dt = match &p.dt {
        Some(dt) => Ok(dt.clone()),
        None => st.dtype_committed(p.datatype),
    };
    let pending = match p.send {
        Some(mode) => start_send_typed(
            st,
            p.buf as *const c_void,
            p.count,
            dt,
            p.peer,
            p.tag,
            comm,
            mode,
        )?,
        None => start_recv_typed(st, p.buf as *mut c_void, p.count, dt, p.peer, p.tag, comm)?,
    };
    let pending = if p.send == Some(SendMode::Buffered) {
        // A buffered send is complete for the user at once; the data travels on.
        st.orphans.push(pending);
        Pending::done(NO_MESSAGE)
    } else {
        pending
    };
    st.reqs.get_mut(h).expect("checked above").active = Some(pending);
    Ok(None)
}

/// Start a round of persistent collective `h` (no lock held: the round is a nonblocking
/// collective) and record its internal request.
fn start_round(h: c_int, start: &crate::objects::CollStart) -> MpiResult {
    let inner = start()?;
    let mut st = lock();
    let coll = st.reqs.get_mut(h).and_then(|r| r.persistent.as_mut());
    match coll.and_then(|p| p.coll.as_mut()) {
        Some(c) => c.running = Some(inner),
        None => mpi_bail!(MPI_ERR_REQUEST, "request {h:#x} was freed while starting"),
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Start`.
    fn PMPI_Start / "MPI_Start" (request: *mut c_int) {
        let h = inp(request, "request")?;
        let coll = start_one(&mut lock(), h)?;
        match coll {
            Some(start) => start_round(h, &*start),
            None => Ok(()),
        }
    }
}

mpi_fn! {
    /// `MPI_Startall`.
    fn PMPI_Startall / "MPI_Startall" (count: c_int, requests: *mut c_int) {
        let n = check_count(count)?;
        let reqs = slice_out(requests, n, "array_of_requests")?;
        for &h in reqs.iter() {
            let coll = start_one(&mut lock(), h)?;
            if let Some(start) = coll {
                start_round(h, &*start)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_light_wait_spins_only_for_ranks_of_other_cpus_and_a_bounded_time() {
        // Waiting for ranks pinned to another CPU alone: look again.
        assert!(spins_for_remote(true, 0));
        assert!(spins_for_remote(true, REMOTE_SPIN - 1));
        // The budget is spent: yield (a rank of our CPU may have work meanwhile).
        assert!(!spins_for_remote(true, REMOTE_SPIN));
        // A rank of our CPU is awaited (or nobody is pinned): it needs our CPU.
        assert!(!spins_for_remote(false, 0));
    }

    #[test]
    fn fast_handles_sit_between_table_requests_and_messages() {
        // Slot 0xfff0 is used by this test only (the engine never runs in unit tests).
        let id = 0x0000_0007_0000_fff0_u64;
        let h = new_engine_request(EReq(id), MPI_COMM_WORLD, false);
        assert_eq!(h as u32, 0xad00_fff0);
        let slot = fast_slot(h).expect("a fast handle");
        assert_eq!(fast_get(slot, h).unwrap(), (EReq(id), MPI_COMM_WORLD));
        // Another engine request with the same low bits while the slot is taken goes into
        // the locked table, with an ordinary handle that still finds its engine request
        // (either way of claiming the slot).
        let other = EReq(0x0000_0008_0000_fff0);
        let t = new_engine_request(other, MPI_COMM_SELF, true);
        assert!(fast_slot(t).is_none());
        assert!(lock().reqs.remove(t).is_some());
        let t = new_engine_request(other, MPI_COMM_SELF, false);
        assert!(fast_slot(t).is_none());
        {
            let mut st = lock();
            let r = st.reqs.remove(t).expect("a table request");
            assert_eq!(r.comm, MPI_COMM_SELF);
            assert_eq!(r.active.and_then(|p| p.ereq), Some(other));
        }
        // Released, the slot no longer names a request: a stale handle is an error.
        fast_release(slot);
        assert_eq!(fast_get(slot, h).unwrap_err().code, MPI_ERR_REQUEST);
        // ... and the slot is free for the next request.
        let h2 = new_engine_request(other, MPI_COMM_SELF, true);
        assert_eq!(h2, h);
        assert_eq!(fast_get(slot, h2).unwrap(), (other, MPI_COMM_SELF));
        fast_release(slot);
        // Table requests (index 0..) and messages (0x0200_0000..) are never fast handles.
        assert!(
            fast_slot(crate::handles::direct_base(crate::handles::kind::REQUEST) as c_int)
                .is_none()
        );
        assert!(fast_slot((0xae00_0000_u32) as c_int).is_none());
        assert!(fast_slot(MPI_REQUEST_NULL).is_none());
    }

    #[test]
    fn completed_receives_keep_their_status_until_completion() {
        let s = EStatus {
            source: 3,
            tag: 77,
            error: Some(backend::ErrorClass::Truncate),
            count_bytes: (5u64 << 32 | 9) as usize,
            cancelled: false,
        };
        let comm = 0x8400_0007_u32 as c_int;
        let h = completed_request(s, comm, false);
        assert_eq!(h as u32 & !(DONE_SLOTS as u32 - 1), DONE_BASE);
        assert!(fast_slot(h).is_none() && h != SEND_DONE);
        let slot = done_slot(h).expect("a completed-request handle");
        let (want, code) = status_of(&s);
        assert_eq!(code, MPI_ERR_TRUNCATE);
        // Reading (MPI_Request_get_status) keeps it; taking (wait/test/free) releases it.
        for _ in 0..2 {
            let c = done_get(slot, h)
                .ok()
                .map(|c| (c.status, c.code, c.comm, c.freed));
            assert_eq!(c, Some((want, code, comm, true)));
        }
        assert_eq!(handle_comm(h), comm);
        assert_eq!(done_take(slot, h).ok().map(|c| c.status), Some(want));
        assert!(done_get(slot, h).is_err_and(|e| e.code == MPI_ERR_REQUEST));
        assert!(done_take(slot, h).is_err_and(|e| e.code == MPI_ERR_REQUEST));
        // A plain completed send is the shared stateless handle, never a slot.
        assert_eq!(
            completed_request(NO_MESSAGE, MPI_COMM_WORLD, true),
            SEND_DONE
        );
        // With every slot taken, completions go into the locked table, still correct.
        let live: Vec<c_int> = (0..DONE_SLOTS)
            .map(|k| completed_request(s, comm, k % 2 == 0))
            .collect();
        assert!(live.iter().all(|&h| done_slot(h).is_some()));
        let extra = completed_request(s, comm, true);
        assert!(done_slot(extra).is_none() && fast_slot(extra).is_none());
        {
            let mut st = lock();
            let r = st.reqs.remove(extra).expect("a table request");
            assert_eq!(r.comm, comm);
            let p = r.active.expect("active");
            assert!(p.ereq.is_none());
            assert_eq!(
                p.done.map(|d| (d.tag, d.count_bytes)),
                Some((77, s.count_bytes))
            );
        }
        for h in live {
            let slot = done_slot(h).unwrap();
            assert_eq!(done_take(slot, h).ok().map(|c| c.status), Some(want));
        }
        // The cursor comes round to a run of requests that stay live: one claim falls back
        // to the table, the next ones use slots past the run again.
        let c = DONE_NEXT.load(Ordering::Relaxed);
        let run: Vec<c_int> = (0..DONE_PROBES)
            .map(|_| completed_request(s, comm, false))
            .collect();
        assert!(run.iter().all(|&h| done_slot(h).is_some()));
        DONE_NEXT.store(c, Ordering::Relaxed);
        let fallback = completed_request(s, comm, false);
        assert!(done_slot(fallback).is_none());
        assert!(lock().reqs.remove(fallback).is_some());
        let next = completed_request(s, comm, false);
        let slot = done_slot(next).expect("a slot past the live run");
        assert!(!run.contains(&next));
        assert!(done_take(slot, next).is_ok());
        for h in run {
            assert!(done_take(done_slot(h).unwrap(), h).is_ok());
        }
    }
}
