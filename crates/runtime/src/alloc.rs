//! Allocation (which nodes, how many slots) and mapping (which rank runs where).

use crate::cli::{BindTo, JobSpec, MapBy};
use crate::error::{Result, RuntimeError};
use crate::topo::{is_local_host, LocalTopology};
use std::path::Path;

/// One node of the allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Host name as the user gave it (or this machine's name).
    pub name: String,
    /// Slots (ranks that fit without oversubscription).
    pub slots: usize,
    /// Hard limit from a hostfile's `max_slots=`, never exceeded even when oversubscribing.
    pub max_slots: Option<usize>,
    /// Whether this is the node `mpirun` runs on.
    pub local: bool,
    /// Cores of the node (local: detected; remote: assumed equal to the slots).
    pub cores: usize,
}

/// The nodes available to a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// Nodes in order of first appearance.
    pub nodes: Vec<Node>,
}

impl Allocation {
    /// Total slots.
    pub fn total_slots(&self) -> usize {
        self.nodes.iter().map(|n| n.slots).sum()
    }

    /// `host:slots` list used in the "not enough slots" message.
    pub fn describe_slots(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("{}:{}", n.name, n.slots))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Add `slots` slots of host `name` (a new node, or more slots of a known one;
    /// `localhost` and this machine's names are the local node).
    pub(crate) fn add(
        &mut self,
        name: &str,
        slots: usize,
        max: Option<usize>,
        local_name: &str,
        cores: usize,
    ) {
        let local = is_local_host(name, local_name);
        // `localhost`, the short and the full name of this machine are one node.
        if let Some(n) = self
            .nodes
            .iter_mut()
            .find(|n| n.name == name || (local && n.local))
        {
            n.slots += slots;
            if max.is_some() {
                n.max_slots = max;
            }
            return;
        }
        self.nodes.push(Node {
            name: name.to_string(),
            slots,
            max_slots: max,
            local,
            cores: if local { cores } else { slots.max(1) },
        });
    }
}

/// Parse hostfile text (`host [slots=N] [max_slots=M]`, `#` comments, optional `user@`).
/// Hosts without `slots=` get `default_slots`.
pub fn parse_hostfile(
    path: &Path,
    text: &str,
    local_name: &str,
    local_cores: usize,
) -> Result<Allocation> {
    let mut alloc = Allocation { nodes: Vec::new() };
    for (idx, raw) in text.lines().enumerate() {
        let err = |reason: String| RuntimeError::Hostfile {
            file: path.to_path_buf(),
            line: idx + 1,
            reason,
        };
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut toks = line.split_whitespace();
        let host = toks.next().unwrap_or_default();
        let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
        if host.is_empty() || host.contains('=') || host.contains(',') {
            return Err(err(format!("invalid host name '{host}'")));
        }
        let mut slots = None;
        let mut max = None;
        for t in toks {
            let (k, v) = t
                .split_once('=')
                .ok_or_else(|| err(format!("expected key=value, found '{t}'")))?;
            let n: usize = v
                .parse()
                .map_err(|_| err(format!("'{k}' needs a non-negative integer, found '{v}'")))?;
            match k {
                "slots" | "cpu" | "count" => slots = Some(n),
                "max_slots" | "max-slots" => max = Some(n),
                _ => return Err(err(format!("unknown keyword '{k}'"))),
            }
        }
        let local = is_local_host(host, local_name);
        let s = slots.unwrap_or(if local {
            local_cores
        } else {
            local_cores.max(1)
        });
        if let (Some(m), true) = (max, s > max.unwrap_or(usize::MAX)) {
            return Err(err(format!("slots={s} exceeds max_slots={m}")));
        }
        alloc.add(host, s, max, local_name, local_cores);
    }
    if alloc.nodes.is_empty() {
        return Err(RuntimeError::Hostfile {
            file: path.to_path_buf(),
            line: 0,
            reason: "no hosts found".into(),
        });
    }
    Ok(alloc)
}

/// Parse `--host` entries (`name` = 1 slot, `name:N`; repeated names add slots).
pub fn parse_hosts(entries: &[String], local_name: &str, local_cores: usize) -> Result<Allocation> {
    let mut alloc = Allocation { nodes: Vec::new() };
    for e in entries {
        let (name, slots) = match e.rsplit_once(':') {
            Some((n, s)) => {
                let v = s.parse::<usize>().ok().filter(|&v| v > 0).ok_or_else(|| {
                    RuntimeError::BadValue {
                        option: "--host".into(),
                        value: e.clone(),
                        reason: "slot count after ':' must be a positive integer".into(),
                    }
                })?;
                (n, v)
            }
            None => (e.as_str(), 1),
        };
        if name.is_empty() {
            return Err(RuntimeError::BadValue {
                option: "--host".into(),
                value: e.clone(),
                reason: "empty host name".into(),
            });
        }
        alloc.add(name, slots, None, local_name, local_cores);
    }
    Ok(alloc)
}

/// The allocation of the enclosing Slurm job (`salloc`/`sbatch`), if any: nodes from
/// `SLURM_JOB_NODELIST` (full hostlist grammar), slots from `SLURM_TASKS_PER_NODE`.
/// `env` looks up environment variables. `Ok(None)` outside a Slurm job.
pub fn slurm_allocation(
    env: &dyn Fn(&str) -> Option<String>,
    local_name: &str,
    local_cores: usize,
) -> Result<Option<Allocation>> {
    if env("SLURM_JOB_ID").or_else(|| env("SLURM_JOBID")).is_none() {
        return Ok(None);
    }
    let bad = |var: &str, value: &str, reason: String| RuntimeError::BadValue {
        option: var.to_string(),
        value: value.to_string(),
        reason,
    };
    let (var, list) = match env("SLURM_JOB_NODELIST").or_else(|| env("SLURM_NODELIST")) {
        Some(l) => ("SLURM_JOB_NODELIST", l),
        None => {
            return Err(bad(
                "SLURM_JOB_NODELIST",
                "",
                "SLURM_JOB_ID is set but the node list is missing from the environment".into(),
            ))
        }
    };
    let hosts = oxmpi_base::hostlist::expand(&list).map_err(|e| bad(var, &list, e.to_string()))?;
    let tasks = env("SLURM_TASKS_PER_NODE").unwrap_or_default();
    let counts = if tasks.is_empty() {
        vec![1; hosts.len()]
    } else {
        oxmpi_base::hostlist::expand_tasks_per_node(&tasks, 1 << 20)
            .map_err(|e| bad("SLURM_TASKS_PER_NODE", &tasks, e.to_string()))?
    };
    if counts.len() < hosts.len() {
        return Err(bad(
            "SLURM_TASKS_PER_NODE",
            &tasks,
            format!("{} counts for {} nodes", counts.len(), hosts.len()),
        ));
    }
    let mut alloc = Allocation { nodes: Vec::new() };
    // Extra counts beyond the node count are tolerated (as Open MPI does).
    for (h, &c) in hosts.iter().zip(&counts) {
        alloc.add(h, c as usize, None, local_name, local_cores);
    }
    Ok(Some(alloc))
}

/// Build the allocation of a job from `--hostfile`, `--host`, the enclosing Slurm job, or
/// the local cores (in that order of preference).
pub fn allocate(spec: &JobSpec, local_name: &str, topo: &LocalTopology) -> Result<Allocation> {
    let cores = topo.num_cores();
    let from_file = match &spec.hostfile {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| RuntimeError::ReadFile {
                what: "hostfile",
                path: p.clone(),
                source: e,
            })?;
            Some(parse_hostfile(p, &text, local_name, cores)?)
        }
        None => None,
    };
    match (from_file, spec.hosts.is_empty()) {
        (Some(file), true) => Ok(file),
        (Some(file), false) => {
            let hosts = parse_hosts(&spec.hosts, local_name, cores)?;
            for h in &hosts.nodes {
                if !file
                    .nodes
                    .iter()
                    .any(|n| n.name == h.name || (n.local && h.local))
                {
                    return Err(RuntimeError::BadValue {
                        option: "--host".into(),
                        value: h.name.clone(),
                        reason: "host is not included in the hostfile allocation".into(),
                    });
                }
            }
            Ok(hosts)
        }
        (None, false) => parse_hosts(&spec.hosts, local_name, cores),
        (None, true) => {
            let env = |k: &str| std::env::var(k).ok();
            if let Some(a) = slurm_allocation(&env, local_name, cores)? {
                return Ok(a);
            }
            Ok(Allocation {
                nodes: vec![Node {
                    name: local_name.to_string(),
                    slots: cores,
                    max_slots: None,
                    local: true,
                    cores,
                }],
            })
        }
    }
}

