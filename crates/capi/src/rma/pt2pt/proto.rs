//! The sans-IO core of the `pt2pt` one-sided component: the messages origins and targets
//! exchange ([`Req`], [`Reply`], their byte codec) and the target-side state machine
//! ([`TargetCore`]): passive-target lock queueing, in-order application of each origin's
//! operations, errors deferred to the next acknowledgement, and the death of an origin.
//! No sockets, threads or clocks: the driver (`super`) feeds it decoded requests and
//! carries out the replies it returns; the window memory is reached through [`Memory`].

use crate::consts::{MPIX_ERR_PROC_FAILED, MPI_ERR_INTERN, MPI_ERR_RMA_SYNC, MPI_SUCCESS};
use std::collections::{BTreeMap, VecDeque};

/// Byte ranges of a target's window: (offset from the window base, length).
pub(crate) type Ranges = Vec<(isize, usize)>;

/// The reduction an accumulate applies at the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AccOp {
    /// MPI operation handle (`MPI_SUM`, `MPI_REPLACE`, `MPI_NO_OP`, ...).
    pub op: i32,
    /// Predefined basic datatype handle of the elements.
    pub basic: i32,
    /// Size in bytes of one element of `basic`.
    pub bsize: u32,
}

/// A request from an origin to a target's progress thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Req {
    /// Write `data` over `ranges`.
    Put { ranges: Ranges, data: Vec<u8> },
    /// Read `ranges`; the reply carries the bytes.
    Get { ranges: Ranges },
    /// Combine `data` into `ranges` atomically; with `fetch` the reply carries the old bytes.
    Acc {
        op: AccOp,
        fetch: bool,
        ranges: Ranges,
        data: Vec<u8>,
    },
    /// Compare-and-swap of one element at `off`; the reply carries the old bytes.
    Cas {
        off: isize,
        cmp: Vec<u8>,
        new: Vec<u8>,
    },
    /// Acknowledge once every earlier operation of this origin is applied.
    Flush,
    /// Grant a passive-target lock (shared or exclusive) when possible.
    Lock { exclusive: bool },
    /// Release the origin's lock (after applying its earlier operations) and acknowledge.
    Unlock,
    /// PSCW: the target (sender) posted an exposure epoch to this process as origin.
    Post,
    /// PSCW: the origin (sender) completed its access epoch to this target.
    Complete,
}

/// A reply from a target to an origin: an MPI error class (`MPI_SUCCESS` when the request
/// and every operation since the last reply succeeded), its detail, and data (`Get`,
/// fetching accumulates, compare-and-swap).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reply {
    /// `MPI_SUCCESS` or an MPI error class.
    pub code: i32,
    /// What went wrong (empty on success).
    pub detail: String,
    /// Payload.
    pub data: Vec<u8>,
}

impl Reply {
    fn ok(data: Vec<u8>) -> Reply {
        Reply {
            code: MPI_SUCCESS,
            detail: String::new(),
            data,
        }
    }
    fn fail(f: Fail) -> Reply {
        Reply {
            code: f.code,
            detail: f.detail,
            data: Vec::new(),
        }
    }
}

/// A failed operation at the target: MPI error class and detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fail {
    /// MPI error class.
    pub code: i32,
    /// What went wrong.
    pub detail: String,
}

/// A message that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed one-sided message: {}", self.0)
    }
}

/// Little-endian writer.
struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn ranges(&mut self, r: &[(isize, usize)]) {
        self.u64(r.len() as u64);
        for &(o, l) in r {
            self.i64(o as i64);
            self.u64(l as u64);
        }
    }
}

/// Little-endian reader.
struct R<'a>(&'a [u8]);

impl R<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError("truncated"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn len(&mut self) -> Result<usize, DecodeError> {
        let n = self.u64()?;
        if n > self.0.len() as u64 {
            return Err(DecodeError("length past the end"));
        }
        Ok(n as usize)
    }
    fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.len()?;
        Ok(self.take(n)?.to_vec())
    }
    fn ranges(&mut self) -> Result<Ranges, DecodeError> {
        let n = self.u64()?;
        if n > self.0.len() as u64 / 16 {
            return Err(DecodeError("range count past the end"));
        }
        (0..n)
            .map(|_| Ok((self.i64()? as isize, self.u64()? as usize)))
            .collect()
    }
    fn end(self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes"))
        }
    }
}

