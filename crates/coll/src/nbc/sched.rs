//! Nonblocking collectives as **schedules**: rounds of point-to-point transfers on the
//! collective context followed by local steps (reductions, copies), advanced by
//! [`Schedule::progress`] without ever blocking.
//!
//! A round posts all its receives, then all its sends; when every transfer of the round
//! has completed its local steps run (in the order they were added), and the next round is
//! posted. Each schedule uses its own tag (`TAG_ICOLL_BASE` plus a per-communicator
//! sequence number that every member advances in the same order, as MPI orders collectives
//! on a communicator), so several nonblocking collectives on one communicator — and
//! blocking ones started meanwhile — never match each other's messages. A transfer may add
//! a *sub-tag* ([`Lane::sub`]) when one pair of ranks exchanges several messages whose
//! order alone does not say which is which (neighbourhood collectives on periodic grids).
//!
//! Buffers are [`Region`]s: the caller's memory (raw, valid until completion by the MPI
//! contract) or byte vectors owned by the schedule (scratch, packed data), which the
//! caller can take back after completion with [`Schedule::take_owned`].
//!
//! The builders on [`CollComm`] below make the schedules of the intracommunicator
//! collectives; callers with other needs (neighbourhood and intercommunicator collectives,
//! per-peer datatypes) compose a schedule step by step with [`Schedule::new`],
//! [`Schedule::next_round`], [`Schedule::send`], [`Schedule::recv`], [`Schedule::reduce`]
//! and [`Schedule::copy`]; a schedule may move messages on several engine communicators
//! ([`Schedule::add_link`], e.g. an intercommunicator and its local group).

use crate::base::helpers::{
    bcast_differs, bcast_tree, chain_segments, fold_real_rank, fold_sizes, lengths_differ, pooled,
    rabenseifner_plan, scan_chain, scan_rounds, unpool, RabStep, ScanLens, SCAN_HDR,
    TRUNCATED_ABOVE,
};
use crate::base::stats::{count, Alg};
use crate::sm::lengths_error;
use crate::sm::nb::{Progress, SmNb, SCATTER_MSG_MARK};
use crate::sm::{Seg, SmKind};
use crate::tune::{self, Coll};
use crate::{arg_err, CollComm, Result};
use oxmpi_engine::{Error, ErrorClass, ReqId, PROC_NULL, TAG_MARK};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// First tag of nonblocking collective schedules (then `+ seq mod 2^16 + sub * 2^16`).
const TAG_ICOLL_BASE: i32 = 1 << 21;
/// Sub-tags must stay below this (the tag stays below the engine's `TAG_UB`).
const SUB_LIMIT: u16 = 1 << 13;

/// First tag of the messages of the segment's nonblocking v-collectives (blocks too large
/// for it, see [`Schedule::shared`]), then `+ seq mod 2^20` of the segment's nonblocking
/// sequence: above the schedules' tags (below `2^29 + 2^21`) and the partitions'
/// (`oxmpi_engine::partition`, below `2^29 + 2^28 + 2^22 + 16`), below `TAG_UB`.
const TAG_SM_V_BASE: i32 = (1 << 29) + (1 << 28) + (1 << 23);

/// The tag of the messages of the segment's nonblocking collective `seq` (its sequence
/// number, [`SmNb::seq`]): [`TAG_SM_V_BASE`] `+ seq mod 2^20`.
pub(crate) fn sm_tag(seq: u64) -> i32 {
    TAG_SM_V_BASE + (seq & 0xf_ffff) as i32
}

/// Schedules planned so far in this process ([`planned`]).
static PLANNED: AtomicU64 = AtomicU64::new(0);

/// How many schedules this process has planned ([`Schedule::new`] calls): a persistent
/// collective plans once at its init and only restarts its schedule afterwards
/// ([`Schedule::restart`]), which tests check with this counter.
pub fn planned() -> u64 {
    PLANNED.load(Ordering::Relaxed)
}

/// The communicator's next schedule tag (see [`Schedule::new`]): from the sequence of
/// the engine communicator the traffic travels on (`Engine::comm_next_seq`), which starts
/// at 0 with it, also when it reuses the context id of a freed one.
fn next_tag(cc: &CollComm) -> Result<i32> {
    let v = cc.e.comm_next_seq(cc.shadow)?;
    Ok(TAG_ICOLL_BASE + (v & 0xffff) as i32)
}

/// An owned reduction callback: `f(in, inout)` computes `inout = in ∘ inout`.
pub type ReduceFn = dyn Fn(&[u8], &mut [u8]) + Send;

/// A reduction operation a schedule can own (and run on another thread).
pub struct OwnedOp {
    /// `f(in, inout)`: `inout = in ∘ inout` elementwise (see [`crate::Op`]).
    pub f: Box<ReduceFn>,
    /// Size of one element in bytes.
    pub elem_size: usize,
    /// `∘` is commutative.
    pub commutative: bool,
}

/// Memory a schedule reads and writes.
pub enum Region {
    /// The caller's memory: `len` bytes at the pointer.
    Raw(*mut u8, usize),
    /// Bytes owned by the schedule.
    Owned(Vec<u8>),
}

impl Region {
    /// Where the region's bytes are and how many.
    pub(crate) fn ptr_len(&mut self) -> (*mut u8, usize) {
        match self {
            Region::Raw(p, n) => (*p, *n),
            Region::Owned(v) => (v.as_mut_ptr(), v.len()),
        }
    }
}

/// A place in a schedule: (region index, byte offset).
pub type At = (usize, usize);

/// Where a transfer travels: `link` selects the engine communicator (0: the collective's
/// own context, others added with [`Schedule::add_link`]) and `sub` is added to the
/// schedule's tag (in units of 2^16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lane {
    /// Index of the communicator (0: the one the schedule was made for).
    pub link: u8,
    /// Sub-tag (below 8192).
    pub sub: u16,
}

enum Step {
    Send {
        at: At,
        len: usize,
        peer: i32,
        lane: Lane,
    },
    Recv {
        at: At,
        len: usize,
        peer: i32,
        lane: Lane,
    },
    /// `dst = src ∘ dst` over `len` bytes.
    Reduce { src: At, dst: At, len: usize },
    /// `dst = src` over `len` bytes.
    Copy { src: At, dst: At, len: usize },
    /// `dst = src` over `len` bytes as soon as the round's transfers are posted, while they
    /// travel (a rooted collective's own block): touches none of their bytes.
    CopyAtPost { src: At, dst: At, len: usize },
    /// A receive of at most `room` bytes whose length and bytes a scan's length check
    /// reads once the round ended ([`ScanCheck`]); an exact schedule expects `want` bytes
    /// (`usize::MAX`: any length, a longer message too, goes).
    Watch {
        at: At,
        room: usize,
        want: usize,
        peer: i32,
    },
}

fn snd(at: At, len: usize, peer: i32) -> Step {
    Step::Send {
        at,
        len,
        peer,
        lane: Lane::default(),
    }
}

fn rcv(at: At, len: usize, peer: i32) -> Step {
    Step::Recv {
        at,
        len,
        peer,
        lane: Lane::default(),
    }
}

#[derive(Default)]
struct Round(Vec<Step>);

/// One combining exchange of a reduction schedule: `b` accumulates our partial result
/// (`ready`: it holds it; otherwise ours is still only at `inp`), `n` bytes with `peer`.
struct Exchange {
    b: At,
    inp: At,
    ready: bool,
    n: usize,
    peer: i32,
}

impl Round {
    /// Receive the peer's partial result and combine it with ours into `ex.b`, in rank
    /// order (`higher`: the peer's covers the ranks above ours, so `b = ours ∘ peer`;
    /// otherwise `b = peer ∘ ours`). While `b` does not hold ours yet, the peer's vector is
    /// received straight into `b` and ours folded in from `ex.inp` where the order allows;
    /// `tmp` is scratch of `n` bytes, added to `regions` on first need. Returns that `b`
    /// now holds our partial result.
    fn combine(
        &mut self,
        ex: Exchange,
        higher: bool,
        commutative: bool,
        tmp: &mut Option<usize>,
        regions: &mut Vec<Region>,
    ) -> bool {
        let Exchange {
            b,
            inp,
            ready,
            n,
            peer,
        } = ex;
        if !ready && (higher || commutative) {
            self.0.push(rcv(b, n, peer));
            self.0.push(Step::Reduce {
                src: inp,
                dst: b,
                len: n,
            });
            return true;
        }
        let t = (
            *tmp.get_or_insert_with(|| {
                regions.push(Region::Owned(pooled(n)));
                regions.len() - 1
            }),
            0,
        );
        self.0.push(rcv(t, n, peer));
        if !ready {
            self.0.push(Step::Copy {
                src: inp,
                dst: b,
                len: n,
            });
        }
        if commutative || !higher {
            self.0.push(Step::Reduce {
                src: t,
                dst: b,
                len: n,
            });
        } else {
            self.0.push(Step::Reduce {
                src: b,
                dst: t,
                len: n,
            });
            self.0.push(Step::Copy {
                src: t,
                dst: b,
                len: n,
            });
        }
        true
    }
}

/// The length check of a receiving rank of a point-to-point `MPI_Ibcast`
/// ([`CollComm::ibcast`]): its first receive (planned round 0) is watched, and the rounds
/// after it are added once it ended ([`Schedule::bcast_next`]).
struct BcastNb {
    /// Region of our buffer.
    buf: usize,
    /// Bytes of our buffer.
    n: usize,
    /// Region of the 8-byte header of a marker.
    head: usize,
    /// Our parent in the binomial tree.
    parent: i32,
    /// Our children in the binomial tree.
    children: Vec<i32>,
    /// Rounds of the plan; those after them were added while running.
    planned: usize,
    /// What the first receive got: bytes and error.
    got: Option<(usize, Option<ErrorClass>)>,
    /// The round that receives a marker's header, once added.
    header_round: Option<usize>,
}

/// The length check of a nonblocking scan or exscan on more than 2 ranks whose lengths no
/// segment's gate checked ([`CollComm::iscan_from`]), as the blocking scan's
/// (`CollComm::scan_into`): a rank of the chain first runs recursive doubling's messages
/// (the same pairs and directions) with a length header ([`ScanLens`], [`SCAN_HDR`] bytes:
/// the lengths its partial would cover) in place of the partial, and after them takes the
/// chain only when every rank below passes its length; a rank of recursive doubling
/// receives with room for a header, fails on one, and takes and drops the chain of rank
/// `r - 1` when every lower partner sent one. Rounds are added while running (the drain),
/// after the `planned` ones.
struct ScanCheck {
    /// Our vector's bytes.
    n: usize,
    /// Bytes of an element (the chain cuts its segments at whole elements).
    elem: usize,
    /// We run the chain: rounds `0..=decide` carry headers; their end decides.
    chain: bool,
    /// The last header round (chain).
    decide: usize,
    /// Per header round (chain): its header extends our partial's lengths.
    keep: Vec<bool>,
    /// Region of the header we send (chain only): the lengths our partial covers.
    hout: usize,
    /// The lengths our partial covers (chain).
    part: ScanLens,
    /// The lengths of the ranks below us as the lower partners' messages told them.
    below: ScanLens,
    /// The watched receive in flight ([`Step::Watch`]).
    watch: Option<ReqId>,
    /// What it got: bytes, and whether the message is no header whatever its bytes
    /// (longer than its room, or not marked: a partial; see [`oxmpi_engine::TAG_MARK`]).
    got: Option<(usize, bool)>,
    /// Rounds of the plan; the drain's are added after them.
    planned: usize,
}

impl ScanCheck {
    /// Back to the state before the first round (a restart).
    fn reset(&mut self) {
        (self.part, self.below) = (ScanLens::of(self.n), ScanLens::NONE);
        (self.watch, self.got) = (None, None);
    }
}

