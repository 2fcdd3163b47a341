//! The schedules of the nonblocking collectives, below their entry points (`icoll.rs`,
//! `intercoll.rs`, `neighbor.rs`): MPI arguments become `oxmpi_coll::sched` regions (packed
//! data to send, room to unpack into at completion), a started schedule is a generalized
//! request completed when `oxmpi_coll::nbc::progress` finishes it, and [`progress_pending`]
//! lets a waiting thread (`MPI_Wait`/`MPI_Test` in `request.rs`) advance the schedules
//! itself.
//!
//! A persistent collective ([`Plan`]) builds its schedule once, at its init, through the
//! same entry point with the schedule kept instead of started; the input data the build took
//! from the user's buffers (packed send data, blocks copied for `MPI_IN_PLACE`) is noted as
//! [`Fill`]s, replayed into the same places at each start before the schedule restarts.

use crate::coll_alg as alg;
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::{check_count, out, slice_in, CountArg, DispArg, MpiError, MpiResult};
use crate::state::lock;
use oxmpi_coll::nbc::{light, progress};
use oxmpi_coll::sched::{OwnedOp, Region, Schedule};
use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Packed bytes to unpack into the user's memory when a schedule completes: datatype,
/// item count, address, the schedule region holding the bytes and the byte offset in it.
pub(crate) struct Unpack(Arc<Datatype>, usize, usize, usize, usize);

/// Input a schedule's regions take from the user's buffers when it is built, replayed into
/// the same places at each start of a persistent collective. Addresses as integers: the
/// user's buffers (valid while the persistent request lives, by the MPI contract) and
/// bytes inside the schedule's regions (raw: the user's; owned: heap memory that moves
/// with the schedule but is never reallocated).
enum Fill {
    /// `count` items of the datatype at `src`, packed into `dst`.
    Pack(Arc<Datatype>, usize, usize, usize),
    /// `len` bytes copied from `src` to `dst`: (src, dst, len).
    Bytes(usize, usize, usize),
}

/// A persistent collective's plan while its init builds it (see [`Plan::make`]).
#[derive(Default)]
struct Planning {
    fills: Vec<Fill>,
    made: Option<(Schedule, Vec<Unpack>)>,
}

thread_local! {
    /// Set while this thread plans a persistent collective.
    static PLANNING: RefCell<Option<Planning>> = const { RefCell::new(None) };
}

/// Note an input fill if this thread is planning a persistent collective.
fn note(f: Fill) {
    PLANNING.with(|p| {
        if let Some(p) = p.borrow_mut().as_mut() {
            p.fills.push(f);
        }
    });
}

/// Note that `count` items of `dt` at `src` were packed to `dst` (unless none).
fn note_pack(dt: &Arc<Datatype>, count: usize, src: usize, dst: *const u8, len: usize) {
    if len > 0 {
        note(Fill::Pack(dt.clone(), count, src, dst as usize));
    }
}

/// `count` items of `dt` at `src` packed into a new vector (noted as input).
///
/// # Safety
/// `src` holds `count` items of `dt`.
pub(crate) unsafe fn packed(dt: &Arc<Datatype>, count: usize, src: *const c_void) -> Vec<u8> {
    // SAFETY: caller contract.
    let v = unsafe { alg::pack(dt, count, src) };
    note_pack(dt, count, src as usize, v.as_ptr(), v.len());
    v
}

/// A copy of bytes of a region (an own block for `MPI_IN_PLACE`), noted as input.
pub(crate) fn copied(src: &[u8]) -> Vec<u8> {
    let mut v = oxmpi_coll::pooled(src.len());
    v.copy_from_slice(src);
    if !v.is_empty() {
        note(Fill::Bytes(
            src.as_ptr() as usize,
            v.as_ptr() as usize,
            v.len(),
        ));
    }
    v
}

/// The data an in-place alltoall(v) sends, set aside: the blocks of `src` (block `j`:
/// `counts[j]` bytes at `displs[j]`) but block `skip` (ours, which stays where it is),
/// back to back in a new vector (from the pool; noted as input), with their displacements
/// there (`skip`'s 0). `None` when some block lies outside `src` (the caller copies it all
/// and the schedule reports the error).
pub(crate) fn copied_but(
    src: &[u8],
    (counts, displs): (&[usize], &[usize]),
    skip: usize,
) -> Option<(Vec<u8>, Vec<usize>)> {
    let blocks = || (0..counts.len().min(displs.len())).filter(|&j| j != skip);
    let mut total = 0usize;
    for j in blocks() {
        if displs[j].checked_add(counts[j])? > src.len() {
            return None;
        }
        total += counts[j];
    }
    let mut v = oxmpi_coll::pooled(total);
    let mut at = vec![0; counts.len()];
    let mut off = 0;
    for j in blocks() {
        let n = counts[j];
        v[off..off + n].copy_from_slice(&src[displs[j]..displs[j] + n]);
        if n > 0 {
            note(Fill::Bytes(
                src[displs[j]..].as_ptr() as usize,
                v[off..].as_ptr() as usize,
                n,
            ));
        }
        at[j] = off;
        off += n;
    }
    Some((v, at))
}

/// A persistent collective's schedule: planned once at its init, restarted at each
/// `MPI_Start` after its input is refreshed; the round's request completes when it ends,
/// and the schedule comes back here for the next start.
pub(crate) struct Plan {
    comm: c_int,
    sched: Arc<Mutex<Option<Schedule>>>,
    unpack: Arc<Vec<Unpack>>,
    fills: Vec<Fill>,
}

