//! Fork/exec of one rank without waiting for its `exec` (the launch of N ranks is not
//! serialized on N exec round trips). Everything the child needs is prepared before `fork`;
//! the child only makes async-signal-safe calls. Whether `exec` worked arrives later on a
//! close-on-exec status pipe: end of file means success, four bytes carry the errno.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What to start.
#[derive(Debug)]
pub struct SpawnSpec<'a> {
    /// Absolute path of the executable.
    pub program: &'a Path,
    /// argv (argv\[0\] included).
    pub argv: &'a [String],
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// Working directory (`None`: mpirun's).
    pub cwd: Option<&'a Path>,
    /// Give the child a stdin pipe (otherwise `/dev/null`).
    pub stdin_pipe: bool,
    /// CPU affinity.
    pub cpus: Option<libc::cpu_set_t>,
    /// A descriptor to keep open across exec (the PMI socket).
    pub keep_fd: Option<RawFd>,
    /// Descriptor limit to restore in the child.
    pub nofile: Option<libc::rlimit>,
}

/// A started child.
#[derive(Debug)]
pub struct Spawned {
    /// Process id (also its process group id).
    pub pid: i32,
    /// Write end of its stdin, if requested.
    pub stdin: Option<OwnedFd>,
    /// Read end of its stdout.
    pub stdout: OwnedFd,
    /// Read end of its stderr.
    pub stderr: OwnedFd,
    /// Exec status pipe: EOF once `exec` succeeded, or 4 bytes of errno if it failed.
    pub exec_status: OwnedFd,
}

fn cstr(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte"))
}

