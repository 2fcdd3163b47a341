//! Partitioned point-to-point communication (MPI 4.0 §4.2): `MPI_Psend_init`,
//! `MPI_Precv_init`, `MPI_Pready(_range/_list)` and `MPI_Parrived`.
//!
//! A partitioned request is persistent (`MPI_Start`, the wait/test family and
//! `MPI_Request_free` drive it through `objects::Partitioned`). The two sides may partition
//! the data differently (§4.2.1: the message is matched as a whole and its bytes fill the
//! receive partitions in order). Each *send* partition travels as its own message on the
//! communicator's collective context, with a tag of its own ([`part_tag`]), as soon as
//! `MPI_Pready` marks it. The first round of a send also sends a small header
//! ([`header_tag`]) with the sender's partitioning; the receiver then posts one receive per
//! send partition at the right byte offset of its buffer (at `MPI_Start` from the second
//! round on). A receive partition has arrived when every send partition overlapping its
//! bytes has ([`Part::covering`]); a non-contiguous receive lands in a staging buffer and a
//! partition is unpacked as soon as it is seen to have arrived. The request completes when
//! every message has. Intercommunicators work the same way (the peer indexes the remote
//! group). The wire protocol (tags, header, overlaps) is `oxmpi_engine::partition`'s,
//! shared with the safe Rust API.
//!
//! Limits: at most 2^24 partitions per side; two partitioned operations active at once
//! between the same pair of processes on one communicator must use tags that differ modulo
//! 16. A sender with more bytes than the receive buffer holds makes the receive fail with
//! `MPI_ERR_TRUNCATE` (its data is drained, so that the sender completes).

use crate::backend::{self, EComm, EStatus, SendMode};
use crate::consts::*;
use crate::datatype::{unpack_from, Datatype};
use crate::ffi::{out, slice_in, MpiError, MpiResult};
use crate::objects::Partitioned;
use crate::request::{
    check_rank, check_tag, empty_status, finish, hand_out_persistent, part_of, send_source,
    MpiStatus, Pending, Persist,
};
use crate::state::lock;
use crate::status::status_set_bytes;
use oxmpi_engine::partition::{self, header_tag, part_tag, Layout, HEADER_LEN};
use std::borrow::Cow;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

/// Partitions per operation and side, as the C interface's `int` takes them.
const MAX_PARTITIONS: c_int = partition::MAX_PARTITIONS as c_int;

/// One message's transfer in the current round.
enum Slot {
    /// Not readied yet (a send before `MPI_Pready`).
    Idle,
    /// In flight.
    Flight(Pending),
    /// Arrived or sent: its byte count, error code and, for a staged receive, its data.
    Done(usize, c_int, Option<Vec<u8>>),
}

/// The round in progress (and what a receive learnt in earlier rounds).
struct Round {
    active: bool,
    /// A send: one slot per partition. A receive: one per partition of the sender (its
    /// messages), empty until the sender's partitioning is known.
    slots: Vec<Slot>,
    /// The header in flight: a send's (first round) or a receive's.
    header: Option<Pending>,
    /// A send: whether the header went out. A receive: whether it was asked for.
    header_posted: bool,
    /// A receive: the sender's partitioning, once its header arrived.
    remote: Option<Layout>,
    /// A receive: whether each message lands in a staging buffer of its own instead of
    /// the user's buffer (a non-contiguous datatype, or a truncated message drained there).
    staged: bool,
    /// A receive: which of our partitions arrived (and were unpacked).
    arrived: Vec<bool>,
    /// A receive: the round's error found at the header (`MPI_ERR_TRUNCATE`).
    error: c_int,
}

/// A partitioned send or receive.
struct Part {
    send: bool,
    buf: usize,
    partitions: usize,
    /// Items per partition.
    count: usize,
    dt: Arc<Datatype>,
    peer: i32,
    tag: i32,
    /// The communicator's collective context.
    ecomm: EComm,
    round: Mutex<Round>,
}

/// A started engine operation holding `stage` (its bytes) until it completes.
fn in_flight(ereq: backend::EReq, stage: Option<Vec<u8>>) -> Pending {
    Pending {
        ereq: Some(ereq),
        done: None,
        stage,
        unpack: None,
        bsend_bytes: 0,
    }
}