impl Req {
    /// The wire form.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::new());
        match self {
            Req::Put { ranges, data } => {
                w.u8(1);
                w.ranges(ranges);
                w.bytes(data);
            }
            Req::Get { ranges } => {
                w.u8(2);
                w.ranges(ranges);
            }
            Req::Acc {
                op,
                fetch,
                ranges,
                data,
            } => {
                w.u8(3);
                w.i64(op.op.into());
                w.i64(op.basic.into());
                w.u64(op.bsize.into());
                w.u8(u8::from(*fetch));
                w.ranges(ranges);
                w.bytes(data);
            }
            Req::Cas { off, cmp, new } => {
                w.u8(4);
                w.i64(*off as i64);
                w.bytes(cmp);
                w.bytes(new);
            }
            Req::Flush => w.u8(5),
            Req::Lock { exclusive } => {
                w.u8(6);
                w.u8(u8::from(*exclusive));
            }
            Req::Unlock => w.u8(7),
            Req::Post => w.u8(8),
            Req::Complete => w.u8(9),
        }
        w.0
    }

    /// The wire form of a request sent in the origin's fence epoch `epoch`.
    pub(crate) fn encode_at(&self, epoch: u64) -> Vec<u8> {
        let mut w = W(epoch.to_le_bytes().to_vec());
        w.0.extend_from_slice(&self.encode());
        w.0
    }

    /// Decode [`Req::encode_at`]'s form: the origin's fence epoch and the request.
    pub(crate) fn decode_at(b: &[u8]) -> Result<(u64, Req), DecodeError> {
        let mut r = R(b);
        let epoch = r.u64()?;
        Ok((epoch, Req::decode(r.0)?))
    }

    /// Decode the wire form.
    pub(crate) fn decode(b: &[u8]) -> Result<Req, DecodeError> {
        let mut r = R(b);
        let int = |v: i64| i32::try_from(v).map_err(|_| DecodeError("handle out of range"));
        let req = match r.u8()? {
            1 => Req::Put {
                ranges: r.ranges()?,
                data: r.bytes()?,
            },
            2 => Req::Get {
                ranges: r.ranges()?,
            },
            3 => {
                let op = int(r.i64()?)?;
                let basic = int(r.i64()?)?;
                let bsize = u32::try_from(r.u64()?).map_err(|_| DecodeError("element size"))?;
                Req::Acc {
                    op: AccOp { op, basic, bsize },
                    fetch: r.u8()? != 0,
                    ranges: r.ranges()?,
                    data: r.bytes()?,
                }
            }
            4 => Req::Cas {
                off: r.i64()? as isize,
                cmp: r.bytes()?,
                new: r.bytes()?,
            },
            5 => Req::Flush,
            6 => Req::Lock {
                exclusive: r.u8()? != 0,
            },
            7 => Req::Unlock,
            8 => Req::Post,
            9 => Req::Complete,
            _ => return Err(DecodeError("unknown request kind")),
        };
        r.end()?;
        Ok(req)
    }
}

impl Reply {
    /// The wire form.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(24 + self.data.len()));
        w.i64(self.code.into());
        w.bytes(self.detail.as_bytes());
        w.bytes(&self.data);
        w.0
    }

    /// Decode the wire form.
    pub(crate) fn decode(b: &[u8]) -> Result<Reply, DecodeError> {
        let mut r = R(b);
        let code = i32::try_from(r.i64()?).map_err(|_| DecodeError("error class"))?;
        let detail = String::from_utf8_lossy(&r.bytes()?).into_owned();
        let data = r.bytes()?;
        r.end()?;
        Ok(Reply { code, detail, data })
    }
}

