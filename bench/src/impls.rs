//! The MPI implementations under test. Each is a (name, compiler wrapper,
//! launcher command and flags, environment) tuple; variants of one
//! implementation (e.g. Open MPI without single-copy) share its binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How the name of [`Impl::mpich_wheel`] ends (`mpich-5.0.2-wheel`); `--impls mpich-wheel`
/// selects it whatever its version.
pub const MPICH_WHEEL_SUFFIX: &str = "-wheel";

/// Whether `name` is that of [`Impl::mpich_wheel`].
pub fn is_mpich_wheel(name: &str) -> bool {
    name.starts_with("mpich-") && name.ends_with(MPICH_WHEEL_SUFFIX)
}

/// Largest eager message of Open MPI's vader (4 KiB): the single-copy settings only change
/// the path of larger messages (oxmpi's sm sends up to 8 KiB eagerly, so its single-copy
/// variant first differs above that).
pub const EAGER_MAX: u64 = 4096;

/// One implementation (or a tuned variant of one).
#[derive(Debug, Clone)]
pub struct Impl {
    /// Name used in the CSV, report and plots.
    pub name: String,
    /// Binaries are built once per `build` key (variants share them).
    pub build: String,
    /// Compiler wrapper (`mpicc.openmpi`, …).
    pub mpicc: PathBuf,
    /// Launcher program.
    pub launcher: PathBuf,
    /// Flag that takes the rank count (`-np`, `-n`).
    pub np_flag: String,
    /// Flags for pinned runs (one rank per core).
    pub pinned: Vec<String>,
    /// Flags for runs with more ranks than cores.
    pub oversubscribed: Vec<String>,
    /// Extra launcher flags always given (tuning).
    pub extra: Vec<String>,
    /// Extra environment of the launcher.
    pub env: Vec<(String, String)>,
    /// A variant that differs from its base only in the large-message path:
    /// it runs only the point-to-point tests, and only for sizes above
    /// [`EAGER_MAX`] (smaller messages take the same eager path in both).
    pub pt2pt_only: bool,
    /// A variant of the overhead section (`--overhead`): it runs only the 8-byte latency
    /// and the mpi4py ring, to compare with its base.
    pub overhead_only: bool,
    /// Extra `oxbench` options of this variant (e.g. `mpit=1`).
    pub bench_opts: Vec<String>,
    /// A peer that runs only the dynamic-process measurement (`comm_spawn`): the MPICH
    /// that can spawn here ([`Impl::mpich_wheel`]).
    pub spawn_only: bool,
    /// Why this peer has no `comm_spawn` rows (its spawn cannot work here), said once in
    /// the run's output instead of a failure per repetition.
    pub no_spawn: Option<String>,
    /// Human description of the settings, for the report.
    pub settings: String,
}

/// What Debian's MPICH 4.0.2 says of every `MPI_Comm_spawn` on the reference machine.
const MPICH_SPAWN_ERROR: &str = "MPID_Comm_spawn_multiple(86): Error in spawn call";

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

impl Impl {
    /// Open MPI 4.1 as packaged by Debian (`mpirun.openmpi`), default settings.
    pub fn openmpi() -> Impl {
        Impl {
            name: "ompi".into(),
            build: "ompi".into(),
            mpicc: "mpicc.openmpi".into(),
            launcher: "mpirun.openmpi".into(),
            np_flag: "-np".into(),
            pinned: s(&["--bind-to", "core", "--map-by", "core"]),
            oversubscribed: s(&["--oversubscribe", "--bind-to", "none"]),
            extra: vec![],
            env: vec![
                ("OMPI_ALLOW_RUN_AS_ROOT".into(), "1".into()),
                ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM".into(), "1".into()),
            ],
            pt2pt_only: false,
            overhead_only: false,
            bench_opts: vec![],
            spawn_only: false,
            no_spawn: None,
            settings: "defaults (ob1 + vader, single copy = CMA)".into(),
        }
    }

