//! The environment each rank sees (the seed's `setup_fork`): Open MPI's documented
//! `OMPI_*` variables, the PMI variables MPICH-style clients read, oxmpi's own `OXMPI_*`
//! variables, `-x` exports, `--mca` values and the `--prefix` PATH repair.

use crate::alloc::{JobMap, Placement};
use crate::cli::{AppSpec, EnvDirective, JobSpec};
use std::path::Path;

/// Facts about the job shared by all ranks.
#[derive(Debug, Clone)]
pub struct JobFacts<'a> {
    /// PMI job id / KVS name.
    pub jobid: &'a str,
    /// Session directory.
    pub job_dir: &'a Path,
    /// oxmpi install prefix used for parameter files (given to ranks as `OXMPI_PREFIX`).
    pub install_prefix: Option<&'a Path>,
    /// Universe size (slots in the allocation, at least the job size).
    pub universe_size: usize,
    /// Number of nodes in the allocation.
    pub num_nodes: usize,
    /// `mpirun --restart`: how many times the job was relaunched (given to ranks as
    /// `OXMPI_RESTART_COUNT`; `None` without `--restart`).
    pub restart_count: Option<usize>,
    /// `mpirun --report-uri`: the URI of mpirun's own name server (given to ranks as
    /// `OXMPI_NAME_SERVER`).
    pub name_server: Option<&'a str>,
}

fn prepend(dir: &Path, current: Option<String>) -> String {
    match current.filter(|c| !c.is_empty()) {
        Some(c) => format!("{}:{c}", dir.display()),
        None => dir.display().to_string(),
    }
}

/// The per-application overlay: `mca_env` (the parameter registry's child environment:
/// `--mca` values as `OXMPI_MCA_*` with their provenance, `--tune` values and exports), then
/// the command line's `-x` exports, then the `--prefix` repair (re-applied after a user's
/// `-x PATH`). `parent` looks up mpirun's own environment. Returns the variables (later
/// entries win) and warnings for `-x VAR` not found.
pub fn app_overlay(
    spec: &JobSpec,
    app: &AppSpec,
    mca_env: &[(String, String)],
    parent: &dyn Fn(&str) -> Option<String>,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut vars: Vec<(String, String)> = mca_env.to_vec();
    let mut warnings = Vec::new();
    for d in &app.env {
        match d {
            EnvDirective::Set(k, v) => vars.push((k.clone(), v.clone())),
            EnvDirective::Forward(k) => match parent(k) {
                Some(v) => vars.push((k.clone(), v)),
                None => warnings.push(format!(
                    "warning: could not find environment variable '{k}' (-x {k})"
                )),
            },
        }
    }
    if let Some(prefix) = &spec.prefix {
        let lookup = |name: &str| -> Option<String> {
            vars.iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| parent(name))
        };
        let path = prepend(&prefix.join("bin"), lookup("PATH"));
        let ld = prepend(&prefix.join("lib"), lookup("LD_LIBRARY_PATH"));
        vars.push(("PATH".into(), path));
        vars.push(("LD_LIBRARY_PATH".into(), ld));
    }
    (vars, warnings)
}

