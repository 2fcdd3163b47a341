//! The PMI server core against real MPICH ranks (Debian's `mpich`, PMI-1 client built into
//! libmpich): a program compiled with `mpicc.mpich` is started on several ranks, each with a
//! `PMI_FD` socketpair served by `PmiServer` through a small thread-per-connection loop.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;

use oxmpi_wire::pmi::{Action, ConnId, JobInfo, PmiServer};

struct Served {
    server: Mutex<PmiServer>,
    writers: Mutex<HashMap<ConnId, UnixStream>>,
    events: Mutex<Vec<Action>>,
}

impl Served {
    fn pump(&self, srv: &mut PmiServer) {
        while let Some(a) = srv.poll_action() {
            match a {
                Action::Send { conn, bytes } => {
                    if let Some(w) = self.writers.lock().unwrap().get_mut(&conn) {
                        let _ = w.write_all(&bytes);
                    }
                }
                Action::Close { conn } => {
                    if let Some(w) = self.writers.lock().unwrap().remove(&conn) {
                        let _ = w.shutdown(Shutdown::Both);
                    }
                }
                other => self.events.lock().unwrap().push(other),
            }
        }
    }
}

/// A scratch directory removed on drop.
struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn compile(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mpich_check.c");
    let exe = dir.join("mpich_check");
    let st = Command::new("mpicc.mpich")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run mpicc.mpich ({e}); install `mpich libmpich-dev`"));
    assert!(st.success(), "mpicc.mpich failed");
    exe
}

/// Runs `n` ranks of the MPICH program; returns (exit codes, stdout, server events).
fn run_job(exe: &Path, n: u32) -> (Vec<Option<i32>>, String, Vec<Action>) {
    let served = Arc::new(Served {
        server: Mutex::new(PmiServer::new(JobInfo::new("oxmpi-interop", n))),
        writers: Mutex::new(HashMap::new()),
        events: Mutex::new(Vec::new()),
    });
    let mut children = Vec::new();
    let mut readers = Vec::new();
    for r in 0..n {
        let (srv_end, cli_end) = UnixStream::pair().unwrap();
        let conn = ConnId(r.into());
        let mut reader = srv_end.try_clone().unwrap();
        served.writers.lock().unwrap().insert(conn, srv_end);
        {
            let mut srv = served.server.lock().unwrap();
            srv.on_connect(conn, Some(r));
            served.pump(&mut srv);
        }
        let fd = cli_end.as_raw_fd();
        let mut cmd = Command::new(exe);
        cmd.env("PMI_FD", fd.to_string())
            .env("PMI_RANK", r.to_string())
            .env("PMI_SIZE", n.to_string())
            .env_remove("PMI_PORT")
            .stdout(Stdio::piped());
        // SAFETY: the closure only calls fcntl, which is async-signal-safe, on a descriptor
        // that is open in the child (inherited copy of `cli_end`).
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        children.push(cmd.spawn().expect("spawn MPICH rank"));
        drop(cli_end);
        let me = Arc::clone(&served);
        readers.push(thread::spawn(move || {
            let mut buf = [0u8; 2048];
            loop {
                let k = reader.read(&mut buf).unwrap_or(0);
                let mut srv = me.server.lock().unwrap();
                if k == 0 {
                    srv.on_closed(conn);
                    me.pump(&mut srv);
                    me.writers.lock().unwrap().remove(&conn);
                    return;
                }
                srv.on_data(conn, &buf[..k]);
                me.pump(&mut srv);
            }
        }));
    }
    // Safety net against a protocol bug hanging the suite: kill our own children after a
    // generous delay (no assertion depends on it).
    let pids: Vec<i32> = children.iter().map(|c| c.id() as i32).collect();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = thread::spawn(move || {
        let waited = done_rx.recv_timeout(std::time::Duration::from_secs(120));
        if waited == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            for p in pids {
                // SAFETY: kill(2) on pids of children we spawned and have not reaped yet.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
    });
    let mut codes = Vec::new();
    let mut stdout = String::new();
    for mut c in children {
        let mut out = String::new();
        if let Some(mut o) = c.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        stdout.push_str(&out);
        codes.push(c.wait().unwrap().code());
    }
    drop(done_tx);
    watchdog.join().unwrap();
    for h in readers {
        h.join().unwrap();
    }
    let events = served.events.lock().unwrap().clone();
    (codes, stdout, events)
}

#[test]
fn mpich_ranks_run_against_our_pmi_server() {
    let dir =
        TempDir(std::env::temp_dir().join(format!("oxmpi-wire-mpich-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let exe = compile(&dir.0);
    for n in [1, 2, 4] {
        let (codes, stdout, events) = run_job(&exe, n);
        assert!(
            codes.iter().all(|c| *c == Some(0)),
            "n={n}: {codes:?}\n{stdout}\n{events:?}"
        );
        for r in 0..n {
            assert!(
                stdout.contains(&format!("mpich_check ok rank {r} of {n}\n")),
                "n={n}: {stdout}"
            );
        }
        let finalized = events
            .iter()
            .filter(|a| matches!(a, Action::Finalized { .. }))
            .count();
        assert_eq!(finalized, n as usize, "{events:?}");
        assert!(
            !events
                .iter()
                .any(|a| matches!(a, Action::Error { .. } | Action::RankLost { .. })),
            "{events:?}"
        );
    }
}