/// The window memory of the target and its synchronisation words, as the core uses them.
/// The driver implements it over the window's segment (the same lock word and accumulate
/// mutex the ranks of the target's node use directly); tests use a plain model.
pub(crate) trait Memory {
    /// Write `data` over `ranges`.
    fn put(&mut self, ranges: &[(isize, usize)], data: &[u8]) -> Result<(), Fail>;
    /// Read `ranges`.
    fn get(&mut self, ranges: &[(isize, usize)]) -> Result<Vec<u8>, Fail>;
    /// Combine `data` into `ranges` under the accumulate mutex; the old bytes when `fetch`.
    fn accumulate(
        &mut self,
        op: AccOp,
        ranges: &[(isize, usize)],
        data: &[u8],
        fetch: bool,
    ) -> Result<Vec<u8>, Fail>;
    /// Compare-and-swap at `off` under the accumulate mutex; the old bytes.
    fn cas(&mut self, off: isize, cmp: &[u8], new: &[u8]) -> Result<Vec<u8>, Fail>;
    /// Try once to take the passive-target lock word (shared or exclusive).
    fn try_lock(&mut self, exclusive: bool) -> bool;
    /// Release the lock word taken as `exclusive` or shared.
    fn unlock(&mut self, exclusive: bool);
    /// Count a `post` that rank `target` made to us (this process as origin).
    fn posted(&mut self, target: usize);
    /// Count a `complete` of an origin's access epoch to us.
    fn completed(&mut self);
}

/// The target side: lock holders and waiters, per-origin deferred errors, dead origins.
#[derive(Default, Debug)]
pub(crate) struct TargetCore {
    /// Origins holding our lock, and whether exclusively.
    held: BTreeMap<usize, bool>,
    /// Lock requests not granted yet, first come first served.
    queue: VecDeque<(usize, bool)>,
    /// The first failure of an unacknowledged operation, per origin.
    failed: BTreeMap<usize, Fail>,
    /// Origins known dead: their requests are dropped.
    dead: Vec<usize>,
    /// Fences this process has completed on the window (its fence epoch); a request
    /// carries its origin's ([`TargetCore::handle_at`]).
    epoch: u64,
    /// Requests of epoch [`TargetCore::epoch`] handled so far (what a fence counts).
    handled: u64,
    /// Requests of a later epoch (their origin left a fence we are still in): held until
    /// we complete it too ([`TargetCore::close_epoch`]), in arrival order.
    ahead: VecDeque<(usize, u64, Req)>,
}

/// Replies to send: (origin, reply).
pub(crate) type Out = Vec<(usize, Reply)>;

impl TargetCore {
    /// A target with no lock holder.
    pub(crate) fn new() -> TargetCore {
        TargetCore::default()
    }

    /// Handle request `req` from `origin` sent in our own fence epoch (see
    /// [`TargetCore::handle_at`]).
    #[cfg(test)]
    pub(crate) fn handle(&mut self, origin: usize, req: Req, mem: &mut dyn Memory) -> Out {
        self.handle_at(origin, self.epoch, req, mem)
    }

    /// Handle request `req` that `origin` sent in its fence epoch `epoch` (the number of
    /// fences it had completed on the window). Requests of our epoch (or an earlier one)
    /// are applied and counted; a request of a later epoch, whose origin left a fence
    /// that we have not completed yet, is held until we have
    /// ([`TargetCore::close_epoch`]): our fence may still wait for other origins'
    /// operations of the epoch it closes, which that request (a get, say) must see.
    /// Requests of one origin arrive in the order it sent them (and their epochs never
    /// decrease), so holding keeps that order. Returns the replies to send, possibly to
    /// other origins (a lock released by `Unlock` is granted to the next waiters).
    pub(crate) fn handle_at(
        &mut self,
        origin: usize,
        epoch: u64,
        req: Req,
        mem: &mut dyn Memory,
    ) -> Out {
        if epoch > self.epoch {
            self.ahead.push_back((origin, epoch, req));
            return Vec::new();
        }
        if epoch == self.epoch {
            self.handled += 1;
        }
        self.apply(origin, req, mem)
    }

    /// Whether every request of our epoch that the origins sent to us (`expected`, their
    /// sum agreed in the fence) has been handled.
    pub(crate) fn epoch_complete(&self, expected: u64) -> bool {
        self.handled >= expected
    }

