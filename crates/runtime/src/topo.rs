//! Local node facts: host name and the cores this process may run on (from the affinity mask
//! and sysfs; each core is the list of its hardware threads).

use std::collections::BTreeMap;

/// The processors of the local node visible to this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalTopology {
    /// Cores, each a sorted list of logical CPU numbers, ordered by first CPU.
    pub cores: Vec<Vec<usize>>,
}

impl LocalTopology {
    /// Read the affinity mask and group its CPUs by (package, core) using sysfs.
    pub fn detect() -> Self {
        let cpus = allowed_cpus();
        let mut groups: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
        for &cpu in &cpus {
            let read = |f: &str| -> Option<i64> {
                std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{f}"))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            };
            let key = match (read("physical_package_id"), read("core_id")) {
                (Some(p), Some(c)) => (p, c),
                // Unknown topology: every CPU is its own core.
                _ => (-1, cpu as i64),
            };
            groups.entry(key).or_default().push(cpu);
        }
        Self::from_groups(groups.into_values().collect())
    }

    /// Build from explicit CPU groups (sorted for determinism).
    pub fn from_groups(mut cores: Vec<Vec<usize>>) -> Self {
        for c in &mut cores {
            c.sort_unstable();
        }
        cores.retain(|c| !c.is_empty());
        cores.sort();
        if cores.is_empty() {
            cores.push(vec![0]);
        }
        LocalTopology { cores }
    }

    /// Number of cores (the default slot count of the local node).
    pub fn num_cores(&self) -> usize {
        self.cores.len()
    }
}

/// CPUs in this process's affinity mask (falls back to `available_parallelism`).
pub fn allowed_cpus() -> Vec<usize> {
    if let Some(v) = crate::sys::affinity().filter(|v| !v.is_empty()) {
        return v;
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

/// Whether `name` designates the local node.
pub fn is_local_host(name: &str, local: &str) -> bool {
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_string();
    matches!(name, "localhost" | "127.0.0.1" | "::1")
        || name == local
        || short(name) == short(local)
}

/// Format a CPU list compactly: `0-3,6`.
pub fn format_cpus(cpus: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_list_format() {
        assert_eq!(format_cpus(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(format_cpus(&[5]), "5");
        assert_eq!(format_cpus(&[1, 3]), "1,3");
    }

    #[test]
    fn local_host_names() {
        assert!(is_local_host("localhost", "vm"));
        assert!(is_local_host("vm.example.org", "vm"));
        assert!(is_local_host("vm", "vm.example.org"));
        assert!(!is_local_host("node7", "vm"));
    }

    #[test]
    fn detect_finds_at_least_one_core() {
        let t = LocalTopology::detect();
        assert!(t.num_cores() >= 1);
        let all: usize = t.cores.iter().map(Vec::len).sum();
        assert_eq!(all, allowed_cpus().len());
    }
}
