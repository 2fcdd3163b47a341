//! `install`, `demo` and `test`: the two README commands are built from these.

use crate::stages::{Background, Stages};
use crate::{default_prefix, run, workspace_root};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// libfabric's software providers (`FI_PROVIDER` names): `tcp` (with `ofi_rxm`), `udp`
/// (with `ofi_rxd`) and `shm`, which run anywhere, so CI runs the ofi transport on each.
const OFI_SOFTWARE_PROVIDERS: [&str; 3] = ["tcp", "udp", "shm"];

/// Binaries installed into `PREFIX/bin`, with the package that builds each.
const BINARIES: &[(&str, &str)] = &[
    ("oxmpi-mpirun", "mpirun"),
    ("oxmpi-oxmpid", "oxmpid"),
    ("oxmpi-info", "oxmpi-info"),
    ("oxmpi-profile", "oxmpi-profile"),
    ("oxmpi-server", "oxmpi-server"),
    ("oxmpi-mpicc", "mpicc"),
];

/// Second names of installed binaries (the program looks at its `argv[0]`).
const ALIASES: &[(&str, &str)] = &[
    ("mpiexec", "mpirun"),
    ("mpicxx", "mpicc"),
    ("mpicc_abi", "mpicc"),
    ("mpicxx_abi", "mpicc"),
    ("mpifort", "mpicc"),
    ("mpif77", "mpicc"),
    ("mpif90", "mpicc"),
];

/// Where and what `install` builds.
pub struct InstallOpts {
    /// The install prefix.
    pub prefix: PathBuf,
    /// Release (else debug) build.
    pub release: bool,
}

fn parse_install_args(args: &[String]) -> Result<InstallOpts, String> {
    let mut opts = InstallOpts {
        prefix: default_prefix(),
        release: true,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--prefix" => {
                let p = it.next().ok_or("--prefix needs a directory")?;
                opts.prefix = absolute(Path::new(p))?;
            }
            "--debug" => opts.release = false,
            other => return Err(format!("install: unknown option '{other}'")),
        }
    }
    Ok(opts)
}

/// `p` made absolute against the current directory.
pub fn absolute(p: &Path) -> Result<PathBuf, String> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .map_err(|e| format!("cannot read the current directory: {e}"))
    }
}

