//! Windows: the shared segment and its control blocks, the table of windows, creation
//! (segment layout, cross-memory-attach probe), attributes' delete callbacks, and the
//! collectives a window runs on its private communicator.

use super::ofi::Rdma;
use super::pt2pt::{params::paths, Net};
use crate::comm::Internal;
use crate::consts::*;
use crate::errors::ErrAction;
use crate::ffi::{MpiError, MpiResult};
use crate::handles::{kind, Table};
use crate::state::lock;
use oxmpi_engine::sys::{cma_copy, memfd, open_peer_fd, Cma, Mapping};
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes of the fixed part of a control block (lock word, accumulate mutex, completions).
const CTRL_HEAD: usize = 64;

/// Value the CMA probe word holds.
const PROBE_MAGIC: u64 = 0x6f78_6d70_6957_696e;

/// How the memory of one target rank is reached.
#[derive(Clone, Copy, Debug)]
pub(super) struct Target {
    /// Base address: in our own address space when `local`, else in the target's.
    pub(super) base: usize,
    /// Window size in bytes (`None` for dynamic windows: any attached address).
    pub(super) size: Option<usize>,
    pub(super) disp_unit: isize,
    pub(super) pid: i32,
    /// True when `base` is an address of this process (own memory or the shared segment).
    pub(super) local: bool,
    /// True when the target is reached with messages (`pt2pt`): `base` is unknown here.
    pub(super) remote: bool,
}

/// The immutable part of a window, shared with operations running without the table lock.
pub(super) struct Inner {
    /// The window's private communicator.
    pub(super) comm: c_int,
    /// The same, resolved for the collectives the window runs (fence, free).
    pub(super) coll: Internal,
    pub(super) rank: usize,
    pub(super) nranks: usize,
    pub(super) flavor: c_int,
    pub(super) seg: Mapping,
    pub(super) ctrl_stride: usize,
    pub(super) targets: Vec<Target>,
    /// The message path, when some peer is reached with messages.
    pub(super) net: Option<Net>,
    /// The RMA path of the `ofi` component, for some of those peers (declared after
    /// `net`: dropped after it, once no progress thread serves the window any more).
    pub(super) rdma: Option<Rdma>,
}

impl Inner {
    /// The message path (present whenever a target is `remote`).
    pub(super) fn net(&self) -> MpiResult<&Net> {
        self.net.as_ref().ok_or_else(|| {
            MpiError::new(
                MPI_ERR_INTERN,
                "window has no message path to a remote peer",
            )
        })
    }

    /// The RMA path to target `t`, if the `ofi` component reaches it.
    pub(super) fn rdma_to(&self, t: usize) -> Option<&Rdma> {
        self.rdma.as_ref().filter(|r| r.reaches(t))
    }

    /// Waits until the `ofi` component's puts to `t` (every target: `None`) are complete.
    pub(super) fn rdma_flush(&self, t: Option<usize>) -> MpiResult {
        self.rdma.as_ref().map_or(Ok(()), |r| r.flush(t))
    }

    /// Word `i` of rank `r`'s control block.
    pub(super) fn word(&self, r: usize, off: usize) -> &AtomicU64 {
        debug_assert!(off + 8 <= self.ctrl_stride);
        // SAFETY: the control blocks lie at the start of the segment, `ctrl_stride` bytes
        // each, 8-byte aligned (the mapping is page aligned); the mapping lives as long
        // as `self`. Shared memory is only accessed through atomics here.
        unsafe { &*(self.seg.ptr().add(r * self.ctrl_stride + off) as *const AtomicU64) }
    }
    pub(super) fn lock_word(&self, r: usize) -> &AtomicU64 {
        self.word(r, 0)
    }
    pub(super) fn acc_mutex(&self, r: usize) -> &AtomicU64 {
        self.word(r, 8)
    }
    pub(super) fn completed(&self, r: usize) -> &AtomicU64 {
        self.word(r, 16)
    }
    /// Fence epochs rank `r` closed on the message path ([`Net::fence`]).
    pub(super) fn fences_closed(&self, r: usize) -> &AtomicU64 {
        self.word(r, 24)
    }

