//! MPI-3.1 conformance regression tests (issue 15): each C program of `tests/c/std_*.c`
//! checks one defect that an independent conformance suite found, and runs in both ABIs:
//! built with our `mpicc` (MPICH ABI, `libmpi.so.12`) and with `mpicc_abi` (MPI-5 standard
//! ABI, `libmpi_abi.so.1`), with the same output required from both. The legacy MPI-1
//! functions are also built with Debian's `mpicc.mpich` and run on our library, as binaries
//! built years ago would.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

mod common;
use common::{c_source, compile, mpirun, our_libs_first, prefix, run_ok, success, Scratch};
use std::ffi::OsStr;

/// Builds `tests/c/<name>` for both ABIs, runs each on `np` ranks (a hang ends at
/// mpirun's timeout), requires `last_line` and identical output; returns the output.
fn both_abis(name: &str, np: usize, last_line: &str) -> String {
    let dir = Scratch::new("std");
    let mut outs = Vec::new();
    for cc in ["mpicc", "mpicc_abi"] {
        let exe = dir.0.join(format!("{}-{cc}", name.trim_end_matches(".c")));
        compile(&prefix().join("bin").join(cc), &c_source(name), &exe);
        let (out, err) = run_ok(&exe, np, "60");
        assert!(
            out.lines().any(|l| l == last_line),
            "{name} ({cc}) did not print '{last_line}':\n{out}\nstderr:\n{err}"
        );
        outs.push(out);
    }
    assert_eq!(
        outs[0], outs[1],
        "{name}: output differs between the two ABIs"
    );
    outs.remove(0)
}

/// Builds `tests/c/<name>` with our `mpicc` and with Debian's `mpicc.mpich` (run on our
/// `libmpi.so.12` through `LD_LIBRARY_PATH`), runs each on `np` ranks, requires `last_line`
/// and identical output; returns the output.
fn ours_and_mpich(name: &str, np: usize, last_line: &str) -> String {
    let dir = Scratch::new("legacy");
    let mut outs = Vec::new();
    for cc in [prefix().join("bin/mpicc"), "mpicc.mpich".into()] {
        let tag = cc.file_name().map(|f| f.to_string_lossy().into_owned());
        let exe = dir.0.join(format!(
            "{}-{}",
            name.trim_end_matches(".c"),
            tag.unwrap_or_default()
        ));
        compile(&cc, &c_source(name), &exe);
        let np_s = np.to_string();
        let args = [
            OsStr::new("--timeout"),
            OsStr::new("60"),
            OsStr::new("-n"),
            OsStr::new(&np_s),
            exe.as_os_str(),
        ];
        let libs = our_libs_first();
        let out = success(
            &mpirun(&args, &[("LD_LIBRARY_PATH", libs.as_os_str())]),
            &format!("{name} built with {}", cc.display()),
        );
        assert!(
            out.lines().any(|l| l == last_line),
            "{name} ({}) did not print '{last_line}':\n{out}",
            cc.display()
        );
        outs.push(out);
    }
    assert_eq!(
        outs[0], outs[1],
        "{name}: output differs between our build and MPICH's"
    );
    outs.remove(0)
}

/// The functions (`MPI_*`, `PMPI_*`) a shared library exports.
fn exported_functions(lib: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success(), "nm {}", lib.display());
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            (f.len() == 3 && (f[1] == "T" || f[1] == "W")).then(|| f[2].to_string())
        })
        .filter(|n| n.starts_with("MPI_") || n.starts_with("PMPI_"))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Every function MPICH's `libmpi.so.12` exports (Debian's MPICH 4.0 `libmpich.so.12`, and
