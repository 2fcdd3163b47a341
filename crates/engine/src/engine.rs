//! The engine: communicators, requests, protocols (eager, rendezvous), transports (self, sm)
//! and progress.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::{Mutex, OnceLock};

use crate::bootstrap::{Bootstrap, FileKvs, PmiBootstrap};
use crate::btl::sm::coop::{self, Chooser, CoopMem, Mech};
use crate::btl::sm::params::{Settings, SingleCopy};
use crate::btl::{Link, LinkError, PeerInfo, BTL};
use crate::pml::hdr::{Hdr, F_CMA, F_COOP, F_SYNC, HDR, K_CTS, K_DATA, K_EAGER, K_FIN, K_RTS};
use crate::pml::matching::{Envelope, HashMap, Matcher};
use crate::pml::params::{yield_when_idle_explicit, PML};
use crate::sys;
use crate::{
    params, CommId, Error, ErrorClass, MessageId, ReqId, SendMode, Status, ThreadLevel, ANY_SOURCE,
    ANY_TAG, PROC_NULL, TAG_UB,
};

static ENGINE: OnceLock<Engine> = OnceLock::new();

/// Initialises the engine once per process: bootstraps through the test file store
/// (`OXMPI_ENGINE_KVS_DIR`), PMI (when the launcher provides it) or as a singleton, and
/// connects the shared-memory transport to all ranks of the node.
///
/// Returns [`Error::State`] if called a second time.
pub fn init(required: ThreadLevel) -> Result<&'static Engine, Error> {
    let boot: Box<dyn Bootstrap> = match FileKvs::from_env() {
        Some(f) => Box::new(f),
        None => pmi_bootstrap()?,
    };
    init_with(boot, required)
}

fn pmi_bootstrap() -> Result<Box<dyn Bootstrap>, Error> {
    Ok(Box::new(PmiBootstrap::init()?))
}

/// Initialises the engine with an explicit bootstrap (tests, alternative launchers).
pub fn init_with(
    boot: Box<dyn Bootstrap>,
    required: ThreadLevel,
) -> Result<&'static Engine, Error> {
    let mut created = false;
    let mut failure = None;
    let e = ENGINE.get_or_init(|| {
        created = true;
        match Engine::new(boot, required) {
            Ok(e) => e,
            Err(err) => {
                failure = Some(err);
                Engine::failed()
            }
        }
    });
    if let Some(err) = failure {
        return Err(err);
    }
    if !created {
        return Err(Error::State("engine already initialised".into()));
    }
    Ok(e)
}

/// The engine, if [`init`] succeeded.
pub fn engine() -> Option<&'static Engine> {
    ENGINE.get().filter(|e| e.size > 0)
}

// ---------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Comm {
    ctx: u32,
    /// World rank of each communicator rank (the local group).
    group: Vec<i32>,
    /// World rank of each peer rank: the group that destination and source ranks index.
    /// Equal to `group` for an intracommunicator; the remote group of an intercommunicator.
    remote: Vec<i32>,
    rank: i32,
}

/// Who to notify when a buffered eager message is matched.
#[derive(Debug, Clone, Copy)]
enum Ack {
    None,
    Remote { peer: i32, sreq: u64 },
}

/// An unexpected (or matched-probed) message.
#[derive(Debug)]
enum Msg {
    Eager {
        data: Vec<u8>,
        ack: Ack,
    },
    Rts {
        peer: i32,
        total: u64,
        sreq: u64,
        addr: u64,
        cma: bool,
    },
    /// A large or synchronous send to ourselves: the sender's buffer, copied at match time.
    Local {
        ptr: *const u8,
        len: usize,
        sreq: u64,
    },
}

impl Msg {
    fn len(&self) -> usize {
        match self {
            Msg::Eager { data, .. } => data.len(),
            Msg::Rts { total, .. } => *total as usize,
            Msg::Local { len, .. } => *len,
        }
    }
}

#[derive(Debug)]
enum ReqState {
    Done,
    /// A send waiting for its ring write, acknowledgement, clear-to-send or FIN.
    Send {
        peer: i32,
        ptr: *const u8,
        len: usize,
    },
    /// A posted receive.
    Posted {
        buf: *mut u8,
        cap: usize,
        ctx: u32,
        src: i32,
        /// World rank of the source, None for ANY_SOURCE.
        peer: Option<i32>,
    },
    /// A matched rendezvous receive waiting for data fragments.
    Data {
        buf: *mut u8,
        want: usize,
        got: usize,
        peer: i32,
        /// When the clear-to-send went out (nanoseconds since start), if the transfer's
        /// throughput feeds the peer's [`Chooser`]; 0 otherwise.
        since: u64,
    },
}

/// How a send started: complete at once (no request needed) or as a request.
#[derive(Debug)]
enum Started {
    Done(Status),
    Req(ReqId),
}

#[derive(Debug)]
struct Req {
    state: ReqState,
    status: Status,
    /// Freed automatically on completion (buffered sends, `MPI_Request_free`).
    detached: bool,
    /// Data owned by the request (buffered sends).
    _owned: Option<Vec<u8>>,
}

#[derive(Debug)]
enum Out {
    Eager {
        hdr: Hdr,
        ptr: *const u8,
        len: usize,
        /// Complete this send request once written.
        complete: Option<u64>,
    },
    Ctrl(Hdr),
    Data {
        sreq: u64,
        rreq: u64,
        ptr: *const u8,
        off: usize,
        len: usize,
    },
}

#[derive(Debug, Default)]
struct Peer {
    pid: i32,
    pidfd: Option<OwnedFd>,
    link: Option<Box<dyn Link>>,
    outq: VecDeque<Out>,
    dead: bool,
    /// On our node (its pid is meaningful here).
    local: bool,
    /// Sends whose records the link accepted but still holds in its own buffer (tcp): they
    /// complete once the link has handed every byte on, so a receiver never waits for data
    /// that only the sender's progress could move (the sender may be outside the engine).
    unflushed: Vec<u64>,
    /// The link buffers in user space (tcp), so `unflushed` applies; spares the sm fast
    /// path a call ([`crate::btl::Caps::buffered`]).
    buffered: bool,
    /// A rendezvous may offer it a single copy ([`crate::btl::Caps::single_copy`]).
    single_copy: bool,
    /// Cooperative-copy control area for its transfers to us (in our segment).
    coop_rx: Option<CoopMem>,
    /// Cooperative-copy control area for our transfers to it (in its segment).
    coop_tx: Option<CoopMem>,
    /// Sequence number of the last cooperative transfer from it.
    coop_seq: u32,
    /// Pipelined or cooperative copy for its large messages to us, per size class
    /// ([`coop::size_class`]).
    chooser: [Chooser; coop::SIZE_CLASSES],
    /// When the last measured large transfer from it ended (nanoseconds since start).
    last_end: u64,
    /// When the last cooperative transfer from it ended.
    last_coop_end: u64,
}

impl Peer {
    /// A large transfer from this peer (world rank `p`) by `m` moved `n` bytes from `start`
    /// to `now` (nanoseconds): feeds its size class's chooser (a switch is said at verbose
    /// level 20, every sample at 90).
    fn measured(&mut self, p: usize, m: Mech, n: usize, start: u64, now: u64) {
        let ns = now.saturating_sub(start);
        oxmpi_base::verbose!(
            BTL,
            90,
            "sm: sample {} {n} B {ns} ns at {now}",
            match m {
                Mech::Pipe => "pipe",
                Mech::Coop => "coop",
            }
        );
        let c = &mut self.chooser[coop::size_class(n)];
        if c.record(m, n, ns, now) {
            log_switch(c, p, n);
        }
        self.last_end = now;
        if m == Mech::Coop {
            self.last_coop_end = now;
        }
    }
}

struct State {
    me: i32,
    comms: Vec<Option<Comm>>,
    ctx_comm: HashMap<u32, u32>,
    matcher: Matcher<u64, Msg>,
    reqs: Slab,
    next_req: u64,
    messages: HashMap<u64, (Envelope, Msg)>,
    /// Buffers of consumed unexpected eager messages, reused for the next ones (no
    /// allocation per unexpected message).
    eager_pool: Vec<Vec<u8>>,
    peers: Vec<Peer>,
    /// Indices of the peers that have a link (the ones progress polls).
    linked: Vec<usize>,
    eager_limit: usize,
    frag: usize,
    /// Single-copy (CMA) reads from peers are allowed and have not failed.
    cma: bool,
    /// Single-copy (CMA) writes into peers have not failed.
    cma_push: bool,
    /// The configured large-message mechanism.
    single_copy: SingleCopy,
    /// Smallest message for the cooperative copy.
    coop_min: usize,
    /// Bytes per chunk of the cooperative copy.
    coop_chunk: usize,
    /// Time base of the transfer measurements.
    clock: std::time::Instant,
    finalized: bool,
}

// SAFETY: the raw pointers in State are user buffers (kept valid by the MPI contract until
// their request completes) and shared-memory rings; all access happens under the Engine lock.
unsafe impl Send for State {}

/// Most buffers of consumed unexpected eager messages kept for reuse.
const EAGER_POOL: usize = 256;

