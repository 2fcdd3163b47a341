//! Shared by the test binaries that start themselves under the installed `mpirun`.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether this process was started by a launcher (it is a rank, not the test driver).
pub fn under_launcher() -> bool {
    ["PMI_FD", "PMI_PORT", "PMI_RANK"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// Runs test `test` of this binary under `mpirun -n ranks` with `args` before the program
/// (needs `OXMPI_TEST_PREFIX`); kills the job after `hang_limit` (a safety net: the test
/// then fails instead of hanging), asserts it succeeded and that every rank printed
/// `rank R: <done>`, and returns its standard output.
pub fn run_ranks(
    test: &str,
    ranks: i32,
    args: &[&str],
    hang_limit: Duration,
    done: &str,
) -> String {
    let prefix = std::env::var_os("OXMPI_TEST_PREFIX").unwrap_or_else(|| {
        panic!(
            "OXMPI_TEST_PREFIX is not set: this test needs an installed oxmpi prefix \
             (run `cargo xtask test`, or `cargo xtask install --prefix DIR` and set \
             OXMPI_TEST_PREFIX=DIR)"
        )
    });
    let mpirun = PathBuf::from(prefix).join("bin").join("mpirun");
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(&mpirun)
        .args(["-n", &ranks.to_string()])
        .args(args)
        .arg(&exe)
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", mpirun.display()));
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > hang_limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mpirun -n {ranks} {test} did not finish within {hang_limit:?}; killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out_t.join().expect("stdout reader");
    let stderr = err_t.join().expect("stderr reader");
    assert!(
        status.success(),
        "mpirun -n {ranks} {test} failed: {status}\n--- stdout\n{stdout}--- stderr\n{stderr}"
    );
    for r in 0..ranks {
        assert!(
            stdout.contains(&format!("rank {r}: {done}")),
            "rank {r} did not finish {test}\n--- stdout\n{stdout}--- stderr\n{stderr}"
        );
    }
    stdout
}