/// A nonblocking collective in progress.
pub struct Schedule {
    cc: CollComm,
    /// Communicators transfers travel on (`links[0]` is `cc`).
    links: Vec<CollComm>,
    tag: i32,
    regions: Vec<Region>,
    /// The plan: every round, kept for [`Schedule::restart`].
    rounds: Vec<Round>,
    /// Index of the next round to post.
    next: usize,
    /// Index of the round whose transfers are in flight.
    current: Option<usize>,
    pending: Vec<(ReqId, i32)>,
    /// Per pending transfer (in step with `pending`): the bytes a receive of an exact
    /// schedule expects, else `usize::MAX`.
    want: Vec<usize>,
    /// A reduction's schedule (`iallreduce`): every message has the length its receive
    /// posted; one that differs (erroneous arguments) is reported at the end
    /// (`MPI_ERR_TRUNCATE` when longer, `MPI_ERR_COUNT` when shorter) once the rounds, which
    /// other ranks wait for, have run.
    exact: bool,
    /// Rounds `a..b` of an exact schedule run only once it received a wrong length by
    /// then (else it skips them): the rounds another length's plan has beyond ours (a
    /// recursive-doubling allreduce's second exchange with each partner, which
    /// Rabenseifner's algorithm has), so that a rank whose erroneous count put it on that
    /// plan is matched message for message instead of waiting.
    on_error: Option<(usize, usize)>,
    op: Option<OwnedOp>,
    error: Option<oxmpi_engine::Error>,
    started: bool,
    /// The algorithm counted at each run ([`Schedule::counted`]).
    alg: Option<Alg>,
    /// A collective of the `sm` component instead of rounds (see [`Schedule::shared`]).
    sm: Option<SmNb>,
    /// The segment's part failed, reported once the messages it agreed on have moved
    /// (also a bcast's length check, see [`CollComm::ibcast`]).
    late: Option<oxmpi_engine::Error>,
    /// A point-to-point bcast's receiving rank ([`CollComm::ibcast`]).
    bcast: Option<BcastNb>,
    /// An error known when planning (an erroneous count), reported at the end of every
    /// run once the transfers the other ranks wait for have moved.
    planned_error: Option<(ErrorClass, String)>,
    /// A scan's length check ([`ScanCheck`]).
    scan: Option<ScanCheck>,
    /// A 2-rank iscatter's reader by message ([`CollComm::iscatter_pair_msg`]).
    pair: Option<PairWatch>,
}

/// A 2-rank iscatter's reader by message ([`CollComm::iscatter_pair_msg`]): while its
/// receive waits, it looks now and then whether the root posted on the segment at the
/// collective's number instead (its length put its block there, an erroneous call: no
/// message comes); then it stamps its buffer there with [`SCATTER_MSG_MARK`] (a
/// single-copy root waits for that stamp and fails on the mark), drops its receive and
/// fails.
struct PairWatch {
    seg: Arc<Seg>,
    /// The collective's number on the segment ([`Seg::pass_nb`]).
    k: u64,
    root: usize,
    /// Looks so far (one at the root's stamp per [`PAIR_LOOKS`]).
    looks: u32,
}

/// Waits of a [`PairWatch`] between looks at the root's stamp.
const PAIR_LOOKS: u32 = 32;

impl PairWatch {
    /// The error once the root's post is seen (and our mark stamped), else `None`.
    fn look(&mut self) -> Option<Error> {
        self.looks = self.looks.wrapping_add(1);
        if self.looks % PAIR_LOOKS != 0 || !self.seg.stamped_exactly(self.root, self.k) {
            return None;
        }
        if !self.seg.stamp_passed(self.k, SCATTER_MSG_MARK) {
            return None;
        }
        Some(arg_err(
            ErrorClass::Truncate,
            "scatter: the root's block goes through the shared segment, another length than \
             ours (which goes by message)",
        ))
    }
}

// SAFETY: the raw regions point to memory the MPI caller keeps valid (and does not access)
// until the operation completes, whichever thread advances it; the operation is `Send`.
unsafe impl Send for Schedule {}

impl Drop for Schedule {
    /// The buffers it owns go back to the pool ([`pooled`]) for the next collective.
    fn drop(&mut self) {
        for r in &mut self.regions {
            if let Region::Owned(v) = r {
                unpool(std::mem::take(v));
            }
        }
    }
}

impl Schedule {
    /// An empty schedule for a collective on `cc` over `regions`, with the reduction `op`
    /// (if any). Takes the communicator's next schedule sequence number: every member
    /// must create its schedules on `cc` in the same order (MPI's collective order).
    pub fn new(cc: &CollComm, regions: Vec<Region>, op: Option<OwnedOp>) -> Result<Schedule> {
        let tag = next_tag(cc)?;
        PLANNED.fetch_add(1, Ordering::Relaxed);
        Ok(Schedule::blank(cc, tag, regions, op))
    }

    /// A schedule with no round yet.
    fn blank(cc: &CollComm, tag: i32, regions: Vec<Region>, op: Option<OwnedOp>) -> Schedule {
        Schedule {
            cc: *cc,
            links: vec![*cc],
            tag,
            regions,
            rounds: Vec::new(),
            next: 0,
            current: None,
            pending: Vec::new(),
            want: Vec::new(),
            exact: false,
            on_error: None,
            op,
            error: None,
            started: false,
            alg: None,
            sm: None,
            late: None,
            bcast: None,
            planned_error: None,
            scan: None,
            pair: None,
        }
    }

    /// A nonblocking collective of small vectors through the communicator's shared-memory
    /// segment `seg` ([`crate::sm::existing`]) instead of rounds of messages: `input`
    /// (our contribution, at most [`crate::sm::DATA`] bytes, see [`SmKind::fits`]; any
    /// size for the v-collectives, whose larger blocks move by message, see
    /// [`SmKind::each_message`]) and `output` become regions 0 and 1, `op` reduces
    /// (reductions only). Takes the
    /// segment's next sequence number, not a tag: every member must make the same choice
    /// at the same collective (sizes MPI requires to match, the communicator). Not
    /// restartable (persistent collectives keep the rounds).
    pub fn shared(
        cc: &CollComm,
        seg: Arc<Seg>,
        kind: SmKind,
        input: Region,
        output: Region,
        op: Option<OwnedOp>,
    ) -> Schedule {
        count(cc.shadow, Alg::SmNonblocking);
        let mut s = Schedule::blank(cc, 0, vec![input, output], op);
        s.started = true;
        let mut nb = SmNb::open(cc, seg, kind);
        // A v-collective's blocks too large for the segment: one round of messages after
        // the segment's part, on a tag every rank derives from the segment's sequence.
        let lens = (s.regions[0].ptr_len().1, s.regions[1].ptr_len().1);
        let mut round = Round::default();
        let (me, p) = (cc.rank as usize, cc.size as usize);
        nb.kind().each_message((me, p), lens, |m| {
            let step = if m.send { snd } else { rcv };
            round.0.push(step(m.at, m.len, m.peer as i32));
        });
        if !round.0.is_empty() {
            // A root's own block, when it fits where it goes, is copied once the messages
            // are posted, while they travel, rather than before the segment's part ends.
            if let Some((src, dst, len)) = own_block(nb.kind(), me, lens) {
                round.0.push(Step::CopyAtPost { src, dst, len });
                nb.own_block_elsewhere();
            }
            s.tag = sm_tag(nb.seq());
            s.rounds.push(round);
        }
        if let SmKind::BcastMsg { root } = *nb.kind() {
            if me != root {
                // A bcast by message below the root: our receive from our parent is posted
                // at the first progress, before the segment's part has said whether the
                // message comes (cancelled when it does not, see `Schedule::progress`);
                // whom we forward to is known once that part ended.
                s.tag = sm_tag(nb.seq());
                s.bcast_rounds(1, root, Some(0));
            }
        }
        s.sm = Some(nb);
        s
    }

    /// Whether this is a collective of the `sm` component ([`Schedule::shared`]).
    pub fn is_shared(&self) -> bool {
        self.sm.is_some()
    }

    /// Bytes of all its regions (what the progress thread uses to decide whether to help
    /// at once).
    pub fn bytes(&mut self) -> usize {
        self.regions.iter_mut().map(|r| r.ptr_len().1).sum()
    }

    /// Add a region; returns its index.
    pub fn add_region(&mut self, r: Region) -> usize {
        self.regions.push(r);
        self.regions.len() - 1
    }

    /// Length in bytes of region `i`.
    pub fn region_len(&mut self, i: usize) -> usize {
        self.regions[i].ptr_len().1
    }

    /// Add another engine communicator transfers may use (same engine); returns its
    /// [`Lane::link`] index.
    pub fn add_link(&mut self, cc: CollComm) -> u8 {
        self.links.push(cc);
        (self.links.len() - 1) as u8
    }

    /// Start a new round: the steps added next run after every step added so far.
    pub fn next_round(&mut self) {
        self.rounds.push(Round::default());
    }

    fn last(&mut self) -> &mut Vec<Step> {
        if self.rounds.is_empty() {
            self.rounds.push(Round::default());
        }
        &mut self.rounds.last_mut().expect("non-empty").0
    }

    /// Send `len` bytes at `at` to `peer` (nothing for `PROC_NULL`) in the current round.
    pub fn send(&mut self, lane: Lane, at: At, len: usize, peer: i32) {
        if peer != PROC_NULL {
            self.last().push(Step::Send {
                at,
                len,
                peer,
                lane,
            });
        }
    }

    /// Receive at most `len` bytes at `at` from `peer` (nothing for `PROC_NULL`) in the
    /// current round.
    pub fn recv(&mut self, lane: Lane, at: At, len: usize, peer: i32) {
        if peer != PROC_NULL {
            self.last().push(Step::Recv {
                at,
                len,
                peer,
                lane,
            });
        }
    }

    /// Receive at most `room` bytes at `at` from `peer` in the current round, watched by
    /// a scan's length check ([`Step::Watch`]; an exact schedule expects `want` bytes).
    fn watch(&mut self, at: At, room: usize, want: usize, peer: i32) {
        self.last().push(Step::Watch {
            at,
            room,
            want,
            peer,
        });
    }

    /// A receive of `n` bytes from `peer` at `at` (with room for `room`) in the current
    /// round: watched by the scan's length check when `check` ([`CollComm::iscan_from`]),
    /// else plain (`room` is `n` then).
    fn recv_checked(&mut self, check: bool, (at, room): (At, usize), n: usize, peer: i32) {
        if check {
            self.watch(at, room, n, peer);
        } else {
            self.recv(Lane::default(), at, n, peer);
        }
    }

    /// A scan's length check knows the plan's rounds (those after them are added while
    /// running).
    fn planned(mut self) -> Self {
        if let Some(c) = self.scan.as_mut() {
            c.planned = self.rounds.len();
        }
        self
    }

    /// `dst = src ∘ dst` over `len` bytes (the schedule's operation) once the current
    /// round's transfers are done.
    pub fn reduce(&mut self, src: At, dst: At, len: usize) {
        self.last().push(Step::Reduce { src, dst, len });
    }

    /// `dst = src` over `len` bytes once the current round's transfers are done.
    pub fn copy(&mut self, src: At, dst: At, len: usize) {
        self.last().push(Step::Copy { src, dst, len });
    }

    fn round(&mut self) -> &mut Vec<Step> {
        self.rounds.push(Round::default());
        &mut self.rounds.last_mut().expect("just pushed").0
    }

