//! All system calls of the engine go through this module: shared memory (memfd, mappings,
//! peers' file descriptors), processes (pidfds, liveness, CMA copies, ptrace permission),
//! scheduling, and the sockets of the `tcp` transport (non-blocking send/receive, polls).

use std::ffi::c_void;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::MemfdFlags;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::net::{RecvFlags, SendFlags};
use rustix::process::{Pid, PidfdFlags};

/// A shared read-write memory mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; concurrent access is coordinated by the ring
// protocol (atomics), and the owner only unmaps it on drop.
unsafe impl Send for Mapping {}
// SAFETY: see `Send`; the handle itself only exposes a raw pointer.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared and read-write.
    pub fn map(fd: impl AsFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping at a kernel-chosen address: it cannot alias any Rust object.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Mapping { ptr, len })
    }

    /// Start of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Faults in now, writable and without changing their contents, the pages that hold
    /// bytes `off..off + len` of the mapping (`MADV_POPULATE_WRITE`, Linux 5.14): a memory
    /// file's pages are allocated and this process's page tables filled, so that the first
    /// store or load to each of them later takes no page fault. The range is widened to
    /// whole pages and clipped to the mapping. Safe while other processes use the same
    /// pages: nothing is written. Fails on older kernels (`EINVAL`), which callers may ignore.
    pub fn populate(&self, off: usize, len: usize) -> io::Result<()> {
        let off = off.min(self.len);
        let len = len.min(self.len - off);
        // SAFETY: `off..off + len` lies within this mapping (clipped to its length).
        unsafe { populate_pages(self.ptr.as_ptr().add(off), len) }
    }
}

/// Faults in now, writable and without changing their contents, the pages that hold the
/// bytes `ptr..ptr + len` (`MADV_POPULATE_WRITE`, Linux 5.14; see [`Mapping::populate`]).
/// Fails on older kernels (`EINVAL`), which callers may ignore.
///
/// # Safety
/// `ptr..ptr + len` must lie within one mapping of this process that is readable and
/// writable (then so are the whole pages holding it: the kernel maps whole pages).
pub unsafe fn populate_pages(ptr: *const u8, len: usize) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let page = page_size();
    let (lo, hi) = (ptr as usize, ptr as usize + len);
    let start = lo / page * page;
    let end = hi.next_multiple_of(page);
    // SAFETY: `start..end` are the whole pages holding `ptr..ptr + len`, which the caller
    // guarantees lie in one read-write mapping; populating changes no byte, so no Rust object
    // or peer sees a difference.
    unsafe {
        rustix::mm::madvise(
            ptr.wrapping_sub(lo - start).cast_mut().cast::<c_void>(),
            end - start,
            rustix::mm::Advice::LinuxPopulateWrite,
        )?;
    }
    Ok(())
}

/// Which of the pages holding `ptr..ptr + len` are resident (`mincore`: for a memory
/// file, allocated by any of its mappings), one flag per page (tests of ring warming).
///
/// # Safety
/// `ptr..ptr + len` must lie within one mapping of this process.
#[cfg(test)]
pub unsafe fn resident_pages(ptr: *const u8, len: usize) -> io::Result<Vec<bool>> {
    let page = page_size();
    let (lo, hi) = (ptr as usize, ptr as usize + len);
    let start = lo / page * page;
    let end = hi.next_multiple_of(page);
    let mut v = vec![0u8; (end - start) / page];
    // SAFETY: `start..end` are the whole pages holding `ptr..ptr + len`, inside one mapping
    // (the caller's contract); `v` has one byte per page, as `mincore` writes.
    let r = unsafe {
        libc::mincore(
            ptr.wrapping_sub(lo - start).cast_mut().cast::<c_void>(),
            end - start,
            v.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v.iter().map(|&b| b & 1 != 0).collect())
}

/// Bytes of a memory page (4096 if the system does not say).
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Minor page faults taken so far by the calling thread (`getrusage(RUSAGE_THREAD)`), for
/// tests that a path takes none.
#[cfg(test)]
pub fn thread_minor_faults() -> u64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `u` is a writable rusage the call fills; RUSAGE_THREAD names the caller.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, u.as_mut_ptr()) };
    assert_eq!(r, 0, "getrusage: {}", io::Error::last_os_error());
    // SAFETY: zero-initialised and filled by a successful getrusage.
    unsafe { u.assume_init() }.ru_minflt as u64
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping created by `Mapping::map` that nobody uses after
        // the owner drops it.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast::<c_void>(), self.len) };
    }
}

/// Creates an anonymous memory file of `len` bytes (close-on-exec).
pub fn memfd(name: &str, len: usize) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC)?;
    rustix::fs::ftruncate(&fd, len as u64)?;
    Ok(fd)
}