/// `bash SCRIPT PREFIX`: a test script of tests/ run against the install prefix.
fn script(path: PathBuf, prefix: &Path) -> Command {
    let mut c = Command::new("bash");
    c.arg(path).arg(prefix);
    c
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Build everything that goes into a prefix and copy it there.
pub fn install(opts: &InstallOpts) -> Result<(), String> {
    let root = workspace_root();
    let mut build = cargo();
    build.current_dir(&root).arg("build");
    if opts.release {
        build.arg("--release");
    }
    let mut pkgs: Vec<&str> = BINARIES.iter().map(|(p, _)| *p).collect();
    pkgs.dedup();
    // The C library's crate too (libmpi::install's build of it is then up to date): one
    // cargo build compiles it beside the binaries instead of after them.
    pkgs.push("oxmpi-capi");
    for p in pkgs {
        build.args(["-p", p]);
    }
    run(&mut build)?;
    let profile_dir = root
        .join("target")
        .join(if opts.release { "release" } else { "debug" });

    let bin = opts.prefix.join("bin");
    for d in ["bin", "lib", "include", "etc", "share/oxmpi"] {
        fs::create_dir_all(opts.prefix.join(d))
            .map_err(|e| format!("cannot create {}: {e}", opts.prefix.join(d).display()))?;
    }
    for (_, name) in BINARIES {
        copy_file(&profile_dir.join(name), &bin.join(name))?;
    }
    for (alias, target) in ALIASES {
        let link = bin.join(alias);
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link)
            .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    crate::libmpi::install(&root, &opts.prefix, opts.release)?;
    crate::fortran::install(&root, &opts.prefix, &profile_dir)?;
    eprintln!("xtask: installed into {}", opts.prefix.display());
    Ok(())
}

fn copy_file(from: &Path, to: &Path) -> Result<(), String> {
    // Remove first so a running copy of the old file is not rewritten in place.
    let _ = fs::remove_file(to);
    fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

pub fn cmd_install(args: &[String]) -> Result<(), String> {
    let opts = parse_install_args(args)?;
    install(&opts)
}

pub fn cmd_demo(args: &[String]) -> Result<(), String> {
    let opts = parse_install_args(args)?;
    install(&opts)?;
    let bin = opts.prefix.join("bin");
    let src = opts.prefix.join("share/oxmpi/examples/ring.c");
    let exe = workspace_root().join("target").join("oxmpi-demo-ring");
    run(Command::new(bin.join("mpicc"))
        .arg(&src)
        .arg("-o")
        .arg(&exe))?;
    run(Command::new(bin.join("mpirun")).args(["-n", "4"]).arg(&exe))
}

pub fn cmd_test(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err(format!("test: unexpected arguments {args:?}"));
    }
    let mut stages = Stages::new();
    let r = test_stages(&mut stages);
    eprint!("{}", stages.summary());
    r
}

/// `cargo xtask test`'s stages, in order; the first that fails ends the run.
fn test_stages(st: &mut Stages) -> Result<(), String> {
    let root = workspace_root();
    st.run("fmt", || {
        run(cargo().current_dir(&root).args(["fmt", "--all", "--check"]))
    })?;
    st.run("check-arch", || crate::arch::cmd_check_arch(&[]))?;
    // The loom tests' build (the last stage) has its own target dir and flags and needs
    // nothing built before it: it compiles in the background, on the CPUs the stages leave
    // idle (about 80 s of compiling when it ran in turn).
    let target = root.join("target");
    fs::create_dir_all(&target).map_err(|e| format!("cannot create {}: {e}", target.display()))?;
    let loom_build = Background::start(
        "loom build",
        loom_tests(&root).arg("--no-run"),
        &target.join("loom-build.log"),
    )?;
    st.run("clippy", || {
        run(cargo().current_dir(&root).args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    let prefix = root.join("target").join("oxmpi-test");
    st.run("install --debug", || {
        install(&InstallOpts {
            prefix: prefix.clone(),
            release: false,
        })
    })?;
    // The PyPI `mpich` wheel: its `mpicc_abi` builds the standard-ABI programs that
    // crates/capi-abi's tests run on our libmpi_abi.so.1.
    st.run("mpich wheel venv", || {
        run(Command::new("bash").arg(
            root.join("tests")
                .join("clients")
                .join("mpich-wheel-env.sh"),
        ))
    })?;
    st.cargo_test(
        "cargo test --workspace",
        cargo()
            .current_dir(&root)
            .env("OXMPI_TEST_PREFIX", &prefix)
            .args(["test", "--workspace", "--no-fail-fast"]),
    )?;
    // Real clients, unmodified: the rsmpi crate from crates.io and the mpi4py wheel from
    // PyPI, with the eight mpi4py test modules issue 5 names and the quick ones of
    // communicators, groups, topologies, windows, files, info, attributes, ops and
    // nonblocking collectives, and dynamic processes (ports, accept/connect, join, spawn with
    // MPI4PY_TEST_SPAWN=1; the whole suite: tests/clients/mpi4py-suite.sh).
    let clients = root.join("tests").join("clients");
    st.run("rsmpi", || {
        run(&mut script(clients.join("rsmpi.sh"), &prefix))
    })?;
    st.run("mpi4py", || {
        run(script(clients.join("mpi4py.sh"), &prefix)
            .env(
                "OXMPI_MPI4PY_MODULES",
                "environ toplevel status request p2p_obj p2p_buf msgspec errhandler \
                 comm group comm_inter comm_topo win file info attributes op cco_nb_buf \
                 dynproc spawn",
            )
            .env("MPI4PY_TEST_SPAWN", "1"))
    })?;
    // Installed the way users install MPI: the build systems (CMake, Meson, autotools,
    // pkg-config) against the prefix, the wheel in a fresh venv with mpi4py, and (as root)
    // the Debian package with Debian's MPI alternatives.
    st.run("buildsystems", || {
        run(&mut script(clients.join("buildsystems.sh"), &prefix))
    })?;
    st.run("packaging", || {
        run(&mut script(clients.join("packaging.sh"), &prefix))
    })?;
    // Jobs across fake nodes that share only the file system (own network, PID, IPC and
    // UTS namespaces), launched through their ssh-style agent: 2 and 4 nodes, failures and
    // a cut link included (skipped, loudly, where namespaces cannot be made).
    st.run("fakenodes", || {
        run(&mut script(
            root.join("tests").join("fakenodes").join("run.sh"),
            &prefix,
        ))
    })?;
    // The same kind of nodes under a real Slurm cluster: srun --mpi=pmi2, and mpirun inside
    // salloc (skipped, loudly, where Slurm or namespaces are missing).
    st.run("slurm", || {
        run(&mut script(
            root.join("tests").join("slurm").join("run.sh"),
            &prefix,
        ))
    })?;
    // mpi4py's window and RMA modules with one-sided operations carried as messages
    // (`osc=pt2pt`, the path ranks on different nodes take).
    st.run("mpi4py win rma rma_nb, osc=pt2pt", || {
        run(script(clients.join("mpi4py-suite.sh"), &prefix)
            .args(["2", "win", "rma", "rma_nb"])
            .env("OXMPI_MCA_osc", "pt2pt"))
    })?;
    // mpi4py's window and RMA modules over the ofi transport with `osc=pt2pt,ofi` on each
    // of libfabric's software providers: puts and gets as fi_write/fi_read, accumulates as
    // native atomics on tcp;ofi_rxm and as messages on the others (`fabric::ATOMICS_WRONG`).
    for provider in OFI_SOFTWARE_PROVIDERS {
        st.run(&format!("mpi4py win rma, ofi {provider}"), || {
            run(script(clients.join("mpi4py-suite.sh"), &prefix)
                .args(["2", "win", "rma"])
                .env("OXMPI_MCA_btl", "self,ofi")
                .env("OXMPI_MCA_osc", "pt2pt,ofi")
                .env("FI_PROVIDER", provider))
        })?;
    }
    // mpi4py's ULFM module with fault tolerance on (`mpirun --with-ft ulfm` sets the same).
    st.run("mpi4py ulfm", || {
        run(script(clients.join("mpi4py-suite.sh"), &prefix)
            .args(["2", "ulfm"])
            .env("OXMPI_MCA_mpi_ft_enable", "1"))
    })?;
    // A few of the same mpi4py modules over the ofi transport on each of libfabric's
    // software providers (the C and engine tests cover them too).
    for provider in OFI_SOFTWARE_PROVIDERS {
        st.run(&format!("mpi4py p2p, ofi {provider}"), || {
            run(script(clients.join("mpi4py.sh"), &prefix)
                .env("OXMPI_MCA_btl", "self,ofi")
                .env("FI_PROVIDER", provider)
                .env("OXMPI_MPI4PY_MODULES", "p2p_obj p2p_buf request status"))
        })?;
    }
    // The benchmark harness end to end in smoke mode: it checks that the harness works,
    // never that a number is reached; then its scale mode (scale.c and hello on every
    // implementation at np=2, about 15 s). The harness is built in the debug profile: its
    // dependencies are those `cargo test` built (the release build compiled them again,
    // about two thirds of its 140 CPU seconds), and the numbers come from the C programs
    // it launches.
    for (name, mode) in [
        ("bench smoke", &["--smoke", "--no-mpi4py"][..]),
        ("bench scale smoke", &["--scale", "--smoke", "--np", "2"]),
    ] {
        st.run(name, || {
            run(cargo()
                .current_dir(&root)
                .args(["run", "--quiet", "-p", "oxmpi-bench", "--"])
                .args(mode)
                .arg("--oxmpi-prefix")
                .arg(&prefix))
        })?;
    }
    // The shared-memory ring and the cooperative copy's chunk hand-out under the loom model
    // checker, built in the background since the start.
    st.run("loom", || {
        loom_build.finish()?;
        run(&mut loom_tests(&root))
    })
}

/// `cargo test` of the loom model checks (its own target dir: --cfg loom changes every
/// crate's build).
fn loom_tests(root: &Path) -> Command {
    let mut c = cargo();
    c.current_dir(root)
        .env("RUSTFLAGS", "--cfg loom")
        .env("CARGO_TARGET_DIR", root.join("target").join("loom"))
        .args([
            "test",
            "--release",
            "-p",
            "oxmpi-engine",
            "--test",
            "loom_ring",
            "--test",
            "loom_coop",
        ]);
    c
}
