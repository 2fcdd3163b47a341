//! `mpicc` / `mpicxx` / `mpifort`: compiler wrappers for oxmpi's MPICH-ABI `libmpi.so.12`.
//!
//! The install prefix is found from the executable's own path (`<prefix>/bin/mpicc`).
//! The program looks at `argv[0]`: `mpicxx`/`mpic++`/`mpiCC` use the C++ compiler,
//! `mpifort`/`mpif77`/`mpif90` the Fortran compiler and link the Fortran bindings
//! (`libmpifort.so.12`) before `libmpi.so.12`; `mpif.h` and the module files are in
//! `<prefix>/include` (with `-mpi-abi`: `libmpifort_abi.so.1`, `libmpi_abi.so.1` and
//! `<prefix>/include/abi`).
//!
//! Options understood by the wrapper (everything else goes to the compiler):
//! * `-show` (MPICH) / `-showme` / `--showme` (Open MPI): print the command, do not run it;
//! * `--showme:compile` / `-compile_info` / `-compile-info`: compile flags (the MPICH
//!   spellings print the whole compile command, like MPICH);
//! * `--showme:link` / `-link_info` / `-link-info`: link flags (MPICH spellings: the whole
//!   link command);
//! * `--showme:incdirs`, `--showme:libdirs`, `--showme:libs`, `--showme:version`;
//! * compiler queries (`--version`, `-v`, `-V`, `-dumpversion`, `-dumpmachine`,
//!   `-print-*`, `-qversion`), alone on the line, go to the compiler without MPI flags, so
//!   autoconf's and CMake's compiler probes see the plain compiler's answer.
//!
//! These are the probes CMake's `FindMPI` (`-showme:compile`/`-showme:link`, then
//! `-compile-info`/`-link-info`, `-show`), Meson's `dependency('mpi')`
//! (`--showme:version`, `--showme:compile`, `--showme:link`) and autoconf's
//! `AC_PROG_CC([mpicc])` (`--version`, `-v`, `-V`, `-qversion`) make.
//! * `-mpi-abi` (MPICH's spelling): compile against the MPI-5 standard-ABI header
//!   (`<prefix>/include/abi/mpi.h`) and link `libmpi_abi.so.1` instead of the MPICH ABI.
//!   Invoked as `mpicc_abi` / `mpicxx_abi` the wrapper is in this mode by default.
//!
//! Environment: `OXMPI_CC` / `OXMPI_CXX` / `OXMPI_FC` choose the compiler (also
//! `MPICH_CC`/`OMPI_CC` and the CXX and FC forms); default `cc` / `c++` / `gfortran`.
//! Binaries are linked with a RUNPATH to `<prefix>/lib` so they run without
//! `LD_LIBRARY_PATH`, while `LD_LIBRARY_PATH` can still point them at another
//! `libmpi.so.12`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Which language the wrapper compiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lang {
    C,
    Cxx,
    Fortran,
}

/// What to do with the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Mode {
    /// Run the compiler.
    Run,
    /// Print the full command.
    Show,
    /// Print only compile flags.
    ShowCompile,
    /// Print only link flags.
    ShowLink,
    /// Print include directories.
    ShowIncdirs,
    /// Print library directories.
    ShowLibdirs,
    /// Print library names.
    ShowLibs,
    /// Print the version.
    ShowVersion,
    /// MPICH `-compile_info`: the compile command.
    CompileInfo,
    /// MPICH `-link_info`: the link command.
    LinkInfo,
    /// A question to the compiler itself (`--version`, `-v`, ...): run it without MPI flags.
    Query,
}

/// Whether `a` asks the compiler about itself rather than compiling anything.
fn is_compiler_query(a: &str) -> bool {
    matches!(
        a,
        "--version" | "-v" | "-V" | "-qversion" | "-dumpversion" | "-dumpfullversion"
    ) || a.starts_with("-dumpmachine")
        || a.starts_with("-print-")
}

/// Which MPI ABI a program is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Abi {
    /// MPICH's ABI: `include/mpi.h`, `libmpi.so.12`.
    Mpich,
    /// The MPI-5 standard ABI: `include/abi/mpi.h`, `libmpi_abi.so.1`.
    Standard,
}

/// The planned compiler invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Plan {
    mode: Mode,
    compiler: String,
    args: Vec<String>,
    link: bool,
    abi: Abi,
    lang: Lang,
}