/// Opens another process's file descriptor through `/proc/<pid>/fd/<fd>`.
pub fn open_peer_fd(pid: i32, fd: i32) -> io::Result<std::fs::File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/fd/{fd}"))
}

/// Raw number of an fd (to publish it).
pub fn raw_fd(fd: &impl AsRawFd) -> i32 {
    fd.as_raw_fd()
}

/// Our process id.
pub fn getpid() -> i32 {
    rustix::process::getpid().as_raw_nonzero().get()
}

/// Opens a pidfd for `pid`.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    let pid = Pid::from_raw(pid).ok_or_else(|| io::Error::other("invalid pid"))?;
    Ok(rustix::process::pidfd_open(pid, PidfdFlags::empty())?)
}

/// `true` if the process behind `pidfd` has exited (the pidfd is readable).
pub fn pidfd_exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
}

/// Whether a process exists (fallback when pidfds are unavailable; zombies count as alive).
pub fn pid_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Direction of a cross-memory-attach copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cma {
    /// From the remote process into `local` (`process_vm_readv`).
    Read,
    /// From `local` into the remote process (`process_vm_writev`).
    Write,
}

/// Copies `len` bytes between `local` and address `remote` of process `pid` (CMA), in
/// direction `dir`, looping over short transfers. A remote range that is not mapped fails
/// with `EFAULT`, a refusal by the kernel with `EPERM` (Yama, seccomp) or `ENOSYS`.
///
/// # Safety
/// `local` must be valid for `len` bytes: writable for [`Cma::Read`], readable for
/// [`Cma::Write`]; for a write, the caller must own the right to change `remote` in `pid`
/// (the peer handed out that address for this purpose).
pub unsafe fn cma_copy(
    pid: i32,
    local: *mut u8,
    remote: u64,
    len: usize,
    dir: Cma,
) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        let l = libc::iovec {
            // SAFETY: done < len, inside the caller's buffer.
            iov_base: unsafe { local.add(done) }.cast::<c_void>(),
            iov_len: len - done,
        };
        let r = libc::iovec {
            iov_base: (remote + done as u64) as usize as *mut c_void,
            iov_len: len - done,
        };
        // SAFETY: the caller guarantees `local`; the remote side is checked by the kernel.
        let n = unsafe {
            match dir {
                Cma::Read => libc::process_vm_readv(pid, &l, 1, &r, 1, 0),
                Cma::Write => libc::process_vm_writev(pid, &l, 1, &r, 1, 0),
            }
        };
        match n {
            n if n < 0 => return Err(io::Error::last_os_error()),
            // Nothing copied of a non-empty range: the remote address is not mapped.
            0 => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
            n => done += n as usize,
        }
    }
    Ok(())
}

/// Allows any process of ours to ptrace-read us (CMA under Yama `ptrace_scope=1`).
pub fn allow_ptracer_any() {
    // SAFETY: prctl(PR_SET_PTRACER) only changes a per-process attribute; failure (no Yama)
    // is harmless and ignored.
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
    }
}

/// Yields the CPU.
pub fn yield_now() {
    rustix::thread::sched_yield();
}

/// Sleeps while `word` holds `seen`, at most `timeout` (a futex wait on a word that other
/// processes map too, so not a process-private futex). Returns at once when the word no
/// longer holds `seen`; also early on a wake, a signal, or spuriously: the caller checks
/// what it waits for again.
pub fn futex_wait_shared(
    word: &std::sync::atomic::AtomicU32,
    seen: u32,
    timeout: std::time::Duration,
) {
    use rustix::thread::futex;
    let t = futex::Timespec {
        tv_sec: timeout.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: timeout.subsec_nanos().into(),
    };
    // Errors (the word changed, timeout, interrupted) all mean "look again".
    let _ = futex::wait(word, futex::Flags::empty(), seen, Some(&t));
}

/// Wakes every thread of any process sleeping in [`futex_wait_shared`] on `word`.
pub fn futex_wake_shared(word: &std::sync::atomic::AtomicU32) {
    let _ =
        rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), i32::MAX as u32);
}

/// Host name (for same-node checks, `MPI_Get_processor_name`): the one the output framework
/// reads once with `gethostname(2)` and prints in every line's prefix (`localhost` if the
/// call fails), so the library asks the kernel in one place.
pub fn hostname() -> String {
    oxmpi_base::output::hostname().to_string()
}