    /// Make a finished schedule runnable again with the same plan (rounds, regions,
    /// operation) and the communicator's next tag, as a new collective in MPI's order:
    /// what a persistent collective does at each `MPI_Start` instead of planning anew. The
    /// caller refreshes the regions' input data first.
    pub fn restart(&mut self) -> Result<()> {
        if self.sm.is_some() {
            return Err(arg_err(
                ErrorClass::Intern,
                "a shared-memory nonblocking collective cannot be restarted",
            ));
        }
        if !self.pending.is_empty() || self.current.is_some() {
            return Err(arg_err(
                ErrorClass::Intern,
                "schedule restarted while its transfers are in flight",
            ));
        }
        self.tag = next_tag(&self.cc)?;
        self.next = 0;
        self.error = None;
        self.late = None;
        if let Some(b) = self.bcast.as_mut() {
            self.rounds.truncate(b.planned);
            (b.got, b.header_round) = (None, None);
        }
        if let Some(c) = self.scan.as_mut() {
            self.rounds.truncate(c.planned);
            c.reset();
            let h = c.part.encode();
            if let (true, Region::Owned(v)) = (c.chain, &mut self.regions[c.hout]) {
                v.copy_from_slice(&h);
            }
        }
        // The plan counted the first run (a persistent collective's first start restarts
        // a plan that never ran); every later start counts one more.
        if let (Some(a), true) = (self.alg, self.started) {
            count(self.cc.shadow, a);
        }
        Ok(())
    }

    /// Counts a run of algorithm `a` now and at every restart after the plan ran (each
    /// later start of a persistent collective).
    pub(crate) fn counted(mut self, a: Alg) -> Schedule {
        count(self.cc.shadow, a);
        self.alg = Some(a);
        self
    }

    /// Stop at the first error: no further round runs (the plan stays for a restart).
    fn end(&mut self) {
        self.next = self.rounds.len();
        self.current = None;
    }

    fn check(&mut self, at: At, len: usize) -> Result<()> {
        let Some(r) = self.regions.get_mut(at.0) else {
            return Err(arg_err(
                ErrorClass::Intern,
                format!("schedule step names region {} that does not exist", at.0),
            ));
        };
        let n = r.ptr_len().1;
        if at.1.checked_add(len).is_none_or(|e| e > n) {
            return Err(arg_err(
                ErrorClass::Count,
                format!(
                    "schedule step of {len} bytes at {} exceeds a {n}-byte buffer",
                    at.1
                ),
            ));
        }
        Ok(())
    }

    fn validate(&mut self) -> Result<()> {
        let mut checks = Vec::new();
        for r in &self.rounds {
            for s in &r.0 {
                match *s {
                    Step::Send { at, len, lane, .. } | Step::Recv { at, len, lane, .. } => {
                        if usize::from(lane.link) >= self.links.len() || lane.sub >= SUB_LIMIT {
                            return Err(arg_err(
                                ErrorClass::Intern,
                                format!("schedule transfer on an invalid lane {lane:?}"),
                            ));
                        }
                        checks.push((at, len))
                    }
                    Step::Reduce { src, dst, len } => {
                        if self.op.is_none()
                            || (src.0 == dst.0 && src.1 < dst.1 + len && dst.1 < src.1 + len)
                        {
                            return Err(arg_err(
                                ErrorClass::Intern,
                                "schedule reduction without an operation or onto its own input",
                            ));
                        }
                        checks.push((src, len));
                        checks.push((dst, len));
                    }
                    Step::Copy { src, dst, len } | Step::CopyAtPost { src, dst, len } => {
                        checks.push((src, len));
                        checks.push((dst, len));
                    }
                    Step::Watch { at, room, .. } => checks.push((at, room)),
                }
            }
        }
        for (at, len) in checks {
            self.check(at, len)?;
        }
        Ok(())
    }

    /// The bytes of region `i` if the schedule owns them (after completion).
    pub fn take_owned(&mut self, i: usize) -> Option<Vec<u8>> {
        match self.regions.get_mut(i)? {
            Region::Owned(v) => Some(std::mem::take(v)),
            Region::Raw(..) => None,
        }
    }

    /// The bytes of region `i` if the schedule owns them.
    pub fn owned_bytes(&self, i: usize) -> Option<&[u8]> {
        match self.regions.get(i)? {
            Region::Owned(v) => Some(v),
            Region::Raw(..) => None,
        }
    }

