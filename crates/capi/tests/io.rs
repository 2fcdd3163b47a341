//! MPI-IO of the installed `libmpi.so.12`: `tests/c/io.c` built with our `mpicc` and with
//! Debian's `mpicc.mpich` (run on our library through `LD_LIBRARY_PATH`), each run under
//! our `mpirun` on 1, 2 and 3 ranks in its own scratch directory, which must be empty
//! afterwards (the program deletes what it creates; the shared file pointer's counter
//! file is removed while the file is open).
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{prefix, Scratch};

/// The lines rank 0 prints when every section passed.
const EXPECTED: [&str; 6] = [
    "io: errors ok",
    "io: views ok",
    "io: shared ok",
    "io: queries ok",
    "io: bad input ok",
    "io: done",
];

fn build(compiler: &Path, dir: &Path, tag: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/io.c");
    let exe = dir.join(format!("io-{tag}"));
    let out = Command::new(compiler)
        .arg("-Wall")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} (Debian's mpicc.mpich comes with `apt-get install libmpich-dev`): {e}",
                compiler.display()
            )
        });
    assert!(
        out.status.success(),
        "building io.c with {} failed:\n{}",
        compiler.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn run(exe: &Path, n: usize, mpich: bool) {
    let data = Scratch::new("io-data");
    let mut cmd = Command::new(prefix().join("bin/mpirun"));
    if mpich {
        cmd.env("LD_LIBRARY_PATH", prefix().join("lib"));
    }
    let mut child = cmd
        .arg("-n")
        .arg(n.to_string())
        .arg(exe)
        .arg(&data.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    // Safety net against a hang (not a timing assertion).
    let start = Instant::now();
    while child.try_wait().expect("poll mpirun").is_none() {
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("collect mpirun output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let what = format!("{} on {n} ranks", exe.display());
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, EXPECTED, "{what}");
    let left: Vec<_> = std::fs::read_dir(&data.0)
        .expect("read scratch dir")
        .map(|e| e.expect("dir entry").file_name())
        .collect();
    assert!(left.is_empty(), "{what} left files behind: {left:?}");
}

#[test]
fn mpi_io_on_one_to_three_ranks_with_our_mpicc() {
    let dir = Scratch::new("io-build");
    let exe = build(&prefix().join("bin/mpicc"), &dir.0, "ours");
    for n in 1..=3 {
        run(&exe, n, false);
    }
}

#[test]
fn mpi_io_built_with_mpich_runs_on_our_library() {
    let dir = Scratch::new("io-build");
    let exe = build(Path::new("mpicc.mpich"), &dir.0, "mpich");
    for n in 1..=2 {
        run(&exe, n, true);
    }
}
