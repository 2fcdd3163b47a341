//! Point-to-point entry points: blocking and nonblocking sends and receives, probes,
//! matched probes, sendrecv, and the buffered-send buffer.

use crate::backend::{self, EStatus, SendMode};
use crate::consts::*;
pub(crate) use crate::datatype::predefined_size;
use crate::ffi::{check_count, inp, out, CountArg, MpiError, MpiResult};
use crate::request::{
    check_rank, check_tag, complete_single, completed_request, ignored, new_engine_request,
    recv_target, start_recv, start_send, status_of, wait_pending, write_status, Message, MpiStatus,
    Pending, Request, NO_MESSAGE,
};
use crate::state::lock;
use crate::status::status_set_bytes;
use oxmpi_engine::Started;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// Blocking send in `mode`.
#[allow(clippy::too_many_arguments)]
fn send(
    buf: *const c_void,
    count: i64,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: SendMode,
) -> MpiResult {
    if let Some(r) = fast_send(buf, count, datatype, dest, tag, comm, mode) {
        return r;
    }
    let p = {
        let mut st = lock();
        st.check_active()?;
        start_send(&mut st, buf, count, datatype, dest, tag, comm, mode)?
    };
    if mode == SendMode::Buffered {
        // Complete for the caller; the copy travels on.
        lock().orphans.push(p);
        return Ok(());
    }
    let (_, code) = wait_pending(p)?;
    complete_single(std::ptr::null_mut(), None, code, comm, "send failed")
}

/// Store started operation `p` as a request of the table and hand its handle out (releases
/// the lock).
fn hand_out(
    mut st: std::sync::MutexGuard<'_, crate::state::State>,
    comm: c_int,
    p: Pending,
    request: *mut c_int,
) -> MpiResult {
    let h = st.reqs.insert(Request {
        comm,
        persistent: None,
        active: Some(p),
    });
    drop(st);
    out(request, h, "request")
}

/// Nonblocking send in `mode`. The fast path is inlined into each entry point (one call
/// less on the path of a small `MPI_Isend`); the general path is [`isend_general`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn isend(
    buf: *const c_void,
    count: i64,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: SendMode,
    request: *mut c_int,
) -> MpiResult {
    if request.is_null() {
        mpi_bail!(MPI_ERR_ARG, "NULL request");
    }
    if let Some(r) = fast_isend(buf, count, datatype, dest, tag, comm, mode) {
        // SAFETY: `request` is a non-NULL pointer to the caller's MPI_Request.
        unsafe { request.write_unaligned(r) };
        return Ok(());
    }
    isend_general(buf, count, datatype, dest, tag, comm, mode, request)
}

/// [`isend`] off the fast path (`request` is not NULL).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn isend_general(
    buf: *const c_void,
    count: i64,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: SendMode,
    request: *mut c_int,
) -> MpiResult {
    let mut st = lock();
    st.check_active()?;
    let mut p = start_send(&mut st, buf, count, datatype, dest, tag, comm, mode)?;
    if mode == SendMode::Buffered {
        st.orphans.push(p);
        p = Pending::done(NO_MESSAGE);
    }
    hand_out(st, comm, p, request)
}

macro_rules! sends {
    ($($pname:ident $name:literal $cpname:ident $cname:literal $ipname:ident $iname:literal $icpname:ident $icname:literal $mode:expr;)*) => {$(
        mpi_fn_c! {
            /// Blocking send.
            fn $pname / $name, $cpname / $cname (buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int) {
                send(buf, count.into(), datatype, dest, tag, comm, $mode)
            }
        }
        mpi_fn_c! {
            /// Nonblocking send.
            fn $ipname / $iname, $icpname / $icname (buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
                isend(buf, count.into(), datatype, dest, tag, comm, $mode, request)
            }
        }
    )*};
}

sends! {
    PMPI_Send "MPI_Send" PMPI_Send_c "MPI_Send_c" PMPI_Isend "MPI_Isend" PMPI_Isend_c "MPI_Isend_c" SendMode::Standard;
    PMPI_Ssend "MPI_Ssend" PMPI_Ssend_c "MPI_Ssend_c" PMPI_Issend "MPI_Issend" PMPI_Issend_c "MPI_Issend_c" SendMode::Sync;
    PMPI_Rsend "MPI_Rsend" PMPI_Rsend_c "MPI_Rsend_c" PMPI_Irsend "MPI_Irsend" PMPI_Irsend_c "MPI_Irsend_c" SendMode::Ready;
    PMPI_Bsend "MPI_Bsend" PMPI_Bsend_c "MPI_Bsend_c" PMPI_Ibsend "MPI_Ibsend" PMPI_Ibsend_c "MPI_Ibsend_c" SendMode::Buffered;
}

