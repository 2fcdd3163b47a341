//! `MPI_Comm_spawn`, `MPI_Comm_spawn_multiple` and `MPI_Comm_get_parent`.
//!
//! The parents' root asks the launcher over PMI (`spawn`) to start the children as a new
//! job; the request carries, as a preput pair, the name of a port the root opened. Each
//! child finds it in its `MPI_Init` ([`connect_parent_at_init`]) and the children connect
//! to it together while the parents accept: the cross-job connect/accept of `dpm.rs` makes
//! the intercommunicator (parents local in the spawn call, children local in
//! `MPI_Comm_get_parent`). A launcher refusal (unknown command, too few slots, ...) is
//! `MPI_ERR_SPAWN` with its reason on every parent; `maxprocs` ≤ 0 is `MPI_ERR_ARG`.

use crate::backend;
use crate::consts::*;
use crate::ffi::{out, read_cstr, MpiError, MpiResult};
use crate::state::lock;
use oxmpi_wire::pmi::{SpawnCommand, SpawnRequest};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicI32, Ordering};

/// The preput key naming the parents' port.
const PARENT_PORT_KEY: &str = "oxmpi_parent_port";

/// The intercommunicator to the parents (`MPI_COMM_NULL` when not spawned).
static PARENT: AtomicI32 = AtomicI32::new(MPI_COMM_NULL);

/// In `MPI_Init` of a spawned process (`PMI_SPAWNED=1`): connect to the parents.
pub(crate) fn connect_parent_at_init() -> MpiResult {
    if std::env::var("PMI_SPAWNED").as_deref() != Ok("1") {
        return Ok(());
    }
    let Some(port) = backend::engine()?.launcher_get(PARENT_PORT_KEY) else {
        return Ok(());
    };
    let parent = crate::dpm::connect_parent(&port)?;
    PARENT.store(parent, Ordering::Relaxed);
    Ok(())
}

/// The NULL-terminated string array `argv` (`MPI_ARGV_NULL`: none).
fn read_argv(argv: *const *const c_char) -> MpiResult<Vec<String>> {
    let mut v = Vec::new();
    if argv.is_null() {
        return Ok(v);
    }
    for i in 0.. {
        // SAFETY: the caller passes a NULL-terminated array of C strings (MPI standard).
        let p = unsafe { *argv.add(i) };
        if p.is_null() {
            break;
        }
        v.push(read_cstr(p, "argv")?);
    }
    Ok(v)
}

/// The pairs of `info` (`MPI_INFO_NULL`: none).
fn info_pairs(info: c_int) -> MpiResult<Vec<(String, String)>> {
    if info == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    Ok(lock().info(info)?.entries.clone())
}

/// One command of a spawn call, read at the root.
fn command(
    program: *const c_char,
    argv: *const *const c_char,
    maxprocs: c_int,
    info: c_int,
) -> MpiResult<SpawnCommand> {
    let program = read_cstr(program, "command")?;
    if maxprocs <= 0 {
        return Err(MpiError::new(
            MPI_ERR_ARG,
            format!("maxprocs {maxprocs} for command '{program}' (must be at least 1)"),
        ));
    }
    Ok(SpawnCommand {
        argv: read_argv(argv)?,
        maxprocs: maxprocs as u32,
        info: info_pairs(info)?,
        program,
    })
}