    /// Open MPI with vader's single-copy (CMA) mechanism off: its best
    /// large-message setting on the reference VM (anchors.md §6.2).
    pub fn openmpi_nocma() -> Impl {
        Impl {
            name: "ompi-nocma".into(),
            extra: s(&["--mca", "btl_vader_single_copy_mechanism", "none"]),
            pt2pt_only: true,
            settings: "`--mca btl_vader_single_copy_mechanism none` (copy-in/copy-out)".into(),
            ..Impl::openmpi()
        }
    }

    /// MPICH 4.0 as packaged by Debian (Hydra), default settings (ch4:ucx).
    pub fn mpich() -> Impl {
        Impl {
            name: "mpich".into(),
            build: "mpich".into(),
            mpicc: "mpicc.mpich".into(),
            launcher: "mpiexec.hydra".into(),
            np_flag: "-np".into(),
            pinned: s(&["-bind-to", "core"]),
            oversubscribed: vec![],
            extra: vec![],
            env: vec![],
            pt2pt_only: false,
            overhead_only: false,
            bench_opts: vec![],
            spawn_only: false,
            no_spawn: Some(format!(
                "Debian's MPICH 4.0.2 fails every MPI_Comm_spawn here ({MPICH_SPAWN_ERROR}); \
                 the PyPI MPICH wheel's row stands for MPICH"
            )),
            settings: "defaults (ch4:ucx, UCX sysv + cma; `UCX_TLS=^cma` is slower here)".into(),
        }
    }

    /// MPICH from the PyPI `mpich` wheel (`version`, its Hydra `mpiexec` and `mpicc` in the
    /// venv `venv`), for `MPI_Comm_spawn` only: Debian's MPICH 4.0.2 fails every spawn on
    /// the reference machine ([`MPICH_SPAWN_ERROR`]).
    pub fn mpich_wheel(venv: &Path, version: &str) -> Impl {
        let bin = venv.join("bin");
        Impl {
            name: format!("mpich-{version}{MPICH_WHEEL_SUFFIX}"),
            build: format!("mpich-{version}{MPICH_WHEEL_SUFFIX}"),
            mpicc: bin.join("mpicc"),
            launcher: bin.join("mpiexec"),
            np_flag: "-n".into(),
            pinned: vec![],
            oversubscribed: vec![],
            spawn_only: true,
            no_spawn: None,
            settings: format!(
                "the PyPI `mpich` wheel {version} (its Hydra `mpiexec`), defaults; only `MPI_Comm_spawn` (Debian's MPICH cannot spawn here)"
            ),
            ..Impl::mpich()
        }
    }

    /// oxmpi from an install prefix (`cargo xtask install --prefix DIR`).
    pub fn oxmpi(prefix: &Path) -> Impl {
        Impl {
            name: "oxmpi".into(),
            build: "oxmpi".into(),
            mpicc: prefix.join("bin").join("mpicc"),
            launcher: prefix.join("bin").join("mpirun"),
            np_flag: "-n".into(),
            pinned: s(&["--bind-to", "core"]),
            oversubscribed: s(&["--oversubscribe"]),
            extra: vec![],
            env: vec![(
                "LD_LIBRARY_PATH".into(),
                prefix.join("lib").to_string_lossy().into_owned(),
            )],
            pt2pt_only: false,
            overhead_only: false,
            bench_opts: vec![],
            spawn_only: false,
            no_spawn: None,
            settings: "defaults".into(),
        }
    }

    /// oxmpi with the pipelined copy through shared memory only (no single copy), instead
    /// of the default per-peer choice between it and the cooperative single copy.
    pub fn oxmpi_pipe(prefix: &Path) -> Impl {
        let mut i = Impl::oxmpi(prefix);
        i.name = "oxmpi-pipe".into();
        i.env.push((
            "OXMPI_MCA_btl_sm_single_copy_mechanism".into(),
            "none".into(),
        ));
        i.pt2pt_only = true;
        i.settings = "`OXMPI_MCA_btl_sm_single_copy_mechanism=none` (pipelined copy only)".into();
        i
    }

