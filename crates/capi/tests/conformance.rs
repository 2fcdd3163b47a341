//! MPI-3.1 conformance regression tests (issue 15): each C program of `tests/c/std_*.c`
//! checks one defect that an independent conformance suite found, and runs in both ABIs:
//! built with our `mpicc` (MPICH ABI, `libmpi.so.12`) and with `mpicc_abi` (MPI-5 standard
//! ABI, `libmpi_abi.so.1`), with the same output required from both.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

mod common;
use common::{c_source, compile, prefix, run_ok, Scratch};

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