/// Both spawn calls: `commands` (read at the root only) are started as one job.
fn spawn(
    commands: impl FnOnce() -> MpiResult<Vec<SpawnCommand>>,
    root: c_int,
    comm: c_int,
    intercomm: *mut c_int,
    errcodes: *mut c_int,
) -> MpiResult {
    let mut total = 0usize;
    let r = crate::dpm::spawn_accept(comm, root, intercomm, |port| {
        let req = SpawnRequest {
            commands: commands()?,
            preput: vec![(PARENT_PORT_KEY.to_string(), port.to_string())],
        };
        total = req.commands.iter().map(|c| c.maxprocs as usize).sum();
        backend::engine()?
            .spawn(&req)
            .map_err(|e| match e {
                oxmpi_engine::Error::Bootstrap { msg, .. } => MpiError::new(MPI_ERR_SPAWN, msg),
                e => backend::err(e),
            })
            .map(|_| ())
    });
    // The children: the remote group (an error leaves the caller's count).
    let n = match &r {
        Ok(()) => crate::intercomm::get(unsafe_read(intercomm)).map_or(0, |i| i.remote.len()),
        Err(_) => total,
    };
    if !errcodes.is_null() {
        let code = if r.is_ok() {
            MPI_SUCCESS
        } else {
            MPI_ERR_SPAWN
        };
        for i in 0..n {
            // SAFETY: the caller's array holds one code per requested process (MPI
            // standard); `n` is that count at the root and the started count elsewhere.
            unsafe { *errcodes.add(i) = code };
        }
    }
    r.map_err(|e| e.on(comm))
}

/// `*p` for a handle the call just wrote.
fn unsafe_read(p: *const c_int) -> c_int {
    // SAFETY: `p` was checked for NULL by `spawn_accept` and written by it.
    unsafe { *p }
}

mpi_fn! {
    /// `MPI_Comm_spawn`: starts `maxprocs` copies of `command` as a new job.
    fn PMPI_Comm_spawn / "MPI_Comm_spawn" (command_: *const c_char, argv: *const *const c_char, maxprocs: c_int, info: c_int, root: c_int, comm: c_int, intercomm: *mut c_int, array_of_errcodes: *mut c_int) {
        spawn(|| Ok(vec![command(command_, argv, maxprocs, info)?]), root, comm, intercomm, array_of_errcodes)
    }
}

mpi_fn! {
    /// `MPI_Comm_spawn_multiple`: starts `count` commands as one job (`MPI_APPNUM` is the
    /// command's index).
    fn PMPI_Comm_spawn_multiple / "MPI_Comm_spawn_multiple" (count: c_int, array_of_commands: *const *const c_char, array_of_argv: *const *const *const c_char, array_of_maxprocs: *const c_int, array_of_info: *const c_int, root: c_int, comm: c_int, intercomm: *mut c_int, array_of_errcodes: *mut c_int) {
        let commands = || -> MpiResult<Vec<SpawnCommand>> {
            if count <= 0 {
                return Err(MpiError::new(MPI_ERR_ARG, format!("count {count} (must be at least 1)")));
            }
            if array_of_commands.is_null() || array_of_maxprocs.is_null() || array_of_info.is_null() {
                return Err(MpiError::new(MPI_ERR_ARG, "NULL array_of_commands, array_of_maxprocs or array_of_info"));
            }
            (0..count as usize)
                .map(|i| {
                    // SAFETY: the caller's arrays hold `count` entries (MPI standard);
                    // `MPI_ARGVS_NULL` (NULL) means no arguments for any command.
                    let (c, a, m, inf) = unsafe {
                        (
                            *array_of_commands.add(i),
                            if array_of_argv.is_null() { std::ptr::null() } else { *array_of_argv.add(i) },
                            *array_of_maxprocs.add(i),
                            *array_of_info.add(i),
                        )
                    };
                    command(c, a, m, inf)
                })
                .collect()
        };
        spawn(commands, root, comm, intercomm, array_of_errcodes)
    }
}

mpi_fn! {
    /// `MPI_Comm_get_parent`: the intercommunicator to the parents of a spawned process,
    /// else `MPI_COMM_NULL`.
    fn PMPI_Comm_get_parent / "MPI_Comm_get_parent" (parent: *mut c_int) {
        let p = PARENT.load(Ordering::Relaxed);
        // A freed or disconnected parent communicator reads as MPI_COMM_NULL.
        let p = if p != MPI_COMM_NULL && lock().comm(p).is_ok() { p } else { MPI_COMM_NULL };
        out(parent, p, "parent")
    }
}
