//! Integration tests of the installed Fortran bindings: our Fortran programs (`tests/f`)
//! built with our `mpifort` (and `mpifort -mpi-abi`) run under our `mpirun`; the same
//! programs built with Debian's MPICH (`mpif90.mpich`) run on our libraries through
//! `LD_LIBRARY_PATH`; Debian's MPICH-built ScaLAPACK testers and parallel HDF5 Fortran
//! library on our libraries; the wrapper's names and flags; the exported symbols against
//! Debian's `libmpichfort.so.12`.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`), gfortran
//! and Debian's `libmpich-dev`, `scalapack-mpi-test` and `libhdf5-mpich-dev` (installed by
//! `scripts/deps.sh`).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

// The installed-prefix helpers (`prefix()`, `Scratch`, `mpirun`) of oxmpi-capi's tests.
#[path = "../../capi/tests/common/mod.rs"]
mod common;
use common::{prefix, Scratch};

/// A Fortran test program of `tests/f`.
fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/f")
        .join(name)
}

/// Which compiler wrapper builds a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fc {
    /// Our `mpifort`.
    Ours,
    /// Our `mpifort -mpi-abi`: the bindings over the MPI-5 standard ABI.
    OursAbi,
    /// Debian's MPICH `mpif90.mpich`; the program then runs on our libraries through
    /// `LD_LIBRARY_PATH`.
    Mpich,
}

