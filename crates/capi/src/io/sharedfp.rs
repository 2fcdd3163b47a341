//! The shared file pointer: an `AtomicI64` in a shared memory file mapped by every rank
//! of the file's group (local memory for a file opened by one process).

use super::collective::{allgather_i64, bcast};
use crate::consts::*;
use crate::ffi::{MpiError, MpiResult};
use oxmpi_engine::sys::Mapping;
use std::ffi::c_int;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};

/// The counter behind the shared file pointer.
pub(super) enum SharedPtr {
    /// A file opened by a single process.
    Local(AtomicI64),
    /// A counter in shared memory (8 bytes), mapped by every rank of the file's group.
    Mapped(Mapping),
}

impl SharedPtr {
    pub(super) fn get(&self) -> &AtomicI64 {
        match self {
            SharedPtr::Local(a) => a,
            // SAFETY: the mapping is page aligned, at least 8 bytes long and lives as long
            // as `self`; the counter is only accessed through atomics.
            SharedPtr::Mapped(m) => unsafe { &*m.ptr().cast::<AtomicI64>() },
        }
    }
}

/// Where rank 0 creates the shared pointer's counter file.
fn shm_dir() -> PathBuf {
    let d = PathBuf::from("/dev/shm");
    if d.is_dir() {
        d
    } else {
        std::env::temp_dir()
    }
}

/// Collectively create the shared file pointer of a file opened by `size` ranks.
pub(super) fn shared_ptr(comm: c_int, rank: i32, size: usize, init: i64) -> MpiResult<SharedPtr> {
    if size == 1 {
        return Ok(SharedPtr::Local(AtomicI64::new(init)));
    }
    // Rank 0 creates the counter file and broadcasts its name (empty on failure).
    let mut name = [0u8; 512];
    let mut created: Option<(File, PathBuf)> = None;
    let mut why = String::new();
    if rank == 0 {
        static SEQ: AtomicI64 = AtomicI64::new(0);
        let path = shm_dir().join(format!(
            "oxmpi-shfp-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let made = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|f| f.set_len(8).map(|()| f));
        match made {
            Ok(f) => {
                let b = path.as_os_str().as_bytes();
                if b.len() < name.len() {
                    name[..b.len()].copy_from_slice(b);
                    created = Some((f, path));
                } else {
                    let _ = std::fs::remove_file(&path);
                    why = "counter path too long".into();
                }
            }
            Err(e) => why = format!("{}: {e}", path.display()),
        }
    }
    bcast(&mut name, 0, comm)?;
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    if len == 0 {
        mpi_bail!(
            MPI_ERR_IO,
            "cannot create the shared file pointer counter{}{why}",
            if why.is_empty() { "" } else { ": " }
        );
    }
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(&name[..len]));
    let mapped = match &created {
        Some((f, _)) => Mapping::map(f, 8),
        None => std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .and_then(|f| Mapping::map(&f, 8)),
    };
    let ptr = mapped.map(SharedPtr::Mapped);
    if let (0, Ok(p)) = (rank, &ptr) {
        p.get().store(init, Ordering::SeqCst);
    }
    // Everyone has mapped (or failed) before rank 0 removes the name; the allgather also
    // orders rank 0's initial value before any use.
    let all = allgather_i64(ptr.is_ok() as i64, comm)?;
    if let Some((_, p)) = &created {
        let _ = std::fs::remove_file(p);
    }
    let ptr = ptr.map_err(|e| {
        MpiError::new(
            MPI_ERR_IO,
            format!("cannot map the shared file pointer {}: {e}", path.display()),
        )
    })?;
    if all.iter().any(|&v| v != 1) {
        mpi_bail!(MPI_ERR_IO, "a rank could not map the shared file pointer");
    }
    Ok(ptr)
}