// SAFETY: the fills' addresses are the user's buffers (valid until the request is freed, by
// the MPI contract) and the schedule's own regions, which live as long as the plan.
unsafe impl Send for Plan {}
// SAFETY: as above; the schedule is behind a mutex.
unsafe impl Sync for Plan {}

impl Plan {
    /// Run `build` (the nonblocking form with the init's arguments) with its schedule kept
    /// instead of started. `None` if it made no schedule.
    pub(crate) fn make(comm: c_int, build: impl FnOnce() -> MpiResult) -> MpiResult<Option<Plan>> {
        PLANNING.with(|p| *p.borrow_mut() = Some(Planning::default()));
        let r = build();
        let planning = PLANNING.with(|p| p.borrow_mut().take()).unwrap_or_default();
        r?;
        Ok(planning.made.map(|(sched, unpack)| Plan {
            comm,
            sched: Arc::new(Mutex::new(Some(sched))),
            unpack: Arc::new(unpack),
            fills: planning.fills,
        }))
    }

    /// Start one round: refresh the input from the user's buffers, restart the schedule,
    /// return the round's request.
    pub(crate) fn start(&self) -> MpiResult<c_int> {
        let comm = self.comm;
        let Some(mut sched) = self.sched.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return Err(MpiError::new(
                MPI_ERR_REQUEST,
                "persistent collective started while active",
            )
            .on(comm));
        };
        let mut tmp = Vec::new();
        for f in &self.fills {
            match f {
                Fill::Pack(dt, count, src, dst) => {
                    tmp.clear();
                    // SAFETY: see `Fill`: the user's buffer holds the items, the region
                    // has room for their packed bytes (it held them at the build).
                    unsafe {
                        pack_into(dt, *count, *src as *const u8, &mut tmp);
                        std::ptr::copy_nonoverlapping(tmp.as_ptr(), *dst as *mut u8, tmp.len());
                    }
                }
                // SAFETY: as above (`copy` allows overlap).
                Fill::Bytes(src, dst, len) => unsafe {
                    std::ptr::copy(*src as *const u8, *dst as *mut u8, *len)
                },
            }
        }
        if let Err(e) = sched.restart() {
            *self.sched.lock().unwrap_or_else(|p| p.into_inner()) = Some(sched);
            return Err(crate::backend::err(e).on(comm));
        }
        let (h, code) = crate::grequest::start_coded(comm)?;
        let fin = Finish {
            h,
            unpack: self.unpack.clone(),
            code,
            keep: Some(self.sched.clone()),
        };
        progress::start(sched, Box::new(move |s, r| fin.run(s, r)));
        Ok(h)
    }
}

/// Where a finished schedule goes: a persistent collective's plan keeps it.
type Keep = Arc<Mutex<Option<Schedule>>>;

/// What completes a schedule's request: the generalized request, the data to unpack, the
/// request's extra state (the collective's error code) and, for a persistent collective,
/// where the schedule goes back to.
struct Finish {
    h: c_int,
    unpack: Arc<Vec<Unpack>>,
    code: *const AtomicI32,
    keep: Option<Keep>,
}

// SAFETY: `code` is a leaked box freed only by the request's free callback, which runs
// after the completion (the last use here); the unpack addresses are the user's buffers,
// valid until completion by the MPI contract.
unsafe impl Send for Finish {}

/// Unpack the received data of ended schedule `sched` into the user's buffers.
fn unpack_all(unpack: &[Unpack], sched: &Schedule) {
    for u in unpack {
        if let Some(v) = sched.owned_bytes(u.3) {
            let end = (u.4 + u.0.size * u.1).min(v.len());
            // SAFETY: the user's buffer has room for `u.1` items of `u.0` (MPI contract,
            // valid until completion, which is now).
            unsafe { unpack_from(&u.0, u.1, u.2 as *mut u8, &v[u.4.min(end)..end]) };
        }
    }
}

impl Finish {
    /// Unpack received data, record the outcome, complete the request.
    fn run(self, sched: Schedule, r: oxmpi_coll::Result<()>) {
        let code = match r {
            Ok(()) => {
                unpack_all(&self.unpack, &sched);
                MPI_SUCCESS
            }
            Err(e) => crate::backend::err(e).code,
        };
        if let Some(keep) = &self.keep {
            *keep.lock().unwrap_or_else(|p| p.into_inner()) = Some(sched);
        }
        // SAFETY: `h` and `code` come from `start`'s request, completed once.
        unsafe { crate::grequest::complete_coded(self.h, self.code, code) };
    }
}

/// Advance the active nonblocking collectives on the calling thread (see
/// `oxmpi_coll::nbc::progress::progress_pending`); returns whether any was active.
pub(crate) fn progress_pending() -> bool {
    progress::progress_pending()
}

