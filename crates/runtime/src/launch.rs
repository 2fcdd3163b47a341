//! Launch agents: how the head gets a daemon onto each node of the allocation.
//!
//! The head (`mpirun`) plays the daemon of the local node in-process, so the local agent
//! launches nothing extra. Remote agents (ssh-style, `srun`) will start an `oxmpid` per node
//! that connects back to the head over the authenticated control channel; until they exist,
//! [`LaunchAgent::check`] rejects remote nodes before anything is launched.

use crate::alloc::{Allocation, JobMap};
use crate::error::{Result, RuntimeError};

/// A way of starting the per-node daemon role on the nodes of a job.
pub trait LaunchAgent {
    /// Short name used in messages (`local`, `ssh`, `srun`).
    fn name(&self) -> &'static str;
    /// Whether `node` can host ranks through this agent.
    fn reaches(&self, node: &crate::alloc::Node) -> bool;
    /// Verify that every node with ranks is reachable (called before launching anything).
    fn check(&self, alloc: &Allocation, map: &JobMap) -> Result<()> {
        for (i, node) in alloc.nodes.iter().enumerate() {
            if map.per_node[i] > 0 && !self.reaches(node) {
                return Err(RuntimeError::UnreachableHost {
                    host: node.name.clone(),
                    agent: self.name(),
                });
            }
        }
        Ok(())
    }
}

/// The local agent: the head itself is the daemon of the node it runs on.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalAgent;

impl LaunchAgent for LocalAgent {
    fn name(&self) -> &'static str {
        "local"
    }
    fn reaches(&self, node: &crate::alloc::Node) -> bool {
        node.local
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{allocate, map_job};
    use crate::cli::{parse, Command};
    use crate::topo::LocalTopology;

    #[test]
    fn remote_nodes_with_ranks_are_rejected_before_launch() {
        let t = LocalTopology::from_groups(vec![vec![0], vec![1]]);
        let Command::Run(s) = parse(["--host", "vm:1,far:1", "-n", "2", "p"]).unwrap() else {
            unreachable!()
        };
        let a = allocate(&s, "vm", &t).unwrap();
        let m = map_job(&s, &a, &t).unwrap();
        let e = LocalAgent.check(&a, &m).unwrap_err();
        assert!(e.to_string().contains("'far'"), "{e}");
        // With one rank only the local node is used, so it is fine.
        let Command::Run(s) = parse(["--host", "vm:1,far:1", "-n", "1", "p"]).unwrap() else {
            unreachable!()
        };
        let m = map_job(&s, &a, &t).unwrap();
        LocalAgent.check(&a, &m).unwrap();
    }
}
