//! Integration tests of the installed standard-ABI library `libmpi_abi.so.1`: C programs
//! built with our `mpicc -mpi-abi` (and `mpicc_abi`) run under our `mpirun`; the C test
//! programs of `oxmpi-capi` give the same output built for either ABI; exports, soname
//! and header; the generated files are up to date.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`), except
//! for the generator check.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

// The installed-prefix helpers (`prefix()`, `Scratch`) of oxmpi-capi's tests.
#[path = "../../capi/tests/common/mod.rs"]
mod common;
use common::{prefix, Scratch};

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A C test program: ours (`tests/c`) or one of `oxmpi-capi`'s ABI-neutral ones.
fn src(name: &str) -> PathBuf {
    let own = crate_dir().join("tests/c").join(name);
    if own.exists() {
        own
    } else {
        crate_dir().join("../capi/tests/c").join(name)
    }
}

/// How a program is built.
#[derive(Clone, Copy, Debug)]
enum Build {
    /// `mpicc` (MPICH ABI, libmpi.so.12).
    Mpich,
    /// `mpicc -mpi-abi` (standard ABI, libmpi_abi.so.1).
    Abi,
    /// The `mpicc_abi` name of the wrapper.
    AbiName,
}

fn build(b: Build, name: &str, dir: &Path) -> PathBuf {
    let stem = Path::new(name).file_stem().expect("file name");
    let exe = dir.join(format!("{}-{b:?}", stem.to_string_lossy()));
    let mut cmd = match b {
        Build::Mpich => Command::new(prefix().join("bin/mpicc")),
        Build::Abi => {
            let mut c = Command::new(prefix().join("bin/mpicc"));
            c.arg("-mpi-abi");
            c
        }
        Build::AbiName => Command::new(prefix().join("bin/mpicc_abi")),
    };
    let out = cmd
        .arg(src(name))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the compiler wrapper ({b:?}) for {name}: {e}"));
    assert!(
        out.status.success(),
        "building {name} ({b:?}) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Safety net so a broken library cannot hang the suite (not a timing assertion).
const JOB_LIMIT: Duration = Duration::from_secs(120);

/// Run `exe` on `n` ranks under our mpirun; stdout, stderr, exit code.
fn mpirun(n: usize, exe: &Path) -> (String, String, i32) {
    mpirun_with_libs(n, exe, None)
}

/// `mpirun`, optionally with `LD_LIBRARY_PATH` set to `libs` for the ranks.
fn mpirun_with_libs(n: usize, exe: &Path, libs: Option<&Path>) -> (String, String, i32) {
    mpirun_full(n, exe, libs, &[])
}

/// `mpirun` with program arguments.
fn mpirun_full(n: usize, exe: &Path, libs: Option<&Path>, args: &[&Path]) -> (String, String, i32) {
    let mut cmd = Command::new(prefix().join("bin/mpirun"));
    if let Some(l) = libs {
        cmd.env("LD_LIBRARY_PATH", l);
    }
    let mut child = cmd
        .arg("-n")
        .arg(n.to_string())
        .arg(exe)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    let start = Instant::now();
    while matches!(child.try_wait(), Ok(None)) && start.elapsed() < JOB_LIMIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out: Output = child.wait_with_output().expect("collect mpirun output");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Build `name` for both ABIs, run each on `n` ranks, require success, the final line
/// and identical output; returns the output.
fn same_in_both_abis(name: &str, n: usize, last_line: &str) -> String {
    same_in_both_abis_with_scratch_arg(name, n, last_line, false)
}

/// As [`same_in_both_abis`]; with `scratch_arg` each run gets a fresh scratch directory
/// as its argument (io.c writes its files there).
fn same_in_both_abis_with_scratch_arg(
    name: &str,
    n: usize,
    last_line: &str,
    scratch_arg: bool,
) -> String {
    let dir = Scratch::new("both");
    let mut outs = Vec::new();
    for b in [Build::Mpich, Build::Abi] {
        let exe = build(b, name, &dir.0);
        let data = Scratch::new("data");
        let args: Vec<&Path> = if scratch_arg { vec![&data.0] } else { vec![] };
        let (out, err, code) = mpirun_full(n, &exe, None, &args);
        assert_eq!(
            code, 0,
            "{name} ({b:?} build, {n} ranks) failed with {code}:\n{out}\n{err}"
        );
        assert!(
            out.lines().any(|l| l == last_line),
            "{name} ({b:?} build) did not print '{last_line}':\n{out}\n{err}"
        );
        outs.push(out);
    }
    assert_eq!(
        outs[0], outs[1],
        "{name}: output differs between the MPICH-ABI and the standard-ABI build"
    );
    outs.remove(0)
}

#[test]
fn abi_basics_on_one_and_two_ranks() {
    let dir = Scratch::new("basics");
    let exe = build(Build::Abi, "abi_basics.c", &dir.0);
    for n in [1, 2] {
        let (out, err, code) = mpirun(n, &exe);
        assert_eq!(code, 0, "abi_basics on {n} ranks:\n{out}\n{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first(), Some(&"abi version 1.0"), "{out}");
        assert!(
            lines.contains(&"sizeof MPI_Status 32 MPI_Comm 8 MPI_Aint 8 MPI_Count 8 MPI_Offset 8"),
            "{out}"
        );
        assert!(
            lines.contains(
                &"handles world 0x101 self 0x102 int 0x209 sum 0x21 request_null 0x180 \
                  errors_return 0x143"
            ),
            "{out}"
        );
        for l in [
            "toint/fromint: ok",
            "error classes: ok",
            "status: ok",
            "user op (large count): ok",
            "constants: ok",
            "abi info: ok",
            "abi_basics: all checks passed",
        ] {
            assert!(
                lines.contains(&l),
                "missing '{l}' on {n} ranks:\n{out}\n{err}"
            );
        }
    }
}

#[test]
fn p2p_same_in_both_abis() {
    let out = same_in_both_abis("p2p.c", 2, "p2p: all checks passed");
    assert!(out.contains("persistent requests: ok"), "{out}");
}

#[test]
fn probe_same_in_both_abis() {
    same_in_both_abis("probe.c", 2, "probe: all checks passed");
}

#[test]
fn truncate_same_in_both_abis() {
    let out = same_in_both_abis("truncate.c", 2, "truncate: all checks passed");
    assert!(out.contains("recv truncated: MPI_ERR_TRUNCATE"), "{out}");
}

#[test]
fn errhandler_same_in_both_abis() {
    let out = same_in_both_abis("errhandler.c", 2, "errhandler: all checks passed");
    assert!(out.contains("MPI_ERR_REQUEST"), "{out}");
}

#[test]
fn collectives_same_in_both_abis() {
    same_in_both_abis("coll.c", 2, "coll: all checks passed");
    same_in_both_abis("coll_topo.c", 2, "coll_topo: all checks passed");
}

#[test]
fn nonblocking_and_property_collectives_same_in_both_abis() {
    same_in_both_abis("coll_nb.c", 2, "coll_nb: all checks passed");
    same_in_both_abis("coll_prop.c", 2, "coll_prop: all checks passed");
}

#[test]
fn intercommunicators_same_in_both_abis() {
    same_in_both_abis("inter.c", 2, "inter: all ok on 2 ranks");
}

/// `MPI_Comm_spawn`, `_spawn_multiple` and `MPI_Comm_get_parent` in the standard ABI:
/// the spawn test (children of the same build; `MPI_ARGV_NULL`, `MPI_ERRCODES_IGNORE`,
/// error codes and an array of info handles converted) prints the same in both.
#[test]
fn spawn_same_in_both_abis() {
    same_in_both_abis(
        "spawn.c",
        2,
        "spawn errors: missing program and maxprocs 0 ok",
    );
}

#[test]
fn mpi_io_same_in_both_abis() {
    same_in_both_abis_with_scratch_arg("io.c", 2, "io: done", true);
}

#[test]
fn conversions_same_in_both_abis() {
    let out = same_in_both_abis("abi_conv.c", 2, "abi_conv: all checks passed");
    for l in [
        "alltoallw: ok",
        "datatype envelope/contents: ok",
        "attribute callbacks: ok",
        "status arrays: ok",
        "user error handler: ok",
        "generalized request: ok",
    ] {
        assert!(out.lines().any(|x| x == l), "missing '{l}':\n{out}");
    }
}

/// The PyPI `mpich` wheel's venv (`python3 -m venv target/venv-mpich &&
/// target/venv-mpich/bin/pip install mpich`), or `OXMPI_MPICH_WHEEL_VENV`.
fn mpich_wheel_venv() -> PathBuf {
    std::env::var_os("OXMPI_MPICH_WHEEL_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("../../target/venv-mpich"))
}

/// Builds `name` into `dir` with the wheel's compiler `wrapper` and checks that the program
/// loads `soname` from our `lib` (the wheel links with a RUNPATH to its own library;
/// LD_LIBRARY_PATH wins).
fn wheel_build(wrapper: &Path, name: &str, dir: &Path, lib: &Path, soname: &str) -> PathBuf {
    let stem = Path::new(name).file_stem().expect("name").to_string_lossy();
    let exe = dir.join(format!("{stem}-wheel"));
    let out = Command::new(wrapper)
        .arg(src(name))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", wrapper.display()));
    assert!(
        out.status.success(),
        "{} {name}:\n{}",
        wrapper.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let ldd = Command::new("ldd")
        .arg(&exe)
        .env("LD_LIBRARY_PATH", lib)
        .output()
        .expect("run ldd");
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    let want = format!("{soname} => {}", lib.join(soname).display());
    assert!(ldd.contains(&want), "{exe:?} does not load {want}:\n{ldd}");
    exe
}

/// MPICH 5.0.2's own `mpicc` (the wheel's; its `mpi.h` has the MPI 4.1 functions, which
/// Debian's MPICH 4.0 lacks) builds programs using MPI 4.0/4.1 functions: they load and run
/// on our `libmpi.so.12` with the same output as our build.
#[test]
fn mpi_4_1_programs_built_by_the_mpich_wheels_mpicc_run_on_our_libmpi() {
    let wrapper = mpich_wheel_venv().join("bin/mpicc");
    if !wrapper.exists() {
        eprintln!(
            "SKIPPED: the PyPI mpich wheel is not installed ({} is missing); \
             tests/clients/mpich-wheel-env.sh (run by `cargo xtask test`) sets it up",
            wrapper.display()
        );
        return;
    }
    let dir = Scratch::new("wheel41");
    let lib = prefix().join("lib");
    for (name, n, last) in [
        ("mpi4_misc.c", 2, "mpi4_misc: all checks passed"),
        ("session.c", 3, "session: all checks passed"),
        ("persist.c", 3, "persist: all checks passed"),
        ("part.c", 2, "part: all checks passed"),
        ("std_datarep.c", 2, "std_datarep: all checks passed"),
    ] {
        let exe = wheel_build(&wrapper, name, &dir.0, &lib, "libmpi.so.12");
        let (text, err, code) = mpirun_with_libs(n, &exe, Some(&lib));
        assert!(
            code == 0 && text.lines().any(|l| l == last),
            "{name} built by MPICH 5.0.2's mpicc on our libmpi.so.12 ({code}):\n{text}\n{err}"
        );
        let ours = build(Build::Mpich, name, &dir.0);
        let (o, e, code) = mpirun(n, &ours);
        assert_eq!(code, 0, "{o}\n{e}");
        assert_eq!(
            o, text,
            "{name}: MPICH 5.0.2's build and ours print different lines"
        );
    }
}

#[test]
fn programs_built_by_the_mpich_wheels_mpicc_abi_run_on_our_library() {
    let venv = mpich_wheel_venv();
    let wrapper = venv.join("bin/mpicc_abi");
    if !wrapper.exists() {
        eprintln!(
            "SKIPPED: the PyPI mpich wheel is not installed ({} is missing); create it with \
             `python3 -m venv target/venv-mpich && target/venv-mpich/bin/pip install mpich` \
             or point OXMPI_MPICH_WHEEL_VENV at such a venv",
            wrapper.display()
        );
        return;
    }
    let dir = Scratch::new("wheel");
    // Our header declares exactly the functions, with the same types, as MPICH's.
    let protos = |flags: &[String], tag: &str| -> Vec<String> {
        let c = dir.0.join(format!("inc-{tag}.c"));
        let aux = dir.0.join(format!("{tag}.aux"));
        std::fs::write(&c, "#include <mpi.h>\n").expect("write inc.c");
        let st = Command::new("cc")
            .args(flags)
            .arg("-aux-info")
            .arg(&aux)
            .args(["-S", "-o", "/dev/null"])
            .arg(&c)
            .status()
            .expect("run cc -aux-info");
        assert!(st.success());
        let mut v: Vec<String> = std::fs::read_to_string(&aux)
            .expect("read aux-info")
            .lines()
            .filter_map(|l| l.split("*/").nth(1))
            .map(|l| l.trim().trim_start_matches("extern ").to_string())
            .filter(|l| {
                // standard functions only (MPICH's header adds MPIX_ extensions)
                l.split(" (")
                    .next()
                    .and_then(|d| d.split(' ').next_back())
                    .is_some_and(|name| name.starts_with("MPI_") || name.starts_with("PMPI_"))
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let theirs = protos(
        &[
            "-DMPI_ABI".into(),
            format!("-I{}", venv.join("include").display()),
        ],
        "mpich",
    );
    let ours = protos(
        &[format!("-I{}", prefix().join("include/abi").display())],
        "ours",
    );
    assert!(ours.len() > 1000, "{}", ours.len());
    let only_ours: Vec<_> = ours.iter().filter(|p| !theirs.contains(p)).collect();
    let only_theirs: Vec<_> = theirs.iter().filter(|p| !ours.contains(p)).collect();
    assert!(
        only_ours.is_empty() && only_theirs.is_empty(),
        "prototypes differ from MPICH's mpi_abi.h:\nonly ours: {only_ours:#?}\nonly MPICH's: {only_theirs:#?}"
    );

    let lib = prefix().join("lib");
    for (name, last) in [
        ("abi_basics.c", "abi_basics: all checks passed"),
        ("p2p.c", "p2p: all checks passed"),
        ("coll.c", "coll: all checks passed"),
    ] {
        let exe = wheel_build(&wrapper, name, &dir.0, &lib, "libmpi_abi.so.1");
        let (text, err, code) = mpirun_with_libs(2, &exe, Some(&lib));
        assert!(
            code == 0 && text.lines().any(|l| l == last),
            "{name} built by the wheel's mpicc_abi on our library:\n{text}\n{err}"
        );
        // Same output as the build with our own header.
        let ours = build(Build::Abi, name, &dir.0);
        let (o, e, code) = mpirun(2, &ours);
        assert_eq!(code, 0, "{o}\n{e}");
        assert_eq!(
            o, text,
            "{name}: wheel build and our build print different lines"
        );
    }
}

#[test]
fn abort_and_fatal_errors_in_the_standard_abi() {
    let dir = Scratch::new("abort");
    let exe = build(Build::Abi, "abort.c", &dir.0);
    let (out, err, code) = mpirun(2, &exe);
    assert_eq!(
        code, 7,
        "MPI_Abort(7) must end the job with 7:\n{out}\n{err}"
    );
    assert!(out.contains("rank 1 calling MPI_Abort(7)"), "{out}");
    assert!(!out.contains("MPI_Abort returned"), "{out}");
    let exe = build(Build::Abi, "fatal.c", &dir.0);
    let (out, err, code) = mpirun(2, &exe);
    assert_ne!(code, 0, "fatal.c exited 0:\n{out}");
    assert!(
        err.contains("MPI_Send") && err.contains("MPI_ERR_RANK"),
        "the fatal error message must name the call and the class:\n{err}"
    );
}

#[test]
fn library_soname_exports_and_wrapper() {
    let pre = prefix();
    let so = pre.join("lib/libmpi_abi.so.1");
    let out = Command::new("readelf")
        .arg("-d")
        .arg(&so)
        .output()
        .expect("run readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Library soname: [libmpi_abi.so.1]"), "{text}");
    assert_eq!(
        std::fs::read_link(pre.join("lib/libmpi_abi.so")).expect("libmpi_abi.so link"),
        Path::new("libmpi_abi.so.1")
    );
    assert!(pre.join("include/abi/mpi.h").is_file());
    let pc = std::fs::read_to_string(pre.join("lib/pkgconfig/oxmpi-abi.pc")).expect("oxmpi-abi.pc");
    assert!(
        pc.contains("-lmpi_abi") && pc.contains("include/abi"),
        "{pc}"
    );

    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .expect("run nm");
    let syms: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            (f.len() == 3).then(|| (f[1].to_string(), f[2].to_string()))
        })
        .collect();
    let has = |k: &str, n: &str| syms.iter().any(|(a, b)| a == k && b == n);
    for f in [
        "Abi_get_version",
        "Send",
        "Comm_toint",
        "Type_fromint",
        "Waitall",
    ] {
        assert!(has("T", &format!("PMPI_{f}")), "PMPI_{f} missing");
        assert!(has("W", &format!("MPI_{f}")), "weak MPI_{f} missing");
    }
    // ULFM, MPICH's MPIX_ extension, as libmpi.so.12 has it.
    for f in [
        "Comm_revoke",
        "Comm_shrink",
        "Comm_ishrink",
        "Comm_agree",
        "Comm_iagree",
        "Comm_failure_ack",
        "Comm_failure_get_acked",
        "Comm_get_failed",
    ] {
        assert!(has("T", &format!("PMPIX_{f}")), "PMPIX_{f} missing");
        assert!(has("W", &format!("MPIX_{f}")), "weak MPIX_{f} missing");
    }
    for (_, n) in &syms {
        assert!(
            ["MPI_", "PMPI_", "MPIX_", "PMPIX_"]
                .iter()
                .any(|p| n.starts_with(p)),
            "unexpected export {n}"
        );
    }
    // No Fortran-interop functions in the standard C ABI.
    assert!(!syms.iter().any(|(_, n)| n == "MPI_Comm_c2f"));
    // Every MPI_ function is a weak alias of a strong PMPI_ one (the profiling interface).
    let named = |k: &str, p: &str| -> Vec<String> {
        let mut v: Vec<String> = syms
            .iter()
            .filter(|(a, b)| a == k && b.starts_with(p))
            .map(|(_, b)| b[p.len()..].to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(named("W", "MPI_"), named("T", "PMPI_"));
    assert!(named("T", "MPI_").is_empty(), "a strong MPI_ function");
    assert_eq!(named("W", "MPIX_"), named("T", "PMPIX_"));
    assert!(named("T", "MPIX_").is_empty(), "a strong MPIX_ function");

    let show = Command::new(pre.join("bin/mpicc_abi"))
        .args(["-show", "x.c"])
        .output()
        .expect("run mpicc_abi -show");
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.contains(&format!("-I{}", pre.join("include/abi").display())),
        "{show}"
    );
    assert!(show.trim_end().ends_with("-lmpi_abi"), "{show}");

    // A program built through the mpicc_abi name needs libmpi_abi.so.1 only.
    let dir = Scratch::new("needed");
    let exe = build(Build::AbiName, "abi_basics.c", &dir.0);
    let d = Command::new("readelf")
        .arg("-d")
        .arg(&exe)
        .output()
        .expect("readelf");
    let d = String::from_utf8_lossy(&d.stdout);
    assert!(d.contains("[libmpi_abi.so.1]"), "{d}");
    assert!(!d.contains("[libmpi.so.12]"), "{d}");
}

/// The Fortran side of the standard ABI (`MPI_Abi_get/set_fortran_info`,
/// `MPI_Abi_get/set_fortran_booleans`), and no function of the standard ABI left
/// unsupported in the build (`share/oxmpi/abi-unsupported.txt` is empty).
#[test]
fn fortran_abi_functions_and_no_unsupported_function() {
    let dir = Scratch::new("fortran");
    let exe = build(Build::Abi, "abi_fortran.c", &dir.0);
    let (out, err, code) = mpirun(1, &exe);
    assert_eq!(code, 0, "abi_fortran:\n{out}\n{err}");
    for l in [
        "abi_fortran: info: 23 keys, integer size 4, 19 of 19 optional types supported",
        "abi_fortran: set_fortran_info: contradiction MPI_ERR_ABI, agreeing values accepted once, then MPI_ERR_ABI",
        "abi_fortran: booleans: LOGICAL*4 1/0 set by the library; 32 bytes set once",
        "abi_fortran: all checks passed",
    ] {
        assert!(out.lines().any(|x| x == l), "missing '{l}':\n{out}\n{err}");
    }
    let list = prefix().join("share/oxmpi/abi-unsupported.txt");
    let text = std::fs::read_to_string(&list).expect("share/oxmpi/abi-unsupported.txt");
    assert!(
        text.trim().is_empty(),
        "standard-ABI functions left unsupported:\n{text}"
    );
}

#[test]
fn generated_header_and_unimplemented_list_are_up_to_date() {
    for what in ["header", "unimplemented"] {
        let out = Command::new("python3")
            .arg(crate_dir().join("tools/gen_abi.py"))
            .args([what, "--check"])
            .output()
            .expect("run python3 tools/gen_abi.py");
        assert!(
            out.status.success(),
            "{what} is out of date:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn tools_interface_same_in_both_abis() {
    let out = same_in_both_abis("mpit.c", 2, "mpit: all checks passed");
    assert!(
        out.contains("mpit: eager limit 64, eager sends 1, rendezvous sends 1"),
        "{out}"
    );
}

#[test]
fn tools_interface_events_same_in_both_abis() {
    let out = same_in_both_abis("mpit_events.c", 2, "mpit_events: all checks passed");
    assert!(
        out.contains("mpit_events: 2 transports (self 1, sm 1), verbose lines seen 1"),
        "{out}"
    );
}

#[test]
fn tools_interface_cvar_writes_after_init_same_in_both_abis() {
    let out = same_in_both_abis("mpit_runtime.c", 2, "mpit_runtime: all checks passed");
    for l in [
        "mpit_runtime: eager limit 8192 then 256; 1000 bytes eager 1 rndv 0, then eager 0 rndv 1",
        "mpit_runtime: bcast sm 1 linear 0, forced linear: sm 0 linear 1",
        "mpit_runtime: reduce sm 1 binomial 0, ibarrier sm nonblocking 1 dissemination 0",
    ] {
        assert!(out.lines().any(|x| x == l), "no '{l}' in\n{out}");
    }
}

#[test]
fn tools_interface_per_communicator_counts_same_in_both_abis() {
    let out = same_in_both_abis("mpit_comm.c", 2, "mpit_comm: all checks passed");
    assert!(
        out.contains("mpit_comm: a 3 msgs 30 bytes, b 1 msgs 100 bytes"),
        "{out}"
    );
}

#[test]
fn a_preloaded_pmpi_tool_sees_the_user_calls_in_the_standard_abi() {
    let dir = Scratch::new("pmpi");
    let tool = dir.0.join("libpmpicount_abi.so");
    let out = Command::new(prefix().join("bin/mpicc"))
        .args(["-mpi-abi", "-shared", "-fPIC", "-o"])
        .arg(&tool)
        .arg(src("pmpi_counter.c"))
        .output()
        .expect("run mpicc -mpi-abi");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let app = build(Build::Abi, "pmpi_app.c", &dir.0);
    let preload = format!("LD_PRELOAD={}", tool.display());
    let (out, err, code) = mpirun_full(2, Path::new("env"), None, &[Path::new(&preload), &app]);
    assert_eq!(code, 0, "{out}\n{err}");
    // The same counts as the MPICH ABI's (`c_programs.rs`): the datatype queries answered
    // before the entry wrapper must still reach a tool through the standard ABI.
    assert_eq!(
        out,
        "pmpi rank 0: Init=1 Send=3 Recv=0 Isend=0 Irecv=0 Wait=0 Sendrecv=1 Bcast=1 Allreduce=2 Barrier=1 Type_free=6 \
         Type_commit=5 Type_size=4 Type_size_c=1 Type_get_extent=1 Type_get_extent_c=3 Type_get_envelope=4 Type_get_envelope_c=2\n\
         pmpi rank 1: Init=1 Send=0 Recv=3 Isend=0 Irecv=0 Wait=0 Sendrecv=1 Bcast=1 Allreduce=2 Barrier=1 Type_free=6 \
         Type_commit=5 Type_size=4 Type_size_c=1 Type_get_extent=1 Type_get_extent_c=3 Type_get_envelope=4 Type_get_envelope_c=2\n\
         pmpi_app: all checks passed\n"
    );
}

#[test]
fn persistent_collectives_same_in_both_abis() {
    let out = same_in_both_abis("persist.c", 3, "persist: all checks passed");
    assert!(out.contains("persist: bad input error classes: ok"));
}

#[test]
fn persistent_collectives_restarted_1000_times_same_in_both_abis() {
    let out = same_in_both_abis("persist_loop.c", 3, "persist_loop: all checks passed");
    assert!(out.contains("persist_loop: 1000 rounds of 8 persistent collectives: ok"));
}

#[test]
fn mpi4_split_types_same_in_both_abis() {
    let out = same_in_both_abis("split_hw.c", 3, "split_hw: all checks passed");
    assert!(out.contains("split_hw: resource_guided: ok"));
}

#[test]
fn mpi4_additions_same_in_both_abis() {
    same_in_both_abis("mpi4_misc.c", 2, "mpi4_misc: all checks passed");
}

#[test]
fn partitioned_communication_same_in_both_abis() {
    let out = same_in_both_abis("part.c", 2, "part: all checks passed");
    assert!(out.contains("part: a partition travels before the others are ready: ok"));
}

/// What the OSU micro-benchmarks' MPI-4 mode needs (persistent allreduce in timed loops,
/// session mode, then the world model), in both ABIs.
#[test]
fn osu_style_persistent_and_session_mode_same_in_both_abis() {
    let out = same_in_both_abis("osu_mpi4.c", 3, "osu_mpi4: all checks passed");
    assert!(out.contains("osu_mpi4: session mode, 5 sessions, 6 sizes right: ok"));
}

#[test]
fn sessions_same_in_both_abis() {
    let out = same_in_both_abis("session.c", 3, "session: all checks passed");
    assert!(out.contains("session: intercommunicator from two groups: ok"));
}
