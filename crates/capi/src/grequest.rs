//! Generalized requests (`MPI_Grequest_start`/`MPI_Grequest_complete`).
//!
//! A generalized request is an ordinary request handle whose completion is driven by
//! the user. As the MPI standard prescribes, `query_fn` runs in the call that completes
//! the request (`MPI_{Wait,Test}{,any,some,all}`) or reports its status
//! (`MPI_Request_get_status`), and `free_fn` runs after it in the completing call, or in
//! `MPI_Request_free`/`MPI_Grequest_complete`, whichever of the two comes last. The
//! error codes the callbacks return are the error codes of those calls. Callbacks are
//! never called with the library lock held (they may call MPI functions).

use crate::consts::*;
use crate::ffi::{out, MpiError, MpiResult};
pub(crate) use crate::objects::Greq;
use crate::objects::{CancelFn, FreeFn, QueryFn};
use crate::objects::{Pending, Request};
use crate::state::{lock, State};
use crate::status::{empty_status, MpiStatus};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

/// Call `free_fn` (no lock held); its return code.
fn call_free(g: &Greq) -> c_int {
    match g.free {
        // SAFETY: the user's MPI_Grequest_free_function with its extra_state.
        Some(f) => unsafe { f(g.extra as *mut c_void) },
        None => MPI_SUCCESS,
    }
}

/// Call `query_fn` (no lock held): the status and the error code of the request. The code
/// is what `query_fn` returned, or, if that is `MPI_SUCCESS`, the `MPI_ERROR` field it
/// wrote into the status.
fn call_query(g: &Greq) -> (MpiStatus, c_int) {
    let mut s = empty_status();
    if let Some(q) = g.query {
        // SAFETY: the user's MPI_Grequest_query_function with a valid status pointer.
        let rc = unsafe { q(g.extra as *mut c_void, &mut s) };
        if rc != MPI_SUCCESS {
            s.error = rc;
        }
    }
    let code = s.error;
    (s, code)
}

/// Finish a completed generalized request that the caller removed from the tables
/// ([`take_if_complete`]; no lock held): `query_fn`, then `free_fn`. Returns the status
/// and the error code (the query's, else the free callback's).
pub(crate) fn finish(g: &Greq) -> (MpiStatus, c_int) {
    let (mut s, mut code) = call_query(g);
    let rc = call_free(g);
    if code == MPI_SUCCESS && rc != MPI_SUCCESS {
        code = rc;
        s.error = rc;
    }
    (s, code)
}

/// Whether `h` is a generalized request that was not yet completed by `MPI_Grequest_complete`.
pub(crate) fn is_incomplete(st: &State, h: c_int) -> bool {
    st.greqs.get(&h).is_some_and(|g| !g.complete)
}

/// Outcome of [`take_if_complete`].
pub(crate) enum GreqTest {
    /// `MPI_Grequest_complete` was not called yet.
    NotDone,
    /// Completed: removed from the tables; run [`finish`] without the lock.
    Done(Greq),
}

/// Test generalized request `h` (lock held): `None` if `h` is not one.
pub(crate) fn take_if_complete(st: &mut State, h: c_int) -> Option<GreqTest> {
    let g = *st.greqs.get(&h)?;
    if !g.complete {
        return Some(GreqTest::NotDone);
    }
    st.greqs.remove(&h);
    st.reqs.remove(h);
    Some(GreqTest::Done(g))
}

/// `MPI_Request_get_status` on a generalized request (no lock held): `None` if `h` is not
/// one, `Some(None)` if not complete, else the status `query_fn` produced and its code.
pub(crate) fn peek(h: c_int) -> Option<Option<(MpiStatus, c_int)>> {
    let g = lock().greqs.get(&h).copied()?;
    if !g.complete {
        return Some(None);
    }
    Some(Some(call_query(&g)))
}

/// `MPI_Cancel` on a generalized request (no lock held): `None` if `h` is not one, else
/// the code `cancel_fn` returned.
pub(crate) fn cancel(h: c_int) -> Option<c_int> {
    let g = lock().greqs.get(&h).copied()?;
    Some(match g.cancel {
        // SAFETY: the user's MPI_Grequest_cancel_function with its extra_state.
        Some(f) => unsafe { f(g.extra as *mut c_void, g.complete as c_int) },
        None => MPI_SUCCESS,
    })
}

/// `MPI_Request_free` on a generalized request (no lock held): `None` if `h` is not one,
/// else the code of `free_fn` (called now if the request is complete, otherwise later by
/// `MPI_Grequest_complete`).
pub(crate) fn request_free(h: c_int) -> Option<c_int> {
    let mut st = lock();
    let g = st.greqs.get_mut(&h)?;
    if !g.complete {
        g.freed = true;
        st.reqs.remove(h);
        return Some(MPI_SUCCESS);
    }
    let g = st.greqs.remove(&h).expect("present");
    st.reqs.remove(h);
    drop(st);
    Some(call_free(&g))
}

