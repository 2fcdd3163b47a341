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

/// `tests/c/dt_threads.c`: datatype handles decoded and freed by 4 threads at once at
/// `MPI_THREAD_MULTIPLE` (where the library must count references atomically) and by one
/// thread at `MPI_THREAD_SINGLE` (where it counts with loads and stores): no free fails,
/// every decode returns the same handles, and the counts end where they began.
#[test]
fn datatype_handles_shared_by_threads_at_the_provided_level() {
    let dir = Scratch::new("dt_threads");
    let exe = dir.0.join("dt_threads");
    compile(&prefix().join("bin/mpicc"), &c_source("dt_threads.c"), &exe);
    for level in ["multiple", "single"] {
        let out = mpirun(
            &[
                OsStr::new("-n"),
                OsStr::new("1"),
                exe.as_os_str(),
                OsStr::new(level),
            ],
            &[],
        );
        let text = success(&out, &exe.display().to_string());
        assert!(
            text.lines().any(|l| l == format!("dt_threads: {level} ok")),
            "{text}"
        );
    }
}
