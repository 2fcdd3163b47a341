//! Running child commands with a timeout, captured output and wall time.
//!
//! Every command runs in its own process group, which is killed (SIGKILL)
//! after the command ends or times out, so that a hung or leaky MPI launch
//! leaves nothing behind. On a timeout the group first gets SIGTERM and
//! [`TERM_GRACE`] to exit: a launcher (Open MPI's `mpirun`) then removes its
//! ranks' shared-memory files, which a SIGKILL of the whole group leaves in
//! /dev/shm.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Errors of the runner.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What a finished (or timed out) command did.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status; `None` if the command was killed on timeout.
    pub status: Option<ExitStatus>,
    /// Captured standard output.
    pub stdout: String,
    /// Captured standard error.
    pub stderr: String,
    /// Wall time from spawn to exit.
    pub wall: Duration,
    /// Killed because it printed nothing for the idle timeout (a hang),
    /// rather than for exceeding its total timeout.
    pub idle: bool,
}

impl Outcome {
    /// True if the command exited with status 0 before the timeout.
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// A one-line description of a failure, with the tail of stderr.
    pub fn failure(&self) -> String {
        let why = match self.status {
            None if self.idle => format!(
                "timed out (no output) after {:.0} s",
                self.wall.as_secs_f64()
            ),
            None => format!("timed out after {:.0} s", self.wall.as_secs_f64()),
            Some(s) => format!("exited with {s}"),
        };
        // First lines (an MPI error message) and last lines (a traceback's cause).
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .chain(self.stdout.lines())
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let mut tail: Vec<&str> = lines.iter().take(2).copied().collect();
        for l in lines.iter().skip(2).rev().take(2).rev() {
            if !tail.contains(l) {
                tail.push(l);
            }
        }
        if tail.is_empty() {
            return why;
        }
        format!("{why}: {}", tail.join(" | "))
    }
}

/// `flock(fd, LOCK_EX)`: waits for an exclusive lock on `f` (the lock `flock(1)` takes),
/// held until `f` is closed; retried on `EINTR`.
pub fn flock_exclusive(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock(2) on a descriptor `f` keeps open for the call; no memory is passed.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// How long a timed-out command's group has between SIGTERM and SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(3);

/// How long the output of an ended or killed command is still collected.
const COLLECT_GRACE: Duration = Duration::from_secs(5);

fn kill_group(pgid: u32) {
    signal_group(pgid, libc::SIGKILL);
}

fn signal_group(pgid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals the process group we created
    // for this child (process_group(0) makes its pid the group id); it has no
    // memory-safety preconditions. ESRCH (group already gone) is ignored.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), sig);
    }
}

/// What the helper threads report to [`run_idle`].
enum Event {
    /// A chunk of standard output (`true`) or standard error (`false`).
    Data(bool, Vec<u8>),
    /// One of the two streams reached end of file.
    Eof,
    /// The child exited.
    Exit(Option<ExitStatus>, Duration),
}

fn reader<R: Read + Send + 'static>(mut r: R, out: bool, tx: mpsc::Sender<Event>) {
    thread::spawn(move || {
        let mut buf = vec![0u8; 16384];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(Event::Data(out, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Event::Eof);
    });
}

/// Run `cmd` (stdin closed, output captured) for at most `timeout`.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Outcome, RunError> {
    run_idle(cmd, timeout, None)
}

