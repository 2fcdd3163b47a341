//! The `pt2pt` one-sided component (Open MPI's osc pt2pt idea): window peers that cannot
//! be reached directly (another node, or every peer when `osc=pt2pt` forces it) get their
//! operations as messages over the engine's transports, on the window's private
//! communicator. A progress thread per window serves them at the target, so the target
//! never has to call MPI.
//!
//! * `proto`: the sans-IO core: message codec and the target-side state machine (lock
//!   queue, per-origin ordering, deferred errors, dead origins).
//! * `params`: the `osc` framework's selection and this component's parameters.
//! * this file: [`Net`], the origin side (one request per operation; `Get`, fetching
//!   accumulates, compare-and-swap, `Flush`, `Lock` and `Unlock` wait for their reply), and
//!   the progress thread driving a [`proto::TargetCore`] over the window memory
//!   ([`proto::Memory`], implemented by the window).
//!
//! Completion: requests of one origin reach a target in order (MPI's non-overtaking rule on
//! one communicator and tag), so any reply proves every earlier operation applied. Origins
//! remember which targets got unacknowledged puts or accumulates ("dirty"); flush, unlock
//! and window free ask those targets for an acknowledgement. A fence asks nobody
//! ([`Net::fence`]): every request carries its origin's fence epoch, the ranks sum in the
//! fence how many requests of the epoch each target was sent, and each target serves
//! until it has handled that many, holding requests of the next epoch until it leaves the
//! fence too. PSCW's `complete` is a message that the target counts after applying
//! everything sent before it.
//!
//! Threads: every target has a mutex held from a request's send to its reply's receipt, so
//! several threads of one process using one window never take each other's replies (a
//! reply carries no request id: at most one is outstanding per target and window), and a
//! reply still proves that every operation sent to that target before it was applied.
//!
//! Failures: an origin whose request or reply fails, or that the engine reports failed
//! while others wait for the lock it holds, is dead to the target: its lock is released
//! and its waiters get `MPIX_ERR_PROC_FAILED` ([`proto::TargetCore::peer_died`]).
//!
//! Waiting: the progress thread, and an origin waiting for a reply, poll the engine for a
//! short time ([`BUSY_SPIN`], spinning without yielding: on a loaded machine each yield
//! gives the core away for a whole time slice), then sleep in the engine's blocking wait
//! ([`Engine::wait_message`]: `poll` on the sockets of the peers that may send, and a
//! doorbell that other threads of the process ring when they take such a message off a
//! socket), so an idle window costs no CPU. While another thread of the process polls
//! every transport (a blocking MPI call, an origin spinning here), the progress thread
//! neither spins nor watches the sockets: it sleeps on its doorbell alone (the engine's
//! hand-off, at most `osc_pt2pt_handoff_max`), which that thread rings when it takes a
//! request off a socket; the last such thread to leave gives the sockets back to it, so a
//! request that comes just after wakes it at once.
//!
//! Serving in place: a thread of the target's process that waits inside a call on the
//! window (an origin spinning for a reply, a fence, [`Net::fence`]) serves
//! the window's requests itself ([`Net::serve_here`]) under the engine's
//! [`Engine::serving`] guard, so they ring no doorbell and the progress thread is neither
//! woken nor needs a core; target core and memory sit behind one mutex ([`Server`]),
//! taken by whichever thread serves. When the guard drops, that thread looks at the
//! queue once more (what came meanwhile rang nobody). Passive target with the target
//! outside MPI is the progress thread's, as before. Peers reached over shared memory (`osc=pt2pt`
//! on one node) have nothing to block in: the progress thread then sleeps 1, 2, 4, ... µs up
//! to `osc_pt2pt_idle_sleep_max` between looks, and an origin keeps polling.

pub(crate) mod params;
pub(crate) mod proto;

use crate::backend::{err, EComm, SendMode};
use crate::consts::*;
use crate::ffi::{MpiError, MpiResult};
use oxmpi_engine::{Engine, Wait, ANY_SOURCE};
use proto::{AccOp, Memory, Reply, Req, TargetCore};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

/// Tag of requests (served by the target's progress thread).
const TAG_REQ: i32 = 1;
/// Tag of replies (received by the origin's calling thread).
const TAG_REPLY: i32 = 2;

/// How long an idle progress thread, or an origin waiting for a reply, polls before it
/// sleeps in the engine's blocking wait.
const BUSY_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// The message path of one window.
pub(crate) struct Net {
    eng: &'static Engine,
    /// The window's private communicator (errors are attributed to it).
    comm: c_int,
    /// Its point-to-point context, which carries the requests and replies.
    ecomm: EComm,
    /// Targets with operations not acknowledged yet.
    dirty: Vec<AtomicBool>,
    /// Fences completed on the window (our fence epoch; every request carries it).
    epoch: AtomicU64,
    /// Requests sent to each target in this fence epoch (summed over the origins in the
    /// fence, [`Net::fence`]).
    sent: Vec<AtomicU64>,
    /// Per target: held from a request's send until its reply is in (see the module
    /// documentation).
    turn: Vec<Mutex<()>>,
    /// Wait for every operation's acknowledgement (dynamic windows: only the target knows
    /// what is attached, and a bad address must fail the call that used it).
    acked: bool,
    /// World rank of each member of the window.
    world: Vec<i32>,
    /// World ranks of the members reached with messages (the ones that send us requests).
    remote: Vec<i32>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The target side, shared with the progress thread once started.
    server: OnceLock<Arc<Mutex<Server>>>,
}