/// Whether a pending operation completed; its status if so (the Pending stays intact).
fn poll(p: &Pending) -> MpiResult<Option<EStatus>> {
    Ok(match p.ereq {
        Some(r) => backend::engine()?.test(r),
        None => Some(p.done.unwrap_or(EStatus::PROC_NULL)),
    })
}

impl Part {
    fn round(&self) -> MutexGuard<'_, Round> {
        self.round.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Address of partition `i` in the user's buffer.
    fn at(&self, i: usize) -> *mut c_void {
        let items = (i * self.count) as isize;
        (self.buf as *mut u8)
            .wrapping_offset(items * self.dt.extent())
            .cast()
    }

    /// Bytes of one of our partitions.
    fn part_bytes(&self) -> usize {
        self.count * self.dt.size
    }

    /// Checks a partition index.
    fn index(&self, i: c_int) -> MpiResult<usize> {
        if i < 0 || i as usize >= self.partitions {
            mpi_bail!(
                MPI_ERR_ARG,
                "partition {i} out of range (the request has {} partitions)",
                self.partitions
            );
        }
        Ok(i as usize)
    }

    /// Start receiving `len` bytes at `ptr` with tag `tag`.
    fn irecv(
        &self,
        ptr: *mut u8,
        len: usize,
        tag: i32,
        stage: Option<Vec<u8>>,
    ) -> MpiResult<Pending> {
        let eng = backend::engine()?;
        // SAFETY: `ptr` points to `len` writable bytes: the user's buffer (MPI contract:
        // valid until the request completes) or `stage`, which the Pending keeps (also as
        // an orphan when the request is freed).
        let ereq =
            unsafe { eng.irecv(ptr, len, self.peer, tag, self.ecomm) }.map_err(backend::err)?;
        Ok(in_flight(ereq, stage))
    }

    /// Start sending `len` bytes at `ptr` with tag `tag`.
    fn isend(
        &self,
        ptr: *const u8,
        len: usize,
        tag: i32,
        stage: Option<Vec<u8>>,
    ) -> MpiResult<Pending> {
        let eng = backend::engine()?;
        // SAFETY: `ptr` points to `len` readable bytes: the user's partition (valid until
        // the request completes) or `stage`, which the Pending keeps.
        let ereq = unsafe { eng.isend(ptr, len, self.peer, tag, self.ecomm, SendMode::Standard) }
            .map_err(backend::err)?;
        Ok(in_flight(ereq, stage))
    }

    /// Send partition `i`.
    fn post_send(&self, i: usize) -> MpiResult<Slot> {
        if self.peer == MPI_PROC_NULL {
            return Ok(Slot::Done(0, MPI_SUCCESS, None));
        }
        // SAFETY: MPI contract: the partition holds `count` items of the datatype.
        let (ptr, stage) =
            unsafe { send_source(self.at(i).cast_const(), self.count, &self.dt, false) };
        Ok(Slot::Flight(self.isend(
            ptr,
            self.part_bytes(),
            part_tag(self.tag, i),
            stage,
        )?))
    }

    /// Post the receive of every message of the sender (partitioned as `remote`).
    fn post_recvs(&self, r: &mut Round, remote: Layout) -> MpiResult {
        if remote.total() > self.partitions * self.part_bytes() {
            // Drained into scratch buffers; the round fails.
            r.error = MPI_ERR_TRUNCATE;
        }
        r.staged = r.error != MPI_SUCCESS || !self.dt.is_contiguous();
        let off = self.dt.blocks.first().map_or(0, |b| b.disp);
        let base = (self.buf as *mut u8).wrapping_offset(off);
        r.slots.clear();
        for k in 0..remote.partitions {
            let tag = part_tag(self.tag, k);
            let pending = if r.staged {
                let mut v = vec![0u8; remote.bytes];
                let p = v.as_mut_ptr();
                self.irecv(p, remote.bytes, tag, Some(v))?
            } else {
                self.irecv(base.wrapping_add(k * remote.bytes), remote.bytes, tag, None)?
            };
            r.slots.push(Slot::Flight(pending));
        }
        Ok(())
    }

