//! Requests: their states, the request table ([`Slab`]) and completion.

use super::State;
use crate::pml::matching::Envelope;
use crate::{ErrorClass, ReqId, Status, ANY_SOURCE, ANY_TAG, PROC_NULL};

#[derive(Debug)]
pub(crate) enum ReqState {
    Done,
    /// A send waiting for its ring write, acknowledgement, clear-to-send or FIN.
    Send {
        peer: i32,
        ptr: *const u8,
        len: usize,
        /// A rendezvous (longer than the eager limit when it started): counted in the
        /// peer's [`rndv_sends`](crate::pml::peer::Peer::rndv_sends) until it leaves this
        /// state.
        rndv: bool,
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
    /// A send or receive of `pml cm`, in flight in the provider (`tok`: a receive's
    /// operation, which cancel names).
    Offload {
        tok: Option<u64>,
    },
    /// A matched rendezvous receive waiting for data fragments.
    Data {
        buf: *mut u8,
        want: usize,
        got: usize,
        peer: i32,
        /// When the clear-to-send went out (nanoseconds since start), if the transfer's
        /// throughput feeds the peer's [`Chooser`](crate::coop::Chooser); 0 otherwise.
        since: u64,
        /// Chosen while we were sending to the peer too: its throughput feeds the
        /// chooser for traffic in both directions.
        both_ways: bool,
        /// A fragment came through the bulk buffer's first pass ([`F_COLD`]): the
        /// transfer's time is not the mechanism's, it feeds no rate.
        ///
        /// [`F_COLD`]: super::hdr::F_COLD
        cold: bool,
    },
}

/// How a send started: complete at once (no request needed) or as a request.
#[derive(Debug)]
pub(crate) enum Started {
    Done(Status),
    Req(ReqId),
}

#[derive(Debug)]
pub(crate) struct Req {
    pub(crate) state: ReqState,
    pub(crate) status: Status,
    /// Freed automatically on completion (buffered sends, `MPI_Request_free`).
    pub(crate) detached: bool,
    /// Data owned by the request (buffered sends).
    pub(crate) _owned: Option<Vec<u8>>,
}

/// Request table: slots reused through a free list; an id is `generation << 32 | index`, so a
/// stale id (request already freed) is recognised.
#[derive(Debug, Default)]
pub(crate) struct Slab {
    pub(crate) slots: Vec<(u32, Option<Req>)>,
    pub(crate) free: Vec<u32>,
}

impl Slab {
    #[inline(always)]
    pub(crate) fn insert(&mut self, r: Req) -> u64 {
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

    #[inline]
    pub(crate) fn slot(&self, id: u64) -> Option<&(u32, Option<Req>)> {
        self.slots
            .get((id & 0xffff_ffff) as usize)
            .filter(|s| s.0 as u64 == id >> 32)
    }

    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<&Req> {
        self.slot(id)?.1.as_ref()
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut Req> {
        self.slot(id)?;
        self.slots[(id & 0xffff_ffff) as usize].1.as_mut()
    }

    #[inline]
    pub(crate) fn remove(&mut self, id: u64) -> Option<Req> {
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
    pub(crate) fn take_if_done(&mut self, id: u64) -> Option<Status> {
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

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Req)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, (g, r))| r.as_ref().map(|r| ((*g as u64) << 32 | i as u64, r)))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Req> {
        self.slots.iter().filter_map(|s| s.1.as_ref())
    }
}

pub(crate) fn bad_request() -> Status {
    Status {
        source: PROC_NULL,
        tag: ANY_TAG,
        error: Some(ErrorClass::Request),
        count_bytes: 0,
        cancelled: false,
    }
}

pub(crate) fn msg_status(env: Envelope, len: usize) -> Status {
    Status {
        source: env.src,
        tag: env.tag,
        error: None,
        count_bytes: len,
        cancelled: false,
    }
}

pub(crate) fn empty_status() -> Status {
    Status {
        source: ANY_SOURCE,
        tag: ANY_TAG,
        error: None,
        count_bytes: 0,
        cancelled: false,
    }
}

impl State {
    #[inline]
    pub(crate) fn new_req(&mut self, state: ReqState) -> u64 {
        self.reqs.insert(Req {
            state,
            status: empty_status(),
            detached: false,
            _owned: None,
        })
    }

    pub(crate) fn new_done(&mut self, status: Status) -> ReqId {
        let id = self.new_req(ReqState::Done);
        self.reqs.get_mut(id).expect("just inserted").status = status;
        ReqId(id)
    }

    /// Marks a request complete (and drops it if detached).
    pub(crate) fn finish(&mut self, id: u64) {
        if let Some(q) = self.reqs.get_mut(id) {
            let was = std::mem::replace(&mut q.state, ReqState::Done);
            if q.detached {
                self.reqs.remove(id);
            }
            self.left_send(&was);
        }
    }

    /// A request left state `was`: a rendezvous send no longer counts as under way to its
    /// peer ([`State::sending_rndv_to`]).
    #[inline]
    pub(crate) fn left_send(&mut self, was: &ReqState) {
        if let ReqState::Send {
            peer, rndv: true, ..
        } = *was
        {
            let n = &mut self.peers[peer as usize].rndv_sends;
            debug_assert!(*n > 0, "rendezvous sends to {peer} counted");
            if *n > 0 {
                *n -= 1;
                self.rndv_sends_all -= 1;
            }
        }
    }

    pub(crate) fn fail(&mut self, id: u64, class: ErrorClass) {
        if let Some(q) = self.reqs.get_mut(id) {
            q.status.error = Some(class);
        }
        self.finish(id);
    }

    #[inline]
    pub(crate) fn take_done(&mut self, r: ReqId) -> Option<Status> {
        self.reqs.take_if_done(r.0)
    }

    /// The status of request `r` if it is complete, without freeing it
    /// (`MPI_Request_get_status`); a failure-pending receive gives the status
    /// [`State::take_done_or_pending`] gives it (ULFM).
    pub(crate) fn request_status(&self, r: ReqId) -> Option<Status> {
        match self.reqs.get(r.0) {
            Some(q) if matches!(q.state, ReqState::Done) => Some(q.status),
            Some(_) if self.failure_pending(r.0) => Some(Status {
                error: Some(ErrorClass::ProcFailedPending),
                ..empty_status()
            }),
            Some(_) => None,
            None => Some(bad_request()),
        }
    }

    /// `MPI_Request_free`: a complete request goes now, one in progress when it completes.
    pub(crate) fn request_free(&mut self, r: ReqId) {
        if let Some(q) = self.reqs.get_mut(r.0) {
            if matches!(q.state, ReqState::Done) {
                self.reqs.remove(r.0);
            } else {
                q.detached = true;
            }
        }
    }
}