fn abi_of(argv0: &str) -> Abi {
    let base = Path::new(argv0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if base.ends_with("_abi") {
        Abi::Standard
    } else {
        Abi::Mpich
    }
}

fn lang_of(argv0: &str) -> Lang {
    let base = Path::new(argv0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if base.contains("fort") || base.contains("f77") || base.contains("f90") {
        Lang::Fortran
    } else if base.contains("cxx") || base.contains("c++") || base.contains("CC") {
        Lang::Cxx
    } else {
        Lang::C
    }
}

fn compiler(lang: Lang, env: &dyn Fn(&str) -> Option<String>) -> String {
    let keys: &[&str] = match lang {
        Lang::C => &["OXMPI_CC", "MPICH_CC", "OMPI_CC"],
        Lang::Cxx => &["OXMPI_CXX", "MPICH_CXX", "OMPI_CXX"],
        Lang::Fortran => &["OXMPI_FC", "MPICH_FC", "OMPI_FC"],
    };
    keys.iter()
        .find_map(|k| env(k).filter(|v| !v.is_empty()))
        .unwrap_or_else(|| match lang {
            Lang::C => "cc".into(),
            Lang::Cxx => "c++".into(),
            Lang::Fortran => "gfortran".into(),
        })
}

/// The include directory of `abi` under `prefix`.
fn include_dir(prefix: &Path, abi: Abi) -> PathBuf {
    match abi {
        Abi::Mpich => prefix.join("include"),
        Abi::Standard => prefix.join("include").join("abi"),
    }
}

/// The library names (`-l<name>`) a program in `lang` links for `abi`.
fn lib_names(abi: Abi, lang: Lang) -> &'static [&'static str] {
    match (abi, lang) {
        (Abi::Mpich, Lang::Fortran) => &["mpifort", "mpi"],
        (Abi::Mpich, _) => &["mpi"],
        (Abi::Standard, Lang::Fortran) => &["mpifort_abi", "mpi_abi"],
        (Abi::Standard, _) => &["mpi_abi"],
    }
}

/// Compile flags for `prefix`.
fn compile_flags(prefix: &Path, abi: Abi) -> Vec<String> {
    vec![format!("-I{}", include_dir(prefix, abi).display())]
}

/// Flags the compiler needs for MPI programs: gfortran (10 and later) rejects the
/// different types passed to one choice-buffer argument of `mpif.h`/`use mpi`
/// procedures unless told otherwise (MPICH's and Open MPI's wrappers add the same flag).
fn compiler_flags(p: &Plan) -> Vec<String> {
    let gfortran = Path::new(&p.compiler)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("gfortran"));
    if p.lang == Lang::Fortran && gfortran {
        vec!["-fallow-argument-mismatch".into()]
    } else {
        vec![]
    }
}

/// Link flags for `prefix`.
fn link_flags(prefix: &Path, abi: Abi, lang: Lang) -> Vec<String> {
    let lib = prefix.join("lib");
    let mut v = vec![
        format!("-L{}", lib.display()),
        format!("-Wl,-rpath,{}", lib.display()),
        "-Wl,--enable-new-dtags".into(),
    ];
    v.extend(lib_names(abi, lang).iter().map(|l| format!("-l{l}")));
    v
}

/// Parse the wrapper's own options out of the argument list.
fn plan(argv0: &str, args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Plan {
    let mut mode = Mode::Run;
    let mut abi = abi_of(argv0);
    let mut rest = Vec::new();
    for a in args {
        if a == "-mpi-abi" || a == "--mpi-abi" {
            abi = Abi::Standard;
            continue;
        }
        let m = match a.as_str() {
            "-show" | "-showme" | "--showme" => Some(Mode::Show),
            "--showme:compile" | "-showme:compile" => Some(Mode::ShowCompile),
            "--showme:link" | "-showme:link" => Some(Mode::ShowLink),
            "--showme:incdirs" | "-showme:incdirs" => Some(Mode::ShowIncdirs),
            "--showme:libdirs" | "-showme:libdirs" => Some(Mode::ShowLibdirs),
            "--showme:libs" | "-showme:libs" => Some(Mode::ShowLibs),
            "--showme:version" | "-showme:version" => Some(Mode::ShowVersion),
            "-compile_info" | "-compile-info" => Some(Mode::CompileInfo),
            "-link_info" | "-link-info" => Some(Mode::LinkInfo),
            _ => None,
        };
        match m {
            Some(m) => mode = m,
            None => rest.push(a.clone()),
        }
    }
    let compile_only = rest
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-E" | "-S" | "-M" | "-MM"));
    let query = !rest.is_empty() && rest.iter().all(|a| is_compiler_query(a));
    if query && mode == Mode::Run {
        mode = Mode::Query;
    }
    let link = match mode {
        Mode::CompileInfo => false,
        Mode::LinkInfo => true,
        Mode::Query => false,
        _ => !compile_only,
    };
    let lang = lang_of(argv0);
    Plan {
        mode,
        compiler: compiler(lang, env),
        args: rest,
        link,
        abi,
        lang,
    }
}

/// The full command line: compiler, compile flags, user arguments, link flags.
fn command_line(p: &Plan, prefix: &Path) -> Vec<String> {
    let mut v = vec![p.compiler.clone()];
    if p.mode == Mode::Query {
        v.extend(p.args.iter().cloned());
        return v;
    }
    v.extend(compiler_flags(p));
    v.extend(compile_flags(prefix, p.abi));
    v.extend(p.args.iter().cloned());
    if p.link {
        v.extend(link_flags(prefix, p.abi, p.lang));
    }
    v
}

/// The prefix this binary is installed in (`<prefix>/bin/mpicc` → `<prefix>`).
fn install_prefix() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my own path: {e}"))?;
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{} is not inside <prefix>/bin", exe.display()))
}