/// Run `cmd` (stdin closed, output captured) for at most `timeout`, and kill
/// it early if it prints nothing (on either stream) for `idle`: a program
/// that reports each measurement as it ends thus gets a per-measurement
/// timeout. The whole process group is killed at the end either way.
pub fn run_idle(
    cmd: &mut Command,
    timeout: Duration,
    idle: Option<Duration>,
) -> Result<Outcome, RunError> {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    })?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    reader(
        child.stdout.take().expect("stdout is piped"),
        true,
        tx.clone(),
    );
    reader(
        child.stderr.take().expect("stderr is piped"),
        false,
        tx.clone(),
    );
    thread::spawn(move || {
        let st = child.wait();
        let _ = tx.send(Event::Exit(st.ok(), start.elapsed()));
    });
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut last_output = Instant::now();
    let mut exited: Option<(Option<ExitStatus>, Duration)> = None;
    let mut killed_idle = false;
    let mut eofs = 0;
    let mut grace_until: Option<Instant> = None;
    // timed out and sent SIGTERM: SIGKILL when `grace_until` passes without an exit
    let mut termed = false;
    loop {
        let now = Instant::now();
        let limit = match grace_until {
            // after exit or kill: collect what is left of the output
            Some(g) => g,
            None => {
                let total = start + timeout;
                match idle {
                    Some(i) => total.min(last_output + i),
                    None => total,
                }
            }
        };
        let ev = rx.recv_timeout(limit.saturating_duration_since(now));
        match ev {
            Ok(Event::Data(out, d)) => {
                if out { &mut stdout } else { &mut stderr }.extend_from_slice(&d);
                last_output = Instant::now();
            }
            Ok(Event::Eof) => eofs += 1,
            Ok(Event::Exit(st, wall)) => {
                // (after a kill on timeout, the status stays "timed out")
                exited.get_or_insert((st, wall));
                // clean up anything the command left behind in its group
                kill_group(pid);
                // (an exit inside the SIGTERM grace ends that grace: no SIGKILL wait)
                if std::mem::take(&mut termed) || grace_until.is_none() {
                    grace_until = Some(Instant::now() + COLLECT_GRACE);
                }
            }
            Err(_) if grace_until.is_none() => {
                killed_idle = Instant::now() < start + timeout;
                signal_group(pid, libc::SIGTERM);
                termed = true;
                grace_until = Some(Instant::now() + TERM_GRACE);
                exited = Some((None, start.elapsed()));
            }
            Err(_) if termed => {
                // the grace after SIGTERM passed: kill, then collect the output
                termed = false;
                kill_group(pid);
                grace_until = Some(Instant::now() + COLLECT_GRACE);
            }
            Err(_) => break,
        }
        if eofs == 2 && exited.is_some() {
            break;
        }
    }
    if termed {
        // the output ended during the grace: whatever ignored SIGTERM goes now
        kill_group(pid);
    }
    let (status, wall) = exited.unwrap_or((None, start.elapsed()));
    let killed = status.is_none();
    Ok(Outcome {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        wall,
        idle: killed && killed_idle,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_status() {
        let o = run(
            Command::new("sh").args([
                "-c",
                "echo out; echo err >&2; echo a; echo b; echo cause; exit 3",
            ]),
            Duration::from_secs(20),
        )
        .unwrap();
        assert_eq!(o.stdout, "out\na\nb\ncause\n");
        assert_eq!(o.stderr, "err\n");
        assert_eq!(o.status.and_then(|s| s.code()), Some(3));
        assert!(!o.ok());
        let f = o.failure();
        assert!(
            f.contains("err") && f.contains("cause") && !f.contains("a |"),
            "{f}"
        );
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        // The shell starts a background sleeper that also holds the pipes;
        // both must be killed, and run() must return.
        let o = run(
            Command::new("sh").args(["-c", "sleep 30 & sleep 30; echo never"]),
            Duration::from_millis(200),
        )
        .unwrap();
        assert!(o.status.is_none() && !o.idle);
        assert!(!o.stdout.contains("never"));
        assert!(o.failure().starts_with("timed out"));
    }

    #[test]
    fn timeout_lets_the_command_clean_up_before_the_kill() {
        // a launcher that removes its files on SIGTERM (as mpirun does) gets to
        // run its handler; one that ignores SIGTERM is killed after the grace
        let dir = std::env::temp_dir().join(format!("oxmpi-bench-term-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mark = dir.join("cleaned");
        let script = format!(
            "trap 'echo yes > {}; exit 3' TERM; echo up; while :; do sleep 0.05; done",
            mark.display()
        );
        let o = run(
            Command::new("sh").args(["-c", &script]),
            Duration::from_millis(300),
        )
        .unwrap();
        assert!(o.status.is_none(), "a timed-out command stays timed out");
        let cleaned = std::fs::read_to_string(&mark).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(cleaned, "yes\n", "the SIGTERM handler did not run");
        let t = Instant::now();
        let o = run(
            Command::new("sh").args([
                "-c",
                "trap '' TERM; sleep 30 & while :; do sleep 0.05; done",
            ]),
            Duration::from_millis(200),
        )
        .unwrap();
        assert!(o.status.is_none());
        assert!(
            t.elapsed() < TERM_GRACE + Duration::from_secs(4),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn idle_timeout_kills_a_silent_command_early() {
        // prints once, then hangs silently: killed after the idle timeout,
        // long before the total timeout, with the output so far kept
        let t = Instant::now();
        let o = run_idle(
            Command::new("sh").args(["-c", "echo first; sleep 30; echo never"]),
            Duration::from_secs(60),
            Some(Duration::from_millis(300)),
        )
        .unwrap();
        assert!(o.status.is_none() && o.idle);
        assert_eq!(o.stdout, "first\n");
        assert!(o.failure().starts_with("timed out (no output)"));
        assert!(t.elapsed() < Duration::from_secs(30));
        // a command that keeps talking is not idle
        let o = run_idle(
            Command::new("sh").args(["-c", "for i in 1 2 3 4; do echo $i; sleep 0.1; done"]),
            Duration::from_secs(60),
            Some(Duration::from_secs(20)),
        )
        .unwrap();
        assert!(o.ok() && !o.idle);
        assert_eq!(o.stdout, "1\n2\n3\n4\n");
    }

    #[test]
    fn missing_program_is_an_error() {
        let e = run(
            &mut Command::new("/nonexistent/oxmpi-bench-no-such-program"),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(e.to_string().contains("oxmpi-bench-no-such-program"));
    }
}
