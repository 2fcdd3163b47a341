//! The public [`Engine`]: initialisation (bootstrap, transport selection and wire-up), the
//! lock around the protocol state, blocking waits and the API methods, each of which takes
//! the lock and calls into the protocol layer (`crate::pml`).

use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Mutex, OnceLock};

use crate::bootstrap::{Bootstrap, FileKvs, PmiBootstrap};
use crate::btl::sm::params::{Settings, SingleCopy};
#[cfg(test)]
use crate::btl::Link;
use crate::btl::PeerInfo;
use crate::btl::BTL;
use crate::pml::params::yield_when_idle_explicit;
use crate::pml::recv::Direct;
use crate::pml::request::Started;
use crate::pml::State;
use crate::sys;
use crate::{
    params, CommId, Error, MessageId, ProcName, ReqId, SendMode, Status, ThreadLevel, ANY_SOURCE,
    PROC_NULL,
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
    if THREADS_AHEAD.load(SeqCst) {
        // An `expect_threads` that ran while the engine was being made.
        e.share_lock("a thread announced during init");
    }
    oxmpi_base::verbose!(
        crate::pml::params::PML,
        10,
        "rank {}: engine lock {} (thread level {:?})",
        e.rank,
        if e.lock_shared() {
            "atomic"
        } else {
            "plain (one thread)"
        },
        e.thread_level
    );
    Ok(e)
}

/// The engine, if [`init`] succeeded.
#[inline]
pub fn engine() -> Option<&'static Engine> {
    ENGINE.get().filter(|e| e.size > 0)
}

