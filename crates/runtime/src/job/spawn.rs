//! Dynamic processes: planning a job that a running job asked for over PMI `spawn`
//! (`MPI_Comm_spawn[_multiple]`). The head maps the children onto what the parent job
//! leaves free of the allocation, with the same rules as `mpirun` (`--nooversubscribe`
//! bounds them by the slots), and honours the info keys `wdir`, `path`, `host` and `soft`.
//! Children run on the head's node only for now.

use crate::alloc::map_job;
use crate::cli::{AppSpec, BindTo, StdinTarget};
use crate::job::{resolve_program, JobPlan, ResolvedApp};
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

/// The plan of a spawned job: the parent job's allocation minus `used` slots per node
/// (the ranks already running there), the request's commands as application contexts
/// (`MPI_APPNUM` = command index), the parent's environment overlay for every context.
pub fn plan_spawn(parent: &JobPlan, used: &[usize], req: &SpawnRequest) -> Result<JobPlan, String> {
    let host = parent.host.clone();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let overlay = parent
        .apps
        .first()
        .map(|a| a.overlay.clone())
        .unwrap_or_default();
    let mut alloc = parent.alloc.clone();
    for (n, u) in alloc.nodes.iter_mut().zip(used) {
        n.slots = n.slots.saturating_sub(*u);
        n.max_slots = n.max_slots.map(|m| m.saturating_sub(*u));
    }
    alloc.nodes.retain(|n| n.local);
    let free = alloc.total_slots();
    let bounded = parent.spec.oversubscribe == Some(false);
    let mut apps = Vec::new();
    let mut specs = Vec::new();
    let mut total = 0usize;
    for cmd in &req.commands {
        if cmd.maxprocs == 0 {
            return Err(refuse(cmd, &host, "maxprocs must be at least 1"));
        }
        if let Some(h) = cmd.info("host") {
            let h = h.trim();
            if h != host && h != "localhost" && !host.starts_with(&format!("{h}.")) {
                return Err(refuse(
                    cmd,
                    h,
                    format!("spawning on a host other than mpirun's ({host}) is not supported yet"),
                ));
            }
        }
        let wdir = match cmd.info("wdir") {
            Some(w) => {
                let abs = cwd.join(w);
                if !abs.is_dir() {
                    return Err(refuse(
                        cmd,
                        &host,
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
            .map_err(|e| refuse(cmd, &host, e))?;
        let mut np = cmd.maxprocs as usize;
        if let Some(s) = cmd.info("soft") {
            let room = if bounded {
                free.saturating_sub(total)
            } else {
                np
            };
            np = soft_count(s, room.min(np))
                .ok_or_else(|| refuse(cmd, &host, format!("no count allowed by soft={s} fits")))?;
        }
        total += np;
        let mut argv = vec![cmd.program.clone()];
        argv.extend(cmd.argv.iter().cloned());
        apps.push(ResolvedApp {
            program,
            argv: argv.clone(),
            wdir: wdir.clone(),
            overlay: overlay.clone(),
        });
        specs.push(AppSpec {
            np: Some(np),
            argv,
            env: Vec::new(),
            wdir,
        });
    }
    let mut spec = parent.spec.clone();
    spec.apps = specs;
    spec.per_node = None;
    spec.stdin = StdinTarget::None;
    // The parents keep their cores; children are not bound.
    spec.bind_to = BindTo::None;
    spec.output_filename = None;
    let first = req
        .commands
        .first()
        .ok_or_else(|| "spawn request without commands".to_string())?;
    let map = map_job(&spec, &alloc, &parent.topo).map_err(|e| match e {
        crate::error::RuntimeError::NotEnoughSlots { requested, .. } => refuse(
            first,
            &host,
            format!(
                "{requested} process(es) requested but only {free} slot(s) are free and oversubscription is off"
            ),
        ),
        e => refuse(first, &host, e),
    })?;
    Ok(JobPlan {
        spec,
        alloc,
        map,
        topo: parent.topo.clone(),
        host,
        apps,
        warnings: Vec::new(),
        prefix: parent.prefix.clone(),
        agent: None,
        head_address: None,
        daemon_timeout: parent.daemon_timeout,
        link_timeout: parent.link_timeout,
        teardown_timeout: parent.teardown_timeout,
        handshake_timeout: parent.handshake_timeout,
        heartbeat: parent.heartbeat,
        ft: parent.ft,
    })
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
        let cmd = |p: &str, n: u32, info: &[(&str, &str)]| SpawnCommand {
            program: p.into(),
            argv: vec![],
            maxprocs: n,
            info: info
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let req = |c| SpawnRequest {
            commands: vec![c],
            preput: vec![],
        };
        let ok = plan_spawn(&parent, &[1], &req(cmd("true", 1, &[]))).unwrap();
        assert_eq!(ok.map.size(), 1);
        let e = plan_spawn(&parent, &[1], &req(cmd("no-such-cmd-x", 1, &[]))).unwrap_err();
        assert!(
            e.contains("'no-such-cmd-x'") && e.contains("on host"),
            "{e}"
        );
        let e = plan_spawn(&parent, &[1], &req(cmd("true", 2, &[]))).unwrap_err();
        assert!(
            e.contains("2 process(es) requested but only 1 slot(s)"),
            "{e}"
        );
        let soft = plan_spawn(&parent, &[1], &req(cmd("true", 4, &[("soft", "1:4")]))).unwrap();
        assert_eq!(soft.map.size(), 1);
        let e = plan_spawn(
            &parent,
            &[1],
            &req(cmd("true", 1, &[("wdir", "/no/such/dir")])),
        )
        .unwrap_err();
        assert!(e.contains("/no/such/dir"), "{e}");
        let e = plan_spawn(
            &parent,
            &[1],
            &req(cmd("true", 1, &[("host", "elsewhere")])),
        )
        .unwrap_err();
        assert!(e.contains("host elsewhere"), "{e}");
    }
}
