//! Partitioned point-to-point communication (MPI 4.0 `MPI_Psend_init`, `MPI_Precv_init`,
//! `MPI_Pready`, `MPI_Parrived`): a [`PartitionedSend`] owns a vector cut into equal
//! partitions, each of which goes out as soon as it is marked ready; a
//! [`PartitionedRecv`] owns the vector the data lands in and tells, partition by
//! partition, what has arrived. Both are persistent: started once per round
//! (`MPI_Start`), completed by [`wait`](PartitionedSend::wait)/[`test`](PartitionedSend::test).
//! The two sides may partition the message differently (it is matched as a whole). The
//! wire protocol is the C library's (`oxmpi_engine::partition`), on the communicator's
//! collective context. A partition's values are packed when it is readied and unpacked
//! when it is seen to have arrived, so the vectors stay owned by the requests and safe to
//! read and write between rounds ([`buffer_mut`](PartitionedSend::buffer_mut)) or, for a
//! send, partition by partition until each is readied
//! ([`partition_mut`](PartitionedSend::partition_mut)).

use crate::comm::Communicator;
use crate::datatype::{pack_slice, unpack_into, Equivalence};
use crate::error::{Error, ErrorClass, Result};
use crate::request::Pending;
use oxmpi_engine::partition::{header_tag, part_tag, Layout, HEADER_LEN, MAX_PARTITIONS};
use oxmpi_engine::{PROC_NULL, TAG_UB};

/// One message of the current round.
enum Msg {
    /// Not sent yet (a send partition before it is ready).
    Idle,
    /// In flight.
    Flight(Pending),
    /// Sent, or arrived with these bytes.
    Done(Vec<u8>),
}

/// Advance message `m`: returns whether it is done; its error, if it failed.
fn advance(m: &mut Msg) -> Result<bool> {
    let Msg::Flight(_) = m else {
        return Ok(matches!(m, Msg::Done(_)));
    };
    let Msg::Flight(p) = std::mem::replace(m, Msg::Idle) else {
        unreachable!("matched above")
    };
    match p.test_staged() {
        Ok((r, bytes)) => {
            *m = Msg::Done(bytes.unwrap_or_default());
            r.map(|_| true)
        }
        Err(p) => {
            *m = Msg::Flight(p);
            Ok(false)
        }
    }
}

/// The checks of both constructors: partitions of equal length, a valid tag and peer.
fn check<T>(
    comm: &Communicator<'_>,
    buf: &[T],
    partitions: usize,
    peer: i32,
    tag: i32,
) -> Result<usize> {
    if !(1..=MAX_PARTITIONS).contains(&partitions) {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("partitions must be 1 to {MAX_PARTITIONS}, not {partitions}"),
        ));
    }
    if buf.len() % partitions != 0 {
        return Err(Error::new(
            ErrorClass::Count,
            format!(
                "{} elements are not {partitions} partitions of equal length",
                buf.len()
            ),
        ));
    }
    if !(0..=TAG_UB).contains(&tag) {
        return Err(Error::new(
            ErrorClass::Tag,
            format!("tag {tag} is outside 0..={TAG_UB}"),
        ));
    }
    if peer != PROC_NULL && !(0..comm.size()).contains(&peer) {
        return Err(Error::new(
            ErrorClass::Rank,
            format!(
                "rank {peer} is not in the communicator (size {})",
                comm.size()
            ),
        ));
    }
    Ok(buf.len() / partitions)
}

fn not_active(what: &str) -> Error {
    Error::new(
        ErrorClass::Request,
        format!("{what} on an inactive partitioned request (start it first)"),
    )
}

fn still_active(what: &str) -> Error {
    Error::new(
        ErrorClass::Request,
        format!("{what} while the partitioned request's round is active"),
    )
}

/// A partitioned send (`MPI_Psend_init`), made by [`Communicator::psend_init`]: each round
/// ([`start`](Self::start)) sends the vector's partitions as they are marked
/// [`ready`](Self::ready), in any order.
///
/// ```
/// # fn main() -> oxmpi::Result<()> {
/// let universe = oxmpi::init()?;
/// let world = universe.world();
/// // 4 send partitions of 3 values into 2 receive partitions of 6 (to ourselves here).
/// let mut send = world.psend_init(vec![0u32; 12], 4, world.rank(), 5)?;
/// let mut recv = world.precv_init(vec![0u32; 12], 2, world.rank(), 5)?;
/// recv.start()?;
/// send.start()?;
/// for i in (0..4).rev() {
///     send.partition_mut(i)?.fill(i as u32);
///     send.ready(i)?;
/// }
/// while !recv.arrived(1)? {}
/// assert_eq!(recv.partition(1), Some(&[2, 2, 2, 3, 3, 3][..]));
/// send.wait()?;
/// recv.wait()?;
/// assert_eq!(recv.buffer()?[..6], [0, 0, 0, 1, 1, 1]);
/// # Ok(())
/// # }
/// ```
#[must_use = "a partitioned send does nothing until it is started"]
pub struct PartitionedSend<'c, 'u, T: Equivalence> {
    comm: &'c Communicator<'u>,
    buf: Vec<T>,
    /// Elements per partition.
    per: usize,
    dest: i32,
    tag: i32,
    /// The header (sent with the first round) while in flight.
    header: Option<Pending>,
    header_sent: bool,
    /// Per partition, in the active round.
    msgs: Vec<Msg>,
    active: bool,
}

