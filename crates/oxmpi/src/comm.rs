//! Communicators and typed point-to-point operations.

use std::marker::PhantomData;

use oxmpi_engine::{CommId, Engine, ErrorClass, MessageId, SendMode};

use crate::datatype::{self, Equivalence};
use crate::error::{Error, Result};
use crate::request::{OpDesc, Pending, Request, Scope, ScopedRequest};
use crate::status::Status;
use crate::Universe;

/// A communicator: a group of ranks with its own message space (`MPI_Comm`).
///
/// Obtained from [`Universe::world`] or [`Universe::self_comm`]; it borrows the universe, so it
/// cannot be used after finalization. It is `Copy`, `Send` and `Sync` (the engine serializes
/// concurrent calls); use it from several threads only with a universe initialized at
/// [`crate::ThreadLevel::Multiple`], as MPI requires.
///
/// Ranks and tags are `i32`, as in MPI: receives accept the wildcards [`crate::ANY_SOURCE`] and
/// [`crate::ANY_TAG`], and [`crate::PROC_NULL`] as a peer completes at once. Invalid ranks or
/// tags give an [`Error`] of class [`ErrorClass::Rank`] / [`ErrorClass::Tag`].
#[derive(Clone, Copy)]
pub struct Communicator<'u> {
    engine: &'static Engine,
    id: CommId,
    /// The collective context: same ranks, separate message space for collectives.
    coll: CommId,
    rank: i32,
    size: i32,
    _universe: PhantomData<&'u Universe>,
}

impl std::fmt::Debug for Communicator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("id", &self.id)
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish()
    }
}

/// Byte length of `len` packed elements of `T`, or a `Count` error.
fn byte_len<T: Equivalence>(len: usize) -> Result<usize> {
    len.checked_mul(T::PACKED_SIZE).ok_or_else(|| {
        Error::new(
            ErrorClass::Count,
            format!("{len} elements of {} bytes overflow", T::PACKED_SIZE),
        )
    })
}

