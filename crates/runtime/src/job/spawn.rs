//! Dynamic processes: planning a job that a running job asked for over PMI `spawn`
//! (`MPI_Comm_spawn[_multiple]`). The head maps the children onto what the running jobs
//! leave free of the allocation, on every node of it (the head starts a daemon on a node
//! that has none yet), by slot as `mpirun` maps, with the same oversubscription rules
//! (`--nooversubscribe` bounds them by the free slots), and honours the info keys `wdir`,
//! `path`, `soft`, and, with Open MPI's meaning, `host` (a comma-separated list of hosts of
//! the allocation the command's processes go to), `hostfile` (a file naming such hosts)
//! and `add-host` (hosts added to the allocation, for this and later spawns, which the
//! command's processes then use).

use crate::alloc::{map_job, parse_hostfile, parse_hosts, Allocation, JobMap, Placement};
use crate::cli::{AppSpec, BindTo, StdinTarget};
use crate::job::{resolve_program, JobPlan, ResolvedApp};
use crate::topo::is_local_host;
use oxmpi_wire::pmi::{SpawnCommand, SpawnRequest};
use std::path::PathBuf;
/// Largest count allowed by an MPI `soft` info value (`"1:4,8"`, `"2:10:2"`) that is at
/// most `limit`; `None` when the value is malformed or allows nothing that small.
pub fn soft_count(soft: &str, limit: usize) -> Option<usize> {
    let mut best: Option<usize> = None;
    for part in soft.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let f: Vec<&str> = part.split(':').collect();
        let n = |s: &str| s.trim().parse::<usize>().ok();
        let (lo, hi, step) = match f.as_slice() {
            [a] => (n(a)?, n(a)?, 1),
            [a, b] => (n(a)?, n(b)?, 1),
            [a, b, s] => (n(a)?, n(b)?, n(s)?.max(1)),
            _ => return None,
        };
        let mut v = lo;
        while v <= hi && v <= limit {
            best = best.max(Some(v));
            v += step;
        }
    }
    best.filter(|&b| b > 0)
}

/// Why a spawn request cannot start: one line naming the command and the host.
fn refuse(cmd: &SpawnCommand, host: &str, reason: impl std::fmt::Display) -> String {
    format!("cannot spawn '{}' on host {host}: {reason}", cmd.program)
}

/// The index in `alloc` of host `name` (its full or short name; `localhost` and this
/// machine's names are the local node).
fn find_node(alloc: &Allocation, name: &str, local_host: &str) -> Option<usize> {
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_string();
    alloc
        .nodes
        .iter()
        .position(|n| n.name == name)
        .or_else(|| {
            alloc
                .nodes
                .iter()
                .position(|n| short(&n.name) == short(name))
        })
        .or_else(|| {
            is_local_host(name, local_host)
                .then(|| alloc.nodes.iter().position(|n| n.local))
                .flatten()
        })
}