/// Set by [`expect_threads`]: an engine made afterwards starts with its lock shared.
static THREADS_AHEAD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Another thread than the one that called [`init`] is about to use the engine (`who`,
/// for the verbose output): a library thread about to be spawned (the nonblocking
/// collectives' progress thread, a one-sided progress thread, ...), or tools that may call
/// from any thread. Below `MPI_THREAD_SERIALIZED` the engine's lock is taken without
/// atomic read-modify-write instructions while one thread uses it; from this call on (for
/// good, also for an engine made later) it is taken with compare-and-swap. Must be called
/// on the thread that uses the engine, before the other thread can reach it (e.g. before
/// spawning it: the spawn orders the switch before the new thread's first call).
pub fn expect_threads(who: &str) {
    THREADS_AHEAD.store(true, SeqCst);
    if let Some(e) = ENGINE.get() {
        e.share_lock(who);
    }
}

/// A blocking wait starts while waits are timed: counts it, and for a sampled one
/// returns the clock to time it by.
#[cold]
fn blocking_wait_clock() -> Option<std::time::Instant> {
    crate::pml::stats::wait_sampled().then(std::time::Instant::now)
}

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
    /// The transport components selected at start-up (the late wire-ups use them too).
    btls: Vec<&'static str>,
    /// The peers met after start-up ([`Engine::connect_group`]), by name; held across a
    /// group wire-up so that two run one after the other.
    late: Mutex<std::collections::HashMap<ProcName, i32>>,
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
            state: StateLock::new(State::new(-1, 0, &Settings::declared()), true),
            boot: Mutex::new(None),
            btls: Vec::new(),
            late: Mutex::default(),
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
            // The protocol tests drive one engine from several threads.
            state: StateLock::new(st, true),
            boot: Mutex::new(None),
            btls: Vec::new(),
            late: Mutex::default(),
        }
    }

    /// This test engine with fault tolerance on (`mpi_ft_enable`).
    #[cfg(test)]
    pub(crate) fn with_ft(self) -> Engine {
        self.lock().ft = true;
        self
    }

    /// This test engine with the transport components `btls` selected (for its late
    /// wire-ups, [`Engine::connect_group`]).
    #[cfg(test)]
    pub(crate) fn with_btls(mut self, btls: &[&'static str]) -> Engine {
        self.btls = btls.to_vec();
        self
    }

    /// The name of the link to peer `p` (`None`: no link), and the number of peers.
    #[cfg(test)]
    pub(crate) fn link_name(&self, p: usize) -> (Option<&'static str>, usize) {
        let st = self.lock();
        let name = st
            .peers
            .get(p)
            .and_then(|q| q.link.as_ref())
            .map(|l| l.name());
        (name, st.peers.len())
    }

    /// Adds a peer met after start-up over `link` (the protocol tests' late peer); returns
    /// its index, which communicator groups then hold.
    #[cfg(test)]
    pub(crate) fn add_peer_link(&self, link: Box<dyn Link>) -> i32 {
        let info = PeerInfo {
            pid: 0,
            local: false,
            link: Some(link),
        };
        self.lock().add_peers(vec![info])[0]
    }

    /// Starts the engine over `boot`. A failure is also sent to the process manager as an
    /// abort with the error's text (PMI abort, like `MPI_Abort`), so that the launcher (srun,
    /// mpirun, Hydra) ends the job at once with that message instead of leaving the other
    /// ranks waiting in a fence for this one.
    pub(crate) fn new(boot: Box<dyn Bootstrap>, required: ThreadLevel) -> Result<Engine, Error> {
        let mut slot = Some(boot);
        let r = Self::start(&mut slot, required);
        if let (Err(e), Some(boot)) = (&r, slot.as_mut()) {
            if boot.size() > 1 {
                // PMI-1 carries no message: say it on stderr too, which the launcher forwards.
                let text = format!("MPI_Init failed: {e}");
                oxmpi_base::output::error(format_args!("{text}"));
                boot.abort(1, &text);
            }
        }
        r
    }

    /// [`Engine::new`]'s work; takes the bootstrap out of `slot` only when it succeeds.
    fn start(
        slot: &mut Option<Box<dyn Bootstrap>>,
        required: ThreadLevel,
    ) -> Result<Engine, Error> {
        let Some(boot) = slot.as_mut() else {
            return Err(Error::State("no bootstrap".into()));
        };
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
        st.ft = oxmpi_base::params::flag(&crate::pml::params::FT_ENABLE);
        if st.ft {
            sys::tolerate_failure_signal();
        }
        if st.cma {
            sys::allow_ptracer_any();
        }
        // The btl selection list (`btl=self,sm`, `btl=^sm`): a requested component that is
        // not compiled in stops every rank here, before any exchange, with Open MPI's
        // "A requested component was not found" naming host, framework and what exists.
        let btls = params::select_btl().map_err(|e| Error::Bootstrap {
            rank,
            msg: e.to_string(),
        })?;
        let mut local_ranks = 1;
        if size > 1 {
            let peers = crate::btl::wire_up(&mut **boot, rank, size as usize, &btls.components)?;
            local_ranks += peers.iter().filter(|p| p.local).count();
            st.attach(peers);
        }
        Self::open_cm(&mut st, rank, &btls.components)?;
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
            // Below MPI_THREAD_SERIALIZED only the thread that called init reaches the
            // engine, until a library thread starts (`expect_threads`).
            state: StateLock::new(
                st,
                required >= ThreadLevel::Serialized || THREADS_AHEAD.load(SeqCst),
            ),
            boot: Mutex::new(slot.take()),
            btls: btls.components,
            late: Mutex::default(),
        })
    }

    /// Opens `pml cm` where the `ofi` transport opened the matching offload (`--mca pml
    /// cm`, or a hardware provider that can carry it); one line if `pml cm` was asked
    /// for and cannot run.
    fn open_cm(st: &mut State, rank: i32, btls: &[&str]) -> Result<(), Error> {
        use crate::mtl::ofi::select::Asked;
        let asked = crate::btl::ofi::pml_asked();
        st.cm = crate::btl::ofi::link::mtl::mtl().and_then(crate::pml::cm::Cm::open);
        match &st.cm {
            Some(cm) => oxmpi_base::verbose!(
                crate::pml::params::PML,
                10,
                "rank {rank}: pml cm over mtl ofi: {}",
                cm.describe()
            ),
            None if asked == Asked::Cm && st.peers.len() > 1 => {
                return Err(Error::Bootstrap {
                    rank,
                    msg: format!(
                        "pml cm: needs the ofi transport (mtl ofi), which the btl list ({}) \
                         leaves out",
                        btls.join(",")
                    ),
                })
            }
            None => {}
        }
        Ok(())
    }

    /// Links this process to the processes of other jobs in a group that spans jobs (the
    /// parents and children of a spawn, the two sides of a connect), so that communicators
    /// can then hold them. `members` names every member (job and world rank; this process
    /// is `(job, rank())`), in the same order on every member; `boot` is the group's
    /// exchange of business cards (each member's endpoint record: node, pid and the
    /// sections of the `sm` and `tcp` components selected at start-up), run collectively
    /// by all members (not at all when every member is of our job). Members of our job, and
    /// processes met before, keep their link; the
    /// others are wired as at start-up (`sm` on our node, else `tcp`) and get the next free
    /// peer indices. Returns each member's peer index (a world rank for our job's members).
    /// A member that no transport reaches is an [`Error::Bootstrap`] naming it.
    pub fn connect_group(
        &self,
        boot: &mut dyn Bootstrap,
        job: &str,
        members: &[ProcName],
    ) -> Result<Vec<i32>, Error> {
        let fail = |msg: String| Error::Bootstrap {
            rank: self.rank,
            msg,
        };
        let mut late = self.late.lock().unwrap_or_else(|e| e.into_inner());
        let ours = |m: &ProcName| m.job == job;
        let me = members
            .iter()
            .position(|m| ours(m) && m.rank == self.rank)
            .ok_or_else(|| {
                fail(format!(
                    "rank {} of job {job} is not in the group",
                    self.rank
                ))
            })?;
        for (i, m) in members.iter().enumerate() {
            if members[..i].contains(m) {
                return Err(fail(format!("{m} is twice in the group")));
            }
            if ours(m) && !(0..self.size).contains(&m.rank) {
                return Err(fail(format!(
                    "{m} is not a rank of this job (size {})",
                    self.size
                )));
            }
        }
        if members.iter().all(ours) {
            // One job: linked at start-up, and every member sees it so (no exchange).
            return Ok(members.iter().map(|m| m.rank).collect());
        }
        let known: Vec<bool> = members
            .iter()
            .map(|m| ours(m) || late.contains_key(m))
            .collect();
        // The late group is wired over sm and tcp only (an ofi endpoint per group would
        // be a second fabric).
        let selected: Vec<&str> = self.btls.iter().copied().filter(|&c| c != "ofi").collect();
        let infos = crate::btl::wire_up_among(boot, me as i32, members.len(), &selected, &known)?;
        let mut fresh = Vec::new();
        for (i, info) in infos.into_iter().enumerate() {
            if known[i] {
                continue;
            }
            if info.link.is_none() {
                return Err(fail(format!(
                    "no transport (btl {}) reaches {}",
                    selected.join(","),
                    members[i]
                )));
            }
            fresh.push((i, info));
        }
        let (at, infos): (Vec<usize>, Vec<PeerInfo>) = fresh.into_iter().unzip();
        let added = self.lock().add_peers(infos);
        for (i, p) in at.into_iter().zip(added) {
            oxmpi_base::verbose!(BTL, 20, "rank {}: {} is peer {p}", self.rank, members[i]);
            late.insert(members[i].clone(), p);
        }
        Ok(members
            .iter()
            .map(|m| if ours(m) { m.rank } else { late[m] })
            .collect())
    }

    #[inline]
    fn lock(&self) -> StateGuard<'_> {
        self.state.lock()
    }

    /// The application frees `len` bytes at `addr` (`MPI_Free_mem`): the transports drop
    /// what they keep of that memory (cached registrations), so that memory allocated
    /// again at the same address is registered anew.
    pub fn memory_freed(&self, addr: *const u8, len: usize) {
        self.lock().memory_freed(addr as usize, len);
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
    /// Whether the engine's lock is taken with compare-and-swap (other threads may call:
    /// `MPI_THREAD_SERIALIZED` and above, or after [`expect_threads`]), rather than with
    /// a plain load and store (one thread).
    #[inline]
    pub fn lock_shared(&self) -> bool {
        self.state.is_shared()
    }

    /// [`expect_threads`] for this engine.
    fn share_lock(&self, who: &str) {
        if self.state.share() {
            oxmpi_base::verbose!(
                crate::pml::params::PML,
                10,
                "rank {}: engine lock atomic from now on ({who})",
                self.rank
            );
        }
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
        self.lock().node_pid(r)
    }

    /// The world ranks known to have failed (a process that ended or whose link broke),
    /// ascending; checks the local peers' liveness first.
    pub fn failed_peers(&self) -> Vec<i32> {
        let mut st = self.lock();
        st.check_peers();
        st.peers
            .iter()
            .enumerate()
            .filter(|(_, p)| p.dead)
            .map(|(r, _)| r as i32)
            .collect()
    }

    /// The name of peer `w`: `(job, w)` for a rank of our job (`job` being our job's name),
    /// else the name a group wire-up ([`Engine::connect_group`]) met it by; `None` for an
    /// index no peer has.
    pub fn peer_name(&self, w: i32, job: &str) -> Option<ProcName> {
        if (0..self.size).contains(&w) {
            return Some(ProcName {
                job: job.to_string(),
                rank: w,
            });
        }
        let late = self.late.lock().unwrap_or_else(|e| e.into_inner());
        late.iter().find(|(_, &p)| p == w).map(|(n, _)| n.clone())
    }

    /// Whether fault tolerance (`mpi_ft_enable`, ULFM) is on.
    pub fn ft_enabled(&self) -> bool {
        self.lock().ft
    }

    /// Acknowledges, on `comm`, the failures known now (ULFM's `MPIX_Comm_failure_ack`):
    /// receives from any source there are no longer failure-pending because of them.
    pub fn comm_failure_ack(&self, comm: CommId) -> Result<(), Error> {
        let mut st = self.lock();
        st.check_peers();
        let ctx = st.comm(comm)?.ctx;
        let dead: Vec<i32> = (0..st.peers.len())
            .filter(|&p| st.peers[p].dead)
            .map(|p| p as i32)
            .collect();
        st.acked.insert(ctx, dead);
        Ok(())
    }

    /// Whether `comm` was revoked (by [`Engine::comm_revoke`] here or at another member).
    pub fn comm_revoked(&self, comm: CommId) -> Result<bool, Error> {
        let st = self.lock();
        let ctx = st.comm(comm)?.ctx;
        Ok(st.revoked.contains(&ctx))
    }

    /// Revokes `comm` (ULFM's `MPIX_Comm_revoke`): its pending receives here fail with
    /// [`ErrorClass::Revoked`](crate::ErrorClass::Revoked), later point-to-point
    /// operations on it are refused with that class, and every other member (both groups
    /// of an intercommunicator) is told to do the same; each member passes the notice on
    /// when it first gets it, so it reaches everyone even if this process dies part-way
    /// through. Does not wait for anyone.
    pub fn comm_revoke(&self, comm: CommId) -> Result<(), Error> {
        let mut st = self.lock();
        let ctx = st.comm(comm)?.ctx;
        st.revoke_ctx(ctx);
        st.send_revoke(ctx, None);
        Ok(())
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
        self.lock().comm_create(ctx, group, remote)
    }

    /// Takes the next number of `comm`'s own sequence: 0, 1, 2, ... from the communicator's
    /// making (the collectives number their schedules with it, every member in the same
    /// order). It lives and dies with the communicator: a new communicator that reuses a
    /// freed one's context id starts at 0 at every member, whatever the freed one counted
    /// at each (a count kept by context id would carry over, and differ between members
    /// that made different communicators on the same id).
    pub fn comm_next_seq(&self, comm: CommId) -> Result<u32, Error> {
        self.lock().comm_next_seq(comm)
    }

    /// Whether the context ids `ctx..ctx + span` may serve a new communicator: no live
    /// communicator has one, and nothing of a freed one is left on them (a posted receive,
    /// an unexpected or matched-probe message; under `pml cm`, no receive of any freed
    /// communicator is in flight in the provider). `MPI_Comm_free` lets pending operations
    /// complete: until they have, their ids stay out of use.
    pub fn contexts_idle(&self, ctx: u32, span: u32) -> bool {
        self.lock().contexts_idle(ctx, span)
    }

    /// The user context ids `0..n` every transport in use carries (the collective
    /// contexts, `ctx | 1 << 31`, and the reserved ids just below `u32::MAX` apart):
    /// under `pml cm` what the offload's tag layout has room for, else `2^31`.
    pub fn context_limit(&self) -> u32 {
        self.lock().context_limit()
    }

    /// The context ids `0..n` new communicators may take: what the transports carry
    /// ([`Engine::context_limit`]), capped by `mpi_max_context_ids` if set. The same at
    /// every process of a job (the C ABI's and the Rust API's agreements use it).
    pub fn user_context_limit(&self) -> u32 {
        crate::params::register();
        let cap = oxmpi_base::params::int(&crate::frameworks::MAX_CONTEXT_IDS);
        let l = self.context_limit();
        match u32::try_from(cap) {
            Ok(c) if c > 0 => l.min(c),
            _ => l,
        }
    }

    /// Removes a communicator created by [`Engine::comm_create`].
    pub fn comm_free(&self, comm: CommId) -> Result<(), Error> {
        self.lock().comm_free(comm)
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
        // SAFETY: forwarded caller guarantee.
        unsafe { self.isend_with_mark(buf, len, dest, tag, comm, mode, 0) }
    }

    /// [`Engine::isend`] of a marked message: its tag (at most [`TAG_UB`](crate::TAG_UB))
    /// travels with [`TAG_MARK`](crate::TAG_MARK), which a receive of `tag` matches and its
    /// status shows (the collectives' error markers and length headers).
    ///
    /// # Safety
    /// As for [`Engine::isend`].
    pub unsafe fn isend_marked(
        &self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<ReqId, Error> {
        // SAFETY: forwarded caller guarantee.
        unsafe {
            self.isend_with_mark(
                buf,
                len,
                dest,
                tag,
                comm,
                SendMode::Standard,
                crate::TAG_MARK,
            )
        }
    }

    /// [`Engine::isend`] with `mark` (0 or [`TAG_MARK`](crate::TAG_MARK)) on the tag.
    ///
    /// # Safety
    /// As for [`Engine::isend`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn isend_with_mark(
        &self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
        mark: i32,
    ) -> Result<ReqId, Error> {
        let mut st = self.lock();
        // SAFETY: forwarded caller guarantee.
        match unsafe { st.start_send(buf, len, dest, tag, comm, mode, mark) }? {
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
    #[inline]
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
            match unsafe { st.start_send(buf, len, dest, tag, comm, mode, 0) }? {
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
    #[inline]
    pub unsafe fn irecv_started(
        &self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<crate::Started, Error> {
        let mut st = self.lock();
        // The common case in one pass (arguments and communicator read once; see
        // `State::irecv_fast`).
        // SAFETY: forwarded caller guarantee.
        if let Some(s) = unsafe { st.irecv_fast(buf, len, src, tag, comm) } {
            return Ok(match s {
                Started::Done(s) => crate::Started::Complete(s),
                Started::Req(r) => crate::Started::Pending(r),
            });
        }
        // Direct path: an eager message from `src` that waits at the front of its link is
        // copied straight into `buf` (no request, no matcher entry, no drain later), when
        // nothing queued in the matcher involves that source (see `State::take_direct`).
        // Bad arguments fail the target and go to the general path, which reports them.
        if let Some(d) = st.direct_recv_target(buf.is_null() && len > 0, src, tag, comm) {
            // SAFETY: forwarded caller guarantee.
            if let Direct::Done(s) = unsafe { st.take_direct(&d, buf, len, tag) } {
                return Ok(crate::Started::Complete(s));
            }
        }
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
        // A blocking send after a receive is likely a ping-pong's turn (`Link::answer_next`).
        st.answering = true;
        // SAFETY: forwarded caller guarantee (the buffer outlives this blocking call).
        let started = unsafe { st.start_send(buf, len, dest, tag, comm, mode, 0) };
        st.answering = false;
        match started? {
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
        // from the source's link into `buf` (no request, no matcher entry). It keeps the
        // lock for HOLD_SPINS polls at a time, at MPI_THREAD_MULTIPLE for one poll (as
        // `poll_until` does there: other threads' calls go on between our polls), and
        // after every release it asks again whether the path is still open: another thread
        // may have posted a receive from the same source or drained the link meanwhile.
        {
            let hold_mask = if self.thread_level == ThreadLevel::Multiple {
                0
            } else {
                HOLD_SPINS - 1
            };
            let null = buf.is_null() && len > 0;
            let mut target = st.direct_recv_target(null, src, tag, comm);
            let (mut spins, mut idle) = (0u32, 0u32);
            // When it blocks and waits are timed: the clock at the start of a sampled wait.
            let mut timed: Option<Option<std::time::Instant>> = None;
            while let Some(d) = &target {
                if !st.sleepers.is_empty() {
                    // A thread sleeps in `wait_message`: poll every transport (the general
                    // path's wait), so that it can leave the sockets to us.
                    break;
                }
                // SAFETY: forwarded caller guarantee.
                match unsafe { st.recv_direct(d, buf, len, tag) } {
                    Direct::Done(s) => {
                        if let Some(Some(t0)) = timed {
                            crate::pml::stats::add_wait_ns(t0.elapsed().as_nanos() as u64);
                        }
                        return Ok(s);
                    }
                    Direct::Busy => break,
                    Direct::Idle => {
                        if timed.is_none() && crate::pml::stats::wait_timing() {
                            timed = Some(blocking_wait_clock());
                        }
                    }
                }
                // The same pacing as `wait_locked`: a lock release every HOLD_SPINS polls
                // (every poll at MPI_THREAD_MULTIPLE), peer liveness at least as often as
                // every HOLD_SPINS polls, yielding when idle for long or when configured.
                spins = spins.wrapping_add(1);
                idle = idle.saturating_add(1);
                let yield_now = self.yield_when_idle || idle >= IDLE_POLLS_BEFORE_YIELD;
                if spins & hold_mask == 0 || self.state.contended() {
                    if hold_mask != 0 || spins % HOLD_SPINS == 0 {
                        st.check_peers();
                    }
                    drop(st);
                    self.state.hand_over();
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
            // Blocked so far on the direct path: the general path's wait counts on.
            if let Some(Some(t0)) = timed {
                crate::pml::stats::add_wait_ns(t0.elapsed().as_nanos() as u64);
            }
        }
        // SAFETY: forwarded caller guarantee.
        let r = unsafe { st.start_recv(buf, len, src, tag, comm) }?;
        Ok(self.wait_locked(st, |st| st.take_done_or_failed(r)))
    }

    /// Starts a receive of up to `len` bytes into `buf` from rank `src` (or [`ANY_SOURCE`](crate::ANY_SOURCE),
    /// [`PROC_NULL`]) with `tag` (or [`ANY_TAG`](crate::ANY_TAG)) on `comm`.
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
    /// yields a status with [`ErrorClass::Request`](crate::ErrorClass::Request). Under fault
    /// tolerance, a receive from any source on a communicator with an unacknowledged
    /// failure yields a status with
    /// [`ErrorClass::ProcFailedPending`](crate::ErrorClass::ProcFailedPending) and stays
    /// pending (ULFM).
    pub fn test(&self, r: ReqId) -> Option<Status> {
        let mut st = self.lock();
        self.poll(&mut st);
        st.take_done_or_pending(r)
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
        st.request_status(r)
    }

    /// Waits for a request, then frees it and returns its status; a failure-pending
    /// receive returns as [`Engine::test`] says (the request stays).
    pub fn wait(&self, r: ReqId) -> Status {
        self.wait_until(|st| st.take_done_or_pending(r))
    }

    /// [`Engine::wait`] for each request of `reqs` in turn, taking the lock once for as
    /// long as they are complete: `done(i, status)` receives request `i`'s status (the
    /// request is freed, except a failure-pending one, as with `wait`). A window of
    /// nonblocking receives completes in one progress pass, so `MPI_Waitall` on it takes
    /// the lock once or twice instead of once per request. `done` runs with the engine's
    /// lock held: it must not call the engine.
    pub fn wait_each(&self, reqs: &[ReqId], mut done: impl FnMut(usize, Status)) {
        let mut st = self.lock();
        for (i, &r) in reqs.iter().enumerate() {
            let s = match st.take_done_or_pending(r) {
                Some(s) => s,
                None => {
                    // Block (progress, yields, liveness) as `wait` does, then go on with
                    // the rest under the lock again.
                    drop(st);
                    let s = self.wait(r);
                    st = self.lock();
                    s
                }
            };
            done(i, s);
        }
    }

    /// Waits for a request of a blocking call, then frees it and returns its status; a
    /// failure-pending receive ([`Engine::test`]) is cancelled and fails with
    /// [`ErrorClass::ProcFailed`](crate::ErrorClass::ProcFailed), as ULFM has blocking
    /// receives from any source do.
    pub fn wait_blocking(&self, r: ReqId) -> Status {
        self.wait_until(|st| st.take_done_or_failed(r))
    }

    /// `MPI_Request_free`: the request completes in the background and is then released.
    pub fn request_free(&self, r: ReqId) {
        self.lock().request_free(r);
    }

    /// A snapshot of the protocol's counters: traffic per peer and transport, the matching
    /// queues, the eager limit and the time blocked in waits (see `pml::stats`).
    pub fn stats(&self) -> crate::Stats {
        let st = self.lock();
        crate::Stats {
            peers: st
                .peers
                .iter()
                .enumerate()
                .map(|(r, p)| {
                    let t = match &p.link {
                        Some(l) => l.name(),
                        None if r as i32 == st.me => "self",
                        None => "none",
                    };
                    (t, p.stats)
                })
                .collect(),
            matching: st.matcher.stats(),
            eager_limit: st.eager_limit as u64,
            wait_ns: crate::pml::stats::wait_ns(),
        }
    }

    /// Re-reads the parameters declared `runtime` (`btl_sm_eager_limit`,
    /// `btl_sm_coop_min_size`) from the registry: sends started after this call use the new
    /// values (the MPI tools interface calls it when a control variable is written after
    /// `MPI_Init`).
    pub fn reload_params(&self) {
        self.apply_runtime(&Settings::read());
    }

    /// Applies the `runtime` values among `sm` (see [`Engine::reload_params`]).
    pub(crate) fn apply_runtime(&self, sm: &Settings) {
        self.lock().apply_runtime(sm);
    }

    /// Starts (`on`) or stops one reader of communicator `c`'s traffic counters: they
    /// count only while a reader is started (a tools-interface handle bound to `c`), so
    /// unread they cost one predictable branch per message. A communicator that no longer
    /// exists is left alone.
    pub fn comm_watch(&self, c: CommId, on: bool) {
        self.lock().comm_watch(c, on);
    }

    /// The traffic counters of communicator `c` (`None` if it does not exist): what moved
    /// on it while a reader was started ([`Engine::comm_watch`]).
    pub fn comm_stats(&self, c: CommId) -> Option<crate::CommStats> {
        let st = self.lock();
        st.comms.get(c.0 as usize)?.as_ref().map(|c| c.stats)
    }

    /// The same counters per peer rank of communicator `c` (its remote group's for an
    /// intercommunicator; `None` if it does not exist). Empty until a reader first
    /// started.
    pub fn comm_peer_stats(&self, c: CommId) -> Option<Vec<crate::CommStats>> {
        let st = self.lock();
        st.comms
            .get(c.0 as usize)?
            .as_ref()
            .map(|c| c.peer_stats.clone())
    }

    /// The number of peer ranks of communicator `c` (its remote group's size for an
    /// intercommunicator), `None` if it does not exist.
    pub fn comm_peers(&self, c: CommId) -> Option<usize> {
        let st = self.lock();
        st.comms.get(c.0 as usize)?.as_ref().map(|c| c.remote.len())
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
        st.probe(src, tag, comm)
    }

    /// `MPI_Probe`: blocks until [`Engine::iprobe`] finds a message.
    pub fn probe(&self, src: i32, tag: i32, comm: CommId) -> Result<Status, Error> {
        self.lock().check_probe_args(src, tag, comm)?;
        if src == PROC_NULL {
            return Ok(Status::PROC_NULL);
        }
        self.wait_until(|st| match st.probe(src, tag, comm) {
            Err(e) => Some(Err(e)),
            Ok(found) => found
                .map(Ok)
                .or_else(|| st.probe_failure(comm, src).map(Err)),
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

    /// Sleeps until a message that `improbe(src, tag, comm)` would take may be there: for a
    /// thread with nothing else to do (the one-sided progress thread, an origin waiting
    /// for its target's reply) instead of polling. `from` are the world ranks the message
    /// can come from. Returns [`Wait::Ready`] at once if such a message is queued, `stop`
    /// is set, or something is buffered that progress must look at; [`Wait::Opaque`] at
    /// once if a link to one of `from` has nothing to block in (shared memory: the caller
    /// polls); else [`Wait::Slept`] after sleeping in `poll` on those peers' sockets and
    /// the thread's doorbell until one of them stirs, or [`Wait::Timeout`] after
    /// [`SLEEP_MAX`] without anything stirring. A thread
    /// that sets `stop` calls [`Engine::wake_sleepers`] afterwards. A failed `src` is its
    /// error, as for [`Engine::mprobe`].
    ///
    /// Hand-off: while another thread of the process polls every transport (a blocking
    /// call's wait, a [`Serving`] guard), that thread takes what arrives off the sockets
    /// and rings the doorbell of a sleeper on its context; then, when `handoff` is not
    /// zero, the caller sleeps on its doorbell alone for at most `handoff` ([`Wait::Slept`]
    /// when rung, else [`Wait::Timeout`]), so traffic of other contexts on the same sockets (a barrier's)
    /// does not wake it, and links without descriptors (shared memory) are no reason to
    /// poll. The poller does not ring when it leaves: `handoff` bounds how long a message
    /// that arrives after it left waits for the caller's next look.
    pub fn wait_message(
        &self,
        src: i32,
        tag: i32,
        comm: CommId,
        from: &[i32],
        stop: &std::sync::atomic::AtomicBool,
        handoff: std::time::Duration,
    ) -> Result<Wait, Error> {
        let bell = sys::bell().map_err(|source| Error::Sys {
            rank: self.rank,
            what: "eventfd".into(),
            source,
        })?;
        let mut fds = Vec::new();
        let mut timeout = SLEEP_MAX;
        {
            let mut st = self.lock();
            st.check_probe_args(src, tag, comm)?;
            self.poll(&mut st);
            if stop.load(std::sync::atomic::Ordering::Acquire)
                || st.probe(src, tag, comm)?.is_some()
            {
                return Ok(Wait::Ready);
            }
            if src != ANY_SOURCE {
                if let Some(e) = st.probe_failure(comm, src) {
                    return Err(e);
                }
            }
            if st.cm.is_some() {
                // The provider's queue has nothing to sleep on here: the caller polls.
                return Ok(Wait::Opaque);
            }
            let ctx = st.comm(comm)?.ctx;
            if !handoff.is_zero() && st.pollers > 0 {
                // Another thread polls: it rings us when something comes on `ctx`.
                timeout = handoff.min(SLEEP_MAX);
            } else {
                match st.wait_set(from, &mut fds) {
                    crate::btl::Wake::Now => return Ok(Wait::Ready),
                    crate::btl::Wake::Opaque => return Ok(Wait::Opaque),
                    crate::btl::Wake::Fds => {}
                }
            }
            st.add_sleeper(ctx, tag, bell);
        }
        let r = sys::sleep_on(&fds, bell, timeout);
        self.lock().remove_sleeper(bell);
        let stirred = r.map_err(|source| Error::Sys {
            rank: self.rank,
            what: "poll".into(),
            source,
        })?;
        Ok(if stirred { Wait::Slept } else { Wait::Timeout })
    }

    /// Wakes the threads sleeping in [`Engine::wait_message`] on `comm` (so that they see
    /// a stop flag set before this call).
    pub fn wake_sleepers(&self, comm: CommId) {
        let mut st = self.lock();
        if let Ok(c) = st.comm(comm) {
            let ctx = c.ctx;
            st.ring_ctx(ctx);
        }
    }

    /// Counts the calling thread as a poller of every transport until the guard drops
    /// (see [`Engine::wait_message`]'s hand-off), for a loop of nonblocking calls that
    /// each poll every transport ([`Engine::improbe`], [`Engine::test`], ...) and that
    /// serves the messages of `tag` on `comm` itself (e.g. an origin that, while it waits
    /// for its target's reply, serves the requests other origins send to its own
    /// window): until the guard drops, an envelope of that context and tag taken off a
    /// link rings no sleeper (the window's progress thread sleeps on), the server takes
    /// it from the queue. When the guard drops, envelopes ring the sleepers again; the
    /// caller then looks at the queue once more, since what arrived while it served rang
    /// nobody. The thread must not call [`Engine::wait_message`] itself while it holds
    /// the guard.
    pub fn serving(&self, tag: i32, comm: CommId) -> Result<Serving<'_>, Error> {
        let mut st = self.lock();
        let key = (st.comm(comm)?.ctx, tag);
        st.pollers += 1;
        st.served.push(key);
        Ok(Serving(self, key))
    }

    /// Whether some thread polls every transport now (a blocking call's wait, a
    /// [`Serving`] guard): a thread that would spin waiting for a message may sleep in
    /// [`Engine::wait_message`] at once, leaving the sockets to it.
    pub fn polled(&self) -> bool {
        self.lock().pollers > 0
    }

    /// Threads polling every transport and threads sleeping in [`Engine::wait_message`]
    /// (the hand-off's tests).
    #[cfg(test)]
    pub(crate) fn pollers_and_sleepers(&self) -> (u32, usize) {
        let st = self.lock();
        (st.pollers, st.sleepers.len())
    }

    /// How many context and tag pairs are served by a polling thread ([`Engine::serving`]).
    #[cfg(test)]
    pub(crate) fn served(&self) -> usize {
        self.lock().served.len()
    }

    /// `MPI_Imrecv`: receives a message returned by [`Engine::improbe`]/[`Engine::mprobe`].
    ///
    /// # Safety
    /// As for [`Engine::irecv`].
    pub unsafe fn imrecv(&self, buf: *mut u8, len: usize, m: MessageId) -> Result<ReqId, Error> {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.lock().imrecv(buf, len, m) }
    }

    /// Cancels a receive that has not matched yet (its status then says `cancelled`). Sends
    /// and already-matched receives are not cancelled.
    pub fn cancel(&self, r: ReqId) {
        self.lock().cancel(r);
    }

    /// Asks the launcher to start a new job (`MPI_Comm_spawn`, see
    /// [`Bootstrap::spawn`]); returns the children's error codes.
    pub fn spawn(&self, req: &oxmpi_pmi::SpawnRequest) -> Result<Vec<i32>, Error> {
        let mut b = self.boot.lock().unwrap_or_else(|e| e.into_inner());
        match b.as_mut() {
            Some(b) => b.spawn(req),
            None => Err(Error::State("no bootstrap".into())),
        }
    }

    /// Reads `key` from the job's launcher key space (e.g. a spawned job's preput pairs);
    /// `None` when absent.
    pub fn launcher_get(&self, key: &str) -> Option<String> {
        let mut b = self.boot.lock().unwrap_or_else(|e| e.into_inner());
        b.as_mut().and_then(|b| b.get(0, key).ok())
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
        self.wait_until(|st| st.flushed().then_some(()));
        // Under fault tolerance the final synchronisation is ours, over the links: a
        // process manager's fence (Slurm's PMI-2, Hydra's PMI-1 barrier, the file store)
        // never completes once a rank died, while a goodbye from every rank that is still
        // alive ends as soon as the failures are noticed.
        let ft = self.lock().ft;
        if ft {
            self.finalize_say_bye();
            self.wait_until(|st| st.finalize_byes_in(self.size as usize).then_some(()));
        }
        // Then what the links need from us before we stop progressing (ofi's goodbye).
        self.wait_until(|st| st.links_closed().then_some(()));
        self.lock().finalized = true;
        let mut b = self.boot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = b.as_mut() {
            if !ft {
                b.fence()?;
            }
            b.finalize()?;
        }
        Ok(())
    }

    /// The first step of [`Engine::finalize`] under fault tolerance: a goodbye (`K_BYE`)
    /// to every other live rank of the world; finalize then waits for everyone's
    /// ([`Engine::finalize_byes_in`]) where a process manager's fence would wait.
    pub(crate) fn finalize_say_bye(&self) {
        self.lock().say_bye(self.size as usize);
    }

    /// Whether our goodbyes are out and every other rank of the world said goodbye or
    /// failed (the protocol tests' look at [`Engine::finalize`]'s wait).
    #[cfg(test)]
    pub(crate) fn finalize_byes_in(&self) -> bool {
        self.lock().finalize_byes_in(self.size as usize)
    }

    /// Our rendezvous sends to peer `p` under way: the count
    /// [`crate::pml::State::sending_rndv_to`] reads and the count a walk of the request
    /// table finds (the protocol tests' check that the two agree).
    #[cfg(test)]
    pub(crate) fn rndv_sends_to(&self, p: usize) -> (usize, usize) {
        let st = self.lock();
        (
            st.peers[p].rndv_sends as usize,
            st.rndv_sends_walked(p as i32),
        )
    }

    /// Our rendezvous sends to all peers under way: the count
    /// [`crate::pml::State::sending_rndv`] reads and the sum of the peers' counts.
    #[cfg(test)]
    pub(crate) fn rndv_sends_all(&self) -> (usize, usize) {
        let st = self.lock();
        (
            st.rndv_sends_all as usize,
            st.peers.iter().map(|q| q.rndv_sends as usize).sum(),
        )
    }

    /// Whether peer `p` read our last rendezvous message alone (the protocol tests' look
    /// at [`crate::pml::peer::Peer::reads_ours`]).
    #[cfg(test)]
    pub(crate) fn peer_reads_ours(&self, p: usize) -> bool {
        self.lock().peers[p].reads_ours
    }

    /// Gives peer `p` the process id `pid` (the protocol tests' fake peers live in this
    /// process: with our own pid a single copy from them reads our memory).
    #[cfg(test)]
    pub(crate) fn set_peer_pid(&self, p: usize, pid: i32) {
        self.lock().peers[p].pid = pid;
    }

    /// Lets rendezvous messages to peer `p` offer a single copy, as an sm link's
    /// capabilities do (the protocol tests' fake links offer none).
    #[cfg(test)]
    pub(crate) fn set_peer_single_copy(&self, p: usize) {
        self.lock().peers[p].single_copy = true;
    }

    /// Feeds peer `p`'s placement a timed eager copy of `n` bytes in `ns` nanoseconds, as
    /// the send paths do ([`crate::btl::sm::place`]).
    #[cfg(test)]
    pub(crate) fn sense_peer(&self, p: usize, n: usize, ns: u64) {
        self.lock().peers[p].place.record(n, ns);
    }

    /// Polls (progress + `f`) until `f` returns a value; yields between polls if configured,
    /// and checks peers for liveness now and then.
    ///
    /// `f` is tried once before the first poll (a request that is already complete, such as
    /// an eager send, returns without touching the transports). Below
    /// [`ThreadLevel::Multiple`] no application thread may call in concurrently, so the lock
    /// is held across up to [`HOLD_SPINS`] polls instead of being taken for each, unless a
    /// library thread (the one-sided progress thread) waits for it; with
    /// `MPI_THREAD_MULTIPLE` it is released after every poll so other threads get in.
    fn wait_until<T>(&self, f: impl FnMut(&mut State) -> Option<T>) -> T {
        self.wait_locked(self.lock(), f)
    }

    /// [`Engine::poll_until`] that counts the wait and, for a sample of the waits, adds the
    /// time it blocks to the wait timer (only while a reader asked for it,
    /// `pml::stats::set_wait_timing`; `pml::stats::timing_sampled` picks the sample).
    #[cold]
    fn timed_wait<'a, T>(
        &'a self,
        st: StateGuard<'a>,
        f: impl FnMut(&mut State) -> Option<T>,
    ) -> T {
        if !crate::pml::stats::wait_sampled() {
            return self.poll_until(st, f);
        }
        let t0 = std::time::Instant::now();
        let v = self.poll_until(st, f);
        crate::pml::stats::add_wait_ns(t0.elapsed().as_nanos() as u64);
        v
    }

    /// [`Engine::wait_until`] for a caller that already holds the lock (`st`).
    #[inline]
    fn wait_locked<'a, T>(
        &'a self,
        mut st: StateGuard<'a>,
        mut f: impl FnMut(&mut State) -> Option<T>,
    ) -> T {
        if let Some(v) = f(&mut st) {
            return v;
        }
        if crate::pml::stats::wait_timing() {
            return self.timed_wait(st, f);
        }
        self.poll_until(st, f)
    }

    /// The polling loop of [`Engine::wait_locked`], once `f` failed the first time. The
    /// thread counts as a poller meanwhile ([`State::pollers`]): sleepers in
    /// [`Engine::wait_message`] may then leave the sockets to it.
    #[inline]
    fn poll_until<'a, T>(
        &'a self,
        mut st: StateGuard<'a>,
        f: impl FnMut(&mut State) -> Option<T>,
    ) -> T {
        st.pollers += 1;
        let (mut st, v) = self.poll_loop(st, f);
        st.pollers -= 1;
        v
    }

    /// The loop of [`Engine::poll_until`]: returns `f`'s value and the lock it holds.
    #[inline]
    fn poll_loop<'a, T>(
        &'a self,
        mut st: StateGuard<'a>,
        mut f: impl FnMut(&mut State) -> Option<T>,
    ) -> (StateGuard<'a>, T) {
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
        // The lock was released since `f` was last tried (another thread may have
        // completed what we wait for).
        let mut released = false;
        loop {
            let busy = st.progress();
            if st.wake {
                // A sleeper left the sockets to us: ring it now, not at the next release
                // of the lock (up to HOLD_SPINS polls later).
                st.ring_sleepers();
            }
            if busy {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
            }
            // Whether the state may have changed since `f` was last tried: after a progress
            // pass that did something, or after the lock was released.
            if busy || released || hold_mask == 0 || spins & hold_mask == 0 {
                released = false;
                if let Some(v) = f(&mut st) {
                    return (st, v);
                }
            }
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                st.check_peers();
                if let Some(v) = f(&mut st) {
                    return (st, v);
                }
            }
            let yield_now = self.yield_when_idle || idle >= IDLE_POLLS_BEFORE_YIELD;
            if spins & hold_mask == 0 || self.state.contended() {
                drop(st);
                self.state.hand_over();
                if yield_now {
                    sys::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                st = self.lock();
                released = true;
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
///
/// While only one thread can reach the engine (`shared` false: `MPI_THREAD_SINGLE` or
/// `MPI_THREAD_FUNNELED`, and no library thread started yet) the lock is taken with a plain
/// load and store of `locked` instead of a locked compare-and-swap (about 9.5 ns on the
/// test VM, on every call). `shared` turns true for good, by [`StateLock::share`], on the
/// one thread that used the engine so far and before any other thread can reach it
/// (before the spawn of a library thread, whose start orders it after the store); that
/// thread then takes the lock with compare-and-swap like every other.
struct StateLock {
    locked: std::sync::atomic::AtomicBool,
    /// Other threads may take the lock (see above): acquire it with compare-and-swap.
    shared: std::sync::atomic::AtomicBool,
    /// Threads waiting in `lock_contended` (e.g. a library progress thread while the
    /// application thread waits in a blocking call).
    waiters: std::sync::atomic::AtomicU32,
    state: std::cell::UnsafeCell<State>,
}

// SAFETY: the state is only reached through a `StateGuard`, and at most one guard exists at
// a time (the `locked` flag, acquired with Acquire and released with Release ordering; while
// not `shared`, set and cleared by the one thread that can reach the engine, which turns
// `shared` on before another thread can start to), so the lock hands out exclusive access
// like a mutex; `State` itself is `Send`.
unsafe impl Sync for StateLock {}

impl StateLock {
    fn new(st: State, shared: bool) -> Self {
        StateLock {
            locked: std::sync::atomic::AtomicBool::new(false),
            shared: std::sync::atomic::AtomicBool::new(shared),
            waiters: std::sync::atomic::AtomicU32::new(0),
            state: std::cell::UnsafeCell::new(st),
        }
    }

    #[inline]
    fn lock(&self) -> StateGuard<'_> {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        if !self.shared.load(Relaxed) && !self.locked.load(Relaxed) {
            // The only thread that can reach the engine (see the type's comment): nobody
            // else reads or writes `locked` until `share` turned `shared` on, which this
            // thread did before any other thread could start to (so the store below is
            // seen by that thread, whose first acquisition is a compare-and-swap).
            self.locked.store(true, Relaxed);
        } else if self
            .locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        StateGuard { lock: self }
    }

    /// From now on other threads may take the lock: every acquisition, this thread's too,
    /// is a compare-and-swap. Called on the thread that used the engine so far, before
    /// another thread can reach it. Returns whether it was not shared before.
    fn share(&self) -> bool {
        !self.shared.swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether other threads may take the lock.
    #[inline]
    fn is_shared(&self) -> bool {
        self.shared.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Called by a blocking wait right after releasing the lock between polls: when
    /// another thread waits for it (e.g. a library progress thread while the application
    /// thread waits in a blocking call), let that thread take it before the wait takes it
    /// back. Without this, a waiter that yields its CPU rarely sees the lock free in the few
    /// instructions between release and re-acquisition, and starves. A waiter never gives
    /// up, so this ends. One relaxed load when nobody waits.
    #[inline]
    fn hand_over(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.waiters.load(Relaxed) == 0 {
            return;
        }
        let mut spins = 0u32;
        while !self.locked.load(Relaxed) && self.waiters.load(Relaxed) > 0 {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                sys::yield_now();
            }
        }
    }

    /// Whether another thread waits for the lock. A blocking call that keeps the lock
    /// across several polls (below `MPI_THREAD_MULTIPLE`) releases it at once then: a
    /// library thread (the one-sided progress thread, which serves the requests that the
    /// blocked call's peers wait for) must not wait [`HOLD_SPINS`] polls for it, which on
    /// a loaded machine, where an idle poll yields the CPU, take seconds.
    #[inline]
    fn contended(&self) -> bool {
        self.waiters.load(std::sync::atomic::Ordering::Relaxed) != 0
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        self.waiters.fetch_add(1, Relaxed);
        let _gone = Waiting(&self.waiters);
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

/// Counts a thread out of [`StateLock::waiters`] when it stops waiting.
struct Waiting<'a>(&'a std::sync::atomic::AtomicU32);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
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
        // SAFETY: as in `deref_mut`: the guard still holds the lock.
        let st = unsafe { &mut *self.lock.state.get() };
        if st.wake {
            st.ring_sleepers();
        }
        self.lock
            .locked
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

/// A thread counted as a poller of every transport that serves one context and tag
/// itself ([`Engine::serving`]).
#[derive(Debug)]
pub struct Serving<'a>(&'a Engine, (u32, i32));

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.pollers -= 1;
        if let Some(i) = st.served.iter().position(|&k| k == self.1) {
            st.served.swap_remove(i);
        }
    }
}

/// What [`Engine::wait_message`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Nothing: the message (or the stop flag, or something to progress) is there.
    Ready,
    /// Slept until a socket or the doorbell stirred.
    Slept,
    /// Slept for the whole time allowed ([`SLEEP_MAX`], or the hand-off's bound) without
    /// anything stirring.
    Timeout,
    /// Nothing: a peer's link has nothing to block in (shared memory); poll instead.
    Opaque,
}

/// Longest sleep of [`Engine::wait_message`]: a safety net only, since every event a
/// sleeper waits for rings its doorbell or stirs its sockets.
pub const SLEEP_MAX: std::time::Duration = std::time::Duration::from_secs(1);

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