/// A wait inside a window call: spin a while, then yield on every pass (as a blocking
/// barrier's wait), and now and then, once yielding, look for a failed rank of the window
/// (whose part would never come).
struct Waiting {
    since: std::time::Instant,
    spins: u32,
}

impl Waiting {
    fn new() -> Waiting {
        Waiting {
            since: std::time::Instant::now(),
            spins: 0,
        }
    }

    /// One pass of the wait in `during` on `net`'s window.
    fn pause(&mut self, net: &Net, during: &str) -> MpiResult {
        if self.since.elapsed() < BUSY_SPIN {
            std::hint::spin_loop();
            return Ok(());
        }
        self.spins += 1;
        std::thread::yield_now();
        if self.spins % 64 != 63 {
            return Ok(());
        }
        let failed = net.eng.failed_peers();
        match net.world.iter().find(|w| failed.contains(w)) {
            Some(w) => Err(MpiError::new(
                MPIX_ERR_PROC_FAILED,
                format!(
                    "rank {w} of the world failed during {during} on this window (its last operations may be lost)"
                ),
            )),
            None => Ok(()),
        }
    }
}

impl Net {
    /// The message path over the window's private communicator `comm`, whose member `r`
    /// is reached directly when `near[r]`; `acked`: every operation waits for the target's
    /// acknowledgement.
    pub(crate) fn new(comm: c_int, near: &[bool], acked: bool) -> MpiResult<Net> {
        let eng = crate::backend::engine()?;
        let ecomm = crate::state::lock().comm(comm)?.ecomm;
        let n = near.len();
        let world = eng.comm_group(ecomm).map_err(err)?;
        let remote = world
            .iter()
            .zip(near)
            .filter(|&(_, &d)| !d)
            .map(|(&w, _)| w)
            .collect();
        Ok(Net {
            eng,
            comm,
            ecomm,
            dirty: (0..n).map(|_| AtomicBool::new(false)).collect(),
            epoch: AtomicU64::new(0),
            sent: (0..n).map(|_| AtomicU64::new(0)).collect(),
            turn: (0..n).map(|_| Mutex::new(())).collect(),
            acked,
            world,
            remote,
            stop: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(None),
            server: OnceLock::new(),
        })
    }

    /// Start serving requests for this window's memory `mem`.
    pub(crate) fn start(&self, mem: Box<dyn Memory + Send>) -> MpiResult {
        let srv = Arc::new(Mutex::new(Server::new(mem)));
        if self.server.set(srv.clone()).is_err() {
            return Err(MpiError::new(
                MPI_ERR_INTERN,
                "the one-sided progress thread of this window was started twice",
            ));
        }
        let (eng, ecomm, stop) = (self.eng, self.ecomm, self.stop.clone());
        let (members, remote) = (self.world.clone(), self.remote.clone());
        // It takes the engine's lock next to the application's thread(s).
        oxmpi_engine::expect_threads("a one-sided progress thread");
        let h = std::thread::Builder::new()
            .name("oxmpi-osc".into())
            .spawn(move || serve(eng, ecomm, &stop, &srv, &members, &remote))
            .map_err(|e| {
                MpiError::new(
                    MPI_ERR_NO_MEM,
                    format!("cannot start the one-sided progress thread: {e}"),
                )
            })?;
        *self.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
        Ok(())
    }

    /// Serve the requests queued for this window from the calling thread, which waits
    /// inside a call on the window anyway, instead of waking the progress thread (see
    /// [`Server`]). Nothing when the progress thread is serving right now: it looks at
    /// the queue again before it sleeps.
    pub(crate) fn serve_here(&self) {
        let Some(srv) = self.server.get() else {
            return;
        };
        serve_batch(srv, &EnginePort(self.eng, self.ecomm), &self.world);
    }