    /// A receive: learn the sender's partitioning if its header arrived (then post the
    /// receives). Returns the partitioning if known.
    fn learn(&self, r: &mut Round) -> MpiResult<Option<Layout>> {
        if r.remote.is_some() {
            return Ok(r.remote);
        }
        let Some(h) = r.header.as_ref() else {
            return Ok(None);
        };
        let Some(st) = poll(h)? else {
            return Ok(None);
        };
        let h = r.header.take();
        if let Some(e) = st.error {
            mpi_bail!(
                backend::class_code(e),
                "the header of the partitioned send from rank {} failed",
                self.peer
            );
        }
        let bytes = h.as_ref().and_then(|h| h.stage.as_deref()).unwrap_or(&[]);
        let Some(remote) = Layout::decode(&bytes[..st.count_bytes.min(bytes.len())]) else {
            mpi_bail!(
                MPI_ERR_INTERN,
                "malformed header of the partitioned send from rank {} ({} bytes)",
                self.peer,
                st.count_bytes
            );
        };
        r.remote = Some(remote);
        self.post_recvs(r, remote)?;
        Ok(r.remote)
    }

    /// The sender's messages that hold our partition `j`.
    fn covering(&self, j: usize, remote: Layout) -> std::ops::Range<usize> {
        remote.covering(j, self.partitions, self.part_bytes())
    }

    /// A staged receive: the bytes of our partition `j` from the messages holding them
    /// (all arrived), borrowed when one message holds them all.
    fn gather<'a>(&self, r: &'a Round, j: usize, remote: Layout) -> Cow<'a, [u8]> {
        let b = self.part_bytes();
        let (start, end) = (j * b, (j + 1) * b);
        let ks = self.covering(j, remote);
        let single = ks.len() == 1;
        let mut out = Vec::new();
        for k in ks {
            let Some(Slot::Done(_, _, Some(v))) = r.slots.get(k) else {
                continue;
            };
            let piece = v.get(remote.within(k, start, end)).unwrap_or(&[]);
            if single {
                return Cow::Borrowed(piece);
            }
            out.extend_from_slice(piece);
        }
        Cow::Owned(out)
    }

    /// A receive: whether our partition `j` arrived; unpacks it when it just did.
    fn settle(&self, r: &mut Round, j: usize) -> MpiResult<bool> {
        if r.arrived[j] {
            return Ok(true);
        }
        let Some(remote) = self.learn(r)? else {
            return Ok(false);
        };
        for k in self.covering(j, remote) {
            if !advance(&mut r.slots[k])? {
                return Ok(false);
            }
        }
        if r.staged && r.error == MPI_SUCCESS {
            let data = self.gather(r, j, remote);
            // SAFETY: partition `j` of the user's buffer holds `count` items of the
            // datatype (MPI contract: valid until the request completes).
            unsafe { unpack_from(&self.dt, self.count, self.at(j).cast(), &data) };
        }
        r.arrived[j] = true;
        Ok(true)
    }
}

/// Advance slot `s`: a finished transfer becomes `Done`. Returns whether it is.
fn advance(s: &mut Slot) -> MpiResult<bool> {
    let Slot::Flight(p) = s else {
        return Ok(matches!(s, Slot::Done(..)));
    };
    let Some(st) = poll(p)? else {
        return Ok(false);
    };
    let Slot::Flight(mut p) = std::mem::replace(s, Slot::Idle) else {
        unreachable!("matched above")
    };
    p.ereq = None;
    let data = p.stage.take();
    let bytes = st.count_bytes;
    let (_, code) = finish(p, st);
    *s = Slot::Done(bytes, code, data);
    Ok(true)
}

impl Partitioned for Part {
    fn start(&self) -> MpiResult {
        let mut r = self.round();
        let r = &mut *r;
        r.slots.clear();
        r.error = MPI_SUCCESS;
        if self.send {
            r.slots = (0..self.partitions).map(|_| Slot::Idle).collect();
            if !r.header_posted && self.peer != MPI_PROC_NULL {
                let b = Layout {
                    partitions: self.partitions,
                    bytes: self.part_bytes(),
                }
                .encode();
                r.header = Some(self.isend(b.as_ptr(), b.len(), header_tag(self.tag), Some(b))?);
                r.header_posted = true;
            }
        } else {
            r.arrived = vec![false; self.partitions];
            if self.peer == MPI_PROC_NULL {
                r.remote = Some(Layout {
                    partitions: 0,
                    bytes: 0,
                });
            }
            if let Some(remote) = r.remote {
                self.post_recvs(r, remote)?;
            } else if !r.header_posted {
                let mut b = vec![0u8; HEADER_LEN];
                let p = b.as_mut_ptr();
                r.header = Some(self.irecv(p, HEADER_LEN, header_tag(self.tag), Some(b))?);
                r.header_posted = true;
            }
        }
        r.active = true;
        Ok(())
    }