/// Where one rank runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// MPI_COMM_WORLD rank.
    pub rank: usize,
    /// Application context index (MPMD appnum).
    pub app: usize,
    /// Index into [`Allocation::nodes`].
    pub node: usize,
    /// Rank among the job's ranks on that node.
    pub local_rank: usize,
    /// Number of the job's ranks on that node.
    pub local_size: usize,
    /// CPUs this rank is bound to (`None`: not bound).
    pub cpus: Option<Vec<usize>>,
}

/// The result of mapping a job onto an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobMap {
    /// One entry per rank, in rank order.
    pub procs: Vec<Placement>,
    /// Ranks placed on each node.
    pub per_node: Vec<usize>,
    /// Whether each node runs more ranks than it has cores.
    pub oversubscribed: Vec<bool>,
    /// Ranks per application context.
    pub app_sizes: Vec<usize>,
}

impl JobMap {
    /// Total ranks.
    pub fn size(&self) -> usize {
        self.procs.len()
    }

    /// Node index of every rank, in rank order.
    pub fn node_of_ranks(&self) -> Vec<u32> {
        self.procs.iter().map(|p| p.node as u32).collect()
    }

    /// `PMI_process_mapping` value: `(vector,(S,N,P),...)` (see the PMI reference, §4).
    pub fn pmi_process_mapping(&self) -> String {
        oxmpi_wire::pmi::process_mapping(&self.node_of_ranks())
    }
}