    /// Before a load or store of ours reaches rank `t`'s memory directly: with a message
    /// path, wait until `t` closed the fence epochs we closed (until then a remote origin's
    /// request of the epoch before may still be on its way to `t`, [`Net::fence`]).
    pub(super) fn direct_after_fence(&self, t: usize) -> MpiResult {
        let Some(net) = &self.net else { return Ok(()) };
        if t == self.rank {
            return Ok(());
        }
        let ours = net.epoch();
        let closed = || self.fences_closed(t).load(Ordering::Acquire) >= ours;
        if closed() {
            return Ok(());
        }
        net.wait_for("an access after a fence", closed)
    }

    /// Number of `post`s rank `from` made to rank `r` (as origin).
    pub(super) fn posted(&self, r: usize, from: usize) -> &AtomicU64 {
        self.word(r, CTRL_HEAD + 8 * from)
    }
}

/// Passive-target lock held by this process on one target.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Held {
    Shared,
    Exclusive,
}

/// A window.
pub(super) struct Win {
    pub(super) inner: Arc<Inner>,
    // Attribute storage: `MPI_Win_get_attr` hands out pointers to these, so the window is
    // boxed in the table.
    pub(super) base: usize,
    pub(super) size: isize,
    pub(super) disp_unit: c_int,
    pub(super) flavor: c_int,
    pub(super) model: c_int,
    pub(super) name: String,
    pub(super) info: Vec<(String, String)>,
    pub(super) errh: c_int,
    pub(super) err_action: ErrAction,
    pub(super) attrs: BTreeMap<c_int, usize>,
    pub(super) held: BTreeMap<usize, Held>,
    pub(super) lock_all: bool,
    /// Posts consumed by `start`, per target.
    pub(super) consumed: Vec<u64>,
    pub(super) access: Option<Vec<usize>>,
    /// Completions expected by the current (or last) exposure epoch, cumulative.
    pub(super) expected: u64,
    pub(super) exposure: bool,
    /// Regions attached to a dynamic window (address, size).
    pub(super) attached: Vec<(usize, usize)>,
}

/// The table of windows.
static WINS: Mutex<Table<Box<Win>>> = Mutex::new(Table::new(kind::WIN, 0));

/// The table of windows, locked (a poisoned lock is taken over).
pub(super) fn wins() -> MutexGuard<'static, Table<Box<Win>>> {
    WINS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The error for an invalid window handle `h`.
pub(super) fn bad_win(h: c_int) -> MpiError {
    if h == MPI_WIN_NULL {
        MpiError::new(MPI_ERR_WIN, "MPI_WIN_NULL passed")
    } else {
        MpiError::new(MPI_ERR_WIN, format!("invalid window handle {h:#x}"))
    }
}

/// Run `f` on window `h` under the table lock.
pub(super) fn with_win<R>(h: c_int, f: impl FnOnce(&mut Win) -> MpiResult<R>) -> MpiResult<R> {
    let mut t = wins();
    let w = t.get_mut(h).ok_or_else(|| bad_win(h))?;
    f(w)
}

/// The shared, immutable part of window `h`.
pub(super) fn inner(h: c_int) -> MpiResult<Arc<Inner>> {
    with_win(h, |w| Ok(w.inner.clone()))
}

/// An error of the library's own collective `what` on the window's communicator: its class,
/// for the window's error handler (not the communicator's).
pub(super) fn internal(what: &'static str) -> impl Fn(MpiError) -> MpiError {
    move |e| {
        MpiError::new(
            e.code,
            format!("{what} failed inside a window call: {}", e.detail),
        )
    }
}

/// Barrier on the window's private communicator.
pub(super) fn barrier(inner: &Inner) -> MpiResult {
    inner.coll.barrier().map_err(internal("MPI_Barrier"))
}