impl<'c, 'u, T: Equivalence> PartitionedSend<'c, 'u, T> {
    /// Partitions of this request.
    pub fn partitions(&self) -> usize {
        self.msgs.len()
    }

    /// Whether a round is active (started and not completed).
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Starts a round (`MPI_Start`): no partition is ready yet.
    pub fn start(&mut self) -> Result<()> {
        if self.active {
            return Err(still_active("start"));
        }
        if !self.header_sent && self.dest != PROC_NULL {
            let layout = Layout {
                partitions: self.msgs.len(),
                bytes: self.per * T::PACKED_SIZE,
            };
            let h = self.comm.start_coll_send(
                layout.encode(),
                self.dest,
                header_tag(self.tag),
                self.tag,
            )?;
            self.header = Some(h);
            self.header_sent = true;
        }
        self.msgs.iter_mut().for_each(|m| *m = Msg::Idle);
        self.active = true;
        Ok(())
    }

    /// Checks partition index `i`.
    fn index(&self, i: usize) -> Result<usize> {
        if i >= self.msgs.len() {
            return Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "partition {i} out of range (the request has {} partitions)",
                    self.msgs.len()
                ),
            ));
        }
        Ok(i)
    }

    /// Partition `i` of the vector, to fill before it is marked ready (between rounds, or
    /// in a round while it is not ready yet).
    pub fn partition_mut(&mut self, i: usize) -> Result<&mut [T]> {
        let i = self.index(i)?;
        if self.active && !matches!(self.msgs[i], Msg::Idle) {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("partition {i} was marked ready already in this round"),
            ));
        }
        Ok(&mut self.buf[i * self.per..(i + 1) * self.per])
    }

    /// Marks partition `i` ready (`MPI_Pready`): it goes out now.
    pub fn ready(&mut self, i: usize) -> Result<()> {
        let i = self.index(i)?;
        if !self.active {
            return Err(not_active("ready"));
        }
        if !matches!(self.msgs[i], Msg::Idle) {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("partition {i} was marked ready already in this round"),
            ));
        }
        self.msgs[i] = if self.dest == PROC_NULL {
            Msg::Done(Vec::new())
        } else {
            let data = pack_slice(&self.buf[i * self.per..(i + 1) * self.per]);
            let p = self
                .comm
                .start_coll_send(data, self.dest, part_tag(self.tag, i), self.tag)?;
            Msg::Flight(p)
        };
        Ok(())
    }

    /// Marks the partitions of `range` ready (`MPI_Pready_range`).
    pub fn ready_range(&mut self, range: std::ops::Range<usize>) -> Result<()> {
        range.into_iter().try_for_each(|i| self.ready(i))
    }

    /// Marks the listed partitions ready (`MPI_Pready_list`).
    pub fn ready_list(&mut self, list: &[usize]) -> Result<()> {
        list.iter().try_for_each(|&i| self.ready(i))
    }

    /// Whether the round has completed (`MPI_Test`); it then ends.
    pub fn test(&mut self) -> Result<bool> {
        if !self.active {
            return Err(not_active("test"));
        }
        if let Some(h) = self.header.take() {
            match h.test() {
                Ok(r) => {
                    r?;
                }
                Err(h) => {
                    self.header = Some(h);
                    return Ok(false);
                }
            }
        }
        let mut done = true;
        for m in &mut self.msgs {
            done &= advance(m)?;
        }
        if done {
            self.active = false;
        }
        Ok(done)
    }

    /// Waits for the round (`MPI_Wait`). Every partition must have been marked ready (else
    /// an error of class [`ErrorClass::Request`] instead of waiting forever).
    pub fn wait(&mut self) -> Result<()> {
        if let Some(i) = self.msgs.iter().position(|m| matches!(m, Msg::Idle)) {
            if self.active {
                return Err(Error::new(
                    ErrorClass::Request,
                    format!("wait on a partitioned send whose partition {i} is not ready"),
                ));
            }
        }
        while !self.test()? {
            self.comm.engine_ref().progress();
            std::thread::yield_now();
        }
        Ok(())
    }

    /// The vector.
    pub fn buffer(&self) -> &[T] {
        &self.buf
    }

    /// The vector, to fill between rounds.
    pub fn buffer_mut(&mut self) -> Result<&mut [T]> {
        if self.active {
            return Err(still_active("buffer_mut"));
        }
        Ok(&mut self.buf)
    }

    /// The vector back (an active round finishes first: dropping waits for what is in
    /// flight).
    pub fn into_buffer(mut self) -> Vec<T> {
        std::mem::take(&mut self.buf)
    }
}

