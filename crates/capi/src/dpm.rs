//! Dynamic process management between processes of one job: ports
//! (`MPI_Open_port`/`MPI_Close_port`), `MPI_Comm_accept`/`MPI_Comm_connect`,
//! `MPI_Comm_join`, and the name service (`MPI_Publish_name`, `MPI_Lookup_name`,
//! `MPI_Unpublish_name`). `MPI_Comm_spawn` is not provided (see `stubs.rs`).
//!
//! A port name is `oxmpi-port:<job>:<world rank>:<id>`. Every process of the job is
//! already connected to every other (the engine wires all world ranks at start-up), so
//! connecting is an agreement, not a connection: the connecting group's root sends a
//! request to the port's owner on `MPI_COMM_WORLD`'s collective context with a tag that
//! names the port; the accepting root takes the first such request, and both groups build
//! an intercommunicator exactly as `MPI_Intercomm_create` does (leaders = the two roots,
//! peer communicator = `MPI_COMM_WORLD`). A port of another job is refused with
//! `MPI_ERR_PORT` (no route to it); connecting to a port of this job that nobody accepts on
//! waits, as the standard allows.
//!
//! Published names live as files in the job's directory on the node (`OXMPI_JOB_DIR`), so
//! they are visible to the processes of the job on the same node; a process without a job
//! directory (singleton) keeps them to itself.

use crate::consts::*;
use crate::ffi::{copy_cstr, out, read_cstr, MpiError, MpiResult};
use crate::intercomm::{contribution, exchange, make_inter, require_intra, word, Net, Star};
use crate::state::lock;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// Tag of the agreement between the connecting and the accepting group (their collective
/// contexts, and the world's between the roots; above the ranges of `oxmpi-coll`,
/// `MPI_Comm_create_group` and `MPI_Intercomm_create`); a connect request carries the
/// port id in the low 20 bits (ids start at 1).
const CONNECT_TAG: i32 = 1 << 23;
/// Tag of the agreement of `MPI_Comm_join`.
const JOIN_TAG: i32 = 1 << 24;
const PORT_ID_MASK: u32 = (1 << 20) - 1;

static NEXT_PORT: AtomicU32 = AtomicU32::new(1);
static OPEN_PORTS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// Published names when the job has no directory.
static LOCAL_NAMES: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

/// What identifies this job among others on the machine.
fn job_key() -> String {
    for v in ["OXMPI_JOBID", "PMI_JOBID", "SLURM_JOB_ID"] {
        if let Ok(s) = std::env::var(v) {
            if !s.is_empty() {
                let step = std::env::var("SLURM_STEP_ID").unwrap_or_default();
                let raw = if v == "SLURM_JOB_ID" {
                    format!("{s}.{step}")
                } else {
                    s
                };
                return raw.replace(':', "_");
            }
        }
    }
    format!("singleton{}", std::process::id())
}

/// A parsed port name: owner's world rank and port id.
fn parse_port(name: &str) -> MpiResult<(i32, u32)> {
    let bad = |why: &str| MpiError::new(MPI_ERR_PORT, format!("invalid port name {name:?}: {why}"));
    let mut f = name.split(':');
    if f.next() != Some("oxmpi-port") {
        return Err(bad("not a port opened by MPI_Open_port of oxmpi"));
    }
    let job = f.next().ok_or_else(|| bad("no job"))?;
    let rank: i32 = f
        .next()
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| bad("no rank"))?;
    let id: u32 = f
        .next()
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| bad("no port id"))?;
    if f.next().is_some() || id == 0 || id > PORT_ID_MASK {
        return Err(bad("malformed"));
    }
    if job != job_key() {
        return Err(bad(&format!(
            "it belongs to job {job}, this is job {} (connecting jobs is not supported)",
            job_key()
        )));
    }
    let size = lock().comm(MPI_COMM_WORLD)?.group.len() as i32;
    if !(0..size).contains(&rank) {
        return Err(bad(&format!(
            "rank {rank} is not in MPI_COMM_WORLD of size {size}"
        )));
    }
    Ok((rank, id))
}

