//! The PMI client's OS layer: its only system calls (adopting the inherited `PMI_FD` socket).
//! The rest of the crate names no `libc` function.

use std::io;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;

/// Why an inherited descriptor cannot be the PMI socket.
#[derive(Debug)]
pub(crate) enum InheritedFdError {
    /// `fstat` failed: the descriptor is not open.
    NotOpen(io::Error),
    /// It is open but not a socket.
    NotASocket,
}

/// Takes ownership of the socket `fd` inherited from the launcher, marked close-on-exec so
/// that it stays out of the programs this process may exec.
///
/// The caller must call this at most once per descriptor, for a descriptor nobody else in
/// the process owns (`PMI_FD` is given to each rank for its exclusive use).
pub(crate) fn adopt_inherited_socket(fd: i32) -> Result<UnixStream, InheritedFdError> {
    // SAFETY: fstat only writes into the zeroed stat buffer we pass; an invalid fd yields -1.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat buffer for the duration of the call.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(InheritedFdError::NotOpen(io::Error::last_os_error()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(InheritedFdError::NotASocket);
    }
    // Keep the PMI socket out of processes this rank may exec.
    // SAFETY: F_SETFD on a descriptor we verified is open; no memory is involved.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: PMI_FD names a socket inherited from the launcher for this process's exclusive
    // use (the launcher gives each rank its own socketpair end); we verified it is an open
    // socket and take ownership of it exactly once (Pmi::init is called once per process).
    Ok(unsafe { UnixStream::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, IntoRawFd};

    #[test]
    fn a_socket_is_adopted_close_on_exec() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let fd = a.into_raw_fd();
        // SAFETY: F_SETFD on a descriptor this test owns; no memory is involved.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }, 0);
        let mut s = adopt_inherited_socket(fd).unwrap();
        // SAFETY: F_GETFD only queries the descriptor, now owned by `s`.
        let flags = unsafe { libc::fcntl(s.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        use std::io::{Read, Write};
        s.write_all(b"x").unwrap();
        let mut got = [0u8; 1];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"x");
    }

    #[test]
    fn a_file_or_a_closed_descriptor_is_refused() {
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(matches!(
            adopt_inherited_socket(f.as_raw_fd()),
            Err(InheritedFdError::NotASocket)
        ));
        match adopt_inherited_socket(1_000_000) {
            Err(InheritedFdError::NotOpen(e)) => assert_eq!(e.raw_os_error(), Some(libc::EBADF)),
            other => panic!("expected NotOpen, got {other:?}"),
        }
    }
}
