//! Communicators (rank, size, names, comparison, attributes, free) and groups.

pub(crate) mod ctx;
pub(crate) mod make;

use crate::attrs::{
    attr_added, call_copy, call_delete, delete_attr_list, free_keyval, live_keyval, new_keyval,
    CopyFn, DeleteFn,
};
use crate::consts::*;
use crate::ffi::{copy_cstr, inp, out, read_cstr, slice_in, slice_out, MpiError, MpiResult};
use crate::state::{lock, Group, Keyval};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// `MPI_COMM_WORLD`'s rank and size once it exists (`1 << 63 | size << 32 | rank`; 0 before):
/// `MPI_Comm_rank` and `MPI_Comm_size` of world (which mpi4py's ping-pong calls in every
/// iteration) read it without the library lock. World never changes once made.
static WORLD_RANK_SIZE: AtomicU64 = AtomicU64::new(0);

/// Records world's rank and size for [`PMPI_Comm_rank`] and [`PMPI_Comm_size`] (at init,
/// once `MPI_COMM_WORLD` exists).
pub(crate) fn world_made(rank: c_int, size: c_int) {
    WORLD_RANK_SIZE.store(pack_rank_size(rank, size), Ordering::Release);
}

/// [`WORLD_RANK_SIZE`]'s word for `rank` and `size` (both non-negative).
fn pack_rank_size(rank: c_int, size: c_int) -> u64 {
    1 << 63 | (size as u32 as u64) << 32 | rank as u32 as u64
}

/// The (rank, size) of a [`WORLD_RANK_SIZE`] word, `None` for 0 (no world yet).
#[inline]
fn unpack_rank_size(v: u64) -> Option<(c_int, c_int)> {
    (v != 0).then_some((v as u32 as c_int, (v >> 32) as u32 as c_int & c_int::MAX))
}

/// World's (rank, size) if world exists.
#[inline]
fn world_rank_size() -> Option<(c_int, c_int)> {
    unpack_rank_size(WORLD_RANK_SIZE.load(Ordering::Acquire))
}

mpi_fn! {
    /// `MPI_Comm_rank`.
    fn PMPI_Comm_rank / "MPI_Comm_rank" (comm: c_int, rank: *mut c_int) {
        let r = match world_rank_size() {
            Some((r, _)) if comm == MPI_COMM_WORLD => r,
            _ => lock().comm(comm)?.rank,
        };
        out(rank, r, "rank").map_err(|e| e.on(comm))
    }
}

mpi_fn! {
    /// `MPI_Comm_size` (the local group's size on an intercommunicator).
    fn PMPI_Comm_size / "MPI_Comm_size" (comm: c_int, size: *mut c_int) {
        let s = match world_rank_size() {
            Some((_, s)) if comm == MPI_COMM_WORLD => s,
            _ => lock().comm(comm)?.group.len() as c_int,
        };
        out(size, s, "size").map_err(|e| e.on(comm))
    }
}

mpi_fn! {
    /// `MPI_Comm_compare`.
    fn PMPI_Comm_compare / "MPI_Comm_compare" (comm1: c_int, comm2: c_int, result: *mut c_int) {
        if crate::intercomm::is_inter(comm1) || crate::intercomm::is_inter(comm2) {
            let r = crate::intercomm::compare(comm1, comm2)?;
            return out(result, r, "result");
        }
        let st = lock();
        let a = st.comm(comm1)?;
        let b = st.comm(comm2)?;
        let r = if comm1 == comm2 {
            MPI_IDENT
        } else if a.group == b.group {
            MPI_CONGRUENT
        } else {
            let mut x = a.group.clone();
            let mut y = b.group.clone();
            x.sort_unstable();
            y.sort_unstable();
            if x == y { MPI_SIMILAR } else { MPI_UNEQUAL }
        };
        drop(st);
        out(result, r, "result")
    }
}

mpi_fn! {
    /// `MPI_Comm_get_name`.
    fn PMPI_Comm_get_name / "MPI_Comm_get_name" (comm: c_int, name: *mut c_char, resultlen: *mut c_int) {
        // MPI 4.1: the null handle has a name too.
        let n = if comm == MPI_COMM_NULL { "MPI_COMM_NULL".to_string() } else { lock().comm(comm)?.name.clone() };
        let len = copy_cstr(name, MPI_MAX_OBJECT_NAME as usize, &n)?;
        out(resultlen, len, "resultlen")
    }
}

