//! Building and installing the MPI library (`lib/libmpi.so.12`), `include/mpi.h`
//! and the pkg-config file. Owned by the C ABI layer.
//!
//! The library is linked from the `oxmpi-capi` staticlib with the system C compiler:
//! `cc -shared -Wl,-soname,libmpi.so.12 -Wl,--version-script=... --whole-archive lib.a`.
//! The version script exports only `MPI_*`, `PMPI_*` and `MPIR_Dup_fn` (unversioned, like
//! MPICH) and hides the Rust internals.

use crate::run;
use std::fs;
use std::path::Path;
use std::process::Command;

/// Soname of the MPICH-ABI library.
const SONAME: &str = "libmpi.so.12";

/// Native libraries the Rust standard library needs when linked from a staticlib.
const NATIVE_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

const VERSION_SCRIPT: &str =
    "{\n  global:\n    MPI_*;\n    PMPI_*;\n    MPIR_Dup_fn;\n  local:\n    *;\n};\n";

/// Build the MPI library and install it with its headers into `prefix`.
pub fn install(root: &Path, prefix: &Path, release: bool) -> Result<(), String> {
    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build
        .current_dir(root)
        .args(["build", "-p", "oxmpi-capi", "--lib"]);
    if release {
        build.arg("--release");
    }
    run(&mut build)?;
    let profile = if release { "release" } else { "debug" };
    let target = root.join("target").join(profile);
    let archive = target.join("liboxmpi_capi.a");
    let script = target.join("oxmpi-libmpi.map");
    fs::write(&script, VERSION_SCRIPT)
        .map_err(|e| format!("cannot write {}: {e}", script.display()))?;

    let lib = prefix.join("lib");
    let include = prefix.join("include");
    let pkgconfig = lib.join("pkgconfig");
    let examples = prefix.join("share/oxmpi/examples");
    for d in [&lib, &include, &pkgconfig, &examples] {
        fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }

    // Link into a temporary name, then rename: a running program keeps the old file.
    let so = lib.join(SONAME);
    let tmp = lib.join(format!("{SONAME}.tmp"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut link = Command::new(&cc);
    link.arg("-shared")
        .arg("-o")
        .arg(&tmp)
        .arg(format!("-Wl,-soname,{SONAME}"))
        .arg(format!("-Wl,--version-script={}", script.display()))
        .arg("-Wl,-z,now")
        .arg("-Wl,--whole-archive")
        .arg(&archive)
        .arg("-Wl,--no-whole-archive")
        .args(NATIVE_LIBS);
    run(&mut link)?;
    fs::rename(&tmp, &so).map_err(|e| format!("cannot install {}: {e}", so.display()))?;

    // Development link and the Debian MPICH library name (binaries built with
    // `mpicc.mpich` need `libmpich.so.12`), both pointing at our library.
    for name in ["libmpi.so", "libmpich.so.12"] {
        let l = lib.join(name);
        let _ = fs::remove_file(&l);
        std::os::unix::fs::symlink(SONAME, &l)
            .map_err(|e| format!("cannot link {}: {e}", l.display()))?;
    }

    let capi = root.join("crates/capi");
    copy(&capi.join("include/mpi.h"), &include.join("mpi.h"))?;
    copy(&capi.join("examples/ring.c"), &examples.join("ring.c"))?;

    let pc = pkg_config(prefix);
    for name in ["oxmpi.pc", "mpich.pc"] {
        let f = pkgconfig.join(name);
        fs::write(&f, &pc).map_err(|e| format!("cannot write {}: {e}", f.display()))?;
    }
    eprintln!("xtask: installed {}", so.display());
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    let _ = fs::remove_file(to);
    fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

/// The pkg-config file (installed as `oxmpi.pc` and `mpich.pc`, which rsmpi's build
/// probe looks for).
fn pkg_config(prefix: &Path) -> String {
    format!(
        "prefix={}\n\
         libdir=${{prefix}}/lib\n\
         includedir=${{prefix}}/include\n\
         \n\
         Name: oxmpi\n\
         Description: oxmpi MPI library (MPICH ABI, libmpi.so.12)\n\
         Version: {}\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lmpi\n",
        prefix.display(),
        env!("CARGO_PKG_VERSION")
    )
}