    fn is_active(&self) -> bool {
        self.round().active
    }

    fn test(&self, finish: bool) -> MpiResult<Option<(MpiStatus, c_int)>> {
        let mut r = self.round();
        let r = &mut *r;
        if !r.active {
            return Ok(None);
        }
        if self.send {
            if let Some(h) = &r.header {
                if poll(h)?.is_none() {
                    return Ok(None);
                }
                r.header = None;
            }
        } else if self.learn(r)?.is_none() {
            return Ok(None);
        }
        for s in r.slots.iter_mut() {
            if !advance(s)? {
                return Ok(None);
            }
        }
        if !self.send {
            for j in 0..self.partitions {
                self.settle(r, j)?;
            }
        }
        let (mut bytes, mut code) = (0, r.error);
        for s in &r.slots {
            if let Slot::Done(n, c, _) = *s {
                bytes += n;
                if code == MPI_SUCCESS {
                    code = c;
                }
            }
        }
        let mut status = empty_status();
        if !self.send {
            status.source = self.peer;
            status.tag = if self.peer == MPI_PROC_NULL {
                MPI_ANY_TAG
            } else {
                self.tag
            };
            let bytes = bytes.min(self.partitions * self.part_bytes());
            status_set_bytes(&mut status, bytes, false);
        }
        status.error = code;
        if finish {
            r.active = false;
            r.slots.clear();
        }
        Ok(Some((status, code)))
    }

    fn ready(&self, i: c_int) -> MpiResult {
        let i = self.index(i)?;
        if !self.send {
            mpi_bail!(
                MPI_ERR_REQUEST,
                "MPI_Pready on a partitioned receive request"
            );
        }
        let mut r = self.round();
        if !r.active {
            mpi_bail!(
                MPI_ERR_REQUEST,
                "MPI_Pready on an inactive request (MPI_Start it first)"
            );
        }
        if !matches!(r.slots[i], Slot::Idle) {
            mpi_bail!(
                MPI_ERR_ARG,
                "partition {i} was marked ready already in this round"
            );
        }
        r.slots[i] = self.post_send(i)?;
        Ok(())
    }

    fn arrived(&self, i: c_int) -> MpiResult<bool> {
        let i = self.index(i)?;
        if self.send {
            mpi_bail!(
                MPI_ERR_REQUEST,
                "MPI_Parrived on a partitioned send request"
            );
        }
        let mut r = self.round();
        if !r.active {
            // MPI 4.0 §4.2.3: an inactive request reports every partition arrived.
            return Ok(true);
        }
        self.settle(&mut r, i)
    }

    fn release(&self) -> Vec<Pending> {
        let mut r = self.round();
        r.active = false;
        let mut left: Vec<Pending> = r.header.take().into_iter().collect();
        left.extend(r.slots.drain(..).filter_map(|s| match s {
            Slot::Flight(p) => Some(p),
            _ => None,
        }));
        if let (false, Ok(eng)) = (self.send, backend::engine()) {
            // Receives nobody will complete: withdraw them.
            left.iter()
                .filter_map(|p| p.ereq)
                .for_each(|e| eng.cancel(e));
        }
        left
    }
}

/// Shared body of `MPI_Psend_init` and `MPI_Precv_init`.
#[allow(clippy::too_many_arguments)]
fn init(
    send: bool,
    buf: *mut c_void,
    partitions: c_int,
    count: i64,
    datatype: c_int,
    peer: c_int,
    tag: c_int,
    comm: c_int,
    info: c_int,
    request: *mut c_int,
) -> MpiResult {
    let go = || -> MpiResult {
        let st = lock();
        st.check_active()?;
        let c = st.comm(comm)?;
        // On an intercommunicator `size` is the remote group's: the peer indexes it.
        let (ecomm, size) = (c.coll, c.size);
        if info != MPI_INFO_NULL && st.infos.get(info).is_none() {
            mpi_bail!(MPI_ERR_INFO, "invalid info handle {info:#x}");
        }
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            mpi_bail!(
                MPI_ERR_ARG,
                "partitions must be 1 to {MAX_PARTITIONS}, not {partitions}"
            );
        }
        let Ok(count) = usize::try_from(count) else {
            mpi_bail!(MPI_ERR_COUNT, "negative count {count}");
        };
        let dt = st.dtype_committed(datatype)?;
        let bytes = (partitions as u128) * (count as u128) * (dt.size as u128);
        if bytes > isize::MAX as u128 {
            mpi_bail!(
                MPI_ERR_COUNT,
                "{partitions} partitions of {count} items overflow the address space"
            );
        }
        check_rank(peer, size, false)?;
        check_tag(tag, false)?;
        let part = Part {
            send,
            buf: buf as usize,
            partitions: partitions as usize,
            count,
            dt,
            peer,
            tag,
            ecomm,
            round: Mutex::new(Round {
                active: false,
                slots: Vec::new(),
                header: None,
                header_posted: false,
                remote: None,
                staged: false,
                arrived: Vec::new(),
                error: MPI_SUCCESS,
            }),
        };
        let p = Persist::special(None, Some(Arc::new(part)));
        if request.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL request");
        }
        hand_out_persistent(st, comm, p, request)
    };
    go().map_err(|e| e.on(comm))
}