/// Variables specific to one rank (applied after the app overlay).
pub fn rank_vars(
    facts: &JobFacts<'_>,
    map: &JobMap,
    p: &Placement,
    pmi_fd: Option<i32>,
    user_has: &dyn Fn(&str) -> bool,
) -> Vec<(String, String)> {
    let size = map.size();
    let first_ranks: Vec<String> = map
        .app_sizes
        .iter()
        .scan(0usize, |acc, &n| {
            let first = *acc;
            *acc += n;
            Some(first.to_string())
        })
        .collect();
    let oversubscribed = map.oversubscribed[p.node];
    let mut v: Vec<(String, String)> = vec![
        ("OMPI_COMM_WORLD_SIZE".into(), size.to_string()),
        ("OMPI_COMM_WORLD_RANK".into(), p.rank.to_string()),
        (
            "OMPI_COMM_WORLD_LOCAL_SIZE".into(),
            p.local_size.to_string(),
        ),
        (
            "OMPI_COMM_WORLD_LOCAL_RANK".into(),
            p.local_rank.to_string(),
        ),
        ("OMPI_COMM_WORLD_NODE_RANK".into(), p.local_rank.to_string()),
        ("OMPI_UNIVERSE_SIZE".into(), facts.universe_size.to_string()),
        ("OMPI_NUM_APP_CTX".into(), map.app_sizes.len().to_string()),
        ("OMPI_FIRST_RANKS".into(), first_ranks.join(" ")),
        (
            "OMPI_APP_CTX_NUM_PROCS".into(),
            map.app_sizes
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ("PMI_RANK".into(), p.rank.to_string()),
        ("PMI_SIZE".into(), size.to_string()),
        ("PMI_JOBID".into(), facts.jobid.to_string()),
        ("MPI_LOCALNRANKS".into(), p.local_size.to_string()),
        ("MPI_LOCALRANKID".into(), p.local_rank.to_string()),
        ("OXMPI_JOBID".into(), facts.jobid.to_string()),
        ("OXMPI_JOB_DIR".into(), facts.job_dir.display().to_string()),
        ("OXMPI_APPNUM".into(), p.app.to_string()),
        ("OXMPI_NODE_ID".into(), p.node.to_string()),
        ("OXMPI_NUM_NODES".into(), facts.num_nodes.to_string()),
        (
            "OXMPI_OVERSUBSCRIBED".into(),
            if oversubscribed { "1" } else { "0" }.into(),
        ),
    ];
    if let Some(fd) = pmi_fd {
        v.push(("PMI_FD".into(), fd.to_string()));
    }
    if let Some(n) = facts.restart_count {
        v.push(("OXMPI_RESTART_COUNT".into(), n.to_string()));
    }
    if let Some(uri) = facts.name_server {
        v.push((crate::cli::NAME_SERVER_ENV.into(), uri.to_string()));
    }
    if let Some(cpus) = &p.cpus {
        v.push(("OXMPI_BOUND_CPUS".into(), crate::topo::format_cpus(cpus)));
    }
    if let Some(prefix) = facts.install_prefix {
        v.push(("OXMPI_PREFIX".into(), prefix.display().to_string()));
        // The mpi4py binary wheel dlopens the name `libmpi.so` first, which finds a system
        // Open MPI's development link before ours: point it at our MPICH-ABI library
        // (only when it is installed, and unless the user chose a library).
        let libmpi = prefix.join("lib").join("libmpi.so.12");
        if !user_has("MPI4PY_LIBMPI") && libmpi.is_file() {
            v.push(("MPI4PY_LIBMPI".into(), libmpi.display().to_string()));
        }
    }
    // Oversubscribed ranks yield when idle, unless the user chose a value.
    if oversubscribed
        && !user_has("OXMPI_MCA_mpi_yield_when_idle")
        && !user_has("OMPI_MCA_mpi_yield_when_idle")
    {
        v.push(("OXMPI_MCA_mpi_yield_when_idle".into(), "1".into()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{allocate, map_job};
    use crate::cli::test_spec as spec;
    use crate::topo::LocalTopology;

    fn get<'a>(v: &'a [(String, String)], k: &str) -> Option<&'a str> {
        v.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn prefix_is_reapplied_after_user_path_and_mca_is_delivered() {
        let s = spec(&[
            "--prefix",
            "/opt/ox",
            "-x",
            "PATH=/u/bin",
            "-x",
            "HOME",
            "-x",
            "NOPE",
            "--mca",
            "btl",
            "sm",
            "p",
        ]);
        let parent = |k: &str| match k {
            "HOME" => Some("/root".to_string()),
            "PATH" => Some("/usr/bin".to_string()),
            _ => None,
        };
        let mca = vec![("OXMPI_MCA_btl".to_string(), "sm".to_string())];
        let (v, w) = app_overlay(&s, &s.apps[0], &mca, &parent);
        assert_eq!(get(&v, "PATH"), Some("/opt/ox/bin:/u/bin"));
        assert_eq!(get(&v, "LD_LIBRARY_PATH"), Some("/opt/ox/lib"));
        assert_eq!(get(&v, "HOME"), Some("/root"));
        assert_eq!(get(&v, "OXMPI_MCA_btl"), Some("sm"));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("NOPE"));
    }

    #[test]
    fn rank_variables_and_yield_rule() {
        let t = LocalTopology::from_groups(vec![vec![0], vec![1]]);
        let s = spec(&["-n", "3", "a", ":", "-n", "1", "b"]);
        let a = allocate(&s, "vm", &t).unwrap();
        let m = map_job(&s, &a, &t).unwrap();
        let dir = Path::new("/tmp/x");
        let f = JobFacts {
            jobid: "j1",
            job_dir: dir,
            install_prefix: None,
            universe_size: 4,
            num_nodes: 1,
            restart_count: Some(2),
            name_server: Some("oxmpi-server:h::1:00"),
        };
        let v = rank_vars(&f, &m, &m.procs[3], Some(7), &|_| false);
        assert_eq!(get(&v, "OMPI_COMM_WORLD_RANK"), Some("3"));
        assert_eq!(get(&v, "OMPI_COMM_WORLD_SIZE"), Some("4"));
        assert_eq!(get(&v, "OXMPI_RESTART_COUNT"), Some("2"));
        assert_eq!(get(&v, "OXMPI_NAME_SERVER"), Some("oxmpi-server:h::1:00"));
        assert_eq!(get(&v, "OMPI_COMM_WORLD_LOCAL_SIZE"), Some("4"));
        assert_eq!(get(&v, "OMPI_FIRST_RANKS"), Some("0 3"));
        assert_eq!(get(&v, "OXMPI_APPNUM"), Some("1"));
        assert_eq!(get(&v, "PMI_FD"), Some("7"));
        assert_eq!(get(&v, "OXMPI_OVERSUBSCRIBED"), Some("1"));
        assert_eq!(get(&v, "OXMPI_MCA_mpi_yield_when_idle"), Some("1"));
        let v = rank_vars(&f, &m, &m.procs[0], None, &|k| {
            k == "OMPI_MCA_mpi_yield_when_idle"
        });
        assert_eq!(get(&v, "OXMPI_MCA_mpi_yield_when_idle"), None);
        let s = spec(&["-n", "2", "a"]);
        let m = map_job(&s, &a, &t).unwrap();
        let v = rank_vars(&f, &m, &m.procs[0], None, &|_| false);
        assert_eq!(get(&v, "OXMPI_OVERSUBSCRIBED"), Some("0"));
        assert_eq!(get(&v, "OXMPI_MCA_mpi_yield_when_idle"), None);
    }

    #[test]
    fn mpi4py_is_pointed_at_the_installed_libmpi() {
        let t = LocalTopology::from_groups(vec![vec![0]]);
        let s = spec(&["-n", "1", "a"]);
        let a = allocate(&s, "vm", &t).unwrap();
        let m = map_job(&s, &a, &t).unwrap();
        let prefix = std::env::temp_dir().join(format!("oxmpi-env-prefix-{}", std::process::id()));
        let lib = prefix.join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        let facts = |p| JobFacts {
            jobid: "j1",
            job_dir: Path::new("/tmp/x"),
            install_prefix: Some(p),
            universe_size: 1,
            num_nodes: 1,
            restart_count: None,
            name_server: None,
        };
        // No library installed under the prefix: nothing to point at.
        let v = rank_vars(&facts(&prefix), &m, &m.procs[0], None, &|_| false);
        assert_eq!(get(&v, "MPI4PY_LIBMPI"), None);
        std::fs::write(lib.join("libmpi.so.12"), b"").unwrap();
        let v = rank_vars(&facts(&prefix), &m, &m.procs[0], None, &|_| false);
        let want = lib.join("libmpi.so.12").display().to_string();
        assert_eq!(get(&v, "MPI4PY_LIBMPI"), Some(want.as_str()));
        // The user's own choice wins.
        let v = rank_vars(&facts(&prefix), &m, &m.procs[0], None, &|k| {
            k == "MPI4PY_LIBMPI"
        });
        assert_eq!(get(&v, "MPI4PY_LIBMPI"), None);
        std::fs::remove_dir_all(&prefix).unwrap();
    }
}