mpi_fn_c! {
    /// `MPI_Recv`.
    fn PMPI_Recv / "MPI_Recv", PMPI_Recv_c / "MPI_Recv_c" (buf: *mut c_void, count: Count, datatype: c_int, source: c_int, tag: c_int, comm: c_int, status: *mut MpiStatus) {
        let count = i64::from(count);
        if let Some(r) = fast_recv(buf, count, datatype, source, tag, comm, status) {
            return r;
        }
        let p = {
            let mut st = lock();
            st.check_active()?;
            start_recv(&mut st, buf, count, datatype, source, tag, comm)?
        };
        let (s, code) = wait_pending(p)?;
        complete_single(status, Some(s), code, comm, "receive failed")
    }
}

mpi_fn_c! {
    /// `MPI_Irecv`.
    fn PMPI_Irecv / "MPI_Irecv", PMPI_Irecv_c / "MPI_Irecv_c" (buf: *mut c_void, count: Count, datatype: c_int, source: c_int, tag: c_int, comm: c_int, request: *mut c_int) {
        let count = i64::from(count);
        if request.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL request");
        }
        if let Some(r) = fast_irecv(buf, count, datatype, source, tag, comm) {
            // SAFETY: `request` is a non-NULL pointer to the caller's MPI_Request.
            unsafe { request.write_unaligned(r) };
            return Ok(());
        }
        let mut st = lock();
        st.check_active()?;
        let p = start_recv(&mut st, buf, count, datatype, source, tag, comm)?;
        hand_out(st, comm, p, request)
    }
}

mpi_fn_c! {
    /// `MPI_Sendrecv`.
    fn PMPI_Sendrecv / "MPI_Sendrecv", PMPI_Sendrecv_c / "MPI_Sendrecv_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, source: c_int, recvtag: c_int, comm: c_int, status: *mut MpiStatus) {
        let sendcount = i64::from(sendcount);
        let recvcount = i64::from(recvcount);
        let (r, s) = {
            let mut st = lock();
            st.check_active()?;
            let r = start_recv(&mut st, recvbuf, recvcount, recvtype, source, recvtag, comm)?;
            let s = start_send(&mut st, sendbuf, sendcount, sendtype, dest, sendtag, comm, SendMode::Standard);
            let s = match s {
                Ok(s) => s,
                Err(e) => {
                    if let Some(er) = r.ereq {
                        backend::engine()?.cancel(er);
                        st.orphans.push(r);
                    }
                    return Err(e);
                }
            };
            (r, s)
        };
        let (_, scode) = wait_pending(s)?;
        let (rs, rcode) = wait_pending(r)?;
        if scode != MPI_SUCCESS {
            return complete_single(status, Some(rs), scode, comm, "send part of MPI_Sendrecv failed");
        }
        complete_single(status, Some(rs), rcode, comm, "receive part of MPI_Sendrecv failed")
    }
}

mpi_fn_c! {
    /// `MPI_Sendrecv_replace`.
    fn PMPI_Sendrecv_replace / "MPI_Sendrecv_replace", PMPI_Sendrecv_replace_c / "MPI_Sendrecv_replace_c" (buf: *mut c_void, count: Count, datatype: c_int, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: c_int, status: *mut MpiStatus) {
        let count = i64::from(count);
        // Send from a packed copy, receive into the buffer.
        let (r, s) = {
            let mut st = lock();
            st.check_active()?;
            let s = staged_send(&mut st, buf, count, datatype, dest, sendtag, comm)?;
            let r = start_recv(&mut st, buf, count, datatype, source, recvtag, comm);
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    st.orphans.push(s);
                    return Err(e);
                }
            };
            (r, s)
        };
        let (_, scode) = wait_pending(s)?;
        let (rs, rcode) = wait_pending(r)?;
        let code = if scode != MPI_SUCCESS { scode } else { rcode };
        complete_single(status, Some(rs), code, comm, "MPI_Sendrecv_replace failed")
    }
}