/// MPICH 5.0.2's from the PyPI wheel, which has the MPI 4.1 functions) is exported by ours,
/// so that binaries MPICH built load on our library. Left out: MPI 5.0's standard-ABI
/// functions (`MPI_Abi_*`, `*_toint`/`*_fromint`), which are `libmpi_abi.so.1`'s (mpi4py
/// takes a `libmpi.so.12` exporting `MPI_Abi_get_version` for a standard-ABI library), and
/// the `MPIX_` extensions.
#[test]
fn every_function_mpichs_libmpi_exports_is_ours_too() {
    let ours = exported_functions(&prefix().join("lib/libmpi.so.12"));
    let cc = std::process::Command::new("cc")
        .arg("-print-file-name=libmpich.so.12")
        .output()
        .expect("run cc -print-file-name");
    let debian = std::path::PathBuf::from(String::from_utf8_lossy(&cc.stdout).trim());
    assert!(
        debian.is_absolute() && debian.exists(),
        "Debian's libmpich.so.12 not found (scripts/deps.sh installs libmpich-dev)"
    );
    let venv = std::env::var_os("OXMPI_MPICH_WHEEL_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/venv-mpich")
        });
    let mut libs = vec![debian];
    let wheel = venv.join("lib/libmpi.so.12");
    if wheel.exists() {
        libs.push(wheel);
    } else {
        eprintln!(
            "SKIPPED (MPICH 5.0.2 half): the PyPI mpich wheel is not installed ({} is missing); \
             tests/clients/mpich-wheel-env.sh (run by `cargo xtask test`) sets it up",
            wheel.display()
        );
    }
    let mpi5_abi = |n: &str| {
        let n = n.trim_start_matches('P');
        n.starts_with("MPI_Abi_") || n.ends_with("_toint") || n.ends_with("_fromint")
    };
    for lib in libs {
        let missing: Vec<_> = exported_functions(&lib)
            .into_iter()
            .filter(|n| !mpi5_abi(n) && ours.binary_search(n).is_err())
            .collect();
        assert!(
            missing.is_empty(),
            "{} exports {} functions our libmpi.so.12 lacks: {missing:?}",
            lib.display(),
            missing.len()
        );
    }
}

#[test]
fn lastusedcode_is_at_least_err_lastcode() {
    both_abis("std_errcodes.c", 1, "std_errcodes: all checks passed");
}

#[test]
fn dims_create_is_balanced() {
    let out = both_abis("std_dims.c", 1, "std_dims: all checks passed");
    assert!(out.contains("72 in 2-D: 9 x 8"), "{out}");
}

#[test]
fn attributes_keyvals_and_callbacks() {
    let out = both_abis("std_attrs.c", 2, "std_attrs: all checks passed");
    for l in [
        "freed keyval: 1 copy, 2 delete callbacks",
        "callback errors: returned (MPI_ERR_OTHER)",
        "datatype free: 1 delete callback",
        "MPI_COMM_SELF at finalize: deleted 3 2 1",
    ] {
        assert!(out.contains(l), "missing '{l}':\n{out}");
    }
}

#[test]
fn deprecated_attribute_functions_in_both_abis_and_mpich_builds() {
    let last = "std_legacy_attr: all checks passed";
    let a = both_abis("std_legacy_attr.c", 2, last);
    let b = ours_and_mpich("std_legacy_attr.c", 2, last);
    assert_eq!(a, b);
    assert!(
        a.contains("MPI_Attr_*/MPI_Keyval_*: 2 delete callbacks"),
        "{a}"
    );
}

#[test]
fn removed_mpi1_functions_run_for_mpich_built_binaries() {
    let out = ours_and_mpich("std_legacy_mpi1.c", 2, "std_legacy_mpi1: all checks passed");
    assert!(
        out.contains("struct extent 24, hvector extent 36, hindexed ub 16"),
        "{out}"
    );
    assert!(
        out.contains("MPI_Errhandler_create/set/get: handler called 1 time"),
        "{out}"
    );
}

#[test]
fn no_op_accumulates_ignore_the_origin_and_zero_counts_do_nothing() {
    let out = both_abis("std_rma_noop.c", 2, "std_rma_noop: all checks passed");
    assert!(
        out.contains("MPI_NO_OP: get_accumulate 101, fetch_and_op 201"),
        "{out}"
    );
}

#[test]
fn minloc_maxloc_on_long_double_int() {
    let out = both_abis("std_minloc_ld.c", 2, "std_minloc_ld: all checks passed");
    assert!(
        out.contains("reductions: minloc (1.5, 11) (7.0, 20), maxloc (2.5, 10)"),
        "{out}"
    );
    assert!(
        out.contains("accumulate: minloc (3.0, 31), maxloc (9.0, 41)"),
        "{out}"
    );
}

