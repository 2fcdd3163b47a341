//! Nonblocking operations whose buffers the borrow checker protects.
//!
//! A nonblocking send reads its buffer and a nonblocking receive writes its buffer *after* the
//! call returns, until the request completes. In the scoped API a buffer is borrowed for the
//! whole [`scope`], so it cannot be freed, moved or touched while the operation may still use it:
//!
//! ```
//! # fn main() -> oxmpi::Result<()> {
//! let universe = oxmpi::init()?;
//! let world = universe.world();
//! let me = world.rank();
//! let data = [1.5f64, 2.5, 3.5];
//! let mut got = [0.0f64; 3];
//! oxmpi::request::scope(|s| -> oxmpi::Result<()> {
//!     let r = world.irecv_scoped(s, &mut got[..], me, 0)?;
//!     let w = world.isend_scoped(s, &data[..], me, 0)?;
//!     // `got` and `data` cannot be used here: they are borrowed by the requests.
//!     w.wait()?;
//!     r.wait()?;
//!     Ok(())
//! })?;
//! assert_eq!(got, data);
//! # Ok(())
//! # }
//! ```
//!
//! Requests that are dropped without being waited are waited by their destructor; requests that
//! are leaked (`std::mem::forget`) are waited when the scope ends, so the buffer stays borrowed
//! until the operation is really over (a leaked receive of a packed, non-contiguous type leaves
//! its data in the leaked staging buffer, not in the user's buffer). The universe, too, must
//! outlive the scope, so MPI cannot be finalized under a pending request. While the thread is panicking, pending receives are
//! cancelled before being waited, so a panic does not turn into a hang on a receive.
//!
//! ```compile_fail
//! # fn main() -> oxmpi::Result<()> {
//! let universe = oxmpi::init()?;
//! let world = universe.world();
//! let mut got = [0i32; 4];
//! oxmpi::request::scope(|s| -> oxmpi::Result<()> {
//!     let r = world.irecv_scoped(s, &mut got[..], 0, 0)?;
//!     got[0] = 1; // error: `got` is borrowed by the pending receive
//!     r.wait()?;
//!     Ok(())
//! })?;
//! # Ok(())
//! # }
//! ```

use std::marker::PhantomData;
use std::sync::{Mutex, MutexGuard};

use oxmpi_engine::{Engine, ErrorClass, ReqId};

use crate::datatype::Equivalence;
use crate::error::{Error, Result};
use crate::status::Status;

/// Unpacks received bytes into the user's buffer (type-erased per element type).
type UnpackFn = unsafe fn(dst: *mut u8, len: usize, bytes: &[u8]);

/// # Safety
/// `dst` must point to `len` valid, writable `T`s not aliased by any live reference.
unsafe fn unpack_raw<T: Equivalence>(dst: *mut u8, len: usize, bytes: &[u8]) {
    // SAFETY: guaranteed by the caller (the pointer and length come from a `&mut [T]` that the
    // request keeps borrowed, and nobody else can reach it while the request lives).
    let out = unsafe { std::slice::from_raw_parts_mut(dst.cast::<T>(), len) };
    crate::datatype::unpack_into(bytes, out);
}

/// Where a receive's data must be unpacked when it completes (non-contiguous element types).
struct Unpack {
    dst: *mut u8,
    len: usize,
    f: UnpackFn,
}

/// An operation started in the engine, with what must happen when it completes.
///
/// Invariant: while `id` is pending in the engine, the memory it uses (either the user's buffer
/// or `staging`) stays valid: `staging` is owned here and only freed after completion (or leaked
/// with the request), and the user's buffer is kept borrowed by the owner of this value.
pub(crate) struct Pending {
    pub(crate) engine: &'static Engine,
    pub(crate) id: ReqId,
    /// Packed bytes the engine reads (send) or writes (receive) instead of the user's buffer.
    pub(crate) staging: Option<Vec<u8>>,
    unpack: Option<Unpack>,
    /// Context for error messages ("receive from 3 tag 7 on rank 0").
    pub(crate) what: OpDesc,
    /// Still pending in the engine: dropping the value then waits for it (a safety net for
    /// error paths; owners complete it explicitly).
    armed: bool,
}

// SAFETY: the raw pointer in `unpack` targets a buffer borrowed mutably (`&mut [T]` with
// `T: Send`) by the owner of this value; moving the request to another thread moves that
// exclusive borrow with it. The engine is `Sync`.
unsafe impl Send for Pending {}

/// Description of an operation for error messages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpDesc {
    pub(crate) recv: bool,
    pub(crate) peer: i32,
    pub(crate) tag: i32,
    pub(crate) my_rank: i32,
    /// Size of the (packed) buffer in bytes.
    pub(crate) bytes: usize,
}