/// Start sending a packed copy of `count` items of `datatype` at `buf` (the caller may
/// reuse `buf` at once: the returned operation owns the copy).
#[allow(clippy::too_many_arguments)]
fn staged_send(
    st: &mut crate::state::State,
    buf: *const c_void,
    count: i64,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
) -> MpiResult<Pending> {
    let n = check_count(count).map_err(|e| e.on(comm))?;
    let dt = st.dtype_committed(datatype).map_err(|e| e.on(comm))?;
    let mut copy = Vec::new();
    if !buf.is_null() || !dt.predefined {
        // SAFETY: the MPI contract: `buf` holds `count` items of `datatype`.
        unsafe { crate::datatype::pack_into(&dt, n, buf.cast(), &mut copy) };
    }
    let len = copy.len() as i64;
    let s = start_send(
        st,
        copy.as_ptr().cast(),
        len,
        MPI_BYTE,
        dest,
        tag,
        comm,
        SendMode::Standard,
    )?;
    Ok(Pending {
        stage: Some(copy),
        ..s
    })
}

/// `MPI_Isendrecv(_replace)`: the send goes out from a packed copy (an orphan operation
/// that finishes on its own), the request is the receive's.
#[allow(clippy::too_many_arguments)]
fn isendrecv(
    send: (*const c_void, i64, c_int, c_int, c_int),
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
    source: c_int,
    recvtag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> MpiResult {
    if request.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
    }
    let (sendbuf, sendcount, sendtype, dest, sendtag) = send;
    let mut st = lock();
    st.check_active()?;
    // The send is packed first: with `_replace` the receive may fill the same buffer at
    // once (a message that had arrived).
    let s = staged_send(&mut st, sendbuf, sendcount, sendtype, dest, sendtag, comm)?;
    let r = start_recv(&mut st, recvbuf, recvcount, recvtype, source, recvtag, comm);
    st.orphans.push(s);
    let r = r?;
    hand_out(st, comm, r, request)
}

mpi_fn_c! {
    /// `MPI_Isendrecv` (MPI 4.0).
    fn PMPI_Isendrecv / "MPI_Isendrecv", PMPI_Isendrecv_c / "MPI_Isendrecv_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, source: c_int, recvtag: c_int, comm: c_int, request: *mut c_int) {
        let sendcount = i64::from(sendcount);
        let recvcount = i64::from(recvcount);
        isendrecv((sendbuf, sendcount, sendtype, dest, sendtag), recvbuf, recvcount, recvtype, source, recvtag, comm, request)
    }
}

mpi_fn_c! {
    /// `MPI_Isendrecv_replace` (MPI 4.0).
    fn PMPI_Isendrecv_replace / "MPI_Isendrecv_replace", PMPI_Isendrecv_replace_c / "MPI_Isendrecv_replace_c" (buf: *mut c_void, count: Count, datatype: c_int, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: c_int, request: *mut c_int) {
        let count = i64::from(count);
        isendrecv((buf.cast_const(), count, datatype, dest, sendtag), buf, count, datatype, source, recvtag, comm, request)
    }
}

/// Build the MPI status of a probe.
fn probe_status(s: &EStatus) -> MpiStatus {
    let mut m = MpiStatus {
        source: s.source,
        tag: s.tag,
        error: MPI_SUCCESS,
        ..Default::default()
    };
    status_set_bytes(&mut m, s.count_bytes, false);
    m
}

/// Validate probe arguments; returns the engine communicator.
fn probe_args(source: c_int, tag: c_int, comm: c_int) -> MpiResult<backend::EComm> {
    let st = lock();
    st.check_active()?;
    let c = st.comm(comm)?;
    let chk = || -> MpiResult {
        check_rank(source, c.size, true)?;
        check_tag(tag, true)
    };
    chk().map_err(|e| e.on(comm))?;
    Ok(c.ecomm)
}