/// The one CPU the calling thread may run on, when its affinity mask allows exactly one (a
/// rank bound or pinned to a CPU; threads it starts inherit the mask), else `None`.
pub fn single_cpu() -> Option<u32> {
    // A `cpu_set_t` (1024 bits) as words, read without the libc CPU_* macros.
    const _: () = assert!(std::mem::size_of::<libc::cpu_set_t>() == 128);
    let mut set = [0u64; 16];
    // SAFETY: `set` is writable and as large as the size passed (the size of a
    // `cpu_set_t`); pid 0 is the calling thread.
    let r = unsafe {
        libc::sched_getaffinity(
            0,
            std::mem::size_of_val(&set),
            set.as_mut_ptr().cast::<libc::cpu_set_t>(),
        )
    };
    if r != 0 || set.iter().map(|w| w.count_ones()).sum::<u32>() != 1 {
        return None;
    }
    let (i, w) = set.iter().enumerate().find(|(_, w)| **w != 0)?;
    Some(i as u32 * 64 + w.trailing_zeros())
}

/// Number of online CPUs of the node (not the affinity mask: bound ranks see one CPU).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// Sends what the socket takes now of `buf` without blocking (`MSG_DONTWAIT`), and without
/// `SIGPIPE` when the peer closed (`MSG_NOSIGNAL`: `EPIPE` instead). Returns the bytes sent;
/// a full socket is [`io::ErrorKind::WouldBlock`].
#[inline]
pub(crate) fn send_nonblocking(sock: impl AsFd, buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::net::send(
        sock,
        buf,
        SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
    )?)
}

/// Receives what is there into `buf` without blocking (`MSG_DONTWAIT`): `Ok(0)` at the end
/// of the stream, [`io::ErrorKind::WouldBlock`] if nothing is there.
#[inline]
pub(crate) fn recv_nonblocking(sock: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    Ok(rustix::net::recv(sock, buf, RecvFlags::DONTWAIT)?.0)
}

/// Whether a non-blocking read of `sock` would not block now: data, end of stream or an
/// error is there (one byte peeked with `MSG_PEEK`, left in the socket).
#[inline]
pub(crate) fn socket_readable(sock: impl AsFd) -> bool {
    let mut b = [0u8; 1];
    match rustix::net::recv(sock, &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Ok(_) => true,
        Err(e) => io::Error::from(e).kind() != io::ErrorKind::WouldBlock,
    }
}

/// Waits up to `timeout` until one of `fds` is readable (or has an error or hang-up);
/// returns which ones are (all `false` on timeout). An interrupted wait is
/// [`io::ErrorKind::Interrupted`].
pub(crate) fn poll_readable(
    fds: &[std::os::fd::BorrowedFd<'_>],
    timeout: std::time::Duration,
) -> io::Result<Vec<bool>> {
    let mut set: Vec<PollFd<'_>> = fds.iter().map(|f| PollFd::new(f, PollFlags::IN)).collect();
    let t = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    rustix::event::poll(&mut set, Some(&t))?;
    Ok(set.iter().map(|p| !p.revents().is_empty()).collect())
}

/// The calling thread's doorbell: an eventfd (non-blocking, close-on-exec) made at the
/// thread's first use and closed when it ends. Another thread [`ring`]s it to end the
/// thread's [`sleep_on`].
pub(crate) fn bell() -> io::Result<RawFd> {
    thread_local! {
        static BELL: std::cell::OnceCell<OwnedFd> = const { std::cell::OnceCell::new() };
    }
    BELL.with(|b| {
        if let Some(fd) = b.get() {
            return Ok(fd.as_raw_fd());
        }
        let fd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        Ok(b.get_or_init(|| fd).as_raw_fd())
    })
}

/// Rings the doorbell `fd` of a sleeping thread (a [`bell`]); best effort: a full counter
/// is rung already.
pub(crate) fn ring(fd: RawFd) {
    // SAFETY: `fd` is the bell of a thread registered as a sleeper with the engine; it
    // stays open until that thread has unregistered (under the same lock as this call).
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    let _ = rustix::io::write(b, &1u64.to_ne_bytes());
}

/// Sleeps up to `timeout` until one of `fds` is readable (or writable, where its flag
/// says so), has an error or hang-up, or the calling thread's doorbell `bell` rings; then
/// clears the doorbell. Returns whether something stirred (false: the whole `timeout`
/// passed); an interrupted sleep just returns, as stirred.
pub(crate) fn sleep_on(
    fds: &[(RawFd, bool)],
    bell: RawFd,
    timeout: std::time::Duration,
) -> io::Result<bool> {
    // SAFETY: the descriptors belong to the engine's links; a link closed while we sleep
    // (its peer declared dead) rings our bell under the engine lock after we registered,
    // so a stale number is never waited on for long (and `poll` reports a closed one as
    // `POLLNVAL` at once). `bell` is this thread's own eventfd.
    let borrow = |fd: RawFd| unsafe { BorrowedFd::borrow_raw(fd) };
    let mut set: Vec<PollFd<'_>> = fds
        .iter()
        .map(|&(fd, w)| {
            let ev = if w {
                PollFlags::IN | PollFlags::OUT
            } else {
                PollFlags::IN
            };
            PollFd::from_borrowed_fd(borrow(fd), ev)
        })
        .collect();
    let b = borrow(bell);
    set.push(PollFd::from_borrowed_fd(b, PollFlags::IN));
    let t = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let stirred = match rustix::event::poll(&mut set, Some(&t)) {
        Ok(n) => n > 0,
        Err(rustix::io::Errno::INTR) => true,
        Err(e) => return Err(e.into()),
    };
    drop(set);
    let mut v = [0u8; 8];
    let _ = rustix::io::read(b, &mut v);
    Ok(stirred)
}

/// A shared library opened with `dlopen` (`RTLD_NOW | RTLD_LOCAL`), never closed: the
/// `ofi` transport loads libfabric at run time so that the MPI library does not link it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DynLib(NonNull<c_void>);

// SAFETY: a dlopen handle is a process-wide token; dlsym is thread-safe.
unsafe impl Send for DynLib {}
// SAFETY: see `Send`.
unsafe impl Sync for DynLib {}

/// The last `dlerror` message (or `what` if there is none).
fn dl_error(what: &str) -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return what.to_string();
    }
    // SAFETY: non-NULL, NUL-terminated (see above).
    unsafe { std::ffi::CStr::from_ptr(e) }
        .to_string_lossy()
        .into_owned()
}

