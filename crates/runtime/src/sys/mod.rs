//! The runtime's OS layer: every system call of the runtime goes through this module (signal
//! self-pipe, pipes and sockets, poll, reaping, CPU affinity, and fork/exec in [`spawn`]);
//! the rest of the crate names no `libc` function and has no `unsafe`. The C types and
//! constants the other modules need (poll events, signal numbers) are re-exported from here.

pub mod spawn;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

pub use libc::{
    c_int, cpu_set_t, pollfd, rlimit, POLLERR, POLLHUP, POLLIN, POLLOUT, SIGCHLD, SIGKILL, SIGPIPE,
    SIGTERM, SIGUSR1, SIGUSR2,
};

static SIGNAL_PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE_WRITE.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) and errno access are async-signal-safe; `b` lives for the call.
        unsafe {
            let saved = *libc::__errno_location();
            libc::write(fd, (&b as *const u8).cast(), 1);
            *libc::__errno_location() = saved;
        }
    }
}

/// Signals `mpirun` handles: SIGCHLD (reaping), the ones that end the job after being
/// forwarded (INT, TERM, HUP, QUIT) and the ones only forwarded (USR1, USR2).
pub const HANDLED_SIGNALS: [libc::c_int; 7] = [
    libc::SIGCHLD,
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Route the handled signals into a nonblocking pipe; returns its read end.
/// Children get default dispositions back at `exec` (handled signals are reset).
pub fn install_signal_pipe() -> io::Result<OwnedFd> {
    let (r, w) = pipe()?;
    set_nonblocking(r.as_raw_fd())?;
    set_nonblocking(w.as_raw_fd())?;
    // The write end lives for the whole process (the handler may run at any time).
    let wfd = std::mem::ManuallyDrop::new(w).as_raw_fd();
    SIGNAL_PIPE_WRITE.store(wfd, Ordering::Relaxed);
    // SAFETY: sigset operations on a local, initialized set; pthread_sigmask only reads it.
    unsafe {
        // An inherited blocked mask must not hide SIGCHLD or the forwarded signals.
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &sig in &HANDLED_SIGNALS {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    for &sig in &HANDLED_SIGNALS {
        // SAFETY: sigaction with a zeroed struct, an empty mask and a handler that only does
        // async-signal-safe work.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART
                | if sig == libc::SIGCHLD {
                    libc::SA_NOCLDSTOP
                } else {
                    0
                };
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(r)
}

/// Reads every signal waiting in the pipe of [`install_signal_pipe`] (until it is empty) and
/// calls `f` with each signal number, in arrival order.
pub fn read_signals(fd: RawFd, mut f: impl FnMut(c_int)) {
    let mut b = [0u8; 64];
    while let Ok(n) = read_fd(fd, &mut b) {
        if n == 0 {
            break;
        }
        for &s in &b[..n] {
            f(c_int::from(s));
        }
    }
}

/// A close-on-exec pipe `(read, write)`.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both fds are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A close-on-exec `AF_UNIX` stream socketpair.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for the two descriptors socketpair writes.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair succeeded, so both fds are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Set `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a caller-provided fd; failure is reported through the return value.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `read(2)` retrying on EINTR. `Ok(0)` is end of file; `WouldBlock` is passed through.
pub fn read_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for writes of buf.len() bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Write all of `buf` to `fd`, waiting with `poll` if the fd is nonblocking and full.
pub fn write_all_fd(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: buf is valid for reads of buf.len() bytes.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n >= 0 {
            buf = &buf[n as usize..];
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => {
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut p, 1, 1000) };
            }
            _ => return Err(e),
        }
    }
    Ok(())
}

/// `poll(2)` retrying on EINTR is left to the caller (EINTR returns Ok(0)).
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: fds is a valid slice of pollfd.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

/// Send `sig` to the process group `pgid` (errors such as ESRCH are ignored).
pub fn kill_group(pgid: i32, sig: libc::c_int) {
    if pgid > 1 {
        // SAFETY: plain kill(2) on a negative pid (a process group we created).
        unsafe { libc::kill(-pgid, sig) };
    }
}

/// Raise the soft limit of open files to the hard limit (a job needs about three
/// descriptors per local rank). Returns the original limit, to be restored in the ranks.
pub fn raise_nofile_limit() -> Option<libc::rlimit> {
    // SAFETY: getrlimit/setrlimit with valid pointers to a local rlimit.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        let orig = lim;
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return None;
            }
        }
        Some(orig)
    }
}

