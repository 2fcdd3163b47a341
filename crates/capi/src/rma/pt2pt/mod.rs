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
//! remember which targets got unacknowledged puts or accumulates ("dirty"); flush, unlock,
//! fence and window free ask those targets for an acknowledgement. PSCW's `complete` is a
//! message that the target counts after applying everything sent before it.
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
//! request off a socket.
//!
//! Serving in place: a thread of the target's process that waits inside a call on the
//! window (an origin spinning for a reply, a fence's barrier, [`Net::barrier`]) serves
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
use std::sync::atomic::{AtomicBool, Ordering};
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
        let mut s = match srv.try_lock() {
            Ok(s) => s,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        for _ in 0..SERVE_BATCH {
            if s.pass(self.eng, self.ecomm, &self.world) != Pass::Served {
                break;
            }
        }
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
        let bytes = req.encode();
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
            None => Ok(()),
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

    /// A barrier on the window's communicator (`coll`, its collective view) during which
    /// this thread serves the requests that come for the window (a fence's: the peers'
    /// last operations and flushes of the epoch are applied here, not by the progress
    /// thread, which would have to be woken and scheduled).
    pub(crate) fn barrier(&self, coll: &crate::comm::Internal) -> MpiResult {
        let mut s = coll.ibarrier()?;
        let serving = self.eng.serving(TAG_REQ, self.ecomm).map_err(err)?;
        let since = std::time::Instant::now();
        let r = loop {
            self.serve_here();
            if let Some(r) = coll.progress(&mut s) {
                break r;
            }
            // As a blocking barrier's wait: spin a while, then yield on every pass.
            if since.elapsed() < BUSY_SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        };
        drop(serving);
        // What came while we served rang nobody: serve it now.
        self.serve_here();
        r
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
    sending: Vec<(usize, oxmpi_engine::ReqId, Vec<u8>)>,
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
    fn pass(&mut self, eng: &'static Engine, ecomm: EComm, members: &[i32]) -> Pass {
        self.reap(eng, ecomm);
        let (out, took) = match eng.improbe(ANY_SOURCE, TAG_REQ, ecomm) {
            Ok(Some((m, st))) => {
                let mut buf = vec![0u8; st.count_bytes];
                // SAFETY: `buf` is ours and outlives the wait below.
                let st = match unsafe { eng.imrecv(buf.as_mut_ptr(), buf.len(), m) } {
                    Ok(r) => eng.wait(r),
                    Err(_) => return Pass::Gone,
                };
                let origin = st.source as usize;
                let out = if st.error.is_some() {
                    self.core.peer_died(origin, &mut *self.mem)
                } else {
                    match Req::decode(&buf) {
                        Ok(req) => self.core.handle(origin, req, &mut *self.mem),
                        Err(e) => vec![(
                            origin,
                            Reply {
                                code: MPI_ERR_INTERN,
                                detail: e.to_string(),
                                data: Vec::new(),
                            },
                        )],
                    }
                };
                (out, true)
            }
            Ok(None) => {
                let mut out = self.core.poll(&mut *self.mem);
                // A lock holder that died without a word: only the engine's failure
                // detection tells (pidfd on this node, the broken or silent link elsewhere).
                if self.core.lock_contended() {
                    for w in eng.failed_peers() {
                        if let Some(o) = members.iter().position(|&m| m == w) {
                            out.extend(self.core.peer_died(o, &mut *self.mem));
                        }
                    }
                }
                (out, false)
            }
            Err(_) => return Pass::Gone,
        };
        let busy = took || !out.is_empty();
        self.reply(eng, ecomm, out);
        if busy {
            Pass::Served
        } else {
            Pass::Idle
        }
    }

    /// Send `out`'s replies without waiting; a reply that cannot be sent means its origin
    /// died.
    fn reply(&mut self, eng: &'static Engine, ecomm: EComm, mut out: proto::Out) {
        let mut i = 0;
        while i < out.len() {
            let o = out[i].0;
            let bytes = out[i].1.encode();
            i += 1;
            // SAFETY: `bytes` is kept in `sending` (its heap buffer does not move with
            // the vector) until the send completes ([`Server::reap`], [`Server::drain`]).
            let sent = unsafe {
                eng.isend(
                    bytes.as_ptr(),
                    bytes.len(),
                    o as i32,
                    TAG_REPLY,
                    ecomm,
                    SendMode::Standard,
                )
            };
            match sent {
                Ok(r) => self.sending.push((o, r, bytes)),
                Err(_) => out.extend(self.core.peer_died(o, &mut *self.mem)),
            }
        }
    }

    /// Forget the replies whose send completed; one that failed means its origin died.
    fn reap(&mut self, eng: &'static Engine, ecomm: EComm) {
        if self.sending.is_empty() {
            return;
        }
        let mut dead = Vec::new();
        self.sending.retain(|&(o, r, _)| match eng.test(r) {
            None => true,
            Some(st) => {
                if st.error.is_some() {
                    dead.push(o);
                }
                false
            }
        });
        for o in dead {
            let out = self.core.peer_died(o, &mut *self.mem);
            self.reply(eng, ecomm, out);
        }
    }

    /// Wait for every reply on its way (the window is freed).
    fn drain(&mut self, eng: &'static Engine) {
        for (_, r, _) in self.sending.drain(..) {
            let _ = eng.wait(r);
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
    while !stop.load(Ordering::Acquire) {
        let (pass, held_directly) = {
            let mut s = lock();
            (s.pass(eng, ecomm, members), s.core.held_directly())
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
    lock().drain(eng);
}