/// The partitioned operation of request `request` and its communicator.
fn lookup(request: c_int) -> MpiResult<(Arc<dyn Partitioned>, c_int)> {
    let st = lock();
    let comm = st.reqs.get(request).map_or(MPI_COMM_WORLD, |r| r.comm);
    match part_of(&st, request) {
        Some(p) => Ok((p, comm)),
        None => Err(MpiError::new(
            MPI_ERR_REQUEST,
            format!("{request:#x} is not a partitioned request"),
        )
        .on(comm)),
    }
}

mpi_fn! {
    /// `MPI_Psend_init` (MPI 4.0).
    fn PMPI_Psend_init / "MPI_Psend_init" (buf: *const c_void, partitions: c_int, count: i64, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, info: c_int, request: *mut c_int) {
        init(true, buf.cast_mut(), partitions, count, datatype, dest, tag, comm, info, request)
    }
}

mpi_fn! {
    /// `MPI_Precv_init` (MPI 4.0).
    fn PMPI_Precv_init / "MPI_Precv_init" (buf: *mut c_void, partitions: c_int, count: i64, datatype: c_int, source: c_int, tag: c_int, comm: c_int, info: c_int, request: *mut c_int) {
        init(false, buf, partitions, count, datatype, source, tag, comm, info, request)
    }
}

mpi_fn! {
    /// `MPI_Pready` (MPI 4.0): partition `partition` of a send goes out now.
    fn PMPI_Pready / "MPI_Pready" (partition: c_int, request: c_int) {
        let (p, comm) = lookup(request)?;
        p.ready(partition).map_err(|e| e.on(comm))
    }
}

mpi_fn! {
    /// `MPI_Pready_range` (MPI 4.0): partitions `partition_low..=partition_high`.
    fn PMPI_Pready_range / "MPI_Pready_range" (partition_low: c_int, partition_high: c_int, request: c_int) {
        let (p, comm) = lookup(request)?;
        if partition_low > partition_high {
            return Err(MpiError::new(MPI_ERR_ARG, format!("empty partition range {partition_low}..{partition_high}")).on(comm));
        }
        (partition_low..=partition_high).try_for_each(|i| p.ready(i)).map_err(|e| e.on(comm))
    }
}

mpi_fn! {
    /// `MPI_Pready_list` (MPI 4.0).
    fn PMPI_Pready_list / "MPI_Pready_list" (length: c_int, array_of_partitions: *const c_int, request: c_int) {
        let (p, comm) = lookup(request)?;
        let n = crate::ffi::check_count(length).map_err(|e| e.on(comm))?;
        let list = slice_in(array_of_partitions, n, "array_of_partitions").map_err(|e| e.on(comm))?;
        list.iter().try_for_each(|&i| p.ready(i)).map_err(|e| e.on(comm))
    }
}

mpi_fn! {
    /// `MPI_Parrived` (MPI 4.0): whether partition `partition` of a receive has arrived.
    fn PMPI_Parrived / "MPI_Parrived" (request: c_int, partition: c_int, flag: *mut c_int) {
        let (p, comm) = lookup(request)?;
        let arrived = p.arrived(partition).map_err(|e| e.on(comm))?;
        if !arrived {
            // Programs poll this in a loop (`while !arrived`): yield when oversubscribed,
            // as MPI_Test does, or the loop spins through its time slice while the sender
            // waits for the core.
            crate::request::poll()?;
        }
        out(flag, c_int::from(arrived), "flag").map_err(|e| e.on(comm))
    }
}