#[test]
fn f90_parameterized_types() {
    let out = both_abis("std_f90.c", 2, "std_f90: all checks passed");
    assert!(
        out.contains("bad kinds: MPI_ERR_ARG; free refused"),
        "{out}"
    );
}

#[test]
fn datatype_lifetimes_and_huge_contiguous_types() {
    let out = both_abis("std_types_life.c", 2, "std_types_life: all checks passed");
    assert!(
        out.contains("persistent send with a freed datatype: 3 rounds"),
        "{out}"
    );
    assert!(
        out.contains("contiguous INT_MAX ints: size 8589934588"),
        "{out}"
    );
}

#[test]
fn file_views_zero_size_mismatch_and_external32() {
    let out = both_abis("std_io.c", 2, "std_io: all checks passed");
    for l in [
        "zero-size view on rank 1: set_view and write_all completed",
        "etype/filetype mismatch: MPI_ERR_IO on every rank",
        "external32: 01 02 03 04 in the file, read back 0x1020304 -2",
    ] {
        assert!(out.contains(l), "missing '{l}':\n{out}");
    }
}

/// User data representations (`MPI_Register_datarep(_c)`) in file views, in both ABIs and
/// built by MPICH's `mpicc` (MPICH's `libmpi.so.12` exports the function too).
#[test]
fn user_data_representations_in_file_views() {
    let last = "std_datarep: all checks passed";
    let a = both_abis("std_datarep.c", 2, last);
    let b = ours_and_mpich("std_datarep.c", 2, last);
    assert_eq!(a, b, "std_datarep: output differs between the builds");
    for l in [
        "std_datarep: swap view: 01 02 03 04 in the file, read back 0x1020314 (conversions: write 2 calls, read 1)",
        "std_datarep: MPI_Register_datarep_c: doubles byte-swapped in the file, read back 1.5 -2.25",
        "std_datarep: MPI_CONVERSION_FN_NULL: native data",
        "std_datarep: size-changing and undefined representations: MPI_ERR_UNSUPPORTED_DATAREP; failing conversion: MPI_ERR_CONVERSION",
    ] {
        assert!(a.lines().any(|x| x == l), "missing '{l}':\n{a}");
    }
}

#[test]
fn communicators_created_from_several_threads_at_once() {
    let out = both_abis("std_threads_ctx.c", 2, "std_threads_ctx: all checks passed");
    assert!(
        out.contains("4 threads x 15 rounds of dup, create, create_group, idup: ok"),
        "{out}"
    );
}

#[test]
fn comm_idup_is_nonblocking() {
    let out = both_abis("std_idup.c", 2, "std_idup: all checks passed");
    assert!(
        out.contains("idup: returned before the other rank called it; attributes copied"),
        "{out}"
    );
    assert!(
        out.contains("overlapping idups (one with info): 3 communicators"),
        "{out}"
    );
}

/// Partitioned communication with different partition counts on the two sides (the data
/// is matched by bytes) and on intercommunicators (MPI 4.0 §4.2): both ABIs on 1 and 3
/// ranks (an uneven intercommunicator), our build and MPICH's on 2.
#[test]
fn partitioned_with_different_partitionings_and_on_intercommunicators() {
    let last = "std_part: all checks passed";
    let has = |out: &str, line: &str| out.lines().any(|l| l == format!("std_part: {line}: ok"));
    let one = both_abis("std_part.c", 1, last);
    let ring = "3 send partitions of 40 into 4 receive partitions of 30";
    assert!(has(&one, ring), "{one}");
    let three = both_abis("std_part.c", 3, last);
    let two = ours_and_mpich("std_part.c", 2, last);
    for out in [&two, &three] {
        for line in [
            "8 send partitions of 15 into 2 receive partitions of 60",
            "a vector receive datatype under a different partitioning",
            "a receive partition arrives with the send partitions holding it",
            "an intercommunicator, 5 and 3 send partitions into 6 receive partitions",
            "more send bytes than the receive holds: MPI_ERR_TRUNCATE",
        ] {
            assert!(has(out, line), "missing '{line}':\n{out}");
        }
    }
}