    /// The bytes of region `i`, writable, if the schedule owns them: a persistent
    /// collective puts each start's input there before [`restart`](Self::restart).
    pub fn owned_bytes_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        match self.regions.get_mut(i)? {
            Region::Owned(v) => Some(v),
            Region::Raw(..) => None,
        }
    }

    /// Advances the schedule as far as possible without blocking. Returns `None` while it
    /// is still running, then its outcome (once).
    pub fn progress(&mut self) -> Option<Result<()>> {
        if self.sm.is_some() && self.bcast.is_some() && self.next == 0 {
            // A bcast by message below the root ([`Schedule::shared`]): its receive now,
            // so that it waits when the parent's message comes.
            self.next = 1;
            let round = std::mem::take(&mut self.rounds[0]);
            if let Err(err) = self.post(&round) {
                self.error = Some(err);
            }
            self.rounds[0] = round;
            self.current = Some(0);
        }
        if let Some(nb) = self.sm.as_mut() {
            let (ip, il) = self.regions[0].ptr_len();
            // (An allreduce by message in place has one region: its length check reads
            // region 0 only.)
            let out = self
                .regions
                .get_mut(1)
                .map_or((std::ptr::null_mut(), 0), Region::ptr_len);
            // SAFETY: the regions are the caller's memory (valid until completion by the
            // MPI contract) or owned by the schedule.
            let end = unsafe { nb.progress((ip.cast_const(), il), out, self.op.as_ref()) };
            // A v-collective's messages: only those both ends agreed on in the segment's
            // part (an erroneous count on one side of the message bound takes none; an
            // alltoallv's receive may go while our send to the same rank stays), and an
            // alltoallv's messages that come although our count expects none, taken into
            // scratch so that their senders do not wait.
            let (dropped, no_recv) = (nb.dropped(), nb.dropped_receives());
            let sinks = if end == Progress::Pending || nb.sinks().is_empty() {
                Vec::new()
            } else {
                nb.sinks().to_vec()
            };
            let tree = match (end, nb.kind()) {
                (Progress::Done, &SmKind::BcastMsg { root }) => Some((root, nb.bcast_takers())),
                _ => None,
            };
            let v_tag = sm_tag(nb.seq());
            if let Some((root, takers)) = tree {
                // A bcast whose length goes by message: the tree's rounds now (below the
                // root, its receive is posted already: the children it forwards to now).
                self.tag = v_tag;
                let (me, p) = (self.cc.rank as usize, self.cc.size as usize);
                if let Some(b) = self.bcast.as_mut() {
                    b.children = bcast_tree(me, root, p)
                        .1
                        .into_iter()
                        .filter(|&c| takers & 1 << c != 0)
                        .map(|c| c as i32)
                        .collect();
                } else {
                    // (Region 0 the root's input.)
                    self.bcast_rounds(0, root, Some(takers));
                }
            }
            if dropped | no_recv != 0 && end != Progress::Pending {
                for r in &mut self.rounds {
                    r.0.retain(|s| match *s {
                        Step::Send { peer, .. } => dropped & 1 << peer == 0,
                        Step::Recv { peer, .. } => (dropped | no_recv) & 1 << peer == 0,
                        _ => true,
                    });
                }
            }
            if !sinks.is_empty() {
                if self.rounds.is_empty() {
                    self.rounds.push(Round::default());
                    self.tag = v_tag;
                }
                for (peer, len) in sinks {
                    let at = (self.add_region(Region::Owned(pooled(len))), 0);
                    self.rounds[0].0.push(rcv(at, len, peer as i32));
                }
            }
            match end {
                Progress::Pending => return None,
                // Ended: reported once (then `None` is never returned again, nor is it
                // asked).
                Progress::Done if self.rounds.is_empty() => return Some(Ok(())),
                // The segment's part of a v-collective ended: its messages now.
                Progress::Done => {
                    self.sm = None;
                    self.started = false;
                }
                Progress::Mismatch => {
                    let e = arg_err(
                        ErrorClass::Truncate,
                        "a block's length differs from its receive count",
                    );
                    // Messages the other ends wait for still move; the error comes after.
                    let moves = self.rounds.iter().any(|r| {
                        r.0.iter()
                            .any(|s| matches!(s, Step::Send { .. } | Step::Recv { .. }))
                    });
                    if !moves {
                        return Some(Err(e));
                    }
                    self.late = Some(e);
                    self.sm = None;
                    self.started = false;
                }
                // Nothing of ours moves by message after these.
                failed @ (Progress::CopyFailed
                | Progress::Differs { .. }
                | Progress::Upstream { .. }
                | Progress::Lengths { .. }) => {
                    // A bcast's receive posted at once: no message comes (nobody sends to
                    // a rank of another path or below one), so the cancel wins.
                    self.cc.abandon(&self.pending);
                    self.pending.clear();
                    self.want.clear();
                    return Some(Err(failed.failure()));
                }
            }
        }
        if !self.started {
            self.started = true;
            if let Err(e) = self.validate() {
                // An invalid plan never runs: validated (and failing) again if restarted.
                self.started = false;
                return Some(Err(e));
            }
        }
        loop {
            let e = self.cc.e;
            let mut i = 0;
            while i < self.pending.len() {
                let (r, peer) = self.pending[i];
                match e.test(r) {
                    Some(st) => {
                        self.pending.swap_remove(i);
                        let want = self.want.swap_remove(i);
                        let truncated = st.error == Some(ErrorClass::Truncate);
                        // An error marker or a scan's length header (whatever its length).
                        let marked = st.error.is_none() && st.tag & TAG_MARK != 0;
                        // A scan check's watched receive: what came, for its round's end.
                        let watched = match self.scan.as_mut() {
                            Some(c) if c.watch == Some(r) => {
                                let no_header = truncated || !marked;
                                (c.watch, c.got) = (None, Some((st.count_bytes, no_header)));
                                true
                            }
                            _ => false,
                        };
                        if want != usize::MAX && (truncated || st.count_bytes != want) {
                            // A message of another length than ours: the rounds go on (the
                            // other ranks wait for our messages), the error comes at the end.
                            let got = if truncated { want + 1 } else { st.count_bytes };
                            let what = format!("nonblocking reduction: from rank {peer}");
                            self.late.get_or_insert(lengths_error(&what, got, want));
                        } else if want != usize::MAX && marked {
                            // The error marker (or a header) of our length: as above.
                            self.late.get_or_insert_with(|| {
                                arg_err(
                                    ErrorClass::Count,
                                    format!(
                                        "nonblocking reduction: an error marker from rank \
                                         {peer} (another rank's count differs)"
                                    ),
                                )
                            });
                        } else if watched && want == usize::MAX {
                            // Any length goes (a header's room: a partial, a marker).
                        } else if let Some(b) =
                            self.bcast.as_mut().filter(|_| self.current == Some(0))
                        {
                            // A bcast's first receive: what came decides what follows.
                            b.got = Some((st.count_bytes, st.error));
                        } else if let Err(err) = self.cc.check(st, "nonblocking step", peer) {
                            self.error.get_or_insert(err);
                        }
                    }
                    None => i += 1,
                }
            }
            if !self.pending.is_empty() {
                if self.error.is_none() {
                    // (A 2-rank iscatter's reader by message: the root's post instead.)
                    self.error = Some(self.pair.as_mut().and_then(PairWatch::look)?);
                }
                self.cc.abandon(&self.pending);
                self.pending.clear();
                self.want.clear();
            }
            if let Some(err) = self.error.take() {
                self.end();
                return Some(Err(self.late.take().unwrap_or(err)));
            }
            if let Some(i) = self.current.take() {
                if self.scan.is_some() {
                    self.scan_next(i);
                }
                let round = std::mem::take(&mut self.rounds[i]);
                self.run_local(&round, false);
                self.rounds[i] = round;
                if self.bcast.is_some() {
                    if let Err(err) = self.bcast_next(i) {
                        self.end();
                        return Some(Err(err));
                    }
                }
            }
            let mut i = self.next;
            if self.on_error.is_some_and(|(a, _)| a == i) && self.late.is_none() {
                // No wrong length came: the rounds for one are skipped.
                i = self.on_error.map_or(i, |(_, b)| b);
                self.next = i;
            }
            if i >= self.rounds.len() {
                let planned = || {
                    let (class, msg) = self.planned_error.as_ref()?;
                    Some(arg_err(*class, msg.clone()))
                };
                return Some(self.late.take().or_else(planned).map_or(Ok(()), Err));
            }
            self.next += 1;
            let round = std::mem::take(&mut self.rounds[i]);
            let posted = self.post(&round);
            if posted.is_ok() {
                self.run_local(&round, true);
            }
            self.rounds[i] = round;
            if let Err(err) = posted {
                self.cc.abandon(&self.pending);
                self.pending.clear();
                self.want.clear();
                self.end();
                return Some(Err(err));
            }
            self.current = Some(i);
        }
    }

    /// The rounds of the bcast length protocol ([`CollComm::ibcast`]) on region `buf` (the
    /// root's data, the others' output) for a broadcast from `root`, down the binomial tree
    /// ([`bcast_tree`]) to the children in `takers` (bit `r`: rank `r` receives from us;
    /// `None`: every child). The root sends its bytes to each, or, when it has none, an
    /// empty marker and the 8-byte header holding the length 0; the others receive their
    /// first message from their parent and go on in [`Schedule::bcast_next`].
    fn bcast_rounds(&mut self, buf: usize, root: usize, takers: Option<u64>) {
        let (me, p) = (self.cc.rank as usize, self.cc.size as usize);
        let (ancestors, children) = bcast_tree(me, root, p);
        let children: Vec<i32> = children
            .into_iter()
            .filter(|&c| takers.is_none_or(|t| t & 1 << c != 0))
            .map(|c| c as i32)
            .collect();
        let n = self.regions[buf].ptr_len().1;
        let head = self.add_region(Region::Owned((n as u64).to_le_bytes().to_vec()));
        if me == root {
            let r = self.round();
            for &c in &children {
                if n > 0 {
                    r.push(snd((buf, 0), n, c));
                } else {
                    r.push(snd((head, 0), 0, c));
                    r.push(snd((head, 0), 8, c));
                }
            }
            return;
        }
        let parent = ancestors.first().copied().unwrap_or(root) as i32;
        self.round().push(rcv((buf, 0), n, parent));
        self.bcast = Some(BcastNb {
            buf,
            n,
            head,
            parent,
            children,
            planned: self.rounds.len(),
            got: None,
            header_round: None,
        });
    }

    /// A receiving rank of a point-to-point bcast ([`CollComm::ibcast`]) after round `i`
    /// ended: after its first receive (round 0), the round that forwards the data (exactly
    /// the bytes that came), or receives a marker's header, or (truncated) forwards a
    /// marker saying so; after the header's receive, the round that forwards marker and
    /// header. A length that differs from ours is reported once those rounds have run.
    fn bcast_next(&mut self, i: usize) -> Result<()> {
        let Some(b) = self.bcast.as_mut() else {
            return Ok(());
        };
        let (n, head, buf) = (b.n, b.head, b.buf);
        let marker = |children: &[i32]| -> Round {
            Round(
                children
                    .iter()
                    .flat_map(|&c| [snd((head, 0), 0, c), snd((head, 0), 8, c)])
                    .collect(),
            )
        };
        if i == 0 {
            let (got, error) = b.got.take().unwrap_or((0, None));
            let round = match error {
                // The data itself: the root's length.
                None if got > 0 => {
                    if got != n {
                        self.late = Some(bcast_differs(got, n));
                    }
                    Round(b.children.iter().map(|&c| snd((buf, 0), got, c)).collect())
                }
                // The marker: its header next.
                None => {
                    b.header_round = Some(self.rounds.len());
                    Round(vec![rcv((head, 0), 8, b.parent)])
                }
                // The root's data is longer than our buffer: what did not fit is lost, so
                // our children get a marker that says so instead of the data.
                Some(ErrorClass::Truncate) => {
                    let h = TRUNCATED_ABOVE | n as u64;
                    if let Region::Owned(v) = &mut self.regions[head] {
                        v[..8].copy_from_slice(&h.to_le_bytes());
                    }
                    self.late = Some(arg_err(
                        ErrorClass::Truncate,
                        format!("bcast: the root sends more than this rank's {n} bytes"),
                    ));
                    marker(&b.children)
                }
                Some(class) => {
                    return Err(arg_err(
                        class,
                        format!("bcast receive from rank {} failed", b.parent),
                    ));
                }
            };
            self.rounds.push(round);
            return Ok(());
        }
        if b.header_round != Some(i) {
            return Ok(());
        }
        let head_word = match &self.regions[head] {
            Region::Owned(v) => v.get(..8).and_then(|h| h.try_into().ok()),
            Region::Raw(..) => None,
        }
        .map_or(0, u64::from_le_bytes);
        self.rounds.push(marker(&b.children));
        let m = usize::try_from(head_word & !TRUNCATED_ABOVE).unwrap_or(usize::MAX);
        self.late = if head_word & TRUNCATED_ABOVE != 0 {
            let class = if n <= m {
                ErrorClass::Truncate
            } else {
                ErrorClass::Other
            };
            Some(arg_err(
                class,
                format!(
                    "bcast: a rank between the root and this one had room for only {m} \
                     bytes of the root's data, which did not reach this rank"
                ),
            ))
        } else if m != 0 {
            Some(arg_err(
                ErrorClass::Intern,
                format!("bcast: a marker for {m} bytes, which travel without one"),
            ))
        } else if n != 0 {
            Some(bcast_differs(0, n))
        } else {
            None
        };
        Ok(())
    }

    /// A scan's length check ([`ScanCheck`]) after round `i` ended (before its local
    /// steps, which may overwrite what came): a header in its watched receive, or another
    /// message, joins the lengths below us (from a lower partner) and, on a chain rank, our
    /// partial's (sent on in the next header round); a rank of recursive doubling fails on
    /// a header. After the last header round a chain rank runs the chain only when every
    /// rank below passes its length (rank 0 always); otherwise it skips the chain's rounds
    /// and fails. A rank that fails takes and drops the chain that rank `r - 1` runs
    /// towards it (when every rank below is a chain rank of one length, `r - 1` knows the
    /// same lengths and sends it), in rounds added after the plan.
    fn scan_next(&mut self, i: usize) {
        let r = self.cc.rank;
        let Some(c) = self.scan.as_mut().filter(|c| i < c.planned) else {
            return;
        };
        let watched = self.rounds[i].0.iter().find_map(|s| match *s {
            Step::Watch { at, peer, .. } => Some((at, peer)),
            _ => None,
        });
        if let Some((at, peer)) = watched {
            let head = match c.got.take() {
                Some((SCAN_HDR, false)) => {
                    let p = self.regions[at.0].ptr_len().0.wrapping_add(at.1);
                    // SAFETY: the receive (validated: `SCAN_HDR` bytes within its region)
                    // ended, and nothing else writes there before the round's local steps.
                    ScanLens::parse(unsafe { std::slice::from_raw_parts(p, SCAN_HDR) })
                }
                _ => None,
            };
            let t = head.unwrap_or(ScanLens::OTHER);
            if peer < r {
                c.below = c.below.with(t);
            }
            if c.chain {
                if c.keep.get(i).copied().unwrap_or(false) {
                    c.part = c.part.with(t);
                    let h = c.part.encode();
                    if let Region::Owned(v) = &mut self.regions[c.hout] {
                        v.copy_from_slice(&h);
                    }
                }
            } else if let Some(h) = head {
                // A header where our partial's partner runs the chain: erroneous counts
                // (a header of our own length, 32 bytes, passed the exact check).
                let n = c.n;
                let theirs = if h.lo != n as u64 { h.lo } else { h.hi };
                self.late.get_or_insert_with(|| {
                    lengths_differ(
                        theirs,
                        n,
                        format!(
                            "iscan: a partner of recursive doubling ({n} bytes) runs the chain \
                             (ranks of {} to {} bytes; the ranks' counts differ)",
                            h.lo, h.hi
                        ),
                    )
                });
            }
        }
        let (n, below) = (c.n, c.below);
        let drain = if c.chain {
            if i != c.decide || r == 0 || below.all() == Some(n) {
                return;
            }
            // Ranks below of another length, or of recursive doubling: no chain towards
            // `r + 1` either (its check sees the same ranks and ours).
            let theirs = if below.lo != n as u64 {
                below.lo
            } else {
                below.hi
            };
            let what = match below.all() {
                Some(l) => format!("{l} bytes"),
                None if below == ScanLens::OTHER => "shorter vectors".to_string(),
                None => format!("{} to {} bytes", below.lo, below.hi),
            };
            self.late.get_or_insert_with(|| {
                lengths_differ(
                    theirs,
                    n,
                    format!(
                        "iscan: rank {r} passes {n} bytes, the ranks below it {what} (the \
                         ranks' counts differ)"
                    ),
                )
            });
            self.next = c.planned;
            below.all()
        } else {
            if i + 1 != c.planned || r == 0 || self.late.is_none() {
                return;
            }
            below.all()
        };
        // Rank `r - 1`'s chain, cut as it cuts it: taken into scratch and dropped.
        if let Some(l) = drain {
            let segs = chain_segments(l, c.elem);
            let room = segs.first().map_or(0, |s| s.1);
            let sink = self.add_region(Region::Owned(pooled(room)));
            for (_, m) in segs {
                self.rounds.push(Round(vec![Step::Watch {
                    at: (sink, 0),
                    room: m,
                    want: usize::MAX,
                    peer: r - 1,
                }]));
            }
        }
    }

    /// Posts the transfers of `round`: its receives first, then its sends.
    fn post(&mut self, round: &Round) -> Result<()> {
        for recv in [true, false] {
            for s in &round.0 {
                let exact = |len: usize| if self.exact { len } else { usize::MAX };
                let (at, len, peer, lane, want) = match *s {
                    Step::Recv {
                        at,
                        len,
                        peer,
                        lane,
                    } if recv => (at, len, peer, lane, exact(len)),
                    Step::Watch {
                        at,
                        room,
                        want,
                        peer,
                    } if recv => (at, room, peer, Lane::default(), exact(want)),
                    Step::Send {
                        at,
                        len,
                        peer,
                        lane,
                    } if !recv => (at, len, peer, lane, usize::MAX),
                    _ => continue,
                };
                let link = self.links[usize::from(lane.link)];
                let mut p = self.regions[at.0].ptr_len().0.wrapping_add(at.1);
                let tag = self.tag + (i32::from(lane.sub) << 16);
                let mut len = len;
                // A scan's length header goes marked (its receiver tells it from a partial
                // of its bytes by the mark).
                let mut marked = !recv
                    && self
                        .scan
                        .as_ref()
                        .is_some_and(|c| c.chain && at.0 == c.hout);
                if !recv && self.exact && self.late.is_some() {
                    // An exact schedule that received a wrong length sends the marker in
                    // place of its (spoilt) partial results, a marked message: the receiver
                    // fails too, whatever length it expects.
                    let m = crate::tuned::marker(len);
                    (p, len, marked) = (m.as_ptr().cast_mut(), m.len(), true);
                }
                let r = if recv {
                    // SAFETY: the step is within its region (validated); regions stay valid
                    // until completion (owned, or the MPI caller's contract).
                    unsafe { link.irecv_raw(p, len, peer, tag) }
                } else if marked {
                    // SAFETY: as above (a header's region, or the static marker, only read).
                    unsafe { link.isend_marked_raw(p, len, peer, tag) }
                } else {
                    // SAFETY: as above (or the static marker, only read).
                    unsafe { link.isend_raw(p, len, peer, tag) }
                }?;
                self.pending.push((r, peer));
                self.want.push(want);
                if let (Step::Watch { .. }, Some(c)) = (s, self.scan.as_mut()) {
                    c.watch = Some(r);
                }
            }
        }
        Ok(())
    }

    /// Runs the local steps of `round`: at its post (`at_post`) its [`Step::CopyAtPost`],
    /// else, once its transfers ended, its reductions and copies.
    fn run_local(&mut self, round: &Round, at_post: bool) {
        for s in &round.0 {
            match *s {
                Step::Reduce { src, dst, len } if !at_post => {
                    let sp = self.regions[src.0].ptr_len().0.wrapping_add(src.1);
                    let dp = self.regions[dst.0].ptr_len().0.wrapping_add(dst.1);
                    // SAFETY: validated, non-overlapping ranges; no transfer in flight on
                    // them.
                    let (a, b) = unsafe {
                        (
                            std::slice::from_raw_parts(sp.cast_const(), len),
                            std::slice::from_raw_parts_mut(dp, len),
                        )
                    };
                    if let Some(op) = &self.op {
                        (op.f)(a, b);
                    }
                }
                Step::Copy { src, dst, len } if !at_post => self.copy_now(src, dst, len),
                Step::CopyAtPost { src, dst, len } if at_post => self.copy_now(src, dst, len),
                _ => {}
            }
        }
    }

    /// `dst = src` over `len` bytes (validated ranges).
    fn copy_now(&mut self, src: At, dst: At, len: usize) {
        let sp = self.regions[src.0].ptr_len().0.wrapping_add(src.1);
        let dp = self.regions[dst.0].ptr_len().0.wrapping_add(dst.1);
        // A block copied onto itself (an in-place root's own block, given as a region
        // aliasing its place) stays as it is.
        if sp != dp {
            // SAFETY: validated ranges; `copy` allows overlap.
            unsafe { std::ptr::copy(sp.cast_const(), dp, len) };
        }
    }
}

