//! The C ABI's OS layer: every system call of this crate that is not the engine's
//! (`oxmpi_engine::sys`) goes through here, each `unsafe` with its safety argument.
//! Callers keep their MPI semantics (error classes, fallbacks); these functions only wrap
//! the calls.

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Whether the calling thread is the process's main thread (its thread id is the pid).
pub(crate) fn is_main_thread() -> bool {
    // SAFETY: getpid/gettid have no preconditions.
    unsafe { libc::getpid() == libc::gettid() }
}

/// `atexit(f)`: `f` runs when the process exits normally. Returns whether it was
/// registered.
pub(crate) fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: `f` is a function without arguments that lives as long as the process.
    unsafe { libc::atexit(f) == 0 }
}

/// `fcntl(F_SETLKW)`: sets the POSIX record lock `ty` (`F_RDLCK`, `F_WRLCK` or `F_UNLCK`)
/// on bytes `start..start + len` of `fd`, waiting for it; retried on `EINTR`, other
/// errors are ignored (the caller's access then goes unlocked, as before).
pub(crate) fn set_record_lock(fd: BorrowedFd<'_>, ty: c_int, start: u64, len: u64) {
    // SAFETY: `flock` is a plain C struct; zero is a valid initial value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = ty as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start as libc::off_t;
    fl.l_len = len as libc::off_t;
    loop {
        // SAFETY: F_SETLKW with a valid flock struct on an open descriptor.
        let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETLKW, &fl) };
        if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
}

/// `posix_fallocate(fd, 0, size)`: reserves the first `size` bytes of the file.
pub(crate) fn fallocate(fd: BorrowedFd<'_>, size: i64) -> std::io::Result<()> {
    // SAFETY: posix_fallocate on an open file descriptor.
    let e = unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, size) };
    if e != 0 {
        return Err(std::io::Error::from_raw_os_error(e));
    }
    Ok(())
}

/// `malloc(size)` (one byte for a zero size, so the pointer is unique and freeable);
/// NULL when out of memory.
pub(crate) fn malloc(size: usize) -> *mut c_void {
    // SAFETY: malloc has no preconditions; the size is at least one.
    unsafe { libc::malloc(size.max(1)) }
}

/// `free(p)`.
///
/// # Safety
/// `p` is NULL or was returned by [`malloc`] and not freed since.
pub(crate) unsafe fn free(p: *mut c_void) {
    // SAFETY: the caller's contract: `p` is NULL or a live malloc'd pointer.
    unsafe { libc::free(p) }
}

/// `malloc_usable_size(p)`: the bytes usable at `p`.
///
/// # Safety
/// `p` was returned by [`malloc`] and not freed since.
pub(crate) unsafe fn malloc_usable_size(p: *mut c_void) -> usize {
    // SAFETY: the caller's contract: `p` is a live malloc'd pointer.
    unsafe { libc::malloc_usable_size(p) }
}

/// Nanoseconds of `CLOCK_MONOTONIC` (the clock `std::time::Instant` reads), without the
/// checked arithmetic of `Instant::elapsed` (`MPI_Wtime` is on the path of timed loops).
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// `poll` on `fds` for `POLLIN` until one of them is readable (or has an error or hang-up:
/// the next call on it reports that); retried on `EINTR`.
pub(crate) fn wait_any_readable(fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `p` holds p.len() valid pollfds for the duration of the call.
        let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, -1) };
        if r >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `poll(fd, events)` for up to `timeout`: whether `fd` became ready (`POLLIN`: readable,
/// `POLLOUT`: writable; an error or hang-up counts as ready, the next call reports it);
/// retried on `EINTR` with the time left.
pub(crate) fn wait_ready(
    fd: BorrowedFd<'_>,
    events: libc::c_short,
    timeout: std::time::Duration,
) -> std::io::Result<bool> {
    let end = std::time::Instant::now() + timeout;
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        let ms = c_int::try_from(left.as_millis()).unwrap_or(c_int::MAX);
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
