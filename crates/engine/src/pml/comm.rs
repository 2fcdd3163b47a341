//! Communicators: the table of the engine's communicators (context id, local and remote
//! groups as world ranks, our rank) and the argument checks that use it.

use super::State;
use crate::{CommId, Error, ErrorClass, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};

/// One communicator.
#[derive(Clone, Debug)]
pub(crate) struct Comm {
    pub(crate) ctx: u32,
    /// World rank of each communicator rank (the local group).
    pub(crate) group: Vec<i32>,
    /// World rank of each peer rank: the group that destination and source ranks index.
    /// Equal to `group` for an intracommunicator; the remote group of an intercommunicator.
    pub(crate) remote: Vec<i32>,
    pub(crate) rank: i32,
    /// Its traffic counters (plain integers under the engine's lock), counted only while
    /// `watched` is not 0.
    pub(crate) stats: super::stats::CommStats,
    /// Readers of its counters now (tools-interface handles bound to it): while there are
    /// none, nothing is counted (a reader sees only what happened since it started).
    pub(crate) watched: u32,
    /// The same counters per peer rank (indexed like `remote`), allocated when the first
    /// reader starts and counted, like `stats`, only while `watched` is not 0.
    pub(crate) peer_stats: Vec<super::stats::CommStats>,
    /// The next number of its sequence (`Engine::comm_next_seq`): 0 when it is made, so a
    /// communicator that reuses a freed one's context id starts afresh at every member.
    pub(crate) seq: u32,
}

impl Comm {
    /// Counts a message of `len` bytes sent to peer rank `dest` (if it is read now).
    #[inline]
    pub(crate) fn count_sent(&mut self, dest: i32, len: usize) {
        if self.watched != 0 {
            self.stats.sent(len);
            if let Some(p) = usize::try_from(dest)
                .ok()
                .and_then(|d| self.peer_stats.get_mut(d))
            {
                p.sent(len);
            }
        }
    }

    /// Counts a message of `len` bytes that arrived from peer rank `src` (if it is read
    /// now).
    #[inline]
    pub(crate) fn count_arrived(&mut self, src: i32, len: usize) {
        if self.watched != 0 {
            self.stats.arrived(len);
            if let Some(p) = usize::try_from(src)
                .ok()
                .and_then(|s| self.peer_stats.get_mut(s))
            {
                p.arrived(len);
            }
        }
    }
}

impl State {
    #[inline]
    pub(crate) fn comm(&self, c: CommId) -> Result<&Comm, Error> {
        self.comms
            .get(c.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::arg(ErrorClass::Comm, format!("invalid communicator {}", c.0)))
    }

    pub(crate) fn check_probe_args(&self, src: i32, tag: i32, comm: CommId) -> Result<(), Error> {
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

    /// Adds a communicator (see `Engine::comm_create_inter`).
    pub(crate) fn comm_create(
        &mut self,
        ctx: u32,
        group: Vec<i32>,
        remote: Option<Vec<i32>>,
    ) -> Result<CommId, Error> {
        if self.ctx_comm.contains_key(&ctx) {
            return Err(Error::arg(
                ErrorClass::Comm,
                format!("context id {ctx} already in use"),
            ));
        }
        let rank = group.iter().position(|&w| w == self.me).ok_or_else(|| {
            Error::arg(
                ErrorClass::Group,
                "calling rank is not in the group".to_string(),
            )
        })? as i32;
        let remote = remote.unwrap_or_else(|| group.clone());
        let size = self.peers.len() as i32;
        if let Some(&bad) = group
            .iter()
            .chain(remote.iter())
            .find(|&&w| w < 0 || w >= size)
        {
            return Err(Error::arg(
                ErrorClass::Rank,
                format!("world rank {bad} in group"),
            ));
        }
        let id = self.comms.len() as u32;
        self.comms.push(Some(Comm {
            ctx,
            group,
            remote,
            rank,
            stats: Default::default(),
            watched: 0,
            peer_stats: Vec::new(),
            seq: 0,
        }));
        self.ctx_comm.insert(ctx, id);
        Ok(CommId(id))
    }

    /// Starts (`on`) or stops one reader of communicator `comm`'s counters (see
    /// [`Comm::watched`]); a communicator that no longer exists is left alone.
    pub(crate) fn comm_watch(&mut self, comm: CommId, on: bool) {
        if let Some(Some(c)) = self.comms.get_mut(comm.0 as usize) {
            if on {
                if c.peer_stats.is_empty() {
                    c.peer_stats = vec![Default::default(); c.remote.len()];
                }
                c.watched += 1;
                self.comms_watched += 1;
            } else if c.watched > 0 {
                c.watched -= 1;
                self.comms_watched -= 1;
            }
        }
    }

    /// The next number of `comm`'s sequence (see `Engine::comm_next_seq`).
    pub(crate) fn comm_next_seq(&mut self, comm: CommId) -> Result<u32, Error> {
        let c = self
            .comms
            .get_mut(comm.0 as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| {
                Error::arg(ErrorClass::Comm, format!("invalid communicator {}", comm.0))
            })?;
        let v = c.seq;
        c.seq = v.wrapping_add(1);
        Ok(v)
    }

    /// Whether context ids `ctx..ctx + span` are idle (see `Engine::contexts_idle`).
    pub(crate) fn contexts_idle(&self, ctx: u32, span: u32) -> bool {
        let quiet = |c: u32| {
            !self.ctx_comm.contains_key(&c)
                && self.matcher.idle_on(c)
                && !self.deferred.iter().any(|(_, e, _)| e.ctx == c)
                && !self.messages.values().any(|(e, _)| e.ctx == c)
        };
        (ctx..ctx.saturating_add(span)).all(quiet)
            && self
                .cm
                .as_ref()
                .is_none_or(|cm| !cm.recv_on_freed(&self.comms))
    }

    /// The user context ids `0..n` the transports carry (see `Engine::context_limit`).
    pub(crate) fn context_limit(&self) -> u32 {
        self.cm.as_ref().map_or(1 << 31, |cm| cm.max_contexts())
    }

    /// Removes a communicator added by [`State::comm_create`].
    pub(crate) fn comm_free(&mut self, comm: CommId) -> Result<(), Error> {
        if comm.0 < 2 {
            return Err(Error::arg(
                ErrorClass::Comm,
                "cannot free a predefined communicator",
            ));
        }
        let (c, watched) = {
            let c = self.comm(comm)?;
            (c.ctx, c.watched)
        };
        self.comms_watched -= watched;
        self.comms[comm.0 as usize] = None;
        self.ctx_comm.remove(&c);
        self.revoked.remove(&c);
        self.acked.remove(&c);
        Ok(())
    }
}