/// Start `sched` for `comm` and store its request in `*request`: one progress step now,
/// the rest in the background.
pub(crate) fn start(
    comm: c_int,
    sched: Schedule,
    unpack: Vec<Unpack>,
    request: *mut c_int,
) -> MpiResult {
    if request.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
    }
    // Planning a persistent collective: keep the schedule (no request yet).
    let kept = PLANNING.with(|p| match p.borrow_mut().as_mut() {
        Some(p) => {
            p.made = Some((sched, unpack));
            None
        }
        None => Some((sched, unpack)),
    });
    let Some((mut sched, unpack)) = kept else {
        return out(request, MPI_REQUEST_NULL, "request");
    };
    // Ended at once (e.g. a broadcast's root, a gather's non-roots on the shared-memory
    // segment): its request is the shared one of a completed operation (`SEND_DONE`: the
    // empty status a collective's request has), no generalized request to make and complete.
    let first = progress::first(&mut sched);
    if let Some(Ok(())) = first {
        unpack_all(&unpack, &sched);
        return out(request, crate::handles::SEND_DONE, "request");
    }
    let (h, code) = crate::grequest::start_coded(comm)?;
    let fin = Finish {
        h,
        unpack: Arc::new(unpack),
        code,
        keep: None,
    };
    match first {
        // Failed at once: the request carries the error.
        Some(r) => fin.run(sched, r),
        None => progress::enqueue(sched, Box::new(move |s, r| fin.run(s, r))),
    }
    out(request, h, "request")
}

/// The communicator's shared-memory segment when a nonblocking collective whose
/// contribution per rank is `input_len` bytes can run there (`oxmpi_coll::sm::nb`: an
/// earlier collective made the segment, the contribution fits one buffer, and no
/// persistent collective is being planned: those restart their schedule of rounds).
/// Every rank decides alike: `input_len` is a size MPI requires to match.
pub(crate) fn shared_seg(
    a: &oxmpi_coll::CollComm,
    input_len: usize,
) -> Option<Arc<oxmpi_coll::sm::Seg>> {
    if !oxmpi_coll::sm::SmKind::fits(input_len) || PLANNING.with(|p| p.borrow().is_some()) {
        return None;
    }
    oxmpi_coll::sm::existing(a)
}

/// Whether a persistent collective is being planned (its init checked what it needs; its
/// schedule restarts at every start).
pub(crate) fn planning() -> bool {
    PLANNING.with(|p| p.borrow().is_some())
}

/// The segment for a nonblocking collective by message that checks its length there first
/// ([`oxmpi_coll::sm::SmKind::AllreduceMsg`]): the communicator's, when it exists and no
/// persistent collective is being planned (those keep their rounds).
pub(crate) fn msg_seg(a: &oxmpi_coll::CollComm) -> Option<Arc<oxmpi_coll::sm::Seg>> {
    if PLANNING.with(|p| p.borrow().is_some()) {
        return None;
    }
    oxmpi_coll::sm::existing(a)
}

/// Largest ibcast on 2 ranks moved by one cross-memory copy ([`rooted_seg`]) whatever
/// `coll_sm_single_copy_max` (unless single copies are off): larger ones go by messages,
/// measured faster from 128 KiB (Session 35).
const IBCAST_PAIR_SINGLE: usize = 64 << 10;

/// Largest igather block, and igatherv block, on 2 ranks moved by one cross-memory copy
/// (the other rank writes its block into the root's buffer, `process_vm_writev`, while the
/// root copies its own) whatever `coll_sm_single_copy_max` (unless single copies are off):
/// larger ones go by messages. Far vCPU placement, 3 interleaved rounds: out of place
/// igatherv 64 KiB 8.02 to 4.77 us (Open MPI 6.68), 256 KiB 18.8 to 14.9, 1 MiB 123 to 96;
/// in place, where the whole block is written by one CPU instead of the rendezvous's
/// copy shared by both, 64 KiB 6.11 to 5.25 us, 96 KiB level, 128 KiB 8.1 to 9.2,
/// 1 MiB 35 to 76 (Open MPI 72): the bound.
const IGATHER_PAIR_SINGLE: usize = 64 << 10;

/// Largest iscatter block, and iscatterv block, on 2 ranks moved by one cross-memory copy
/// (the other rank reads its block from the root's input, `process_vm_readv`, while the
/// root copies its own) whatever `coll_sm_single_copy_max` (unless single copies are
/// off), as [`IGATHER_PAIR_SINGLE`]: larger ones go by messages.
const ISCATTER_PAIR_SINGLE: usize = 64 << 10;

/// The largest igatherv (and, as [`ISCATTER_PAIR_SINGLE`], iscatterv) block that moves by
/// one cross-memory copy on `seg` (the [`oxmpi_coll::sm::SmKind::Gatherv`]'s and
/// [`oxmpi_coll::sm::SmKind::Scatterv`]'s `far`, the same on every rank): on 2 ranks
/// [`IGATHER_PAIR_SINGLE`] when single copies are on, else
/// [`oxmpi_coll::sm::Seg::single_copy_max`].
pub(crate) fn gatherv_far(seg: &oxmpi_coll::sm::Seg) -> usize {
    const _: () = assert!(IGATHER_PAIR_SINGLE == ISCATTER_PAIR_SINGLE);
    let far = seg.single_copy_max();
    if seg.size() == 2 && far > 0 {
        far.max(IGATHER_PAIR_SINGLE)
    } else {
        far
    }
}