mpi_fn! {
    /// `MPI_Iprobe`.
    fn PMPI_Iprobe / "MPI_Iprobe" (source: c_int, tag: c_int, comm: c_int, flag: *mut c_int, status: *mut MpiStatus) {
        let ec = probe_args(source, tag, comm)?;
        if flag.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL flag");
        }
        if source == MPI_PROC_NULL {
            out(flag, 1, "flag")?;
            write_status(status, &probe_status(&EStatus::PROC_NULL), false);
            return Ok(());
        }
        match backend::engine()?.iprobe(source, tag, ec).map_err(|e| backend::err(e).on(comm))? {
            Some(s) => {
                out(flag, 1, "flag")?;
                write_status(status, &probe_status(&s), false);
                Ok(())
            }
            None => out(flag, 0, "flag"),
        }
    }
}

mpi_fn! {
    /// `MPI_Probe`.
    fn PMPI_Probe / "MPI_Probe" (source: c_int, tag: c_int, comm: c_int, status: *mut MpiStatus) {
        let ec = probe_args(source, tag, comm)?;
        if source == MPI_PROC_NULL {
            write_status(status, &probe_status(&EStatus::PROC_NULL), false);
            return Ok(());
        }
        let s = backend::engine()?.probe(source, tag, ec).map_err(|e| backend::err(e).on(comm))?;
        write_status(status, &probe_status(&s), false);
        Ok(())
    }
}

/// Register a matched message; returns its handle.
fn new_message(m: Option<(backend::EMsg, EStatus)>, comm: c_int) -> c_int {
    match m {
        None => MPI_MESSAGE_NULL,
        Some((emsg, _)) if emsg == backend::EMsg::NO_PROC => MPI_MESSAGE_NO_PROC,
        Some((emsg, _)) => lock().msgs.insert(Message { emsg, comm }),
    }
}