impl DynLib {
    /// Opens the shared library `name` (searched like the dynamic linker does); the
    /// loader's message if it cannot.
    pub(crate) fn open(name: &str) -> Result<DynLib, String> {
        let c = std::ffi::CString::new(name).map_err(|_| format!("bad library name {name:?}"))?;
        // SAFETY: c is NUL-terminated; dlopen runs the library's constructors, which
        // libfabric keeps side-effect free (providers initialise in fi_getinfo).
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        NonNull::new(h)
            .map(DynLib)
            .ok_or_else(|| dl_error(&format!("cannot open {name}")))
    }

    /// The address of symbol `name`, or the loader's message.
    pub(crate) fn symbol(&self, name: &str) -> Result<NonNull<c_void>, String> {
        let c = std::ffi::CString::new(name).map_err(|_| format!("bad symbol name {name:?}"))?;
        // SAFETY: the handle is open (never closed) and c is NUL-terminated.
        let p = unsafe { libc::dlsym(self.0.as_ptr(), c.as_ptr()) };
        NonNull::new(p).ok_or_else(|| dl_error(&format!("no symbol {name}")))
    }
}

/// Under fault tolerance: MPICH's Hydra (`mpiexec -disable-auto-cleanup`) sends SIGUSR1 to
/// every process of the job when one fails (MPICH then reads the dead from its PMI
/// store), and by default that signal ends the process. Our engine notices failures
/// itself, so the signal gets a handler that does nothing, unless the application
/// installed its own first.
pub(crate) fn tolerate_failure_signal() {
    extern "C" fn ignore(_: libc::c_int) {}
    // SAFETY: `sigaction` reads and writes the structures passed (zeroed, then filled);
    // the handler is async-signal-safe (it does nothing).
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut old) != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            return;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod single_cpu_tests {
    use super::single_cpu;

    /// Set the calling thread's affinity to `cpus` (their indices below 64).
    fn pin(cpus: &[u32]) {
        let mut set = [0u64; 16];
        for &c in cpus {
            set[0] |= 1 << c;
        }
        // SAFETY: `set` is a readable `cpu_set_t`-sized mask; pid 0 is the calling thread.
        let r = unsafe {
            libc::sched_setaffinity(
                0,
                std::mem::size_of_val(&set),
                set.as_ptr().cast::<libc::cpu_set_t>(),
            )
        };
        assert_eq!(
            r,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }

    #[test]
    fn a_thread_pinned_to_one_cpu_is_told_that_cpu_and_one_with_more_is_not() {
        std::thread::spawn(|| {
            // SAFETY: sched_getcpu has no preconditions.
            let here = u32::try_from(unsafe { libc::sched_getcpu() }).expect("a CPU");
            assert!(here < 64, "test assumes CPU numbers below 64");
            pin(&[here]);
            assert_eq!(single_cpu(), Some(here));
            if super::online_cpus() > 1 {
                let other = if here == 0 { 1 } else { 0 };
                pin(&[here, other]);
                assert_eq!(single_cpu(), None);
            }
        })
        .join()
        .expect("pinned thread");
    }
}