/// Free the window's private communicator.
pub(super) fn free_comm(comm: c_int) {
    let _ = crate::comm::free(comm);
}

/// `n` rounded up to a multiple of `a`.
fn round_up(n: usize, a: usize) -> usize {
    n.div_ceil(a) * a
}

/// The entries of info handle `info` (none for `MPI_INFO_NULL`).
pub(super) fn read_info(info: c_int) -> MpiResult<Vec<(String, String)>> {
    if info == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    match lock().infos.get(info) {
        Some(i) => Ok(i.entries.clone()),
        None => mpi_bail!(MPI_ERR_INFO, "invalid info handle {info:#x}"),
    }
}

/// Whether `key` is set to `true` in `info`.
fn info_true(info: &[(String, String)], key: &str) -> bool {
    info.iter().any(|(k, v)| k == key && v == "true")
}

/// Create a window of `flavor` over the user's communicator `comm`. `size` is this
/// rank's size; `user_base` is the user memory (create) or 0. Returns the handle and the
/// base address of this rank's memory.
pub(super) fn create(
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

/// The collective part of window creation on the private communicator `wcomm`: lay out
/// and map the shared segment, probe cross-memory attach, build the window.
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

    // Which peers share our segment (our node's ranks, unless `osc` excludes the direct
    // path) and which get messages (`pt2pt`). Shared-memory windows are always direct.
    let paths = paths();
    let eng = crate::backend::engine()?;
    let world = crate::state::lock().comm(wcomm)?.group.clone();
    let near: Vec<bool> = (0..n)
        .map(|r| {
            r == rank
                || !paths.messages
                || flavor == MPI_WIN_FLAVOR_SHARED
                || (paths.direct && eng.node_pid(world[r]).is_some())
        })
        .collect();
    let leader = near.iter().position(|&x| x).unwrap_or(rank);
    if flavor == MPI_WIN_FLAVOR_SHARED {
        let far = (0..n).any(|r| r != rank && eng.node_pid(world[r]).is_none());
        if coll
            .allreduce_max(i64::from(far))
            .map_err(internal("MPI_Allreduce"))?
            != 0
        {
            mpi_bail!(
                MPI_ERR_RMA_SHARED,
                "MPI_Win_allocate_shared needs ranks that share a node; this communicator \
                 spans nodes (split it with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED))"
            );
        }
    }

    // Layout of the shared segment of our node's ranks.
    let ctrl_stride = round_up(CTRL_HEAD + 8 * n, 64);
    let page = oxmpi_engine::sys::page_size();
    let data_start = round_up(ctrl_stride * n, page);
    let with_data = flavor == MPI_WIN_FLAVOR_ALLOCATE || flavor == MPI_WIN_FLAVOR_SHARED;
    let pad = if flavor == MPI_WIN_FLAVOR_SHARED && !info_true(&info, "alloc_shared_noncontig") {
        1
    } else {
        64
    };
    let mut data_off = Vec::with_capacity(n);
    let mut total = data_start;
    for (r, &is_near) in near.iter().enumerate() {
        data_off.push(total);
        if with_data && is_near {
            total += round_up(row(r)[1] as usize, pad);
        }
    }
    let total = total.max(data_start).max(page);

    // The lowest rank of each node creates the node's segment, everyone maps its own.
    let mut fd = None;
    let mut failure = 0i64;
    let mut detail = String::new();
    if rank == leader {
        match memfd("oxmpi-win", total) {
            Ok(f) => fd = Some(f),
            Err(e) => {
                detail = format!("cannot create the window segment ({total} bytes): {e}");
                failure = 1;
            }
        }
    }
    let mine = [fd.as_ref().map_or(-1, |f| i64::from(f.as_raw_fd()))];
    let fds = coll
        .allgather_i64(&mine)
        .map_err(internal("MPI_Allgather"))?;
    let hdr = [row(leader)[0], fds[leader]];
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
                    detail = format!("cannot map rank {leader}'s window segment: {e}");
                    None
                }
            },
            Err(e) => {
                failure = 1;
                detail = format!(
                    "cannot open rank {leader}'s window segment /proc/{}/fd/{}: {e}",
                    hdr[0], hdr[1]
                );
                None
            }
        }
    };

    // Cross-memory attach probe for windows over user memory.
    if seg.is_some() && !with_data {
        for r in (0..n).filter(|&r| r != rank && near[r]) {
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
            if !near[r] {
                let dynamic = flavor == MPI_WIN_FLAVOR_DYNAMIC;
                return Target {
                    base: 0,
                    size: (!dynamic).then_some(rsize),
                    disp_unit: if dynamic { 1 } else { du },
                    pid: row(r)[0] as i32,
                    local: false,
                    remote: true,
                };
            }
            match flavor {
                MPI_WIN_FLAVOR_ALLOCATE | MPI_WIN_FLAVOR_SHARED => Target {
                    base: seg.ptr() as usize + data_off[r],
                    size: Some(rsize),
                    disp_unit: du,
                    pid: row(r)[0] as i32,
                    local: true,
                    remote: false,
                },
                MPI_WIN_FLAVOR_CREATE => Target {
                    base: row(r)[3] as usize,
                    size: Some(rsize),
                    disp_unit: du,
                    pid: row(r)[0] as i32,
                    local: r == rank,
                    remote: false,
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
                    remote: false,
                },
            }
        })
        .collect();
    let base = match flavor {
        MPI_WIN_FLAVOR_DYNAMIC => 0,
        MPI_WIN_FLAVOR_CREATE => user_base,
        _ => targets[rank].base,
    };
    let net = if near.contains(&false) {
        Some(Net::new(wcomm, &near, flavor == MPI_WIN_FLAVOR_DYNAMIC)?)
    } else {
        None
    };
    // Puts and gets to the peers reached with messages over libfabric's RMA, where the ofi
    // btl reaches them (every rank takes part: whether a peer is reached with messages is
    // symmetric, so either all ranks have such a peer or none has).
    let rdma = if paths.ofi && near.contains(&false) {
        let mem = match flavor {
            MPI_WIN_FLAVOR_ALLOCATE | MPI_WIN_FLAVOR_CREATE => Some((base, size)),
            _ => None,
        };
        let remote: Vec<bool> = near.iter().map(|&x| !x).collect();
        Rdma::create(&coll, &world, &remote, mem)?
    } else {
        None
    };
    let inner = Arc::new(Inner {
        net,
        rdma,
        comm: wcomm,
        coll,
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

/// Delete the attributes `attrs` of window `h` through their delete callbacks (no lock
/// held); the first callback error.
pub(super) fn delete_attrs(h: c_int, attrs: BTreeMap<c_int, usize>) -> MpiResult {
    crate::attrs::delete_attr_list(h, attrs)
}

/// Call the delete callback of keyval `k` for value `v` of window `h` (no lock held).
pub(super) fn delete_attr_value(h: c_int, k: c_int, v: usize) -> MpiResult {
    let kv = lock().keyvals.get(k).copied();
    if let Some(kv) = kv {
        let r = crate::attrs::call_delete(h, k, kv, v);
        if r != MPI_SUCCESS {
            mpi_bail!(r, "attribute delete callback failed");
        }
    }
    Ok(())
}

/// Whether `k` is one of the predefined window attributes.
pub(super) fn predefined_key(k: c_int) -> bool {
    matches!(
        k,
        MPI_WIN_BASE | MPI_WIN_SIZE | MPI_WIN_DISP_UNIT | MPI_WIN_CREATE_FLAVOR | MPI_WIN_MODEL
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_window_handles_are_rejected() {
        assert_eq!(bad_win(MPI_WIN_NULL).code, MPI_ERR_WIN);
        assert!(inner(MPI_WIN_NULL).is_err());
        assert!(inner(0x1234).is_err());
    }
}