    /// Our fence completed: the next epoch begins, and the requests held for it are
    /// handled now (in arrival order). Returns their replies.
    pub(crate) fn close_epoch(&mut self, mem: &mut dyn Memory) -> Out {
        self.epoch += 1;
        self.handled = 0;
        let mut out = Vec::new();
        let held = std::mem::take(&mut self.ahead);
        for (origin, epoch, req) in held {
            out.extend(self.handle_at(origin, epoch, req, mem));
        }
        out
    }

    /// Apply `req` of `origin` (its epoch admitted by [`TargetCore::handle_at`]).
    fn apply(&mut self, origin: usize, req: Req, mem: &mut dyn Memory) -> Out {
        if self.dead.contains(&origin) {
            return Vec::new();
        }
        let mut out = Vec::new();
        match req {
            Req::Put { ranges, data } => {
                let r = mem.put(&ranges, &data);
                self.defer(origin, r);
            }
            Req::Acc {
                op,
                fetch: false,
                ranges,
                data,
            } => {
                let r = mem.accumulate(op, &ranges, &data, false).map(|_| ());
                self.defer(origin, r);
            }
            Req::Get { ranges } => out.push((origin, self.answer(origin, mem.get(&ranges)))),
            Req::Acc {
                op,
                fetch: true,
                ranges,
                data,
            } => {
                let r = mem.accumulate(op, &ranges, &data, true);
                out.push((origin, self.answer(origin, r)));
            }
            Req::Cas { off, cmp, new } => {
                let r = mem.cas(off, &cmp, &new);
                out.push((origin, self.answer(origin, r)));
            }
            Req::Flush => out.push((origin, self.answer(origin, Ok(Vec::new())))),
            Req::Lock { exclusive } => {
                if self.held.contains_key(&origin) || self.queue.iter().any(|q| q.0 == origin) {
                    let f = Fail {
                        code: MPI_ERR_RMA_SYNC,
                        detail: "this window is already locked by the origin".into(),
                    };
                    out.push((origin, Reply::fail(f)));
                } else {
                    self.queue.push_back((origin, exclusive));
                    self.grant(mem, &mut out);
                }
            }
            Req::Unlock => {
                let r = match self.held.remove(&origin) {
                    Some(excl) => {
                        mem.unlock(excl);
                        Ok(Vec::new())
                    }
                    None => Err(Fail {
                        code: MPI_ERR_RMA_SYNC,
                        detail: "unlock of a window the origin has not locked".into(),
                    }),
                };
                out.push((origin, self.answer(origin, r)));
                self.grant(mem, &mut out);
            }
            Req::Post => mem.posted(origin),
            // Answered, so that the origin's MPI_Win_complete returns once the target
            // counted it: a Win_test there after a barrier sees the epoch done (mpi4py's
            // testStartCompletePostTest) and a deferred error reaches the origin.
            Req::Complete => {
                mem.completed();
                let r = self.answer(origin, Ok(Vec::new()));
                out.push((origin, r));
            }
        }
        out
    }

    /// Try the waiting lock requests again (the lock word may also be held by ranks that
    /// reach it directly, so the driver calls this while idle).
    pub(crate) fn poll(&mut self, mem: &mut dyn Memory) -> Out {
        let mut out = Vec::new();
        self.grant(mem, &mut out);
        out
    }

    /// `origin` died (a request or reply of its failed, or the engine reported it): forget
    /// its waiting request and deferred error and drop whatever it sends later. If it held
    /// our lock, the lock is released and every origin waiting for it then gets
    /// `MPIX_ERR_PROC_FAILED` instead of the lock (the holder may have died halfway through
    /// its updates; a later lock request is granted as usual). Returns the replies to send.
    pub(crate) fn peer_died(&mut self, origin: usize, mem: &mut dyn Memory) -> Out {
        if self.dead.contains(&origin) {
            return Vec::new();
        }
        self.dead.push(origin);
        self.queue.retain(|q| q.0 != origin);
        self.ahead.retain(|q| q.0 != origin);
        self.failed.remove(&origin);
        let mut out = Vec::new();
        if let Some(excl) = self.held.remove(&origin) {
            mem.unlock(excl);
            for (o, _) in self.queue.drain(..) {
                let f = Fail {
                    code: MPIX_ERR_PROC_FAILED,
                    detail: format!(
                        "rank {origin} of the window died holding the lock of this target (its updates may be partly applied); lock again to go on"
                    ),
                };
                out.push((o, Reply::fail(f)));
            }
        }
        self.grant(mem, &mut out);
        out
    }

