//! Running child commands with a timeout, captured output and wall time.
//!
//! Every command runs in its own process group, which is killed (SIGKILL)
//! after the command ends or times out, so that a hung or leaky MPI launch
//! leaves nothing behind.

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
}

impl Outcome {
    /// True if the command exited with status 0 before the timeout.
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// A one-line description of a failure, with the tail of stderr.
    pub fn failure(&self) -> String {
        let why = match self.status {
            None => "timed out".to_string(),
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
        format!("{why}: {}", tail.join(" | "))
    }
}

fn kill_group(pgid: u32) {
    // SAFETY: kill(2) with a negative pid signals the process group we created
    // for this child (process_group(0) makes its pid the group id); it has no
    // memory-safety preconditions. ESRCH (group already gone) is ignored.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), libc::SIGKILL);
    }
}

fn reader<R: Read + Send + 'static>(mut r: R) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

/// Run `cmd` (stdin closed, output captured) for at most `timeout`.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Outcome, RunError> {
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
    let out = reader(child.stdout.take().expect("stdout is piped"));
    let err = reader(child.stderr.take().expect("stderr is piped"));
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let st = child.wait();
        let _ = tx.send((st, start.elapsed()));
    });
    let (status, wall) = match rx.recv_timeout(timeout) {
        Ok((st, wall)) => (st.ok(), wall),
        Err(_) => {
            kill_group(pid);
            let _ = rx.recv();
            (None, start.elapsed())
        }
    };
    // Clean up anything the command left behind in its group.
    kill_group(pid);
    let grace = Duration::from_secs(5);
    let stdout = out.recv_timeout(grace).unwrap_or_default();
    let stderr = err.recv_timeout(grace).unwrap_or_default();
    Ok(Outcome {
        status,
        stdout,
        stderr,
        wall,
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
        assert!(o.status.is_none());
        assert!(!o.stdout.contains("never"));
        assert!(o.failure().starts_with("timed out"));
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