mpi_fn! {
    /// `MPI_Comm_set_name`.
    fn PMPI_Comm_set_name / "MPI_Comm_set_name" (comm: c_int, name: *const c_char) {
        let s = read_cstr(name, "name")?;
        let mut st = lock();
        let c = st.comm_mut(comm)?;
        c.name = s.chars().take(MPI_MAX_OBJECT_NAME as usize - 1).collect();
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_group`.
    fn PMPI_Comm_group / "MPI_Comm_group" (comm: c_int, group: *mut c_int) {
        let mut st = lock();
        let members = st.comm(comm)?.group.clone();
        let h = if members.is_empty() { MPI_GROUP_EMPTY } else { st.groups.insert(Group { members }) };
        drop(st);
        out(group, h, "group")
    }
}

/// The predefined attributes of MPI_COMM_WORLD (values live in static storage because
/// MPI returns a pointer to them).
fn predefined_attr(keyval: c_int) -> Option<*mut c_void> {
    use std::sync::OnceLock;
    struct Vals([c_int; 5]);
    static V: OnceLock<Box<Vals>> = OnceLock::new();
    let v = V.get_or_init(|| {
        let size = lock().world.as_ref().map_or(1, |w| w.size);
        Box::new(Vals([
            crate::backend::TAG_UB,
            MPI_PROC_NULL,
            MPI_ANY_SOURCE,
            0,
            size,
        ]))
    });
    let p = |i: usize| &v.0[i] as *const c_int as *mut c_void;
    match keyval {
        MPI_TAG_UB => Some(p(0)),
        MPI_HOST => Some(p(1)),
        MPI_IO => Some(p(2)),
        MPI_WTIME_IS_GLOBAL => Some(p(3)),
        MPI_UNIVERSE_SIZE => Some(p(4)),
        _ => None,
    }
}

mpi_fn! {
    /// `MPI_Comm_get_attr`.
    fn PMPI_Comm_get_attr / "MPI_Comm_get_attr" (comm: c_int, keyval: c_int, attribute_val: *mut *mut c_void, flag: *mut c_int) {
        let st = lock();
        let c = st.comm(comm)?;
        if flag.is_null() || attribute_val.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL attribute_val or flag");
        }
        if let Some(v) = c.attrs.get(keyval) {
            drop(st);
            out(attribute_val, v as *mut c_void, "attribute_val")?;
            return out(flag, 1, "flag");
        }
        let is_world = comm == MPI_COMM_WORLD || comm == MPI_COMM_SELF;
        let known_user = st.keyvals.get(keyval).is_some();
        drop(st);
        if let Some(p) = predefined_attr(keyval) {
            if is_world {
                out(attribute_val, p, "attribute_val")?;
                return out(flag, 1, "flag");
            }
            return out(flag, 0, "flag");
        }
        if keyval == MPI_LASTUSEDCODE {
            if is_world {
                out(attribute_val, crate::objects::LAST_USED_CODE.as_ptr().cast(), "attribute_val")?;
                return out(flag, 1, "flag");
            }
            return out(flag, 0, "flag");
        }
        if keyval == MPI_APPNUM {
            // The launcher's application number (command index of mpirun's MPMD syntax or
            // of MPI_Comm_spawn_multiple); absent without a launcher.
            static APPNUM: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
            let n = std::env::var("OXMPI_APPNUM").ok().and_then(|v| v.parse::<c_int>().ok());
            if let (true, Some(n)) = (is_world, n) {
                APPNUM.store(n, std::sync::atomic::Ordering::Relaxed);
                out(attribute_val, APPNUM.as_ptr().cast(), "attribute_val")?;
                return out(flag, 1, "flag");
            }
            return out(flag, 0, "flag");
        }
        if !known_user {
            mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {keyval:#x}");
        }
        out(flag, 0, "flag")
    }
}

/// Delete every attribute of `comm` in reverse order of setting, calling the delete
/// callbacks (used by MPI_Finalize for MPI_COMM_SELF and by MPI_Comm_free); the first
/// callback error, for `comm`'s error handler.
pub(crate) fn delete_all_attrs(comm: c_int) -> MpiResult {
    let attrs = match lock().comm_mut(comm) {
        Ok(c) => c.attrs.take_all(),
        Err(_) => return Ok(()),
    };
    delete_attr_list(comm, attrs.into_iter().rev()).map_err(|e| e.on(comm))
}

mpi_fn! {
    /// `MPI_Comm_set_attr`.
    fn PMPI_Comm_set_attr / "MPI_Comm_set_attr" (comm: c_int, keyval: c_int, attribute_val: *mut c_void) {
        let mut st = lock();
        let kv = live_keyval(&st, keyval)?;
        let old = st.comm_mut(comm)?.attrs.insert(keyval, attribute_val as usize);
        if old.is_none() {
            attr_added(&mut st, keyval);
        }
        drop(st);
        if let Some(old) = old {
            let rc = call_delete(comm, keyval, kv, old);
            if rc != MPI_SUCCESS {
                return Err(MpiError::new(rc, "attribute delete callback failed").on(comm));
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_delete_attr`.
    fn PMPI_Comm_delete_attr / "MPI_Comm_delete_attr" (comm: c_int, keyval: c_int) {
        let mut st = lock();
        if st.keyvals.get(keyval).is_none() {
            mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {keyval:#x}");
        }
        let Some(old) = st.comm_mut(comm)?.attrs.remove(keyval) else {
            mpi_bail!(MPI_ERR_KEYVAL, "attribute {keyval:#x} is not set on this communicator");
        };
        drop(st);
        delete_attr_list(comm, [(keyval, old)]).map_err(|e| e.on(comm))
    }
}

mpi_fn! {
    /// `MPI_Comm_create_keyval`.
    fn PMPI_Comm_create_keyval / "MPI_Comm_create_keyval" (copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) {
        out(keyval, new_keyval(copy_fn, delete_fn, extra_state), "keyval")
    }
}

mpi_fn! {
    /// `MPI_Comm_free_keyval`.
    fn PMPI_Comm_free_keyval / "MPI_Comm_free_keyval" (keyval: *mut c_int) {
        free_keyval(keyval)
    }
}

/// `MPIR_Dup_fn`: the predefined copy function behind `MPI_DUP_FN`/`MPI_COMM_DUP_FN`:
/// copies the attribute value.
///
/// # Safety
/// `attribute_val_out` and `flag` must be valid output pointers.
#[no_mangle]
pub unsafe extern "C" fn MPIR_Dup_fn(
    _oldcomm: c_int,
    _keyval: c_int,
    _extra_state: *mut c_void,
    attribute_val_in: *mut c_void,
    attribute_val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    if attribute_val_out.is_null() || flag.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: per the MPI copy-callback contract `attribute_val_out` points to a `void*`
    // and `flag` to an int; both were checked non-NULL.
    unsafe {
        attribute_val_out
            .cast::<*mut c_void>()
            .write_unaligned(attribute_val_in);
        flag.write_unaligned(1);
    }
    MPI_SUCCESS
}

mpi_fn! {
    /// `MPI_Comm_free`.
    fn PMPI_Comm_free / "MPI_Comm_free" (comm: *mut c_int) {
        let h = inp(comm, "comm")?;
        if h == MPI_COMM_WORLD || h == MPI_COMM_SELF {
            mpi_bail!(MPI_ERR_COMM, "predefined communicators cannot be freed");
        }
        free(h)?;
        out(comm, MPI_COMM_NULL, "comm")
    }
}

/// Free communicator `h` (not a predefined one): delete its attributes, forget its
/// topology and intercommunicator link, release its engine communicators.
pub(crate) fn free(h: c_int) -> MpiResult {
    lock().comm(h)?;
    // The handle may name another communicator soon: forget what was cached of it.
    crate::icoll::sched::COMM_GEN.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    // A failing delete callback leaves the communicator in place (its handler decides).
    delete_all_attrs(h)?;
    crate::topo::table::forget(h);
    let inter = crate::intercomm::is_inter(h);
    crate::intercomm::forget(h)?;
    let c = lock().comms.remove(h);
    if let Some(c) = c {
        let eng = crate::backend::engine()?;
        let ctx = eng.comm_context(c.ecomm).map_err(crate::backend::err)?;
        eng.comm_free(c.ecomm).map_err(crate::backend::err)?;
        eng.comm_free(c.coll).map_err(crate::backend::err)?;
        crate::ft::record::forget(ctx);
        // An intercommunicator holds 4 ids (user, collective, local group, ULFM).
        if ctx >= oxmpi_engine::ctxid::FIRST {
            ctx::release(ctx, if inter { 4 } else { 2 })?;
        }
    }
    Ok(())
}

/// The body of `MPI_Comm_dup` (and `_with_info`, `MPI_Comm_idup`): duplicate `comm` with
/// its attributes (through their copy callbacks) and topology into `*newcomm`.
pub(crate) fn dup(comm: c_int, newcomm: *mut c_int) -> MpiResult {
    if crate::intercomm::is_inter(comm) {
        let h = crate::intercomm::dup(comm, newcomm)?;
        copy_attrs(comm, h)?;
        return out(newcomm, h, "newcomm");
    }
    Internal::of(comm)?;
    if newcomm.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
    }
    let h = dup_context(comm)?;
    copy_attrs(comm, h)?;
    crate::topo::table::copy(comm, h);
    out(newcomm, h, "newcomm")
}

/// Copy the attributes of communicator `from` to the new communicator `to` through the
/// keyvals' copy callbacks; when a callback fails, `to` is freed and the error goes to
/// `from`'s handler.
pub(crate) fn copy_attrs(from: c_int, to: c_int) -> MpiResult {
    let r = copy_attrs_to(from, to);
    if r.is_err() {
        let _ = free(to);
    }
    r
}

/// The attributes a duplicate of `from` gets: each keyval's copy callback run now (errors
/// for `from`'s handler). For `MPI_Comm_idup`, which attaches them later
/// ([`attach_attrs`]).
pub(crate) fn copied_attrs(from: c_int) -> MpiResult<Vec<(c_int, usize)>> {
    let attrs: Vec<(c_int, usize, Keyval)> = {
        let st = lock();
        let c = st.comm(from)?;
        c.attrs
            .iter()
            .filter_map(|(k, v)| st.keyvals.get(k).map(|kv| (k, v, *kv)))
            .collect()
    };
    let mut out = Vec::new();
    for (k, v, kv) in attrs {
        if let Some(newv) = call_copy(from, k, kv, v).map_err(|e| e.on(from))? {
            out.push((k, newv));
        }
    }
    Ok(out)
}

/// Set the attributes `attrs` (from [`copied_attrs`]) on the new communicator `to`.
pub(crate) fn attach_attrs(to: c_int, attrs: &[(c_int, usize)]) -> MpiResult {
    let mut st = lock();
    for &(k, v) in attrs {
        if st.comm_mut(to)?.attrs.insert(k, v).is_none() {
            attr_added(&mut st, k);
        }
    }
    Ok(())
}

fn copy_attrs_to(from: c_int, to: c_int) -> MpiResult {
    let attrs = copied_attrs(from)?;
    attach_attrs(to, &attrs)
}

// ---- communicators the library uses itself (windows, files) ----

/// Duplicate intracommunicator `comm`: agree on a fresh context id pair over its collective
/// context and create the communicator over the same group, with `comm`'s error handler.
/// This is the part of `MPI_Comm_dup` that involves no user callback (attributes and
/// topology are the caller's business); windows and files use it directly for their
/// private communicators. Collective over `comm`.
pub(crate) fn dup_context(comm: c_int) -> MpiResult<c_int> {
    let ctx = Internal::of(comm)?.agree_ctx()?;
    let group = lock().comm(comm)?.group.clone();
    make::make_comm(comm, ctx, group)
}

/// A resolved intracommunicator for the library's own collectives (window and file
/// set-up, fences, file synchronisation): runs the collective framework on the
/// communicator's collective context directly, never the exported `MPI_*` entry points
/// (so a tool's profiling wrappers see no internal call and no error handler runs here).
/// Errors name the communicator (`MpiError::on`).
pub(crate) struct Internal {
    a: oxmpi_coll::CollComm,
    comm: c_int,
}

impl Internal {
    /// Resolve communicator `comm` (an intracommunicator).
    pub fn of(comm: c_int) -> MpiResult<Internal> {
        let st = lock();
        st.check_active()?;
        let c = st.comm(comm)?;
        let eng = crate::backend::engine()?;
        Ok(Internal {
            a: oxmpi_coll::CollComm::on_context_known(eng, c.coll, c.coll, c.rank, c.size),
            comm,
        })
    }

    /// Our rank.
    pub fn rank(&self) -> usize {
        self.a.rank as usize
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.a.size as usize
    }

    fn err(&self) -> impl Fn(oxmpi_engine::Error) -> crate::ffi::MpiError + '_ {
        move |e| crate::backend::err(e).on(self.comm)
    }

    /// Barrier (the algorithm `MPI_Barrier` selects, e.g. the shared-memory one).
    pub fn barrier(&self) -> MpiResult {
        crate::coll_alg::barrier(&self.a, self.comm)
    }

    /// A nonblocking elementwise sum of every rank's `v` (the same length everywhere),
    /// for a caller with other work while it waits (a window's fence agrees on how many
    /// requests each rank gets); run it with [`Internal::progress`], then read the sums
    /// with [`Internal::sums_u64`].
    pub fn iallreduce_sum_u64(&self, v: &[u64]) -> MpiResult<oxmpi_coll::sched::Schedule> {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let op = oxmpi_coll::sched::OwnedOp {
            f: Box::new(|a: &[u8], b: &mut [u8]| {
                for (x, y) in a.chunks_exact(8).zip(b.chunks_exact_mut(8)) {
                    let s = u64::from_ne_bytes(x.try_into().expect("8 bytes"))
                        .wrapping_add(u64::from_ne_bytes((&*y).try_into().expect("8 bytes")));
                    y.copy_from_slice(&s.to_ne_bytes());
                }
            }),
            elem_size: 8,
            commutative: true,
        };
        self.a
            .iallreduce(oxmpi_coll::sched::Region::Owned(bytes), op)
            .map_err(self.err())
    }

    /// The sums of a completed [`Internal::iallreduce_sum_u64`].
    pub fn sums_u64(&self, s: &mut oxmpi_coll::sched::Schedule) -> Vec<u64> {
        s.take_owned(0)
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect()
    }

    /// Advances `s` without blocking: `None` while it runs, then its outcome.
    pub fn progress(&self, s: &mut oxmpi_coll::sched::Schedule) -> Option<MpiResult> {
        s.progress().map(|r| r.map_err(self.err()))
    }

    /// Broadcast `buf` from `root`.
    pub fn bcast(&self, buf: &mut [u8], root: i32) -> MpiResult {
        self.a.bcast(buf, root).map_err(self.err())
    }

    /// Every rank's `mine` (the same length everywhere), in rank order, at every rank.
    pub fn allgather_i64(&self, mine: &[i64]) -> MpiResult<Vec<i64>> {
        let k = 8 * mine.len();
        let mut b = vec![0u8; k * self.size()];
        for (d, x) in b[k * self.rank()..k * (self.rank() + 1)]
            .chunks_exact_mut(8)
            .zip(mine)
        {
            d.copy_from_slice(&x.to_ne_bytes());
        }
        self.a.allgather(&mut b, k).map_err(self.err())?;
        Ok(b.chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }

    /// Personalized exchange of byte messages: `parts[r]` goes to rank `r`; returns what
    /// each rank sent to us, in rank order (the sizes through an alltoall, then the data
    /// through an alltoallv).
    pub fn exchange(&self, parts: &[Vec<u8>]) -> MpiResult<Vec<Vec<u8>>> {
        let sizes: Vec<u8> = parts
            .iter()
            .flat_map(|p| (p.len() as u64).to_ne_bytes())
            .collect();
        let mut rsizes = vec![0u8; sizes.len()];
        self.a
            .alltoall(&sizes, &mut rsizes, 8)
            .map_err(self.err())?;
        let rcounts: Vec<usize> = rsizes
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")) as usize)
            .collect();
        let scounts: Vec<usize> = parts.iter().map(Vec::len).collect();
        let displs = |c: &[usize]| -> Vec<usize> {
            c.iter()
                .scan(0, |at, &k| {
                    let d = *at;
                    *at += k;
                    Some(d)
                })
                .collect()
        };
        let (sdispls, rdispls) = (displs(&scounts), displs(&rcounts));
        let send = parts.concat();
        let mut recv = vec![0u8; rcounts.iter().sum()];
        self.a
            .alltoallv(&send, &scounts, &sdispls, &mut recv, &rcounts, &rdispls)
            .map_err(self.err())?;
        Ok(rcounts
            .iter()
            .zip(&rdispls)
            .map(|(&k, &d)| recv[d..d + k].to_vec())
            .collect())
    }

    /// The maximum of every rank's `v`, at every rank.
    pub fn allreduce_max(&self, v: i64) -> MpiResult<i64> {
        Ok(self.allgather_i64(&[v])?.into_iter().max().unwrap_or(v))
    }

    /// A fresh context id pair for a new communicator over (part of) this one, agreed by
    /// every member ([`agree_ctx_by`] over allgathers). Used by dup, split and create
    /// alike.
    pub fn agree_ctx(&self) -> MpiResult<u32> {
        agree_ctx_by(
            |v| {
                let m = self.allreduce_max(i64::from(v))?;
                Ok(u32::try_from(m).unwrap_or(v))
            },
            Some(&mut |mask: Vec<u64>| {
                let words: Vec<i64> = mask.iter().map(|&w| w as i64).collect();
                let all = self.allgather_i64(&words)?;
                let mut and = mask;
                for theirs in all.chunks_exact(and.len().max(1)) {
                    oxmpi_engine::ctxid::and_into(&mut and, theirs.iter().map(|&w| w as u64));
                }
                Ok(and)
            }),
            |ok| Ok(self.allreduce_max(i64::from(!ok))? == 0),
        )
    }
}

/// The AND of every member's mask, word by word, at every member (an agreement's
/// fallback: `ctxid::Ids::free_mask`).
pub(crate) type AndMasks<'a> = &'a mut dyn FnMut(Vec<u64>) -> MpiResult<Vec<u64>>;

/// Agree on a context id pair that is free at every member, also while other threads of
/// the members create communicators over other parents (MPI_THREAD_MULTIPLE): each member
/// proposes the lowest pair above the ids it holds (`ctxid::Ids::top`), `max` gives the
/// largest proposal to all, each member reserves it if it is still free here, and `all`
/// tells whether every member could (else the reservations are released and the next
/// round starts above). When the largest proposal reaches the limit of context ids
/// ([`ctx::limit`]), `and` (if the caller has it) ANDs the members' masks of free pairs and
/// the lowest pair free at all is taken, the same way; without `and` (ULFM's shrink) the
/// members search for it by their lowest free ids ([`agree_by_search`]): freed ids are
/// reused in any order.
/// No pair free at every member is an `MPI_ERR_OTHER` error at every member. `max`, `and`
/// and `all` are the parent's collective exchanges, called in the same order at every
/// member.
pub(crate) fn agree_ctx_by(
    max: impl FnMut(u32) -> MpiResult<u32>,
    and: Option<AndMasks<'_>>,
    all: impl FnMut(bool) -> MpiResult<bool>,
) -> MpiResult<u32> {
    agree_ctx_span(2, max, and, all)
}

/// [`agree_ctx_by`] for `span` consecutive context ids (an intercommunicator takes 4).
pub(crate) fn agree_ctx_span(
    span: u32,
    mut max: impl FnMut(u32) -> MpiResult<u32>,
    and: Option<AndMasks<'_>>,
    mut all: impl FnMut(bool) -> MpiResult<bool>,
) -> MpiResult<u32> {
    let limit = ctx::limit()?;
    let mut floor = 0;
    loop {
        let mine = ctx::proposal(floor)?;
        let agreed = max(mine)?;
        if agreed.saturating_add(span) > limit {
            return match and {
                Some(and) => agree_by_mask(span, limit, and, all),
                None => agree_by_search(span, limit, max, all),
            };
        }
        if reserve_at_all(agreed, span, &mut all)? {
            return Ok(agreed);
        }
        floor = agreed + span;
    }
}

/// Reserves the `span` ids from `ctx` here if they are free and tells, through `all`,
/// whether every member could: if not, a reservation made here is released again.
fn reserve_at_all(
    ctx: u32,
    span: u32,
    all: &mut impl FnMut(bool) -> MpiResult<bool>,
) -> MpiResult<bool> {
    let ok = lock().ids.reserve(ctx, span);
    if all(ok)? {
        return Ok(true);
    }
    if ok {
        lock().ids.release(ctx, span);
    }
    Ok(false)
}

/// [`agree_ctx_span`] once the ids above every member's have run out: the lowest `span`
/// ids free at every member by the AND of their masks of free pairs.
fn agree_by_mask(
    span: u32,
    limit: u32,
    and: AndMasks<'_>,
    all: impl FnMut(bool) -> MpiResult<bool>,
) -> MpiResult<u32> {
    agree_past_limit(span, limit, all, |floor| {
        let mine = lock()
            .ids
            .free_mask(floor, limit.min(oxmpi_engine::ctxid::MASK_LIMIT));
        Ok(oxmpi_engine::ctxid::pick(&and(mine)?, span))
    })
}

/// [`agree_ctx_span`] once the ids above every member's have run out, for agreements that
/// exchange no masks (ULFM's shrink: its fault-tolerant agreement carries a maximum and a
/// flag): each member proposes its lowest `span` free ids at or above the floor
/// (`ctxid::Ids::lowest_free`) and the largest proposal is the candidate (no run starting
/// below it is free at the member that proposed it).
fn agree_by_search(
    span: u32,
    limit: u32,
    mut max: impl FnMut(u32) -> MpiResult<u32>,
    all: impl FnMut(bool) -> MpiResult<bool>,
) -> MpiResult<u32> {
    agree_past_limit(span, limit, all, |floor| {
        let mine = lock().ids.lowest_free(floor, span, limit).unwrap_or(limit);
        let ctx = max(mine)?;
        Ok((ctx.saturating_add(span) <= limit).then_some(ctx))
    })
}

/// The rounds of both agreements past the limit: `candidate(floor)` gives the same run at
/// every member (or none: no run left below the limit, the same error at every member),
/// which is reserved at all if free at all; otherwise the floor moves a pair past it. Each
/// round passes at least one pair.
fn agree_past_limit(
    span: u32,
    limit: u32,
    mut all: impl FnMut(bool) -> MpiResult<bool>,
    mut candidate: impl FnMut(u32) -> MpiResult<Option<u32>>,
) -> MpiResult<u32> {
    let mut floor = 0;
    loop {
        ctx::settle_parked()?;
        let Some(ctx) = candidate(floor)? else {
            return Err(ctx::exhausted(limit, span));
        };
        if reserve_at_all(ctx, span, &mut all)? {
            return Ok(ctx);
        }
        floor = ctx + oxmpi_engine::ctxid::PAIR;
    }
}

// ---- groups ----

impl crate::state::State {
    /// The members of group `h`.
    pub fn group(&self, h: c_int) -> MpiResult<Vec<i32>> {
        if h == MPI_GROUP_EMPTY {
            return Ok(vec![]);
        }
        match self.groups.get(h) {
            Some(g) => Ok(g.members.clone()),
            None => mpi_bail!(MPI_ERR_GROUP, "invalid group handle {h:#x}"),
        }
    }
    /// Store a group; empty groups map to `MPI_GROUP_EMPTY`.
    pub fn new_group(&mut self, members: Vec<i32>) -> c_int {
        if members.is_empty() {
            MPI_GROUP_EMPTY
        } else {
            self.groups.insert(Group { members })
        }
    }
    /// Our world rank.
    pub fn world_rank(&self) -> i32 {
        self.world.as_ref().map_or(0, |w| w.rank)
    }
}

mpi_fn! {
    /// `MPI_Group_size`.
    fn PMPI_Group_size / "MPI_Group_size" (group: c_int, size: *mut c_int) {
        let n = lock().group(group)?.len();
        out(size, n as c_int, "size")
    }
}

mpi_fn! {
    /// `MPI_Group_rank`.
    fn PMPI_Group_rank / "MPI_Group_rank" (group: c_int, rank: *mut c_int) {
        let st = lock();
        let g = st.group(group)?;
        let me = st.world_rank();
        drop(st);
        let r = g.iter().position(|&w| w == me).map_or(MPI_UNDEFINED, |p| p as c_int);
        out(rank, r, "rank")
    }
}

mpi_fn! {
    /// `MPI_Group_free`.
    fn PMPI_Group_free / "MPI_Group_free" (group: *mut c_int) {
        let h = inp(group, "group")?;
        if h != MPI_GROUP_EMPTY && lock().groups.remove(h).is_none() {
            mpi_bail!(MPI_ERR_GROUP, "invalid group handle {h:#x}");
        }
        out(group, MPI_GROUP_NULL, "group")
    }
}

mpi_fn! {
    /// `MPI_Group_translate_ranks`.
    fn PMPI_Group_translate_ranks / "MPI_Group_translate_ranks" (group1: c_int, n: c_int, ranks1: *const c_int, group2: c_int, ranks2: *mut c_int) {
        let n = crate::ffi::check_count(n)?;
        let st = lock();
        let g1 = st.group(group1)?;
        let g2 = st.group(group2)?;
        drop(st);
        let r1 = slice_in(ranks1, n, "ranks1")?;
        let r2 = slice_out(ranks2, n, "ranks2")?;
        for (o, &r) in r2.iter_mut().zip(r1) {
            *o = if r == MPI_PROC_NULL {
                MPI_PROC_NULL
            } else {
                let Some(&w) = usize::try_from(r).ok().and_then(|i| g1.get(i)) else {
                    mpi_bail!(MPI_ERR_RANK, "rank {r} not in group1 (size {})", g1.len());
                };
                g2.iter().position(|&x| x == w).map_or(MPI_UNDEFINED, |p| p as c_int)
            };
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Group_compare`.
    fn PMPI_Group_compare / "MPI_Group_compare" (group1: c_int, group2: c_int, result: *mut c_int) {
        let st = lock();
        let a = st.group(group1)?;
        let b = st.group(group2)?;
        drop(st);
        let r = if a == b {
            MPI_IDENT
        } else {
            let (mut x, mut y) = (a, b);
            x.sort_unstable();
            y.sort_unstable();
            if x == y { MPI_SIMILAR } else { MPI_UNEQUAL }
        };
        out(result, r, "result")
    }
}

/// Shared body of the set operations.
fn set_op(
    group1: c_int,
    group2: c_int,
    newgroup: *mut c_int,
    f: fn(&[i32], &[i32]) -> Vec<i32>,
) -> MpiResult {
    let mut st = lock();
    let a = st.group(group1)?;
    let b = st.group(group2)?;
    let h = st.new_group(f(&a, &b));
    drop(st);
    out(newgroup, h, "newgroup")
}

mpi_fn! {
    /// `MPI_Group_union`.
    fn PMPI_Group_union / "MPI_Group_union" (group1: c_int, group2: c_int, newgroup: *mut c_int) {
        set_op(group1, group2, newgroup, |a, b| {
            let mut v = a.to_vec();
            v.extend(b.iter().filter(|x| !a.contains(x)));
            v
        })
    }
}

mpi_fn! {
    /// `MPI_Group_intersection`.
    fn PMPI_Group_intersection / "MPI_Group_intersection" (group1: c_int, group2: c_int, newgroup: *mut c_int) {
        set_op(group1, group2, newgroup, |a, b| a.iter().copied().filter(|x| b.contains(x)).collect())
    }
}

mpi_fn! {
    /// `MPI_Group_difference`.
    fn PMPI_Group_difference / "MPI_Group_difference" (group1: c_int, group2: c_int, newgroup: *mut c_int) {
        set_op(group1, group2, newgroup, |a, b| a.iter().copied().filter(|x| !b.contains(x)).collect())
    }
}

/// Validate a list of distinct ranks of a group of `size`.
fn check_ranks(ranks: &[c_int], size: usize) -> MpiResult {
    let mut seen = vec![false; size];
    for &r in ranks {
        let Some(s) = usize::try_from(r).ok().filter(|&i| i < size) else {
            mpi_bail!(MPI_ERR_RANK, "rank {r} out of range (group size {size})");
        };
        if seen[s] {
            mpi_bail!(MPI_ERR_RANK, "rank {r} given twice");
        }
        seen[s] = true;
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Group_incl`.
    fn PMPI_Group_incl / "MPI_Group_incl" (group: c_int, n: c_int, ranks: *const c_int, newgroup: *mut c_int) {
        let n = crate::ffi::check_count(n)?;
        let mut st = lock();
        let g = st.group(group)?;
        let r = slice_in(ranks, n, "ranks")?;
        check_ranks(r, g.len())?;
        let h = st.new_group(r.iter().map(|&i| g[i as usize]).collect());
        drop(st);
        out(newgroup, h, "newgroup")
    }
}

mpi_fn! {
    /// `MPI_Group_excl`.
    fn PMPI_Group_excl / "MPI_Group_excl" (group: c_int, n: c_int, ranks: *const c_int, newgroup: *mut c_int) {
        let n = crate::ffi::check_count(n)?;
        let mut st = lock();
        let g = st.group(group)?;
        let r = slice_in(ranks, n, "ranks")?;
        check_ranks(r, g.len())?;
        let h = st.new_group(g.iter().enumerate().filter(|(i, _)| !r.contains(&(*i as c_int))).map(|(_, &w)| w).collect());
        drop(st);
        out(newgroup, h, "newgroup")
    }
}

/// Expand `(first, last, stride)` triplets into ranks.
fn expand_ranges(n: usize, ranges: *const [c_int; 3], size: usize) -> MpiResult<Vec<c_int>> {
    let tr = slice_in(ranges, n, "ranges")?;
    let mut v = Vec::new();
    for &[first, last, stride] in tr {
        if stride == 0 {
            mpi_bail!(MPI_ERR_ARG, "zero stride in a rank range");
        }
        let mut r = first;
        while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
            v.push(r);
            r += stride;
        }
    }
    check_ranks(&v, size)?;
    Ok(v)
}

mpi_fn! {
    /// `MPI_Group_range_incl`.
    fn PMPI_Group_range_incl / "MPI_Group_range_incl" (group: c_int, n: c_int, ranges: *const [c_int; 3], newgroup: *mut c_int) {
        let n = crate::ffi::check_count(n)?;
        let mut st = lock();
        let g = st.group(group)?;
        let r = expand_ranges(n, ranges, g.len())?;
        let h = st.new_group(r.iter().map(|&i| g[i as usize]).collect());
        drop(st);
        out(newgroup, h, "newgroup")
    }
}

mpi_fn! {
    /// `MPI_Group_range_excl`.
    fn PMPI_Group_range_excl / "MPI_Group_range_excl" (group: c_int, n: c_int, ranges: *const [c_int; 3], newgroup: *mut c_int) {
        let n = crate::ffi::check_count(n)?;
        let mut st = lock();
        let g = st.group(group)?;
        let r = expand_ranges(n, ranges, g.len())?;
        let h = st.new_group(g.iter().enumerate().filter(|(i, _)| !r.contains(&(*i as c_int))).map(|(_, &w)| w).collect());
        drop(st);
        out(newgroup, h, "newgroup")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_rank_and_size_survive_their_packing() {
        assert_eq!(unpack_rank_size(0), None);
        for (r, s) in [
            (0, 1),
            (1, 2),
            (0, 2),
            (4095, 4096),
            (c_int::MAX - 1, c_int::MAX),
        ] {
            assert_eq!(unpack_rank_size(pack_rank_size(r, s)), Some((r, s)));
        }
    }
}