/// The per-process MPI engine. See the crate documentation for the API overview.
pub struct Engine {
    rank: i32,
    size: i32,
    thread_level: ThreadLevel,
    yield_when_idle: bool,
    /// Non-blocking polls (test, iprobe), to check peer liveness now and then.
    polls: std::sync::atomic::AtomicU32,
    state: StateLock,
    boot: Mutex<Option<Box<dyn Bootstrap>>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl Engine {
    fn failed() -> Engine {
        Engine {
            rank: -1,
            size: 0,
            thread_level: ThreadLevel::Single,
            yield_when_idle: false,
            polls: Default::default(),
            state: StateLock::new(State::new(-1, 0, &Settings::declared())),
            boot: Mutex::new(None),
        }
    }

    /// An engine of rank `rank` (of `links.len()` ranks) over the given links (none for
    /// ourselves), not the process's global one: the protocol tests run several in one
    /// process over in-memory links (`crate::btl::fake`).
    #[cfg(test)]
    pub(crate) fn with_links(
        rank: i32,
        links: Vec<Option<Box<dyn Link>>>,
        sm: &Settings,
    ) -> Engine {
        let size = links.len() as i32;
        let mut st = State::new(rank, size, sm);
        st.attach(
            links
                .into_iter()
                .map(|link| PeerInfo {
                    pid: 0,
                    local: false,
                    link,
                })
                .collect(),
        );
        Engine {
            rank,
            size,
            thread_level: ThreadLevel::Single,
            yield_when_idle: false,
            polls: Default::default(),
            state: StateLock::new(st),
            boot: Mutex::new(None),
        }
    }

    fn new(mut boot: Box<dyn Bootstrap>, required: ThreadLevel) -> Result<Engine, Error> {
        let rank = boot.rank();
        let size = boot.size();
        if size < 1 || rank < 0 || rank >= size {
            return Err(Error::Bootstrap {
                rank,
                msg: format!("invalid rank {rank} of size {size}"),
            });
        }
        params::register();
        let sm = Settings::read();
        let mut st = State::new(rank, size, &sm);
        if st.cma {
            sys::allow_ptracer_any();
        }
        // The btl selection list (`btl=self,sm`, `btl=^sm`): a requested component that is
        // not compiled in stops every rank here, before any exchange, with Open MPI's
        // "A requested component was not found" naming host, framework and what exists.
        use oxmpi_base::select::{select_global, Candidate};
        let candidates: Vec<Candidate> = crate::btl::REGISTRY
            .iter()
            .map(|c| Candidate::available(c.info.name))
            .collect();
        let btls = select_global("btl", &candidates).map_err(|e| Error::Bootstrap {
            rank,
            msg: e.to_string(),
        })?;
        let mut local_ranks = 1;
        if size > 1 {
            let peers = crate::btl::wire_up(&mut *boot, rank, size as usize, &btls.components)?;
            local_ranks += peers.iter().filter(|p| p.local).count();
            st.attach(peers);
        }
        oxmpi_base::verbose!(
            BTL,
            10,
            "rank {rank}/{size}: btl self{}; sm eager_limit {} fragment {} ring {} bulk {} \
             single_copy {} coop_min {}",
            btls.components
                .iter()
                .filter(|&&c| c != "self")
                .map(|c| format!(",{c}"))
                .collect::<String>(),
            st.eager_limit,
            st.frag,
            sm.ring,
            sm.bulk,
            match (st.cma, st.single_copy) {
                (false, _) | (_, SingleCopy::None) => "none",
                (_, SingleCopy::Cma) => "cma",
                (_, SingleCopy::Coop) => "coop",
                (_, SingleCopy::Auto) => "auto",
            },
            st.coop_min
        );
        let cpus = sys::online_cpus();
        // An explicit mpi_yield_when_idle wins (as in Open MPI); otherwise yield when the
        // launcher says the node is oversubscribed or it has more ranks than CPUs.
        let oversubscribed =
            std::env::var("OXMPI_OVERSUBSCRIBED").is_ok_and(|v| v == "1") || local_ranks > cpus;
        let yield_when_idle = yield_when_idle_explicit().unwrap_or(oversubscribed);
        Ok(Engine {
            rank,
            size,
            thread_level: required,
            yield_when_idle,
            polls: Default::default(),
            state: StateLock::new(st),
            boot: Mutex::new(Some(boot)),
        })
    }

    #[inline]
    fn lock(&self) -> StateGuard<'_> {
        self.state.lock()
    }

    /// Our rank in `MPI_COMM_WORLD`.
    pub fn rank(&self) -> i32 {
        self.rank
    }
    /// Size of `MPI_COMM_WORLD`.
    pub fn size(&self) -> i32 {
        self.size
    }
    /// The thread level provided (the level requested at [`init`]; all levels are supported).
    pub fn thread_level(&self) -> ThreadLevel {
        self.thread_level
    }
    /// `true` if waiting calls yield the CPU between polls.
    pub fn yields_when_idle(&self) -> bool {
        self.yield_when_idle
    }
    /// The process id of world rank `r` if it runs on this node (the node the `sm`
    /// transport shares memory within: `OXMPI_ENGINE_NODE` when set, else the host name),
    /// this process's own id for `r == rank()`, `None` for a rank on another node or out of
    /// range. The one place that knows which ranks share a node; collectives and one-sided
    /// communication ask it instead of comparing host names again.
    pub fn node_pid(&self, r: i32) -> Option<i32> {
        if r == self.rank {
            return Some(sys::getpid());
        }
        let st = self.lock();
        let p = st.peers.get(usize::try_from(r).ok()?)?;
        p.local.then_some(p.pid)
    }
    /// `MPI_COMM_WORLD` (context id 0).
    pub fn comm_world(&self) -> CommId {
        CommId(0)
    }
    /// `MPI_COMM_SELF` (context id 1).
    pub fn comm_self(&self) -> CommId {
        CommId(1)
    }

    /// Our rank in `comm`.
    pub fn comm_rank(&self, comm: CommId) -> Result<i32, Error> {
        Ok(self.lock().comm(comm)?.rank)
    }
    /// Size of `comm`.
    pub fn comm_size(&self, comm: CommId) -> Result<i32, Error> {
        Ok(self.lock().comm(comm)?.group.len() as i32)
    }
    /// Context id of `comm`.
    pub fn comm_context(&self, comm: CommId) -> Result<u32, Error> {
        Ok(self.lock().comm(comm)?.ctx)
    }
    /// World ranks of the members of `comm`, in communicator rank order (the local group
    /// of an intercommunicator).
    pub fn comm_group(&self, comm: CommId) -> Result<Vec<i32>, Error> {
        Ok(self.lock().comm(comm)?.group.clone())
    }
    /// World ranks of the peers of `comm`: the remote group of an intercommunicator, the
    /// group itself otherwise.
    pub fn comm_remote_group(&self, comm: CommId) -> Result<Vec<i32>, Error> {
        Ok(self.lock().comm(comm)?.remote.clone())
    }

    /// Adds a communicator with context id `ctx` over the world ranks `group` (our rank must
    /// be a member). Choosing a context id that all members agree on (e.g. by an allreduce
    /// for `MPI_Comm_dup`/`split`) is the caller's job; ids 0 and 1 are taken by world and
    /// self, and a context id may be used by one live communicator only.
    pub fn comm_create(&self, ctx: u32, group: Vec<i32>) -> Result<CommId, Error> {
        self.comm_create_inter(ctx, group, None)
    }

    /// Adds a communicator with context id `ctx` whose local group is `group` (world ranks;
    /// our rank must be a member) and whose peers are `remote`: with `Some(remote)` this is
    /// an intercommunicator, where destination and source ranks index `remote` and a
    /// message carries the sender's rank in its own local group; `None` gives an
    /// intracommunicator (peers = `group`). Context-id agreement is the caller's job, as for
    /// [`Engine::comm_create`].
    pub fn comm_create_inter(
        &self,
        ctx: u32,
        group: Vec<i32>,
        remote: Option<Vec<i32>>,
    ) -> Result<CommId, Error> {
        let mut st = self.lock();
        if st.ctx_comm.contains_key(&ctx) {
            return Err(Error::arg(
                ErrorClass::Comm,
                format!("context id {ctx} already in use"),
            ));
        }
        let rank = group.iter().position(|&w| w == st.me).ok_or_else(|| {
            Error::arg(
                ErrorClass::Group,
                "calling rank is not in the group".to_string(),
            )
        })? as i32;
        let remote = remote.unwrap_or_else(|| group.clone());
        if let Some(&bad) = group
            .iter()
            .chain(remote.iter())
            .find(|&&w| w < 0 || w >= self.size)
        {
            return Err(Error::arg(
                ErrorClass::Rank,
                format!("world rank {bad} in group"),
            ));
        }
        let id = st.comms.len() as u32;
        st.comms.push(Some(Comm {
            ctx,
            group,
            remote,
            rank,
        }));
        st.ctx_comm.insert(ctx, id);
        Ok(CommId(id))
    }

    /// Removes a communicator created by [`Engine::comm_create`].
    pub fn comm_free(&self, comm: CommId) -> Result<(), Error> {
        let mut st = self.lock();
        if comm.0 < 2 {
            return Err(Error::arg(
                ErrorClass::Comm,
                "cannot free a predefined communicator",
            ));
        }
        let c = st.comm(comm)?.ctx;
        st.comms[comm.0 as usize] = None;
        st.ctx_comm.remove(&c);
        Ok(())
    }

