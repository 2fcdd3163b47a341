//! Performance variables (`MPI_T_pvar_*`): the engine's counters (`oxmpi_engine::pvars`)
//! and the collectives' (`oxmpi_coll::pvars`), read through sessions and handles. A
//! handle is the engine's `PvarReader` (what it reads since when, and what reset, write,
//! start and stop do: see there) in a session. Variables are bound to no object, except
//! the per-communicator counters (`MPI_T_BIND_MPI_COMM`: the handle reads the
//! communicator it was allocated for).

use super::cvar::verbosity;
use super::state::*;
use crate::consts::{MPI_DOUBLE, MPI_UNSIGNED_LONG_LONG};
use crate::ffi::{inp, out, read_cstr, MpiError, MpiResult};
use oxmpi_engine::{Pvar, PvarClass, PvarOpError, PvarReader};
use std::ffi::{c_char, c_int, c_void};

/// Performance variable `i`.
fn pvar(i: c_int) -> MpiResult<&'static Pvar> {
    match usize::try_from(i).ok().and_then(|i| all_pvars().nth(i)) {
        Some(p) => Ok(p),
        None => fail(
            MPI_T_ERR_INVALID_INDEX,
            format!("no performance variable {i}"),
        ),
    }
}

/// The MPICH value of a class.
fn class(c: PvarClass) -> c_int {
    match c {
        PvarClass::Counter => MPI_T_PVAR_CLASS_COUNTER,
        PvarClass::Level => MPI_T_PVAR_CLASS_LEVEL,
        PvarClass::HighWatermark => MPI_T_PVAR_CLASS_HIGHWATERMARK,
        PvarClass::Size => MPI_T_PVAR_CLASS_SIZE,
        PvarClass::Timer => MPI_T_PVAR_CLASS_TIMER,
    }
}

/// The tools interface's error for a refused operation on a handle.
fn refused(e: PvarOpError) -> MpiError {
    let code = match e {
        PvarOpError::Continuous(_) => MPI_T_ERR_PVAR_NO_STARTSTOP,
        PvarOpError::ReadOnly(_) => MPI_T_ERR_PVAR_NO_WRITE,
    };
    MpiError::new(code, e.to_string())
}

/// The handle `h` of `session`.
fn handle(t: &mut Tools, session: *mut c_void, h: *mut c_void) -> MpiResult<&mut PvarHandle> {
    if t.sessions.get_mut(session).is_none() {
        return fail(
            MPI_T_ERR_INVALID_SESSION,
            "not a performance variable session",
        );
    }
    match t.pvar_handles.get_mut(h) {
        Some(ph) if ph.session == session => Ok(ph),
        _ => fail(MPI_T_ERR_INVALID_HANDLE, "not a handle of this session"),
    }
}

/// Applies `f` to the reader of handle `h` of `session`, or with
/// `MPI_T_PVAR_ALL_HANDLES` to every handle of the session it applies to (`applies`).
fn each(
    session: *mut c_void,
    h: *mut c_void,
    applies: fn(&Pvar) -> bool,
    f: impl Fn(&mut PvarReader) -> Result<(), PvarOpError>,
) -> MpiResult {
    with(|t| {
        if h as usize != ALL_HANDLES {
            return f(&mut handle(t, session, h)?.reader).map_err(refused);
        }
        if t.sessions.get_mut(session).is_none() {
            return fail(
                MPI_T_ERR_INVALID_SESSION,
                "not a performance variable session",
            );
        }
        for (_, ph) in t.pvar_handles.iter_mut() {
            if ph.session == session && applies(ph.reader.var()) {
                f(&mut ph.reader).map_err(refused)?;
            }
        }
        Ok(())
    })
}

/// Writes a handle's values `v` as the variable's datatype (an array of its count).
fn put(p: &Pvar, v: &[u64], buf: *mut c_void) -> MpiResult {
    if buf.is_null() {
        return out(buf.cast::<u64>(), 0, "buf");
    }
    for (i, &x) in v.iter().enumerate() {
        if p.class == PvarClass::Timer {
            // SAFETY: the caller's buffer holds the handle's count of values (MPI 4.1
            // §15.3.7); `i` is below that count.
            out(unsafe { buf.cast::<f64>().add(i) }, x as f64 / 1e9, "buf")?;
        } else {
            // SAFETY: as above.
            out(unsafe { buf.cast::<u64>().add(i) }, x, "buf")?;
        }
    }
    Ok(())
}