mpi_fn! {
    /// `MPI_Grequest_start`.
    fn PMPI_Grequest_start / "MPI_Grequest_start" (query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>, extra_state: *mut c_void, request: *mut c_int) {
        if request.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL request");
        }
        let h = insert(MPI_COMM_SELF, Greq { query: query_fn, free: free_fn, cancel: cancel_fn, extra: extra_state as usize, complete: false, freed: false });
        out(request, h, "request")
    }
}

/// A new generalized request `g` on `comm` (its errors go to that communicator's
/// handler), under one acquisition of the library lock; its handle.
fn insert(comm: c_int, g: Greq) -> c_int {
    let mut st = lock();
    let h = st.reqs.insert(Request {
        comm,
        persistent: None,
        active: Some(Pending {
            ereq: None,
            done: None,
            stage: None,
            unpack: None,
            bsend_bytes: 0,
        }),
    });
    st.greqs.insert(h, g);
    h
}

mpi_fn! {
    /// `MPI_Grequest_complete`: marks the request complete; `query_fn` runs in the call
    /// that completes it. A request already freed with `MPI_Request_free` is released now
    /// (`free_fn` runs here and its error code is returned).
    fn PMPI_Grequest_complete / "MPI_Grequest_complete" (request: c_int) {
        let mut st = lock();
        let Some(g) = st.greqs.get_mut(&request) else {
            mpi_bail!(MPI_ERR_REQUEST, "{request:#x} is not an active generalized request");
        };
        if g.complete {
            mpi_bail!(MPI_ERR_REQUEST, "generalized request completed twice");
        }
        g.complete = true;
        if !g.freed {
            return Ok(());
        }
        let g = st.greqs.remove(&request).expect("present");
        drop(st);
        match call_free(&g) {
            MPI_SUCCESS => Ok(()),
            rc => Err(MpiError::new(rc, "the free function of the generalized request failed").on(MPI_COMM_SELF)),
        }
    }
}

/// Map a callback's return code to the result of the calling MPI function.
pub(crate) fn callback_result(rc: c_int, comm: c_int, what: &str) -> MpiResult {
    if rc == MPI_SUCCESS {
        Ok(())
    } else {
        Err(MpiError::new(
            rc,
            format!("the {what} function of the generalized request failed"),
        )
        .on(comm))
    }
}

// ---- the library's own generalized requests ----

/// `MPI_Grequest_query_function` of a coded request: an empty status with its code.
unsafe extern "C" fn coded_query(extra: *mut c_void, status: *mut MpiStatus) -> c_int {
    // SAFETY: `extra` is the AtomicI32 box of `start_coded`, alive until `coded_free`.
    let code = unsafe { &*(extra as *const AtomicI32) }.load(Ordering::Acquire);
    let mut s = empty_status();
    s.error = code;
    // SAFETY: the generalized request machinery passes a valid status.
    unsafe { *status = s };
    MPI_SUCCESS
}

/// `MPI_Grequest_free_function` of a coded request: release the code box.
unsafe extern "C" fn coded_free(extra: *mut c_void) -> c_int {
    // SAFETY: the box leaked in `start_coded`; freed once, after completion.
    drop(unsafe { Box::from_raw(extra.cast::<AtomicI32>()) });
    MPI_SUCCESS
}

/// A generalized request of the library itself (nonblocking collectives,
/// `MPI_Comm_idup`) on `comm`, whose status carries an error code set at completion: its
/// handle and the code's box (valid until [`complete_coded`] completes the request).
pub(crate) fn start_coded(comm: c_int) -> MpiResult<(c_int, *const AtomicI32)> {
    let code = Box::into_raw(Box::new(AtomicI32::new(MPI_SUCCESS)));
    // `code` is released by `coded_free`, called once the request is complete and freed.
    let h = insert(
        comm,
        Greq {
            query: Some(coded_query),
            free: Some(coded_free),
            cancel: None,
            extra: code as usize,
            complete: false,
            freed: false,
        },
    );
    Ok((h, code))
}

/// Record `value` as the error code of coded request `h` and complete it.
///
/// # Safety
/// `h` and `code` come from one [`start_coded`]; each request is completed once.
pub(crate) unsafe fn complete_coded(h: c_int, code: *const AtomicI32, value: c_int) {
    // SAFETY: the box lives until the request's free callback, after this completion.
    unsafe { &*code }.store(value, Ordering::Release);
    // SAFETY: our generalized request, completed once (caller contract).
    unsafe { PMPI_Grequest_complete(h) };
}
