//! Building and installing the Fortran bindings (owned by `crates/fortran`), once per C ABI:
//!
//! * over the MPICH ABI: `lib/libmpifort.so.12` (also named `libmpichfort.so.12`, the name
//!   MPICH-built Fortran programs ask for), `include/mpif.h` and the modules `mpi`,
//!   `mpi_f08` in `include/`, the pkg-config file `oxmpi-fort.pc`;
//! * over the MPI-5 standard ABI (`mpifort -mpi-abi`): `lib/libmpifort_abi.so.1`,
//!   `include/abi/mpif.h` and the modules in `include/abi/`, `oxmpi-fort-abi.pc`.
//!
//! `crates/fortran/tools/gen_fort.py` generates the wrappers for every `PMPI_*` function
//! the installed C library exports, `mpif.h` and the `mpi` module's source from the C
//! header, and the `mpi_f08` module with its procedures; the wrappers and
//! `crates/fortran/c/fort_rt.c` are compiled with the C compiler, the modules and the
//! `mpi_f08` procedures with gfortran (`.mod` files into the include directory), and all
//! of it is linked over the C library.

use crate::libmpi::{copy, defined_symbols, PC_RELOCATABLE_PREFIX};
use crate::run;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the Fortran library exports: MPICH's Fortran names (all cases and underscore
/// forms), the modules' procedures and the sentinel common blocks.
const VERSION_SCRIPT: &str = "{\n  global:\n    mpi_*;\n    pmpi_*;\n    MPI_*;\n    PMPI_*;\n    \
                              __mpi_MOD_*;\n    __mpi_sizeofs_MOD_*;\n    __mpi_f08_MOD_*;\n    __mpi_f08_types_MOD_*;\n    \
                              __mpi_f08_callbacks_MOD_*;\n    __mpi_f08_compile_constants_MOD_*;\n    \
                              __mpi_f08_link_constants_MOD_*;\n    MPIR_F08_*;\n    mpipriv1_;\n    mpipriv2_;\n    mpiprivc_;\n    mpifcmb5_;\n    \
                              mpifcmb9_;\n  local:\n    *;\n};\n";

/// One build of the bindings.
struct Flavour {
    /// Soname of the Fortran library.
    soname: &'static str,
    /// Other names of it in `lib/`.
    links: &'static [&'static str],
    /// The C library it is linked over (`lib<c_lib>.so`) and its file name.
    c_lib: &'static str,
    c_file: &'static str,
    /// The C header the wrappers are compiled against (relative to the workspace).
    c_include: &'static str,
    /// Where `mpif.h` and the `.mod` files go (relative to the prefix).
    include: &'static str,
    /// Extra arguments of gen_fort.py and the C compiler.
    gen_args: &'static [&'static str],
    cflags: &'static [&'static str],
    /// pkg-config name and description, and other names of the same file (the names
    /// other MPIs' users ask for).
    pc_name: &'static str,
    pc_aliases: &'static [&'static str],
    pc_description: &'static str,
}

const FLAVOURS: &[Flavour] = &[
    Flavour {
        soname: "libmpifort.so.12",
        links: &["libmpifort.so", "libmpichfort.so.12"],
        c_lib: "mpi",
        c_file: "libmpi.so.12",
        c_include: "crates/capi/include",
        include: "include",
        gen_args: &[],
        cflags: &[],
        pc_name: "oxmpi-fort",
        // Debian's `mpi-fort.pc` alternative (Open MPI's `ompi-fort.pc` there); MPICH ships
        // no Fortran .pc file (its `mpich.pc` only has an `fflags` variable).
        pc_aliases: &["mpi-fort.pc"],
        pc_description:
            "oxmpi Fortran bindings (mpif.h, use mpi, use mpi_f08; MPICH's libmpifort.so.12 ABI)",
    },
    Flavour {
        soname: "libmpifort_abi.so.1",
        links: &["libmpifort_abi.so"],
        c_lib: "mpi_abi",
        c_file: "libmpi_abi.so.1",
        c_include: "crates/capi-abi/include/mpi_abi",
        include: "include/abi",
        gen_args: &["--abi"],
        cflags: &["-DOXF_ABI"],
        pc_name: "oxmpi-fort-abi",
        pc_aliases: &[],
        pc_description: "oxmpi Fortran bindings over the MPI-5 standard ABI (libmpi_abi.so.1)",
    },
];

/// Build and install both flavours of the Fortran bindings into `prefix`, whose C
/// libraries are already installed; `work` is a scratch directory.
pub fn install(root: &Path, prefix: &Path, work: &Path) -> Result<(), String> {
    for f in FLAVOURS {
        install_flavour(
            root,
            prefix,
            &work.join(format!("oxmpi-fortran-{}", f.c_lib)),
            f,
        )?;
    }
    // Module files are compiler-specific: the packages say which compiler made them.
    let fc = std::env::var("FC").unwrap_or_else(|_| "gfortran".into());
    let version = Command::new(&fc)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run '{fc} --version': {e}"))?;
    let first = String::from_utf8_lossy(&version.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    write(
        &prefix.join("share/oxmpi").join(FORTRAN_COMPILER_FILE),
        &format!("{first}\n"),
    )
}

/// `share/oxmpi/<this>`: the first line of `gfortran --version` of the compiler that made
/// the installed `.mod` files.
pub const FORTRAN_COMPILER_FILE: &str = "fortran-compiler.txt";

fn mkdir(d: &Path) -> Result<(), String> {
    fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))
}