    /// Whether origins wait for a lock that others hold (only then does a holder's silent
    /// death matter, see [`TargetCore::peer_died`]).
    pub(crate) fn lock_contended(&self) -> bool {
        !self.queue.is_empty() && !self.held.is_empty()
    }

    /// Whether lock requests wait while no origin reached with messages holds the lock:
    /// a rank of the target's node holds the lock word directly, and only polling sees it
    /// released (a holder reached with messages releases it with a message).
    pub(crate) fn held_directly(&self) -> bool {
        !self.queue.is_empty() && self.held.is_empty()
    }

    /// Whether `origin` holds our lock (and how).
    #[cfg(test)]
    pub(crate) fn holder(&self, origin: usize) -> Option<bool> {
        self.held.get(&origin).copied()
    }

    /// Number of lock requests waiting.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Grant waiting lock requests in arrival order while the lock word allows.
    fn grant(&mut self, mem: &mut dyn Memory, out: &mut Out) {
        while let Some(&(o, excl)) = self.queue.front() {
            if !mem.try_lock(excl) {
                break;
            }
            self.queue.pop_front();
            self.held.insert(o, excl);
            out.push((o, Reply::ok(Vec::new())));
        }
    }

    /// Remember the first failure of an operation that has no reply of its own.
    fn defer(&mut self, origin: usize, r: Result<(), Fail>) {
        if let Err(f) = r {
            self.failed.entry(origin).or_insert(f);
        }
    }

    /// The reply to a request that answers: a deferred failure of an earlier operation
    /// wins over this one's result (so the origin learns about it at its next
    /// synchronisation).
    fn answer(&mut self, origin: usize, r: Result<Vec<u8>, Fail>) -> Reply {
        match (self.failed.remove(&origin), r) {
            (Some(f), _) | (None, Err(f)) => Reply::fail(f),
            (None, Ok(d)) => Reply::ok(d),
        }
    }
}

