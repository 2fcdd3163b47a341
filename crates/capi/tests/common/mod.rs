//! Helpers shared by the integration tests that use an installed prefix: the prefix, scratch
//! directories, building the C programs of `tests/c` with an MPI compiler wrapper, and
//! running jobs under the prefix's `mpirun` with a safety net against hangs.
// Each test file uses a subset of these helpers.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The installed prefix under test (`OXMPI_TEST_PREFIX`, set by `cargo xtask test`).
pub fn prefix() -> PathBuf {
    match std::env::var_os("OXMPI_TEST_PREFIX") {
        Some(p) => PathBuf::from(p),
        None => panic!(
            "OXMPI_TEST_PREFIX is not set: these tests need an installed oxmpi prefix \
             (run them with `cargo xtask test`, or set OXMPI_TEST_PREFIX=<prefix> after \
             `cargo xtask install --prefix <prefix>`)"
        ),
    }
}

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "oxmpi-capi-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).expect("create scratch dir");
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The C test program `tests/c/<name>`.
pub fn c_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

/// Compiles `src` with the MPI compiler wrapper `cc` (our `mpicc`, or e.g. Debian's
/// `mpicc.mpich`) into `exe`, with `-Wall`; panics with the compiler's messages on failure.
pub fn compile(cc: &Path, src: &Path, exe: &Path) {
    let out = Command::new(cc)
        .arg("-Wall")
        .arg(src)
        .arg("-o")
        .arg(exe)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} (Debian's mpicc.mpich comes with `apt-get install \
                 libmpich-dev`): {e}",
                cc.display()
            )
        });
    assert!(
        out.status.success(),
        "building {} with {} failed:\n{}",
        src.display(),
        cc.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds `tests/c/<name>` with the prefix's `mpicc` into `dir`; returns the executable.
pub fn build(name: &str, dir: &Path) -> PathBuf {
    let exe = dir.join(name.trim_end_matches(".c"));
    compile(&prefix().join("bin/mpicc"), &c_source(name), &exe);
    exe
}

/// Safety net against a hanging job (not a timing assertion).
const JOB_LIMIT: Duration = Duration::from_secs(180);

/// Runs the prefix's `mpirun` with `args` and extra environment `env`; a job still running
/// after three minutes is killed (its output then shows what it printed so far).
pub fn mpirun<A: AsRef<OsStr>>(args: &[A], env: &[(&str, &OsStr)]) -> Output {
    let mut cmd = Command::new(prefix().join("bin/mpirun"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    let start = Instant::now();
    while matches!(child.try_wait(), Ok(None)) && start.elapsed() < JOB_LIMIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().expect("collect mpirun output")
}

/// `LD_LIBRARY_PATH` with the prefix's `lib` first: a binary built against another MPI's
/// `libmpi.so.12` (Debian's MPICH) loads ours.
pub fn our_libs_first() -> std::ffi::OsString {
    let lib = prefix().join("lib");
    match std::env::var("LD_LIBRARY_PATH") {
        Ok(v) if !v.is_empty() => format!("{}:{v}", lib.display()).into(),
        _ => lib.into_os_string(),
    }
}

/// Panics unless the job `what` succeeded; returns its standard output.
pub fn success(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs `exe` on `np` ranks under `mpirun --timeout timeout_s` (a hang ends the job with
/// status 124 instead of blocking the test) and asserts that it exits 0; returns its
/// standard output and standard error.
pub fn run_ok(exe: &Path, np: usize, timeout_s: &str) -> (String, String) {
    let np_s = np.to_string();
    let out = mpirun(
        &[
            OsStr::new("--timeout"),
            OsStr::new(timeout_s),
            OsStr::new("-n"),
            OsStr::new(&np_s),
            exe.as_os_str(),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{} on {np} ranks failed (124 = hung until mpirun's timeout):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        exe.display()
    );
    (stdout, stderr)
}

/// Whether libfabric offers `provider` here (`fi_info -p provider`); if not, says loudly
/// that the calling test is skipped (`scripts/deps.sh` installs libfabric-bin).
#[allow(dead_code)]
pub fn ofi_provider(provider: &str) -> bool {
    let ok = Command::new("fi_info")
        .args(["-p", provider])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "SKIPPED: no libfabric {provider} provider (fi_info -p {provider}); scripts/deps.sh \
             installs libfabric-bin"
        );
    }
    ok
}