/// A partitioned receive (`MPI_Precv_init`), made by [`Communicator::precv_init`]: each
/// round ([`start`](Self::start)) fills the vector; [`arrived`](Self::arrived) tells
/// whether a partition is there, [`partition`](Self::partition) reads it.
#[must_use = "a partitioned receive does nothing until it is started"]
pub struct PartitionedRecv<'c, 'u, T: Equivalence> {
    comm: &'c Communicator<'u>,
    buf: Vec<T>,
    partitions: usize,
    per: usize,
    source: i32,
    tag: i32,
    header: Option<Pending>,
    header_posted: bool,
    /// The sender's partitioning, once its header arrived.
    remote: Option<Layout>,
    /// One per send partition in the active round.
    msgs: Vec<Msg>,
    arrived: Vec<bool>,
    /// The round's first error (a truncation, a failed message).
    error: Option<Error>,
    active: bool,
}

impl<'c, 'u, T: Equivalence> PartitionedRecv<'c, 'u, T> {
    /// Partitions of this request.
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// Whether a round is active (started and not completed).
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Starts a round (`MPI_Start`).
    pub fn start(&mut self) -> Result<()> {
        if self.active {
            return Err(still_active("start"));
        }
        self.arrived = vec![false; self.partitions];
        self.error = None;
        self.msgs.clear();
        if self.source == PROC_NULL {
            self.remote = Some(Layout {
                partitions: 0,
                bytes: 0,
            });
        }
        if let Some(l) = self.remote {
            self.post(l)?;
        } else if !self.header_posted {
            let h = self.comm.start_coll_recv(
                HEADER_LEN,
                self.source,
                header_tag(self.tag),
                self.tag,
            )?;
            self.header = Some(h);
            self.header_posted = true;
        }
        self.active = true;
        Ok(())
    }

    /// Bytes of one of our partitions.
    fn part_bytes(&self) -> usize {
        self.per * T::PACKED_SIZE
    }

    /// Post the receive of every message of the sender (partitioned as `l`).
    fn post(&mut self, l: Layout) -> Result<()> {
        if l.total() > self.partitions * self.part_bytes() {
            self.error = Some(Error::new(
                ErrorClass::Truncate,
                format!(
                    "partitioned receive on rank {} from {} tag {}: {} bytes sent, room for {}",
                    self.comm.rank(),
                    self.source,
                    self.tag,
                    l.total(),
                    self.partitions * self.part_bytes()
                ),
            ));
        }
        for k in 0..l.partitions {
            let p =
                self.comm
                    .start_coll_recv(l.bytes, self.source, part_tag(self.tag, k), self.tag)?;
            self.msgs.push(Msg::Flight(p));
        }
        Ok(())
    }

    /// The sender's partitioning if its header arrived (its receives are then posted).
    fn learn(&mut self) -> Result<Option<Layout>> {
        if self.remote.is_some() {
            return Ok(self.remote);
        }
        let Some(h) = self.header.take() else {
            return Ok(None);
        };
        let (r, bytes) = match h.test_staged() {
            Ok(done) => done,
            Err(h) => {
                self.header = Some(h);
                return Ok(None);
            }
        };
        let st = r?;
        let bytes = bytes.unwrap_or_default();
        let got = &bytes[..st.count_bytes().min(bytes.len())];
        let Some(l) = Layout::decode(got) else {
            return Err(Error::new(
                ErrorClass::Intern,
                format!(
                    "malformed header of the partitioned send from rank {}",
                    self.source
                ),
            ));
        };
        self.remote = Some(l);
        self.post(l)?;
        Ok(Some(l))
    }

