//! The MPI objects' data: communicators, groups, infos, keyvals, error handlers,
//! datatypes, requests (point-to-point, persistent, generalized), messages and user
//! reduction functions, as the library's tables hold them. Below the modules that implement each object's calls
//! (`comm`, `errors`, `datatype`, `request`, `grequest`) and below `state`, which
//! holds their tables: this module imports only the engine link, `status` and constants.

use crate::backend::{EComm, EMsg, EReq, EStatus, SendMode};
use crate::status::MpiStatus;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// An `MPI_User_function` (`int` length).
pub(crate) type IntUserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut c_int);

/// An `MPI_User_function_c` (MPI 4, `MPI_Count` length).
pub(crate) type LargeUserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut i64, *mut c_int);

/// A user reduction function: `MPI_Op_create`'s or `MPI_Op_create_c`'s.
#[derive(Clone, Copy)]
pub(crate) enum UserFn {
    /// From `MPI_Op_create`.
    Int(IntUserFn),
    /// From `MPI_Op_create_c`.
    Large(LargeUserFn),
}

impl UserFn {
    /// `inout = in ∘ inout` on `count` items of `datatype` (extent `extent`): the large-count
    /// function in one call, the `int` one in pieces of at most `INT_MAX` items.
    ///
    /// # Safety
    /// Both buffers hold `count` items of `datatype` in its memory layout.
    pub(crate) unsafe fn call(
        self,
        inbuf: *mut c_void,
        inout: *mut c_void,
        count: usize,
        datatype: c_int,
        extent: isize,
    ) {
        let mut d = datatype;
        match self {
            UserFn::Large(f) => {
                let mut n = count as i64;
                // SAFETY: the user's function on the caller's buffers (see above).
                unsafe { f(inbuf, inout, &mut n, &mut d) };
            }
            UserFn::Int(f) => {
                let mut done = 0usize;
                while done < count {
                    let k = (count - done).min(c_int::MAX as usize);
                    let at = (done as isize).wrapping_mul(extent);
                    let mut n = k as c_int;
                    // SAFETY: items `done..done + k` of both buffers (see above).
                    unsafe {
                        f(
                            inbuf.cast::<u8>().wrapping_offset(at).cast(),
                            inout.cast::<u8>().wrapping_offset(at).cast(),
                            &mut n,
                            &mut d,
                        )
                    };
                    done += k;
                }
            }
        }
    }
}

/// A communicator as the C layer sees it.
pub(crate) struct Comm {
    /// The engine's communicator.
    pub ecomm: EComm,
    /// The engine communicator for collective traffic (same group, own context).
    pub coll: EComm,
    /// Our rank in the group (the local group of an intercommunicator).
    pub rank: i32,
    /// Number of ranks that point-to-point calls address: the group's size, or the remote
    /// group's size on an intercommunicator ([`crate::intercomm`]); `MPI_Comm_size` reports
    /// `group.len()`.
    pub size: i32,
    /// World ranks of the members (the local group of an intercommunicator), in
    /// communicator rank order.
    pub group: Vec<i32>,
    pub errh: c_int,
    pub err_action: ErrAction,
    pub name: String,
    pub attrs: Attrs,
    /// `MPI_Comm_idup` calls started on this communicator (the same count at every
    /// member: they are collective): each agreement uses its own tag.
    pub idups: u32,
}

/// The attributes of an object, in the order they were first set (MPI_Finalize deletes
/// those of MPI_COMM_SELF in reverse order of setting).
#[derive(Clone, Default, Debug)]
pub(crate) struct Attrs(Vec<(c_int, usize)>);

impl Attrs {
    /// The value of `keyval`, if set.
    pub fn get(&self, keyval: c_int) -> Option<usize> {
        self.0.iter().find(|(k, _)| *k == keyval).map(|&(_, v)| v)
    }
    /// Set `keyval` to `v`; the previous value, if any (it keeps its place).
    pub fn insert(&mut self, keyval: c_int, v: usize) -> Option<usize> {
        match self.0.iter_mut().find(|(k, _)| *k == keyval) {
            Some(e) => Some(std::mem::replace(&mut e.1, v)),
            None => {
                self.0.push((keyval, v));
                None
            }
        }
    }
    /// Remove `keyval`; its value, if it was set.
    pub fn remove(&mut self, keyval: c_int) -> Option<usize> {
        let i = self.0.iter().position(|(k, _)| *k == keyval)?;
        Some(self.0.remove(i).1)
    }
    /// All (keyval, value) pairs in the order of setting.
    pub fn iter(&self) -> impl Iterator<Item = (c_int, usize)> + '_ {
        self.0.iter().copied()
    }
    /// Remove and return every pair, in the order of setting.
    pub fn take_all(&mut self) -> Vec<(c_int, usize)> {
        std::mem::take(&mut self.0)
    }
}