impl std::fmt::Display for OpDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.recv {
            write!(
                f,
                "receive on rank {} from {} tag {}",
                self.my_rank, self.peer, self.tag
            )
        } else {
            write!(
                f,
                "send from rank {} to {} tag {}",
                self.my_rank, self.peer, self.tag
            )
        }
    }
}

impl Pending {
    pub(crate) fn new(
        engine: &'static Engine,
        id: ReqId,
        staging: Option<Vec<u8>>,
        what: OpDesc,
    ) -> Pending {
        Pending {
            engine,
            id,
            staging,
            unpack: None,
            what,
            armed: true,
        }
    }

    /// Registers the destination of a staged (non-contiguous) receive.
    ///
    /// # Safety
    /// `dst`/`len` must describe a `[T]` that stays exclusively borrowed by the owner of this
    /// request until it completes.
    pub(crate) unsafe fn unpack_into<T: Equivalence>(&mut self, dst: *mut T, len: usize) {
        self.unpack = Some(Unpack {
            dst: dst.cast(),
            len,
            f: unpack_raw::<T>,
        });
    }

    /// Finishes a completed operation: unpacks staged data, turns the status into a result.
    fn finish(self, st: oxmpi_engine::Status) -> Result<Status> {
        if let (Some(u), Some(bytes)) = (&self.unpack, &self.staging) {
            let n = st.count_bytes.min(bytes.len());
            // SAFETY: the request completed, so the engine no longer writes `bytes`; `u`
            // describes the user's buffer, still exclusively borrowed by our owner.
            unsafe { (u.f)(u.dst, u.len, &bytes[..n]) };
        }
        let status = Status::from_engine(&st);
        match st.error {
            None => Ok(status),
            Some(ErrorClass::Truncate) => Err(Error::new(
                ErrorClass::Truncate,
                format!(
                    "{}: message truncated to the {}-byte buffer",
                    self.what, self.what.bytes
                ),
            )
            .with_status(status)),
            Some(class) => {
                Err(Error::new(class, format!("{} failed", self.what)).with_status(status))
            }
        }
    }

    pub(crate) fn wait(mut self) -> Result<Status> {
        let st = self.engine.wait(self.id);
        self.armed = false;
        self.finish(st)
    }

    pub(crate) fn test(mut self) -> std::result::Result<Result<Status>, Pending> {
        match self.engine.test(self.id) {
            Some(st) => {
                self.armed = false;
                Ok(self.finish(st))
            }
            None => Err(self),
        }
    }

    /// Like [`test`](Self::test), and on completion also gives the staging buffer (the
    /// bytes a receive without unpacking got, or what a send sent).
    pub(crate) fn test_staged(
        mut self,
    ) -> std::result::Result<(Result<Status>, Option<Vec<u8>>), Pending> {
        match self.engine.test(self.id) {
            Some(st) => {
                self.armed = false;
                let bytes = if self.unpack.is_none() {
                    self.staging.take()
                } else {
                    None
                };
                Ok((self.finish(st), bytes))
            }
            None => Err(self),
        }
    }

    /// Tests the request an owner keeps in `slot` (`MPI_Test`): on completion the slot is
    /// left empty and the result returned; otherwise the request goes back into the slot and
    /// `None` is returned.
    ///
    /// # Panics
    /// If `slot` is empty (the operation already completed).
    fn test_slot(slot: &mut Option<Pending>) -> Option<Result<Status>> {
        let p = slot.take().expect("request already completed");
        match p.test() {
            Ok(r) => Some(r),
            Err(p) => {
                *slot = Some(p);
                None
            }
        }
    }

    /// Asks the engine to cancel the request an owner keeps in `slot`, if there is one
    /// (`MPI_Cancel`).
    fn cancel_slot(slot: &Option<Pending>) {
        if let Some(p) = slot {
            p.engine.cancel(p.id);
        }
    }

    /// Waits during cleanup (drop, scope end); cancels receives first while panicking.
    fn wait_for_cleanup(self) {
        if std::thread::panicking() && self.what.recv {
            self.engine.cancel(self.id);
        }
        let _ = self.wait();
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.armed {
            // Never free `staging` (or give the user's buffer back) under a pending operation.
            self.armed = false;
            if std::thread::panicking() && self.what.recv {
                self.engine.cancel(self.id);
            }
            let _ = self.engine.wait(self.id);
        }
    }
}

/// Slots of the requests started in a scope and not yet completed.
type Slots = Mutex<Vec<Option<Slot>>>;