/// A reply that did not decode, as a failure the origin reports.
pub(crate) fn undecodable(e: &DecodeError) -> Fail {
    Fail {
        code: MPI_ERR_INTERN,
        detail: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::{MPI_ERR_RMA_RANGE, MPI_INT, MPI_SUM};

    /// A window of bytes with a reader/writer lock word that another party may hold.
    #[derive(Default)]
    struct Model {
        mem: Vec<u8>,
        readers: u32,
        writer: bool,
        posted: Vec<usize>,
        completed: u32,
        /// Order in which accumulates were applied: (first data byte).
        applied: Vec<u8>,
    }

    impl Model {
        fn sized(n: usize) -> Model {
            Model {
                mem: vec![0; n],
                ..Model::default()
            }
        }
        fn check(&self, r: &[(isize, usize)]) -> Result<(), Fail> {
            for &(o, l) in r {
                if o < 0 || o as usize + l > self.mem.len() {
                    return Err(Fail {
                        code: MPI_ERR_RMA_RANGE,
                        detail: "outside".into(),
                    });
                }
            }
            Ok(())
        }
    }

    impl Memory for Model {
        fn put(&mut self, r: &[(isize, usize)], data: &[u8]) -> Result<(), Fail> {
            self.check(r)?;
            let mut p = 0;
            for &(o, l) in r {
                self.mem[o as usize..o as usize + l].copy_from_slice(&data[p..p + l]);
                p += l;
            }
            Ok(())
        }
        fn get(&mut self, r: &[(isize, usize)]) -> Result<Vec<u8>, Fail> {
            self.check(r)?;
            Ok(r.iter()
                .flat_map(|&(o, l)| self.mem[o as usize..o as usize + l].to_vec())
                .collect())
        }
        fn accumulate(
            &mut self,
            op: AccOp,
            r: &[(isize, usize)],
            data: &[u8],
            fetch: bool,
        ) -> Result<Vec<u8>, Fail> {
            assert_eq!(op.op, MPI_SUM);
            let old = self.get(r)?;
            self.applied.push(data[0]);
            let new: Vec<u8> = old
                .iter()
                .zip(data)
                .map(|(a, b)| a.wrapping_add(*b))
                .collect();
            self.put(r, &new)?;
            Ok(if fetch { old } else { Vec::new() })
        }
        fn cas(&mut self, off: isize, cmp: &[u8], new: &[u8]) -> Result<Vec<u8>, Fail> {
            let r = [(off, cmp.len())];
            let old = self.get(&r)?;
            if old == cmp {
                self.put(&r, new)?;
            }
            Ok(old)
        }
        fn try_lock(&mut self, exclusive: bool) -> bool {
            if self.writer || (exclusive && self.readers > 0) {
                return false;
            }
            if exclusive {
                self.writer = true;
            } else {
                self.readers += 1;
            }
            true
        }
        fn unlock(&mut self, exclusive: bool) {
            if exclusive {
                self.writer = false;
            } else {
                self.readers -= 1;
            }
        }
        fn posted(&mut self, target: usize) {
            self.posted.push(target);
        }
        fn completed(&mut self) {
            self.completed += 1;
        }
    }

    const SUM: AccOp = AccOp {
        op: MPI_SUM,
        basic: MPI_INT,
        bsize: 1,
    };

    fn granted(out: &Out) -> Vec<usize> {
        out.iter()
            .filter(|(_, r)| r.code == MPI_SUCCESS)
            .map(|(o, _)| *o)
            .collect()
    }

    #[test]
    fn requests_and_replies_survive_the_wire() {
        let reqs = [
            Req::Put {
                ranges: vec![(0, 4), (-8, 2)],
                data: vec![1, 2, 3, 4, 5, 6],
            },
            Req::Get {
                ranges: vec![(16, 3)],
            },
            Req::Acc {
                op: SUM,
                fetch: true,
                ranges: vec![(4, 4)],
                data: vec![9; 4],
            },
            Req::Cas {
                off: 8,
                cmp: vec![0; 8],
                new: vec![1; 8],
            },
            Req::Flush,
            Req::Lock { exclusive: true },
            Req::Unlock,
            Req::Post,
            Req::Complete,
        ];
        for r in reqs {
            assert_eq!(Req::decode(&r.encode()), Ok(r));
        }
        let rep = Reply {
            code: MPI_ERR_RMA_RANGE,
            detail: "bytes 0..9".into(),
            data: vec![7; 3],
        };
        assert_eq!(Reply::decode(&rep.encode()), Ok(rep));
        // Malformed input is an error, never a panic.
        assert!(Req::decode(&[]).is_err());
        assert!(Req::decode(&[42]).is_err());
        assert!(Req::decode(&[1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
        assert!(Req::decode(&[5, 0]).is_err());
        let mut long = Req::Get { ranges: vec![] }.encode();
        long[1] = 200;
        assert!(Req::decode(&long).is_err());
        assert!(Reply::decode(&[0; 7]).is_err());
    }

    #[test]
    fn exclusive_locks_queue_in_arrival_order_behind_shared_ones() {
        let (mut c, mut m) = (TargetCore::new(), Model::sized(8));
        assert_eq!(
            granted(&c.handle(1, Req::Lock { exclusive: false }, &mut m)),
            [1]
        );
        assert_eq!(
            granted(&c.handle(2, Req::Lock { exclusive: false }, &mut m)),
            [2]
        );
        // An exclusive request waits for both readers.
        assert!(c
            .handle(3, Req::Lock { exclusive: true }, &mut m)
            .is_empty());
        // A later shared request does not overtake the waiting writer.
        assert!(c
            .handle(4, Req::Lock { exclusive: false }, &mut m)
            .is_empty());
        assert_eq!(c.waiting(), 2);
        let out = c.handle(1, Req::Unlock, &mut m);
        assert_eq!(granted(&out), [1], "only the unlock acknowledgement");
        let out = c.handle(2, Req::Unlock, &mut m);
        assert_eq!(granted(&out), [2, 3], "ack, then the writer's grant");
        assert_eq!(c.holder(3), Some(true));
        let out = c.handle(3, Req::Unlock, &mut m);
        assert_eq!(granted(&out), [3, 4]);
        assert_eq!(c.holder(4), Some(false));
        assert_eq!(c.waiting(), 0);
    }

    #[test]
    fn a_lock_word_held_by_a_node_local_rank_delays_the_grant_until_polled() {
        let (mut c, mut m) = (TargetCore::new(), Model::sized(8));
        m.writer = true; // held directly by a rank of the target's node
        assert!(c
            .handle(5, Req::Lock { exclusive: false }, &mut m)
            .is_empty());
        assert!(c.poll(&mut m).is_empty());
        m.writer = false;
        assert_eq!(granted(&c.poll(&mut m)), [5]);
        assert_eq!(m.readers, 1);
    }

    #[test]
    fn locking_twice_or_unlocking_without_a_lock_is_a_sync_error() {
        let (mut c, mut m) = (TargetCore::new(), Model::sized(8));
        c.handle(1, Req::Lock { exclusive: true }, &mut m);
        let out = c.handle(1, Req::Lock { exclusive: false }, &mut m);
        assert_eq!(out[0].1.code, MPI_ERR_RMA_SYNC);
        let out = c.handle(2, Req::Unlock, &mut m);
        assert_eq!(out[0].1.code, MPI_ERR_RMA_SYNC);
        assert!(m.writer, "the holder keeps its lock");
    }

    #[test]
    fn accumulates_apply_in_arrival_order_and_fetch_the_previous_value() {
        let (mut c, mut m) = (TargetCore::new(), Model::sized(4));
        let acc = |v: u8, fetch| Req::Acc {
            op: SUM,
            fetch,
            ranges: vec![(0, 1)],
            data: vec![v],
        };
        assert!(c.handle(1, acc(1, false), &mut m).is_empty());
        assert!(c.handle(2, acc(2, false), &mut m).is_empty());
        let out = c.handle(1, acc(4, true), &mut m);
        assert_eq!(out[0].1.data, vec![3], "fetched after both earlier sums");
        assert_eq!(m.applied, [1, 2, 4]);
        assert_eq!(m.mem[0], 7);
        let out = c.handle(
            2,
            Req::Cas {
                off: 0,
                cmp: vec![7],
                new: vec![0],
            },
            &mut m,
        );
        assert_eq!(out[0].1.data, vec![7]);
        assert_eq!(m.mem[0], 0);
    }

    #[test]
    fn a_failed_put_is_reported_at_the_next_flush_of_that_origin_only() {
        let (mut c, mut m) = (TargetCore::new(), Model::sized(4));
        let bad = Req::Put {
            ranges: vec![(2, 4)],
            data: vec![0; 4],
        };
        assert!(c.handle(1, bad, &mut m).is_empty());
        assert_eq!(c.handle(2, Req::Flush, &mut m)[0].1.code, MPI_SUCCESS);
        let out = c.handle(1, Req::Flush, &mut m);
        assert_eq!(out[0].1.code, MPI_ERR_RMA_RANGE);
        // Reported once.
        assert_eq!(c.handle(1, Req::Flush, &mut m)[0].1.code, MPI_SUCCESS);
        // A get's own range error is its reply.
        let out = c.handle(
            1,
            Req::Get {
                ranges: vec![(3, 2)],
            },
            &mut m,
        );
        assert_eq!(out[0].1.code, MPI_ERR_RMA_RANGE);
    }

    #[test]
    fn puts_are_visible_to_later_gets_and_pscw_counts_reach_memory() {
        let (mut c, mut m) = (TargetCore::new(), Model::sized(8));
        c.handle(
            3,
            Req::Put {
                ranges: vec![(1, 2), (6, 1)],
                data: vec![9, 8, 7],
            },
            &mut m,
        );
        let out = c.handle(
            3,
            Req::Get {
                ranges: vec![(0, 8)],
            },
            &mut m,
        );
        assert_eq!(out[0].1.data, vec![0, 9, 8, 0, 0, 0, 7, 0]);
        c.handle(2, Req::Post, &mut m);
        let done = c.handle(3, Req::Complete, &mut m);
        assert_eq!(done.len(), 1, "complete is answered");
        assert_eq!((done[0].0, done[0].1.data.len()), (3, 0));
        c.handle(1, Req::Complete, &mut m);
        assert_eq!(m.posted, [2]);
        assert_eq!(m.completed, 2);
    }

    /// The fence's count: origin 1 put in epoch 0 and its request is still on its way
    /// when origin 2, which already left the fence, gets the same bytes in epoch 1. The
    /// get must see the put: it is held (no reply, memory untouched) until the target
    /// has handled the epoch's one expected request and closed the epoch, and then
    /// answered with the put's bytes; a request of the epoch is counted, one of the next
    /// is not, and the wire carries the epoch.
    #[test]
    fn a_request_of_the_next_epoch_waits_until_the_fence_closes_this_one() {
        let (mut c, mut m) = (TargetCore::new(), Model::sized(4));
        let get = Req::Get {
            ranges: vec![(0, 4)],
        };
        assert_eq!(Req::decode_at(&get.encode_at(7)), Ok((7, get.clone())));
        assert!(c.epoch_complete(0));
        // Origin 2 (epoch 1) first: held, not counted.
        let early = c.handle_at(2, 1, get.clone(), &mut m);
        assert!(
            early.is_empty(),
            "a get of the next epoch was answered before this epoch closed: {early:?}"
        );
        assert!(
            !c.epoch_complete(1),
            "a request of the next epoch was counted in this one"
        );
        // Origin 1's put of epoch 0 arrives: counted, applied.
        let put = Req::Put {
            ranges: vec![(0, 4)],
            data: vec![1, 2, 3, 4],
        };
        assert!(c.handle_at(1, 0, put, &mut m).is_empty());
        assert!(c.epoch_complete(1));
        // A flush of origin 2 in epoch 1 comes after its get, and waits behind it.
        assert!(c.handle_at(2, 1, Req::Flush, &mut m).is_empty());
        let out = c.close_epoch(&mut m);
        assert_eq!(out.len(), 2, "the held get and flush are answered: {out:?}");
        assert_eq!(
            (out[0].0, &out[0].1.data[..]),
            (2, &[1u8, 2, 3, 4][..]),
            "the get of the next epoch must see the put of the epoch before"
        );
        assert_eq!((out[1].0, out[1].1.data.len()), (2, 0));
        // Both were requests of the new epoch, and are counted in it.
        assert!(c.epoch_complete(2) && !c.epoch_complete(3));
    }

    #[test]
    fn a_dead_holder_releases_its_lock_and_fails_the_waiters() {
        let (mut c, mut m) = (TargetCore::new(), Model::sized(8));
        c.handle(1, Req::Lock { exclusive: true }, &mut m);
        c.handle(2, Req::Lock { exclusive: true }, &mut m);
        c.handle(3, Req::Lock { exclusive: false }, &mut m);
        // A dead waiter leaves the queue without a grant.
        assert!(c.lock_contended());
        assert!(c.peer_died(3, &mut m).is_empty());
        assert_eq!(c.waiting(), 1);
        // The holder dies: the lock is free, and its waiter is told instead of granted.
        let out = c.peer_died(1, &mut m);
        assert!(granted(&out).is_empty());
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].0, out[0].1.code), (2, MPIX_ERR_PROC_FAILED));
        assert!(out[0]
            .1
            .detail
            .contains("rank 1 of the window died holding the lock"));
        assert_eq!((c.holder(2), c.waiting(), m.writer), (None, 0, false));
        assert!(!c.lock_contended());
        // Known deaths are not reported twice; a new request is granted at once.
        assert!(c.peer_died(1, &mut m).is_empty());
        assert_eq!(
            granted(&c.handle(2, Req::Lock { exclusive: true }, &mut m)),
            [2]
        );
        assert_eq!(c.holder(2), Some(true));
        // Whatever the dead origin still sends is dropped.
        assert!(c.handle(1, Req::Flush, &mut m).is_empty());
        assert!(c
            .handle(
                1,
                Req::Put {
                    ranges: vec![(0, 1)],
                    data: vec![5]
                },
                &mut m
            )
            .is_empty());
        assert_eq!(m.mem[0], 0);
    }
}
