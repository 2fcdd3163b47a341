//! Environment management: init/finalize, versions, thread levels, abort, timers,
//! processor name.

use crate::backend;
use crate::consts::*;
use crate::ffi::{copy_cstr, out, MpiResult};
use crate::objects::ErrAction;
use crate::state::{lock, Comm};
use std::ffi::{c_char, c_int};
use std::sync::OnceLock;

/// The library version string (`MPI_Get_library_version`).
pub(crate) fn library_version() -> String {
    format!(
        "oxmpi {} (MPICH ABI libmpi.so.12, MPI {}.{})",
        env!("CARGO_PKG_VERSION"),
        MPI_VERSION_MAJOR,
        MPI_VERSION_MINOR
    )
}

/// The MPI standard version we report.
pub(crate) const MPI_VERSION_MAJOR: c_int = 4;
/// The MPI standard subversion we report.
pub(crate) const MPI_VERSION_MINOR: c_int = 1;

/// This host's name (the engine's, read once by the output framework).
pub(crate) fn hostname() -> String {
    oxmpi_engine::sys::hostname()
}

/// Abort the whole job with `code` (through the engine when it is up).
pub(crate) fn abort_job(code: c_int) -> ! {
    match oxmpi_engine::engine() {
        Some(e) => e.abort(code),
        None => std::process::exit(if code == 0 { 1 } else { code & 0xff }),
    }
}

/// The origin of `MPI_Wtime` (monotonic nanoseconds): the first call of `MPI_Wtime` or
/// `MPI_Init`, whichever came first.
#[inline]
fn start_time() -> u64 {
    static T0: OnceLock<u64> = OnceLock::new();
    *T0.get_or_init(crate::sys::monotonic_ns)
}

/// Shared body of MPI_Init and MPI_Init_thread.
fn init(required: c_int) -> MpiResult<c_int> {
    let mut st = lock();
    if st.world_model {
        mpi_bail!(MPI_ERR_OTHER, "MPI_Init called twice");
    }
    if st.finalized {
        mpi_bail!(MPI_ERR_OTHER, "MPI_Init called after MPI_Finalize");
    }
    let provided = start(&mut st, required)?;
    st.world_model = true;
    drop(st);
    // A spawned process meets its parents before MPI_Init returns.
    crate::spawn::connect_parent_at_init()?;
    Ok(provided)
}

/// Bring the library up (lock held) unless a session did already: the engine, world and
/// self. Returns the thread level provided.
pub(crate) fn start(st: &mut crate::state::State, required: c_int) -> MpiResult<c_int> {
    if !(MPI_THREAD_SINGLE..=MPI_THREAD_MULTIPLE).contains(&required) {
        mpi_bail!(MPI_ERR_ARG, "invalid thread level {required}");
    }
    if st.initialized {
        return Ok(st.thread_level);
    }
    start_time();
    let eng = backend::init(required)?;
    let (rank, size) = (eng.rank(), eng.size());
    let (errh, action) = st.pre_init_world_errh;
    // Collective contexts of world and self: context ids 2 and 3 (0/1 are the engine's
    // world and self).
    let world_coll = eng
        .comm_create(2, (0..size).collect())
        .map_err(backend::err)?;
    let self_coll = eng.comm_create(3, vec![rank]).map_err(backend::err)?;
    st.world = Some(Comm {
        ecomm: eng.comm_world(),
        coll: world_coll,
        rank,
        size,
        group: (0..size).collect(),
        errh,
        err_action: action,
        name: "MPI_COMM_WORLD".into(),
        attrs: Default::default(),
        idups: 0,
    });
    crate::comm::world_made(rank, size);
    st.selfc = Some(Comm {
        ecomm: eng.comm_self(),
        coll: self_coll,
        rank: 0,
        size: 1,
        group: vec![rank],
        errh: MPI_ERRORS_ARE_FATAL,
        err_action: ErrAction::Fatal,
        name: "MPI_COMM_SELF".into(),
        attrs: Default::default(),
        idups: 0,
    });
    let provided = backend::thread_level_code(eng.thread_level());
    st.thread_level = provided;
    // Below MPI_THREAD_MULTIPLE the datatype reference counts need no atomic updates.
    crate::type_table::set_serial(provided != crate::consts::MPI_THREAD_MULTIPLE);
    st.initialized = true;
    crate::tools::profile::start(provided == crate::consts::MPI_THREAD_MULTIPLE);
    Ok(provided)
}

mpi_fn! {
    /// `MPI_Init`.
    fn PMPI_Init / "MPI_Init" (_argc: *mut c_int, _argv: *mut *mut *mut c_char) {
        init(MPI_THREAD_SINGLE).map(|_| ())
    }
}

mpi_fn! {
    /// `MPI_Init_thread`.
    fn PMPI_Init_thread / "MPI_Init_thread" (_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) {
        if provided.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL provided");
        }
        let p = init(required)?;
        out(provided, p, "provided")
    }
}

mpi_fn! {
    /// `MPI_Finalize`.
    fn PMPI_Finalize / "MPI_Finalize" () {
        {
            let st = lock();
            st.check_active()?;
        }
        stop()
    }
}

