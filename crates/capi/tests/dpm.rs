//! Dynamic process management between processes of one job (`tests/c/dpm.c`): ports,
//! accept/connect in both directions and twice on one port, join over a socket, the name
//! service, and the error classes of bad ports and names, at 2 and 4 ranks; and between two
//! separate jobs (`tests/c/dpm_jobs.c`): connect/accept through a port, a port of an ended
//! job, a port nobody accepts on, a peer job that stops answering, and names published in
//! `oxmpi-server` or in `mpirun --report-uri`.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX`. The job runs under
//! `mpirun --timeout`, so a hang fails the test instead of blocking it.

mod common;
use common::{build, run_ok, Scratch};

/// Safety net for a hanging job (not a timing assertion).
const TIMEOUT_S: &str = "120";

#[test]
fn ports_accept_connect_join_and_names() {
    let dir = Scratch::new("dpm");
    let exe = build("dpm.c", &dir.0);
    for np in [2, 4] {
        let (stdout, stderr) = run_ok(&exe, np, TIMEOUT_S);
        let parts = [
            "accept/connect",
            "connect/accept twice on one port",
            "port errors",
            "name service",
            "join",
        ];
        let want: String = parts
            .iter()
            .map(|p| format!("dpm: {p} ok\n"))
            .chain(std::iter::once(format!(
                "dpm: all checks passed ({np} ranks)\n"
            )))
            .collect();
        assert_eq!(stdout, want, "np={np}, stderr:\n{stderr}");
    }
}