impl<'u> Communicator<'u> {
    /// Wraps a communicator of the engine's table.
    pub(crate) fn new(
        engine: &'static Engine,
        id: CommId,
        coll: CommId,
    ) -> Result<Communicator<'u>> {
        Ok(Communicator {
            engine,
            id,
            coll,
            rank: engine.comm_rank(id)?,
            size: engine.comm_size(id)?,
            _universe: PhantomData,
        })
    }

    pub(crate) fn engine_ref(&self) -> &'static Engine {
        self.engine
    }

    pub(crate) fn coll_id(&self) -> CommId {
        self.coll
    }

    /// The engine's handle of this communicator.
    pub fn id(&self) -> CommId {
        self.id
    }

    /// This process's rank in the communicator (`MPI_Comm_rank`).
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// Number of ranks in the communicator (`MPI_Comm_size`).
    pub fn size(&self) -> i32 {
        self.size
    }

    fn desc(&self, recv: bool, peer: i32, tag: i32, bytes: usize) -> OpDesc {
        OpDesc {
            recv,
            peer,
            tag,
            my_rank: self.rank(),
            bytes,
        }
    }

    /// Starts a send of `buf` (packing it first when `T` is not contiguous).
    fn start_send<T: Equivalence>(
        &self,
        buf: &[T],
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<Pending> {
        let bytes = byte_len::<T>(buf.len())?;
        let staging = (!T::CONTIGUOUS).then(|| datatype::pack_slice(buf));
        let data: &[u8] = match &staging {
            Some(v) => v,
            None => datatype::contiguous_bytes(buf),
        };
        // SAFETY: `data` is valid for `bytes` reads; it is either `staging` (moved into the
        // returned `Pending`, which keeps the heap block alive until completion) or the caller's
        // `buf`, which the caller keeps borrowed until the request completes (blocking calls
        // wait before returning; scoped requests borrow it for the scope).
        let id = unsafe {
            self.engine
                .isend(data.as_ptr(), bytes, dest, tag, self.id, mode)
        }
        .map_err(|e| self.context(e, false, dest, tag))?;
        Ok(Pending::new(
            self.engine,
            id,
            staging,
            self.desc(false, dest, tag, bytes),
        ))
    }

    /// Starts a receive into `buf` (into a staging buffer when `T` is not contiguous).
    fn start_recv<T: Equivalence>(&self, buf: &mut [T], source: i32, tag: i32) -> Result<Pending> {
        let bytes = byte_len::<T>(buf.len())?;
        let (ptr, staging) = if T::CONTIGUOUS {
            (buf.as_mut_ptr().cast::<u8>(), None)
        } else {
            let mut v = vec![0u8; bytes];
            (v.as_mut_ptr(), Some(v))
        };
        // SAFETY: `ptr` is valid for `bytes` writes: either the heap block of `staging` (owned
        // by the returned `Pending` until completion) or the caller's `buf`, whose exclusive
        // borrow the caller holds until the request completes. For a contiguous `T` every byte
        // pattern is a valid value, so the engine may write any bytes.
        let id = unsafe { self.engine.irecv(ptr, bytes, source, tag, self.id) }
            .map_err(|e| self.context(e, true, source, tag))?;
        let mut p = Pending::new(
            self.engine,
            id,
            staging,
            self.desc(true, source, tag, bytes),
        );
        if !T::CONTIGUOUS {
            // SAFETY: `buf` stays exclusively borrowed by the caller until completion.
            unsafe { p.unpack_into(buf.as_mut_ptr(), buf.len()) };
        }
        Ok(p)
    }

    /// Starts sending `data` (kept by the request) to `dest` on the collective context
    /// with the library's tag `wire` (the library's own messages, e.g. partitioned
    /// communication); errors name the user's `tag`.
    pub(crate) fn start_coll_send(
        &self,
        data: Vec<u8>,
        dest: i32,
        wire: i32,
        tag: i32,
    ) -> Result<Pending> {
        let bytes = data.len();
        // SAFETY: `data` is valid for `bytes` reads and moves into the returned `Pending`
        // (its heap block does not move), which keeps it until completion.
        let id = unsafe {
            self.engine.isend(
                data.as_ptr(),
                bytes,
                dest,
                wire,
                self.coll,
                SendMode::Standard,
            )
        }
        .map_err(|e| self.context(e, false, dest, tag))?;
        Ok(Pending::new(
            self.engine,
            id,
            Some(data),
            self.desc(false, dest, tag, bytes),
        ))
    }

    /// Starts receiving at most `len` bytes from `source` on the collective context with
    /// the library's tag `wire` into a buffer the request owns (see
    /// [`Pending::test_staged`]); errors name the user's `tag`.
    pub(crate) fn start_coll_recv(
        &self,
        len: usize,
        source: i32,
        wire: i32,
        tag: i32,
    ) -> Result<Pending> {
        let mut v = vec![0u8; len];
        let ptr = v.as_mut_ptr();
        // SAFETY: `ptr` is valid for `len` writes: the heap block of `v`, which moves into
        // the returned `Pending` and stays there until completion.
        let id = unsafe { self.engine.irecv(ptr, len, source, wire, self.coll) }
            .map_err(|e| self.context(e, true, source, tag))?;
        Ok(Pending::new(
            self.engine,
            id,
            Some(v),
            self.desc(true, source, tag, len),
        ))
    }

    fn context(&self, e: oxmpi_engine::Error, recv: bool, peer: i32, tag: i32) -> Error {
        let what = if recv { "receive" } else { "send" };
        // The engine's message without its own class prefix (ours prints the class).
        let detail = match &e {
            oxmpi_engine::Error::Arg { msg, .. } => msg.clone(),
            other => other.to_string(),
        };
        Error::from(e).with_message(format!(
            "{what} on rank {} (peer {peer}, tag {tag}): {detail}",
            self.rank
        ))
    }

    /// Sends `buf` to rank `dest` with `tag` (`MPI_Send`); returns when `buf` may be reused.
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// // Sending to PROC_NULL does nothing; a negative tag is an error.
    /// world.send(&[1i32, 2, 3][..], oxmpi::PROC_NULL, 0)?;
    /// let err = world.send(&[1i32][..], 0, -5).unwrap_err();
    /// assert_eq!(err.class(), oxmpi::ErrorClass::Tag);
    /// # Ok(())
    /// # }
    /// ```
    pub fn send<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        self.start_send(buf, dest, tag, SendMode::Standard)?
            .wait()
            .map(drop)
    }

    /// Synchronous send (`MPI_Ssend`): returns only after the receiver matched the message.
    pub fn ssend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        self.start_send(buf, dest, tag, SendMode::Sync)?
            .wait()
            .map(drop)
    }

    /// Receives into `buf` from `source` with `tag` (`MPI_Recv`; wildcards allowed).
    ///
    /// A message longer than `buf` gives an error of class [`ErrorClass::Truncate`]: `buf`
    /// holds what fit and [`Error::status`] describes the message.
    pub fn recv<T: Equivalence>(&self, buf: &mut [T], source: i32, tag: i32) -> Result<Status> {
        self.start_recv(buf, source, tag)?.wait()
    }

    /// Receives a whole message of unknown length into a new vector (matched probe, then
    /// receive: `MPI_Mprobe` + `MPI_Mrecv`).
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let me = world.rank();
    /// let (v, status) = oxmpi::request::scope(|s| -> oxmpi::Result<_> {
    ///     let w = world.isend_scoped(s, &[true, false, true][..], me, 3)?;
    ///     let got = world.recv_vec::<bool>(oxmpi::ANY_SOURCE, oxmpi::ANY_TAG)?;
    ///     w.wait()?;
    ///     Ok(got)
    /// })?;
    /// assert_eq!(v, vec![true, false, true]);
    /// assert_eq!(status.tag(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn recv_vec<T: Equivalence>(&self, source: i32, tag: i32) -> Result<(Vec<T>, Status)> {
        let (msg, status) = self.mprobe(source, tag)?;
        let n = status.count::<T>().ok_or_else(|| {
            Error::new(
                ErrorClass::Truncate,
                format!(
                    "message of {} bytes from {} is not a whole number of {}-byte elements",
                    status.count_bytes(),
                    status.source(),
                    T::PACKED_SIZE
                ),
            )
            .with_status(status)
        });
        let n = match n {
            Ok(n) => n,
            Err(e) => {
                drop(msg); // drains the message
                return Err(e);
            }
        };
        let mut v = Vec::with_capacity(n);
        // Fill with values unpacked from zero bytes (valid for every Equivalence type), then
        // receive over them.
        let zero = vec![0u8; T::PACKED_SIZE];
        v.resize(n, T::unpack(&zero));
        let st = msg.recv_into(&mut v)?;
        Ok((v, st))
    }

    /// Sends `send` to `dest` and receives into `recv` from `source` at the same time
    /// (`MPI_Sendrecv`): no deadlock when every rank calls it towards its neighbours.
    #[allow(clippy::too_many_arguments)]
    pub fn sendrecv<S: Equivalence, R: Equivalence>(
        &self,
        send: &[S],
        dest: i32,
        send_tag: i32,
        recv: &mut [R],
        source: i32,
        recv_tag: i32,
    ) -> Result<Status> {
        let r = self.start_recv(recv, source, recv_tag)?;
        let s = match self.start_send(send, dest, send_tag, SendMode::Standard) {
            Ok(s) => s,
            Err(e) => {
                // The receive must be over before `recv` is given back.
                self.engine.cancel(r.id);
                let _ = r.wait();
                return Err(e);
            }
        };
        let sent = s.wait();
        let got = r.wait();
        sent?;
        got
    }

    /// Sends `buf` to `dest` and replaces its contents with a message from `source`
    /// (`MPI_Sendrecv_replace`; the outgoing data is copied first).
    pub fn sendrecv_replace<T: Equivalence>(
        &self,
        buf: &mut [T],
        dest: i32,
        send_tag: i32,
        source: i32,
        recv_tag: i32,
    ) -> Result<Status> {
        let out = buf.to_vec();
        self.sendrecv(&out[..], dest, send_tag, buf, source, recv_tag)
    }

    /// Starts a nonblocking send of `buf` (`MPI_Isend`) inside a [`crate::request::scope`];
    /// `buf` stays borrowed until the scope ends.
    pub fn isend_scoped<'s, 'e, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, 'e>,
        buf: &'s [T],
        dest: i32,
        tag: i32,
    ) -> Result<ScopedRequest<'s>>
    where
        'u: 's,
    {
        let p = self.start_send(buf, dest, tag, SendMode::Standard)?;
        Ok(ScopedRequest::new(scope, p))
    }

    /// Starts a nonblocking synchronous send (`MPI_Issend`) inside a scope.
    pub fn issend_scoped<'s, 'e, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, 'e>,
        buf: &'s [T],
        dest: i32,
        tag: i32,
    ) -> Result<ScopedRequest<'s>>
    where
        'u: 's,
    {
        let p = self.start_send(buf, dest, tag, SendMode::Sync)?;
        Ok(ScopedRequest::new(scope, p))
    }

    /// Starts a nonblocking receive into `buf` (`MPI_Irecv`) inside a
    /// [`crate::request::scope`]; `buf` stays borrowed until the scope ends.
    pub fn irecv_scoped<'s, 'e, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, 'e>,
        buf: &'s mut [T],
        source: i32,
        tag: i32,
    ) -> Result<ScopedRequest<'s>>
    where
        'u: 's,
    {
        let p = self.start_recv(buf, source, tag)?;
        Ok(ScopedRequest::new(scope, p))
    }

    /// Starts a nonblocking send that owns its buffer (`MPI_Isend`); the vector comes back
    /// from [`Request::wait`]. On error the vector is dropped.
    pub fn isend<T: Equivalence>(
        &self,
        buf: Vec<T>,
        dest: i32,
        tag: i32,
    ) -> Result<Request<'u, T>> {
        let p = self.start_send(&buf, dest, tag, SendMode::Standard)?;
        // The vector's heap block does not move when the vector is moved into the request.
        Ok(Request::new(p, buf))
    }

    /// Starts a nonblocking receive into a vector it owns (`MPI_Irecv`); the vector (its
    /// length unchanged, the received elements at the front) comes back from
    /// [`Request::wait`]. On error the vector is dropped.
    pub fn irecv<T: Equivalence>(
        &self,
        mut buf: Vec<T>,
        source: i32,
        tag: i32,
    ) -> Result<Request<'u, T>> {
        let p = self.start_recv(&mut buf, source, tag)?;
        // The vector's heap block does not move when the vector is moved into the request.
        Ok(Request::new(p, buf))
    }

    /// Blocks until a matching message is available and describes it, without receiving it
    /// (`MPI_Probe`).
    pub fn probe(&self, source: i32, tag: i32) -> Result<Status> {
        let st = self
            .engine
            .probe(source, tag, self.id)
            .map_err(|e| self.context(e, true, source, tag))?;
        Ok(Status::from_engine(&st))
    }

    /// Describes a matching message if one is available (`MPI_Iprobe`).
    pub fn iprobe(&self, source: i32, tag: i32) -> Result<Option<Status>> {
        let st = self
            .engine
            .iprobe(source, tag, self.id)
            .map_err(|e| self.context(e, true, source, tag))?;
        Ok(st.as_ref().map(Status::from_engine))
    }

    /// Blocks until a matching message is available and takes it out of the matching queue
    /// (`MPI_Mprobe`); receive it with [`Message::recv_into`].
    pub fn mprobe(&self, source: i32, tag: i32) -> Result<(Message<'u>, Status)> {
        let (m, st) = self
            .engine
            .mprobe(source, tag, self.id)
            .map_err(|e| self.context(e, true, source, tag))?;
        let status = Status::from_engine(&st);
        Ok((self.message(m, status), status))
    }

    /// Like [`mprobe`](Self::mprobe) but returns `None` at once if no message matches
    /// (`MPI_Improbe`).
    pub fn improbe(&self, source: i32, tag: i32) -> Result<Option<(Message<'u>, Status)>> {
        let r = self
            .engine
            .improbe(source, tag, self.id)
            .map_err(|e| self.context(e, true, source, tag))?;
        Ok(r.map(|(m, st)| {
            let status = Status::from_engine(&st);
            (self.message(m, status), status)
        }))
    }

    fn message(&self, id: MessageId, status: Status) -> Message<'u> {
        Message {
            engine: self.engine,
            id: Some(id),
            status,
            my_rank: self.rank(),
            _universe: PhantomData,
        }
    }

    /// Ends the whole job with exit code `code` (`MPI_Abort`).
    pub fn abort(&self, code: i32) -> ! {
        self.engine.abort(code)
    }
}

