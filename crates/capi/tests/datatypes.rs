//! Datatypes of the installed `libmpi.so.12`: `tests/c/datatypes.c` (external32, struct
//! padding, darray) built with our `mpicc` and with Debian's `mpicc.mpich` (as the other C
//! programs), both run on our library under our `mpirun`.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

mod common;
use common::{c_source, compile, mpirun, our_libs_first, prefix, success, Scratch};

fn build(cc: &Path, dir: &Path, tag: &str) -> PathBuf {
    let exe = dir.join(format!("datatypes-{tag}"));
    compile(cc, &c_source("datatypes.c"), &exe);
    exe
}

fn run(exe: &Path) -> String {
    // An MPICH-built binary must load our libmpi.so.12.
    let libs = our_libs_first();
    let out = mpirun(
        &[OsStr::new("-n"), OsStr::new("1"), exe.as_os_str()],
        &[("LD_LIBRARY_PATH", libs.as_os_str())],
    );
    success(&out, &exe.display().to_string())
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