/// The segment and the collective for a nonblocking bcast, gather or scatter of `block`
/// bytes per rank on the segment: `small` when its data (`posted` bytes) fits a buffer
/// ([`shared_seg`]), else a scatter whose other blocks fit the root's buffer as a scatterv
/// there ([`oxmpi_coll::sm::nb::scatterv_max`]), else by one cross-memory copy per rank
/// ([`oxmpi_coll::sm::SmKind::Single`]) when the blocks qualify (a bcast on more than 2
/// ranks that yield when idle from 256 KiB to 1 MiB through the segment's nonblocking large
/// region instead, [`oxmpi_coll::sm::Seg::bcast_large`]), else a bcast by messages after a
/// post on the segment ([`oxmpi_coll::sm::SmKind::BcastMsg`]); every rank decides alike.
pub(crate) fn rooted_seg(
    a: &oxmpi_coll::CollComm,
    (posted, small): (usize, oxmpi_coll::sm::SmKind),
    (root, block, coll): (usize, usize, oxmpi_coll::sm::Rooted),
) -> Option<(Arc<oxmpi_coll::sm::Seg>, oxmpi_coll::sm::SmKind)> {
    seg_or_else(a, (posted, small), || {
        let p = a.size as usize;
        if coll == oxmpi_coll::sm::Rooted::Scatter
            && oxmpi_coll::sm::nb::scatter_as_scatterv(p, block)
        {
            // The other ranks' blocks fit the root's buffer although all of them do not:
            // through the segment as that scatterv (as the blocking scatter does), two
            // copies of each block where a cross-memory copy costs a system call. (A root
            // of predefined types posts it at its call instead: `iscatter_root_now`.)
            let seg = oxmpi_coll::sm::existing(a)?;
            let (counts, displs) = if a.rank as usize == root {
                (0..p).map(|i| (block, i * block)).unzip()
            } else {
                (Vec::new(), Vec::new())
            };
            return Some((
                seg,
                oxmpi_coll::sm::SmKind::Scatterv {
                    root,
                    counts,
                    displs,
                    far: 0,
                },
            ));
        }
        // Oversubscribed, larger bcasts go through the nonblocking large region instead
        // (`Seg::bcast_large`: the root waits for none of its readers), CMA or not.
        let large = || oxmpi_coll::sm::existing(a).filter(|s| s.bcast_large(block));
        let seg = match coll {
            oxmpi_coll::sm::Rooted::Bcast => large(),
            _ => None,
        };
        // On 2 ranks an ibcast of up to `IBCAST_PAIR_SINGLE` bytes by one cross-memory copy
        // too (its root then completes on the reader's stamp rather than a rendezvous's
        // acknowledgement): 64 KiB, per-rank medians of 10000 calls, root 4.70 against
        // 4.12 us, reader 4.17 against 3.99.
        // And an igather of up to `IGATHER_PAIR_SINGLE` bytes per block, an iscatter of up
        // to `ISCATTER_PAIR_SINGLE`.
        let pair = || {
            let fits = p == 2
                && match coll {
                    oxmpi_coll::sm::Rooted::Bcast => block <= IBCAST_PAIR_SINGLE,
                    oxmpi_coll::sm::Rooted::Gather => block <= IGATHER_PAIR_SINGLE,
                    oxmpi_coll::sm::Rooted::Scatter => block <= ISCATTER_PAIR_SINGLE,
                };
            fits.then(|| oxmpi_coll::sm::existing(a))
                .flatten()
                .filter(|s| s.single_copy_max() > 0)
        };
        if let Some(seg) = seg
            .or_else(|| oxmpi_coll::sm::existing_single_copy(a, block))
            .or_else(pair)
        {
            return Some((seg, oxmpi_coll::sm::SmKind::Single { root, block, coll }));
        }
        // A bcast whose length goes by message still starts on the segment, where the
        // root's post says which path its length took: a rank whose length put it on
        // another path (an erroneous call) fails instead of waiting for the other's part.
        let seg = match coll {
            oxmpi_coll::sm::Rooted::Bcast => oxmpi_coll::sm::existing(a)?,
            _ => return None,
        };
        Some((seg, oxmpi_coll::sm::SmKind::BcastMsg { root }))
    })
}

/// The segment and the collective for a nonblocking reduction (`red`) of `bytes` bytes per
/// rank on the segment: `small` when its vector fits a buffer ([`shared_seg`]), else on
/// two ranks by cross-memory copies ([`oxmpi_coll::sm::existing_pair`]) or through the
/// segment's nonblocking large region ([`oxmpi_coll::sm::existing_large`]; a reduce-scatter
/// of equal blocks, [`oxmpi_coll::sm::Reduction::ReduceScatterBlock`], also when its
/// vector is larger, in phases: [`oxmpi_coll::sm::existing_large_phased`]); every rank
/// decides alike. `in_place`: a reduce-scatter in place (on every rank), whose smaller
/// vectors do not take the pair ([`oxmpi_coll::sm::existing_pair`]); false for the others.
pub(crate) fn reduction_seg(
    a: &oxmpi_coll::CollComm,
    bytes: usize,
    (small, red): (oxmpi_coll::sm::SmKind, oxmpi_coll::sm::Reduction),
    in_place: bool,
) -> Option<(Arc<oxmpi_coll::sm::Seg>, oxmpi_coll::sm::SmKind)> {
    seg_or_else(a, (bytes, small), || {
        if let Some(seg) = oxmpi_coll::sm::existing_pair(a, bytes, red, in_place) {
            return Some((seg, oxmpi_coll::sm::SmKind::Pair { red }));
        }
        if let Some(seg) = oxmpi_coll::sm::existing_large(a, bytes) {
            // Vectors that fit a slot: one phase, as any reduce-scatter.
            let red = red.with_block_of(a.rank as usize);
            return Some((seg, oxmpi_coll::sm::SmKind::Large { red }));
        }
        // Reduce-scatters of equal blocks too large for a slot: in phases.
        if !matches!(red, oxmpi_coll::sm::Reduction::ReduceScatterBlock { .. }) {
            return None;
        }
        let seg = oxmpi_coll::sm::existing_large_phased(a, bytes)?;
        Some((seg, oxmpi_coll::sm::SmKind::Large { red }))
    })
}

