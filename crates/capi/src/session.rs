//! Sessions (MPI 4.0 §11.3): `MPI_Session_*`, `MPI_Group_from_session_pset`,
//! `MPI_Comm_create_from_group` and `MPI_Intercomm_create_from_groups`.
//!
//! The first session brings the library up (`env::start`: the engine, world and self) if
//! `MPI_Init` did not; several sessions live side by side and next to the World Model,
//! and `MPI_Initialized` still reports only the World Model. Finalizing a session leaves
//! the library up, so a later `MPI_Session_init` works again; a process that used
//! sessions only takes the library down when it exits (`atexit`). The process sets are
//! `mpi://WORLD`, `mpi://SELF` and `mpix://SHARED` (the processes of this node, as Open MPI
//! names that set; the engine's view of nodes). A communicator made from a group agrees on its context
//! with the group's members only (as `MPI_Comm_create_group`, over the library's world),
//! its string tag hashed to the tag of that agreement; an intercommunicator from two
//! groups joins the two local communicators through their leaders. Errors of session
//! calls go to the session's error handler.

use crate::consts::*;
use crate::ffi::{copy_cstr, inp, out, quietly, read_cstr, ErrorOwner, MpiError, MpiResult};
use crate::objects::{CommErrFn, UserErrhandler};
use crate::state::{lock, Group, Info, Session};
use std::ffi::{c_char, c_int};

/// The process sets every session offers.
const PSETS: [&str; 3] = ["mpi://WORLD", "mpi://SELF", "mpix://SHARED"];

/// Errors of a session call go to the session's handler; without a valid session, to
/// `MPI_COMM_SELF`'s (MPI 4.0 §9.3: no associated object).
#[derive(Clone, Copy)]
struct OnSession(c_int);

impl ErrorOwner for OnSession {
    fn raise(&self, func: &str, err: &MpiError) -> c_int {
        let action = lock().sessions.get(self.0).map(|s| s.err_action);
        match action {
            Some(action) => {
                let mut h = self.0;
                crate::errors::act(func, err, action, &mut h, "the session's error handler")
            }
            None => crate::ffi::OnComm.raise(func, &err.clone().on(MPI_COMM_SELF)),
        }
    }
}

/// The names of the thread levels (the `thread_level` info key).
const LEVELS: [(&str, c_int); 4] = [
    ("MPI_THREAD_SINGLE", MPI_THREAD_SINGLE),
    ("MPI_THREAD_FUNNELED", MPI_THREAD_FUNNELED),
    ("MPI_THREAD_SERIALIZED", MPI_THREAD_SERIALIZED),
    ("MPI_THREAD_MULTIPLE", MPI_THREAD_MULTIPLE),
];

/// Members (world ranks) of process set `name`.
fn pset(name: &str, world: &[i32], me: i32) -> MpiResult<Vec<i32>> {
    match name {
        "mpi://WORLD" => Ok(world.to_vec()),
        "mpi://SELF" => Ok(vec![me]),
        "mpix://SHARED" => {
            let e = crate::backend::engine()?;
            Ok(world
                .iter()
                .copied()
                .filter(|&r| e.node_pid(r).is_some())
                .collect())
        }
        _ => Err(MpiError::new(
            MPI_ERR_ARG,
            format!(
                "unknown process set '{name}' (this library has {})",
                PSETS.join(", ")
            ),
        )),
    }
}

/// Checks that `session` is a live session.
fn check(session: c_int) -> MpiResult {
    if lock().sessions.get(session).is_none() {
        let what = if session == MPI_SESSION_NULL {
            "MPI_SESSION_NULL passed".to_string()
        } else {
            format!("invalid session handle {session:#x}")
        };
        return Err(MpiError::new(MPI_ERR_SESSION, what));
    }
    Ok(())
}

/// At exit: take the library down if only sessions used it (`MPI_Finalize` was not
/// called).
extern "C" fn finalize_at_exit() {
    let up = {
        let st = lock();
        st.initialized && !st.finalized && !st.world_model
    };
    if up {
        let _ = crate::env::stop();
    }
}