/// A session (MPI 4.0 §11.3): its error handler and the info it was created with.
pub(crate) struct Session {
    pub errh: c_int,
    pub err_action: ErrAction,
    /// (key, value) pairs, `thread_level` included.
    pub info: Vec<(String, String)>,
}

/// A process group: world ranks in group order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Group {
    pub members: Vec<i32>,
}

/// An info object: ordered key/value pairs.
#[derive(Clone, Default, Debug)]
pub(crate) struct Info {
    pub entries: Vec<(String, String)>,
}

/// An attribute key.
#[derive(Clone, Copy)]
pub(crate) struct Keyval {
    /// The copy callback (used when communicators are duplicated).
    pub copy: usize,
    pub delete: usize,
    pub extra: usize,
    /// Freed by the user (`MPI_*_free_keyval`) while attributes still used it: it stays
    /// valid for those attributes until the last one is deleted (MPI 3.1 §6.7.2).
    pub freed: bool,
    /// Number of attributes (on communicators, datatypes, windows) set with this keyval.
    pub uses: usize,
}

/// A communicator error handler callback (`MPI_Comm_errhandler_function`).
pub(crate) type CommErrFn = unsafe extern "C" fn(*mut c_int, *mut c_int, ...);

/// What an error handler does.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ErrAction {
    /// `MPI_ERRORS_ARE_FATAL` and `MPI_ERRORS_ABORT`: report and abort the job.
    Fatal,
    /// `MPI_ERRORS_RETURN`: return the code.
    Return,
    /// A user function, called with the communicator and the code.
    User(CommErrFn),
}

/// A user-created error handler object.
pub(crate) struct UserErrhandler {
    pub func: CommErrFn,
    /// References the user holds: one from its creation, one per `MPI_*_get_errhandler`
    /// (each released by `MPI_Errhandler_free`).
    pub refs: usize,
}

/// Value of the `MPI_LASTUSEDCODE` attribute: the largest error code in use (updated by
/// `MPI_Add_error_class`/`_code`); never below `MPI_ERR_LASTCODE` (MPI 3.1 §8.5).
pub(crate) static LAST_USED_CODE: std::sync::atomic::AtomicI32 =
    std::sync::atomic::AtomicI32::new(crate::consts::MPI_ERR_LASTCODE);

/// Registry of user-defined error classes and codes and their strings.
#[derive(Default)]
pub(crate) struct UserErrors {
    /// (code, class) for every user class (code == class) and code.
    pub codes: Vec<(c_int, c_int)>,
    pub strings: std::collections::BTreeMap<c_int, String>,
    pub next: c_int,
}

/// A byte range of one element, holding basic elements of `elem` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub disp: isize,
    pub len: usize,
    pub elem: u32,
}

/// A datatype (predefined or derived).
#[derive(Clone, Debug)]
pub(crate) struct Datatype {
    pub size: usize,
    pub lb: isize,
    pub ub: isize,
    pub true_lb: isize,
    pub true_ub: isize,
    pub blocks: Vec<Block>,
    pub committed: bool,
    pub predefined: bool,
    /// The name (`MPI_Type_get_name`): borrowed for a predefined type and for a duplicate
    /// of one (`MPI_Type_dup` copies the name: no allocation for mpi4py's dups of basic
    /// types), owned once `MPI_Type_set_name` gives it one.
    pub name: std::borrow::Cow<'static, str>,
    pub combiner: c_int,
    pub ints: Vec<c_int>,
    pub aints: Vec<isize>,
    /// The large counts of a type made by a large-count `_c` constructor (its counts and
    /// displacements, MPI 4.1 §5.1.13); empty for the other types.
    pub counts: Vec<i64>,
    pub types: OneOrMany<c_int>,
    /// The constituent datatypes (kept alive even if their handles are freed); empty when
    /// every constituent is predefined (`Datatype::constituent` finds those by handle).
    pub type_objs: OneOrMany<Arc<Datatype>>,
    /// The predefined type all basic elements have, if there is exactly one (reductions).
    pub basic: Option<c_int>,
}

/// A list that holds a single element inline: a datatype's constituents, one for every
/// constructor but the struct (`MPI_Type_dup`, `MPI_Type_create_resized`, vector, ...),
/// so those allocate no `Vec` for the handle and the object they keep.
#[derive(Clone, Debug)]
pub(crate) enum OneOrMany<T> {
    /// Exactly one element.
    One(T),
    /// Any number (none for the predefined types and the constituents kept of none).
    Many(Vec<T>),
}

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany::Many(Vec::new())
    }
}

