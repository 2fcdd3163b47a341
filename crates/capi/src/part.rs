//! Partitioned point-to-point communication (MPI 4.0 §4.2): `MPI_Psend_init`,
//! `MPI_Precv_init`, `MPI_Pready(_range/_list)` and `MPI_Parrived`.
//!
//! A partitioned request is persistent (`MPI_Start`, the wait/test family and
//! `MPI_Request_free` drive it through `objects::Partitioned`). Each partition travels as
//! its own message on the communicator's collective context, with a tag of its own
//! ([`part_tag`]): a send's partition goes out as soon as `MPI_Pready` marks it, a
//! receive posts every partition at `MPI_Start` and `MPI_Parrived` tests one of them
//! (a non-contiguous partition is unpacked as soon as it is seen to have arrived). The
//! request completes when every partition has.
//!
//! Limits: both sides must use the same partitioning (same number of partitions of the
//! same size); at most 2^24 partitions; intercommunicators are not supported
//! (`MPI_ERR_COMM`); two partitioned operations active at once between the same pair of
//! processes on one communicator must use tags that differ modulo 16.

use crate::backend::{self, EComm, EStatus, SendMode};
use crate::consts::*;
use crate::datatype::Datatype;
use crate::ffi::{out, slice_in, MpiError, MpiResult};
use crate::objects::Partitioned;
use crate::request::{
    check_rank, check_tag, empty_status, finish, hand_out_persistent, part_of, recv_target,
    send_source, MpiStatus, Pending, Persist,
};
use crate::state::lock;
use crate::status::status_set_bytes;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

/// First tag of partition messages on the collective context: above every tag the
/// collectives use (nonblocking schedules stay below 2^29 + 2^22).
const TAG_PART_BASE: i32 = (1 << 29) + (1 << 22);
/// Partitions per operation (the tag carries the index in 24 bits).
const MAX_PARTITIONS: c_int = 1 << 24;

/// Tag of partition `i` of an operation with user tag `tag`.
fn part_tag(tag: i32, i: usize) -> i32 {
    TAG_PART_BASE + ((tag & 0xf) << 24) + i as i32
}

/// One partition's transfer in the current round.
enum Slot {
    /// Not readied yet (a send before `MPI_Pready`).
    Idle,
    /// In flight.
    Flight(Pending),
    /// Arrived or sent: its byte count and error code.
    Done(usize, c_int),
}

/// The round in progress.
struct Round {
    active: bool,
    slots: Vec<Slot>,
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

    /// Post the receive of partition `i`.
    fn post_recv(&self, i: usize) -> MpiResult<Slot> {
        if self.peer == MPI_PROC_NULL {
            return Ok(Slot::Done(0, MPI_SUCCESS));
        }
        let (ptr, len, stage, unpack) = recv_target(self.at(i), self.count, &self.dt);
        let eng = backend::engine()?;
        // SAFETY: `ptr` points to `len` writable bytes: the user's partition (MPI contract:
        // valid until the request completes) or our staging vector, kept by the Pending.
        let ereq = unsafe { eng.irecv(ptr, len, self.peer, part_tag(self.tag, i), self.ecomm) }
            .map_err(backend::err)?;
        Ok(Slot::Flight(Pending {
            ereq: Some(ereq),
            done: None,
            stage,
            unpack,
            bsend_bytes: 0,
        }))
    }

    /// Send partition `i`.
    fn post_send(&self, i: usize) -> MpiResult<Slot> {
        if self.peer == MPI_PROC_NULL {
            return Ok(Slot::Done(0, MPI_SUCCESS));
        }
        let p = self.at(i);
        let len = self.count * self.dt.size;
        // SAFETY: MPI contract: the partition holds `count` items of the datatype.
        let (ptr, stage) = unsafe { send_source(p.cast_const(), self.count, &self.dt, false) };
        let eng = backend::engine()?;
        // SAFETY: `ptr` points to `len` readable bytes: the user's partition (valid until
        // the request completes) or the staging vector the Pending keeps.
        let ereq = unsafe {
            eng.isend(
                ptr,
                len,
                self.peer,
                part_tag(self.tag, i),
                self.ecomm,
                SendMode::Standard,
            )
        }
        .map_err(backend::err)?;
        Ok(Slot::Flight(Pending {
            ereq: Some(ereq),
            done: None,
            stage,
            unpack: None,
            bsend_bytes: 0,
        }))
    }
}

/// Advance slot `s`: a finished transfer becomes `Done` (unpacked). Returns whether it is.
fn advance(s: &mut Slot) -> MpiResult<bool> {
    let Slot::Flight(p) = s else {
        return Ok(matches!(s, Slot::Done(..)));
    };
    let st = match p.ereq {
        Some(r) => match backend::engine()?.test(r) {
            Some(st) => st,
            None => return Ok(false),
        },
        None => p.done.unwrap_or(EStatus::PROC_NULL),
    };
    let Slot::Flight(mut p) = std::mem::replace(s, Slot::Idle) else {
        unreachable!("matched above")
    };
    p.ereq = None;
    let bytes = st.count_bytes;
    let (_, code) = finish(p, st);
    *s = Slot::Done(bytes, code);
    Ok(true)
}

impl Partitioned for Part {
    fn start(&self) -> MpiResult {
        let mut r = self.round();
        r.slots = (0..self.partitions).map(|_| Slot::Idle).collect();
        if !self.send {
            for i in 0..self.partitions {
                let s = self.post_recv(i)?;
                r.slots[i] = s;
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
        if !r.active {
            return Ok(None);
        }
        for s in r.slots.iter_mut() {
            if !advance(s)? {
                return Ok(None);
            }
        }
        let (mut bytes, mut code) = (0, MPI_SUCCESS);
        for s in &r.slots {
            if let Slot::Done(n, c) = *s {
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
        advance(&mut r.slots[i])
    }

    fn release(&self) -> Vec<Pending> {
        let mut r = self.round();
        r.active = false;
        let mut left = Vec::new();
        for s in r.slots.drain(..) {
            if let Slot::Flight(p) = s {
                if let (false, Some(e), Ok(eng)) = (self.send, p.ereq, backend::engine()) {
                    // A receive nobody will complete: withdraw it.
                    eng.cancel(e);
                }
                left.push(p);
            }
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
        let (ecomm, size) = (c.coll, c.size);
        if info != MPI_INFO_NULL && st.infos.get(info).is_none() {
            mpi_bail!(MPI_ERR_INFO, "invalid info handle {info:#x}");
        }
        if crate::intercomm::is_inter(comm) {
            mpi_bail!(
                MPI_ERR_COMM,
                "partitioned communication on an intercommunicator is not supported"
            );
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
            backend::engine()?.progress();
        }
        out(flag, c_int::from(arrived), "flag").map_err(|e| e.on(comm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_tags_stay_above_the_collectives_and_below_tag_ub() {
        let lo = part_tag(0, 0);
        let hi = part_tag(0xf, MAX_PARTITIONS as usize - 1);
        assert!(lo > (1 << 21) + (8191 << 16) + 0xffff);
        assert!(hi <= oxmpi_engine::TAG_UB);
        assert_ne!(part_tag(1, 0), part_tag(2, 0));
        assert_eq!(part_tag(3, 5) - part_tag(3, 4), 1);
    }
}