fn main() -> ExitCode {
    let mut argv = std::env::args();
    let argv0 = argv.next().unwrap_or_else(|| "mpicc".into());
    let args: Vec<String> = argv.collect();
    let name = Path::new(&argv0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "mpicc".into());
    let prefix = match install_prefix() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let p = plan(&argv0, &args, &|k| std::env::var(k).ok());
    let line = |v: Vec<String>| println!("{}", v.join(" "));
    match p.mode {
        Mode::Show | Mode::CompileInfo | Mode::LinkInfo => line(command_line(&p, &prefix)),
        Mode::ShowCompile => {
            let mut v = compiler_flags(&p);
            v.extend(compile_flags(&prefix, p.abi));
            line(v)
        }
        Mode::ShowLink => line(link_flags(&prefix, p.abi, p.lang)),
        Mode::ShowIncdirs => println!("{}", include_dir(&prefix, p.abi).display()),
        Mode::ShowLibdirs => println!("{}", prefix.join("lib").display()),
        Mode::ShowLibs => println!("{}", lib_names(p.abi, p.lang).join(" ")),
        Mode::ShowVersion => println!("{name}: oxmpi {}", env!("CARGO_PKG_VERSION")),
        Mode::Run | Mode::Query => {
            if p.args.is_empty() {
                eprintln!("{name}: no input files (try '{name} -show')");
                return ExitCode::FAILURE;
            }
            let v = command_line(&p, &prefix);
            return match Command::new(&v[0]).args(&v[1..]).status() {
                Ok(s) => match s.code() {
                    Some(c) => ExitCode::from(c.clamp(0, 255) as u8),
                    None => ExitCode::FAILURE,
                },
                Err(e) => {
                    eprintln!("{name}: cannot run the compiler '{}': {e}", v[0]);
                    ExitCode::FAILURE
                }
            };
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }
    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn show_prints_compile_and_link_flags_around_the_arguments() {
        let p = plan(
            "/opt/x/bin/mpicc",
            &s(&["-show", "a.c", "-o", "a"]),
            &no_env,
        );
        assert_eq!(p.mode, Mode::Show);
        let v = command_line(&p, Path::new("/opt/x"));
        assert_eq!(
            v,
            s(&[
                "cc",
                "-I/opt/x/include",
                "a.c",
                "-o",
                "a",
                "-L/opt/x/lib",
                "-Wl,-rpath,/opt/x/lib",
                "-Wl,--enable-new-dtags",
                "-lmpi"
            ])
        );
    }

    #[test]
    fn compile_only_omits_link_flags() {
        let p = plan("mpicc", &s(&["-c", "a.c"]), &no_env);
        assert!(!p.link);
        assert!(!command_line(&p, Path::new("/p")).contains(&"-lmpi".to_string()));
        let p = plan("mpicc", &s(&["-compile_info"]), &no_env);
        assert_eq!(p.mode, Mode::CompileInfo);
        assert!(!p.link);
        let p = plan("mpicc", &s(&["-link_info"]), &no_env);
        assert!(p.link);
    }

    #[test]
    fn build_system_probes() {
        // CMake's FindMPI asks with dashes (MPICH's own spelling has underscores), Meson
        // for the version.
        for (arg, mode) in [
            ("-compile-info", Mode::CompileInfo),
            ("-link-info", Mode::LinkInfo),
            ("--showme:version", Mode::ShowVersion),
        ] {
            assert_eq!(plan("mpicc", &s(&[arg]), &no_env).mode, mode, "{arg}");
        }
        // autoconf's `AC_PROG_CC([mpicc])` asks the compiler for its version: no MPI flags.
        for q in ["--version", "-v", "-V", "-qversion", "-dumpversion"] {
            let p = plan("mpicc", &s(&[q]), &no_env);
            assert_eq!(p.mode, Mode::Query, "{q}");
            assert_eq!(command_line(&p, Path::new("/p")), s(&["cc", q]));
        }
        // `-v` while compiling is the verbose flag: the MPI flags stay.
        let p = plan("mpicc", &s(&["-v", "a.c"]), &no_env);
        assert_eq!(p.mode, Mode::Run);
        assert!(command_line(&p, Path::new("/p")).contains(&"-lmpi".to_string()));
    }

    #[test]
    fn argv0_and_env_choose_the_compiler() {
        assert_eq!(plan("/p/bin/mpicxx", &[], &no_env).compiler, "c++");
        assert_eq!(plan("mpic++", &[], &no_env).compiler, "c++");
        assert_eq!(plan("mpicc", &[], &no_env).compiler, "cc");
        let env = |k: &str| (k == "OXMPI_CC").then(|| "gcc-12".to_string());
        assert_eq!(plan("mpicc", &[], &env).compiler, "gcc-12");
        let env = |k: &str| (k == "MPICH_CXX").then(|| "clang++".to_string());
        assert_eq!(plan("mpicxx", &[], &env).compiler, "clang++");
    }

    #[test]
    fn showme_variants() {
        assert_eq!(
            plan("mpicc", &s(&["--showme:compile"]), &no_env).mode,
            Mode::ShowCompile
        );
        assert_eq!(
            plan("mpicc", &s(&["-showme:link"]), &no_env).mode,
            Mode::ShowLink
        );
        assert_eq!(plan("mpicc", &s(&["-showme"]), &no_env).mode, Mode::Show);
        assert_eq!(
            compile_flags(Path::new("/q"), Abi::Mpich),
            s(&["-I/q/include"])
        );
        assert_eq!(
            link_flags(Path::new("/q"), Abi::Mpich, Lang::C)[0],
            "-L/q/lib"
        );
    }

    #[test]
    fn fortran_names_use_gfortran_and_link_the_fortran_library_first() {
        for n in ["/p/bin/mpifort", "mpif77", "mpif90"] {
            let p = plan(n, &s(&["-show", "a.f90"]), &no_env);
            assert_eq!(p.lang, Lang::Fortran, "{n}");
            assert_eq!(
                command_line(&p, Path::new("/opt/x")),
                s(&[
                    "gfortran",
                    "-fallow-argument-mismatch",
                    "-I/opt/x/include",
                    "a.f90",
                    "-L/opt/x/lib",
                    "-Wl,-rpath,/opt/x/lib",
                    "-Wl,--enable-new-dtags",
                    "-lmpifort",
                    "-lmpi"
                ])
            );
        }
        let p = plan("mpifort", &s(&["-mpi-abi", "a.f90"]), &no_env);
        assert_eq!(
            link_flags(Path::new("/o"), p.abi, p.lang)[3..],
            s(&["-lmpifort_abi", "-lmpi_abi"])
        );
        assert_eq!(
            compile_flags(Path::new("/o"), p.abi),
            s(&["-I/o/include/abi"])
        );
        let env = |k: &str| (k == "MPICH_FC").then(|| "gfortran-12".to_string());
        assert_eq!(plan("mpifort", &[], &env).compiler, "gfortran-12");
        assert_eq!(plan("mpicc", &[], &no_env).lang, Lang::C);
    }

    #[test]
    fn mpi_abi_option_and_abi_names_select_the_standard_abi() {
        let p = plan("mpicc", &s(&["-mpi-abi", "-show", "a.c"]), &no_env);
        assert_eq!(p.abi, Abi::Standard);
        let v = command_line(&p, Path::new("/opt/x"));
        assert_eq!(
            v,
            s(&[
                "cc",
                "-I/opt/x/include/abi",
                "a.c",
                "-L/opt/x/lib",
                "-Wl,-rpath,/opt/x/lib",
                "-Wl,--enable-new-dtags",
                "-lmpi_abi"
            ])
        );
        assert_eq!(plan("/p/bin/mpicc_abi", &[], &no_env).abi, Abi::Standard);
        let p = plan("/p/bin/mpicxx_abi", &[], &no_env);
        assert_eq!((p.abi, p.compiler.as_str()), (Abi::Standard, "c++"));
        assert_eq!(plan("/p/bin/mpicc", &[], &no_env).abi, Abi::Mpich);
        assert!(!plan("mpicc", &s(&["-mpi-abi", "x.c"]), &no_env)
            .args
            .contains(&"-mpi-abi".to_string()));
    }
}
