//! Building and installing the Fortran bindings (owned by `crates/fortran`):
//! `lib/libmpifort.so.12` (also named `libmpichfort.so.12`, the name MPICH-built Fortran
//! programs ask for), `include/mpif.h`, `include/mpi.mod` and the pkg-config file
//! `oxmpi-fort.pc`.
//!
//! `crates/fortran/tools/gen_fort.py` generates the wrappers for every `PMPI_*` function
//! the installed `libmpi.so.12` exports, `mpif.h` and the `mpi` module's source from the C
//! header, and the `mpi_f08` module with its procedures; the wrappers and
//! `crates/fortran/c/fort_rt.c` are compiled with the C compiler, the modules and the
//! `mpi_f08` procedures with gfortran (`.mod` files into `include/`), and all of it is
//! linked over `libmpi.so.12`.

use crate::run;
use std::fs;
use std::path::Path;
use std::process::Command;

/// Soname of the Fortran library.
const SONAME: &str = "libmpifort.so.12";

/// What the Fortran library exports: MPICH's Fortran names (all cases and underscore
/// forms) and its sentinel common blocks.
const VERSION_SCRIPT: &str = "{\n  global:\n    mpi_*;\n    pmpi_*;\n    MPI_*;\n    PMPI_*;\n    \
                              __mpi_f08_types_MOD_*;\n    mpipriv1_;\n    mpipriv2_;\n    mpiprivc_;\n    mpifcmb5_;\n    \
                              mpifcmb9_;\n  local:\n    *;\n};\n";

/// Build and install the Fortran bindings into `prefix`, whose `lib/libmpi.so.12` is
/// already installed; `work` is a scratch directory.
pub fn install(root: &Path, prefix: &Path, work: &Path) -> Result<(), String> {
    let crate_dir = root.join("crates/fortran");
    let lib = prefix.join("lib");
    let include = prefix.join("include");
    let work = work.join("oxmpi-fortran");
    fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;

    // 1. The PMPI_* functions libmpi.so.12 defines.
    let libmpi = lib.join("libmpi.so.12");
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&libmpi)
        .output()
        .map_err(|e| format!("cannot run nm (binutils) on {}: {e}", libmpi.display()))?;
    if !nm.status.success() {
        return Err(format!("nm {} failed: {}", libmpi.display(), nm.status));
    }
    let exports: String = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| n.starts_with("PMPI_"))
        .map(|n| format!("{n}\n"))
        .collect();
    let exports_file = work.join("mpich-exports.txt");
    fs::write(&exports_file, exports)
        .map_err(|e| format!("cannot write {}: {e}", exports_file.display()))?;

    // 2. Generated sources.
    let gen = crate_dir.join("tools/gen_fort.py");
    run(Command::new("python3")
        .arg(&gen)
        .arg("wrappers")
        .arg(&work)
        .arg(&exports_file))?;
    run(Command::new("python3").arg(&gen).arg("mpifh").arg(&work))?;
    run(Command::new("python3")
        .arg(&gen)
        .arg("f08")
        .arg(&work)
        .arg(&exports_file))?;

    // 3. The library.
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut objs = Vec::new();
    for src in [crate_dir.join("c/fort_rt.c"), work.join("fort_gen.c")] {
        let stem = src
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let obj = work.join(format!("{stem}.o"));
        run(Command::new(&cc)
            .args(["-c", "-fPIC", "-O2", "-g", "-std=gnu11", "-Wall", "-Werror"])
            .arg(format!("-I{}", root.join("crates/capi/include").display()))
            .arg(format!("-I{}", crate_dir.join("c").display()))
            .arg(&src)
            .arg("-o")
            .arg(&obj))?;
        objs.push(obj);
    }
    // The modules, compiled by gfortran into include/ (`mpi`: the mpif.h declarations;
    // `mpi_f08`: types, constants and generic interfaces), and the mpi_f08 procedures.
    copy(&work.join("mpif.h"), &include.join("mpif.h"))?;
    let fc = std::env::var("FC").unwrap_or_else(|_| "gfortran".into());
    for unit in ["mpi", "mpi_f08_types", "mpi_f08", "mpi_f08_procs"] {
        let obj = work.join(format!("{unit}.o"));
        let status = Command::new(&fc)
            .args(["-c", "-fPIC", "-O1", "-g"])
            .arg(format!("-I{}", include.display()))
            .arg(format!("-J{}", include.display()))
            .arg(work.join(format!("{unit}.f90")))
            .arg("-o")
            .arg(&obj)
            .status()
            .map_err(|e| {
                format!(
                    "cannot run the Fortran compiler '{fc}' (scripts/deps.sh installs gfortran): {e}"
                )
            })?;
        if !status.success() {
            return Err(format!("{fc} failed on {unit}.f90: {status}"));
        }
        objs.push(obj);
    }
    let script = work.join("libmpifort.map");
    fs::write(&script, VERSION_SCRIPT)
        .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    let so = lib.join(SONAME);
    let tmp = lib.join(format!("{SONAME}.tmp"));
    run(Command::new(&cc)
        .arg("-shared")
        .arg("-o")
        .arg(&tmp)
        .arg(format!("-Wl,-soname,{SONAME}"))
        .arg(format!("-Wl,--version-script={}", script.display()))
        .args([
            "-Wl,-z,defs",
            "-Wl,-rpath,$ORIGIN",
            "-Wl,--enable-new-dtags",
        ])
        .args(&objs)
        .arg(format!("-L{}", lib.display()))
        .args(["-lmpi", "-lgfortran", "-lm"]))?;
    fs::rename(&tmp, &so).map_err(|e| format!("cannot install {}: {e}", so.display()))?;
    for name in ["libmpifort.so", "libmpichfort.so.12"] {
        let l = lib.join(name);
        let _ = fs::remove_file(&l);
        std::os::unix::fs::symlink(SONAME, &l)
            .map_err(|e| format!("cannot link {}: {e}", l.display()))?;
    }

    let share = prefix.join("share/oxmpi");
    fs::create_dir_all(&share).map_err(|e| format!("cannot create {}: {e}", share.display()))?;
    copy(
        &work.join("fort-unsupported.txt"),
        &share.join("fort-unsupported.txt"),
    )?;
    let pc = lib.join("pkgconfig/oxmpi-fort.pc");
    fs::write(&pc, pkg_config(prefix))
        .map_err(|e| format!("cannot write {}: {e}", pc.display()))?;
    eprintln!("xtask: installed {}", so.display());
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    let _ = fs::remove_file(to);
    fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

/// The pkg-config file of the Fortran bindings (`oxmpi-fort.pc`).
fn pkg_config(prefix: &Path) -> String {
    format!(
        "prefix={}\n\
         libdir=${{prefix}}/lib\n\
         includedir=${{prefix}}/include\n\
         \n\
         Name: oxmpi-fort\n\
         Description: oxmpi Fortran bindings (mpif.h, use mpi; MPICH's libmpifort.so.12 ABI)\n\
         Version: {}\n\
         Requires: oxmpi\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lmpifort -lmpi\n",
        prefix.display(),
        env!("CARGO_PKG_VERSION")
    )
}