mpi_fn! {
    /// `MPI_Mprobe`.
    fn PMPI_Mprobe / "MPI_Mprobe" (source: c_int, tag: c_int, comm: c_int, message: *mut c_int, status: *mut MpiStatus) {
        let ec = probe_args(source, tag, comm)?;
        if message.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL message");
        }
        if source == MPI_PROC_NULL {
            out(message, MPI_MESSAGE_NO_PROC, "message")?;
            write_status(status, &probe_status(&EStatus::PROC_NULL), false);
            return Ok(());
        }
        let (m, s) = backend::engine()?.mprobe(source, tag, ec).map_err(|e| backend::err(e).on(comm))?;
        out(message, new_message(Some((m, s)), comm), "message")?;
        write_status(status, &probe_status(&s), false);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Improbe`.
    fn PMPI_Improbe / "MPI_Improbe" (source: c_int, tag: c_int, comm: c_int, flag: *mut c_int, message: *mut c_int, status: *mut MpiStatus) {
        let ec = probe_args(source, tag, comm)?;
        if message.is_null() || flag.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL flag or message");
        }
        if source == MPI_PROC_NULL {
            out(flag, 1, "flag")?;
            out(message, MPI_MESSAGE_NO_PROC, "message")?;
            write_status(status, &probe_status(&EStatus::PROC_NULL), false);
            return Ok(());
        }
        match backend::engine()?.improbe(source, tag, ec).map_err(|e| backend::err(e).on(comm))? {
            Some((m, s)) => {
                out(flag, 1, "flag")?;
                out(message, new_message(Some((m, s)), comm), "message")?;
                write_status(status, &probe_status(&s), false);
                Ok(())
            }
            None => out(flag, 0, "flag"),
        }
    }
}

/// Start a matched receive; consumes the message handle.
fn start_mrecv(
    buf: *mut c_void,
    count: i64,
    datatype: c_int,
    message: *mut c_int,
) -> MpiResult<(Pending, c_int)> {
    let h = inp(message, "message")?;
    let mut st = lock();
    st.check_active()?;
    let n = check_count(count)?;
    let dt = st.dtype_committed(datatype)?;
    if h == MPI_MESSAGE_NO_PROC {
        drop(st);
        out(message, MPI_MESSAGE_NULL, "message")?;
        return Ok((Pending::done(EStatus::PROC_NULL), MPI_COMM_WORLD));
    }
    let Some(m) = st.msgs.remove(h) else {
        mpi_bail!(MPI_ERR_REQUEST, "invalid message handle {h:#x}");
    };
    let (ptr, len, stage, unpack) = recv_target(buf, n, &dt);
    // SAFETY: `ptr` points to `len` writable bytes (user buffer or our staging vector kept
    // alive by the Pending).
    let ereq = unsafe { backend::engine()?.imrecv(ptr, len, m.emsg) }
        .map_err(|e| backend::err(e).on(m.comm))?;
    drop(st);
    out(message, MPI_MESSAGE_NULL, "message")?;
    Ok((
        Pending {
            ereq: Some(ereq),
            done: None,
            stage,
            unpack,
            bsend_bytes: 0,
        },
        m.comm,
    ))
}

mpi_fn_c! {
    /// `MPI_Mrecv`.
    fn PMPI_Mrecv / "MPI_Mrecv", PMPI_Mrecv_c / "MPI_Mrecv_c" (buf: *mut c_void, count: Count, datatype: c_int, message: *mut c_int, status: *mut MpiStatus) {
        let count = i64::from(count);
        let (p, comm) = start_mrecv(buf, count, datatype, message)?;
        let (s, code) = wait_pending(p)?;
        complete_single(status, Some(s), code, comm, "matched receive failed")
    }
}

mpi_fn_c! {
    /// `MPI_Imrecv`.
    fn PMPI_Imrecv / "MPI_Imrecv", PMPI_Imrecv_c / "MPI_Imrecv_c" (buf: *mut c_void, count: Count, datatype: c_int, message: *mut c_int, request: *mut c_int) {
        let count = i64::from(count);
        if request.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL request");
        }
        let (p, comm) = start_mrecv(buf, count, datatype, message)?;
        let h = lock().reqs.insert(Request { comm, persistent: None, active: Some(p) });
        out(request, h, "request")
    }
}

mpi_fn_c! {
    /// `MPI_Buffer_attach`.
    fn PMPI_Buffer_attach / "MPI_Buffer_attach", PMPI_Buffer_attach_c / "MPI_Buffer_attach_c" (buffer: *mut c_void, size: Count) {
        let size = i64::from(size);
        if size < 0 {
            mpi_bail!(MPI_ERR_ARG, "negative buffer size {size}");
        }
        if buffer.is_null() && size > 0 {
            mpi_bail!(MPI_ERR_BUFFER, "NULL buffer");
        }
        let mut st = lock();
        if st.bsend_buffer.is_some() {
            mpi_bail!(MPI_ERR_BUFFER, "a buffer is already attached");
        }
        st.bsend_buffer = Some((buffer as usize, size as usize));
        Ok(())
    }
}

mpi_fn_c! {
    /// `MPI_Buffer_detach`: waits until the buffered messages are on their way.
    fn PMPI_Buffer_detach / "MPI_Buffer_detach", PMPI_Buffer_detach_c / "MPI_Buffer_detach_c" (buffer_addr: *mut *mut c_void, size: *mut Count) {
        let b = flush_bsends()?.bsend_buffer.take();
        let (addr, sz) = b.unwrap_or((0, 0));
        out(buffer_addr, addr as *mut c_void, "buffer_addr")?;
        // The size attached through this form or the other: truncated if it does not fit.
        out(size, detached_size::<Count>(sz), "size")
    }
}

/// Wait until every buffered message is on its way; returns the lock, held.
fn flush_bsends() -> MpiResult<std::sync::MutexGuard<'static, crate::state::State>> {
    loop {
        let mut st = lock();
        crate::request::reap_orphans(&mut st);
        if st.orphans.iter().all(|p| p.bsend_bytes == 0) {
            return Ok(st);
        }
        drop(st);
        backend::engine()?.progress();
    }
}

/// `MPI_Comm_attach_buffer` and `MPI_Session_attach_buffer` (MPI 4.1; both count forms):
/// `owner` is the communicator or session handle, checked by the caller.
fn attach_to(owner: c_int, buffer: *mut c_void, size: i64) -> MpiResult {
    if size < 0 {
        mpi_bail!(MPI_ERR_ARG, "negative buffer size {size}");
    }
    if buffer.is_null() && size > 0 {
        mpi_bail!(MPI_ERR_BUFFER, "NULL buffer");
    }
    let mut st = lock();
    if st.bsend_buffers.contains_key(&owner) {
        mpi_bail!(MPI_ERR_BUFFER, "a buffer is already attached");
    }
    st.bsend_buffers
        .insert(owner, (buffer as usize, size as usize));
    Ok(())
}

/// `MPI_Comm_detach_buffer` and `MPI_Session_detach_buffer` (MPI 4.1): waits until the
/// buffered messages are on their way. `buffer_addr` is a `void**` passed as `void*`;
/// returns the buffer's size.
fn detach_from(owner: c_int, buffer_addr: *mut c_void) -> MpiResult<usize> {
    let Some((addr, sz)) = flush_bsends()?.bsend_buffers.remove(&owner) else {
        mpi_bail!(MPI_ERR_BUFFER, "no buffer is attached");
    };
    out(
        buffer_addr.cast::<*mut c_void>(),
        addr as *mut c_void,
        "buffer_addr",
    )?;
    Ok(sz)
}

/// A detached buffer's size in a detach form's count (truncated to the largest `int` if it
/// was attached through the large-count form and does not fit).
fn detached_size<C: CountArg + Default>(sz: usize) -> C {
    C::from_usize(sz)
        .or_else(|| C::from_count(i32::MAX.into()))
        .unwrap_or_default()
}

/// The `iflush` forms: the flush is done when the call returns; the request is complete.
fn iflushed(comm: c_int, request: *mut c_int) -> MpiResult {
    drop(flush_bsends()?);
    out(
        request,
        crate::request::completed_request(NO_MESSAGE, comm, false),
        "request",
    )
}

/// Checks a session handle (the buffer functions of sessions).
fn session(session: c_int) -> MpiResult {
    if lock().sessions.get(session).is_none() {
        mpi_bail!(MPI_ERR_SESSION, "invalid session handle {session:#x}");
    }
    Ok(())
}

mpi_fn_c! {
    /// `MPI_Comm_attach_buffer` (MPI 4.1; `MPI_BUFFER_AUTOMATIC` allowed).
    fn PMPI_Comm_attach_buffer / "MPI_Comm_attach_buffer", PMPI_Comm_attach_buffer_c / "MPI_Comm_attach_buffer_c" (comm: c_int, buffer: *mut c_void, size: Count) {
        lock().comm(comm)?;
        attach_to(comm, buffer, size.into()).map_err(|e| e.on(comm))
    }
}

mpi_fn_c! {
    /// `MPI_Comm_detach_buffer` (MPI 4.1).
    fn PMPI_Comm_detach_buffer / "MPI_Comm_detach_buffer", PMPI_Comm_detach_buffer_c / "MPI_Comm_detach_buffer_c" (comm: c_int, buffer_addr: *mut c_void, size: *mut Count) {
        lock().comm(comm)?;
        let sz = detach_from(comm, buffer_addr).map_err(|e| e.on(comm))?;
        out(size, detached_size::<Count>(sz), "size").map_err(|e| e.on(comm))
    }
}

mpi_fn_c! {
    /// `MPI_Session_attach_buffer` (MPI 4.1).
    fn PMPI_Session_attach_buffer / "MPI_Session_attach_buffer", PMPI_Session_attach_buffer_c / "MPI_Session_attach_buffer_c" (session_: c_int, buffer: *mut c_void, size: Count) {
        session(session_)?;
        attach_to(session_, buffer, size.into())
    }
}

mpi_fn_c! {
    /// `MPI_Session_detach_buffer` (MPI 4.1).
    fn PMPI_Session_detach_buffer / "MPI_Session_detach_buffer", PMPI_Session_detach_buffer_c / "MPI_Session_detach_buffer_c" (session_: c_int, buffer_addr: *mut c_void, size: *mut Count) {
        session(session_)?;
        let sz = detach_from(session_, buffer_addr)?;
        out(size, detached_size::<Count>(sz), "size")
    }
}

mpi_fn! {
    /// `MPI_Buffer_flush` (MPI 4.1): every buffered message of the process is on its way.
    fn PMPI_Buffer_flush / "MPI_Buffer_flush" () {
        flush_bsends().map(drop)
    }
}

mpi_fn! {
    /// `MPI_Buffer_iflush` (MPI 4.1): flushed before returning, the request is complete.
    fn PMPI_Buffer_iflush / "MPI_Buffer_iflush" (request: *mut c_int) {
        iflushed(MPI_COMM_WORLD, request)
    }
}

mpi_fn! {
    /// `MPI_Comm_flush_buffer` (MPI 4.1; waits for every buffered message of the process).
    fn PMPI_Comm_flush_buffer / "MPI_Comm_flush_buffer" (comm: c_int) {
        lock().comm(comm)?;
        flush_bsends().map(drop)
    }
}

mpi_fn! {
    /// `MPI_Comm_iflush_buffer` (MPI 4.1): flushed before returning.
    fn PMPI_Comm_iflush_buffer / "MPI_Comm_iflush_buffer" (comm: c_int, request: *mut c_int) {
        lock().comm(comm)?;
        iflushed(comm, request)
    }
}

mpi_fn! {
    /// `MPI_Session_flush_buffer` (MPI 4.1; waits for every buffered message).
    fn PMPI_Session_flush_buffer / "MPI_Session_flush_buffer" (session_: c_int) {
        session(session_)?;
        flush_bsends().map(drop)
    }
}

mpi_fn! {
    /// `MPI_Session_iflush_buffer` (MPI 4.1): flushed before returning.
    fn PMPI_Session_iflush_buffer / "MPI_Session_iflush_buffer" (session_: c_int, request: *mut c_int) {
        session(session_)?;
        iflushed(MPI_COMM_SELF, request)
    }
}

// ---------------------------------------------------------------------------------------
// Fast path of blocking MPI_Send/MPI_Recv
// ---------------------------------------------------------------------------------------
//
// For a predefined contiguous datatype, a blocking send or receive goes straight to the
// engine's blocking call: no library lock, no `Pending`, no datatype `Arc`. What it relies
// on is immutable after `MPI_Init` (world is the engine's communicator 0 with the same
// ranks; predefined datatypes never change) or cached safely (other communicators: see
// `COMMS`). Whenever a
// condition does not hold, or the engine rejects the arguments before doing anything, it
// returns `None` and the general path runs (and reports the error with its context).

/// Cache of the engine communicators of communicator handles other than
/// `MPI_COMM_WORLD`: slot `handle % 64` holds `handle << 32 | engine id` (0 = empty).
///
/// Invalidation-safe without a hook in `MPI_Comm_free`: the engine never reuses a
/// communicator id, and freeing a communicator frees its engine communicator, so a stale
/// entry (handle freed, maybe reused for a new communicator) names a dead engine
/// communicator. The engine rejects it before doing anything; the fast path then clears
/// the slot and the general path runs with the handle's current communicator. Using a
/// communicator while another thread frees it is erroneous in MPI.
static COMMS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// The engine communicator of `comm` for the fast path (`None`: unknown handle).
#[inline(always)]
fn fast_comm(eng: &oxmpi_engine::Engine, comm: c_int) -> Option<backend::EComm> {
    if comm == MPI_COMM_WORLD {
        return Some(eng.comm_world());
    }
    let hu = comm as u32;
    let slot = &COMMS[(hu % 64) as usize];
    let v = slot.load(Ordering::Relaxed);
    if v >> 32 == hu as u64 && v != 0 {
        return Some(backend::EComm(v as u32));
    }
    let ec = lock().comm(comm).ok()?.ecomm;
    slot.store((hu as u64) << 32 | ec.0 as u64, Ordering::Relaxed);
    Some(ec)
}

/// Forget the cached engine communicator of `comm` (the engine rejected it).
#[cold]
fn forget_comm(comm: c_int) {
    let slot = &COMMS[(comm as u32 % 64) as usize];
    if slot.load(Ordering::Relaxed) >> 32 == comm as u32 as u64 {
        slot.store(0, Ordering::Relaxed);
    }
}

/// The arguments every fast path needs: the engine, the byte length of `count` items of a
/// predefined `datatype`, and the engine communicator of `comm`; `None` (take the general
/// path) for a negative count, another datatype or a communicator the cache does not know.
#[inline(always)]
fn fast_args(
    count: i64,
    datatype: c_int,
    comm: c_int,
) -> Option<(&'static oxmpi_engine::Engine, usize, backend::EComm)> {
    let len = usize::try_from(count)
        .ok()?
        .checked_mul(predefined_size(datatype)?)?;
    let eng = oxmpi_engine::engine()?;
    Some((eng, len, fast_comm(eng, comm)?))
}

/// Blocking send on the fast path; `None`: take the general path.
#[inline]
fn fast_send(
    buf: *const c_void,
    count: i64,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: SendMode,
) -> Option<MpiResult> {
    if mode == SendMode::Buffered {
        return None;
    }
    let (eng, len, ec) = fast_args(count, datatype, comm)?;
    // SAFETY: the MPI contract for a blocking send: `buf` holds `len` readable bytes for
    // the duration of the call. The engine checks communicator, rank, tag and buffer and
    // fails (without doing anything) on bad ones, which sends us to the general path.
    let s = match unsafe { eng.send(buf.cast(), len, dest, tag, ec, mode) } {
        Ok(s) => s,
        Err(_) => {
            forget_comm(comm);
            return None;
        }
    };
    if s.error.is_none() {
        return Some(Ok(()));
    }
    let (_, code) = status_of(&s);
    Some(complete_single(
        std::ptr::null_mut(),
        None,
        code,
        comm,
        "send failed",
    ))
}

/// Blocking receive on the fast path; `None`: take the general path. Inlined into
/// `MPI_Recv` always, as the nonblocking fast paths: left to the compiler it became a call
/// of its own when the engine's receive grew (about 20 instructions a receive).
#[inline(always)]
fn fast_recv(
    buf: *mut c_void,
    count: i64,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    status: *mut MpiStatus,
) -> Option<MpiResult> {
    let (eng, len, ec) = fast_args(count, datatype, comm)?;
    // SAFETY: the MPI contract for a blocking receive: `buf` holds `len` writable bytes
    // for the duration of the call. Bad arguments fail before anything is posted.
    let s = match unsafe { eng.recv(buf.cast(), len, source, tag, ec) } {
        Ok(s) => s,
        Err(_) => {
            forget_comm(comm);
            return None;
        }
    };
    if s.error.is_none() && ignored(status) {
        return Some(Ok(()));
    }
    let (m, code) = status_of(&s);
    Some(complete_single(
        status,
        Some(m),
        code,
        comm,
        "receive failed",
    ))
}

// ---------------------------------------------------------------------------------------
// Fast path of MPI_Isend/MPI_Irecv
// ---------------------------------------------------------------------------------------
//
// The same conditions as the blocking fast path; the started engine request gets a fast
// request handle (`request::new_engine_request`), which MPI_Wait and its family complete
// without the library lock. An operation that completes at start (an eager send written
// into the link, a receive whose message had arrived) leaves no engine request: it gets
// the shared completed-send handle or a completed-request slot holding its status
// (`request::completed_request`).

/// Nonblocking send on the fast path: the new request handle, or `None` to take the
/// general path.
#[inline(always)]
fn fast_isend(
    buf: *const c_void,
    count: i64,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: SendMode,
) -> Option<c_int> {
    if mode == SendMode::Buffered {
        return None;
    }
    let (eng, len, ec) = fast_args(count, datatype, comm)?;
    let solo = !eng.lock_shared();
    // SAFETY: the MPI contract for a nonblocking send: `buf` holds `len` readable bytes
    // until the request completes. Bad arguments fail before anything is started, which
    // sends us to the general path.
    match unsafe { eng.isend_started(buf.cast(), len, dest, tag, ec, mode) } {
        Ok(Started::Pending(r)) => Some(new_engine_request(r, comm, solo)),
        Ok(Started::Complete(s)) => Some(completed_request(s, comm, solo)),
        Err(_) => {
            forget_comm(comm);
            None
        }
    }
}

/// Nonblocking receive on the fast path: the new request handle, or `None` to take the
/// general path.
#[inline(always)]
fn fast_irecv(
    buf: *mut c_void,
    count: i64,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
) -> Option<c_int> {
    let (eng, len, ec) = fast_args(count, datatype, comm)?;
    let solo = !eng.lock_shared();
    // SAFETY: the MPI contract for a nonblocking receive: `buf` holds `len` writable bytes
    // that are not accessed until the request completes. Bad arguments fail before
    // anything is posted.
    match unsafe { eng.irecv_started(buf.cast(), len, source, tag, ec) } {
        Ok(Started::Pending(r)) => Some(new_engine_request(r, comm, solo)),
        // Matched a message that had arrived already: complete, with its status kept
        // in a completed-request slot.
        Ok(Started::Complete(s)) => Some(completed_request(s, comm, solo)),
        Err(_) => {
            forget_comm(comm);
            None
        }
    }
}