impl<T> From<Vec<T>> for OneOrMany<T> {
    fn from(v: Vec<T>) -> Self {
        OneOrMany::Many(v)
    }
}

impl<T> std::ops::Deref for OneOrMany<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            OneOrMany::One(x) => std::slice::from_ref(x),
            OneOrMany::Many(v) => v,
        }
    }
}

impl<'a, T> IntoIterator for &'a OneOrMany<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Where received data goes when the user buffer is not contiguous.
pub(crate) struct Unpack {
    pub dt: Arc<Datatype>,
    pub count: usize,
    pub buf: usize,
}

/// An operation started on the engine (or completed at once).
pub(crate) struct Pending {
    /// The engine request; `None` if the operation completed already (`done`).
    pub ereq: Option<EReq>,
    pub done: Option<EStatus>,
    /// Packed send data or the receive staging buffer (kept alive until completion).
    pub stage: Option<Vec<u8>>,
    pub unpack: Option<Unpack>,
    /// Bytes of the attached buffer this (buffered) send accounts for.
    pub bsend_bytes: usize,
}

/// What a persistent request does at each `MPI_Start`.
#[derive(Clone)]
pub(crate) struct Persist {
    pub send: Option<SendMode>,
    pub buf: usize,
    pub count: i64,
    pub datatype: c_int,
    /// The datatype object, held so that the request outlives `MPI_Type_free`.
    pub dt: Option<std::sync::Arc<Datatype>>,
    pub peer: i32,
    pub tag: i32,
    /// A persistent collective (then the fields above are unused).
    pub coll: Option<PersistColl>,
    /// A partitioned send or receive (then the fields above are unused).
    pub part: Option<Arc<dyn Partitioned>>,
}

/// A partitioned send or receive (MPI 4.0 §4.2), as the request machinery drives it; the
/// implementation is `crate::part`'s. Called with the library lock held: none of these
/// takes it.
pub(crate) trait Partitioned: Send + Sync {
    /// Starts a round (`MPI_Start`): a receive posts its partitions, a send waits for
    /// `MPI_Pready`.
    fn start(&self) -> crate::ffi::MpiResult;
    /// Whether a round is in progress.
    fn is_active(&self) -> bool;
    /// Whether the round is complete; with `finish`, completes it: returns its status and
    /// error code and makes the request inactive.
    fn test(&self, finish: bool) -> crate::ffi::MpiResult<Option<(MpiStatus, c_int)>>;
    /// `MPI_Pready` of partition `i` (a send).
    fn ready(&self, i: c_int) -> crate::ffi::MpiResult;
    /// `MPI_Parrived` of partition `i` (a receive).
    fn arrived(&self, i: c_int) -> crate::ffi::MpiResult<bool>;
    /// `MPI_Request_free`: the operations still in flight, to finish as orphans.
    fn release(&self) -> Vec<Pending>;
}

impl Persist {
    /// A persistent collective or partitioned operation (no point-to-point fields).
    pub fn special(coll: Option<PersistColl>, part: Option<Arc<dyn Partitioned>>) -> Persist {
        Persist {
            send: None,
            buf: 0,
            count: 0,
            datatype: 0,
            dt: None,
            peer: 0,
            tag: 0,
            coll,
            part,
        }
    }
}

/// Starts one round of a persistent collective (its schedule, on the nonblocking
/// collectives' progress) and returns the round's internal request.
pub(crate) type CollStart = dyn Fn() -> crate::ffi::MpiResult<c_int> + Send + Sync;

/// A persistent collective request: what each `MPI_Start` runs, and the internal request
/// of the round in progress.
#[derive(Clone)]
pub(crate) struct PersistColl {
    pub start: Arc<CollStart>,
    /// The running round's request (a nonblocking collective's), while active.
    pub running: Option<c_int>,
}

/// A request object.
pub(crate) struct Request {
    pub comm: c_int,
    pub persistent: Option<Persist>,
    pub active: Option<Pending>,
}

/// A matched message (`MPI_Mprobe`).
pub(crate) struct Message {
    pub emsg: EMsg,
    pub comm: c_int,
}

pub(crate) type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
pub(crate) type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
pub(crate) type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// State of one generalized request.
#[derive(Clone, Copy)]
pub(crate) struct Greq {
    pub query: Option<QueryFn>,
    pub free: Option<FreeFn>,
    pub cancel: Option<CancelFn>,
    pub extra: usize,
    /// `MPI_Grequest_complete` was called.
    pub complete: bool,
    /// `MPI_Request_free` was called before completion.
    pub freed: bool,
}