impl CollComm {
    /// `MPI_Ibarrier`: dissemination rounds.
    pub fn ibarrier(&self) -> Result<Schedule> {
        let mut s = Schedule::new(self, Vec::new(), None)?.counted(Alg::NbcBarrierDissemination);
        s.regions.push(Region::Owned(Vec::new()));
        let mut k = 1;
        while k < self.size {
            let (to, from) = (self.modp(self.rank + k), self.modp(self.rank - k));
            let r = s.round();
            r.push(rcv((0, 0), 0, from));
            r.push(snd((0, 0), 0, to));
            k <<= 1;
        }
        Ok(s)
    }

    /// `MPI_Ibcast` of region 0 (the whole region) from `root`: binomial tree, with the
    /// length check of the blocking [`CollComm::bcast`] (an erroneous call, a rank whose
    /// length differs from the root's, fails instead of waiting or succeeding). The root
    /// sends its data to its children (nothing more on the correct path); an empty root
    /// sends an empty marker and an 8-byte header with its length 0 instead. A receiver
    /// posts its whole buffer and takes what came ([`Schedule::bcast_next`]): data (never
    /// empty) is the root's, and it forwards exactly that many bytes, failing with
    /// `MPI_ERR_COUNT` when its buffer is longer; a marker is followed by the header, which
    /// it forwards with the marker; a receive truncated by a longer message makes it
    /// forward a marker whose header says so ([`TRUNCATED_ABOVE`] and its length) and
    /// fail with `MPI_ERR_TRUNCATE`, and the ranks below fail too (`MPI_ERR_TRUNCATE`, or
    /// `MPI_ERR_OTHER` when their own buffer was large enough). The root returns success.
    /// Errors come once the messages the other ranks wait for have moved.
    pub fn ibcast(&self, buf: Region, root: i32) -> Result<Schedule> {
        self.check_root(root)?;
        let mut s = Schedule::new(self, vec![buf], None)?.counted(Alg::NbcBcastBinomial);
        if self.size > 1 {
            s.bcast_rounds(0, root as usize, None);
        }
        Ok(s)
    }

    /// `MPI_Iallreduce` in place on region 0: recursive doubling (non-power-of-two sizes
    /// fold the first ranks pairwise), the order of `op` respected.
    pub fn iallreduce(&self, buf: Region, op: OwnedOp) -> Result<Schedule> {
        self.iallreduce_from(None, buf, op)
    }

    /// `MPI_Iallreduce` of `input` (our contribution; `None`: it is in `out`, in place)
    /// into region 0 (`out`; `input` becomes region 1 and is only read). Recursive
    /// doubling as [`CollComm::iallreduce`], without copying the input first: the first
    /// exchange sends it from where it is and receives the partner's vector straight into
    /// `out`, then folds ours in (`out = ours ∘ out`, which keeps the order of a
    /// non-commutative `op` when the partner ranks higher; a lower partner of a
    /// non-commutative `op` takes a copy of ours first, as before).
    pub fn iallreduce_from(
        &self,
        input: Option<Region>,
        out: Region,
        op: OwnedOp,
    ) -> Result<Schedule> {
        self.iallreduce_plan(input, out, op, None)
    }

    /// [`CollComm::iallreduce_from`] on a communicator with the segment `seg`, for a vector
    /// that goes by message ([`SmKind::AllreduceMsg`]): every rank's length is checked on
    /// the segment first (a rank whose length takes another path of the segment meets us
    /// there), then the same rounds, on a tag derived from the segment's sequence (every
    /// rank takes the segment's next number at this collective, whatever its length; a
    /// schedule's own tag would be taken by the ranks of this path only).
    pub fn iallreduce_msg(
        &self,
        seg: Arc<Seg>,
        input: Option<Region>,
        out: Region,
        op: OwnedOp,
    ) -> Result<Schedule> {
        let s = self.iallreduce_plan(input, out, op, Some(0))?;
        Ok(self.checked_on(seg, s))
    }

    /// [`CollComm::iallreduce_from`] with the schedule's tag `tag` (`None`: its own, the
    /// communicator's next).
    fn iallreduce_plan(
        &self,
        input: Option<Region>,
        out: Region,
        op: OwnedOp,
        tag: Option<i32>,
    ) -> Result<Schedule> {
        let mut out = out;
        let n = out.ptr_len().1;
        if n % op.elem_size.max(1) != 0 {
            return Err(arg_err(ErrorClass::Count, "vector is not whole elements"));
        }
        let p = self.size;
        let commutative = op.commutative;
        let elem = op.elem_size.max(1);
        let rabenseifner = commutative
            && n / elem >= p as usize
            && match tune::algorithm(Coll::Allreduce) {
                6 => true,
                0 => p > 2 && n > tune::ALLREDUCE_SMALL,
                _ => false,
            };
        let alg = if rabenseifner {
            Alg::NbcAllreduceRabenseifner
        } else {
            Alg::NbcAllreduceRecdbl
        };
        let mut s = self.tagged(tag, vec![out], None)?.counted(alg);
        s.op = Some(op);
        s.exact = true;
        let b = (0, 0);
        // Where our contribution is, and whether `b` holds our partial result yet.
        let (inp, mut ready) = match input {
            Some(r) => {
                let i = s.add_region(r);
                let (ip, il) = s.regions[i].ptr_len();
                if il != n {
                    return Err(arg_err(
                        ErrorClass::Count,
                        format!("allreduce: a {il}-byte contribution into {n} bytes"),
                    ));
                }
                // In place after all (the same memory): nothing to copy.
                let same = n > 0 && ip == s.regions[0].ptr_len().0;
                ((i, 0), same)
            }
            None => (b, true),
        };
        let r = self.rank;
        // An empty vector exchanges empty messages too: a rank whose vector is not empty
        // (erroneous) then gets them, shorter than it expects, instead of waiting.
        if p == 1 {
            if !ready {
                s.copy(inp, b, n);
            }
            return Ok(s);
        }
        if rabenseifner {
            self.iallreduce_rabenseifner(&mut s, (inp, ready), n, elem);
            return Ok(s);
        }
        let mut tmp = None;
        let (pof2, rem) = fold_sizes(p);
        let newrank = if r < 2 * rem {
            if r % 2 == 0 {
                s.round().push(snd(if ready { b } else { inp }, n, r + 1));
                -1
            } else {
                // The partner ranks lower: `b = partner ∘ ours`.
                s.round();
                let ex = Exchange {
                    b,
                    inp,
                    ready,
                    n,
                    peer: r - 1,
                };
                let rd = s.rounds.last_mut().expect("just pushed");
                ready = rd.combine(ex, false, commutative, &mut tmp, &mut s.regions);
                r / 2
            }
        } else {
            r - rem
        };
        if newrank >= 0 {
            // Where another length takes Rabenseifner's algorithm (the default choice, a
            // commutative `op`, more than 2 ranks), it exchanges with each partner twice:
            // once a wrong length came, so do we (markers out, nothing taken in: any
            // message is longer than the empty receive), as the blocking form does
            // (`CollComm::allreduce_recdbl`); a correct call skips these rounds. A vector
            // of more than half the bound (less an item) may meet one of twice its length
            // there, whose first halving has exactly our length (no wrong length comes):
            // unless the segment checked the lengths (`tag`), such a vector exchanges an
            // empty message (a marker once an error came) with every partner always, in
            // a round after its last (the other rank sends its block into our empty
            // receive, gets our empty message, and both fail).
            // Where another length may take Rabenseifner's algorithm, the partners go in
            // its order (its halving's distances, `pof2 / 2` down to 1; its doubling's
            // after): in rank order, two ranks of each plan on 4 ranks could each wait for
            // a partner that first waits for another (a cycle: a hang). The first halving
            // now meets our first round, so the empty messages of a vector near the bound
            // go in a round of their own after the last, as the blocking form runs them
            // (a rank that took a wrong half there has sent its data on since, and an
            // error seen by then goes out as the marker).
            let large_plan = commutative && p > 2 && tune::algorithm(Coll::Allreduce) == 0;
            let near = large_plan && tag.is_none() && n + elem > tune::ALLREDUCE_SMALL / 2;
            let mut mask = if large_plan { pof2 >> 1 } else { 1 };
            while mask > 0 && mask < pof2 {
                let dst = fold_real_rank(newrank ^ mask, rem);
                s.round();
                let ex = Exchange {
                    b,
                    inp,
                    ready,
                    n,
                    peer: dst,
                };
                let rd = s.rounds.last_mut().expect("just pushed");
                rd.0.push(snd(if ready { b } else { inp }, n, dst));
                ready = rd.combine(ex, dst > r, commutative, &mut tmp, &mut s.regions);
                mask = if large_plan { mask >> 1 } else { mask << 1 };
            }
            if near {
                let rd = s.round();
                let mut m = 1;
                while m < pof2 {
                    let dst = fold_real_rank(newrank ^ m, rem);
                    rd.push(snd(b, 0, dst));
                    rd.push(rcv(b, 0, dst));
                    m <<= 1;
                }
            }
            if large_plan && !near {
                let first = s.rounds.len();
                let mut mask = 1;
                while mask < pof2 {
                    let dst = fold_real_rank(newrank ^ mask, rem);
                    let rd = s.round();
                    rd.push(snd(b, n, dst));
                    rd.push(rcv(b, 0, dst));
                    mask <<= 1;
                }
                s.on_error = Some((first, s.rounds.len()));
            }
        }
        if r < 2 * rem {
            let step = if r % 2 == 1 {
                snd(b, n, r - 1)
            } else {
                rcv(b, n, r + 1)
            };
            s.round().push(step);
        }
        Ok(s)
    }

