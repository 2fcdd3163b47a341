//! Datatypes of the installed `libmpi.so.12`: `tests/c/datatypes.c` (external32, struct
//! padding, darray) built with our `mpicc` and with Debian's `mpicc.mpich` (as the other C
//! programs), both run on our library under our `mpirun`.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{prefix, Scratch};

fn build(cc: &Path, dir: &Path, tag: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/datatypes.c");
    let exe = dir.join(format!("datatypes-{tag}"));
    let out = Command::new(cc)
        .arg("-Wall")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run the C compiler driver");
    assert!(
        out.status.success(),
        "building datatypes.c with {} failed:\n{}",
        cc.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn run(exe: &Path) -> String {
    let out = Command::new(prefix().join("bin/mpirun"))
        .args(["-n", "1"])
        .arg(exe)
        // An MPICH-built binary must load our libmpi.so.12.
        .env("LD_LIBRARY_PATH", prefix().join("lib"))
        .output()
        .expect("start mpirun");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} failed ({:?}):\nstdout:\n{stdout}\nstderr:\n{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn external32_struct_padding_and_darray() {
    let dir = Scratch::new("datatypes");
    let ours = run(&build(&prefix().join("bin/mpicc"), &dir.0, "ours"));
    assert!(
        ours.lines().any(|l| l == "datatypes: all checks passed"),
        "{ours}"
    );
    let theirs = run(&build(Path::new("mpicc.mpich"), &dir.0, "mpich"));
    assert_eq!(theirs, ours);
}