/// Make sure descriptors 0, 1 and 2 are open (on `/dev/null` if they were closed), so that
/// pipes and sockets created later never take their numbers.
pub fn ensure_std_fds() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries the descriptor.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            let flags = if fd == 0 {
                libc::O_RDONLY
            } else {
                libc::O_WRONLY
            };
            // SAFETY: a NUL-terminated literal path; the new descriptor is the lowest free
            // one, i.e. `fd`, and is intentionally kept open for the process lifetime.
            unsafe { libc::open(c"/dev/null".as_ptr(), flags) };
        }
    }
}

/// 8 random bytes from the kernel (falls back to time and pid).
pub fn random_u64() -> u64 {
    let mut v = [0u8; 8];
    // SAFETY: v is valid for 8 bytes of writes.
    let n = unsafe { libc::getrandom(v.as_mut_ptr().cast(), v.len(), 0) };
    if n == 8 {
        return u64::from_ne_bytes(v);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.as_nanos() as u64 ^ ((std::process::id() as u64) << 32)
}

/// `send(2)` with `MSG_NOSIGNAL` (a closed peer is `EPIPE`, not SIGPIPE): one call, no retry;
/// `Interrupted` and `WouldBlock` are passed to the caller.
pub fn send_nosignal(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for reads of buf.len() bytes; MSG_NOSIGNAL avoids SIGPIPE.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    if n >= 0 {
        Ok(n as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// How a child process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildStatus {
    /// It exited with this status.
    Exited(i32),
    /// A signal ended it.
    Signaled(i32),
}

impl ChildStatus {
    fn from_wait(status: c_int) -> Self {
        if libc::WIFSIGNALED(status) {
            ChildStatus::Signaled(libc::WTERMSIG(status))
        } else {
            ChildStatus::Exited(libc::WEXITSTATUS(status))
        }
    }
}

/// Reaps one exited child, any of them, without blocking: `None` when none has exited (or
/// there is no child).
pub fn try_wait_any() -> Option<(i32, ChildStatus)> {
    let mut status = 0;
    // SAFETY: waitpid with a valid status pointer; WNOHANG never blocks.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    (pid > 0).then(|| (pid, ChildStatus::from_wait(status)))
}

/// Reaps the child `pid` if it has exited, without blocking. True when it is gone: reaped
/// now, or not waitable any more (already reaped, not our child).
pub fn try_reap(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid on one pid with a valid status pointer; WNOHANG never blocks.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    r == pid || r < 0
}

/// Waits for the child `pid` to end and reaps it.
pub fn wait(pid: i32) -> io::Result<ChildStatus> {
    let mut status = 0;
    // SAFETY: waitpid on one pid with a valid status pointer.
    if unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ChildStatus::from_wait(status))
}

/// The CPU set holding `cpus` (numbers from `CPU_SETSIZE` on are left out).
pub fn cpu_set(cpus: &[usize]) -> cpu_set_t {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set; CPU_SET stays in bounds for
    // cpu numbers below CPU_SETSIZE (others are skipped).
    unsafe {
        let mut set: cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        set
    }
}

/// The CPUs of this process's affinity mask (`None` if the kernel does not say).
pub fn affinity() -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set, and sched_getaffinity
    // writes at most size_of::<cpu_set_t>() bytes into it.
    unsafe {
        let mut set: cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<cpu_set_t>(), &mut set) == 0 {
            return Some(
                (0..libc::CPU_SETSIZE as usize)
                    .filter(|&c| libc::CPU_ISSET(c, &set))
                    .collect(),
            );
        }
    }
    None
}