fn not_enough(spec: &JobSpec, alloc: &Allocation, requested: usize) -> RuntimeError {
    RuntimeError::NotEnoughSlots {
        requested,
        program: spec.apps[0].argv[0].clone(),
        found: alloc.describe_slots(),
    }
}

/// Map the job's ranks onto the allocation.
pub fn map_job(spec: &JobSpec, alloc: &Allocation, topo: &LocalTopology) -> Result<JobMap> {
    let nnodes = alloc.nodes.len();
    let oversub = spec.oversubscribe.unwrap_or(true);
    let app_sizes: Vec<usize> = spec
        .apps
        .iter()
        .map(|a| {
            a.np.unwrap_or(match spec.per_node {
                Some(n) => n * nnodes,
                None => alloc.total_slots().max(1),
            })
        })
        .collect();
    let total: usize = app_sizes.iter().sum();
    let limit = |n: &Node| n.max_slots.unwrap_or(usize::MAX);
    let mut count = vec![0usize; nnodes];
    let mut node_of = Vec::with_capacity(total);

    if let Some(ppn) = spec.per_node {
        if !oversub && alloc.nodes.iter().any(|n| ppn > n.slots) {
            return Err(not_enough(spec, alloc, ppn * nnodes));
        }
        if total > ppn * nnodes {
            return Err(RuntimeError::BadValue {
                option: "-N".into(),
                value: ppn.to_string(),
                reason: format!("{total} ranks do not fit at {ppn} per node on {nnodes} node(s)"),
            });
        }
        for (i, n) in alloc.nodes.iter().enumerate() {
            if ppn > limit(n) {
                return Err(not_enough(spec, alloc, ppn * nnodes));
            }
            for _ in 0..ppn {
                if node_of.len() < total {
                    node_of.push(i);
                    count[i] += 1;
                }
            }
        }
    } else {
        if total > alloc.total_slots() && !oversub {
            return Err(not_enough(spec, alloc, total));
        }
        match spec.map_by {
            MapBy::Slot | MapBy::Core => {
                for (i, n) in alloc.nodes.iter().enumerate() {
                    while count[i] < n.slots && node_of.len() < total {
                        node_of.push(i);
                        count[i] += 1;
                    }
                }
            }
            MapBy::Node => loop {
                let before = node_of.len();
                for (i, n) in alloc.nodes.iter().enumerate() {
                    if count[i] < n.slots && node_of.len() < total {
                        node_of.push(i);
                        count[i] += 1;
                    }
                }
                if node_of.len() == before || node_of.len() == total {
                    break;
                }
            },
        }
        // Oversubscription: spread the rest round-robin, never beyond max_slots.
        while node_of.len() < total {
            let before = node_of.len();
            for (i, n) in alloc.nodes.iter().enumerate() {
                if count[i] < limit(n) && node_of.len() < total {
                    node_of.push(i);
                    count[i] += 1;
                }
            }
            if node_of.len() == before {
                return Err(not_enough(spec, alloc, total));
            }
        }
        if spec.map_by == MapBy::Slot || spec.map_by == MapBy::Core {
            // Keep ranks of a node contiguous (by-slot placement), stable in node order.
            node_of.sort();
        }
    }

    // Open MPI's default binding: cores for jobs of at most 2 ranks that fit the cores of
    // their nodes, nothing otherwise.
    let oversubscribed: Vec<bool> = alloc
        .nodes
        .iter()
        .zip(&count)
        .map(|(n, &c)| c > n.cores)
        .collect();
    let bind = match spec.bind_to {
        BindTo::Default if total <= 2 && !oversubscribed.contains(&true) => BindTo::Core,
        BindTo::Default => BindTo::None,
        b => b,
    };
    let mut seen = vec![0usize; nnodes];
    let mut procs = Vec::with_capacity(total);
    let mut app = 0;
    let mut app_left = app_sizes.first().copied().unwrap_or(0);
    for (rank, &node) in node_of.iter().enumerate() {
        while app_left == 0 {
            app += 1;
            app_left = app_sizes[app];
        }
        app_left -= 1;
        let local_rank = seen[node];
        seen[node] += 1;
        let cpus = match (bind, alloc.nodes[node].local) {
            (BindTo::Core, true) => Some(topo.cores[local_rank % topo.num_cores()].clone()),
            _ => None,
        };
        procs.push(Placement {
            rank,
            app,
            node,
            local_rank,
            local_size: count[node],
            cpus,
        });
    }
    Ok(JobMap {
        procs,
        per_node: count,
        oversubscribed,
        app_sizes,
    })
}