fn compile(fc: Fc, name: &str, dir: &Path) -> PathBuf {
    let stem = Path::new(name).file_stem().expect("file name");
    let exe = dir.join(format!("{}-{fc:?}", stem.to_string_lossy()));
    let wrapper = match fc {
        Fc::Ours | Fc::OursAbi => prefix().join("bin/mpifort"),
        Fc::Mpich => PathBuf::from("mpif90.mpich"),
    };
    let abi: &[&str] = if fc == Fc::OursAbi {
        &["-mpi-abi"]
    } else {
        &[]
    };
    // Module files go to the scratch directory, never next to the sources.
    let out = Command::new(&wrapper)
        .args(abi)
        .arg(format!("-J{}", dir.display()))
        .arg(source(name))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} (scripts/deps.sh installs gfortran and Debian's libmpich-dev): {e}",
                wrapper.display()
            )
        });
    assert!(
        out.status.success(),
        "building {name} with {} failed:\n{}",
        wrapper.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs `exe` on `n` ranks under our mpirun (with our libraries first in the search path
/// for MPICH-built programs); stdout, stderr, exit code.
fn run(fc: Fc, n: usize, exe: &Path, args: &[&Path]) -> (String, String, i32) {
    let libs = common::our_libs_first();
    let env: Vec<(&str, &OsStr)> = match fc {
        Fc::Mpich => vec![("LD_LIBRARY_PATH", libs.as_os_str())],
        Fc::Ours | Fc::OursAbi => vec![],
    };
    let n = n.to_string();
    let mut argv: Vec<&OsStr> = vec![
        OsStr::new("--timeout"),
        OsStr::new("120"),
        OsStr::new("-n"),
        OsStr::new(&n),
        exe.as_os_str(),
    ];
    argv.extend(args.iter().map(|a| a.as_os_str()));
    let out = common::mpirun(&argv, &env);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Builds `name` with both wrappers and runs each on `n` ranks; each run must succeed and
/// print every line of `expect`.
fn check(name: &str, n: usize, expect: &[&str], scratch_arg: bool) {
    check_with(
        &[Fc::Ours, Fc::OursAbi, Fc::Mpich],
        name,
        n,
        expect,
        scratch_arg,
    )
}

/// [`check`] with the given wrappers only.
fn check_with(fcs: &[Fc], name: &str, n: usize, expect: &[&str], scratch_arg: bool) {
    for &fc in fcs {
        let dir = Scratch::new("fortran");
        let exe = compile(fc, name, &dir.0);
        let data = Scratch::new("fortran-data");
        let args: Vec<&Path> = if scratch_arg { vec![&data.0] } else { vec![] };
        let (out, err, code) = run(fc, n, &exe, &args);
        assert_eq!(
            code, 0,
            "{name} ({fc:?} build, {n} ranks) failed with {code}:\n{out}\n{err}"
        );
        for l in expect {
            assert!(
                out.lines().any(|x| x == *l),
                "{name} ({fc:?} build, {n} ranks) did not print '{l}':\n{out}\n{err}"
            );
        }
        if fc == Fc::Mpich {
            let ldd = Command::new("ldd")
                .arg(&exe)
                .env("LD_LIBRARY_PATH", common::our_libs_first())
                .output();
            if let Ok(o) = ldd {
                let text = String::from_utf8_lossy(&o.stdout);
                assert!(
                    text.lines()
                        .filter(|l| l.contains("libmpichfort.so.12"))
                        .all(|l| l.contains(&prefix().join("lib").display().to_string())),
                    "{name}: the MPICH-built program does not load our libmpichfort.so.12:\n{text}"
                );
            }
        }
    }
}

#[test]
fn ring_with_use_mpi() {
    check("ring.f90", 3, &["ring: token 44", "ring: ok"], false);
}

#[test]
fn sentinels_with_mpif_h_fixed_form() {
    check("sentinels.f", 2, &["sentinels: ok"], false);
    check("sentinels.f", 3, &["sentinels: ok"], false);
}

#[test]
fn callbacks_written_in_fortran() {
    check(
        "callbacks.f90",
        2,
        &[
            "user op: ok",
            "ierror classes: ok",
            "error handler: ok",
            "attributes: ok",
            "generalized request: ok",
            "callbacks: ok",
        ],
        false,
    );
}

#[test]
fn deleted_mpi1_functions_and_f90_types() {
    check(
        "legacy.f",
        2,
        &[
            "legacy types: ok",
            "legacy attributes: ok",
            "legacy error handlers: ok",
            "legacy: ok",
        ],
        false,
    );
}

#[test]
fn rma_and_io() {
    check("rma_io.f90", 2, &["rma: ok", "io: ok", "rma_io: ok"], true);
}

/// `use mpi_f08` programs built with our mpifort (both ABIs) and with Debian's MPICH
/// (`mpif90.mpich`, MPICH's own `mpi_f08` module) running on our libmpichfort.so.12.
#[test]
fn f08_module() {
    check(
        "f08.f90",
        2,
        &["f08 p2p: ok", "f08 callbacks: ok", "f08: ok"],
        false,
    );
    check("f08.f90", 3, &["f08: ok"], false);
}

/// A non-contiguous section as a buffer: our module passes a contiguous copy; a program
/// built against MPICH's module passes the section, which our library refuses.
#[test]
fn f08_non_contiguous_sections() {
    check_with(
        &[Fc::Ours, Fc::OursAbi],
        "f08_sections.f90",
        2,
        &["sections: copied"],
        false,
    );
    check_with(
        &[Fc::Mpich],
        "f08_sections.f90",
        2,
        &["sections: refused"],
        false,
    );
}

/// The large-count (`_c`) forms through `mpi_f08`'s generic names, in both ABIs, and
/// through MPICH's module (its `MPI_Send_f08ts_large`, ... are ours).
#[test]
fn f08_large_count_forms() {
    check(
        "f08_large.f90",
        2,
        &[
            "f08 large p2p: ok",
            "f08 large collectives: ok",
            "f08 large datatypes: ok",
        ],
        false,
    );
}

#[test]
fn erroneous_call_without_ierror_goes_through_the_fatal_handler() {
    let dir = Scratch::new("fortran");
    let exe = compile(Fc::Ours, "fatal.f90", &dir.0);
    let (out, err, code) = run(Fc::Ours, 2, &exe, &[]);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(!out.contains("not reached"), "{out}");
    assert!(
        err.lines()
            .any(|l| l.contains("MPI_Send: MPI_ERR_RANK") && l.contains("rank 5")),
        "{err}"
    );
}

#[test]
fn mpifort_names_and_flags() {
    let lib = prefix().join("lib");
    for name in ["mpifort", "mpif77", "mpif90"] {
        let out = Command::new(prefix().join("bin").join(name))
            .args(["-show", "x.f90"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {name}: {e}"));
        let line = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name} -show failed");
        assert!(line.starts_with("gfortran "), "{name}: {line}");
        assert!(
            line.contains(&format!("-Wl,-rpath,{}", lib.display()))
                && line.trim_end().ends_with("-lmpifort -lmpi"),
            "{name}: {line}"
        );
    }
    let pc = std::fs::read_to_string(lib.join("pkgconfig/oxmpi-fort.pc")).expect("oxmpi-fort.pc");
    assert!(pc.contains("-lmpifort -lmpi"), "{pc}");
    let pc = std::fs::read_to_string(lib.join("pkgconfig/oxmpi-fort-abi.pc"))
        .expect("oxmpi-fort-abi.pc");
    assert!(pc.contains("-lmpifort_abi -lmpi_abi"), "{pc}");
    let out = Command::new(prefix().join("bin/mpifort"))
        .args(["-mpi-abi", "-show", "x.f90"])
        .output()
        .expect("run mpifort");
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains(&format!("-I{}", prefix().join("include/abi").display()))
            && line.trim_end().ends_with("-lmpifort_abi -lmpi_abi"),
        "{line}"
    );
}

/// Defined dynamic symbols of a shared library.
fn exports(lib: &Path) -> BTreeSet<String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .unwrap_or_else(|e| panic!("cannot run nm on {}: {e}", lib.display()));
    assert!(out.status.success(), "nm {} failed", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect()
}

/// The functions our C library defines, lower case without `MPI_` (`send`, `send_c`).
fn c_functions() -> BTreeSet<String> {
    exports(&prefix().join("lib/libmpi.so.12"))
        .iter()
        .filter_map(|n| n.strip_prefix("PMPI_"))
        .map(|n| n.to_lowercase())
        .collect()
}

/// Debian's MPICH Fortran library, whose exports ours is compared with.
fn mpich_fortran_library() -> &'static Path {
    let mpich = Path::new("/usr/lib/x86_64-linux-gnu/libmpichfort.so.12");
    assert!(
        mpich.exists(),
        "{} is missing (scripts/deps.sh installs Debian's libmpich-dev)",
        mpich.display()
    );
    mpich
}

#[test]
fn exports_mpichs_fortran_names_for_every_function_the_c_library_has() {
    let ours = exports(&prefix().join("lib/libmpifort.so.12"));
    let c_lower = c_functions();
    let mpich = mpich_fortran_library();
    let mut missing = Vec::new();
    let mut checked = 0;
    for sym in exports(mpich) {
        // MPICH's `use mpi`/mpif.h names: mpi_x_ (and the other spellings of the same x).
        let Some(base) = sym.strip_prefix("mpi_").and_then(|s| s.strip_suffix('_')) else {
            continue;
        };
        if base.ends_with("_f08") || base.ends_with("_f08ts") || base.ends_with('_') {
            continue;
        }
        if !c_lower.contains(base) {
            continue;
        }
        checked += 1;
        for name in [
            sym.clone(),
            format!("mpi_{base}"),
            format!("mpi_{base}__"),
            format!("MPI_{}", base.to_uppercase()),
            format!("pmpi_{base}_"),
        ] {
            if !ours.contains(&name) {
                missing.push(name);
            }
        }
    }
    assert!(checked > 300, "only {checked} functions compared");
    assert!(
        missing.is_empty(),
        "libmpifort.so.12 lacks {} of MPICH's Fortran names: {missing:?}",
        missing.len()
    );
    // Fortran-only procedures and the MPI-1 functions MPICH still has.
    let theirs = exports(mpich);
    for f in [
        "address",
        "type_struct",
        "type_hindexed",
        "type_hvector",
        "type_extent",
        "type_lb",
        "type_ub",
        "keyval_create",
        "keyval_free",
        "attr_put",
        "attr_get",
        "attr_delete",
        "errhandler_create",
        "errhandler_set",
        "errhandler_get",
        "type_create_f90_real",
        "type_create_f90_complex",
        "type_create_f90_integer",
        "comm_dup_fn",
        "comm_null_copy_fn",
        "comm_null_delete_fn",
        "type_dup_fn",
        "win_dup_fn",
        "dup_fn",
        "null_copy_fn",
        "null_delete_fn",
        "conversion_fn_null",
    ] {
        let name = format!("mpi_{f}_");
        assert!(
            ours.contains(&name) && theirs.contains(&name),
            "{name}: ours {}, MPICH's {}",
            ours.contains(&name),
            theirs.contains(&name)
        );
    }
    for block in [
        "mpipriv1_",
        "mpipriv2_",
        "mpiprivc_",
        "mpifcmb5_",
        "mpifcmb9_",
    ] {
        assert!(ours.contains(block), "common block {block} not exported");
    }
}

/// What programs built against MPICH's `mpi_f08` take from Debian's `libmpichfort.so.12`
/// is in ours: the procedures (`mpi_send_f08ts_`, `mpi_send_f08ts_large_`, ...) of every
/// function the C library has, the sentinels, constants, callbacks and comparisons of
/// MPICH's modules (not its derived-type bookkeeping `__vtab_*`, `__def_init_*`,
/// `__copy_*`, used by polymorphic code only, nor its helpers over its internal C types:
/// `_c2f`/`_f2c`, status assignments to and from its `c_Status`).
#[test]
fn exports_mpichs_f08_names() {
    let ours = exports(&prefix().join("lib/libmpifort.so.12"));
    let c = c_functions();
    // Functions whose Fortran forms report MPI_ERR_UNSUPPORTED_OPERATION or whose
    // large-count form the generic names cannot take (UNIMPLEMENTED.md).
    let mut excluded = BTreeSet::new();
    for f in [
        "fort-unsupported-mpi.txt",
        "fort-f08-no-large-count-mpi.txt",
    ] {
        let p = prefix().join("share/oxmpi").join(f);
        let text = std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
        for l in text.lines() {
            let name = l.split(':').next().unwrap_or(l);
            excluded.insert(name.trim_start_matches("MPI_").to_lowercase());
        }
    }
    let mut missing = Vec::new();
    let mut checked = 0;
    for sym in exports(mpich_fortran_library()) {
        let wanted = if let Some(x) = sym.strip_prefix("mpi_").and_then(|s| s.strip_suffix('_')) {
            // The C function behind an mpi_f08 procedure name.
            let f = [
                ("_f08ts_large", "_c"),
                ("_f08_large", "_c"),
                ("_f08ts", ""),
                ("_f08", ""),
            ]
            .iter()
            .find_map(|(sfx, c_sfx)| x.strip_suffix(sfx).map(|b| format!("{b}{c_sfx}")));
            f.is_some_and(|f| c.contains(&f) && !excluded.contains(&f))
        } else {
            // Derived-type bookkeeping, and helpers over MPICH's internal C types.
            let internal = [
                "___vtab_",
                "___def_init_",
                "___copy_",
                "_c2f",
                "_f2c",
                "_assign_",
            ];
            [
                "MPIR_F08_",
                "__mpi_f08_compile_constants_MOD_",
                "__mpi_f08_link_constants_MOD_",
                "__mpi_f08_callbacks_MOD_",
                "__mpi_f08_types_MOD_",
            ]
            .iter()
            .any(|p| sym.starts_with(p))
                && !internal.iter().any(|i| sym.contains(i))
        };
        if wanted {
            checked += 1;
            if !ours.contains(&sym) {
                missing.push(sym);
            }
        }
    }
    assert!(checked > 600, "only {checked} names compared");
    assert!(
        missing.is_empty(),
        "libmpifort.so.12 lacks {} of the names MPICH's mpi_f08 uses: {missing:?}",
        missing.len()
    );
}

#[test]
fn every_unsupported_function_is_documented() {
    let mut list = String::new();
    for f in [
        "fort-unsupported-mpi.txt",
        "fort-unsupported-mpi_abi.txt",
        "fort-f08-no-large-count-mpi.txt",
        "fort-f08-no-large-count-mpi_abi.txt",
    ] {
        let p = prefix().join("share/oxmpi").join(f);
        list += &std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    }
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("UNIMPLEMENTED.md"))
            .expect("UNIMPLEMENTED.md");
    for line in list.lines() {
        let name = line.split(':').next().unwrap_or(line);
        assert!(
            doc.contains(&format!("`{name}`")),
            "{name} returns MPI_ERR_UNSUPPORTED_OPERATION in Fortran (or has no mpi_f08 \
             large-count form) but UNIMPLEMENTED.md does not name it"
        );
    }
}

/// Debian's ScaLAPACK testers built against MPICH (package `scalapack-mpi-test`, installed
/// by scripts/deps.sh), copied with their input files into a scratch directory.
fn scalapack_testers(dir: &Path) -> PathBuf {
    let src = Path::new("/usr/lib/x86_64-linux-gnu/scalapack/mpich-tests");
    assert!(
        src.join("xdlu").exists(),
        "{} is missing: scripts/deps.sh installs Debian's scalapack-mpi-test",
        src.display()
    );
    let out = Command::new("cp")
        .arg("-rL")
        .arg(src)
        .arg(dir)
        .output()
        .expect("run cp");
    assert!(out.status.success(), "cp -rL {} failed", src.display());
    dir.join("mpich-tests")
}

/// Runs the tester `name` of `dir` on 4 ranks (as Debian's CTest files do) in `dir`, on
/// our libraries.
fn run_tester(dir: &Path, name: &str) -> std::process::Output {
    common::mpirun(
        &[
            OsStr::new("--timeout"),
            OsStr::new("300"),
            OsStr::new("-n"),
            OsStr::new("4"),
            OsStr::new("--wdir"),
            dir.as_os_str(),
            dir.join(name).as_os_str(),
        ],
        &[("LD_LIBRARY_PATH", &common::our_libs_first())],
    )
}

/// ScaLAPACK's LU tester (C BLACS over our libmpi.so.12) passes its residual checks.
#[test]
fn scalapack_lu_tester_built_by_debian_against_mpich() {
    let dir = Scratch::new("scalapack");
    let tests = scalapack_testers(&dir.0);
    let out = run_tester(&tests, "xdlu");
    let text = common::success(&out, "xdlu (ScaLAPACK LU tester)");
    assert!(
        text.contains("240 tests completed and passed residual checks.")
            && text.contains("0 tests completed and failed residual checks."),
        "{text}"
    );
}

/// BLACS's Fortran tester calls MPI from Fortran through our libmpichfort.so.12: every
/// test passes, and its last test, BLACS_ABORT, ends the job through MPI_Abort.
#[test]
fn blacs_fortran_tester_built_by_debian_against_mpich() {
    let dir = Scratch::new("scalapack");
    let blacs = scalapack_testers(&dir.0).join("BLACS");
    let libs = common::our_libs_first();
    let ldd = Command::new("ldd")
        .arg(blacs.join("xFbtest"))
        .env("LD_LIBRARY_PATH", &libs)
        .output()
        .expect("run ldd");
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    assert!(
        ldd.lines().any(|l| l.contains("libmpichfort.so.12")
            && l.contains(&prefix().join("lib").display().to_string())),
        "xFbtest does not load our libmpichfort.so.12:\n{ldd}"
    );
    let out = run_tester(&blacs, "xFbtest");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    let summaries: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" TESTS: ") && l.contains(" PASSED,"))
        .collect();
    assert!(summaries.len() >= 20, "{text}\n{err}");
    for l in &summaries {
        assert!(l.trim_end().ends_with(" 0 FAILED."), "{l}");
    }
    for t in [
        "PASSED  BLACS_PNUM/BLACS_PCOORD TEST",
        "PASSED  BLACS_GRIDMAP TEST",
        "PASSED  LOCALLY-BLOCKING CONTIGUOUS SEND TEST",
        "PASSED  LOCALLY-BLOCKING NON-CONTIGUOUS SEND TEST",
        "PASSED  BLACS_SET/BLACS_GET TESTS",
    ] {
        assert!(text.contains(t), "missing '{t}':\n{text}\n{err}");
    }
    assert!(
        err.contains("MPI_Abort called with error code -1"),
        "BLACS_ABORT did not end the job:\n{err}"
    );
}

