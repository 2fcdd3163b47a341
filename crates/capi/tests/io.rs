//! MPI-IO of the installed `libmpi.so.12`: `tests/c/io.c` built with our `mpicc` and with
//! Debian's `mpicc.mpich` (run on our library through `LD_LIBRARY_PATH`), each run under
//! our `mpirun` on 1, 2 and 3 ranks in its own scratch directory, which must be empty
//! afterwards (the program deletes what it creates; the shared file pointer is held in
//! rank 0's memory, no file). With `--mca osc pt2pt` the other ranks reach the shared
//! pointer with messages, as ranks on other nodes do.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

mod common;
use common::{c_source, compile, mpirun, our_libs_first, prefix, success, Scratch};

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
    let exe = dir.join(format!("io-{tag}"));
    compile(compiler, &c_source("io.c"), &exe);
    exe
}

fn run(exe: &Path, n: usize, mpich: bool) {
    run_with(exe, n, mpich, &[]);
}

/// [`run`] with extra `mpirun` arguments; returns the job's standard error.
fn run_with(exe: &Path, n: usize, mpich: bool, extra: &[&str]) -> String {
    let data = Scratch::new("io-data");
    let libs = our_libs_first();
    let env: &[(&str, &OsStr)] = if mpich {
        &[("LD_LIBRARY_PATH", libs.as_os_str())]
    } else {
        &[]
    };
    let n_s = n.to_string();
    let mut args: Vec<&OsStr> = vec![OsStr::new("-n"), OsStr::new(&n_s)];
    args.extend(extra.iter().map(OsStr::new));
    args.extend([exe.as_os_str(), data.0.as_os_str()]);
    let out = mpirun(&args, env);
    let what = format!("{} on {n} ranks {extra:?}", exe.display());
    let stdout = success(&out, &what);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, EXPECTED, "{what}");
    let left: Vec<_> = std::fs::read_dir(&data.0)
        .expect("read scratch dir")
        .map(|e| e.expect("dir entry").file_name())
        .collect();
    assert!(left.is_empty(), "{what} left files behind: {left:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
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
fn mpi_io_shared_pointer_over_messages() {
    let dir = Scratch::new("io-build");
    let exe = build(&prefix().join("bin/mpicc"), &dir.0, "ours");
    for n in 2..=3 {
        run_with(&exe, n, false, &["--mca", "osc", "pt2pt"]);
    }
}

/// An independent read of several file segments (a strided view) reads their whole range
/// with one `pread` (data sieving; `io_base_verbose` 20 reports each) and gets what reading
/// segment by segment gets, up to the end of the file: `tests/c/io.c`'s views, where every
/// rank reads 8 of its ints interleaved with the other ranks' (all there), then 5 past
/// the end (none there).
#[test]
fn strided_independent_reads_read_their_range_at_once() {
    let dir = Scratch::new("io-build");
    let exe = build(&prefix().join("bin/mpicc"), &dir.0, "ours");
    for n in 2..=3usize {
        let err = run_with(&exe, n, false, &["--mca", "io_base_verbose", "20"]);
        let sieved = |segs: usize, span: usize, at: usize, read: usize| {
            let head = format!("io: read of {segs} segments of ");
            let tail = format!(" in one read of {span} bytes at {at} ({read} read)");
            err.lines().any(|l| l.contains(&head) && l.ends_with(&tail))
        };
        for r in 0..n {
            // The view: displacement 8, one int of every n; ints 2..10 of rank r.
            let span = (7 * n + 1) * 4;
            let at = 8 + (2 * n + r) * 4;
            assert!(sieved(8, span, at, span), "{n} ranks, rank {r}:\n{err}");
            let span = (4 * n + 1) * 4;
            let at = 8 + (10 * n + r) * 4;
            assert!(sieved(5, span, at, 0), "{n} ranks, rank {r}:\n{err}");
        }
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

/// Runs `tests/c/io_coll.c` on `n` ranks with `extra` mpirun arguments (and
/// `fcoll_base_verbose` 10); returns its standard error after checking its output and that
/// it left nothing in its scratch directory.
fn run_io_coll(exe: &Path, n: usize, extra: &[&str]) -> String {
    let data = Scratch::new("io-coll-data");
    let n_s = n.to_string();
    let mut args: Vec<&OsStr> = vec![OsStr::new("-n"), OsStr::new(&n_s)];
    args.extend(["--mca", "fcoll_base_verbose", "10"].map(OsStr::new));
    args.extend(extra.iter().map(OsStr::new));
    args.extend([exe.as_os_str(), data.0.as_os_str()]);
    let out = mpirun(&args, &[]);
    let what = format!("io_coll on {n} ranks {extra:?}");
    let stdout = success(&out, &what);
    assert_eq!(stdout, "io_coll: done\n", "{what}");
    assert_eq!(std::fs::read_dir(&data.0).unwrap().count(), 0, "{what}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn collective_io_aggregates_per_node() {
    let dir = Scratch::new("io-build");
    let exe = dir.0.join("io_coll");
    compile(&prefix().join("bin/mpicc"), &c_source("io_coll.c"), &exe);
    for n in 1..=4 {
        let err = run_io_coll(&exe, n, &[]);
        // One node: rank 0 aggregates; the interleaved blocks of every rank (64 blocks of
        // 16 ints each) reach the file as one contiguous block.
        let want = format!(
            "io_coll.dat: aggregator 0 of 1: {} bytes of {n} rank(s) in 1 contiguous block(s)",
            n * 64 * 16 * 4
        );
        assert!(
            err.lines()
                .any(|l| l.contains("fcoll two_phase: write ") && l.ends_with(&want)),
            "{n} ranks: no line ending in {want:?}:\n{err}"
        );
        assert!(
            !err.lines()
                .any(|l| l.contains("aggregator") && !l.contains("aggregator 0 of 1")),
            "{err}"
        );
        // cb_buffer_size 1000: the same bytes in rounds of at most 1000 (write and read).
        let bytes = n * 64 * 16 * 4;
        let want = format!(
            "io_coll_cb.dat: aggregator 0 of 1: {bytes} bytes of {n} rank(s) in {r} contiguous block(s), {r} rounds of at most 1000 bytes (cb_buffer_size)",
            r = bytes.div_ceil(1000)
        );
        for dir in ["write", "read"] {
            assert!(
                err.lines()
                    .any(|l| l.contains(&format!("fcoll two_phase: {dir} ")) && l.ends_with(&want)),
                "{n} ranks: no {dir} line ending in {want:?}:\n{err}"
            );
        }
    }
    // Deselected: every rank writes its own pieces, with the same file contents.
    let err = run_io_coll(&exe, 3, &["--mca", "fcoll", "^two_phase"]);
    assert!(!err.contains("fcoll two_phase"), "{err}");
}

/// One rank's bad arguments to a collective access (ordered, split, `_all`): nobody hangs,
/// every rank gets an error, nobody touches the file (`tests/c/io_badarg.c`).
#[test]
fn a_bad_argument_on_one_rank_fails_the_collective_everywhere() {
    let dir = Scratch::new("io-build");
    let exe = dir.0.join("io_badarg");
    compile(&prefix().join("bin/mpicc"), &c_source("io_badarg.c"), &exe);
    for n in 2..=3 {
        let data = Scratch::new("io-badarg-data");
        let n_s = n.to_string();
        let out = mpirun(
            &[
                OsStr::new("--timeout"),
                OsStr::new("60"),
                OsStr::new("-n"),
                OsStr::new(&n_s),
                exe.as_os_str(),
                data.0.as_os_str(),
            ],
            &[],
        );
        let what = format!("io_badarg on {n} ranks");
        assert_eq!(success(&out, &what), "io_badarg: done\n", "{what}");
        assert_eq!(std::fs::read_dir(&data.0).unwrap().count(), 0, "{what}");
    }
}

/// `MPI_File_sync` flushes (`fdatasync`) exactly when its process wrote to the handle since
/// its last sync (MPI-4.1 §14.6.1): after each kind of write, the first sync of the sync,
/// barrier, sync recipe flushes on every rank and the second does not; after reads only,
/// none does; after `MPI_File_set_size`, rank 0's (which resized) does
/// (`tests/c/io_sync.c`, whose checks see every rank's data after each recipe).
#[test]
fn file_sync_flushes_what_this_process_wrote_since_its_last_sync() {
    let dir = Scratch::new("io-build");
    let exe = dir.0.join("io_sync");
    compile(&prefix().join("bin/mpicc"), &c_source("io_sync.c"), &exe);
    for n in 1..=3usize {
        let data = Scratch::new("io-sync-data");
        let n_s = n.to_string();
        let mut args: Vec<&OsStr> = vec![OsStr::new("-n"), OsStr::new(&n_s)];
        args.extend(["--mca", "io_base_verbose", "10"].map(OsStr::new));
        args.extend([exe.as_os_str(), data.0.as_os_str()]);
        let out = mpirun(&args, &[]);
        let what = format!("io_sync on {n} ranks");
        assert_eq!(success(&out, &what), "io_sync: done\n", "{what}");
        assert_eq!(std::fs::read_dir(&data.0).unwrap().count(), 0, "{what}");
        let err = String::from_utf8_lossy(&out.stderr);
        for r in 0..n {
            let tag = format!(" on rank {r} of the file's group: ");
            let got: String = err
                .lines()
                .filter(|l| l.contains("io: MPI_File_sync ") && l.contains(&tag))
                .map(|l| {
                    if l.ends_with("fdatasync (writes since the last sync)") {
                        'F'
                    } else {
                        '-'
                    }
                })
                .collect();
            // open, write_at, write_at_all, iwrite_at, write_shared, write_ordered: F-;
            // read_at_all: --; set_size: F on rank 0 only.
            let want = format!("F-F-F-F-F-F---{}", if r == 0 { 'F' } else { '-' });
            assert_eq!(got, want, "{what}, rank {r}:\n{err}");
        }
    }
}