    /// Stop the progress thread (window free, after the final barrier).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.eng.wake_sleepers(self.ecomm);
        let h = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = h {
            let _ = h.join();
        }
    }

    /// Our turn to talk to target `t` (one request with a reply outstanding at a time).
    fn turn(&self, t: usize) -> std::sync::MutexGuard<'_, ()> {
        self.turn[t].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Send `req` to target `t` (blocking until the buffer is free, not until applied);
    /// the caller has `t`'s [`Net::turn`].
    fn send(&self, t: usize, req: &Req) -> MpiResult {
        let bytes = req.encode_at(self.epoch.load(Ordering::Relaxed));
        // SAFETY: `bytes` lives across this blocking send.
        let st = unsafe {
            self.eng.send(
                bytes.as_ptr(),
                bytes.len(),
                t as i32,
                TAG_REQ,
                self.ecomm,
                SendMode::Standard,
            )
        }
        .map_err(err)?;
        match st.error {
            None => {
                // The target counts it when it handles it ([`Net::fence`]).
                self.sent[t].fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Some(c) => Err(MpiError::new(
                crate::backend::class_code(c),
                format!("sending a one-sided request to rank {t} of the window failed"),
            )),
        }
    }

    /// Send `req` to `t` and wait for its reply; every earlier operation to `t` is then
    /// applied, so `t` is clean. Returns the reply's data or its error.
    fn call(&self, t: usize, req: &Req) -> MpiResult<Vec<u8>> {
        let _turn = self.turn(t);
        self.send(t, req)?;
        let (m, st) = self.reply_from(t)?;
        let mut buf = vec![0u8; st.count_bytes];
        // SAFETY: `buf` is ours and outlives the wait below.
        let r = unsafe { self.eng.imrecv(buf.as_mut_ptr(), buf.len(), m) }.map_err(err)?;
        let st = self.eng.wait(r);
        if let Some(c) = st.error {
            return Err(MpiError::new(
                crate::backend::class_code(c),
                format!("receiving the reply of rank {t} of the window failed"),
            ));
        }
        self.dirty[t].store(false, Ordering::Relaxed);
        let reply = Reply::decode(&buf).map_err(|e| {
            let f = proto::undecodable(&e);
            MpiError::new(f.code, f.detail)
        })?;
        if reply.code != MPI_SUCCESS {
            return Err(MpiError::new(
                reply.code,
                format!("at rank {t} of the window: {}", reply.detail),
            ));
        }
        Ok(reply.data)
    }

    /// Wait for the reply of target `t`: polling for a while, then sleeping in the
    /// engine's blocking wait (a lock held long by another origin costs no CPU here).
    fn reply_from(&self, t: usize) -> MpiResult<(oxmpi_engine::MessageId, oxmpi_engine::Status)> {
        let never = AtomicBool::new(false);
        let since = std::time::Instant::now();
        // While we spin, every look polls every transport and we serve our own window's
        // requests: the progress thread leaves the sockets to us (the engine's hand-off)
        // and is not rung for the requests (we take them).
        let mut serving = Some(self.eng.serving(TAG_REQ, self.ecomm).map_err(err)?);
        loop {
            self.serve_here();
            if let Some(found) = self
                .eng
                .improbe(t as i32, TAG_REPLY, self.ecomm)
                .map_err(err)?
            {
                if serving.take().is_some() {
                    // What came while we served rang nobody: serve it now.
                    self.serve_here();
                }
                return Ok(found);
            }
            if since.elapsed() < BUSY_SPIN {
                std::hint::spin_loop();
                continue;
            }
            // No longer polling: sleep (and let the progress thread serve and watch the
            // sockets).
            if serving.take().is_some() {
                self.serve_here();
            }
            match self
                .eng
                .wait_message(
                    t as i32,
                    TAG_REPLY,
                    self.ecomm,
                    &self.world[t..=t],
                    &never,
                    params::handoff_max(),
                )
                .map_err(err)?
            {
                Wait::Opaque => std::thread::yield_now(),
                Wait::Ready | Wait::Slept | Wait::Timeout => {}
            }
        }
    }

    /// The message path's part of `MPI_Win_fence` (on the window's communicator `coll`,
    /// its collective view), instead of a flush of every target and a barrier: the ranks
    /// sum, per target, the requests they sent it in this epoch (a nonblocking allreduce,
    /// which is a barrier too), and each rank then serves until it has handled as many
    /// requests of the epoch as were sent to it. No acknowledgement round trip: requests
    /// of one origin arrive in order, and the count says when the last one is in. A
    /// request of the next epoch, from an origin that left the fence first, is held until
    /// we leave too ([`proto::TargetCore::handle_at`]), so it sees the whole epoch. Our
    /// own operations are complete at the origin once sent (their bytes are copied).
    /// This thread serves the window's requests meanwhile, under the engine's
    /// [`Engine::serving`] guard, so the progress thread is neither rung nor needs a core.
    ///
    /// The ranks whose memory we load and store directly (our node's) may still be
    /// serving their share when we have ours: a remote origin's put of the epoch may not
    /// have reached them yet. So the caller publishes the epochs each rank closed
    /// ([`Net::epoch`]), and a direct access of the next epoch to such a rank first waits
    /// until it closed this one ([`Net::wait_for`]); otherwise a get could read, or a put
    /// be overwritten by, the epoch before.
    pub(crate) fn fence(&self, coll: &crate::comm::Internal) -> MpiResult {
        let Some(srv) = self.server.get() else {
            return Err(MpiError::new(
                MPI_ERR_INTERN,
                "a fence on a window whose one-sided server was not started",
            ));
        };
        let counts: Vec<u64> = self
            .sent
            .iter()
            .map(|c| c.swap(0, Ordering::Relaxed))
            .collect();
        let mut s = coll.iallreduce_sum_u64(&counts)?;
        let serving = self.eng.serving(TAG_REQ, self.ecomm).map_err(err)?;
        let r = self.fence_wait(coll, &mut s, srv);
        drop(serving);
        // What came while we served rang nobody: serve it now.
        self.serve_here();
        r?;
        self.epoch.fetch_add(1, Ordering::Relaxed);
        // Every operation we sent in the epoch is applied now, but a target's deferred
        // error for one of them comes only with a reply: the targets stay dirty, so that
        // the next flush, unlock or the window's free asks for it.
        Ok(())
    }

    /// [`Net::fence`]'s waits: the allreduce `s`, then our share of the requests.
    fn fence_wait(
        &self,
        coll: &crate::comm::Internal,
        s: &mut oxmpi_coll::sched::Schedule,
        srv: &Mutex<Server>,
    ) -> MpiResult {
        let mut w = Waiting::new();
        loop {
            self.serve_here();
            if let Some(r) = coll.progress(s) {
                r?;
                break;
            }
            w.pause(self, "a fence")?;
        }
        let expected = coll.sums_u64(s).get(coll.rank()).copied().unwrap_or(0);
        let port = EnginePort(self.eng, self.ecomm);
        loop {
            self.serve_here();
            if srv
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .close_epoch(&port, expected)
            {
                return Ok(());
            }
            // An origin that died before its last requests of the epoch came: they never
            // will.
            w.pause(self, "a fence")?;
        }
    }

    /// Fences this rank completed on the window (its fence epoch).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Wait until `done` (a condition another rank of our node sets), serving the
    /// window's requests meanwhile; `MPIX_ERR_PROC_FAILED` if a rank of the window
    /// fails first. `during` names the call for that error.
    pub(crate) fn wait_for(&self, during: &str, done: impl Fn() -> bool) -> MpiResult {
        let mut w = Waiting::new();
        while !done() {
            self.serve_here();
            w.pause(self, during)?;
        }
        Ok(())
    }

    /// Send an operation that is acknowledged later (put, accumulate without result).
    fn post_op(&self, t: usize, req: &Req) -> MpiResult {
        {
            let _turn = self.turn(t);
            self.dirty[t].store(true, Ordering::Relaxed);
            self.send(t, req)?;
        }
        if self.acked {
            self.flush(t)?;
        }
        Ok(())
    }

    /// `MPI_Put` to `t`.
    pub(crate) fn put(&self, t: usize, ranges: &[(isize, usize)], data: &[u8]) -> MpiResult {
        self.post_op(
            t,
            &Req::Put {
                ranges: ranges.to_vec(),
                data: data.to_vec(),
            },
        )
    }

    /// `MPI_Get` from `t`: the packed bytes of `ranges`.
    pub(crate) fn get(&self, t: usize, ranges: &[(isize, usize)]) -> MpiResult<Vec<u8>> {
        self.call(
            t,
            &Req::Get {
                ranges: ranges.to_vec(),
            },
        )
    }

    /// The accumulate family at `t`: `Some(old bytes)` when `fetch`.
    pub(crate) fn accumulate(
        &self,
        t: usize,
        op: AccOp,
        ranges: &[(isize, usize)],
        data: &[u8],
        fetch: bool,
    ) -> MpiResult<Option<Vec<u8>>> {
        let req = Req::Acc {
            op,
            fetch,
            ranges: ranges.to_vec(),
            data: data.to_vec(),
        };
        if fetch {
            self.call(t, &req).map(Some)
        } else {
            self.post_op(t, &req).map(|_| None)
        }
    }

    /// `MPI_Compare_and_swap` at `t`: the old bytes.
    pub(crate) fn cas(&self, t: usize, off: isize, cmp: &[u8], new: &[u8]) -> MpiResult<Vec<u8>> {
        self.call(
            t,
            &Req::Cas {
                off,
                cmp: cmp.to_vec(),
                new: new.to_vec(),
            },
        )
    }

    /// Wait for `t` to apply every operation sent to it (nothing to do when clean).
    pub(crate) fn flush(&self, t: usize) -> MpiResult {
        if self.dirty[t].load(Ordering::Relaxed) {
            self.call(t, &Req::Flush)?;
        }
        Ok(())
    }

    /// [`Net::flush`] for every target.
    pub(crate) fn flush_all(&self) -> MpiResult {
        (0..self.dirty.len()).try_for_each(|t| self.flush(t))
    }

    /// `MPI_Win_lock` on `t`: returns once granted.
    pub(crate) fn lock(&self, t: usize, exclusive: bool) -> MpiResult {
        self.call(t, &Req::Lock { exclusive }).map(|_| ())
    }

    /// `MPI_Win_unlock` of `t`: returns once `t` applied our operations and released.
    pub(crate) fn unlock(&self, t: usize) -> MpiResult {
        self.call(t, &Req::Unlock).map(|_| ())
    }

    /// `MPI_Win_post` to origin `o`.
    pub(crate) fn post(&self, o: usize) -> MpiResult {
        let _turn = self.turn(o);
        self.send(o, &Req::Post)
    }

    /// `MPI_Win_complete` to target `t`: returns once `t` counted it (after our earlier
    /// operations), with any error deferred there.
    pub(crate) fn complete(&self, t: usize) -> MpiResult {
        self.call(t, &Req::Complete)?;
        self.dirty[t].store(false, Ordering::Relaxed);
        Ok(())
    }
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net").field("comm", &self.comm).finish()
    }
}