    /// The rounds of Rabenseifner's allreduce in `s` (commutative operations; region 0
    /// receives the result, `n` bytes of `elem`-byte elements; our contribution is at
    /// `inp`, already in region 0 when `ready`), as the blocking
    /// [`CollComm::allreduce`] runs it for large vectors: the first `2 * rem` ranks fold
    /// pairwise so that a power of two `pof2` remain; those halve the range they own at
    /// each step (sending the other half to the partner at distance `mask`, reducing the
    /// partner's copy of the half they keep), then gather the reduced blocks back by
    /// recursive doubling; the folded ranks get the result from their partner. Every byte
    /// of the vector is sent and combined about twice per rank in all, against
    /// `log2(p)` times for recursive doubling. Our contribution is read where it is: the
    /// first exchange sends from it and receives the partner's part straight into region 0.
    fn iallreduce_rabenseifner(
        &self,
        s: &mut Schedule,
        (inp, mut ready): (At, bool),
        n: usize,
        elem: usize,
    ) {
        let (r, b) = (self.rank, (0, 0));
        let at = |reg: At, o: usize| (reg.0, reg.1 + o);
        let tmp = s.add_region(Region::Owned(pooled(n)));
        let (pof2, rem) = fold_sizes(self.size);
        let newrank = if r < 2 * rem {
            s.next_round();
            if r % 2 == 0 {
                s.send(Lane::default(), if ready { b } else { inp }, n, r + 1);
                -1
            } else {
                if ready {
                    s.recv(Lane::default(), (tmp, 0), n, r - 1);
                    s.reduce((tmp, 0), b, n);
                } else {
                    s.recv(Lane::default(), b, n, r - 1);
                    s.reduce(inp, b, n);
                }
                ready = true;
                r / 2
            }
        } else {
            r - rem
        };
        if newrank >= 0 {
            let (halving, doubling) = rabenseifner_plan((n, elem), (pof2, rem), newrank);
            for RabStep {
                peer,
                send: g,
                recv: k,
            } in halving
            {
                let kl = k.len();
                s.next_round();
                s.send(
                    Lane::default(),
                    at(if ready { b } else { inp }, g.start),
                    g.len(),
                    peer,
                );
                if ready {
                    s.recv(Lane::default(), (tmp, k.start), kl, peer);
                    s.reduce((tmp, k.start), (0, k.start), kl);
                } else {
                    s.recv(Lane::default(), (0, k.start), kl, peer);
                    s.reduce(at(inp, k.start), (0, k.start), kl);
                }
                ready = true;
            }
            for RabStep { peer, send, recv } in doubling {
                s.next_round();
                s.send(Lane::default(), (0, send.start), send.len(), peer);
                s.recv(Lane::default(), (0, recv.start), recv.len(), peer);
            }
        }
        if r < 2 * rem {
            s.next_round();
            if r % 2 == 1 {
                s.send(Lane::default(), b, n, r - 1);
            } else {
                s.recv(Lane::default(), b, n, r + 1);
            }
        }
    }

    /// `MPI_Ireduce`: region 0 is our contribution (only read: a leaf of the tree sends it
    /// from there, the user's memory when contiguous), the result lands in region 1 (`out`)
    /// at the root, which also gathers its partial results there (no copy of the input,
    /// no final copy). Binomial tree (rooted at 0 for non-commutative ops, the result then
    /// forwarded to the root).
    pub fn ireduce(
        &self,
        input: Region,
        out: Option<Region>,
        root: i32,
        op: OwnedOp,
    ) -> Result<Schedule> {
        self.ireduce_plan(input, out, root, op, None)
    }

    /// [`CollComm::ireduce`] on a communicator with the segment `seg`, for a vector that
    /// goes by message: every rank's length is checked on the segment first, as for
    /// [`CollComm::iallreduce_msg`] ([`SmKind::AllreduceMsg`]), then the same tree on a tag
    /// derived from the segment's sequence.
    pub fn ireduce_msg(
        &self,
        seg: Arc<Seg>,
        input: Region,
        out: Option<Region>,
        root: i32,
        op: OwnedOp,
    ) -> Result<Schedule> {
        let s = self.ireduce_plan(input, out, root, op, Some(0))?;
        Ok(self.checked_on(seg, s))
    }

    /// Schedule `s` (planned with a placeholder tag) after a length check on the segment
    /// `seg` ([`SmKind::AllreduceMsg`]), on a tag derived from the segment's sequence
    /// (every rank takes the segment's next number at this collective, whatever its
    /// length; a schedule's own tag would be taken by the ranks of this path only).
    fn checked_on(&self, seg: Arc<Seg>, s: Schedule) -> Schedule {
        self.checked_marked(seg, s, 0)
    }

    /// [`CollComm::checked_on`] whose length word holds `mark` too (a reduce-scatter's
    /// [`crate::counts_mark`]).
    fn checked_marked(&self, seg: Arc<Seg>, mut s: Schedule, mark: usize) -> Schedule {
        let nb = SmNb::open(self, seg, SmKind::AllreduceMsg).with_mark(mark);
        s.tag = sm_tag(nb.seq());
        s.sm = Some(nb);
        s.started = true;
        count(self.shadow, Alg::SmNonblocking);
        s
    }

    /// A new schedule on the communicator's next tag, or (`tag` given) on that tag without
    /// taking one.
    fn tagged(
        &self,
        tag: Option<i32>,
        regions: Vec<Region>,
        op: Option<OwnedOp>,
    ) -> Result<Schedule> {
        match tag {
            None => Schedule::new(self, regions, op),
            Some(t) => Ok(Schedule::blank(self, t, regions, op)),
        }
    }

    /// [`CollComm::ireduce`] with the schedule's tag `tag` (`None`: its own).
    fn ireduce_plan(
        &self,
        input: Region,
        out: Option<Region>,
        root: i32,
        op: OwnedOp,
        tag: Option<i32>,
    ) -> Result<Schedule> {
        self.check_root(root)?;
        let mut input = input;
        let n = input.ptr_len().1;
        if n % op.elem_size.max(1) != 0 {
            return Err(arg_err(ErrorClass::Count, "vector is not whole elements"));
        }
        let commutative = op.commutative;
        let regions = vec![input, out.unwrap_or(Region::Owned(Vec::new()))];
        let mut s = self
            .tagged(tag, regions, Some(op))?
            .counted(Alg::NbcReduceBinomial);
        // Exact (as the allreduce): a message of another length (an erroneous count) is
        // reported at the end and our partial result goes on as the error marker, so that
        // the root fails and every rank of the tree, whatever its length, still runs its
        // rounds (the tree is the same for every length).
        s.exact = true;
        let (inp, res) = ((0, 0), (1, 0));
        let me_root = self.rank == root;
        // In place at the root: the input is the output's memory.
        let aliased = me_root && n > 0 && s.regions[0].ptr_len().0 == s.regions[1].ptr_len().0;
        let troot = if commutative { root } else { 0 };
        let p = self.size;
        let rel = self.modp(self.rank - troot);
        let mut children = Vec::new();
        let mut mask = 1;
        while mask < p && rel & mask == 0 {
            if (rel | mask) < p {
                children.push(self.modp((rel | mask) + troot));
            }
            mask <<= 1;
        }
        // Our partial result: the input itself while nothing was combined (a leaf), the
        // output at the root of the tree, scratch elsewhere.
        let acc = if children.is_empty() {
            inp
        } else if me_root {
            res
        } else {
            (s.add_region(Region::Owned(pooled(n))), 0)
        };
        let mut ready = children.is_empty() || aliased;
        let mut tmp = None;
        for child in children {
            // The child covers the ranks above ours: `acc = ours ∘ child`.
            s.round();
            let ex = Exchange {
                b: acc,
                inp,
                ready,
                n,
                peer: child,
            };
            let rd = s.rounds.last_mut().expect("just pushed");
            ready = rd.combine(ex, true, commutative, &mut tmp, &mut s.regions);
        }
        if rel != 0 {
            s.round().push(snd(
                acc,
                n,
                self.modp(rel - (rel & rel.wrapping_neg()) + troot),
            ));
        }
        if troot != root {
            if self.rank == troot {
                s.round().push(snd(acc, n, root));
            } else if me_root {
                s.round().push(rcv(res, n, troot));
            }
        } else if me_root && acc != res && !aliased {
            s.copy(acc, res, n);
        }
        Ok(s)
    }

    /// `MPI_Iallgatherv` in place on region 0 (block `i`: `counts[i]` bytes at
    /// `displs[i]`, ours already in place): ring, `size - 1` rounds.
    pub fn iallgatherv(&self, buf: Region, counts: &[usize], displs: &[usize]) -> Result<Schedule> {
        self.iallgatherv_from(buf, None, counts, displs)
    }