/// `small` on the segment when `posted` bytes fit a buffer ([`shared_seg`]), else (not
/// while a persistent collective is being planned) what `large` finds: the choice of
/// [`rooted_seg`] and [`reduction_seg`].
fn seg_or_else(
    a: &oxmpi_coll::CollComm,
    (posted, small): (usize, oxmpi_coll::sm::SmKind),
    large: impl FnOnce() -> Option<(Arc<oxmpi_coll::sm::Seg>, oxmpi_coll::sm::SmKind)>,
) -> Option<(Arc<oxmpi_coll::sm::Seg>, oxmpi_coll::sm::SmKind)> {
    if let Some(seg) = shared_seg(a, posted) {
        return Some((seg, small));
    }
    if PLANNING.with(|p| p.borrow().is_some()) {
        return None;
    }
    large()
}

/// Bumped whenever a communicator handle may stop naming the communicator it named (one
/// is freed: its handle may be reused) and when MPI is finalized: the per-thread cache of
/// the light barrier ([`light_barrier`]) is stale then.
pub(crate) static COMM_GEN: AtomicU64 = AtomicU64::new(0);

/// What the light barrier needs of a communicator: its collective view and segment.
struct LightComm {
    comm: c_int,
    /// [`COMM_GEN`] when cached.
    gen: u64,
    cc: oxmpi_coll::CollComm,
    seg: Arc<oxmpi_coll::sm::Seg>,
}

thread_local! {
    /// This thread's last intracommunicator whose `MPI_Ibarrier` went on the segment
    /// ([`remember_barrier`]): the next one on it takes no library lock and no lookup.
    static LIGHT_COMM: RefCell<Option<LightComm>> = const { RefCell::new(None) };
}

/// Note that `MPI_Ibarrier` on `comm` (an intracommunicator whose view is `a`) found the
/// segment `seg`, for [`light_barrier`].
pub(crate) fn remember_barrier(
    comm: c_int,
    a: &oxmpi_coll::CollComm,
    seg: &Arc<oxmpi_coll::sm::Seg>,
) {
    let gen = COMM_GEN.load(Ordering::Acquire);
    LIGHT_COMM.with(|l| {
        *l.borrow_mut() = Some(LightComm {
            comm,
            gen,
            cc: *a,
            seg: seg.clone(),
        })
    });
}

/// `MPI_Ibarrier` on `comm` as a light barrier ([`light::start_barrier`]) when this thread
/// remembered `comm` ([`remember_barrier`]) and nothing changed since (no communicator
/// freed, MPI not finalized, the shared-memory nonblocking path still on, no persistent
/// collective being planned): no library lock, no handle lookup, no slot body unless it
/// stays pending. `None`: take the general path.
#[inline]
pub(crate) fn light_barrier(comm: c_int, request: *mut c_int) -> Option<MpiResult> {
    if request.is_null()
        || !oxmpi_coll::sm::params::enabled()
        || !oxmpi_coll::sm::params::nonblocking()
        || PLANNING.with(|p| p.borrow().is_some())
    {
        return None;
    }
    LIGHT_COMM.with(|l| {
        let l = l.borrow();
        let c = l.as_ref()?;
        if c.comm != comm || c.gen != COMM_GEN.load(Ordering::Acquire) {
            return None;
        }
        // Posting advances the other collectives, as in `start_shared`.
        progress::progress_pending();
        match light::start_barrier(&c.cc, &c.seg, comm) {
            light::Barrier::Done => Some(out(request, crate::handles::SEND_DONE, "request")),
            light::Barrier::Pending(i) => Some(out(request, light_handle(i), "request")),
            light::Barrier::NoSlot => None,
        }
    })
}

/// Start the shared-memory nonblocking collective `kind` on `seg` ([`shared_seg`]):
/// `io` is (our contribution, where the result goes), regions 0 and 1 of its unpacks.
pub(crate) fn start_shared(
    comm: c_int,
    a: &oxmpi_coll::CollComm,
    (seg, kind): (Arc<oxmpi_coll::sm::Seg>, oxmpi_coll::sm::SmKind),
    io: (Region, Region),
    op: Option<OwnedOp>,
    unpack: Vec<Unpack>,
    request: *mut c_int,
) -> MpiResult {
    // A light request when nothing is to be unpacked at completion (contiguous types) or
    // only the whole output (a reduction's result in a type with a gap, e.g.
    // `MPI_DOUBLE_INT`: unpacked by the light request when it ends), no block moves by
    // message (the v-collectives' large blocks; nor may one come unplanned, an erroneous
    // alltoallv's without cross-memory copies) and a slot is free: no schedule, no
    // generalized request.
    let len = |r: &Region| match r {
        Region::Raw(_, n) => *n,
        Region::Owned(v) => v.len(),
    };
    let on_seg = || {
        let at = (a.rank as usize, a.size as usize);
        !kind.has_messages(at, (len(&io.0), len(&io.1))) && !kind.may_take_messages()
    };
    let output_only = matches!(unpack.as_slice(), [u] if u.3 == 1 && u.4 == 0);
    let light = if (unpack.is_empty() || output_only) && !request.is_null() && on_seg() {
        light::claim()
    } else {
        None
    };
    let Some(i) = light else {
        let s = Schedule::shared(a, seg, kind, io.0, io.1, op);
        return start(comm, s, unpack, request);
    };
    let then = unpack.into_iter().next().map(|u| -> light::Then {
        Box::new(move |v: &[u8]| {
            // SAFETY: the user's buffer has room for `u.1` items of `u.0` (MPI contract,
            // valid until completion, which is now); `v` is the output region.
            unsafe { unpack_from(&u.0, u.1, u.2 as *mut u8, v) };
        })
    });
    // Posting advances the other collectives (as `progress::first` does for schedules).
    progress::progress_pending();
    // SAFETY: MPI contract of the nonblocking call: the regions (and the buffer `then`
    // unpacks into) are valid until completion.
    match unsafe { light::start_then(i, a, (seg, kind), io, op, comm, then) } {
        None => out(request, light_handle(i), "request"),
        Some(Ok(())) => out(request, crate::handles::SEND_DONE, "request"),
        // Failed at once: a request carrying the error.
        Some(Err(e)) => {
            let (h, code) = crate::grequest::start_coded(comm)?;
            // SAFETY: `h` and `code` come from `start_coded`, completed once.
            unsafe { crate::grequest::complete_coded(h, code, crate::backend::err(e).code) };
            out(request, h, "request")
        }
    }
}