/// A message taken out of the matching queue by a matched probe (`MPI_Message`).
///
/// Receive it with [`recv_into`](Message::recv_into); a message dropped unreceived is received
/// into an empty buffer and discarded.
#[must_use = "a matched message must be received"]
pub struct Message<'u> {
    engine: &'static Engine,
    id: Option<MessageId>,
    status: Status,
    my_rank: i32,
    _universe: PhantomData<&'u Universe>,
}

impl Message<'_> {
    /// The status the probe returned (source, tag, size).
    pub fn status(&self) -> Status {
        self.status
    }

    /// Receives the message into `buf` (`MPI_Mrecv`).
    pub fn recv_into<T: Equivalence>(mut self, buf: &mut [T]) -> Result<Status> {
        let id = self.id.take().expect("message already received");
        let bytes = byte_len::<T>(buf.len())?;
        let (ptr, staging) = if T::CONTIGUOUS {
            (buf.as_mut_ptr().cast::<u8>(), None)
        } else {
            let mut v = vec![0u8; bytes];
            (v.as_mut_ptr(), Some(v))
        };
        // SAFETY: `ptr` is valid for `bytes` writes (the staging vector owned by the pending
        // request, or `buf`, exclusively borrowed until `wait` below returns); contiguous types
        // accept any bytes.
        let req = unsafe { self.engine.imrecv(ptr, bytes, id) }?;
        let desc = OpDesc {
            recv: true,
            peer: self.status.source(),
            tag: self.status.tag(),
            my_rank: self.my_rank,
            bytes,
        };
        let mut p = Pending::new(self.engine, req, staging, desc);
        if !T::CONTIGUOUS {
            // SAFETY: `buf` is exclusively borrowed until `wait` returns.
            unsafe { p.unpack_into(buf.as_mut_ptr(), buf.len()) };
        }
        p.wait()
    }
}

impl Drop for Message<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let mut empty = [0u8; 0];
            // SAFETY: a zero-length receive writes nothing; the message is drained.
            if let Ok(r) = unsafe { self.engine.imrecv(empty.as_mut_ptr(), 0, id) } {
                let _ = self.engine.wait(r);
            }
        }
    }
}