    /// oxmpi with a tools-interface session whose handles on the transports' send and
    /// receive counters are started (`oxbench mpit=1`): what counters that a tool reads
    /// cost (overhead section).
    pub fn oxmpi_mpit(prefix: &Path) -> Impl {
        let mut i = Impl::oxmpi(prefix);
        i.name = "oxmpi-mpit".into();
        i.bench_opts = s(&["mpit=1"]);
        i.overhead_only = true;
        i.settings = "an MPI_T session with started handles on the send/receive counters".into();
        i
    }

    /// oxmpi with the job profile on (`mpirun --profile=DIR`, overhead section).
    pub fn oxmpi_profile(prefix: &Path, dir: &Path) -> Impl {
        let mut i = Impl::oxmpi(prefix);
        i.name = "oxmpi-profile".into();
        i.extra = vec![format!("--profile={}", dir.display())];
        i.overhead_only = true;
        i.settings = "`mpirun --profile` (the job profile is written at the end)".into();
        i
    }

    /// The launcher argument vector (without the program) for `np` ranks.
    pub fn launch_args(&self, np: u32, cores: u32) -> Vec<String> {
        let mut a = vec![self.np_flag.clone(), np.to_string()];
        if np <= cores {
            a.extend(self.pinned.iter().cloned());
        } else {
            a.extend(self.oversubscribed.iter().cloned());
        }
        a.extend(self.extra.iter().cloned());
        a
    }

    /// A ready-to-run launcher command for `np` ranks of `prog args…`.
    pub fn command(&self, np: u32, cores: u32, prog: &Path, args: &[String]) -> Command {
        let mut c = Command::new(&self.launcher);
        c.args(self.launch_args(np, cores)).arg(prog).args(args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_and_oversubscribed_flags() {
        let o = Impl::openmpi_nocma();
        assert_eq!(o.build, "ompi", "variants share the Open MPI binaries");
        let a = o.launch_args(2, 2);
        assert_eq!(
            a,
            s(&[
                "-np",
                "2",
                "--bind-to",
                "core",
                "--map-by",
                "core",
                "--mca",
                "btl_vader_single_copy_mechanism",
                "none"
            ])
        );
        let b = Impl::openmpi().launch_args(16, 2);
        assert_eq!(b, s(&["-np", "16", "--oversubscribe", "--bind-to", "none"]));
        assert_eq!(Impl::mpich().launch_args(4, 2), s(&["-np", "4"]));
    }

    #[test]
    fn oxmpi_paths_come_from_the_prefix() {
        let c = Impl::oxmpi_pipe(Path::new("/p"));
        assert_eq!((c.build.as_str(), c.pt2pt_only), ("oxmpi", true));
        assert!(c
            .env
            .iter()
            .any(|(k, v)| k.ends_with("single_copy_mechanism") && v == "none"));
        let x = Impl::oxmpi(Path::new("/p"));
        assert_eq!(x.mpicc, Path::new("/p/bin/mpicc"));
        let c = x.command(2, 2, Path::new("/b/hello"), &["a".into()]);
        assert_eq!(c.get_program(), "/p/bin/mpirun");
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, s(&["-n", "2", "--bind-to", "core", "/b/hello", "a"]));
        let w = Impl::mpich_wheel(Path::new("/v"), "5.0.2");
        assert_eq!((w.name.as_str(), w.spawn_only), ("mpich-5.0.2-wheel", true));
        // Debian's MPICH says why it has no spawn rows; the wheel that stands in spawns.
        assert!(Impl::mpich().no_spawn.is_some_and(|w| w.contains("4.0.2")));
        assert!(w.no_spawn.is_none() && x.no_spawn.is_none());
        assert!(is_mpich_wheel(&w.name) && !is_mpich_wheel("mpich"));
        assert_eq!(
            w.command(1, 2, Path::new("/b/h"), &[]).get_program(),
            "/v/bin/mpiexec"
        );
        let m = Impl::oxmpi_mpit(Path::new("/p"));
        assert!(m.overhead_only && m.bench_opts == s(&["mpit=1"]));
        let p = Impl::oxmpi_profile(Path::new("/p"), Path::new("/o"));
        assert_eq!(
            p.launch_args(2, 2),
            s(&["-n", "2", "--bind-to", "core", "--profile=/o"])
        );
    }
}