/// The request handle of light request slot `i` (`oxmpi_coll::nbc::light`): fast handles
/// with index bit 17 set (above the fast and completed-request slots, below `SEND_DONE`).
pub(crate) fn light_handle(i: usize) -> c_int {
    (LIGHT_BASE | i as u32) as c_int
}

/// Handle bits of light request slot 0.
const LIGHT_BASE: u32 = crate::handles::FAST_REQUEST_BASE | 0x0002_0000;

/// The light request slot of handle `h`, if it is one.
#[inline]
pub(crate) fn light_slot(h: c_int) -> Option<usize> {
    let i = (h as u32).wrapping_sub(LIGHT_BASE) as usize;
    (i < light::SLOTS).then_some(i)
}

/// The collective context, rank and size of intracommunicator `comm`.
pub(crate) fn comm_info(comm: c_int) -> MpiResult<(oxmpi_coll::CollComm, i32, i32)> {
    let (ctx, rank, size) = {
        let st = lock();
        st.check_active()?;
        let c = st.comm(comm)?;
        (c.coll, c.rank, c.size)
    };
    let e = crate::backend::engine()?;
    Ok((
        oxmpi_coll::CollComm::on_context_known(e, ctx, ctx, rank, size),
        rank,
        size,
    ))
}

pub(super) fn dtype(h: c_int, comm: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h).map_err(|e| e.on(comm))
}

/// Resolve a (buffer, count, datatype) triple of `blocks` blocks of `count` items, checked
/// in MPI order: the datatype, the count, then the buffer; the datatype and the count.
pub(super) fn checked(
    buf: *const c_void,
    count: impl Into<i64>,
    ty: c_int,
    blocks: usize,
    comm: c_int,
) -> MpiResult<(Arc<Datatype>, usize)> {
    let dt = dtype(ty, comm)?;
    let n = check_count(count).map_err(|e| e.on(comm))?;
    crate::coll_alg::check_buf(buf, &dt, n * blocks, comm)?;
    Ok((dt, n))
}

/// `count` items of `dt` at `buf` as a schedule region: the memory itself when the type is
/// contiguous, otherwise owned bytes (packed from `buf` if `fill`) that are unpacked back
/// into `buf` at completion if `store` (then pushed to `unpack` as region `index`).
///
/// # Safety
/// `buf` holds (if `fill`) or has room for (if `store`) `count` items of `dt`, valid until
/// the schedule completes.
pub(crate) unsafe fn region(
    dt: &Arc<Datatype>,
    count: usize,
    buf: *mut c_void,
    fill: bool,
    store: bool,
    index: usize,
    unpack: &mut Vec<Unpack>,
) -> Region {
    let n = dt.size * count;
    if dt.is_contiguous() && !buf.is_null() && n > 0 {
        return Region::Raw(buf.cast::<u8>().wrapping_offset(dt.lb), n);
    }
    // From the pool: a fresh mapping of a large region costs a page fault per page (the
    // schedule gives it back when dropped).
    let mut v = oxmpi_coll::pooled(n);
    if fill && n > 0 {
        v.clear();
        // SAFETY: caller contract.
        unsafe { pack_into(dt, count, buf.cast(), &mut v) };
        v.resize(n, 0);
    }
    if fill {
        note_pack(dt, count, buf as usize, v.as_ptr(), n);
    }
    if store && n > 0 {
        unpack.push(Unpack(dt.clone(), count, buf as usize, index, 0));
    }
    Region::Owned(v)
}

/// Bytes of a region (for copying our own block).
pub(crate) fn region_bytes(r: &mut Region) -> &mut [u8] {
    match r {
        // SAFETY: a raw region is `n` bytes of the caller's memory (see `region`).
        Region::Raw(p, n) => unsafe { std::slice::from_raw_parts_mut(*p, *n) },
        Region::Owned(v) => v,
    }
}