/// How many requests a thread waiting in a call on the window serves in a row before it
/// looks for its own reply again.
const SERVE_BATCH: usize = 16;

/// Serve up to [`SERVE_BATCH`] requests from a thread that waits in a call on the window
/// ([`Net::serve_here`]); nothing when another thread serves right now (it looks at the
/// queue again before it sleeps).
fn serve_batch<P: Port>(srv: &Mutex<Server>, port: &P, members: &[i32]) {
    let mut s = match srv.try_lock() {
        Ok(s) => s,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for _ in 0..SERVE_BATCH {
        if s.pass(port, members) != Pass::Served {
            break;
        }
    }
}

/// A request taken off the queue: its origin and bytes (`None`: receiving it failed, the
/// origin died).
type Taken = (usize, Option<Vec<u8>>);

/// The window's context as a [`Server`] uses it: requests in, replies out (a trait, so
/// that tests drive servers over a queue of their own).
trait Port {
    /// Take the next request off the queue: its origin and bytes (`None`: receiving it
    /// failed, the origin died); `Ok(None)`: nothing there; `Err(Gone)`: the engine is
    /// finalized or the context is gone.
    fn take(&self) -> Result<Option<Taken>, Gone>;
    /// Start sending reply `bytes` to origin `to`, without waiting; `Err` means `to` died.
    ///
    /// # Safety
    /// `bytes` must stay put until [`Port::test`] or [`Port::wait`] saw the send complete.
    /// Returns the send's handle.
    unsafe fn send(&self, to: usize, bytes: &[u8]) -> Result<u64, Gone>;
    /// Whether send `s` completed: `Some(failed)`, or `None` while on its way.
    fn test(&self, s: u64) -> Option<bool>;
    /// Wait for send `s` to complete.
    fn wait(&self, s: u64);
    /// World ranks the engine knows failed.
    fn failed_peers(&self) -> Vec<i32>;
}

/// Nothing more to serve: the engine is finalized (or the window's context is gone), or
/// a reply's origin died.
#[derive(Debug)]
struct Gone;

/// The engine and the window's context: requests come with [`TAG_REQ`], replies go with
/// [`TAG_REPLY`].
struct EnginePort(&'static Engine, EComm);

impl Port for EnginePort {
    fn take(&self) -> Result<Option<Taken>, Gone> {
        let (eng, ecomm) = (self.0, self.1);
        match eng.improbe(ANY_SOURCE, TAG_REQ, ecomm) {
            Ok(Some((m, st))) => {
                let mut buf = vec![0u8; st.count_bytes];
                // SAFETY: `buf` is ours and outlives the wait below.
                let r = unsafe { eng.imrecv(buf.as_mut_ptr(), buf.len(), m) }.map_err(|_| Gone)?;
                let st = eng.wait(r);
                let origin = st.source as usize;
                Ok(Some((origin, st.error.is_none().then_some(buf))))
            }
            Ok(None) => Ok(None),
            Err(_) => Err(Gone),
        }
    }

    unsafe fn send(&self, to: usize, bytes: &[u8]) -> Result<u64, Gone> {
        // SAFETY: the caller keeps `bytes` in place until the send completes.
        unsafe {
            self.0.isend(
                bytes.as_ptr(),
                bytes.len(),
                to as i32,
                TAG_REPLY,
                self.1,
                SendMode::Standard,
            )
        }
        .map(|r| r.0)
        .map_err(|_| Gone)
    }

    fn test(&self, s: u64) -> Option<bool> {
        self.0
            .test(oxmpi_engine::ReqId(s))
            .map(|st| st.error.is_some())
    }

    fn wait(&self, s: u64) {
        let _ = self.0.wait(oxmpi_engine::ReqId(s));
    }

    fn failed_peers(&self) -> Vec<i32> {
        self.0.failed_peers()
    }
}

/// What one [`Server::pass`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// Served a request or sent replies (a lock granted): look again at once.
    Served,
    /// Nothing to do.
    Idle,
    /// The engine is finalized (or the window's context is gone): nothing to serve.
    Gone,
}

/// The target side of a window: the core, the window memory and the replies on their
/// way, shared by the progress thread and any thread of the process that waits inside a
/// call on the window ([`Net::serve_here`]: an origin spinning for its target's reply
/// serves the requests that came for us meanwhile, so the progress thread need not be
/// woken and scheduled). A request is taken off the engine's queue and applied under the
/// mutex around this, so each origin's requests are applied in the order they came,
/// whichever thread serves them. Replies are sent without waiting and kept until
/// complete: a thread serving from inside its own wait must not block on a reply (two
/// ranks serving each other's large gets would each wait for the other to receive).
struct Server {
    core: TargetCore,
    mem: Box<dyn Memory + Send>,
    /// Replies sent and not complete yet: origin, send request and the bytes it reads.
    sending: Vec<(usize, u64, Vec<u8>)>,
}

impl Server {
    fn new(mem: Box<dyn Memory + Send>) -> Server {
        Server {
            core: TargetCore::new(),
            mem,
            sending: Vec::new(),
        }
    }

    /// Take one request off the window's context and run it through the core, or else
    /// retry the waiting lock requests (and see dead lock holders); send the replies.
    /// `members`: the world rank of each member of the window.
    fn pass<P: Port>(&mut self, port: &P, members: &[i32]) -> Pass {
        self.reap(port);
        match port.take() {
            Ok(taken) => self.apply(port, members, taken),
            Err(Gone) => Pass::Gone,
        }
    }

    /// The rest of [`Server::pass`] once `taken` (a request, or none) came off the
    /// queue. Taking and applying happen under the one mutex around the server, so the
    /// requests of each origin are applied in the order they were taken.
    fn apply<P: Port>(&mut self, port: &P, members: &[i32], taken: Option<Taken>) -> Pass {
        let (out, took) = match taken {
            Some((origin, bytes)) => {
                let out = match bytes {
                    None => self.core.peer_died(origin, &mut *self.mem),
                    Some(buf) => match Req::decode_at(&buf) {
                        Ok((epoch, req)) => self.core.handle_at(origin, epoch, req, &mut *self.mem),
                        Err(e) => vec![(
                            origin,
                            Reply {
                                code: MPI_ERR_INTERN,
                                detail: e.to_string(),
                                data: Vec::new(),
                            },
                        )],
                    },
                };
                (out, true)
            }
            None => {
                let mut out = self.core.poll(&mut *self.mem);
                // A lock holder that died without a word: only the engine's failure
                // detection tells (pidfd on this node, the broken or silent link elsewhere).
                if self.core.lock_contended() {
                    for w in port.failed_peers() {
                        if let Some(o) = members.iter().position(|&m| m == w) {
                            out.extend(self.core.peer_died(o, &mut *self.mem));
                        }
                    }
                }
                (out, false)
            }
        };
        let busy = took || !out.is_empty();
        self.reply(port, out);
        if busy {
            Pass::Served
        } else {
            Pass::Idle
        }
    }

    /// Send `out`'s replies without waiting; a reply that cannot be sent means its origin
    /// died.
    fn reply<P: Port>(&mut self, port: &P, mut out: proto::Out) {
        let mut i = 0;
        while i < out.len() {
            let o = out[i].0;
            let bytes = out[i].1.encode();
            i += 1;
            // SAFETY: `bytes` is kept in `sending` (its heap buffer does not move with
            // the vector) until the send completes ([`Server::reap`], [`Server::drain`]).
            match unsafe { port.send(o, &bytes) } {
                Ok(r) => self.sending.push((o, r, bytes)),
                Err(Gone) => out.extend(self.core.peer_died(o, &mut *self.mem)),
            }
        }
    }

    /// Forget the replies whose send completed; one that failed means its origin died.
    fn reap<P: Port>(&mut self, port: &P) {
        if self.sending.is_empty() {
            return;
        }
        let mut dead = Vec::new();
        self.sending.retain(|&(o, r, _)| match port.test(r) {
            None => true,
            Some(failed) => {
                if failed {
                    dead.push(o);
                }
                false
            }
        });
        for o in dead {
            let out = self.core.peer_died(o, &mut *self.mem);
            self.reply(port, out);
        }
    }

    /// Close our fence epoch if the `expected` requests of it (summed over the origins in
    /// the fence) have all been handled: the held requests of the next epoch are handled
    /// then and their replies sent. Whether it closed.
    fn close_epoch<P: Port>(&mut self, port: &P, expected: u64) -> bool {
        if !self.core.epoch_complete(expected) {
            return false;
        }
        let out = self.core.close_epoch(&mut *self.mem);
        self.reply(port, out);
        true
    }

    /// Wait for every reply on its way (the window is freed).
    fn drain<P: Port>(&mut self, port: &P) {
        for (_, r, _) in self.sending.drain(..) {
            port.wait(r);
        }
    }
}

/// The progress thread: serve the window's requests ([`Server::pass`]) while any come,
/// else spin a little or sleep until the next one. `members`: the world rank of each
/// member of the window; `remote`: those reached with messages.
fn serve(
    eng: &'static Engine,
    ecomm: EComm,
    stop: &AtomicBool,
    srv: &Mutex<Server>,
    members: &[i32],
    remote: &[i32],
) {
    let max_sleep = params::idle_sleep_max_us();
    let handoff = params::handoff_max();
    let mut idle: Option<std::time::Instant> = None;
    let mut sleep_us = 1u64;
    let lock = || srv.lock().unwrap_or_else(|p| p.into_inner());
    let port = EnginePort(eng, ecomm);
    while !stop.load(Ordering::Acquire) {
        let (pass, held_directly) = {
            let mut s = lock();
            (s.pass(&port, members), s.core.held_directly())
        };
        match pass {
            Pass::Gone => return,
            Pass::Served => {
                idle = None;
                sleep_us = 1;
                continue;
            }
            Pass::Idle => {}
        }
        let since = *idle.get_or_insert_with(std::time::Instant::now);
        // Another thread polling every transport rings us when a request comes (the
        // engine's hand-off), or serves it itself: no need to spin for it.
        if since.elapsed() < BUSY_SPIN && (handoff.is_zero() || !eng.polled()) {
            std::hint::spin_loop();
            continue;
        }
        // A lock holder's silent death is seen by the engine's failure detection, which
        // wakes us; a lock word held by a rank of our node (direct path) has nothing to
        // wake us: poll it.
        let waited = if held_directly {
            Ok(Wait::Opaque)
        } else {
            eng.wait_message(ANY_SOURCE, TAG_REQ, ecomm, remote, stop, handoff)
        };
        match waited {
            Ok(Wait::Opaque) => {
                std::thread::sleep(std::time::Duration::from_micros(sleep_us));
                sleep_us = (sleep_us * 2).min(max_sleep);
            }
            Ok(Wait::Ready | Wait::Slept | Wait::Timeout) => {}
            Err(_) => return,
        }
    }
    lock().drain(&port);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::{MPI_SUM, MPI_UINT8_T};
    use proto::Fail;
    use std::collections::VecDeque;
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    /// Window memory of one byte counter per origin: an accumulate adds its byte to the
    /// counter at its offset, and is logged (offset, byte) and counted.
    struct Counters {
        mem: [u8; 2],
        log: Arc<Mutex<Vec<(usize, u8)>>>,
        applied: Arc<AtomicUsize>,
    }

    impl Memory for Counters {
        fn put(&mut self, _: &[(isize, usize)], _: &[u8]) -> Result<(), Fail> {
            unreachable!("only accumulates and flushes here")
        }
        fn get(&mut self, _: &[(isize, usize)]) -> Result<Vec<u8>, Fail> {
            unreachable!("only accumulates and flushes here")
        }
        fn accumulate(
            &mut self,
            op: AccOp,
            ranges: &[(isize, usize)],
            data: &[u8],
            fetch: bool,
        ) -> Result<Vec<u8>, Fail> {
            assert_eq!((op.op, ranges.len(), data.len()), (MPI_SUM, 1, 1));
            let o = ranges[0].0 as usize;
            let old = self.mem[o];
            self.mem[o] = old.wrapping_add(data[0]);
            self.log.lock().unwrap().push((o, data[0]));
            self.applied.fetch_add(1, Ordering::SeqCst);
            Ok(if fetch { vec![old] } else { Vec::new() })
        }
        fn cas(&mut self, _: isize, _: &[u8], _: &[u8]) -> Result<Vec<u8>, Fail> {
            unreachable!("only accumulates and flushes here")
        }
        fn try_lock(&mut self, _: bool) -> bool {
            true
        }
        fn unlock(&mut self, _: bool) {}
        fn posted(&mut self, _: usize) {}
        fn completed(&mut self) {}
    }

    /// The window's context as a queue of requests (origin, bytes) and a log of the
    /// replies sent. A request taken by the thread named `in-call` is held, three times,
    /// until the other server applied two accumulates (the other origin's next one and
    /// this origin's next one) or 200 ms passed: while the taker holds the server's mutex
    /// (as it must) nobody can apply anything meanwhile, and the hold only costs time; a
    /// taker without the mutex would let the other server apply a later request of the
    /// same origin first.
    struct Queue {
        reqs: Mutex<VecDeque<(usize, Vec<u8>)>>,
        replies: Mutex<Vec<(usize, Reply)>>,
        applied: Arc<AtomicUsize>,
        /// Requests the `in-call` thread took.
        taken_in_call: AtomicUsize,
    }

    impl Port for Queue {
        fn take(&self) -> Result<Option<Taken>, Gone> {
            let next = self.reqs.lock().unwrap().pop_front();
            if next.is_some() && std::thread::current().name() == Some("in-call") {
                let k = self.taken_in_call.fetch_add(1, Ordering::SeqCst);
                if k < 12 && k % 4 == 1 {
                    let a = self.applied.load(Ordering::SeqCst);
                    let t0 = Instant::now();
                    while self.applied.load(Ordering::SeqCst) < a + 2
                        && t0.elapsed() < Duration::from_millis(200)
                    {
                        std::thread::yield_now();
                    }
                }
            }
            Ok(next.map(|(o, b)| (o, Some(b))))
        }
        unsafe fn send(&self, to: usize, bytes: &[u8]) -> Result<u64, Gone> {
            let r = Reply::decode(bytes).expect("a reply that decodes");
            self.replies.lock().unwrap().push((to, r));
            Ok(0)
        }
        fn test(&self, _: u64) -> Option<bool> {
            Some(false)
        }
        fn wait(&self, _: u64) {}
        fn failed_peers(&self) -> Vec<i32> {
            Vec::new()
        }
    }

    /// Two servers of one window at once, as the progress thread and a thread serving
    /// inside a call on the window (an origin waiting for its reply, a fence's barrier)
    /// are: two origins' accumulates, every fifth fetching, then a flush each. Each
    /// origin's accumulates must be applied in the order it sent them, whichever server
    /// took them, and every reply must be sent once, in order, with the value the
    /// accumulates before it left.
    #[test]
    fn two_servers_apply_each_origins_requests_in_order_and_lose_no_reply() {
        const N: u8 = 40;
        let op = AccOp {
            op: MPI_SUM,
            basic: MPI_UINT8_T,
            bsize: 1,
        };
        let mut reqs = VecDeque::new();
        for seq in 1..=N {
            for origin in 0..2usize {
                let req = Req::Acc {
                    op,
                    fetch: seq % 5 == 0,
                    ranges: vec![(origin as isize, 1)],
                    data: vec![seq],
                };
                reqs.push_back((origin, req.encode_at(0)));
            }
        }
        for origin in 0..2usize {
            reqs.push_back((origin, Req::Flush.encode_at(0)));
        }
        let applied = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let srv = Mutex::new(Server::new(Box::new(Counters {
            mem: [0; 2],
            log: log.clone(),
            applied: applied.clone(),
        })));
        let q = Queue {
            reqs: Mutex::new(reqs),
            replies: Mutex::new(Vec::new()),
            applied,
            taken_in_call: AtomicUsize::new(0),
        };
        let fetches = (1..=N).filter(|s| s % 5 == 0).count();
        let expected = 2 * (fetches + 1);
        let members = [10, 11];
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let (srv, q, done, members) = (&srv, &q, &done, &members[..]);
            // The progress thread: takes the mutex and serves, and lets go a while.
            let progress = std::thread::Builder::new()
                .name("progress".into())
                .spawn_scoped(s, move || {
                    while !done.load(Ordering::Acquire) {
                        let _ = srv.lock().unwrap().pass(q, members);
                        std::thread::sleep(Duration::from_micros(20));
                    }
                })
                .expect("spawn");
            // A thread waiting inside a call on the window: serves in batches whenever
            // the mutex is free.
            let in_call = std::thread::Builder::new()
                .name("in-call".into())
                .spawn_scoped(s, move || {
                    while !done.load(Ordering::Acquire) {
                        serve_batch(srv, q, members);
                        std::hint::spin_loop();
                    }
                })
                .expect("spawn");
            let t0 = Instant::now();
            while q.replies.lock().unwrap().len() < expected
                && t0.elapsed() < Duration::from_secs(20)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Anything more (a reply sent twice) shows below.
            std::thread::sleep(Duration::from_millis(20));
            done.store(true, Ordering::Release);
            progress.join().expect("progress thread");
            in_call.join().expect("in-call thread");
        });
        let log = log.lock().unwrap().clone();
        let replies = q.replies.lock().unwrap().clone();
        assert!(
            q.taken_in_call.load(Ordering::SeqCst) >= 12,
            "the in-call thread served too little to test anything: {} requests",
            q.taken_in_call.load(Ordering::SeqCst)
        );
        for origin in 0..2usize {
            let order: Vec<u8> = log.iter().filter(|e| e.0 == origin).map(|e| e.1).collect();
            assert_eq!(
                order,
                (1..=N).collect::<Vec<u8>>(),
                "origin {origin}'s accumulates applied out of order"
            );
            let got: Vec<Vec<u8>> = replies
                .iter()
                .filter(|r| r.0 == origin)
                .map(|r| {
                    assert_eq!(r.1.code, MPI_SUCCESS, "origin {origin}: {}", r.1.detail);
                    r.1.data.clone()
                })
                .collect();
            let mut want: Vec<Vec<u8>> = (1..=N)
                .filter(|s| s % 5 == 0)
                .map(|s| vec![(1..s).fold(0u8, |a, b| a.wrapping_add(b))])
                .collect();
            want.push(Vec::new());
            assert_eq!(
                got, want,
                "origin {origin}'s replies (fetched values, then the flush's)"
            );
        }
        assert!(q.reqs.lock().unwrap().is_empty(), "requests left unserved");
    }
}