/// `use mpi` declares every procedure (as MPICH's module does): a call with a missing
/// argument or an argument of the wrong type does not compile, while choice buffers take
/// any type.
#[test]
fn use_mpi_checks_arguments() {
    let dir = Scratch::new("fortran");
    let good = dir.0.join("good.f90");
    let bad = dir.0.join("bad.f90");
    std::fs::write(
        &good,
        "program good\n  use mpi\n  integer :: ierr, rank\n  real :: x(3)\n  \
         double precision :: t\n  call MPI_Init(ierr)\n  \
         call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)\n  \
         call MPI_Bcast(x, 3, MPI_REAL, 0, MPI_COMM_WORLD, ierr)\n  \
         call MPI_Bcast(rank, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)\n  \
         t = MPI_Wtime()\n  call MPI_Finalize(ierr)\nend program good\n",
    )
    .expect("write good.f90");
    std::fs::write(
        &bad,
        "program bad\n  use mpi\n  integer :: ierr\n  call MPI_Init(ierr)\n  \
         call MPI_Comm_rank(MPI_COMM_WORLD, ierr)\n  call MPI_Finalize(ierr)\nend program bad\n",
    )
    .expect("write bad.f90");
    for abi in [&[][..], &["-mpi-abi"][..]] {
        for (src, ok) in [(&good, true), (&bad, false)] {
            let out = Command::new(prefix().join("bin/mpifort"))
                .args(abi)
                .arg(format!("-J{}", dir.0.display()))
                .arg(src)
                .arg("-o")
                .arg(dir.0.join("a.out"))
                .output()
                .expect("run mpifort");
            assert_eq!(
                out.status.success(),
                ok,
                "{} {abi:?}:\n{}",
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Debian's MPICH-built parallel HDF5 Fortran library (`libhdf5_mpich_fortran.so`, package
/// `libhdf5-mpich-dev`, installed by scripts/deps.sh) on our libraries: a program of ours
/// built with Debian's `h5pfc.mpich -shlib` writes a dataset collectively through MPI-IO
/// and reads it back.
#[test]
fn parallel_hdf5_fortran_built_by_debian_against_mpich() {
    let dir = Scratch::new("hdf5");
    let data = Scratch::new("hdf5-data");
    let exe = dir.0.join("ph5_rows");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hdf5/ph5_rows.f90");
    // h5pfc leaves its object file in the current directory: the scratch one.
    let out = Command::new("h5pfc.mpich")
        .current_dir(&dir.0)
        .arg("-shlib")
        .arg(format!("-J{}", dir.0.display()))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run h5pfc.mpich (scripts/deps.sh installs libhdf5-mpich-dev): {e}")
        });
    assert!(
        out.status.success(),
        "h5pfc.mpich failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let libs = common::our_libs_first();
    let ldd = Command::new("ldd")
        .arg(&exe)
        .env("LD_LIBRARY_PATH", &libs)
        .output()
        .expect("run ldd");
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    let ours = prefix().join("lib").display().to_string();
    assert!(
        ldd.contains("libhdf5_mpich_fortran.so")
            && ldd
                .lines()
                .any(|l| l.contains("libmpichfort.so.12") && l.contains(&ours)),
        "{ldd}"
    );
    for n in [2, 3] {
        let (stdout, stderr, code) = run(Fc::Mpich, n, &exe, &[&data.0]);
        assert_eq!(code, 0, "ph5_rows on {n} ranks:\n{stdout}\n{stderr}");
        for l in ["ph5: collective write ok", "ph5: read back ok"] {
            assert!(stdout.lines().any(|x| x == l), "{stdout}\n{stderr}");
        }
    }
}