/// The reduction of `(datatype, op)` as an owned op (validated first, so that an
/// undefined pair fails at the call on every rank).
///
/// A user-defined operation is called with its function pointer captured here (the op
/// and datatype handles may be freed before completion) from whichever thread advances
/// the schedule, on items in the datatype's memory layout.
pub(crate) fn owned_op(
    dt: &Arc<Datatype>,
    dth: c_int,
    op: c_int,
    comm: c_int,
) -> MpiResult<OwnedOp> {
    let red = alg::Reducer::new(dt, dth, op).map_err(|e| e.on(comm))?;
    let (elem_size, commutative) = (red.elem(), red.commutative());
    let f: Box<oxmpi_coll::sched::ReduceFn> = match crate::op::op_kind(op)
        .map_err(|e| e.on(comm))?
    {
        crate::op::OpKind::Builtin(_) => Box::new(move |a: &[u8], b: &mut [u8]| red.apply(a, b)),
        crate::op::OpKind::User(uf, _) => {
            let dt = dt.clone();
            Box::new(move |a: &[u8], b: &mut [u8]| user_apply(uf, &dt, dth, a, b))
        }
    };
    Ok(OwnedOp {
        f,
        elem_size,
        commutative,
    })
}

/// A 16-byte aligned scratch buffer of at least `n` bytes.
fn aligned(n: usize) -> Vec<u128> {
    vec![0u128; n.div_ceil(16).max(1)]
}

/// `b = a ∘ b` on packed items of `dt` with the user function `uf`.
///
/// MPI calls a user function on whole items only (MPI-4.1 §6.9.5: `len` elements of the
/// datatype), and every collective splits a vector at the op's item size (`Reducer::elem`,
/// the datatype's size for a user op) after checking that every rank's length is the same
/// whole number of items. A partial trailing item or views of two lengths therefore mean
/// a broken split, never a user's error: it stops the process with that message (as a
/// predefined op failing after validation does, `Reducer::apply`) instead of leaving the
/// bytes out of the result.
fn user_apply(uf: crate::objects::UserFn, dt: &Datatype, dth: c_int, a: &[u8], b: &mut [u8]) {
    if dt.size == 0 || (a.is_empty() && b.is_empty()) {
        return;
    }
    assert!(
        a.len() == b.len() && a.len() % dt.size == 0,
        "user-defined reduction on {} and {} bytes: not whole {}-byte items of one length",
        a.len(),
        b.len(),
        dt.size
    );
    let k = a.len() / dt.size;
    let call = |x: *mut c_void, y: *mut c_void| {
        // SAFETY: the user's function on two buffers of `k` items of the type in its
        // memory layout.
        unsafe { uf.call(x, y, k, dth, dt.extent()) };
    };
    if dt.is_contiguous() && dt.lb == 0 && dt.true_lb == 0 {
        // Packed bytes are the memory layout: reduce in place when aligned.
        if (a.as_ptr() as usize | b.as_ptr() as usize) % 16 == 0 {
            call(a.as_ptr().cast_mut().cast(), b.as_mut_ptr().cast());
            return;
        }
        let (mut x, mut y) = (aligned(a.len()), aligned(b.len()));
        let (px, py) = (x.as_mut_ptr().cast::<u8>(), y.as_mut_ptr().cast::<u8>());
        // SAFETY: the scratch buffers hold at least `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(a.as_ptr(), px, a.len());
            std::ptr::copy_nonoverlapping(b.as_ptr(), py, b.len());
        }
        call(px.cast(), py.cast());
        // SAFETY: as above.
        b.copy_from_slice(unsafe { std::slice::from_raw_parts(py, b.len()) });
        return;
    }
    // Unpack into the type's layout, reduce, pack back.
    let span = (dt.true_ub - dt.true_lb) as usize + (k - 1) * dt.extent().unsigned_abs();
    let (mut x, mut y) = (aligned(span), aligned(span));
    let shift = -dt.true_lb;
    let px = x.as_mut_ptr().cast::<u8>().wrapping_offset(shift);
    let py = y.as_mut_ptr().cast::<u8>().wrapping_offset(shift);
    // SAFETY: the scratch buffers span `k` items of the type from `px`/`py`; the packed
    // slices hold `k` items.
    unsafe {
        unpack_from(dt, k, px, a);
        unpack_from(dt, k, py, b);
    }
    call(px.cast(), py.cast());
    let mut out = Vec::with_capacity(b.len());
    // SAFETY: `py` holds `k` items.
    unsafe { pack_into(dt, k, py, &mut out) };
    b.copy_from_slice(&out);
}

/// Per-rank (count, displacement in items) of a v-collective from C arrays of `n`.
pub(crate) fn layout<C: CountArg, D: DispArg>(
    counts: *const C,
    displs: *const D,
    n: usize,
    comm: c_int,
) -> MpiResult<Vec<(usize, isize)>> {
    let cs = slice_in(counts, n, "counts").map_err(|e| e.on(comm))?;
    let ds = slice_in(displs, n, "displs").map_err(|e| e.on(comm))?;
    cs.iter()
        .zip(ds)
        .map(|(&k, &d)| Ok((check_count(k).map_err(|e| e.on(comm))?, d.aint())))
        .collect()
}

/// Blocks of items of one datatype in a user buffer as one schedule region with byte
/// counts and displacements per block.
pub(crate) struct Laid {
    pub region: Region,
    pub counts: Vec<usize>,
    pub displs: Vec<usize>,
}