fn null_terminated(v: &[CString]) -> Vec<*const libc::c_char> {
    v.iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Decode the exec status pipe contents: `Some(errno)` if exec failed.
pub fn exec_error(bytes: &[u8]) -> Option<io::Error> {
    let b: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    Some(io::Error::from_raw_os_error(i32::from_ne_bytes(b)))
}

/// Fork and exec `spec`. The child is in its own process group, dies with mpirun
/// (`PR_SET_PDEATHSIG`), has default signal dispositions and an empty signal mask.
pub fn spawn(spec: &SpawnSpec<'_>) -> io::Result<Spawned> {
    let program = cstr(spec.program.as_os_str().as_bytes())?;
    let argv: Vec<CString> = spec
        .argv
        .iter()
        .map(|a| cstr(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    // Fallback as execvp does for a script without `#!`: run it with /bin/sh.
    let sh = cstr(b"/bin/sh")?;
    let mut sh_argv = vec![cstr(b"sh")?, program.clone()];
    sh_argv.extend(argv.iter().skip(1).cloned());
    let env: Vec<CString> = spec
        .env
        .iter()
        .map(|(k, v)| {
            let mut b = k.as_bytes().to_vec();
            b.push(b'=');
            b.extend_from_slice(v.as_bytes());
            cstr(&b)
        })
        .collect::<io::Result<_>>()?;
    let cwd = spec
        .cwd
        .map(|c| cstr(c.as_os_str().as_bytes()))
        .transpose()?;
    let argv_p = null_terminated(&argv);
    let sh_argv_p = null_terminated(&sh_argv);
    let env_p = null_terminated(&env);

    let (out_r, out_w) = super::pipe()?;
    let (err_r, err_w) = super::pipe()?;
    let (stat_r, stat_w) = super::pipe()?;
    let (in_r, in_w) = if spec.stdin_pipe {
        let (r, w) = super::pipe()?;
        (r, Some(w))
    } else {
        // SAFETY: a NUL-terminated literal path; the result is checked below.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just opened and is owned by nobody else.
        (unsafe { OwnedFd::from_raw_fd(fd) }, None)
    };
    let parent = std::process::id() as libc::pid_t;
    let (fd_in, fd_out, fd_err, fd_stat) = (
        in_r.as_raw_fd(),
        out_w.as_raw_fd(),
        err_w.as_raw_fd(),
        stat_w.as_raw_fd(),
    );

    // SAFETY: fork in a process whose other threads (if any) hold no locks the child needs:
    // the child only calls async-signal-safe functions on memory prepared above, then execs
    // or `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: child side; see above. All pointers stay valid (copy of the parent's memory).
        unsafe {
            let fail = |fd: RawFd| -> ! {
                let e = *libc::__errno_location();
                let b = e.to_ne_bytes();
                libc::write(fd, b.as_ptr().cast(), 4);
                libc::_exit(127)
            };
            // A process group of its own (mpirun signals it), but mpirun's session: with the
            // kernel's autogroup scheduling a session is a scheduling group, and a rank alone
            // in its group no longer hands its CPU to a rank of another group when it yields
            // (oversubscribed np=4: 5x slower collectives with `setsid`, reverted).
            libc::setpgid(0, 0);
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                fail(fd_stat);
            }
            if libc::getppid() != parent {
                libc::_exit(127);
            }
            // Default dispositions (mpirun handles or ignores several) and an empty mask.
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            if let Some(set) = &spec.cpus {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                    fail(fd_stat);
                }
            }
            if let Some(lim) = &spec.nofile {
                libc::setrlimit(libc::RLIMIT_NOFILE, lim);
            }
            if libc::dup2(fd_in, 0) < 0 || libc::dup2(fd_out, 1) < 0 || libc::dup2(fd_err, 2) < 0 {
                fail(fd_stat);
            }
            if let Some(fd) = spec.keep_fd {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    fail(fd_stat);
                }
            }
            if let Some(c) = &cwd {
                if libc::chdir(c.as_ptr()) != 0 {
                    fail(fd_stat);
                }
            }
            libc::execve(program.as_ptr(), argv_p.as_ptr(), env_p.as_ptr());
            if *libc::__errno_location() == libc::ENOEXEC {
                libc::execve(sh.as_ptr(), sh_argv_p.as_ptr(), env_p.as_ptr());
            }
            fail(fd_stat);
        }
    }
    drop((in_r, out_w, err_w, stat_w));
    Ok(Spawned {
        pid,
        stdin: in_w,
        stdout: out_r,
        stderr: err_r,
        exec_status: stat_r,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{wait, ChildStatus};

    fn read_all(fd: &OwnedFd) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            match crate::sys::read_fd(fd.as_raw_fd(), &mut buf) {
                Ok(0) | Err(_) => return out,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Spawns `sh -c script` with environment `env` in `cwd`; its exec succeeded.
    fn sh(script: &str, env: Vec<(OsString, OsString)>, cwd: Option<&Path>) -> Spawned {
        let argv = ["sh".to_string(), "-c".into(), script.into()];
        let s = spawn(&SpawnSpec {
            program: Path::new("/bin/sh"),
            argv: &argv,
            env,
            cwd,
            stdin_pipe: false,
            cpus: None,
            keep_fd: None,
            nofile: None,
        })
        .unwrap();
        assert!(read_all(&s.exec_status).is_empty());
        s
    }

    #[test]
    fn runs_with_given_env_cwd_and_pipes() {
        let s = sh(
            "echo $FOO; pwd; echo e >&2",
            vec![("FOO".into(), "bar".into())],
            Some(Path::new("/")),
        );
        assert!(read_all(&s.exec_status).is_empty());
        assert_eq!(read_all(&s.stdout), b"bar\n/\n");
        assert_eq!(read_all(&s.stderr), b"e\n");
        assert_eq!(wait(s.pid).unwrap(), ChildStatus::Exited(0));
    }

    /// The child leads a process group of its own (which mpirun signals) but stays in our
    /// session, hence in our scheduling autogroup: see the comment at `setpgid`.
    #[test]
    fn the_child_leads_its_own_process_group_in_our_session() {
        let s = sh("cut -d' ' -f5,6 /proc/$$/stat", Vec::new(), None);
        let out = String::from_utf8(read_all(&s.stdout)).unwrap();
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let ours = stat.rsplit(')').next().unwrap().split(' ').nth(4).unwrap();
        assert_eq!(
            out.trim(),
            format!("{} {ours}", s.pid),
            "pgid and sid of {}",
            s.pid
        );
        assert_eq!(wait(s.pid).unwrap(), ChildStatus::Exited(0));
    }

    #[test]
    fn exec_failure_is_reported_on_the_status_pipe() {
        let argv = ["x".to_string()];
        let s = spawn(&SpawnSpec {
            program: Path::new("/nonexistent/oxmpi-x"),
            argv: &argv,
            env: Vec::new(),
            cwd: None,
            stdin_pipe: true,
            cpus: None,
            keep_fd: None,
            nofile: None,
        })
        .unwrap();
        let e = exec_error(&read_all(&s.exec_status)).expect("an errno");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(wait(s.pid).unwrap(), ChildStatus::Exited(127));
    }
}