mpi_fn! {
    /// `MPI_Open_port`.
    fn PMPI_Open_port / "MPI_Open_port" (info: c_int, port_name: *mut c_char) {
        let _ = info;
        let id = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        if id > PORT_ID_MASK {
            return Err(MpiError::new(MPI_ERR_PORT, "no more ports (2^20 per process)"));
        }
        let me = lock().world_rank();
        let name = format!("oxmpi-port:{}:{me}:{id}", job_key());
        OPEN_PORTS.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
        copy_cstr(port_name, MPI_MAX_PORT_NAME as usize, &name)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Close_port`.
    fn PMPI_Close_port / "MPI_Close_port" (port_name: *const c_char) {
        let name = read_cstr(port_name, "port_name")?;
        let (rank, id) = parse_port(&name)?;
        let me = lock().world_rank();
        let open = OPEN_PORTS.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        if rank != me || !open {
            return Err(MpiError::new(MPI_ERR_PORT, format!("port {name:?} is not open in this process")));
        }
        Ok(())
    }
}

/// World rank, the world's collective context, and `comm`'s collective view with `root` as
/// leader.
fn setup(comm: c_int, root: c_int) -> MpiResult<(i32, crate::backend::EComm, Star)> {
    require_intra(comm, "the communicator of MPI_Comm_accept/MPI_Comm_connect")?;
    let st = lock();
    st.check_active()?;
    let c = st.comm(comm)?;
    let size = c.group.len() as i32;
    if !(0..size).contains(&root) {
        return Err(MpiError::new(
            MPI_ERR_ROOT,
            format!("invalid root {root} (communicator size {size})"),
        )
        .on(comm));
    }
    let star = Star {
        ctx: c.coll,
        rank: c.rank,
        size,
        leader: root,
    };
    let world = st.comm(MPI_COMM_WORLD)?.coll;
    Ok((st.world_rank(), world, star))
}

/// Both sides after the roots found each other: the intercommunicator agreement.
fn finish(
    comm: c_int,
    me: i32,
    star: Star,
    swap: Option<MpiResult<(crate::backend::EComm, i32)>>,
    tag: i32,
    newcomm: *mut c_int,
) -> MpiResult {
    let net = Net::new(comm)?;
    let x = exchange(&net, star, swap, contribution(&[me]), tag)?;
    let local: Vec<i32> = x.local.iter().map(|c| word(c, 1)).collect();
    let remote: Vec<i32> = x.remote.iter().map(|c| word(c, 1)).collect();
    if let Some(w) = local.iter().find(|w| remote.contains(w)) {
        return Err(MpiError::new(
            MPI_ERR_COMM,
            format!("the two groups overlap (world rank {w} is in both)"),
        )
        .on(comm));
    }
    let ctx = x.agree_ctx();
    let h = make_inter(comm, ctx, local, remote)?;
    out(newcomm, h, "newcomm")
}

/// `MPI_Comm_accept` (`accept`) or `MPI_Comm_connect`: the root waits for one connect
/// request on its open port, or sends one to the port's owner; then both groups agree.
fn rendezvous(
    port_name: *const c_char,
    root: c_int,
    comm: c_int,
    newcomm: *mut c_int,
    accept: bool,
) -> MpiResult {
    if newcomm.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
    }
    let (me, world, star) = setup(comm, root)?;
    // The port matters at the root only.
    let swap = (star.rank == root).then(|| -> MpiResult<(crate::backend::EComm, i32)> {
        let name = read_cstr(port_name, "port_name")?;
        let (owner, id) = parse_port(&name)?;
        let open = OPEN_PORTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&id);
        if accept && (owner != me || !open) {
            return Err(MpiError::new(
                MPI_ERR_PORT,
                format!("port {name:?} is not open in this process (world rank {me})"),
            ));
        }
        if !accept && owner == me {
            let why = if open {
                "it is this process's own port (accept and connect would wait for each other)"
            } else {
                "it is not open"
            };
            return Err(MpiError::new(
                MPI_ERR_PORT,
                format!("cannot connect to port {name:?}: {why}"),
            ));
        }
        let tag = CONNECT_TAG | id as i32;
        let eng = crate::backend::engine()?;
        let mut b = [0u8; 4];
        // SAFETY: `b` lives until the wait below.
        let r = unsafe {
            if accept {
                // The first connect request on this port, from anyone.
                eng.irecv(b.as_mut_ptr(), 4, MPI_ANY_SOURCE, tag, world)
            } else {
                eng.isend(
                    b.as_ptr(),
                    4,
                    owner,
                    tag,
                    world,
                    crate::backend::SendMode::Standard,
                )
            }
        }
        .map_err(crate::backend::err)?;
        let s = eng.wait(r);
        if let Some(e) = s.error {
            let what = if accept {
                "waiting for a connect request failed".to_string()
            } else {
                format!("the connect request to world rank {owner} failed")
            };
            return Err(MpiError::new(crate::backend::class_code(e), what));
        }
        Ok((world, if accept { s.source } else { owner }))
    });
    finish(comm, me, star, swap, CONNECT_TAG, newcomm)
}

mpi_fn! {
    /// `MPI_Comm_accept`: collective over `comm`; the root waits for one connect request
    /// on its open port.
    fn PMPI_Comm_accept / "MPI_Comm_accept" (port_name: *const c_char, info: c_int, root: c_int, comm: c_int, newcomm: *mut c_int) {
        let _ = info;
        rendezvous(port_name, root, comm, newcomm, true)
    }
}

mpi_fn! {
    /// `MPI_Comm_connect`: collective over `comm`; the root asks the port's owner.
    fn PMPI_Comm_connect / "MPI_Comm_connect" (port_name: *const c_char, info: c_int, root: c_int, comm: c_int, newcomm: *mut c_int) {
        let _ = info;
        rendezvous(port_name, root, comm, newcomm, false)
    }
}

mpi_fn! {
    /// `MPI_Comm_join`: both ends of a connected socket, processes of the same job.
    fn PMPI_Comm_join / "MPI_Comm_join" (fd: c_int, intercomm: *mut c_int) {
        if intercomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL intercomm"));
        }
        let (me, world, selfc) = {
            let st = lock();
            st.check_active()?;
            (st.world_rank(), st.comm(MPI_COMM_WORLD)?.coll, st.comm(MPI_COMM_SELF)?.coll)
        };
        let mine = format!("{}:{me}", job_key());
        let theirs = socket_swap(fd, mine.as_bytes())?;
        let theirs = String::from_utf8_lossy(&theirs).into_owned();
        let (job, rank) = theirs.rsplit_once(':').ok_or_else(|| MpiError::new(MPI_ERR_OTHER, format!("MPI_Comm_join: the peer sent {theirs:?}, not a job and rank")))?;
        let rank: i32 = rank.parse().map_err(|_| MpiError::new(MPI_ERR_OTHER, format!("MPI_Comm_join: bad rank from the peer: {theirs:?}")))?;
        if job != job_key() {
            return Err(MpiError::new(MPI_ERR_UNSUPPORTED_OPERATION, format!("MPI_Comm_join: the peer is in job {job}, this is job {} (joining jobs is not supported)", job_key())));
        }
        if rank == me {
            return Err(MpiError::new(MPI_ERR_OTHER, "MPI_Comm_join: both ends of the socket are this process"));
        }
        let star = Star { ctx: selfc, rank: 0, size: 1, leader: 0 };
        finish(MPI_COMM_SELF, me, star, Some(Ok((world, rank))), JOIN_TAG, intercomm)
    }
}

/// Sends `mine` (length-prefixed) on socket `fd` and reads the peer's.
fn socket_swap(fd: c_int, mine: &[u8]) -> MpiResult<Vec<u8>> {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    let err = |e: std::io::Error| {
        MpiError::new(MPI_ERR_OTHER, format!("MPI_Comm_join: socket {fd}: {e}"))
    };
    // SAFETY: the caller's descriptor, borrowed: ManuallyDrop keeps it open.
    let mut s = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let mut msg = (mine.len() as u32).to_le_bytes().to_vec();
    msg.extend_from_slice(mine);
    s.write_all(&msg).map_err(err)?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).map_err(err)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > 4096 {
        return Err(MpiError::new(
            MPI_ERR_OTHER,
            format!("MPI_Comm_join: the peer on socket {fd} is not an oxmpi process"),
        ));
    }
    let mut theirs = vec![0u8; n];
    s.read_exact(&mut theirs).map_err(err)?;
    Ok(theirs)
}

// ---- name service ----

fn names_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("OXMPI_JOB_DIR").map(|d| std::path::PathBuf::from(d).join("names"))
}

/// File name of a service: its bytes in hex (any string is a valid service name).
fn service_file(service: &str) -> String {
    service.bytes().map(|b| format!("{b:02x}")).collect()
}

mpi_fn! {
    /// `MPI_Publish_name`.
    fn PMPI_Publish_name / "MPI_Publish_name" (service_name: *const c_char, info: c_int, port_name: *const c_char) {
        let _ = info;
        let service = read_cstr(service_name, "service_name")?;
        let port = read_cstr(port_name, "port_name")?;
        let taken = || MpiError::new(MPI_ERR_NAME, format!("service {service:?} is already published"));
        let Some(dir) = names_dir() else {
            let mut m = LOCAL_NAMES.lock().unwrap_or_else(|e| e.into_inner());
            if m.contains_key(&service) {
                return Err(taken());
            }
            m.insert(service, port);
            return Ok(());
        };
        let io = |e: std::io::Error| MpiError::new(MPI_ERR_INTERN, format!("publishing {service:?} in {}: {e}", dir.display()));
        std::fs::create_dir_all(&dir).map_err(io)?;
        // Written under a temporary name, then linked into place (fails if it exists).
        let path = dir.join(service_file(&service));
        let tmp = dir.join(format!(".{}.{}", std::process::id(), NEXT_PORT.load(Ordering::Relaxed)));
        std::fs::write(&tmp, port.as_bytes()).map_err(io)?;
        let r = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(taken()),
            Err(e) => Err(io(e)),
        }
    }
}

mpi_fn! {
    /// `MPI_Lookup_name`.
    fn PMPI_Lookup_name / "MPI_Lookup_name" (service_name: *const c_char, info: c_int, port_name: *mut c_char) {
        let _ = info;
        let service = read_cstr(service_name, "service_name")?;
        let found = match names_dir() {
            None => LOCAL_NAMES.lock().unwrap_or_else(|e| e.into_inner()).get(&service).cloned(),
            Some(dir) => std::fs::read_to_string(dir.join(service_file(&service))).ok(),
        };
        let port = found.ok_or_else(|| MpiError::new(MPI_ERR_NAME, format!("service {service:?} is not published")))?;
        copy_cstr(port_name, MPI_MAX_PORT_NAME as usize, &port)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Unpublish_name`.
    fn PMPI_Unpublish_name / "MPI_Unpublish_name" (service_name: *const c_char, info: c_int, port_name: *const c_char) {
        let _ = info;
        let service = read_cstr(service_name, "service_name")?;
        let port = read_cstr(port_name, "port_name")?;
        let missing = || MpiError::new(MPI_ERR_SERVICE, format!("service {service:?} is not published with port {port:?}"));
        match names_dir() {
            None => {
                let mut m = LOCAL_NAMES.lock().unwrap_or_else(|e| e.into_inner());
                if m.get(&service) != Some(&port) {
                    return Err(missing());
                }
                m.remove(&service);
            }
            Some(dir) => {
                let path = dir.join(service_file(&service));
                if std::fs::read_to_string(&path).ok().as_deref() != Some(port.as_str()) {
                    return Err(missing());
                }
                std::fs::remove_file(&path).map_err(|_| missing())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_files_are_hex() {
        assert_eq!(service_file("a/b"), "612f62");
        assert_eq!(service_file(""), "");
    }
}