/// Block `i` = `slots[i]` (count, displacement in extents) of `dt` at `buf` as region
/// `index`: the user's memory itself when the type is contiguous and no displacement is
/// negative, otherwise packed blocks back to back (block `i` packed from the buffer if
/// `fill(i)`, unpacked into it at completion if `store(i)`).
///
/// # Safety
/// `buf` holds (where `fill`) or has room for (where `store`) every block until the
/// schedule completes.
pub(crate) unsafe fn laid(
    dt: &Arc<Datatype>,
    buf: *mut c_void,
    slots: &[(usize, isize)],
    fill: impl Fn(usize) -> bool,
    store: impl Fn(usize) -> bool,
    index: usize,
    unpack: &mut Vec<Unpack>,
) -> Laid {
    let (size, ext) = (dt.size, dt.extent());
    let mut counts = Vec::with_capacity(slots.len());
    let mut displs = Vec::with_capacity(slots.len());
    if dt.is_contiguous()
        && size > 0
        && !buf.is_null()
        && slots.iter().all(|&(c, d)| c == 0 || d >= 0)
    {
        let mut end = 0usize;
        for &(c, d) in slots {
            let off = if c == 0 { 0 } else { (d * ext) as usize };
            counts.push(c * size);
            displs.push(off);
            end = end.max(off + c * size);
        }
        if end > 0 {
            let region = Region::Raw(buf.cast::<u8>().wrapping_offset(dt.lb), end);
            return Laid {
                region,
                counts,
                displs,
            };
        }
    }
    counts.clear();
    displs.clear();
    let mut v = Vec::new();
    let mut filled = Vec::new();
    for (i, &(c, d)) in slots.iter().enumerate() {
        counts.push(c * size);
        displs.push(v.len());
        let p = buf.cast::<u8>().wrapping_offset(d * ext);
        if fill(i) && c * size > 0 {
            filled.push((c, p as usize, v.len()));
            // SAFETY: block `i` holds `c` items (caller contract).
            unsafe { pack_into(dt, c, p, &mut v) };
        } else {
            v.resize(v.len() + c * size, 0);
        }
        if store(i) && c * size > 0 {
            unpack.push(Unpack(dt.clone(), c, p as usize, index, displs[i]));
        }
    }
    for (c, p, off) in filled {
        note_pack(dt, c, p, v.as_ptr().wrapping_add(off), c * dt.size);
    }
    Laid {
        region: Region::Owned(v),
        counts,
        displs,
    }
}

/// Pieces `(datatype, count, address)` packed back to back into one region (offsets
/// returned) — `store`: unpacked back at completion as region `index`, otherwise packed
/// from the addresses now.
///
/// # Safety
/// Every address holds (`!store`) or has room for (`store`) its items until completion.
pub(crate) unsafe fn pieces(
    list: &[(Arc<Datatype>, usize, *mut u8)],
    store: bool,
    index: usize,
    unpack: &mut Vec<Unpack>,
) -> (Region, Vec<usize>, Vec<usize>) {
    let mut v = Vec::new();
    let (mut counts, mut displs) = (Vec::new(), Vec::new());
    for (dt, c, p) in list {
        let n = dt.size * c;
        displs.push(v.len());
        counts.push(n);
        if store {
            if n > 0 {
                unpack.push(Unpack(dt.clone(), *c, *p as usize, index, v.len()));
            }
            v.resize(v.len() + n, 0);
        } else if n > 0 {
            // SAFETY: caller contract.
            unsafe { pack_into(dt, *c, *p, &mut v) };
        }
    }
    if !store {
        for ((dt, c, p), (&n, &off)) in list.iter().zip(counts.iter().zip(&displs)) {
            note_pack(dt, *c, *p as usize, v.as_ptr().wrapping_add(off), n);
        }
    }
    (Region::Owned(v), counts, displs)
}

/// Pieces as [`pieces`] makes them, but when every non-empty piece is of a contiguous
/// datatype, the user's memory itself: one raw region from the lowest piece to the end of
/// the highest, with each piece's offset in it (nothing packed now or at a persistent
/// collective's start, nothing unpacked at completion). Only for pieces that overlap no
/// piece of the schedule's other region (not for `MPI_IN_PLACE`, whose send pieces are the
/// receive pieces).
///
/// # Safety
/// As [`pieces`]; the span between the pieces is the user's memory too (the schedule only
/// touches the pieces).
pub(crate) unsafe fn spanned(
    list: &[(Arc<Datatype>, usize, *mut u8)],
    store: bool,
    index: usize,
    unpack: &mut Vec<Unpack>,
) -> (Region, Vec<usize>, Vec<usize>) {
    let mut span: Option<(usize, usize)> = None;
    let mut direct = true;
    for (dt, c, p) in list {
        let n = dt.size * c;
        if n == 0 {
            continue;
        }
        if !dt.is_contiguous() || p.is_null() {
            direct = false;
            break;
        }
        let at = p.wrapping_offset(dt.lb) as usize;
        span = Some(span.map_or((at, at + n), |(lo, hi)| (lo.min(at), hi.max(at + n))));
    }
    let Some((lo, hi)) = span.filter(|_| direct) else {
        // SAFETY: caller contract.
        return unsafe { pieces(list, store, index, unpack) };
    };
    let (mut counts, mut displs) = (
        Vec::with_capacity(list.len()),
        Vec::with_capacity(list.len()),
    );
    for (dt, c, p) in list {
        let n = dt.size * c;
        counts.push(n);
        displs.push(if n == 0 {
            0
        } else {
            p.wrapping_offset(dt.lb) as usize - lo
        });
    }
    (Region::Raw(lo as *mut u8, hi - lo), counts, displs)
}

pub(crate) fn sched_err(comm: c_int) -> impl Fn(oxmpi_engine::Error) -> MpiError {
    alg::err(comm)
}