/// The nodes command `cmd` may use, by its `host`, `hostfile` and `add-host` info keys
/// (`None`: the whole allocation); `add-host` first adds its hosts to `alloc`.
fn command_nodes(
    cmd: &SpawnCommand,
    alloc: &mut Allocation,
    local_host: &str,
    cores: usize,
    cwd: &std::path::Path,
) -> Result<Option<Vec<usize>>, String> {
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut names: Vec<String> = Vec::new();
    let mut restricted = false;
    if let Some(v) = cmd.info("add-host") {
        let added = parse_hosts(&list(v), local_host, cores)
            .map_err(|e| refuse(cmd, local_host, format!("bad add-host value '{v}': {e}")))?;
        for n in &added.nodes {
            if find_node(alloc, &n.name, local_host).is_none() {
                alloc.add(&n.name, n.slots, None, local_host, cores);
            }
            names.push(n.name.clone());
        }
        restricted = true;
    }
    if let Some(v) = cmd.info("host") {
        let hosts = parse_hosts(&list(v), local_host, cores)
            .map_err(|e| refuse(cmd, local_host, format!("bad host value '{v}': {e}")))?;
        names.extend(hosts.nodes.into_iter().map(|n| n.name));
        restricted = true;
    }
    if let Some(f) = cmd.info("hostfile") {
        let path = cwd.join(f);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| refuse(cmd, local_host, format!("cannot read hostfile '{f}': {e}")))?;
        let hosts = parse_hostfile(&path, &text, local_host, cores)
            .map_err(|e| refuse(cmd, local_host, e))?;
        names.extend(hosts.nodes.into_iter().map(|n| n.name));
        restricted = true;
    }
    if !restricted {
        return Ok(None);
    }
    let mut nodes = Vec::new();
    for name in &names {
        let i = find_node(alloc, name, local_host).ok_or_else(|| {
            refuse(
                cmd,
                name,
                format!(
                    "host '{name}' is not in the job's allocation ({}); the add-host info key adds hosts",
                    alloc
                        .nodes
                        .iter()
                        .map(|n| n.name.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            )
        })?;
        if !nodes.contains(&i) {
            nodes.push(i);
        }
    }
    Ok(Some(nodes))
}

/// The plan of a spawned job on `alloc` (the job's allocation, grown by earlier
/// `add-host` keys) minus `used` slots per node (the ranks of the running jobs there; a
/// shorter list counts the nodes after it as unused): the request's commands as
/// application contexts (`MPI_APPNUM` = command index), each mapped by slot onto the nodes
/// its info keys allow, ranks in command order; the parent's environment overlay for every
/// context. The plan's allocation is `alloc` with the hosts `add-host` added (slots as
/// given), for the head to keep.
pub fn plan_spawn(
    parent: &JobPlan,
    alloc: &Allocation,
    used: &[usize],
    req: &SpawnRequest,
) -> Result<JobPlan, String> {
    let host = parent.host.clone();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let cores = parent.topo.num_cores();
    let overlay = parent
        .apps
        .first()
        .map(|a| a.overlay.clone())
        .unwrap_or_default();
    let mut full = alloc.clone();
    let bounded = parent.spec.oversubscribe == Some(false);
    let mut used: Vec<usize> = used.to_vec();
    let mut apps = Vec::new();
    let mut specs = Vec::new();
    let mut node_of: Vec<(usize, usize)> = Vec::new();
    if req.commands.is_empty() {
        return Err("spawn request without commands".into());
    }
    for (app, cmd) in req.commands.iter().enumerate() {
        if cmd.maxprocs == 0 {
            return Err(refuse(cmd, &host, "maxprocs must be at least 1"));
        }
        let allowed = command_nodes(cmd, &mut full, &host, cores, &cwd)?;
        used.resize(full.nodes.len(), 0);
        // What this command may use: the free slots of its nodes.
        let mut view = full.clone();
        for (i, n) in view.nodes.iter_mut().enumerate() {
            let off = allowed.as_ref().is_some_and(|a| !a.contains(&i));
            if off {
                n.slots = 0;
                n.max_slots = Some(0);
            } else {
                n.slots = n.slots.saturating_sub(used[i]);
                n.max_slots = n.max_slots.map(|m| m.saturating_sub(used[i]));
            }
        }
        let free = view.total_slots();
        let where_ = match &allowed {
            Some(a) if a.len() == 1 => full.nodes[a[0]].name.clone(),
            _ => host.clone(),
        };
        let wdir = match cmd.info("wdir") {
            Some(w) => {
                let abs = cwd.join(w);
                if !abs.is_dir() {
                    return Err(refuse(
                        cmd,
                        &where_,
                        format!("working directory '{w}' does not exist"),
                    ));
                }
                Some(abs)
            }
            None => None,
        };
        let base = wdir.as_deref().unwrap_or(&cwd);
        let path_var = overlay
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("PATH").ok());
        let path_var = match cmd.info("path") {
            Some(p) => format!("{p}:{}", path_var.unwrap_or_default()),
            None => path_var.unwrap_or_default(),
        };
        let program = resolve_program(&cmd.program, base, Some(&path_var))
            .map_err(|e| refuse(cmd, &where_, e))?;
        let mut np = cmd.maxprocs as usize;
        if let Some(s) = cmd.info("soft") {
            let room = if bounded { free } else { np };
            np = soft_count(s, room.min(np)).ok_or_else(|| {
                refuse(cmd, &where_, format!("no count allowed by soft={s} fits"))
            })?;
        }
        let mut argv = vec![cmd.program.clone()];
        argv.extend(cmd.argv.iter().cloned());
        let one = AppSpec {
            np: Some(np),
            argv: argv.clone(),
            env: Vec::new(),
            wdir: wdir.clone(),
        };
        let mut spec = parent.spec.clone();
        spec.apps = vec![one.clone()];
        spec.per_node = None;
        spec.map_by = crate::cli::MapBy::Slot;
        spec.bind_to = BindTo::None;
        let map = map_job(&spec, &view, &parent.topo).map_err(|e| match e {
            crate::error::RuntimeError::NotEnoughSlots { requested, .. } => refuse(
                cmd,
                &where_,
                format!(
                    "{requested} process(es) requested but only {free} slot(s) are free{} and oversubscription is off",
                    if allowed.is_some() { " on the hosts asked for" } else { "" }
                ),
            ),
            e => refuse(cmd, &where_, e),
        })?;
        for p in &map.procs {
            used[p.node] += 1;
            node_of.push((p.node, app));
        }
        apps.push(ResolvedApp {
            program,
            argv,
            wdir,
            overlay: overlay.clone(),
        });
        specs.push(one);
    }
    let mut map = joined_map(&node_of, full.nodes.len(), specs.len());
    // A node runs more processes than it has cores, the parents' included.
    for (i, n) in full.nodes.iter().enumerate() {
        map.oversubscribed[i] = used[i] > n.cores;
    }
    let mut spec = parent.spec.clone();
    spec.apps = specs;
    spec.per_node = None;
    spec.stdin = StdinTarget::None;
    // The parents keep their cores; children are not bound.
    spec.bind_to = BindTo::None;
    spec.output_filename = None;
    Ok(JobPlan {
        spec,
        alloc: full,
        map,
        topo: parent.topo.clone(),
        host,
        apps,
        warnings: Vec::new(),
        prefix: parent.prefix.clone(),
        agent: None,
        spawn_agent: None,
        head_address: None,
        daemon_timeout: parent.daemon_timeout,
        link_timeout: parent.link_timeout,
        teardown_timeout: parent.teardown_timeout,
        handshake_timeout: parent.handshake_timeout,
        heartbeat: parent.heartbeat,
        ft: parent.ft,
    })
}