/// Widens this process's affinity mask to every CPU (the kernel keeps it within the
/// cpuset it may use): undoes a binding a launch agent gave the node daemon (srun binds
/// tasks on clusters with task/affinity), which its ranks would otherwise inherit.
pub fn unbind_self() {
    let all: Vec<usize> = (0..libc::CPU_SETSIZE as usize).collect();
    let set = cpu_set(&all);
    // SAFETY: `set` is a valid cpu_set_t of the size passed; failure leaves the mask as it
    // was, which is harmless.
    unsafe {
        libc::sched_setaffinity(0, std::mem::size_of::<cpu_set_t>(), &set);
    }
}

/// Whether this process may execute `path` (`access(X_OK)`; false for a path with a NUL).
pub fn access_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// Whether stdin is a terminal whose foreground process group is not ours.
pub fn in_background_of_terminal() -> bool {
    // SAFETY: isatty, tcgetpgrp and getpgrp only query the state of descriptor 0 / this
    // process.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) != libc::getpgrp() }
}

/// The real user id of this process.
pub fn uid() -> u32 {
    // SAFETY: getuid has no failure mode.
    unsafe { libc::getuid() }
}

/// Conventional description of a signal (as `strsignal` prints it).
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "Hangup",
        libc::SIGINT => "Interrupt",
        libc::SIGQUIT => "Quit",
        libc::SIGILL => "Illegal instruction",
        libc::SIGTRAP => "Trace/breakpoint trap",
        libc::SIGABRT => "Aborted",
        libc::SIGBUS => "Bus error",
        libc::SIGFPE => "Floating point exception",
        libc::SIGKILL => "Killed",
        libc::SIGUSR1 => "User defined signal 1",
        libc::SIGSEGV => "Segmentation fault",
        libc::SIGUSR2 => "User defined signal 2",
        libc::SIGPIPE => "Broken pipe",
        libc::SIGALRM => "Alarm clock",
        libc::SIGTERM => "Terminated",
        libc::SIGXCPU => "CPU time limit exceeded",
        libc::SIGXFSZ => "File size limit exceeded",
        libc::SIGSYS => "Bad system call",
        _ => "Unknown signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipe_roundtrip_and_nonblocking_read() {
        let (r, w) = pipe().unwrap();
        set_nonblocking(r.as_raw_fd()).unwrap();
        let mut buf = [0u8; 8];
        let e = read_fd(r.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        write_all_fd(w.as_raw_fd(), b"abc").unwrap();
        assert_eq!(read_fd(r.as_raw_fd(), &mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"abc");
        drop(w);
        // A test running concurrently may fork between our pipe2 and its exec; its child then
        // holds the write end until exec closes it (close-on-exec), so wait for end of file.
        let mut p = [libc::pollfd {
            fd: r.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        assert_eq!(
            poll(&mut p, 10_000).unwrap(),
            1,
            "no end of file within 10 s"
        );
        assert_eq!(read_fd(r.as_raw_fd(), &mut buf).unwrap(), 0);
    }

    #[test]
    fn read_signals_yields_each_signal_in_order_until_empty() {
        let (r, w) = pipe().unwrap();
        set_nonblocking(r.as_raw_fd()).unwrap();
        write_all_fd(
            w.as_raw_fd(),
            &[SIGCHLD as u8, SIGUSR1 as u8, SIGTERM as u8],
        )
        .unwrap();
        let mut got = Vec::new();
        read_signals(r.as_raw_fd(), |sig| got.push(sig));
        assert_eq!(got, [SIGCHLD, SIGUSR1, SIGTERM]);
        got.clear();
        read_signals(r.as_raw_fd(), |sig| got.push(sig));
        assert!(got.is_empty());
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(9), "Killed");
        assert_eq!(signal_name(11), "Segmentation fault");
    }
}