/// Text of `--display-allocation`.
pub fn display_allocation(alloc: &Allocation) -> String {
    let mut s = String::from("======================   ALLOCATED NODES   ======================\n");
    for n in &alloc.nodes {
        s.push_str(&format!(
            "\t{}: slots={} max_slots={} cores={}{}\n",
            n.name,
            n.slots,
            n.max_slots.unwrap_or(0),
            n.cores,
            if n.local { " (local)" } else { "" }
        ));
    }
    s.push_str("=================================================================\n");
    s
}

/// Text of `--display-map`.
pub fn display_map(alloc: &Allocation, map: &JobMap) -> String {
    let mut s = String::from("========================   JOB MAP   ========================\n");
    for (i, n) in alloc.nodes.iter().enumerate() {
        if map.per_node[i] == 0 {
            continue;
        }
        s.push_str(&format!(
            "Data for node: {}\tNum slots: {}\tMax slots: {}\tNum procs: {}{}\n",
            n.name,
            n.slots,
            n.max_slots.unwrap_or(0),
            map.per_node[i],
            if map.oversubscribed[i] {
                "\t(oversubscribed)"
            } else {
                ""
            }
        ));
        for p in map.procs.iter().filter(|p| p.node == i) {
            s.push_str(&format!(
                "\tProcess rank: {} App: {} Local rank: {} Bound: {}\n",
                p.rank,
                p.app,
                p.local_rank,
                p.cpus.as_ref().map_or_else(
                    || "N/A".to_string(),
                    |c| format!("cores {}", crate::topo::format_cpus(c))
                )
            ));
        }
    }
    s.push_str("=============================================================\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_spec as spec;

    fn topo2() -> LocalTopology {
        LocalTopology::from_groups(vec![vec![0], vec![1]])
    }

    #[test]
    fn hostfile_grammar_and_errors() {
        let p = Path::new("hf");
        let a = parse_hostfile(
            p,
            "# c\nvm slots=2\nu@n1 slots=4 max_slots=6\nn2\n\nn1 slots=1\n",
            "vm",
            8,
        )
        .unwrap();
        assert_eq!(a.nodes.len(), 3);
        assert_eq!((a.nodes[0].slots, a.nodes[0].local), (2, true));
        assert_eq!(
            (
                a.nodes[1].name.as_str(),
                a.nodes[1].slots,
                a.nodes[1].max_slots
            ),
            ("n1", 5, Some(6))
        );
        assert_eq!(a.nodes[2].slots, 8);
        let e = parse_hostfile(p, "a\nb slots=x\n", "vm", 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hf:2: 'slots' needs a non-negative integer, found 'x'"
        );
        let e = parse_hostfile(p, "a bogus\n", "vm", 2).unwrap_err();
        assert!(e.to_string().starts_with("hf:1: "), "{e}");
        assert!(parse_hostfile(p, "a slots=3 max_slots=2", "vm", 2).is_err());
        assert!(parse_hostfile(p, "# only comments\n", "vm", 2).is_err());
    }

    #[test]
    fn slurm_allocation_from_environment() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(slurm_allocation(&vars(&[]), "vm", 2).unwrap(), None);
        let env = vars(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "vm,n[01-03]"),
            ("SLURM_TASKS_PER_NODE", "2,3(x2),1"),
        ]);
        let a = slurm_allocation(&env, "vm", 2).unwrap().unwrap();
        let got: Vec<(&str, usize, bool)> = a
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.slots, n.local))
            .collect();
        assert_eq!(
            got,
            [
                ("vm", 2, true),
                ("n01", 3, false),
                ("n02", 3, false),
                ("n03", 1, false)
            ]
        );
        let env = vars(&[
            ("SLURM_JOBID", "7"),
            ("SLURM_NODELIST", "n[1-2"),
            ("SLURM_TASKS_PER_NODE", "1"),
        ]);
        assert!(slurm_allocation(&env, "vm", 2).is_err());
        let env = vars(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "a,b"),
            ("SLURM_TASKS_PER_NODE", "1"),
        ]);
        assert!(slurm_allocation(&env, "vm", 2).is_err());
        let env = vars(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "a"),
            ("SLURM_TASKS_PER_NODE", "x"),
        ]);
        assert!(slurm_allocation(&env, "vm", 2).is_err());
        assert!(slurm_allocation(&vars(&[("SLURM_JOB_ID", "7")]), "vm", 2).is_err());
    }

    #[test]
    fn aliases_of_this_machine_are_one_node() {
        let p = Path::new("hf");
        let a = parse_hostfile(
            p,
            "localhost slots=2\nvm slots=1\nvm.example.org\n",
            "vm",
            4,
        )
        .unwrap();
        assert_eq!(a.nodes.len(), 1);
        assert_eq!(
            (a.nodes[0].name.as_str(), a.nodes[0].slots),
            ("localhost", 7)
        );
        let a = parse_hosts(&["127.0.0.1".into(), "vm:2".into(), "far".into()], "vm", 2).unwrap();
        assert_eq!(a.nodes.len(), 2);
        assert_eq!(a.nodes[0].slots, 3);
    }

    #[test]
    fn repeated_hosts_add_slots() {
        let a = parse_hosts(
            &["localhost".into(), "localhost".into(), "localhost:2".into()],
            "vm",
            2,
        )
        .unwrap();
        assert_eq!(a.nodes.len(), 1);
        assert_eq!(a.nodes[0].slots, 4);
        assert!(parse_hosts(&["a:0".into()], "vm", 2).is_err());
    }

    #[test]
    fn default_is_one_rank_per_core_and_oversubscription_is_flagged() {
        let t = topo2();
        let s = spec(&["p"]);
        let a = allocate(&s, "vm", &t).unwrap();
        let m = map_job(&s, &a, &t).unwrap();
        assert_eq!(m.size(), 2);
        assert_eq!(m.oversubscribed, [false]);
        let s = spec(&["-n", "5", "p"]);
        let m = map_job(&s, &a, &t).unwrap();
        assert_eq!(m.size(), 5);
        assert_eq!(m.oversubscribed, [true]);
        assert!(m.procs.iter().all(|p| p.local_size == 5));
        assert_eq!(m.pmi_process_mapping(), "(vector,(0,1,5))");
    }

    #[test]
    fn nooversubscribe_lists_slots() {
        let t = topo2();
        let s = spec(&["--nooversubscribe", "--host", "vm:2,n1", "-n", "4", "prog"]);
        let a = allocate(&s, "vm", &t).unwrap();
        let e = map_job(&s, &a, &t).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("not enough slots"), "{msg}");
        assert!(msg.contains("4 slots"), "{msg}");
        assert!(msg.contains("vm:2,n1:1"), "{msg}");
    }

    #[test]
    fn map_by_node_and_slot() {
        let t = topo2();
        let s = spec(&["--host", "a:2,b:2", "--map-by", "node", "-n", "4", "p"]);
        let a = allocate(&s, "vm", &t).unwrap();
        let m = map_job(&s, &a, &t).unwrap();
        let nodes: Vec<usize> = m.procs.iter().map(|p| p.node).collect();
        assert_eq!(nodes, [0, 1, 0, 1]);
        // The block list repeats cyclically, so one (0,2,1) covers all four ranks.
        assert_eq!(m.pmi_process_mapping(), "(vector,(0,2,1))");
        let s = spec(&["--host", "a:2,b:2", "-n", "3", "p"]);
        let m = map_job(&s, &a, &t).unwrap();
        let nodes: Vec<usize> = m.procs.iter().map(|p| p.node).collect();
        assert_eq!(nodes, [0, 0, 1]);
        assert_eq!(m.procs[2].local_rank, 0);
        assert_eq!(m.pmi_process_mapping(), "(vector,(0,1,2),(1,1,1))");
    }

    #[test]
    fn display_texts() {
        let t = topo2();
        let s = spec(&["--bind-to", "core", "--host", "vm:2,far:1", "-n", "3", "p"]);
        let a = allocate(&s, "vm", &t).unwrap();
        let m = map_job(&s, &a, &t).unwrap();
        let al = display_allocation(&a);
        assert!(
            al.contains("\tvm: slots=2 max_slots=0 cores=2 (local)\n"),
            "{al}"
        );
        assert!(al.contains("\tfar: slots=1 max_slots=0 cores=1\n"), "{al}");
        let mp = display_map(&a, &m);
        assert!(
            mp.contains("Data for node: vm\tNum slots: 2\tMax slots: 0\tNum procs: 2\n"),
            "{mp}"
        );
        assert!(
            mp.contains("\tProcess rank: 1 App: 0 Local rank: 1 Bound: cores 1\n"),
            "{mp}"
        );
        assert!(
            mp.contains("\tProcess rank: 2 App: 0 Local rank: 0 Bound: N/A\n"),
            "{mp}"
        );
    }

    #[test]
    fn mpmd_app_numbers_and_binding() {
        let t = topo2();
        let s = spec(&["--bind-to", "core", "-n", "2", "a", ":", "-n", "1", "b"]);
        let a = allocate(&s, "vm", &t).unwrap();
        let m = map_job(&s, &a, &t).unwrap();
        let apps: Vec<usize> = m.procs.iter().map(|p| p.app).collect();
        assert_eq!(apps, [0, 0, 1]);
        assert_eq!(m.app_sizes, [2, 1]);
        let cpus: Vec<_> = m.procs.iter().map(|p| p.cpus.clone().unwrap()).collect();
        assert_eq!(cpus, [vec![0], vec![1], vec![0]]);
    }

    #[test]
    fn per_node_and_max_slots() {
        let t = topo2();
        let s = spec(&["-N", "2", "--host", "a:1,b:1", "p"]);
        let a = allocate(&s, "vm", &t).unwrap();
        let m = map_job(&s, &a, &t).unwrap();
        assert_eq!(m.size(), 4);
        assert_eq!(m.per_node, [2, 2]);
        let p = Path::new("hf");
        let a = parse_hostfile(p, "a slots=1 max_slots=2\n", "vm", 2).unwrap();
        let s = spec(&["-n", "3", "p"]);
        assert!(map_job(&s, &a, &t).is_err());
    }
}