/// Take the library down: `MPI_Finalize`, or the end of a process that used sessions only.
pub(crate) fn stop() -> MpiResult {
    // MPI 3.1 §8.7.1: MPI_COMM_SELF's attributes go first, in reverse order of setting.
    // A failing callback does not stop the shutdown.
    let _ = crate::comm::delete_all_attrs(MPI_COMM_SELF);
    // Let freed requests and buffered sends drain.
    let eng = backend::engine()?;
    loop {
        let mut st = lock();
        crate::request::reap_orphans(&mut st);
        if st.orphans.is_empty() {
            break;
        }
        drop(st);
        eng.progress();
    }
    crate::tools::profile::finish();
    eng.finalize().map_err(backend::err)?;
    lock().finalized = true;
    // What was cached of the communicators is stale.
    crate::icoll::sched::COMM_GEN.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    Ok(())
}

mpi_fn! {
    /// `MPI_Initialized`: whether `MPI_Init` was called (the World Model; sessions do not
    /// count).
    fn PMPI_Initialized / "MPI_Initialized" (flag: *mut c_int) {
        let v = lock().world_model;
        out(flag, v as c_int, "flag")
    }
}

mpi_fn! {
    /// `MPI_Finalized`.
    fn PMPI_Finalized / "MPI_Finalized" (flag: *mut c_int) {
        let v = lock().finalized;
        out(flag, v as c_int, "flag")
    }
}

mpi_fn! {
    /// `MPI_Query_thread`.
    fn PMPI_Query_thread / "MPI_Query_thread" (provided: *mut c_int) {
        let v = lock().thread_level;
        out(provided, v, "provided")
    }
}

mpi_fn! {
    /// `MPI_Is_thread_main`.
    fn PMPI_Is_thread_main / "MPI_Is_thread_main" (flag: *mut c_int) {
        let main = crate::sys::is_main_thread();
        out(flag, main as c_int, "flag")
    }
}

mpi_fn! {
    /// `MPI_Abort`: terminates every process of the job.
    fn PMPI_Abort / "MPI_Abort" (comm: c_int, errorcode: c_int) {
        let _ = comm;
        let host = hostname();
        // The rank in MPI_COMM_WORLD, so that the one line says who called it (under srun
        // nothing else names the rank).
        let who = oxmpi_engine::engine().map_or(String::new(), |e| format!(" rank {}:", e.rank()));
        eprintln!(
            "[{host}:{}] oxmpi:{who} MPI_Abort called with error code {errorcode}",
            std::process::id()
        );
        abort_job(errorcode)
    }
}

mpi_fn! {
    /// `MPI_Get_version`: 3.1.
    fn PMPI_Get_version / "MPI_Get_version" (version: *mut c_int, subversion: *mut c_int) {
        out(version, MPI_VERSION_MAJOR, "version")?;
        out(subversion, MPI_VERSION_MINOR, "subversion")
    }
}

mpi_fn! {
    /// `MPI_Get_library_version`: starts with "oxmpi".
    fn PMPI_Get_library_version / "MPI_Get_library_version" (version: *mut c_char, resultlen: *mut c_int) {
        let n = copy_cstr(version, MPI_MAX_LIBRARY_VERSION_STRING as usize, &library_version())?;
        out(resultlen, n, "resultlen")
    }
}

mpi_fn! {
    /// `MPI_Get_processor_name`.
    fn PMPI_Get_processor_name / "MPI_Get_processor_name" (name: *mut c_char, resultlen: *mut c_int) {
        let n = copy_cstr(name, MPI_MAX_PROCESSOR_NAME as usize, &hostname())?;
        out(resultlen, n, "resultlen")
    }
}

/// `MPI_Wtime`: seconds since an arbitrary point in the past (monotonic).
#[no_mangle]
pub extern "C" fn PMPI_Wtime() -> f64 {
    let t0 = start_time();
    crate::sys::monotonic_ns().saturating_sub(t0) as f64 * 1e-9
}
mpi_alias!(PMPI_Wtime / "MPI_Wtime");

/// `MPI_Wtick`: the resolution of `MPI_Wtime` (nanoseconds).
#[no_mangle]
pub extern "C" fn PMPI_Wtick() -> f64 {
    1e-9
}
mpi_alias!(PMPI_Wtick / "MPI_Wtick");

mpi_fn! {
    /// `MPI_Pcontrol`: no profiling levels here; accepted and ignored.
    fn PMPI_Pcontrol / "MPI_Pcontrol" (_level: c_int) {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings() {
        assert!(library_version().starts_with("oxmpi "));
        assert!(library_version().contains("MPI 4.1"));
        let mut v = 0;
        let mut s = 0;
        // SAFETY: valid output pointers.
        let rc = unsafe { PMPI_Get_version(&mut v, &mut s) };
        assert_eq!((rc, v, s), (MPI_SUCCESS, 4, 1));
    }

    #[test]
    fn wtime_is_monotonic() {
        let a = PMPI_Wtime();
        let b = PMPI_Wtime();
        assert!(b >= a);
        assert!(PMPI_Wtick() > 0.0);
    }
}