mpi_fn! {
    /// `MPI_Session_init` (MPI 4.0).
    fn PMPI_Session_init / "MPI_Session_init" [OnSession(MPI_SESSION_NULL)] (info: c_int, errhandler: c_int, session: *mut c_int) {
        if session.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL session");
        }
        let mut st = lock();
        let err_action = st.errhandler_action(errhandler)?;
        let mut entries = if info == MPI_INFO_NULL {
            Vec::new()
        } else {
            match st.infos.get(info) {
                Some(i) => i.entries.clone(),
                None => mpi_bail!(MPI_ERR_INFO, "invalid info handle {info:#x}"),
            }
        };
        if st.finalized {
            mpi_bail!(MPI_ERR_OTHER, "MPI_Session_init after MPI_Finalize is not supported");
        }
        let asked = entries.iter().find(|(k, _)| k == "thread_level").map(|(_, v)| v.trim().to_string());
        let required = match asked {
            None => MPI_THREAD_SINGLE,
            Some(v) => match LEVELS.iter().find(|(n, _)| *n == v) {
                Some(&(_, l)) => l,
                None => mpi_bail!(MPI_ERR_INFO_VALUE, "unknown thread_level '{v}'"),
            },
        };
        let first = !st.initialized;
        let provided = crate::env::start(&mut st, required)?;
        let name = LEVELS.iter().find(|(_, l)| *l == provided).map_or("MPI_THREAD_SINGLE", |(n, _)| n);
        entries.retain(|(k, _)| k != "thread_level");
        entries.push(("thread_level".into(), name.into()));
        let h = st.sessions.insert(Session { errh: errhandler, err_action, info: entries });
        drop(st);
        if first {
            crate::sys::at_exit(finalize_at_exit);
        }
        out(session, h, "session")
    }
}

mpi_fn! {
    /// `MPI_Session_finalize` (MPI 4.0): the library stays up (see the module docs).
    fn PMPI_Session_finalize / "MPI_Session_finalize" [OnSession(crate::ffi::inp(session, "session").unwrap_or(MPI_SESSION_NULL))] (session: *mut c_int) {
        let h = inp(session, "session")?;
        check(h)?;
        lock().sessions.remove(h);
        out(session, MPI_SESSION_NULL, "session")
    }
}

mpi_fn! {
    /// `MPI_Session_get_num_psets` (MPI 4.0).
    fn PMPI_Session_get_num_psets / "MPI_Session_get_num_psets" [OnSession(session)] (session: c_int, info: c_int, npset_names: *mut c_int) {
        let _ = info;
        check(session)?;
        out(npset_names, PSETS.len() as c_int, "npset_names")
    }
}

mpi_fn! {
    /// `MPI_Session_get_nth_pset` (MPI 4.0): with `*pset_len` 0 only the length (plus one
    /// for the NUL) is returned.
    fn PMPI_Session_get_nth_pset / "MPI_Session_get_nth_pset" [OnSession(session)] (session: c_int, info: c_int, n: c_int, pset_len: *mut c_int, pset_name: *mut c_char) {
        let _ = info;
        check(session)?;
        let Some(name) = usize::try_from(n).ok().and_then(|i| PSETS.get(i)) else {
            mpi_bail!(MPI_ERR_ARG, "process set {n} out of range (0..{})", PSETS.len());
        };
        let room = inp(pset_len, "pset_len")?;
        if room > 0 {
            copy_cstr(pset_name, room as usize, name)?;
        }
        out(pset_len, name.len() as c_int + 1, "pset_len")
    }
}

mpi_fn! {
    /// `MPI_Session_get_pset_info` (MPI 4.0): `mpi_size` of the set.
    fn PMPI_Session_get_pset_info / "MPI_Session_get_pset_info" [OnSession(session)] (session: c_int, pset_name: *const c_char, info: *mut c_int) {
        check(session)?;
        let name = read_cstr(pset_name, "pset_name")?;
        let mut st = lock();
        let (world, me) = (st.world.as_ref().map(|w| w.group.clone()).unwrap_or_default(), st.world_rank());
        let members = pset(&name, &world, me)?;
        let i = Info { entries: vec![("mpi_size".into(), members.len().to_string())] };
        let h = st.infos.insert(i);
        drop(st);
        out(info, h, "info")
    }
}

mpi_fn! {
    /// `MPI_Session_get_info` (MPI 4.0): the info the session was created with and its
    /// `thread_level`.
    fn PMPI_Session_get_info / "MPI_Session_get_info" [OnSession(session)] (session: c_int, info_used: *mut c_int) {
        check(session)?;
        let mut st = lock();
        let entries = st.sessions.get(session).map(|s| s.info.clone()).unwrap_or_default();
        let h = st.infos.insert(Info { entries });
        drop(st);
        out(info_used, h, "info_used")
    }
}

mpi_fn! {
    /// `MPI_Session_create_errhandler` (MPI 4.0).
    fn PMPI_Session_create_errhandler / "MPI_Session_create_errhandler" (func: Option<CommErrFn>, errhandler: *mut c_int) {
        let Some(func) = func else { mpi_bail!(MPI_ERR_ARG, "NULL error handler function") };
        let h = lock().errhandlers.insert(UserErrhandler { func, refs: 1 });
        out(errhandler, h, "errhandler")
    }
}

