//! Generalized requests (`MPI_Grequest_start`/`MPI_Grequest_complete`).
//!
//! A generalized request is an ordinary request handle whose completion is driven by
//! the user. Its callbacks are never called with the library lock held: `query_fn` runs
//! inside `MPI_Grequest_complete` (its status is kept for the completing call), and
//! `free_fn` is deferred to the end of the MPI call that completes or frees the request
//! (see [`run_deferred`]).

use crate::consts::*;
use crate::ffi::out;
use crate::request::{MpiStatus, Pending, Request};
use crate::state::{lock, State};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// State of one generalized request.
#[derive(Clone, Copy)]
pub(crate) struct Greq {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra: usize,
    /// Set by MPI_Grequest_complete, with the status query_fn produced.
    pub status: Option<MpiStatus>,
    /// MPI_Request_free was called before completion.
    freed: bool,
}

/// Free callbacks waiting to run outside the lock: (function, extra_state).
static DEFERRED_PENDING: AtomicBool = AtomicBool::new(false);

/// Queue `free_fn` of a completed generalized request (lock held by the caller).
pub(crate) fn defer_free(st: &mut State, g: &Greq) {
    if let Some(f) = g.free {
        st.deferred_frees.push((f as usize, g.extra));
        DEFERRED_PENDING.store(true, Ordering::Release);
    }
}

/// Run the deferred free callbacks (called at the end of every MPI call, no lock held).
pub(crate) fn run_deferred() {
    // A plain load first: almost always false, and then no read-modify-write (which
    // takes the cache line exclusively) on every MPI call.
    if !DEFERRED_PENDING.load(Ordering::Relaxed) || !DEFERRED_PENDING.swap(false, Ordering::AcqRel)
    {
        return;
    }
    let list = std::mem::take(&mut lock().deferred_frees);
    for (f, extra) in list {
        // SAFETY: `f` is the non-NULL MPI_Grequest_free_function given to
        // MPI_Grequest_start.
        let f: FreeFn = unsafe { std::mem::transmute::<usize, FreeFn>(f) };
        // SAFETY: calling the user's callback with its extra_state.
        unsafe { f(extra as *mut c_void) };
    }
}

/// Call the cancel callback of generalized request `h`, if it is one (no lock held).
pub(crate) fn cancel(h: c_int) -> bool {
    let g = lock().greqs.get(&h).copied();
    let Some(g) = g else { return false };
    if let Some(f) = g.cancel {
        // SAFETY: the user's MPI_Grequest_cancel_function with its extra_state.
        unsafe { f(g.extra as *mut c_void, g.status.is_some() as c_int) };
    }
    true
}

/// MPI_Request_free on a generalized request (lock held): returns true if handled.
pub(crate) fn request_free(st: &mut State, h: c_int) -> bool {
    let Some(g) = st.greqs.get_mut(&h) else {
        return false;
    };
    if g.status.is_some() {
        let g = st.greqs.remove(&h).expect("present");
        defer_free(st, &g);
    } else {
        g.freed = true;
    }
    true
}

mpi_fn! {
    /// `MPI_Grequest_start`.
    fn PMPI_Grequest_start / "MPI_Grequest_start" (query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>, extra_state: *mut c_void, request: *mut c_int) {
        if request.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL request");
        }
        let mut st = lock();
        let h = st.reqs.insert(Request {
            comm: MPI_COMM_SELF,
            persistent: None,
            active: Some(Pending { ereq: None, done: None, stage: None, unpack: None, bsend_bytes: 0 }),
        });
        st.greqs.insert(h, Greq { query: query_fn, free: free_fn, cancel: cancel_fn, extra: extra_state as usize, status: None, freed: false });
        drop(st);
        out(request, h, "request")
    }
}

mpi_fn! {
    /// `MPI_Grequest_complete`.
    fn PMPI_Grequest_complete / "MPI_Grequest_complete" (request: c_int) {
        let g = lock().greqs.get(&request).copied();
        let Some(g) = g else {
            mpi_bail!(MPI_ERR_REQUEST, "{request:#x} is not an active generalized request");
        };
        if g.status.is_some() {
            mpi_bail!(MPI_ERR_REQUEST, "generalized request completed twice");
        }
        let mut s = crate::request::empty_status();
        if let Some(q) = g.query {
            // SAFETY: the user's MPI_Grequest_query_function with a valid status pointer.
            let rc = unsafe { q(g.extra as *mut c_void, &mut s) };
            if rc != MPI_SUCCESS {
                s.error = rc;
            }
        }
        let mut st = lock();
        if g.freed {
            let g = st.greqs.remove(&request).expect("present");
            defer_free(&mut st, &g);
        } else if let Some(e) = st.greqs.get_mut(&request) {
            e.status = Some(s);
        }
        Ok(())
    }
}

/// Test a generalized request (lock held): `None` if `h` is not one, `Some(None)` if not
/// complete yet, `Some(Some(status))` when complete (the request is then released and its
/// free callback deferred).
pub(crate) fn test(st: &mut State, h: c_int) -> Option<Option<MpiStatus>> {
    let g = *st.greqs.get(&h)?;
    let Some(s) = g.status else {
        return Some(None);
    };
    st.greqs.remove(&h);
    st.reqs.remove(h);
    defer_free(st, &g);
    Some(Some(s))
}
