//! Dynamic process management between processes of one job (`tests/c/dpm.c`): ports,
//! accept/connect in both directions and twice on one port, join over a socket, the name
//! service, and the error classes of bad ports and names, at 2 and 4 ranks; and between two
//! separate jobs (`tests/c/dpm_jobs.c`): connect/accept through a port, a port of an ended
//! job, a port nobody accepts on.
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