    /// Whether our partition `j` arrived; unpacks it when it just did.
    fn settle(&mut self, j: usize) -> Result<bool> {
        if self.arrived[j] {
            return Ok(true);
        }
        let Some(l) = self.learn()? else {
            return Ok(false);
        };
        let b = self.part_bytes();
        let (start, end) = (j * b, (j + 1) * b);
        let ks = l.covering(j, self.partitions, b);
        for k in ks.clone() {
            match advance(&mut self.msgs[k]) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => {
                    self.error.get_or_insert(e);
                }
            }
        }
        if self.error.is_none() {
            let mut data = Vec::with_capacity(b);
            for k in ks {
                if let Msg::Done(v) = &self.msgs[k] {
                    data.extend_from_slice(v.get(l.within(k, start, end)).unwrap_or(&[]));
                }
            }
            unpack_into(&data, &mut self.buf[j * self.per..(j + 1) * self.per]);
        }
        self.arrived[j] = true;
        Ok(true)
    }

    /// Whether partition `j` has arrived (`MPI_Parrived`); every partition has while no
    /// round is active.
    pub fn arrived(&mut self, j: usize) -> Result<bool> {
        if j >= self.partitions {
            return Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "partition {j} out of range (the request has {} partitions)",
                    self.partitions
                ),
            ));
        }
        if !self.active {
            return Ok(true);
        }
        let got = self.settle(j)?;
        if !got {
            self.comm.engine_ref().progress();
        }
        Ok(got)
    }

    /// Partition `j`'s values once it has arrived (or while no round is active); `None`
    /// before (or out of range).
    pub fn partition(&self, j: usize) -> Option<&[T]> {
        let ok = j < self.partitions && (!self.active || self.arrived[j]);
        ok.then(|| &self.buf[j * self.per..(j + 1) * self.per])
    }

    /// Whether the round has completed (`MPI_Test`); it then ends, with the round's error
    /// if any (e.g. [`ErrorClass::Truncate`] when the sender sent more than the vector
    /// holds).
    pub fn test(&mut self) -> Result<bool> {
        if !self.active {
            return Err(not_active("test"));
        }
        if self.learn()?.is_none() {
            return Ok(false);
        }
        for k in 0..self.msgs.len() {
            match advance(&mut self.msgs[k]) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => {
                    self.error.get_or_insert(e);
                }
            }
        }
        for j in 0..self.partitions {
            self.settle(j)?;
        }
        self.active = false;
        self.msgs.clear();
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(true),
        }
    }

    /// Waits for the round (`MPI_Wait`).
    pub fn wait(&mut self) -> Result<()> {
        while !self.test()? {
            self.comm.engine_ref().progress();
            std::thread::yield_now();
        }
        Ok(())
    }

    /// The vector, between rounds.
    pub fn buffer(&self) -> Result<&[T]> {
        if self.active {
            return Err(still_active("buffer"));
        }
        Ok(&self.buf)
    }

    /// The vector back (an active round is abandoned: what is in flight is waited for).
    pub fn into_buffer(mut self) -> Vec<T> {
        std::mem::take(&mut self.buf)
    }
}

impl<'u> Communicator<'u> {
    /// A partitioned send of `buf` in `partitions` partitions of equal length to `dest`
    /// with `tag` (`MPI_Psend_init`). Errors: [`ErrorClass::Arg`] for 0 or more than 2^24
    /// partitions, [`ErrorClass::Count`] if they would not be of equal length,
    /// [`ErrorClass::Rank`]/[`ErrorClass::Tag`] for a bad peer or tag.
    pub fn psend_init<T: Equivalence>(
        &self,
        buf: Vec<T>,
        partitions: usize,
        dest: i32,
        tag: i32,
    ) -> Result<PartitionedSend<'_, 'u, T>> {
        let per = check(self, &buf, partitions, dest, tag)?;
        Ok(PartitionedSend {
            comm: self,
            buf,
            per,
            dest,
            tag,
            header: None,
            header_sent: false,
            msgs: (0..partitions).map(|_| Msg::Idle).collect(),
            active: false,
        })
    }

    /// A partitioned receive into `buf` in `partitions` partitions of equal length from
    /// `source` with `tag` (`MPI_Precv_init`); the sender may partition differently.
    /// Errors as for [`psend_init`](Self::psend_init) (`source` may not be a wildcard).
    pub fn precv_init<T: Equivalence>(
        &self,
        buf: Vec<T>,
        partitions: usize,
        source: i32,
        tag: i32,
    ) -> Result<PartitionedRecv<'_, 'u, T>> {
        let per = check(self, &buf, partitions, source, tag)?;
        Ok(PartitionedRecv {
            comm: self,
            buf,
            partitions,
            per,
            source,
            tag,
            header: None,
            header_posted: false,
            remote: None,
            msgs: Vec::new(),
            arrived: Vec::new(),
            error: None,
            active: false,
        })
    }
}