/// A process killed when dropped (even when the test fails).
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two separate `mpirun` jobs started with `--ompi-server file:URI` (the file a standalone
/// `oxmpi-server --report-uri` wrote) meet through a published name: the server job
/// publishes its port (a second publish of the name is `MPI_ERR_NAME`), the client job
/// looks it up, they connect and use the intercommunicator, the server unpublishes. The
/// same with the server job's `mpirun --report-uri` as the name server.
#[test]
fn two_jobs_meet_through_a_published_name() {
    let dir = Scratch::new("dpm-names");
    let exe = build("dpm_jobs.c", &dir.0);
    let uri = dir.0.join("uri");
    let _server = Stopped(
        std::process::Command::new(common::prefix().join("bin/oxmpi-server"))
            .arg("--report-uri")
            .arg(&uri)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("start oxmpi-server"),
    );
    for _ in 0..3000 {
        if uri.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let text = std::fs::read_to_string(&uri).expect("oxmpi-server reports its URI");
    assert!(text.starts_with("oxmpi-server:"), "{text}");
    let opt = format!("file:{}", uri.display());
    let extra = ["--ompi-server", opt.as_str()];
    let svc = std::path::Path::new("oxmpi test service");
    let server_job = {
        let exe = exe.clone();
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        std::thread::spawn(move || {
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            job(&exe, 2, &extra, &[std::path::Path::new("pubserver"), svc])
        })
    };
    let client = job(&exe, 2, &extra, &[std::path::Path::new("pubclient"), svc]);
    let server_job = server_job.join().unwrap();
    assert_eq!(common::success(&server_job, "server"), "server: ok\n");
    assert_eq!(common::success(&client, "client"), "client: ok\n");

    // `mpirun --report-uri FILE` is the name server itself (Open MPI's habit): its own
    // ranks publish there, and the other job is given its URI.
    let uri = dir.0.join("uri-mpirun");
    let server_job = {
        let exe = exe.clone();
        let opt = uri.display().to_string();
        std::thread::spawn(move || {
            job(
                &exe,
                2,
                &["--report-uri", &opt],
                &[std::path::Path::new("pubserver"), svc],
            )
        })
    };
    for _ in 0..3000 {
        if uri.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let opt = format!("file:{}", uri.display());
    let client = job(
        &exe,
        2,
        &["--ompi-server", &opt],
        &[std::path::Path::new("pubclient"), svc],
    );
    let server_job = server_job.join().unwrap();
    assert_eq!(
        common::success(&server_job, "mpirun server"),
        "server: ok\n"
    );
    assert_eq!(common::success(&client, "client of mpirun"), "client: ok\n");
}

/// `dpm_jobs` under `mpirun --timeout 60 -n np` with `args` (and `extra` options before the
/// program); its output.
fn job(
    exe: &std::path::Path,
    np: usize,
    extra: &[&str],
    args: &[&std::path::Path],
) -> std::process::Output {
    let np = np.to_string();
    let head = ["--timeout", "60", "-n", &np];
    let mut a: Vec<&std::ffi::OsStr> = head.iter().chain(extra).map(std::ffi::OsStr::new).collect();
    a.push(exe.as_os_str());
    a.extend(args.iter().map(|p| p.as_os_str()));
    common::mpirun(&a, &[])
}

/// Two separate `mpirun` jobs connect through a port whose name one writes to a file and
/// the other reads, and use the intercommunicator (messages both ways from every rank,
/// rendezvous-sized ones included, a broadcast, the merge); afterwards the port of the
/// ended job refuses with `MPI_ERR_PORT` at once, and a port nobody accepts on fails with
/// `MPI_ERR_PORT` after `dpm_connect_timeout`.
#[test]
fn two_jobs_connect_through_a_port() {
    let dir = Scratch::new("dpm-jobs");
    let exe = build("dpm_jobs.c", &dir.0);
    let file = dir.0.join("port");
    let path = |s: &str| std::path::Path::new(s).to_path_buf();
    for (ns, nc) in [(2, 2), (1, 3)] {
        let _ = std::fs::remove_file(&file);
        let server = {
            let (exe, file) = (exe.clone(), file.clone());
            std::thread::spawn(move || job(&exe, ns, &[], &[&path("server"), &file]))
        };
        let client = job(&exe, nc, &[], &[&path("client"), &file]);
        let server = server.join().unwrap();
        assert_eq!(common::success(&server, "server"), "server: ok\n");
        assert_eq!(common::success(&client, "client"), "client: ok\n");
    }
    // The file still names the ended server's port: refused at once, the job ends with
    // the one-line report.
    let refused = |extra: &[&str]| {
        let out = job(&exe, 2, extra, &[&path("refused"), &file]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
        let line = err
            .lines()
            .find(|l| l.contains("oxmpi: MPI_Comm_connect: MPI_ERR_PORT"))
            .unwrap_or_else(|| panic!("no MPI_ERR_PORT report in:\n{err}"))
            .to_string();
        line[line.find("\": ").expect("after the port name") + 3..].to_string()
    };
    let why = refused(&[]);
    assert!(
        why.starts_with(
            "nobody listens there any more (the job that opened it has ended or closed it;"
        ),
        "{why}"
    );
    let _ = std::fs::remove_file(&file);
    let lonely = {
        let (exe, file) = (exe.clone(), file.clone());
        std::thread::spawn(move || job(&exe, 1, &[], &[&path("lonely"), &file]))
    };
    let why = refused(&["--mca", "dpm_connect_timeout", "2"]);
    assert_eq!(
        why,
        "no MPI_Comm_accept on it within 2 s (dpm_connect_timeout)"
    );
    std::fs::write(dir.0.join("port.done"), b"").unwrap();
    assert_eq!(
        common::success(&lonely.join().unwrap(), "lonely"),
        "lonely: done\n"
    );
}

/// A peer job that answers the hello and then stops answering (a fake port owner here,
/// silent after the hello) fails `MPI_Comm_connect` with `MPI_ERR_PORT` after
/// `dpm_exchange_timeout`, in one line, instead of hanging.
#[test]
fn a_peer_job_that_stops_answering_times_out() {
    use std::io::{Read, Write};
    let dir = Scratch::new("dpm-silent");
    let exe = build("dpm_jobs.c", &dir.0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("address").port();
    let token = 0x5eed_u64;
    let file = dir.0.join("port");
    std::fs::write(
        &file,
        format!("oxmpi-port:fakejob:0:1:no-such-host:127.0.0.1:{port}:{token:016x}"),
    )
    .expect("write the port file");
    // The hello's format: a list (count, then length + bytes each) of magic, token, job,
    // world ranks, in a length-prefixed frame.
    let frame = |parts: &[&[u8]]| {
        let mut l = (parts.len() as u32).to_le_bytes().to_vec();
        for p in parts {
            l.extend((p.len() as u32).to_le_bytes());
            l.extend_from_slice(p);
        }
        let mut f = (l.len() as u32).to_le_bytes().to_vec();
        f.extend(l);
        f
    };
    let silent = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut len = [0u8; 4];
        s.read_exact(&mut len).expect("hello length");
        let mut hello = vec![0u8; u32::from_le_bytes(len) as usize];
        s.read_exact(&mut hello).expect("hello");
        let answer = frame(&[
            b"oxmpi-dpm-1",
            &token.to_le_bytes(),
            b"fakejob",
            &0i32.to_le_bytes(),
        ]);
        s.write_all(&answer).expect("answer");
        // Then nothing: keep the connection open until the client gives up.
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let path = std::path::Path::new("refused");
    let out = job(
        &exe,
        1,
        &["--mca", "dpm_exchange_timeout", "2"],
        &[path, &file],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("MPI_ERR_PORT")).collect();
    assert_eq!(lines.len(), 1, "one line:\n{err}");
    assert!(
        lines[0].contains("no answer within 2 s (dpm_exchange_timeout)"),
        "{err}"
    );
    silent.join().expect("the silent peer");
}