#[test]
fn large_count_functions_in_both_abis_and_mpich_builds() {
    let last = "std_largecount: all checks passed";
    let a = both_abis("std_largecount.c", 2, last);
    let b = ours_and_mpich("std_largecount.c", 2, last);
    assert_eq!(a, b, "std_largecount: output differs between the builds");
    for line in [
        "type of 2^31+24 chars: size and extent only in the _c forms",
        "_c constructors, sizes, extents and envelopes",
        "MPI_Pack_c and MPI_Unpack_c",
        "small _c sends and receives",
        "collectives with MPI_Count counts and MPI_Aint displacements",
        "neighbourhood collectives and MPI_Reduce_local_c",
        "MPI-IO and MPI_Pack_external_c",
        "persistent collectives (MPI_*_init_c)",
        "one-sided _c functions and windows",
        "MPI_Op_create_c and MPI_Register_datarep_c",
    ] {
        assert!(out_has(&a, line), "missing '{line}':\n{a}");
    }
}

fn out_has(out: &str, line: &str) -> bool {
    out.lines().any(|l| l == format!("std_largecount: {line}"))
}

/// Bytes of memory available now (`MemAvailable` of `/proc/meminfo`), 0 if unknown.
fn available_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Runs `tests/c/<source>` with the argument `big` on 2 ranks (our `mpicc`) and requires
/// `line`, where 12 GiB of memory are available; else prints a SKIPPED line for `test`.
fn big_run(test: &str, source: &str, line: &str) {
    // Two ranks hold 2^31 + some bytes each and their copies, plus the transport's.
    let need: u64 = 12 << 30;
    let have = available_memory();
    if have < need {
        eprintln!(
            "SKIPPED {test}: {} MiB of memory available, {} MiB needed",
            have >> 20,
            need >> 20
        );
        return;
    }
    let dir = Scratch::new("big");
    let exe = dir.0.join(source.trim_end_matches(".c"));
    compile(&prefix().join("bin/mpicc"), &c_source(source), &exe);
    let args = [
        OsStr::new("--timeout"),
        OsStr::new("300"),
        OsStr::new("-n"),
        OsStr::new("2"),
        exe.as_os_str(),
        OsStr::new("big"),
    ];
    let out = success(&mpirun(&args, &[]), &format!("{source} big"));
    assert!(out.lines().any(|l| l == line), "{out}");
}

#[test]
fn a_message_above_int_max_with_send_c_and_recv_c() {
    big_run(
        "a_message_above_int_max_with_send_c_and_recv_c",
        "std_largecount.c",
        "std_largecount: a message of 2^31+24 MPI_CHARs with MPI_Send_c/MPI_Recv_c",
    );
}

/// The large-count collectives on intercommunicators take `MPI_Count` counts and arrays all
/// the way: counts above INT_MAX of an empty datatype in every blocking, nonblocking and
/// persistent form, and small data through `MPI_Count`/`MPI_Aint` arrays, in both ABIs
/// (2 and 3 ranks: groups of equal and of different sizes) and built by MPICH.
#[test]
fn large_count_collectives_on_intercommunicators() {
    let last = "std_lcount_inter: all checks passed";
    let has = |out: &str, line: &str| {
        out.lines()
            .any(|l| l == format!("std_lcount_inter: {line}: ok"))
    };
    let two = both_abis("std_lcount_inter.c", 2, last);
    let three = both_abis("std_lcount_inter.c", 3, last);
    let mpich = ours_and_mpich("std_lcount_inter.c", 2, last);
    assert_eq!(
        two, mpich,
        "std_lcount_inter: output differs between the builds"
    );
    for out in [&two, &three] {
        for line in [
            "blocking _c collectives, counts of 2^31+5 of an empty type",
            "nonblocking _c collectives, counts of 2^31+5 of an empty type",
            "persistent _c collectives, counts of 2^31+5 of an empty type",
            "small data through MPI_Count and MPI_Aint arrays",
        ] {
            assert!(has(out, line), "missing '{line}':\n{out}");
        }
    }
}

#[test]
fn a_bcast_above_int_max_across_an_intercommunicator() {
    big_run(
        "a_bcast_above_int_max_across_an_intercommunicator",
        "std_lcount_inter.c",
        "std_lcount_inter: MPI_Bcast_c of 2^31+8 MPI_CHARs across an intercommunicator: ok",
    );
}