fn write(f: &Path, text: &str) -> Result<(), String> {
    fs::write(f, text).map_err(|e| format!("cannot write {}: {e}", f.display()))
}

/// The `PMPI_*` functions the shared library `lib` defines, one per line.
fn pmpi_exports(lib: &Path) -> Result<String, String> {
    Ok(defined_symbols(lib, "-D")?
        .into_iter()
        .filter(|n| n.starts_with("PMPI_"))
        .map(|n| format!("{n}\n"))
        .collect())
}

fn install_flavour(root: &Path, prefix: &Path, work: &Path, f: &Flavour) -> Result<(), String> {
    let crate_dir = root.join("crates/fortran");
    let lib = prefix.join("lib");
    let include = prefix.join(f.include);
    mkdir(work)?;
    mkdir(&include)?;

    // 1. Generated sources, for the functions the C library defines.
    let exports_file = work.join("c-exports.txt");
    write(&exports_file, &pmpi_exports(&lib.join(f.c_file))?)?;
    let gen = crate_dir.join("tools/gen_fort.py");
    for (what, exports) in [("wrappers", true), ("mpifh", true), ("f08", true)] {
        let mut cmd = Command::new("python3");
        cmd.arg(&gen).arg(what).arg(work);
        if exports {
            cmd.arg(&exports_file);
        }
        run(cmd.args(f.gen_args))?;
    }

    // 2. The C half.
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut objs: Vec<PathBuf> = Vec::new();
    for src in [
        crate_dir.join("c/fort_rt.c"),
        crate_dir.join("c/mpich_f08.c"),
        work.join("fort_gen.c"),
    ] {
        let stem = src
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let obj = work.join(format!("{stem}.o"));
        run(Command::new(&cc)
            .args(["-c", "-fPIC", "-O2", "-g", "-std=gnu11", "-Wall", "-Werror"])
            .args(f.cflags)
            .arg(format!("-I{}", root.join(f.c_include).display()))
            .arg(format!("-I{}", crate_dir.join("c").display()))
            .arg(&src)
            .arg("-o")
            .arg(&obj))?;
        objs.push(obj);
    }

    // 3. The modules, compiled by gfortran into the include directory (`mpi`: the mpif.h
    // declarations; `mpi_f08`: types, constants and generic interfaces), and the mpi_f08
    // procedures.
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

    // 4. The library, linked into a temporary name, then renamed: a running program keeps
    // the old file.
    let script = work.join("libmpifort.map");
    write(&script, VERSION_SCRIPT)?;
    let so = lib.join(f.soname);
    let tmp = lib.join(format!("{}.tmp", f.soname));
    run(Command::new(&cc)
        .arg("-shared")
        .arg("-o")
        .arg(&tmp)
        .arg(format!("-Wl,-soname,{}", f.soname))
        .arg(format!("-Wl,--version-script={}", script.display()))
        .args([
            "-Wl,-z,defs",
            "-Wl,-rpath,$ORIGIN",
            "-Wl,--enable-new-dtags",
        ])
        .args(&objs)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-l{}", f.c_lib))
        .args(["-lgfortran", "-lm"]))?;
    fs::rename(&tmp, &so).map_err(|e| format!("cannot install {}: {e}", so.display()))?;
    for name in f.links {
        let l = lib.join(name);
        let _ = fs::remove_file(&l);
        std::os::unix::fs::symlink(f.soname, &l)
            .map_err(|e| format!("cannot link {}: {e}", l.display()))?;
    }

    let share = prefix.join("share/oxmpi");
    mkdir(&share)?;
    for list in ["fort-unsupported", "fort-f08-no-large-count"] {
        copy(
            &work.join(format!("{list}.txt")),
            &share.join(format!("{list}-{}.txt", f.c_lib)),
        )?;
    }
    mkdir(&lib.join("pkgconfig"))?;
    for (name, text) in pkg_config_files(f, PC_RELOCATABLE_PREFIX) {
        write(&lib.join("pkgconfig").join(name), &text)?;
    }
    eprintln!("xtask: installed {}", so.display());
    Ok(())
}

/// The pkg-config files of every flavour of the Fortran bindings for a prefix whose
/// `prefix=` line is `prefix` (`oxmpi-fort.pc` with its alias `mpi-fort.pc`,
/// `oxmpi-fort-abi.pc`).
pub fn all_pkg_config_files(prefix: &str) -> Vec<(String, String)> {
    FLAVOURS
        .iter()
        .flat_map(|f| pkg_config_files(f, prefix))
        .collect()
}

/// The pkg-config file of one flavour of the Fortran bindings, under its name and aliases.
fn pkg_config_files(f: &Flavour, prefix: &str) -> Vec<(String, String)> {
    let fort_lib = f
        .soname
        .strip_prefix("lib")
        .and_then(|s| s.split(".so").next())
        .unwrap_or(f.soname);
    let text = format!(
        "prefix={prefix}\n\
         libdir=${{prefix}}/lib\n\
         includedir=${{prefix}}/{}\n\
         \n\
         Name: {}\n\
         Description: {}\n\
         Version: {}\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -l{fort_lib} -l{}\n",
        f.include,
        f.pc_name,
        f.pc_description,
        env!("CARGO_PKG_VERSION"),
        f.c_lib,
    );
    std::iter::once(format!("{}.pc", f.pc_name))
        .chain(f.pc_aliases.iter().map(|a| a.to_string()))
        .map(|n| (n, text.clone()))
        .collect()
}