    /// [`Self::iallgatherv`] with our block in place (`own` `None`) or, out of place, only
    /// in region 1 (`own`, `counts[rank]` bytes): the first round sends it from there and
    /// then copies it into its slot (the peer reads lines nobody just wrote, as
    /// [`CollComm::allgather_from`] does).
    pub fn iallgatherv_from(
        &self,
        buf: Region,
        own: Option<Region>,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Schedule> {
        self.check_vec_len(counts, displs)?;
        let me = self.rank as usize;
        let mut regions = vec![buf];
        if let Some(mut o) = own {
            let n = o.ptr_len().1;
            if n != counts[me] {
                return Err(arg_err(
                    ErrorClass::Truncate,
                    format!("allgather: {n} bytes sent, {} received", counts[me]),
                ));
            }
            regions.push(o);
        }
        let out = regions.len() == 2;
        let mut s = Schedule::new(self, regions, None)?.counted(Alg::NbcAllgathervRing);
        let p = self.size;
        let right = self.modp(self.rank + 1);
        let left = self.modp(self.rank - 1);
        for k in 0..p - 1 {
            let sb = (self.rank - k).rem_euclid(p) as usize;
            let rb = (self.rank - k - 1).rem_euclid(p) as usize;
            let from = if out && k == 0 {
                (1, 0)
            } else {
                (0, displs[sb])
            };
            let rd = s.round();
            rd.push(rcv((0, displs[rb]), counts[rb], left));
            rd.push(snd(from, counts[sb], right));
            if out && k == 0 {
                s.copy((1, 0), (0, displs[me]), counts[me]);
            }
        }
        if out && p == 1 {
            s.copy((1, 0), (0, displs[me]), counts[me]);
        }
        Ok(s)
    }

    /// `MPI_Ialltoallv` from region 0 into region 1 (byte counts/displacements per peer):
    /// every transfer posted in one round (our own block copied locally).
    #[allow(clippy::too_many_arguments)]
    pub fn ialltoallv(
        &self,
        send: Region,
        scounts: &[usize],
        sdispls: &[usize],
        recv: Region,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Schedule> {
        self.check_vec_len(scounts, sdispls)?;
        self.check_vec_len(rcounts, rdispls)?;
        let mut s = Schedule::new(self, vec![send, recv], None)?.counted(Alg::NbcAlltoallvLinear);
        let (me, p) = (self.rank as usize, self.size as usize);
        // Our own block longer or shorter than its room (erroneous): the transfers the
        // other ranks wait for still run, the copy is cut, and the error comes at the end.
        let mut own = scounts.to_vec();
        own[me] = own[me].min(rcounts[me]);
        s.rounds.push(alltoallv_round(
            (me, p),
            (&own, sdispls),
            (rcounts, rdispls),
        ));
        if let Err(Error::Arg { class, msg }) = self.check_self_block(scounts, rcounts) {
            s.planned_error = Some((class, msg));
        }
        Ok(s)
    }

    /// Our block to ourselves must be as long as the one we receive from ourselves.
    fn check_self_block(&self, scounts: &[usize], rcounts: &[usize]) -> Result<()> {
        let me = self.rank as usize;
        if scounts[me] != rcounts[me] {
            return Err(arg_err(
                ErrorClass::Truncate,
                format!(
                    "alltoall: rank {me} sends itself {} bytes into {}",
                    scounts[me], rcounts[me]
                ),
            ));
        }
        Ok(())
    }

    /// `MPI_Igatherv`: region 0 (our block) goes to block `rank` of region 1 at the root
    /// (`counts`/`displs` in bytes, used at the root only). One round.
    pub fn igatherv(
        &self,
        send: Region,
        recv: Region,
        counts: &[usize],
        displs: &[usize],
        root: i32,
    ) -> Result<Schedule> {
        self.check_root(root)?;
        let mut s = Schedule::new(self, vec![send, recv], None)?.counted(Alg::NbcGathervLinear);
        let n = s.regions[0].ptr_len().1;
        if self.rank != root {
            s.round().push(snd((0, 0), n, root));
            return Ok(s);
        }
        self.check_vec_len(counts, displs)?;
        let me = root as usize;
        if n != counts[me] {
            return Err(arg_err(
                ErrorClass::Truncate,
                "root's send size differs from its receive count",
            ));
        }
        let rd = s.round();
        for i in (0..self.size as usize).filter(|&i| i != me) {
            rd.push(rcv((1, displs[i]), counts[i], i as i32));
        }
        // Our own block while the others' travel (their receives touch other bytes).
        rd.push(Step::CopyAtPost {
            src: (0, 0),
            dst: (1, displs[me]),
            len: n,
        });
        Ok(s)
    }

    /// `MPI_Iscatterv`: block `i` of region 0 at the root (`counts`/`displs` in bytes) lands
    /// in region 1 of rank `i`. One round.
    pub fn iscatterv(
        &self,
        send: Region,
        counts: &[usize],
        displs: &[usize],
        recv: Region,
        root: i32,
    ) -> Result<Schedule> {
        self.check_root(root)?;
        let mut s = Schedule::new(self, vec![send, recv], None)?.counted(Alg::NbcScattervLinear);
        let n = s.regions[1].ptr_len().1;
        if self.rank != root {
            s.round().push(rcv((1, 0), n, root));
            return Ok(s);
        }
        self.check_vec_len(counts, displs)?;
        let me = root as usize;
        let rd = s.round();
        for i in (0..self.size as usize).filter(|&i| i != me) {
            rd.push(snd((0, displs[i]), counts[i], i as i32));
        }
        // Our own block while the others' travel (their sends only read the input).
        rd.push(Step::CopyAtPost {
            src: (0, displs[me]),
            dst: (1, 0),
            len: counts[me].min(n),
        });
        Ok(s)
    }

    /// A 2-rank `MPI_Iscatter` of `block`-byte blocks by message on a communicator with the
    /// segment `seg` (other lengths take it: through the root's buffer, or the single
    /// copy), as [`CollComm::iscatterv`]'s messages (`send` the root's blocks, `recv`
    /// ours) but numbered by the segment: it takes the segment's next nonblocking number
    /// and passes it at once ([`Seg::pass_nb`], no post), its message on a tag from that
    /// number. A rank whose erroneous length took the segment at that number meets it
    /// there: a reader by message sees the root's post (and fails, [`PairWatch`]); a
    /// reader on the segment sees that the root passed the number, takes its message
    /// into nothing and fails ([`SmNb`]). No new word crosses for a correct call.
    pub fn iscatter_pair_msg(
        &self,
        seg: Arc<Seg>,
        send: Region,
        block: usize,
        recv: Region,
        root: i32,
    ) -> Result<Schedule> {
        self.check_root(root)?;
        let k = seg.pass_nb();
        PLANNED.fetch_add(1, Ordering::Relaxed);
        let mut s = Schedule::blank(self, sm_tag(k), vec![send, recv], None)
            .counted(Alg::NbcScattervLinear);
        let n = s.regions[1].ptr_len().1;
        let root_rank = root as usize;
        if self.rank != root {
            s.round().push(rcv((1, 0), n, root));
            s.pair = Some(PairWatch {
                seg,
                k,
                root: root_rank,
                looks: 0,
            });
            return Ok(s);
        }
        let other = 1 - root_rank;
        let rd = s.round();
        rd.push(snd((0, other * block), block, other as i32));
        // Our own block while the other's travels (the send only reads the input).
        rd.push(Step::CopyAtPost {
            src: (0, root_rank * block),
            dst: (1, 0),
            len: block.min(n),
        });
        Ok(s)
    }

    /// `MPI_Iscan` (`exclusive`: `MPI_Iexscan`) of `input` (our contribution): the result
    /// lands in region 0 (`out`; untouched on rank 0 for exscan); see
    /// [`CollComm::iscan_from`].
    pub fn iscan(
        &self,
        out: Region,
        input: Vec<u8>,
        op: OwnedOp,
        exclusive: bool,
    ) -> Result<Schedule> {
        self.iscan_from(out, Region::Owned(input), op, exclusive)
    }

    /// `MPI_Iscan` (`exclusive`: `MPI_Iexscan`) of `input` (region 1, our contribution,
    /// only read unless it is `out` itself, in place) into region 0 (`out`; untouched on
    /// rank 0 for exscan). Recursive doubling in MPICH's order-preserving scheme
    /// (`log2(size)` rounds), moving and combining only what is needed: a partial result
    /// travels only to a partner that folds it into its result (it ranks higher) or that
    /// has later rounds, and is extended only while we have later rounds; it starts as
    /// the input itself (copied to scratch once it must change, or in place before the
    /// result overwrites it). The first lower partial goes straight into `out` when the
    /// order allows (exclusive scan, or a commutative operation). From
    /// [`tune::SCAN_CHAIN_MIN`] bytes on more than 2 ranks, the chain instead
    /// ([`CollComm::iscan_chain`]).
    ///
    /// The ranks' lengths are not known to agree here: on more than 2 ranks (unless an
    /// algorithm is forced) a rank whose erroneous count put it on the other plan, or on a
    /// chain of another segment count, is met by the length check of the blocking scan
    /// ([`ScanCheck`]: the chain's ranks first run recursive doubling's messages with
    /// length headers), so that every such call fails instead of hanging.
    pub fn iscan_from(
        &self,
        out: Region,
        input: Region,
        op: OwnedOp,
        exclusive: bool,
    ) -> Result<Schedule> {
        self.iscan_plan(out, input, op, exclusive, (None, false))
    }

    /// [`CollComm::iscan_from`] where every rank is known to pass the same length (a
    /// persistent scan compared them at its init): no length check.
    pub fn iscan_agreed(
        &self,
        out: Region,
        input: Region,
        op: OwnedOp,
        exclusive: bool,
    ) -> Result<Schedule> {
        self.iscan_plan(out, input, op, exclusive, (None, true))
    }

    /// [`CollComm::iscan_from`] on a communicator with the segment `seg`, for a vector that
    /// goes by message: every rank's length is checked on the segment first, as for
    /// [`CollComm::ireduce_msg`].
    pub fn iscan_msg(
        &self,
        seg: Arc<Seg>,
        out: Region,
        input: Region,
        op: OwnedOp,
        exclusive: bool,
    ) -> Result<Schedule> {
        let s = self.iscan_plan(out, input, op, exclusive, (Some(0), true))?;
        Ok(self.checked_on(seg, s))
    }

    /// [`CollComm::iscan_from`] with the schedule's tag `tag` (`None`: its own); `agreed`:
    /// the ranks' lengths are known to agree (no length check).
    fn iscan_plan(
        &self,
        out: Region,
        input: Region,
        op: OwnedOp,
        exclusive: bool,
        (tag, agreed): (Option<i32>, bool),
    ) -> Result<Schedule> {
        let mut input = input;
        let (ip, n) = input.ptr_len();
        if n % op.elem_size.max(1) != 0 {
            return Err(arg_err(ErrorClass::Count, "vector is not whole elements"));
        }
        let commutative = op.commutative;
        let (elem, chain) = (op.elem_size, scan_chain(n, self.size));
        let alg = if chain {
            Alg::NbcScanChain
        } else {
            Alg::NbcScanRecdbl
        };
        let mut s = self.tagged(tag, vec![out, input], Some(op))?.counted(alg);
        // Exact (as the allreduce's and the ireduce's): a partial of another length (an
        // erroneous count) is reported at the end, and our later sends carry the error
        // marker in place of the partial, so that the ranks above fail too; the rounds
        // (which other ranks wait for) all run, the same for every length of one plan.
        s.exact = true;
        let (r, p) = (self.rank, self.size);
        let (op_, ol) = s.regions[0].ptr_len();
        if ol < n && !(exclusive && r == 0) {
            return Err(arg_err(
                ErrorClass::Count,
                "scan: the receive buffer is smaller than the contribution",
            ));
        }
        let (res, inp) = ((0, 0), (1, 0));
        let (i0, o0) = (ip as usize, op_ as usize);
        let aliased = n > 0 && ol > 0 && i0 < o0 + ol && o0 < i0 + n;
        let rounds = scan_rounds(r, p);
        // Another length may take the other plan: the length check ([`ScanCheck`]).
        let check = !agreed && p > 2 && tune::algorithm(Coll::Scan) == 0;
        let mut hout = 0;
        if check {
            if chain {
                hout = s.add_region(Region::Owned(ScanLens::of(n).encode().to_vec()));
            }
            s.scan = Some(ScanCheck {
                n,
                elem,
                chain,
                decide: rounds.len().saturating_sub(1),
                keep: if chain {
                    rounds.iter().map(|rd| rd.keep).collect()
                } else {
                    Vec::new()
                },
                hout,
                part: ScanLens::of(n),
                below: ScanLens::NONE,
                watch: None,
                got: None,
                planned: 0,
            });
        }
        if chain {
            if check {
                // Recursive doubling's messages, each a header of the lengths our partial
                // would cover, before the chain.
                let hin = s.add_region(Region::Owned(vec![0; SCAN_HDR]));
                for rd in &rounds {
                    s.next_round();
                    if rd.send {
                        s.send(Lane::default(), (hout, 0), SCAN_HDR, rd.peer);
                    }
                    if rd.recv {
                        s.watch((hin, 0), SCAN_HDR, usize::MAX, rd.peer);
                    }
                }
            }
            self.iscan_chain(&mut s, (n, elem), aliased, exclusive);
            return Ok(s.planned());
        }
        // With the check, receives have room for a chain rank's header.
        let room = if check { n.max(SCAN_HDR) } else { n };
        let mut part = inp;
        let mut pbuf: Option<usize> = None;
        let mut tbuf: Option<usize> = None;
        // Whether `out` holds a result yet (inclusive: in place it holds ours from the
        // start).
        let mut have = !exclusive && aliased;
        for (i, rd) in rounds.iter().enumerate() {
            let (d, keep, send, recv) = (rd.peer, rd.keep, rd.send, rd.recv);
            // Whether we send our partial in a later round.
            let sends_after = rounds[i + 1..].iter().any(|x| x.send);
            s.next_round();
            if send {
                s.send(Lane::default(), part, n, d);
            }
            if !recv {
                continue;
            }
            // In place, our input is about to be overwritten while we still send it:
            // the partial moves to scratch first.
            let guard = |s: &mut Schedule, part: &mut At, pbuf: &mut Option<usize>| {
                if aliased && *part == inp && d < r && sends_after {
                    let pb = *pbuf.get_or_insert_with(|| s.add_region(Region::Owned(pooled(n))));
                    s.copy(inp, (pb, 0), n);
                    *part = (pb, 0);
                }
            };
            if d < r && !have && !keep && (exclusive || commutative) && !aliased && room == n {
                // Straight into the result (exclusive: it is the partner's partial;
                // inclusive and commutative: ours is folded in).
                s.recv_checked(check, (res, n), n, d);
                if !exclusive {
                    s.reduce(inp, res, n);
                }
                have = true;
                continue;
            }
            let t = (
                *tbuf.get_or_insert_with(|| s.add_region(Region::Owned(pooled(room)))),
                0,
            );
            s.recv_checked(check, (t, room), n, d);
            if d < r {
                // `t` covers the ranks just below those our result covers.
                guard(&mut s, &mut part, &mut pbuf);
                if exclusive && !have {
                    s.copy(t, res, n);
                } else {
                    if !have {
                        // Ours alone (not aliased: `have` starts true in place).
                        s.copy(inp, res, n);
                    }
                    s.reduce(t, res, n);
                }
                have = true;
                if keep {
                    if part == inp {
                        let pb =
                            *pbuf.get_or_insert_with(|| s.add_region(Region::Owned(pooled(n))));
                        s.copy(inp, (pb, 0), n);
                        part = (pb, 0);
                    }
                    s.reduce(t, part, n);
                }
            } else if keep {
                // `t` covers the ranks just above our partial's: partial ∘ t.
                if part == inp {
                    let pb = *pbuf.get_or_insert_with(|| s.add_region(Region::Owned(pooled(n))));
                    s.copy(t, (pb, 0), n);
                    part = (pb, 0);
                    s.reduce(inp, part, n);
                } else if commutative {
                    s.reduce(t, part, n);
                } else {
                    s.reduce(part, t, n);
                    s.copy(t, part, n);
                }
            }
        }
        if !exclusive && !have && n > 0 {
            s.copy(inp, res, n);
        }
        Ok(s.planned())
    }

    /// The rounds of the pipelined chain scan in `s` (region 0 the result, region 1 our
    /// contribution of `n` bytes of `elem`-byte elements, `aliased`: the same memory, in
    /// place), as the blocking [`CollComm::scan_into`] runs it: rank 0 sends its
    /// contribution in segments ([`chain_segments`]); every other rank receives the prefix
    /// of the ranks below it segment by segment, one segment per round, extends it by its
    /// own contribution and passes it on to the next rank in the round after (the inclusive
    /// result from region 0; the exclusive prefix lands in region 0 and `prefix ∘ ours`
    /// goes on from scratch). A prefix is always combined as `lower ∘ ours`, except that a
    /// commutative operation receives it straight into the result and folds ours in.
    fn iscan_chain(
        &self,
        s: &mut Schedule,
        (n, elem): (usize, usize),
        aliased: bool,
        exclusive: bool,
    ) {
        let (r, p) = (self.rank, self.size);
        let (res, mut inp) = ((0, 0), (1, 0));
        let segs = chain_segments(n, elem);
        let next = (r + 1 < p).then_some(r + 1);
        let commutative = s.op.as_ref().is_some_and(|o| o.commutative);
        let at = |reg: (usize, usize), o: usize| (reg.0, reg.1 + o);
        if r == 0 {
            s.next_round();
            for &(o, m) in &segs {
                s.send(Lane::default(), at(inp, o), m, next.unwrap_or(PROC_NULL));
            }
            if !exclusive && !aliased {
                s.copy(inp, res, n);
            }
            return;
        }
        let region = |s: &mut Schedule| (s.add_region(Region::Owned(pooled(n))), 0);
        if exclusive && aliased && next.is_some() {
            // The prefix lands where our contribution is: copied aside first.
            let c = region(s);
            s.next_round();
            s.copy(inp, c, n);
            inp = c;
        }
        let direct = exclusive || (commutative && !aliased);
        let tmp = (!direct || (exclusive && next.is_some())).then(|| region(s).0);
        let land = if direct { 0 } else { tmp.unwrap_or(0) };
        // What goes on to the next rank: the result, or (exclusive) `prefix ∘ ours`.
        let out = if exclusive { tmp.unwrap_or(0) } else { 0 };
        for (i, &(o, m)) in segs.iter().enumerate() {
            s.next_round();
            s.recv(Lane::default(), (land, o), m, r - 1);
            if let (Some(next), Some(&(po, pm))) = (next, i.checked_sub(1).map(|j| &segs[j])) {
                s.send(Lane::default(), (out, po), pm, next);
            }
            match (exclusive, tmp) {
                (false, None) => s.reduce(at(inp, o), (0, o), m),
                (false, Some(t)) => {
                    if !aliased {
                        s.copy(at(inp, o), (0, o), m);
                    }
                    s.reduce((t, o), (0, o), m);
                }
                (true, Some(t)) => {
                    s.copy(at(inp, o), (t, o), m);
                    s.reduce((0, o), (t, o), m);
                }
                (true, None) => {}
            }
        }
        if let (Some(next), Some(&(o, m))) = (next, segs.last()) {
            s.next_round();
            s.send(Lane::default(), (out, o), m, next);
        }
    }

    /// `MPI_Ireduce_scatter` of `data` (our contribution, `counts` bytes per rank back to
    /// back) into region 0 (`out`): see [`CollComm::ireduce_scatter_from`].
    pub fn ireduce_scatter(
        &self,
        data: Vec<u8>,
        out: Region,
        counts: &[usize],
        op: OwnedOp,
    ) -> Result<Schedule> {
        self.ireduce_scatter_from(Region::Owned(data), out, counts, op)
    }

    /// `MPI_Ireduce_scatter`: `input` (our contribution, `counts` bytes per rank back to
    /// back; region 1, only read: the user's memory when contiguous) is reduced block by
    /// block and block `i` lands in region 0 (`out`) of rank `i`. Pairwise exchange in one
    /// round: every rank sends block `i` of its input straight to rank `i` and receives
    /// every other rank's contribution to its own block into scratch (region 2), then folds
    /// them in rank order (`x0 ∘ (x1 ∘ (… ∘ x(p-1)))`, for any operation) into `out`. Each
    /// rank moves only its share, and nothing is copied first. In place (`out` inside
    /// `input`), our own block is copied aside before `out` is written.
    pub fn ireduce_scatter_from(
        &self,
        input: Region,
        out: Region,
        counts: &[usize],
        op: OwnedOp,
    ) -> Result<Schedule> {
        self.ireduce_scatter_plan(input, out, counts, op, None)
    }

    /// [`CollComm::ireduce_scatter_from`] on a communicator with the segment `seg`, for a
    /// vector that goes by message: every rank's length (the whole vector's) is checked on
    /// the segment first, as for [`CollComm::ireduce_msg`], so that a rank whose erroneous
    /// counts put it on a path of the segment meets us there; then the same exchange on a
    /// tag derived from the segment's sequence. Region 0 is `input` and region 1 `out`
    /// here (as on the segment's paths).
    pub fn ireduce_scatter_msg(
        &self,
        seg: Arc<Seg>,
        input: Region,
        out: Region,
        counts: &[usize],
        op: OwnedOp,
    ) -> Result<Schedule> {
        let s = self.ireduce_scatter_plan(input, out, counts, op, Some(0))?;
        // The length word holds the counts' mark: ranks that split the same sum otherwise
        // (erroneous; some of them may be on a path of the segment) fail alike there.
        Ok(self.checked_marked(seg, s, crate::counts_mark(counts.iter().copied())))
    }

    /// [`CollComm::ireduce_scatter_from`] with the schedule's tag `tag` (`None`: its own).
    fn ireduce_scatter_plan(
        &self,
        input: Region,
        out: Region,
        counts: &[usize],
        op: OwnedOp,
        tag: Option<i32>,
    ) -> Result<Schedule> {
        if counts.len() != self.size as usize {
            return Err(arg_err(
                ErrorClass::Count,
                format!(
                    "reduce_scatter needs {} counts, got {}",
                    self.size,
                    counts.len()
                ),
            ));
        }
        let mut input = input;
        let (ip, n) = input.ptr_len();
        let total: usize = counts.iter().sum();
        if n != total || counts.iter().any(|&c| c % op.elem_size.max(1) != 0) {
            return Err(arg_err(
                ErrorClass::Count,
                "reduce_scatter: the contribution is not the sum of whole-element blocks",
            ));
        }
        let me = self.rank as usize;
        // Our output is region 0 and our input region 1, but on the segment's path (`tag`
        // given) the other way round: the length check there reads region 0, which must be
        // the whole vector (every rank's is as long; our block need not be).
        let (o, i) = if tag.is_some() { (1, 0) } else { (0, 1) };
        let regions = if tag.is_some() {
            vec![input, out]
        } else {
            vec![out, input]
        };
        let mut s = self
            .tagged(tag, regions, Some(op))?
            .counted(Alg::NbcReduceScatterPairwise);
        // Exact (as the allreduce's): a contribution of another length than our block
        // (erroneous counts) fails the call once its one round ran; every rank exchanges
        // with every other, so each one whose block length differs from a peer's sees it.
        s.exact = true;
        let (op_, ol) = s.regions[o].ptr_len();
        if ol < counts[me] {
            return Err(arg_err(
                ErrorClass::Truncate,
                "reduce_scatter: the receive buffer is smaller than our block",
            ));
        }
        let displs: Vec<usize> = counts
            .iter()
            .scan(0, |off, &c| {
                let d = *off;
                *off += c;
                Some(d)
            })
            .collect();
        // Our output inside our input (in place): our block goes to scratch too.
        let (i0, o0) = (ip as usize, op_ as usize);
        let aliased = n > 0 && ol > 0 && i0 < o0 + ol && o0 < i0 + n;
        let p = counts.len();
        let mine = counts[me];
        // Scratch offset of each rank's contribution to our block (ours only when
        // aliased).
        let mut toff = vec![0usize; p];
        let mut tlen = 0;
        for r in (0..p).filter(|&r| r != me || aliased) {
            toff[r] = tlen;
            tlen += mine;
        }
        let t = s.add_region(Region::Owned(pooled(tlen)));
        let rd = s.round();
        for k in 1..p {
            let src = (me + p - k) % p;
            rd.push(rcv((t, toff[src]), mine, src as i32));
        }
        for k in 1..p {
            let dst = (me + k) % p;
            rd.push(snd((i, displs[dst]), counts[dst], dst as i32));
        }
        if mine == 0 {
            return Ok(s);
        }
        if aliased {
            rd.push(Step::Copy {
                src: (i, displs[me]),
                dst: (t, toff[me]),
                len: mine,
            });
        }
        let at = |r: usize| {
            if r == me && !aliased {
                (i, displs[me])
            } else {
                (t, toff[r])
            }
        };
        rd.push(Step::Copy {
            src: at(p - 1),
            dst: (o, 0),
            len: mine,
        });
        for r in (0..p - 1).rev() {
            rd.push(Step::Reduce {
                src: at(r),
                dst: (o, 0),
                len: mine,
            });
        }
        Ok(s)
    }
}

/// The own block of a gatherv's or scatterv's root `me` on the segment (input region 0,
/// output region 1, of `lens` bytes) as a copy (source, destination, length), when it lies
/// within both regions (otherwise the segment's part copies it and reports a mismatch).
fn own_block(kind: &SmKind, me: usize, lens: (usize, usize)) -> Option<(At, At, usize)> {
    match kind {
        SmKind::Gatherv {
            root,
            counts,
            displs,
            ..
        } if *root == me && lens.0 > 0 => {
            let (c, d) = (*counts.get(me)?, *displs.get(me)?);
            (lens.0 <= c && d + lens.0 <= lens.1).then_some(((0, 0), (1, d), lens.0))
        }
        SmKind::Scatterv {
            root,
            counts,
            displs,
            ..
        } if *root == me && lens.1 > 0 => {
            let (c, d) = (*counts.get(me)?, *displs.get(me)?);
            (d + c <= lens.0 && c <= lens.1).then_some(((0, d), (1, 0), c))
        }
        _ => None,
    }
}

/// The one round of an alltoallv for rank `me` of `p` (input region 0, output region 1,
/// counts and displacements in bytes): receive every other rank's block, send ours, copy
/// our own block.
fn alltoallv_round(
    (me, p): (usize, usize),
    (scounts, sdispls): (&[usize], &[usize]),
    (rcounts, rdispls): (&[usize], &[usize]),
) -> Round {
    let mut rd = Vec::with_capacity(2 * p - 1);
    for k in 1..p {
        let src = (me + p - k) % p;
        rd.push(rcv((1, rdispls[src]), rcounts[src], src as i32));
    }
    for k in 1..p {
        let dst = (me + k) % p;
        rd.push(snd((0, sdispls[dst]), scounts[dst], dst as i32));
    }
    rd.push(Step::Copy {
        src: (0, sdispls[me]),
        dst: (1, rdispls[me]),
        len: scounts[me],
    });
    Round(rd)
}