/// The map of a job whose ranks, in order, run on `node_of` = (node, application context)
/// over `nodes` nodes (no binding).
fn joined_map(node_of: &[(usize, usize)], nodes: usize, apps: usize) -> JobMap {
    let mut per_node = vec![0usize; nodes];
    let mut app_sizes = vec![0usize; apps];
    for &(n, a) in node_of {
        per_node[n] += 1;
        app_sizes[a] += 1;
    }
    let mut seen = vec![0usize; nodes];
    let procs = node_of
        .iter()
        .enumerate()
        .map(|(rank, &(node, app))| {
            seen[node] += 1;
            Placement {
                rank,
                app,
                node,
                local_rank: seen[node] - 1,
                local_size: per_node[node],
                cpus: None,
            }
        })
        .collect();
    JobMap {
        procs,
        oversubscribed: vec![false; nodes],
        per_node,
        app_sizes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_values() {
        assert_eq!(soft_count("1:4", 3), Some(3));
        assert_eq!(soft_count("1:4", 10), Some(4));
        assert_eq!(soft_count("2:10:2", 7), Some(6));
        assert_eq!(soft_count("1,8", 7), Some(1));
        assert_eq!(soft_count("5", 4), None);
        assert_eq!(soft_count("x", 4), None);
    }

    #[test]
    fn requests_are_checked_before_anything_starts() {
        let spec = crate::cli::test_spec(&[
            "-n",
            "1",
            "--nooversubscribe",
            "--host",
            "localhost:2",
            "true",
        ]);
        let Ok(parent) = crate::job::plan(spec) else {
            panic!("plan");
        };
        let req = |c| SpawnRequest {
            commands: vec![c],
            preput: vec![],
        };
        let ok = plan_spawn(&parent, &parent.alloc, &[1], &req(command("true", 1, &[]))).unwrap();
        assert_eq!(ok.map.size(), 1);
        let e = plan_spawn(
            &parent,
            &parent.alloc,
            &[1],
            &req(command("no-such-cmd-x", 1, &[])),
        )
        .unwrap_err();
        assert!(
            e.contains("'no-such-cmd-x'") && e.contains("on host"),
            "{e}"
        );
        let e =
            plan_spawn(&parent, &parent.alloc, &[1], &req(command("true", 2, &[]))).unwrap_err();
        assert!(
            e.contains("2 process(es) requested but only 1 slot(s)"),
            "{e}"
        );
        let soft = plan_spawn(
            &parent,
            &parent.alloc,
            &[1],
            &req(command("true", 4, &[("soft", "1:4")])),
        )
        .unwrap();
        assert_eq!(soft.map.size(), 1);
        let e = plan_spawn(
            &parent,
            &parent.alloc,
            &[1],
            &req(command("true", 1, &[("wdir", "/no/such/dir")])),
        )
        .unwrap_err();
        assert!(e.contains("/no/such/dir"), "{e}");
        let e = plan_spawn(
            &parent,
            &parent.alloc,
            &[1],
            &req(command("true", 1, &[("host", "elsewhere")])),
        )
        .unwrap_err();
        assert!(
            e.contains("host elsewhere: host 'elsewhere' is not in the job's allocation"),
            "{e}"
        );
    }

    fn command(p: &str, n: u32, info: &[(&str, &str)]) -> SpawnCommand {
        SpawnCommand {
            program: p.into(),
            argv: vec![],
            maxprocs: n,
            info: info
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// Children go by slot onto the slots the running ranks leave free on every node,
    /// where their `host`, `hostfile` and `add-host` info keys allow.
    #[test]
    fn children_are_placed_across_nodes() {
        let spec = crate::cli::test_spec(&[
            "-n",
            "1",
            "--nooversubscribe",
            "--host",
            "localhost:2,far:2",
            "true",
        ]);
        let Ok(parent) = crate::job::plan(spec) else {
            panic!("plan");
        };
        assert_eq!(parent.alloc.nodes.len(), 2);
        assert!(parent.agent.is_none() && parent.spawn_agent.is_some());
        let one = |c| SpawnRequest {
            commands: vec![c],
            preput: vec![],
        };
        let used = [1];
        let spawn = |n: u32, info: &[(&str, &str)]| {
            plan_spawn(
                &parent,
                &parent.alloc,
                &used,
                &one(command("true", n, info)),
            )
        };
        // One free slot here, two on far.
        let p = spawn(3, &[]).unwrap();
        assert_eq!(p.map.per_node, [1, 2]);
        assert_eq!(
            p.map.procs.iter().map(|q| q.node).collect::<Vec<_>>(),
            [0, 1, 1]
        );
        let fails_with = |n: u32, info: &[(&str, &str)], what: &str| {
            let e = spawn(n, info).unwrap_err();
            assert!(e.contains(what), "{e}");
        };
        fails_with(4, &[], "4 process(es) requested but only 3 slot(s)");
        assert_eq!(spawn(2, &[("host", "far")]).unwrap().map.per_node, [0, 2]);
        fails_with(
            2,
            &[("host", "localhost")],
            "only 1 slot(s) are free on the hosts asked for",
        );
        // A hostfile naming far.
        let f = std::env::temp_dir().join(format!("oxmpi-spawn-hosts-{}", std::process::id()));
        std::fs::write(&f, "far slots=2\n").unwrap();
        let p = spawn(1, &[("hostfile", f.to_str().unwrap())]);
        std::fs::remove_file(&f).unwrap();
        assert_eq!(p.unwrap().map.per_node, [0, 1]);
        fails_with(
            1,
            &[("hostfile", "/no/such/hostfile")],
            "cannot read hostfile '/no/such/hostfile'",
        );
        // add-host: a new node with its slots, used by the command, kept in the plan.
        let p = spawn(2, &[("add-host", "new:2")]).unwrap();
        assert_eq!(p.alloc.nodes.len(), 3);
        assert_eq!(p.alloc.nodes[2].name, "new");
        assert_eq!(p.map.per_node, [0, 0, 2]);
        // Two commands: ranks in command order, each on its own host.
        let two = SpawnRequest {
            commands: vec![
                command("true", 2, &[("host", "far")]),
                command("true", 1, &[("host", "localhost")]),
            ],
            preput: vec![],
        };
        let p = plan_spawn(&parent, &parent.alloc, &used, &two).unwrap();
        assert_eq!(
            p.map
                .procs
                .iter()
                .map(|q| (q.node, q.app, q.local_rank))
                .collect::<Vec<_>>(),
            [(1, 0, 0), (1, 0, 1), (0, 1, 0)]
        );
        assert_eq!(p.map.app_sizes, [2, 1]);
    }
}