mpi_fn! {
    /// `MPI_Session_set_errhandler` (MPI 4.0).
    fn PMPI_Session_set_errhandler / "MPI_Session_set_errhandler" [OnSession(session)] (session: c_int, errhandler: c_int) {
        check(session)?;
        let mut st = lock();
        let action = st.errhandler_action(errhandler)?;
        if let Some(s) = st.sessions.get_mut(session) {
            s.errh = errhandler;
            s.err_action = action;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Session_get_errhandler` (MPI 4.0).
    fn PMPI_Session_get_errhandler / "MPI_Session_get_errhandler" [OnSession(session)] (session: c_int, errhandler: *mut c_int) {
        check(session)?;
        let h = lock().sessions.get(session).map_or(MPI_ERRHANDLER_NULL, |s| s.errh);
        out(errhandler, crate::errors::handed_out(h), "errhandler")
    }
}

mpi_fn! {
    /// `MPI_Session_call_errhandler` (MPI 4.0).
    fn PMPI_Session_call_errhandler / "MPI_Session_call_errhandler" [OnSession(session)] (session: c_int, errorcode: c_int) {
        check(session)?;
        let e = MpiError::new(errorcode, "raised by MPI_Session_call_errhandler");
        OnSession(session).raise("MPI_Session_call_errhandler", &e);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Group_from_session_pset` (MPI 4.0).
    fn PMPI_Group_from_session_pset / "MPI_Group_from_session_pset" [OnSession(session)] (session: c_int, pset_name: *const c_char, newgroup: *mut c_int) {
        check(session)?;
        let name = read_cstr(pset_name, "pset_name")?;
        if newgroup.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL newgroup");
        }
        let mut st = lock();
        let (world, me) = (st.world.as_ref().map(|w| w.group.clone()).unwrap_or_default(), st.world_rank());
        let members = pset(&name, &world, me)?;
        let h = st.groups.insert(Group { members });
        drop(st);
        out(newgroup, h, "newgroup")
    }
}

/// The tag a string tag agrees under (FNV-1a, within the tag range).
fn string_tag(tag: *const c_char) -> MpiResult<c_int> {
    let s = read_cstr(tag, "stringtag")?;
    let h = s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    Ok((h % (1 << 29)) as c_int)
}

/// Give new communicator `comm` the error handler `errhandler`.
fn set_errhandler(comm: c_int, errhandler: c_int) -> MpiResult {
    // SAFETY: plain handle arguments.
    quietly(|| unsafe { crate::errors::PMPI_Comm_set_errhandler(comm, errhandler) })
}

/// `MPI_Comm_create_from_group` without the output checks: the new communicator.
fn from_group(group: c_int, tag: c_int, errhandler: c_int) -> MpiResult<c_int> {
    lock().errhandler_action(errhandler)?;
    let mut c = MPI_COMM_NULL;
    // SAFETY: valid output pointer; the library's world is up (a session or MPI_Init).
    quietly(|| unsafe {
        crate::comm_create::PMPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &mut c)
    })?;
    if c != MPI_COMM_NULL {
        set_errhandler(c, errhandler)?;
    }
    Ok(c)
}

mpi_fn! {
    /// `MPI_Comm_create_from_group` (MPI 4.0): collective over the group's members.
    fn PMPI_Comm_create_from_group / "MPI_Comm_create_from_group" (group: c_int, stringtag: *const c_char, info: c_int, errhandler: c_int, newcomm: *mut c_int) {
        let _ = info;
        lock().check_active()?;
        if newcomm.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL newcomm");
        }
        let tag = string_tag(stringtag)?;
        let c = from_group(group, tag, errhandler)?;
        out(newcomm, c, "newcomm")
    }
}

mpi_fn! {
    /// `MPI_Intercomm_create_from_groups` (MPI 4.0).
    fn PMPI_Intercomm_create_from_groups / "MPI_Intercomm_create_from_groups" (local_group: c_int, local_leader: c_int, remote_group: c_int, remote_leader: c_int, stringtag: *const c_char, info: c_int, errhandler: c_int, newintercomm: *mut c_int) {
        let _ = info;
        lock().check_active()?;
        if newintercomm.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL newintercomm");
        }
        let tag = string_tag(stringtag)?;
        let leader = {
            let st = lock();
            let remote = st.group(remote_group)?;
            match usize::try_from(remote_leader).ok().and_then(|i| remote.get(i)) {
                Some(&w) => w,
                None => mpi_bail!(MPI_ERR_RANK, "remote_leader {remote_leader} is not a rank of the remote group"),
            }
        };
        let mut local = from_group(local_group, tag, MPI_ERRORS_RETURN)?;
        let mut inter = MPI_COMM_NULL;
        // SAFETY: valid output pointer and handles.
        let made = quietly(|| unsafe {
            crate::intercomm::PMPI_Intercomm_create(local, local_leader, MPI_COMM_WORLD, leader, tag, &mut inter)
        });
        // SAFETY: the local communicator made above.
        let freed = quietly(|| unsafe { crate::comm::PMPI_Comm_free(&mut local) });
        made?;
        freed?;
        set_errhandler(inter, errhandler)?;
        out(newintercomm, inter, "newintercomm")
    }
}