/// A request registered in a scope: its engine, id, and whether it is a receive.
type Slot = (&'static Engine, ReqId, bool);

/// Locks the slots (a panic elsewhere cannot leave them inconsistent: every update is a
/// single push or store).
fn lock(slots: &Slots) -> MutexGuard<'_, Vec<Option<Slot>>> {
    slots.lock().unwrap_or_else(|e| e.into_inner())
}

/// The region in which scoped requests may live; see [`scope`].
///
/// `'s` is the lifetime of the scope itself, `'e` that of the environment it borrows from.
pub struct Scope<'s, 'e: 's> {
    pending: Slots,
    _scope: PhantomData<&'s mut &'s ()>,
    _env: PhantomData<&'e mut &'e ()>,
}

/// Waits, when dropped, for every request of a scope that was leaked instead of completed.
struct WaitLeaked<'a>(&'a Slots);

impl Drop for WaitLeaked<'_> {
    fn drop(&mut self) {
        let leaked: Vec<_> = lock(self.0).iter_mut().filter_map(Option::take).collect();
        for (engine, id, recv) in leaked {
            if std::thread::panicking() && recv {
                engine.cancel(id);
            }
            let _ = engine.wait(id);
        }
    }
}

/// Runs `f` with a [`Scope`] for nonblocking operations and, before returning, waits for every
/// request of the scope that is still pending (also when `f` panics).
///
/// Buffers handed to `*_scoped` operations are borrowed for the whole scope: they cannot be
/// read (receive) or modified/freed (send) until `scope` returns.
pub fn scope<'e, F, R>(f: F) -> R
where
    F: for<'s> FnOnce(&'s Scope<'s, 'e>) -> R,
{
    let s = Scope {
        pending: Mutex::new(Vec::new()),
        _scope: PhantomData,
        _env: PhantomData,
    };
    // `_leaked` is dropped (and waits for the leaked requests) at the end of this function,
    // also while unwinding, after every `ScopedRequest` of the scope is gone.
    let _leaked = WaitLeaked(&s.pending);
    f(&s)
}

/// A nonblocking operation whose buffer is borrowed for the scope `'s`.
///
/// Complete it with [`wait`](ScopedRequest::wait) or [`test`](ScopedRequest::test); dropping it
/// waits for it (discarding the status).
#[must_use = "a request must be waited or tested to see its status"]
pub struct ScopedRequest<'s> {
    pending: Option<Pending>,
    slot: usize,
    slots: &'s Slots,
}

impl<'s> ScopedRequest<'s> {
    pub(crate) fn new<'e>(scope: &'s Scope<'s, 'e>, pending: Pending) -> ScopedRequest<'s> {
        let slots = &scope.pending;
        let slot = {
            let mut v = lock(slots);
            v.push(Some((pending.engine, pending.id, pending.what.recv)));
            v.len() - 1
        };
        ScopedRequest {
            pending: Some(pending),
            slot,
            slots,
        }
    }

    fn complete(&self) {
        if let Some(s) = lock(self.slots).get_mut(self.slot) {
            *s = None;
        }
    }

    /// Blocks until the operation completes (`MPI_Wait`).
    ///
    /// A receive returns its [`Status`]; a truncated receive returns an error of class
    /// [`ErrorClass::Truncate`] whose [`Error::status`] tells what arrived.
    pub fn wait(mut self) -> Result<Status> {
        let p = self.pending.take().expect("request already completed");
        let r = p.wait();
        self.complete();
        r
    }

    /// Completes the operation if it is done (`MPI_Test`); gives the request back otherwise.
    pub fn test(mut self) -> std::result::Result<Result<Status>, Self> {
        match Pending::test_slot(&mut self.pending) {
            Some(r) => {
                self.complete();
                Ok(r)
            }
            None => Err(self),
        }
    }

    /// Asks to cancel the operation (`MPI_Cancel`; receives only). Wait for it afterwards:
    /// its status tells whether it was cancelled.
    pub fn cancel(&self) {
        Pending::cancel_slot(&self.pending);
    }
}

impl Drop for ScopedRequest<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.pending.take() {
            p.wait_for_cleanup();
            self.complete();
        }
    }
}