    /// Starts a send of `len` bytes at `buf` to rank `dest` of `comm`.
    ///
    /// # Safety
    /// `buf` must be valid for reads of `len` bytes and must not be modified until the
    /// request completes (not required for [`SendMode::Buffered`], whose data is copied).
    pub unsafe fn isend(
        &self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<ReqId, Error> {
        let mut st = self.lock();
        // SAFETY: forwarded caller guarantee.
        match unsafe { st.start_send(buf, len, dest, tag, comm, mode) }? {
            Started::Done(s) => Ok(st.new_done(s)),
            Started::Req(r) => Ok(r),
        }
    }

    /// [`Engine::isend`] for callers that keep their own request objects: a send that
    /// completes at once (an eager message written straight into the link, a send to
    /// [`PROC_NULL`], a buffered send, a small send to ourselves) returns [`crate::Started::Complete`] and creates no engine
    /// request (nothing to wait for or free); otherwise [`crate::Started::Pending`] with the
    /// request, as `isend` would return it.
    ///
    /// # Safety
    /// As for [`Engine::isend`].
    pub unsafe fn isend_started(
        &self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<crate::Started, Error> {
        let mut st = self.lock();
        // SAFETY: forwarded caller guarantee.
        Ok(
            match unsafe { st.start_send(buf, len, dest, tag, comm, mode) }? {
                Started::Done(s) => crate::Started::Complete(s),
                // Also complete at once: e.g. a small send to ourselves.
                Started::Req(r) => match st.take_done(r) {
                    Some(s) => crate::Started::Complete(s),
                    None => crate::Started::Pending(r),
                },
            },
        )
    }

    /// [`Engine::irecv`] for callers that keep their own request objects: a receive that
    /// completes at once (a matching eager message was already waiting, [`PROC_NULL`])
    /// returns [`crate::Started::Complete`] with its status and leaves no engine request behind;
    /// otherwise [`crate::Started::Pending`].
    ///
    /// # Safety
    /// As for [`Engine::irecv`].
    pub unsafe fn irecv_started(
        &self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<crate::Started, Error> {
        let mut st = self.lock();
        // SAFETY: forwarded caller guarantee.
        Ok(
            match unsafe { st.start_recv_as(buf, len, src, tag, comm, true) }? {
                Started::Done(s) => crate::Started::Complete(s),
                Started::Req(r) => crate::Started::Pending(r),
            },
        )
    }

    /// Blocking send (`MPI_Send` and its modes): [`Engine::isend`] followed by
    /// [`Engine::wait`] under one lock acquisition. A message that goes eagerly into the
    /// link completes without a request. Returns the send's status (its `error` is set if
    /// the peer failed).
    ///
    /// # Safety
    /// `buf` must be valid for reads of `len` bytes for the duration of the call.
    pub unsafe fn send(
        &self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<Status, Error> {
        let mut st = self.lock();
        // SAFETY: forwarded caller guarantee (the buffer outlives this blocking call).
        match unsafe { st.start_send(buf, len, dest, tag, comm, mode) }? {
            Started::Done(s) => Ok(s),
            Started::Req(r) => Ok(self.wait_locked(st, |st| st.take_done(r))),
        }
    }

    /// Blocking receive (`MPI_Recv`): [`Engine::irecv`] followed by [`Engine::wait`] under
    /// one lock acquisition.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes for the duration of the call.
    pub unsafe fn recv(
        &self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<Status, Error> {
        let mut st = self.lock();
        // Direct path: while nothing else is going on, take a matching eager record straight
        // from the source's link into `buf` (no request, no matcher entry). Below
        // MPI_THREAD_MULTIPLE only (it keeps the lock for HOLD_SPINS polls at a time).
        if self.thread_level != ThreadLevel::Multiple {
            let null = buf.is_null() && len > 0;
            let mut target = st.direct_recv_target(null, src, tag, comm);
            let (mut spins, mut idle) = (0u32, 0u32);
            while let Some(d) = &target {
                // SAFETY: forwarded caller guarantee.
                match unsafe { st.recv_direct(d, buf, len, tag) } {
                    Direct::Done(s) => return Ok(s),
                    Direct::Busy => break,
                    Direct::Idle => {}
                }
                // The same pacing as `wait_locked`: peer liveness and a lock release every
                // HOLD_SPINS polls, yielding when idle for long or when configured.
                spins = spins.wrapping_add(1);
                idle = idle.saturating_add(1);
                let yield_now = self.yield_when_idle || idle >= IDLE_POLLS_BEFORE_YIELD;
                if spins % HOLD_SPINS == 0 {
                    st.check_peers();
                    drop(st);
                    if yield_now {
                        sys::yield_now();
                    }
                    st = self.lock();
                    // Another thread (e.g. a library progress thread) may have changed the
                    // queues meanwhile; a dead peer ends the direct path too.
                    target = st.direct_recv_target(null, src, tag, comm);
                } else if yield_now {
                    sys::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        // SAFETY: forwarded caller guarantee.
        let r = unsafe { st.start_recv(buf, len, src, tag, comm) }?;
        Ok(self.wait_locked(st, |st| st.take_done(r)))
    }

    /// Starts a receive of up to `len` bytes into `buf` from rank `src` (or [`ANY_SOURCE`],
    /// [`PROC_NULL`]) with `tag` (or [`ANY_TAG`]) on `comm`.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes and must not be accessed until the
    /// request completes.
    pub unsafe fn irecv(
        &self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<ReqId, Error> {
        let mut st = self.lock();
        // SAFETY: forwarded caller guarantee.
        unsafe { st.start_recv(buf, len, src, tag, comm) }
    }

    /// Tests a request: on completion returns its status and frees it. An unknown request
    /// yields a status with [`ErrorClass::Request`].
    pub fn test(&self, r: ReqId) -> Option<Status> {
        let mut st = self.lock();
        self.poll(&mut st);
        st.take_done(r)
    }

    /// Progress for non-blocking calls; every 1024th call also checks peer liveness, so a
    /// loop of `test` calls on a request from a dead peer ends.
    fn poll(&self, st: &mut State) {
        st.progress();
        let n = self
            .polls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n % 1024 == 1023 {
            st.check_peers();
        }
    }

    /// Like [`Engine::test`] but does not free the request (`MPI_Request_get_status`).
    pub fn request_status(&self, r: ReqId) -> Option<Status> {
        let mut st = self.lock();
        self.poll(&mut st);
        match st.reqs.get(r.0) {
            Some(q) if matches!(q.state, ReqState::Done) => Some(q.status),
            Some(_) => None,
            None => Some(bad_request()),
        }
    }

    /// Waits for a request, then frees it and returns its status.
    pub fn wait(&self, r: ReqId) -> Status {
        self.wait_until(|st| st.take_done(r))
    }

    /// `MPI_Request_free`: the request completes in the background and is then released.
    pub fn request_free(&self, r: ReqId) {
        let mut st = self.lock();
        if let Some(q) = st.reqs.get_mut(r.0) {
            if matches!(q.state, ReqState::Done) {
                st.reqs.remove(r.0);
            } else {
                q.detached = true;
            }
        }
    }

    /// Polls every transport once.
    pub fn progress(&self) {
        let mut st = self.lock();
        self.poll(&mut st);
    }

    /// `MPI_Iprobe`: the status of a message a receive `(src, tag)` on `comm` would match.
    pub fn iprobe(&self, src: i32, tag: i32, comm: CommId) -> Result<Option<Status>, Error> {
        let mut st = self.lock();
        st.check_probe_args(src, tag, comm)?;
        if src == PROC_NULL {
            return Ok(Some(Status::PROC_NULL));
        }
        self.poll(&mut st);
        let ctx = st.comm(comm)?.ctx;
        Ok(st
            .matcher
            .probe(ctx, src, tag)
            .map(|(env, m)| msg_status(env, m.len())))
    }

    /// `MPI_Probe`: blocks until [`Engine::iprobe`] finds a message.
    pub fn probe(&self, src: i32, tag: i32, comm: CommId) -> Result<Status, Error> {
        self.lock().check_probe_args(src, tag, comm)?;
        if src == PROC_NULL {
            return Ok(Status::PROC_NULL);
        }
        self.wait_until(|st| match st.comm(comm) {
            Err(e) => Some(Err(e)),
            Ok(c) => {
                let ctx = c.ctx;
                st.matcher
                    .probe(ctx, src, tag)
                    .map(|(env, m)| Ok(msg_status(env, m.len())))
                    .or_else(|| st.probe_failure(comm, src).map(Err))
            }
        })
    }

    /// `MPI_Improbe`: removes a matching message from the queue and returns a handle for
    /// [`Engine::imrecv`].
    pub fn improbe(
        &self,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<Option<(MessageId, Status)>, Error> {
        let mut st = self.lock();
        st.check_probe_args(src, tag, comm)?;
        if src == PROC_NULL {
            return Ok(Some((MessageId::NO_PROC, Status::PROC_NULL)));
        }
        self.poll(&mut st);
        Ok(st.take_message(comm, src, tag))
    }

    /// `MPI_Mprobe`: blocking [`Engine::improbe`].
    pub fn mprobe(&self, src: i32, tag: i32, comm: CommId) -> Result<(MessageId, Status), Error> {
        self.lock().check_probe_args(src, tag, comm)?;
        if src == PROC_NULL {
            return Ok((MessageId::NO_PROC, Status::PROC_NULL));
        }
        self.wait_until(|st| {
            st.take_message(comm, src, tag)
                .map(Ok)
                .or_else(|| st.probe_failure(comm, src).map(Err))
        })
    }

    /// `MPI_Imrecv`: receives a message returned by [`Engine::improbe`]/[`Engine::mprobe`].
    ///
    /// # Safety
    /// As for [`Engine::irecv`].
    pub unsafe fn imrecv(&self, buf: *mut u8, len: usize, m: MessageId) -> Result<ReqId, Error> {
        let mut st = self.lock();
        if m == MessageId::NO_PROC {
            return Ok(st.new_done(Status::PROC_NULL));
        }
        if buf.is_null() && len > 0 {
            return Err(Error::arg(ErrorClass::Buffer, "null receive buffer"));
        }
        let (env, msg) = st
            .messages
            .remove(&m.0)
            .ok_or_else(|| Error::arg(ErrorClass::Request, format!("unknown message {}", m.0)))?;
        let id = st.new_req(ReqState::Posted {
            buf,
            cap: len,
            ctx: env.ctx,
            src: env.src,
            peer: None,
        });
        st.deliver(id, env, msg);
        Ok(ReqId(id))
    }

    /// Cancels a receive that has not matched yet (its status then says `cancelled`). Sends
    /// and already-matched receives are not cancelled.
    pub fn cancel(&self, r: ReqId) {
        let mut st = self.lock();
        let Some(q) = st.reqs.get(r.0) else { return };
        if let ReqState::Posted { ctx, src, .. } = q.state {
            if st.matcher.cancel(ctx, src, &r.0) {
                let q = st.reqs.get_mut(r.0).expect("request exists");
                q.status.cancelled = true;
                st.finish(r.0);
            }
        }
    }

    /// Aborts the job: tells the launcher (best effort) and exits with `code`.
    pub fn abort(&self, code: i32) -> ! {
        if let Ok(mut b) = self.boot.try_lock() {
            if let Some(b) = b.as_mut() {
                b.abort(code, "MPI_Abort called");
            }
        }
        std::process::exit(code)
    }

    /// Finalizes: flushes pending outgoing traffic, synchronises with all ranks and tells the
    /// launcher. Communication calls fail afterwards.
    pub fn finalize(&self) -> Result<(), Error> {
        // Deliver what is still queued, including buffered sends (detached requests) that
        // wait for the receiver's clear-to-send; the bootstrap fence below does not progress.
        self.wait_until(|st| {
            // Also what a link still buffers (tcp: bytes the socket did not take yet).
            let queued = st.peers.iter().any(|p| {
                !p.dead && (!p.outq.is_empty() || p.link.as_ref().is_some_and(|l| l.sending()))
            });
            let detached = st
                .reqs
                .values()
                .any(|q| q.detached && !matches!(q.state, ReqState::Done));
            (!queued && !detached).then_some(())
        });
        self.lock().finalized = true;
        let mut b = self.boot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = b.as_mut() {
            b.fence()?;
            b.finalize()?;
        }
        Ok(())
    }

    /// Polls (progress + `f`) until `f` returns a value; yields between polls if configured,
    /// and checks peers for liveness now and then.
    ///
    /// `f` is tried once before the first poll (a request that is already complete, such as
    /// an eager send, returns without touching the transports). Below
    /// [`ThreadLevel::Multiple`] no other thread may call in concurrently, so the lock is held
    /// across up to [`HOLD_SPINS`] polls instead of being taken for each; with
    /// `MPI_THREAD_MULTIPLE` it is released after every poll so other threads get in.
    fn wait_until<T>(&self, f: impl FnMut(&mut State) -> Option<T>) -> T {
        self.wait_locked(self.lock(), f)
    }

    /// [`Engine::wait_until`] for a caller that already holds the lock (`st`).
    #[inline]
    fn wait_locked<'a, T>(
        &'a self,
        mut st: StateGuard<'a>,
        mut f: impl FnMut(&mut State) -> Option<T>,
    ) -> T {
        // A mask (HOLD_SPINS is a power of two): no division in the polling loop.
        let hold_mask = if self.thread_level == ThreadLevel::Multiple {
            0
        } else {
            HOLD_SPINS - 1
        };
        let mut spins: u32 = 0;
        // Polls in a row that found nothing to do: past IDLE_POLLS_BEFORE_YIELD the wait
        // yields the CPU on every pass, even on a node that is not oversubscribed.
        let mut idle: u32 = 0;
        if let Some(v) = f(&mut st) {
            return v;
        }
        // Whether the state may have changed since `f` was last tried: after a progress
        // pass that did something, or after the lock was released (another thread may
        // have completed what we wait for).
        loop {
            let busy = st.progress();
            if busy {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
            }
            if busy || hold_mask == 0 || spins & hold_mask == 0 {
                if let Some(v) = f(&mut st) {
                    return v;
                }
            }
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                st.check_peers();
                if let Some(v) = f(&mut st) {
                    return v;
                }
            }
            let yield_now = self.yield_when_idle || idle >= IDLE_POLLS_BEFORE_YIELD;
            if spins & hold_mask == 0 {
                drop(st);
                if yield_now {
                    sys::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                st = self.lock();
            } else if yield_now {
                sys::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// The lock around the engine state: a test-and-test-and-set spinlock whose release is a
/// plain store (`std::sync::Mutex` releases with an atomic swap and tracks poisoning; both
/// show up on every call of the latency path). Waiters spin briefly, then yield the CPU,
/// so a preempted holder (oversubscription, `MPI_THREAD_MULTIPLE`) gets to run. Critical
/// sections are short: every blocking call releases the lock between polls (at
/// `MPI_THREAD_MULTIPLE` after each one). A panic while holding the lock releases it
/// (the guard's drop), as the old poison-ignoring `Mutex` use did.
struct StateLock {
    locked: std::sync::atomic::AtomicBool,
    state: std::cell::UnsafeCell<State>,
}

// SAFETY: the state is only reached through a `StateGuard`, and at most one guard exists at
// a time (the `locked` flag, acquired with Acquire and released with Release ordering), so
// the lock hands out exclusive access like a mutex; `State` itself is `Send`.
unsafe impl Sync for StateLock {}

impl StateLock {
    fn new(st: State) -> Self {
        StateLock {
            locked: std::sync::atomic::AtomicBool::new(false),
            state: std::cell::UnsafeCell::new(st),
        }
    }

    #[inline]
    fn lock(&self) -> StateGuard<'_> {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        if self
            .locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        StateGuard { lock: self }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        let mut spins = 0u32;
        loop {
            // Wait with plain loads (no cache-line ping-pong), then try again.
            while self.locked.load(Relaxed) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    sys::yield_now();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Acquire, Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// Exclusive access to the engine state while it lives (see [`StateLock`]).
struct StateGuard<'a> {
    lock: &'a StateLock,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    #[inline]
    fn deref(&self) -> &State {
        // SAFETY: this guard holds the lock: no other reference to the state exists.
        unsafe { &*self.lock.state.get() }
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut State {
        // SAFETY: as in `deref`, and `&mut self` makes this the only use of the guard.
        unsafe { &mut *self.lock.state.get() }
    }
}

impl Drop for StateGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.lock
            .locked
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Where a blocking receive may take its message directly from (see [`State::recv_direct`]).
struct DirectRecv {
    /// World rank of the source.
    peer: usize,
    ctx: u32,
    /// Source rank in the communicator.
    src: i32,
}

/// Outcome of one direct-receive poll.
enum Direct {
    /// The message was delivered.
    Done(Status),
    /// Nothing arrived and nothing else needs attention.
    Idle,
    /// Something else needs the general path (another record, queued output, another link).
    Busy,
}

/// Polls in a row without any progress after which a waiting rank yields the CPU on every
/// further pass (`sched_yield`), even when the node is not oversubscribed and
/// `mpi_yield_when_idle` is off. About a millisecond of spinning: a message that arrives
/// sooner is seen at full speed, while a long wait (a peer that is computing, or descheduled
/// on a shared machine) stops burning the time slice its peer or other work could use.
const IDLE_POLLS_BEFORE_YIELD: u32 = 1 << 14;

/// Polls a blocking call makes under one lock acquisition below `MPI_THREAD_MULTIPLE`.
/// A power of two.
const HOLD_SPINS: u32 = 1024;
const _: () = assert!(HOLD_SPINS.is_power_of_two());

fn bad_request() -> Status {
    Status {
        source: PROC_NULL,
        tag: ANY_TAG,
        error: Some(ErrorClass::Request),
        count_bytes: 0,
        cancelled: false,
    }
}

fn msg_status(env: Envelope, len: usize) -> Status {
    Status {
        source: env.src,
        tag: env.tag,
        error: None,
        count_bytes: len,
        cancelled: false,
    }
}

fn empty_status() -> Status {
    Status {
        source: ANY_SOURCE,
        tag: ANY_TAG,
        error: None,
        count_bytes: 0,
        cancelled: false,
    }
}

/// # Safety
/// `dst` valid for `n` writes and `src` for `n` reads when `n > 0`; no overlap.
unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    if n > 0 {
        // SAFETY: guaranteed by the caller.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    }
}

impl State {
    /// The state of rank `me` of `size`, with no links yet, under the `sm` settings `sm`
    /// (eager limit, fragments, single copy).
    fn new(me: i32, size: i32, sm: &Settings) -> State {
        let world = Comm {
            ctx: 0,
            group: (0..size).collect(),
            remote: (0..size).collect(),
            rank: me,
        };
        let selfc = Comm {
            ctx: 1,
            group: vec![me],
            remote: vec![me],
            rank: 0,
        };
        State {
            me,
            comms: vec![Some(world), Some(selfc)],
            ctx_comm: HashMap::from_iter([(0, 0), (1, 1)]),
            matcher: Matcher::new(),
            reqs: Slab::default(),
            next_req: 1,
            messages: HashMap::default(),
            eager_pool: Vec::new(),
            peers: (0..size.max(0)).map(|_| Peer::default()).collect(),
            linked: Vec::new(),
            // Every sm link has a ring of `sm.ring` bytes, so records up to its largest fit
            // any link.
            eager_limit: sm
                .eager_limit
                .min(crate::btl::sm::ring::max_record(sm.ring) - HDR),
            frag: sm.frag,
            cma: sm.single_copy != SingleCopy::None,
            cma_push: sm.single_copy != SingleCopy::None,
            single_copy: sm.single_copy,
            coop_min: sm.coop_min,
            coop_chunk: sm.coop_chunk,
            clock: std::time::Instant::now(),
            finalized: false,
        }
    }

    /// Takes the peers' links (and what they can do) from the wire-up.
    fn attach(&mut self, peers: Vec<PeerInfo>) {
        for (p, info) in peers.into_iter().enumerate() {
            let peer = &mut self.peers[p];
            peer.pid = info.pid;
            peer.local = info.local;
            if info.local {
                peer.pidfd = sys::pidfd_open(info.pid).ok();
            }
            if let Some(link) = info.link {
                let caps = link.caps();
                peer.single_copy = caps.single_copy;
                peer.buffered = caps.buffered;
                if let Some((rx, tx)) = caps.coop {
                    peer.coop_rx = Some(rx);
                    peer.coop_tx = Some(tx);
                }
                peer.link = Some(link);
            }
        }
        self.linked = (0..self.peers.len())
            .filter(|&p| self.peers[p].link.is_some())
            .collect();
    }

    /// Checks the arguments of a send and starts it.
    ///
    /// # Safety
    /// As for [`Engine::isend`].
    #[inline]
    unsafe fn start_send(
        &mut self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<Started, Error> {
        self.check_live()?;
        let (ctx, my, n, dest_world) = {
            let c = self.comm(comm)?;
            let w = usize::try_from(dest)
                .ok()
                .and_then(|d| c.remote.get(d).copied());
            (c.ctx, c.rank, c.remote.len(), w)
        };
        if dest == PROC_NULL {
            return Ok(Started::Done(Status::PROC_NULL));
        }
        let Some(dest_world) = dest_world else {
            return Err(Error::arg(
                ErrorClass::Rank,
                format!("destination rank {dest} not in 0..{n}"),
            ));
        };
        if !(0..=TAG_UB).contains(&tag) {
            return Err(Error::arg(
                ErrorClass::Tag,
                format!("invalid send tag {tag}"),
            ));
        }
        if buf.is_null() && len > 0 {
            return Err(Error::arg(ErrorClass::Buffer, "null send buffer"));
        }
        let env = Envelope { ctx, src: my, tag };
        // SAFETY: forwarded caller guarantee.
        unsafe { self.post_send(env, dest_world, buf, len, mode) }
    }

    /// Checks the arguments of a receive and posts it.
    ///
    /// # Safety
    /// As for [`Engine::irecv`].
    #[inline]
    unsafe fn start_recv(
        &mut self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<ReqId, Error> {
        // SAFETY: forwarded caller guarantee.
        match unsafe { self.start_recv_as(buf, len, src, tag, comm, false) }? {
            Started::Req(r) => Ok(r),
            Started::Done(s) => Ok(self.new_done(s)),
        }
    }

    /// [`State::start_recv`]; with `started`, a receive whose message arrived already as
    /// unexpected eager data takes it at once and returns [`Started::Done`] without
    /// creating a request (the caller keeps its status), and a receive that completed
    /// otherwise while starting (a message to ourselves, a failed peer) returns
    /// [`Started::Done`] with its request freed.
    ///
    /// # Safety
    /// As for [`Engine::irecv`].
    #[inline(always)]
    unsafe fn start_recv_as(
        &mut self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
        started: bool,
    ) -> Result<Started, Error> {
        self.check_live()?;
        let (ctx, n, src_world) = {
            let c = self.comm(comm)?;
            let w = usize::try_from(src)
                .ok()
                .and_then(|d| c.remote.get(d).copied());
            (c.ctx, c.remote.len(), w)
        };
        if src == PROC_NULL {
            if started {
                return Ok(Started::Done(Status::PROC_NULL));
            }
            return Ok(Started::Req(self.new_done(Status::PROC_NULL)));
        }
        if src != ANY_SOURCE && src_world.is_none() {
            return Err(Error::arg(
                ErrorClass::Rank,
                format!("source rank {src} not in 0..{n}"),
            ));
        }
        if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
            return Err(Error::arg(
                ErrorClass::Tag,
                format!("invalid receive tag {tag}"),
            ));
        }
        if buf.is_null() && len > 0 {
            return Err(Error::arg(ErrorClass::Buffer, "null receive buffer"));
        }
        let peer = src_world;
        if let Some(p) = peer {
            if p != self.me && self.peers[p as usize].link.is_none() && !self.peers[p as usize].dead
            {
                return Err(Error::arg(
                    ErrorClass::Unsupported,
                    format!("no btl reaches world rank {p} (another node, or sm excluded)"),
                ));
            }
        }
        // With `started`, a message that arrived already is taken before any request exists;
        // an eager one completes the receive right here.
        let mut early = None;
        if started && self.matcher.has_unexpected() {
            match self.matcher.take_unexpected(ctx, src, tag) {
                Some((env, Msg::Eager { data, ack })) => {
                    let n = data.len().min(len);
                    // SAFETY: buf has len >= n writable bytes (caller); data has n readable
                    // bytes.
                    unsafe { copy(data.as_ptr(), buf, n) };
                    let status = Status {
                        error: (data.len() > len).then_some(ErrorClass::Truncate),
                        ..msg_status(env, n)
                    };
                    self.eager_recycle(data);
                    if let Ack::Remote { peer, sreq } = ack {
                        self.ctrl(peer, K_FIN, 0, sreq, 0);
                    }
                    return Ok(Started::Done(status));
                }
                other => early = other,
            }
        }
        let id = self.new_req(ReqState::Posted {
            buf,
            cap: len,
            ctx,
            src,
            peer,
        });
        let found = match early {
            // Arrived already (also from a peer that died since).
            Some(m) => Some(m),
            None => self.matcher.post(ctx, src, tag, id),
        };
        let settled = if let Some((env, msg)) = found {
            // Messages that arrived before a peer died are still delivered.
            self.deliver(id, env, msg);
            true
        } else if peer.is_some_and(|p| self.peers[p as usize].dead) {
            self.matcher.cancel(ctx, src, &id);
            self.fail(id, ErrorClass::ProcFailed);
            true
        } else {
            false
        };
        // (A receive that was queued cannot have completed yet.)
        if started && settled {
            if let Some(s) = self.take_done(ReqId(id)) {
                return Ok(Started::Done(s));
            }
        }
        Ok(Started::Req(ReqId(id)))
    }

    /// Whether a blocking receive `(src, tag)` on `comm` may use the direct path: valid
    /// arguments (anything invalid goes to the
    /// general path, which reports it), a specific source on another rank with a live link,
    /// and nothing queued in the matcher that
    /// involves that source on the communicator (so the receive would be the earliest posted
    /// one for whatever arrives from it, and nothing from it waits unexpected).
    #[inline]
    fn direct_recv_target(
        &self,
        null_buf: bool,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Option<DirectRecv> {
        if self.finalized || null_buf || src < 0 || (tag != ANY_TAG && !(0..=TAG_UB).contains(&tag))
        {
            return None;
        }
        let c = self.comms.get(comm.0 as usize)?.as_ref()?;
        let peer = *c.remote.get(src as usize)? as usize;
        let p = &self.peers[peer];
        if peer as i32 == self.me || p.dead || p.link.is_none() {
            return None;
        }
        self.matcher.quiet_for(c.ctx, src).then_some(DirectRecv {
            peer,
            ctx: c.ctx,
            src,
        })
    }

    /// One poll of the direct receive path: if the only thing to do is the next record from
    /// `d.peer` and it is an eager message for this receive, copy it into `buf` and consume
    /// it (acknowledging a synchronous send). Changes no state otherwise.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes (or `len == 0`).
    #[inline]
    unsafe fn recv_direct(&mut self, d: &DirectRecv, buf: *mut u8, len: usize, tag: i32) -> Direct {
        for &q in &self.linked {
            let peer = &self.peers[q];
            if !peer.outq.is_empty()
                || (q != d.peer && peer.link.as_ref().is_some_and(|l| l.ready()))
            {
                return Direct::Busy;
            }
        }
        let Some(link) = self.peers[d.peer].link.as_mut() else {
            return Direct::Busy;
        };
        if !link.ready() {
            return Direct::Idle;
        }
        let (hdr, payload, plen) = match link.poll() {
            Ok(Some(r)) => r,
            Ok(None) => return Direct::Idle,
            Err(_) => return Direct::Busy,
        };
        if hdr.kind != K_EAGER
            || hdr.ctx != d.ctx
            || hdr.src != d.src
            || (tag != ANY_TAG && hdr.tag != tag)
        {
            // Left in the link (not released): the general path handles it next.
            return Direct::Busy;
        }
        let n = plen.min(len);
        // SAFETY: buf has len >= n writable bytes (caller); payload has plen >= n readable
        // bytes until the release below.
        unsafe { copy(payload, buf, n) };
        link.release();
        if hdr.flags & F_SYNC != 0 {
            self.ctrl(d.peer as i32, K_FIN, 0, hdr.b, 0);
        }
        Direct::Done(Status {
            source: d.src,
            tag: hdr.tag,
            error: (plen > len).then_some(ErrorClass::Truncate),
            count_bytes: n,
            cancelled: false,
        })
    }

    fn check_live(&self) -> Result<(), Error> {
        if self.finalized {
            return Err(Error::State("engine finalized".into()));
        }
        Ok(())
    }

    fn comm(&self, c: CommId) -> Result<&Comm, Error> {
        self.comms
            .get(c.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::arg(ErrorClass::Comm, format!("invalid communicator {}", c.0)))
    }

    fn check_probe_args(&self, src: i32, tag: i32, comm: CommId) -> Result<(), Error> {
        let n = self.comm(comm)?.remote.len() as i32;
        if src != ANY_SOURCE && src != PROC_NULL && !(0..n).contains(&src) {
            return Err(Error::arg(
                ErrorClass::Rank,
                format!("source rank {src} not in 0..{n}"),
            ));
        }
        if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
            return Err(Error::arg(ErrorClass::Tag, format!("invalid tag {tag}")));
        }
        Ok(())
    }

    /// Error for a blocking probe whose source died.
    fn probe_failure(&self, comm: CommId, src: i32) -> Option<Error> {
        let c = self.comm(comm).ok()?;
        let dead = |w: i32| self.peers[w as usize].dead;
        let failed = if src == ANY_SOURCE {
            c.remote.iter().find(|&&w| dead(w)).copied()
        } else {
            Some(c.remote[src as usize]).filter(|&w| dead(w))
        };
        failed.map(|w| Error::PeerFailed {
            peer: w,
            pid: self.peers[w as usize].pid,
        })
    }

    fn take_message(&mut self, comm: CommId, src: i32, tag: i32) -> Option<(MessageId, Status)> {
        let ctx = self.comm(comm).ok()?.ctx;
        let (env, msg) = self.matcher.take_unexpected(ctx, src, tag)?;
        let status = msg_status(env, msg.len());
        let id = self.next_req;
        self.next_req += 1;
        self.messages.insert(id, (env, msg));
        Some((MessageId(id), status))
    }

    fn new_req(&mut self, state: ReqState) -> u64 {
        self.reqs.insert(Req {
            state,
            status: empty_status(),
            detached: false,
            _owned: None,
        })
    }

    fn new_done(&mut self, status: Status) -> ReqId {
        let id = self.new_req(ReqState::Done);
        self.reqs.get_mut(id).expect("just inserted").status = status;
        ReqId(id)
    }

    /// Marks a request complete (and drops it if detached).
    fn finish(&mut self, id: u64) {
        if let Some(q) = self.reqs.get_mut(id) {
            q.state = ReqState::Done;
            if q.detached {
                self.reqs.remove(id);
            }
        }
    }

    fn fail(&mut self, id: u64, class: ErrorClass) {
        if let Some(q) = self.reqs.get_mut(id) {
            q.status.error = Some(class);
        }
        self.finish(id);
    }

    #[inline]
    fn take_done(&mut self, r: ReqId) -> Option<Status> {
        self.reqs.take_if_done(r.0)
    }

    /// # Safety
    /// `buf` valid for `len` reads until completion (copied at once for Buffered).
    unsafe fn post_send(
        &mut self,
        env: Envelope,
        dest: i32,
        buf: *const u8,
        len: usize,
        mode: SendMode,
    ) -> Result<Started, Error> {
        // Fast path: a standard or ready send that fits eagerly to a live peer with nothing
        // queued goes straight into the link and completes; its request is born done (the
        // receiver ignores the sender request id of a non-synchronous eager record).
        if matches!(mode, SendMode::Standard | SendMode::Ready)
            && dest != self.me
            && len <= self.eager_limit
        {
            let peer = &mut self.peers[dest as usize];
            if let (false, true, Some(link)) = (peer.dead, peer.outq.is_empty(), peer.link.as_mut())
            {
                let hdr = Hdr {
                    kind: K_EAGER,
                    ctx: env.ctx,
                    src: env.src,
                    tag: env.tag,
                    ..Hdr::default()
                };
                // SAFETY: the caller guarantees `len` readable bytes at `buf`; the data is
                // copied into the ring before try_send returns.
                if len <= link.max_payload() && unsafe { link.try_send(&hdr, buf, len) } {
                    oxmpi_base::verbose!(
                        BTL,
                        60,
                        "{}: send {len} B to rank {dest}: eager",
                        link.name()
                    );
                    if !peer.buffered || !link.sending() {
                        return Ok(Started::Done(empty_status()));
                    }
                    // Part of it still sits in the link's buffer: complete once it is out.
                    let id = self.new_req(ReqState::Send {
                        peer: dest,
                        ptr: buf,
                        len,
                    });
                    self.peers[dest as usize].unflushed.push(id);
                    return Ok(Started::Req(ReqId(id)));
                }
            }
        }
        let (user_id, id, ptr) = if mode == SendMode::Buffered {
            // SAFETY: caller guarantees `len` readable bytes at `buf` (or len == 0).
            let owned = if len > 0 {
                // SAFETY: as said above.
                unsafe { std::slice::from_raw_parts(buf, len) }.to_vec()
            } else {
                Vec::new()
            };
            let ptr = owned.as_ptr();
            let id = self.new_req(ReqState::Done);
            let q = self.reqs.get_mut(id).expect("just inserted");
            q.detached = true;
            q._owned = Some(owned);
            (Started::Done(empty_status()), id, ptr)
        } else {
            let id = self.new_req(ReqState::Done);
            (Started::Req(ReqId(id)), id, buf)
        };
        let sync = mode == SendMode::Sync;
        self.reqs.get_mut(id).expect("request exists").state = ReqState::Send {
            peer: dest,
            ptr,
            len,
        };
        if dest == self.me {
            self.send_self(env, id, ptr, len, sync);
            return Ok(user_id);
        }
        let peer = &self.peers[dest as usize];
        if peer.dead {
            self.fail(id, ErrorClass::ProcFailed);
            return Ok(user_id);
        }
        let single_copy = self.cma && peer.single_copy;
        let Some(max_payload) = peer.link.as_ref().map(|l| l.max_payload()) else {
            self.reqs.remove(id);
            return Err(Error::arg(
                ErrorClass::Unsupported,
                format!(
                    "no btl reaches world rank {dest} (another node without tcp, or sm \
                     excluded by the btl selection)"
                ),
            ));
        };
        let mut hdr = Hdr {
            ctx: env.ctx,
            src: env.src,
            tag: env.tag,
            b: id,
            ..Hdr::default()
        };
        let item = if len <= self.eager_limit.min(max_payload) {
            hdr.kind = K_EAGER;
            if sync {
                hdr.flags = F_SYNC;
            }
            Out::Eager {
                hdr,
                ptr,
                len,
                complete: (!sync).then_some(id),
            }
        } else {
            hdr.kind = K_RTS;
            hdr.a = len as u64;
            hdr.c = ptr as u64;
            if single_copy {
                hdr.flags = F_CMA;
            }
            Out::Ctrl(hdr)
        };
        // The path each message takes (trace level: one atomic load when disabled).
        oxmpi_base::verbose!(
            BTL,
            60,
            "{}: send {len} B to rank {dest}: {}",
            peer.link.as_ref().map_or("?", |l| l.name()),
            match &item {
                Out::Eager { .. } => "eager",
                _ if single_copy => "rendezvous, single copy offered",
                _ => "rendezvous, pipelined copy",
            }
        );
        let peer = &mut self.peers[dest as usize];
        // Fast path: nothing queued before it, so it may go straight into the link.
        if peer.outq.is_empty() {
            if let (Some(link), Out::Eager { hdr, ptr, len, .. }) = (peer.link.as_mut(), &item) {
                // SAFETY: the send buffer holds `len` readable bytes until completion.
                if unsafe { link.try_send(hdr, *ptr, *len) } {
                    if !sync {
                        self.complete_send(dest as usize, id);
                    }
                    return Ok(user_id);
                }
            }
        }
        peer.outq.push_back(item);
        self.flush(dest as usize);
        Ok(user_id)
    }

    fn send_self(&mut self, env: Envelope, sreq: u64, ptr: *const u8, len: usize, sync: bool) {
        if let Some(rid) = self.matcher.match_arrival(env) {
            self.deliver(rid, env, Msg::Local { ptr, len, sreq });
            return;
        }
        if len <= self.eager_limit && !sync {
            // SAFETY: the send buffer holds `len` readable bytes.
            let data = unsafe { self.eager_copy(ptr, len) };
            self.matcher.push_unexpected(
                env,
                Msg::Eager {
                    data,
                    ack: Ack::None,
                },
            );
            self.finish(sreq);
        } else {
            self.matcher
                .push_unexpected(env, Msg::Local { ptr, len, sreq });
        }
    }

    /// Copies `len` bytes at `ptr` into a buffer for an unexpected eager message (a pooled
    /// one when there is one).
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `len` bytes.
    #[inline]
    unsafe fn eager_copy(&mut self, ptr: *const u8, len: usize) -> Vec<u8> {
        if len == 0 {
            return Vec::new();
        }
        let mut v = self.eager_pool.pop().unwrap_or_default();
        // SAFETY: caller guarantee.
        v.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) });
        v
    }

    /// Returns the buffer of a consumed unexpected eager message to the pool (at most
    /// [`EAGER_POOL`] buffers of at most the eager limit are kept).
    #[inline]
    fn eager_recycle(&mut self, mut v: Vec<u8>) {
        if v.capacity() != 0
            && v.capacity() <= self.eager_limit
            && self.eager_pool.len() < EAGER_POOL
        {
            v.clear();
            self.eager_pool.push(v);
        }
    }

    /// Hands a matched message to receive request `rid`.
    fn deliver(&mut self, rid: u64, env: Envelope, msg: Msg) {
        let Some(q) = self.reqs.get_mut(rid) else {
            return;
        };
        let ReqState::Posted { buf, cap, .. } = q.state else {
            return;
        };
        let total = msg.len();
        let n = total.min(cap);
        q.status = Status {
            source: env.src,
            tag: env.tag,
            error: (total > cap).then_some(ErrorClass::Truncate),
            count_bytes: n,
            cancelled: false,
        };
        match msg {
            Msg::Eager { data, ack } => {
                // SAFETY: buf has cap >= n writable bytes; data has n readable bytes.
                unsafe { copy(data.as_ptr(), buf, n) };
                self.eager_recycle(data);
                self.finish(rid);
                match ack {
                    Ack::None => {}
                    Ack::Remote { peer, sreq } => self.ctrl(peer, K_FIN, 0, sreq, 0),
                }
            }
            Msg::Local { ptr, sreq, .. } => {
                // SAFETY: the (local) sender's buffer is valid until its request completes.
                unsafe { copy(ptr, buf, n) };
                self.finish(rid);
                self.finish(sreq);
            }
            Msg::Rts {
                peer,
                sreq,
                addr,
                cma,
                ..
            } => {
                if self.peers[peer as usize].dead {
                    // The data can no longer come.
                    self.fail(rid, ErrorClass::ProcFailed);
                    return;
                }
                let mut since = 0;
                let p = peer as usize;
                let coop_ok = n >= self.coop_min && self.peers[p].coop_rx.is_some();
                let single_copy = self.single_copy;
                let how = match single_copy {
                    _ if !(cma && self.cma && n > 0) => Mech::Pipe,
                    SingleCopy::Cma if self.pull(rid, peer, sreq, buf, addr, n) => return,
                    SingleCopy::Coop if coop_ok => Mech::Coop,
                    SingleCopy::Auto if coop_ok => {
                        let now = self.now_ns();
                        let m = self.peers[p].chooser[coop::size_class(n)].choose(now);
                        if m == Mech::Coop && self.sending_large_to(peer) {
                            // Both directions busy: each side's CPU reads its own receives
                            // (the sender's help would take its CPU from its own receive),
                            // measured as the single copy.
                            if self.pull(rid, peer, sreq, buf, addr, n) {
                                oxmpi_base::verbose!(
                                    BTL,
                                    60,
                                    "sm: received {n} B from rank {peer}: single copy by the \
                                     receiver alone (both directions busy)"
                                );
                                let end = self.now_ns();
                                self.peers[p].measured(p, Mech::Coop, n, now, end);
                                return;
                            }
                            Mech::Pipe
                        } else {
                            if m == Mech::Pipe {
                                since = now;
                            }
                            m
                        }
                    }
                    _ => Mech::Pipe,
                };
                if how == Mech::Coop {
                    if self.coop_recv(peer, sreq, addr, buf, n, rid) {
                        return;
                    }
                    since = 0;
                }
                if n == 0 {
                    self.finish(rid);
                } else {
                    self.reqs.get_mut(rid).expect("request exists").state = ReqState::Data {
                        buf,
                        want: n,
                        got: 0,
                        peer,
                        since,
                    };
                }
                self.ctrl(peer, K_CTS, n as u64, sreq, rid);
            }
        }
    }

    /// `btl_sm_single_copy_mechanism=cma`: the receiver reads the whole matched message
    /// alone and sends FIN (`true`); `false` if the kernel refused (the caller asks for the
    /// pipelined copy).
    fn pull(&mut self, rid: u64, peer: i32, sreq: u64, buf: *mut u8, addr: u64, n: usize) -> bool {
        match self.cma_read(peer, buf, addr, n) {
            Ok(()) => {
                self.finish(rid);
                self.ctrl(peer, K_FIN, 0, sreq, 0);
                true
            }
            Err(e) => {
                self.cma_failed(peer, &e);
                false
            }
        }
    }

    /// Whether a send to `peer` large enough for the single copy is under way (the peer
    /// is then busy receiving from us too).
    fn sending_large_to(&self, peer: i32) -> bool {
        let min = self.coop_min;
        self.reqs.values().any(
            |q| matches!(q.state, ReqState::Send { peer: d, len, .. } if d == peer && len >= min),
        )
    }

    /// Nanoseconds since the engine started (at least 1).
    fn now_ns(&self) -> u64 {
        (self.clock.elapsed().as_nanos() as u64).max(1)
    }

    /// A CMA read from `peer` failed: no more single copies (we stop offering them too).
    fn cma_failed(&mut self, peer: i32, e: &std::io::Error) {
        self.cma = false;
        oxmpi_base::verbose!(
            BTL,
            10,
            "sm: single copy (CMA) from rank {peer} failed ({e}); using copy-in/copy-out \
             from now on"
        );
    }

    /// Receives a matched rendezvous message of `n` bytes by the cooperative single copy
    /// (see [`coop`]): opens a transfer in `peer`'s control area, sends it a cooperative
    /// clear-to-send, copies chunks from the front of the sender's buffer at `addr` while the
    /// sender copies from the back, then waits for the sender's chunks. Returns `true` when
    /// request `rid` is settled (complete, FIN sent; or failed because the peer died), `false`
    /// if our CMA read failed: the caller then asks for the pipelined copy of the whole
    /// message (the sender has stopped claiming chunks by then, and what it still writes is
    /// the same data).
    fn coop_recv(
        &mut self,
        peer: i32,
        sreq: u64,
        addr: u64,
        buf: *mut u8,
        n: usize,
        rid: u64,
    ) -> bool {
        let p = peer as usize;
        let Some(cm) = self.peers[p].coop_rx else {
            return false;
        };
        let t0 = self.now_ns();
        let seq = coop::next_seq(self.peers[p].coop_seq);
        self.peers[p].coop_seq = seq;
        let csize = coop::chunk_size(n, self.coop_chunk);
        let chunks = n.div_ceil(csize);
        cm.open(seq, chunks);
        self.ctrl_hdr(
            peer,
            Hdr {
                kind: K_CTS,
                flags: F_COOP,
                ctx: seq,
                tag: csize as i32,
                a: n as u64,
                b: sreq,
                c: buf as u64,
                ..Hdr::default()
            },
        );
        let mut mine = 0;
        while let Some((k, m)) = cm.claim_front(seq) {
            mine += m;
            let off = k * csize;
            let len = (m * csize).min(n - off);
            if let Err(e) = self.cma_read(peer, buf.wrapping_add(off), addr + off as u64, len) {
                cm.close(seq);
                self.cma_failed(peer, &e);
                return false;
            }
        }
        // The sender finishes every chunk it claimed before it does anything else.
        let theirs = chunks - mine;
        let mut spins = 0u32;
        let failed = loop {
            if let Some((done, failed)) = cm.sender_report(seq) {
                if done >= theirs {
                    break None;
                }
                if failed {
                    // Its failed run is its lowest, right after ours.
                    break Some(theirs - done);
                }
            }
            spins = spins.wrapping_add(1);
            if spins % 128 == 0 {
                std::thread::yield_now();
            }
            if spins % 4096 == 0 && self.peer_exited(p) {
                self.fail(rid, ErrorClass::ProcFailed);
                self.declare_dead(p);
                return true;
            }
            std::hint::spin_loop();
        };
        if let Some(k) = failed {
            let off = mine * csize;
            let len = (k * csize).min(n - off);
            if let Err(e) = self.cma_read(peer, buf.wrapping_add(off), addr + off as u64, len) {
                self.cma_failed(peer, &e);
                return false;
            }
        }
        self.finish(rid);
        self.ctrl(peer, K_FIN, 0, sreq, 0);
        oxmpi_base::verbose!(
            BTL,
            60,
            "sm: received {n} B from rank {peer}: cooperative single copy, {theirs} of \
             {chunks} chunks copied by the sender"
        );
        let now = self.now_ns();
        self.peers[p].measured(p, Mech::Coop, n, t0, now);
        true
    }

    /// The sender's part of a cooperative single copy (a CTS with [`F_COOP`] from `peer`):
    /// claims chunks from the back of the transfer and writes them into the receiver's
    /// buffer, until none is left. The send completes on the receiver's FIN.
    fn coop_send(&mut self, peer: i32, hdr: Hdr) {
        let (seq, csize, sreq, raddr) = (hdr.ctx, hdr.tag as usize, hdr.b, hdr.c);
        let p = peer as usize;
        let Some(cm) = self.peers[p].coop_tx else {
            return;
        };
        let Some(Req {
            state: ReqState::Send { ptr, len, .. },
            ..
        }) = self.reqs.get(sreq)
        else {
            return;
        };
        let (ptr, n) = (*ptr, (hdr.a as usize).min(*len));
        if !self.cma_push || csize == 0 {
            // The receiver copies everything.
            return;
        }
        let pid = self.peers[p].pid;
        while let Some((k, m)) = cm.claim_back(seq) {
            let off = k.saturating_mul(csize);
            if off >= n {
                // Not a chunk of this message (corrupt request): nothing to copy.
                cm.report_done(m);
                continue;
            }
            let len = m.saturating_mul(csize).min(n - off);
            // SAFETY: `[off, off + len)` lies inside the send buffer, valid until the send
            // completes (on the receiver's FIN, which comes after this chunk is reported).
            // The kernel only reads `local` for a write.
            let r = unsafe {
                sys::cma_copy(
                    pid,
                    ptr.add(off).cast_mut(),
                    raddr + off as u64,
                    len,
                    sys::Cma::Write,
                )
            };
            match r {
                Ok(()) => cm.report_done(m),
                Err(e) => {
                    cm.report_failed();
                    // Refused by the kernel: no more writes (a vanished peer is not that).
                    let refused = matches!(
                        e.raw_os_error(),
                        Some(libc::EPERM | libc::EACCES | libc::ENOSYS)
                    );
                    self.cma_push &= !refused;
                    oxmpi_base::verbose!(
                        BTL,
                        10,
                        "sm: single-copy write (CMA) to rank {peer} failed ({e}); {}",
                        if refused {
                            "the receivers copy alone from now on"
                        } else {
                            "the receiver copies the rest"
                        }
                    );
                    return;
                }
            }
        }
    }

    /// `true` if local peer `p`'s process has ended.
    fn peer_exited(&self, p: usize) -> bool {
        let peer = &self.peers[p];
        match &peer.pidfd {
            Some(fd) => sys::pidfd_exited(fd),
            None => !sys::pid_alive(peer.pid),
        }
    }

    /// Reads `n` bytes at `addr` of `peer`'s memory into `buf` (CMA).
    fn cma_read(&self, peer: i32, buf: *mut u8, addr: u64, n: usize) -> std::io::Result<()> {
        // SAFETY: buf has n writable bytes (the receive buffer or a part of it).
        unsafe { sys::cma_copy(self.peers[peer as usize].pid, buf, addr, n, sys::Cma::Read) }
    }

    fn ctrl(&mut self, peer: i32, kind: u8, a: u64, b: u64, c: u64) {
        let hdr = Hdr {
            kind,
            a,
            b,
            c,
            ..Hdr::default()
        };
        self.ctrl_hdr(peer, hdr);
    }

    fn ctrl_hdr(&mut self, peer: i32, hdr: Hdr) {
        let p = peer as usize;
        if self.peers[p].dead {
            return;
        }
        self.peers[p].outq.push_back(Out::Ctrl(hdr));
        self.flush(p);
    }

    /// Writes queued records to `peer`'s link while there is room.
    fn flush(&mut self, p: usize) {
        let frag = self.frag;
        loop {
            let peer = &mut self.peers[p];
            let Some(link) = peer.link.as_mut() else {
                return;
            };
            let Some(item) = peer.outq.front_mut() else {
                return;
            };
            let mut done_req = None;
            let consumed = match item {
                // SAFETY: no payload.
                Out::Ctrl(hdr) => unsafe { link.try_send(hdr, std::ptr::null(), 0) },
                Out::Eager {
                    hdr,
                    ptr,
                    len,
                    complete,
                } => {
                    // SAFETY: the send buffer is valid until its request completes.
                    let ok = unsafe { link.try_send(hdr, *ptr, *len) };
                    if ok {
                        done_req = *complete;
                    }
                    ok
                }
                Out::Data {
                    sreq,
                    rreq,
                    ptr,
                    off,
                    len,
                } => {
                    let k = frag.min(link.max_data()).min(*len - *off);
                    let hdr = Hdr {
                        kind: K_DATA,
                        a: *off as u64,
                        c: *rreq,
                        ..Hdr::default()
                    };
                    // SAFETY: `off + k <= len` bytes of the send buffer, valid until the
                    // send request completes.
                    if !unsafe { link.try_send(&hdr, ptr.wrapping_add(*off), k) } {
                        return;
                    }
                    *off += k;
                    if *off < *len {
                        continue;
                    }
                    done_req = Some(*sreq);
                    true
                }
            };
            if !consumed {
                return;
            }
            peer.outq.pop_front();
            if let Some(id) = done_req {
                self.complete_send(p, id);
            }
        }
    }

    /// One progress pass: drain inbound links, flush outbound queues. Returns `false` if
    /// there was nothing to do (no record arrived, nothing queued): then no request
    /// changed state.
    #[inline]
    fn progress(&mut self) -> bool {
        let mut busy = false;
        for k in 0..self.linked.len() {
            let p = self.linked[k];
            let peer = &self.peers[p];
            let Some(link) = peer.link.as_ref() else {
                continue;
            };
            let (ready, queued) = (link.ready(), !peer.outq.is_empty());
            if ready | queued {
                busy = true;
                if ready {
                    self.drain(p);
                }
                if queued {
                    self.flush(p);
                }
                if !self.peers[p].unflushed.is_empty() {
                    self.settle(p);
                }
            }
        }
        busy
    }

    /// A send whose last record `peer`'s link accepted: complete now, or once the link's
    /// own buffer is empty.
    fn complete_send(&mut self, p: usize, id: u64) {
        let peer = &self.peers[p];
        if peer.buffered && peer.link.as_ref().is_some_and(|l| l.sending()) {
            self.peers[p].unflushed.push(id);
        } else {
            self.finish(id);
        }
    }

    /// Completes the sends waiting for `p`'s link buffer, if it is empty now.
    fn settle(&mut self, p: usize) {
        if self.peers[p].link.as_ref().is_some_and(|l| l.sending()) {
            return;
        }
        for id in std::mem::take(&mut self.peers[p].unflushed) {
            self.finish(id);
        }
    }

    fn drain(&mut self, p: usize) {
        for _ in 0..64 {
            let Some(link) = self.peers[p].link.as_mut() else {
                return;
            };
            let (hdr, payload, len) = match link.poll() {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e @ LinkError::Closed { .. }) => {
                    // A peer process that ends closes its sockets: the same event as the sm
                    // peers' pidfd reporting an exit.
                    oxmpi_base::verbose!(
                        BTL,
                        10,
                        "{} link from rank {p}: {e}; treating the peer as failed",
                        link.name()
                    );
                    self.declare_dead(p);
                    return;
                }
                Err(e) => {
                    oxmpi_base::output::error(format_args!(
                        "{} link from rank {p}: {e}; treating the peer as failed",
                        link.name()
                    ));
                    self.declare_dead(p);
                    return;
                }
            };
            self.handle(p as i32, hdr, payload, len);
            if let Some(link) = self.peers[p].link.as_mut() {
                link.release();
            }
        }
    }

    fn handle(&mut self, peer: i32, hdr: Hdr, payload: *const u8, plen: usize) {
        match hdr.kind {
            K_EAGER | K_RTS => {
                let env = Envelope {
                    ctx: hdr.ctx,
                    src: hdr.src,
                    tag: hdr.tag,
                };
                let msg = if hdr.kind == K_EAGER {
                    let ack = if hdr.flags & F_SYNC != 0 {
                        Ack::Remote { peer, sreq: hdr.b }
                    } else {
                        Ack::None
                    };
                    if let Some(rid) = self.matcher.match_arrival(env) {
                        self.deliver_eager_direct(rid, env, payload, plen, ack);
                        return;
                    }
                    // SAFETY: payload has plen readable bytes in the ring record.
                    let data = unsafe { self.eager_copy(payload, plen) };
                    Msg::Eager { data, ack }
                } else {
                    let msg = Msg::Rts {
                        peer,
                        total: hdr.a,
                        sreq: hdr.b,
                        addr: hdr.c,
                        cma: hdr.flags & F_CMA != 0,
                    };
                    if let Some(rid) = self.matcher.match_arrival(env) {
                        self.deliver(rid, env, msg);
                        return;
                    }
                    msg
                };
                self.matcher.push_unexpected(env, msg);
            }
            K_CTS if hdr.flags & F_COOP != 0 => self.coop_send(peer, hdr),
            K_CTS => {
                let (sreq, want, rreq) = (hdr.b, hdr.a as usize, hdr.c);
                let Some(q) = self.reqs.get(sreq) else {
                    return;
                };
                let ReqState::Send { ptr, len, .. } = q.state else {
                    return;
                };
                let want = want.min(len);
                if want == 0 {
                    self.finish(sreq);
                } else {
                    self.peers[peer as usize].outq.push_back(Out::Data {
                        sreq,
                        rreq,
                        ptr,
                        off: 0,
                        len: want,
                    });
                }
            }
            K_DATA => {
                let (rreq, off) = (hdr.c, hdr.a as usize);
                let Some(q) = self.reqs.get_mut(rreq) else {
                    return;
                };
                let ReqState::Data {
                    buf,
                    want,
                    got,
                    since,
                    ..
                } = &mut q.state
                else {
                    return;
                };
                let n = plen.min(want.saturating_sub(off));
                // SAFETY: off + n <= want <= the receive buffer's capacity (n == 0, and nothing
                // is written, for an out-of-range offset).
                unsafe { copy(payload, buf.wrapping_add(off), n) };
                *got += n;
                if *got >= *want {
                    let (since, want) = (*since, *want);
                    self.finish(rreq);
                    let p = peer as usize;
                    if since != 0 && since >= self.peers[p].last_coop_end {
                        // Throughput of the pipelined copy, from the later of its
                        // clear-to-send and the previous large transfer's end (not
                        // measured when a cooperative copy ran meanwhile: it held up
                        // this one).
                        let now = self.now_ns();
                        let start = since.max(self.peers[p].last_end);
                        self.peers[p].measured(p, Mech::Pipe, want, start, now);
                    }
                }
            }
            K_FIN => self.finish(hdr.b),
            _ => {}
        }
    }

    fn deliver_eager_direct(
        &mut self,
        rid: u64,
        env: Envelope,
        payload: *const u8,
        plen: usize,
        ack: Ack,
    ) {
        let Some(q) = self.reqs.get_mut(rid) else {
            return;
        };
        let ReqState::Posted { buf, cap, .. } = q.state else {
            return;
        };
        let n = plen.min(cap);
        // SAFETY: buf has cap >= n writable bytes; payload has plen >= n readable bytes.
        unsafe { copy(payload, buf, n) };
        q.status = Status {
            source: env.src,
            tag: env.tag,
            error: (plen > cap).then_some(ErrorClass::Truncate),
            count_bytes: n,
            cancelled: false,
        };
        self.finish(rid);
        if let Ack::Remote { peer, sreq } = ack {
            self.ctrl(peer, K_FIN, 0, sreq, 0);
        }
    }

    /// Checks whether peers are still alive; fails everything that depends on a dead one.
    fn check_peers(&mut self) {
        for p in 0..self.peers.len() {
            let peer = &self.peers[p];
            if peer.dead || p as i32 == self.me || !peer.local {
                continue;
            }
            if self.peer_exited(p) {
                // Take what it sent before dying.
                if self.peers[p].link.is_some() {
                    self.drain(p);
                }
                self.declare_dead(p);
            }
        }
    }

    fn declare_dead(&mut self, p: usize) {
        if self.peers[p].dead {
            return;
        }
        oxmpi_base::verbose!(
            PML,
            10,
            "peer rank {p} (pid {}) is gone; failing its operations",
            self.peers[p].pid
        );
        self.peers[p].dead = true;
        self.peers[p].outq.clear();
        self.peers[p].unflushed.clear();
        // Nothing more comes from it: stop polling its link (a closed socket would report
        // its end again on every pass).
        self.peers[p].link = None;
        // Its control areas lived in the link's mappings.
        self.peers[p].coop_rx = None;
        self.peers[p].coop_tx = None;
        self.linked.retain(|&q| q != p);
        let pw = p as i32;
        let reqs = &self.reqs;
        let posted = self.matcher.remove_posted_where(|_, _, rid| {
            matches!(reqs.get(*rid), Some(Req { state: ReqState::Posted { peer, .. }, .. }) if peer.is_none_or(|w| w == pw))
        });
        let mut failed: Vec<u64> = posted;
        for (id, q) in self.reqs.iter() {
            match q.state {
                ReqState::Send { peer, .. } | ReqState::Data { peer, .. } if peer == pw => {
                    failed.push(id)
                }
                _ => {}
            }
        }
        for id in failed {
            self.fail(id, ErrorClass::ProcFailed);
        }
    }
}

/// Request table: slots reused through a free list; an id is `generation << 32 | index`, so a
/// stale id (request already freed) is recognised.
#[derive(Debug, Default)]
struct Slab {
    slots: Vec<(u32, Option<Req>)>,
    free: Vec<u32>,
}

impl Slab {
    fn insert(&mut self, r: Req) -> u64 {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push((0, None));
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[i as usize];
        slot.0 = slot.0.wrapping_add(1).max(1);
        slot.1 = Some(r);
        (slot.0 as u64) << 32 | i as u64
    }

    fn slot(&self, id: u64) -> Option<&(u32, Option<Req>)> {
        self.slots
            .get((id & 0xffff_ffff) as usize)
            .filter(|s| s.0 as u64 == id >> 32)
    }

    fn get(&self, id: u64) -> Option<&Req> {
        self.slot(id)?.1.as_ref()
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Req> {
        self.slot(id)?;
        self.slots[(id & 0xffff_ffff) as usize].1.as_mut()
    }

    fn remove(&mut self, id: u64) -> Option<Req> {
        self.slot(id)?;
        let i = (id & 0xffff_ffff) as u32;
        let r = self.slots[i as usize].1.take();
        if r.is_some() {
            self.free.push(i);
        }
        r
    }

    /// The status of request `id` if it is complete (the request is then freed), `None` if
    /// it is still in progress, a [`bad_request`] status if there is no such request; one
    /// slot lookup.
    #[inline]
    fn take_if_done(&mut self, id: u64) -> Option<Status> {
        let i = (id & 0xffff_ffff) as usize;
        let Some((_, slot)) = self.slots.get_mut(i).filter(|s| s.0 as u64 == id >> 32) else {
            return Some(bad_request());
        };
        match slot {
            Some(q) if matches!(q.state, ReqState::Done) => {
                let st = q.status;
                *slot = None;
                self.free.push(i as u32);
                Some(st)
            }
            Some(_) => None,
            None => Some(bad_request()),
        }
    }

    fn iter(&self) -> impl Iterator<Item = (u64, &Req)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, (g, r))| r.as_ref().map(|r| ((*g as u64) << 32 | i as u64, r)))
    }

    fn values(&self) -> impl Iterator<Item = &Req> {
        self.slots.iter().filter_map(|s| s.1.as_ref())
    }
}

/// Says at verbose level 20 that a measurement made `c` switch for messages of `n` bytes'
/// size class from `peer`.
fn log_switch(c: &Chooser, peer: usize, n: usize) {
    let (pipe, coop) = c.rates();
    oxmpi_base::verbose!(
        BTL,
        20,
        "sm: messages of {n} B from rank {peer}: now {} (measured: pipelined {pipe:.1} GB/s, \
         cooperative {coop:.1} GB/s)",
        match c.current() {
            Mech::Pipe => "pipelined copy",
            Mech::Coop => "cooperative single copy",
        }
    );
}