/// Reads (and with `reset` resets) handle `h`.
fn read(session: *mut c_void, h: *mut c_void, buf: *mut c_void, reset: bool) -> MpiResult {
    let (p, v) = with(|t| {
        let r = &mut handle(t, session, h)?.reader;
        let v = r.value();
        if reset {
            r.reset().map_err(refused)?;
        }
        Ok((r.var(), v))
    })?;
    put(p, &v, buf)
}

mpi_fn! {
    /// `MPI_T_pvar_get_num`.
    fn PMPI_T_pvar_get_num / "MPI_T_pvar_get_num" [Direct] (num_pvar: *mut c_int) {
        with(|_| Ok(()))?;
        out(num_pvar, all_pvars().count() as c_int, "num_pvar")
    }
}

mpi_fn! {
    /// `MPI_T_pvar_get_info`.
    fn PMPI_T_pvar_get_info / "MPI_T_pvar_get_info" [Direct] (pvar_index: c_int, name: *mut c_char, name_len: *mut c_int, verb: *mut c_int, var_class: *mut c_int, dtype: *mut c_int, enumtype: *mut *mut c_void, desc: *mut c_char, desc_len: *mut c_int, bind: *mut c_int, readonly: *mut c_int, continuous: *mut c_int, atomic: *mut c_int) {
        with(|_| Ok(()))?;
        let p = pvar(pvar_index)?;
        out_str(p.name, name, name_len)?;
        out_str(p.desc, desc, desc_len)?;
        opt(verb, verbosity(p.level));
        opt(var_class, class(p.class));
        opt(dtype, if p.class == PvarClass::Timer { MPI_DOUBLE } else { MPI_UNSIGNED_LONG_LONG });
        opt(enumtype, std::ptr::null_mut());
        opt(bind, if p.comm.is_some() { MPI_T_BIND_MPI_COMM } else { MPI_T_BIND_NO_OBJECT });
        opt(readonly, c_int::from(!p.resettable()));
        opt(continuous, c_int::from(p.continuous));
        opt(atomic, 0);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_T_pvar_get_index`.
    fn PMPI_T_pvar_get_index / "MPI_T_pvar_get_index" [Direct] (name: *const c_char, var_class: c_int, pvar_index: *mut c_int) {
        with(|_| Ok(()))?;
        let name = read_cstr(name, "name")?;
        match all_pvars().position(|p| p.name == name && class(p.class) == var_class) {
            Some(i) => out(pvar_index, i as c_int, "pvar_index"),
            None => fail(MPI_T_ERR_INVALID_NAME, format!("no performance variable {name} of class {var_class}")),
        }
    }
}

mpi_fn! {
    /// `MPI_T_pvar_session_create`.
    fn PMPI_T_pvar_session_create / "MPI_T_pvar_session_create" [Direct] (session: *mut *mut c_void) {
        let s = with(|t| Ok(t.sessions.insert(())))?;
        out(session, s, "session")
    }
}

mpi_fn! {
    /// `MPI_T_pvar_session_free`: frees its handles too.
    fn PMPI_T_pvar_session_free / "MPI_T_pvar_session_free" [Direct] (session: *mut *mut c_void) {
        let s = inp(session, "session")?;
        with(|t| {
            if t.sessions.remove(s).is_none() {
                return fail(MPI_T_ERR_INVALID_SESSION, "not a performance variable session");
            }
            // Dropping a handle stops it and ends its watch.
            t.pvar_handles.remove_where(|ph| ph.session == s);
            Ok(())
        })?;
        out(session, std::ptr::null_mut(), "session")
    }
}

mpi_fn! {
    /// `MPI_T_pvar_handle_alloc`: one value per variable (one per peer rank for the
    /// per-peer ones, the communicator's size); continuous ones count from now. A
    /// communicator-bound variable reads the `MPI_Comm` `obj_handle` points to.
    fn PMPI_T_pvar_handle_alloc / "MPI_T_pvar_handle_alloc" [Direct] (session: *mut c_void, pvar_index: c_int, obj_handle: *mut c_void, handle_out: *mut *mut c_void, count: *mut c_int) {
        let p = pvar(pvar_index)?;
        let comm = match p.comm {
            Some(b) => {
                let h = inp(obj_handle.cast::<c_int>().cast_const(), "obj_handle")?;
                let st = crate::state::lock();
                let c = st.comm(h)?;
                Some(if b.collective { c.coll } else { c.ecomm })
            }
            None => None,
        };
        let h = with(|t| {
            if t.sessions.get_mut(session).is_none() {
                return fail(MPI_T_ERR_INVALID_SESSION, "not a performance variable session");
            }
            let reader = PvarReader::new(p, comm);
            let n = reader.count();
            Ok((t.pvar_handles.insert(PvarHandle { session, reader }), n))
        })?;
        out(handle_out, h.0, "handle")?;
        out(count, h.1 as c_int, "count")
    }
}

mpi_fn! {
    /// `MPI_T_pvar_handle_free`.
    fn PMPI_T_pvar_handle_free / "MPI_T_pvar_handle_free" [Direct] (session: *mut c_void, handle_io: *mut *mut c_void) {
        let h = inp(handle_io, "handle")?;
        with(|t| {
            handle(t, session, h)?;
            // Dropping it stops it and ends its watch.
            t.pvar_handles.remove(h);
            Ok(())
        })?;
        out(handle_io, std::ptr::null_mut(), "handle")
    }
}

mpi_fn! {
    /// `MPI_T_pvar_start`.
    fn PMPI_T_pvar_start / "MPI_T_pvar_start" [Direct] (session: *mut c_void, h: *mut c_void) {
        each(session, h, |p| !p.continuous, PvarReader::start)
    }
}

mpi_fn! {
    /// `MPI_T_pvar_stop`.
    fn PMPI_T_pvar_stop / "MPI_T_pvar_stop" [Direct] (session: *mut c_void, h: *mut c_void) {
        each(session, h, |p| !p.continuous, PvarReader::stop)
    }
}

mpi_fn! {
    /// `MPI_T_pvar_reset`.
    fn PMPI_T_pvar_reset / "MPI_T_pvar_reset" [Direct] (session: *mut c_void, h: *mut c_void) {
        each(session, h, Pvar::resettable, PvarReader::reset)
    }
}

mpi_fn! {
    /// `MPI_T_pvar_read`.
    fn PMPI_T_pvar_read / "MPI_T_pvar_read" [Direct] (session: *mut c_void, h: *mut c_void, buf: *mut c_void) {
        read(session, h, buf, false)
    }
}

mpi_fn! {
    /// `MPI_T_pvar_readreset`.
    fn PMPI_T_pvar_readreset / "MPI_T_pvar_readreset" [Direct] (session: *mut c_void, h: *mut c_void, buf: *mut c_void) {
        read(session, h, buf, true)
    }
}

mpi_fn! {
    /// `MPI_T_pvar_write`: counters take a count, the timer seconds.
    fn PMPI_T_pvar_write / "MPI_T_pvar_write" [Direct] (session: *mut c_void, h: *mut c_void, buf: *const c_void) {
        with(|t| {
            let r = &mut handle(t, session, h)?.reader;
            let timer = r.var().class == PvarClass::Timer;
            let mut v = Vec::with_capacity(r.count());
            for i in 0..r.count() {
                v.push(if timer {
                    // SAFETY: the caller's buffer holds the handle's count of values (MPI
                    // 4.1 §15.3.7); `i` is below that count.
                    let p = unsafe { buf.cast::<f64>().add(i) };
                    (inp(p, "buf")?.max(0.0) * 1e9) as u64
                } else {
                    // SAFETY: as above.
                    inp(unsafe { buf.cast::<u64>().add(i) }, "buf")?
                });
            }
            r.set(&v).map_err(refused)
        })
    }
}