/// Waits for all requests, in order; returns their statuses or the first error (after all of
/// them completed).
pub fn wait_all<'s>(requests: impl IntoIterator<Item = ScopedRequest<'s>>) -> Result<Vec<Status>> {
    let mut out = Vec::new();
    let mut first_err = None;
    for r in requests {
        match r.wait() {
            Ok(s) => out.push(s),
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// A nonblocking operation that owns its buffer, so it needs no [`scope`]
/// ([`Communicator::isend`](crate::Communicator::isend),
/// [`Communicator::irecv`](crate::Communicator::irecv)).
///
/// The vector is handed back on completion. Dropping the request waits for the operation
/// (cancelling a receive first while panicking); leaking it (`std::mem::forget`) leaks the
/// vector too, so the engine never writes freed memory.
///
/// ```
/// # fn main() -> oxmpi::Result<()> {
/// let universe = oxmpi::init()?;
/// let world = universe.world();
/// let me = world.rank();
/// let r = world.irecv(vec![0i32; 4], me, 9)?;
/// let s = world.isend(vec![4, 3, 2, 1], me, 9)?;
/// let (sent, st) = s.wait();
/// st?;
/// let (got, st) = r.wait();
/// assert_eq!(got, sent);
/// assert_eq!(st?.count::<i32>(), Some(4));
/// # Ok(())
/// # }
/// ```
#[must_use = "a request must be waited or tested to get its buffer back"]
pub struct Request<'u, T: Equivalence> {
    pending: Option<Pending>,
    /// The user's buffer; the engine holds a pointer to its heap block until completion.
    buf: std::mem::ManuallyDrop<Vec<T>>,
    _universe: PhantomData<&'u crate::Universe>,
}

impl<'u, T: Equivalence> Request<'u, T> {
    pub(crate) fn new(pending: Pending, buf: Vec<T>) -> Request<'u, T> {
        Request {
            pending: Some(pending),
            buf: std::mem::ManuallyDrop::new(buf),
            _universe: PhantomData,
        }
    }

    fn take_buf(&mut self) -> Vec<T> {
        // SAFETY: called once, after the operation completed; `pending` is `None` afterwards,
        // so `Drop` does not touch `buf` again.
        unsafe { std::mem::ManuallyDrop::take(&mut self.buf) }
    }

    /// Blocks until the operation completes (`MPI_Wait`); returns the buffer and the status.
    pub fn wait(mut self) -> (Vec<T>, Result<Status>) {
        let p = self.pending.take().expect("request already completed");
        let r = p.wait();
        (self.take_buf(), r)
    }

    /// Completes the operation if it is done (`MPI_Test`); gives the request back otherwise.
    #[allow(clippy::type_complexity)]
    pub fn test(mut self) -> std::result::Result<(Vec<T>, Result<Status>), Self> {
        match Pending::test_slot(&mut self.pending) {
            Some(r) => Ok((self.take_buf(), r)),
            None => Err(self),
        }
    }

    /// Asks to cancel the operation (`MPI_Cancel`; receives only); wait for it afterwards.
    pub fn cancel(&self) {
        Pending::cancel_slot(&self.pending);
    }
}

impl<T: Equivalence> Drop for Request<'_, T> {
    fn drop(&mut self) {
        if let Some(p) = self.pending.take() {
            p.wait_for_cleanup();
            drop(self.take_buf());
        }
    }
}

/// Waits until one of `requests` completes (`MPI_Waitany`), removes it from the vector and
/// returns its index (in the vector as it was) and result; `None` if the vector is empty.
///
/// ```
/// # fn main() -> oxmpi::Result<()> {
/// let universe = oxmpi::init()?;
/// let world = universe.world();
/// let me = world.rank();
/// let (mut a, mut b) = ([0u8; 1], [0u8; 1]);
/// oxmpi::request::scope(|s| -> oxmpi::Result<()> {
///     let mut reqs = vec![
///         world.irecv_scoped(s, &mut a[..], me, 1)?,
///         world.irecv_scoped(s, &mut b[..], me, 2)?,
///     ];
///     world.send(&[9u8][..], me, 2)?;
///     let (index, status) = oxmpi::request::wait_any(&mut reqs).expect("two requests");
///     assert_eq!((index, status?.tag()), (1, 2));
///     assert_eq!(reqs.len(), 1);
///     world.send(&[8u8][..], me, 1)?;
///     oxmpi::request::wait_all(reqs)?;
///     Ok(())
/// })?;
/// assert_eq!((a, b), ([8], [9]));
/// # Ok(())
/// # }
/// ```
pub fn wait_any(requests: &mut Vec<ScopedRequest<'_>>) -> Option<(usize, Result<Status>)> {
    if requests.is_empty() {
        return None;
    }
    loop {
        for i in 0..requests.len() {
            let done = requests[i]
                .pending
                .as_ref()
                .is_none_or(|p| p.engine.request_status(p.id).is_some());
            if done {
                let r = requests.remove(i);
                return Some((i, r.wait()));
            }
        }
        std::hint::spin_loop();
    }
}
