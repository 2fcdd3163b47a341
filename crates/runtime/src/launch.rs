//! Launch agents: how the head gets a daemon onto each node of the allocation.
//!
//! The head (`mpirun`) plays the daemon of the local node in-process, so the local agent
//! launches nothing extra. For other nodes the ssh-style [`RshAgent`] (MCA parameter
//! `plm_rsh_agent`, default `ssh`, Open MPI's name) runs `<agent> <host> <oxmpid> --head
//! <addr> --node <i> --jobid <id>`; the `oxmpid` connects back to the head over the
//! authenticated control channel (see [`crate::remote`]). The job secret goes to the agent's
//! stdin, never into argv.

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

/// The ssh-style agent: `<agent words...> <host> <oxmpid> --head <addr> --node <i> --jobid
/// <id>`, the job secret written as one hex line on the agent's stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RshAgent {
    /// The agent command split on whitespace (e.g. `ssh -x`).
    words: Vec<String>,
    /// Command of the daemon on the remote node (`<prefix>/bin/oxmpid`).
    daemon: Vec<String>,
}

impl RshAgent {
    /// An agent from the `plm_rsh_agent` value (`ssh` when empty) and the daemon's command.
    pub fn new(agent: &str, daemon: Vec<String>) -> Result<RshAgent> {
        let words: Vec<String> = agent.split_whitespace().map(str::to_string).collect();
        let words = if words.is_empty() {
            vec!["ssh".to_string()]
        } else {
            words
        };
        Ok(RshAgent { words, daemon })
    }

    /// The agent program (first word).
    pub fn program(&self) -> &str {
        &self.words[0]
    }

    /// The full command line that starts the daemon of `node` on `host`.
    pub fn command(&self, host: &str, node: usize, head: &str, jobid: &str) -> Vec<String> {
        let mut v = self.words.clone();
        v.push(host.to_string());
        v.extend(self.daemon.iter().cloned());
        for (k, val) in [
            ("--head", head.to_string()),
            ("--node", node.to_string()),
            ("--jobid", jobid.to_string()),
        ] {
            v.push(k.to_string());
            v.push(val);
        }
        v
    }

    /// Start the agent for `host` in its own process group; returns its pid. The secret is
    /// written to its stdin (then closed).
    pub fn start(
        &self,
        host: &str,
        node: usize,
        head: &str,
        jobid: &str,
        secret_hex: &str,
    ) -> Result<i32> {
        use std::io::Write;
        use std::os::unix::process::CommandExt;
        let argv = self.command(host, node, head, jobid);
        let err = |e: std::io::Error| RuntimeError::Os {
            what: format!(
                "starting the daemon of host {host} with launch agent '{}'",
                argv.join(" ")
            ),
            source: e,
        };
        let mut child = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(err)?;
        if let Some(mut stdin) = child.stdin.take() {
            // A failing agent shows up as its exit; nothing to do here.
            let _ = stdin.write_all(format!("{secret_hex}\n").as_bytes());
        }
        Ok(child.id() as i32)
    }
}

impl LaunchAgent for RshAgent {
    fn name(&self) -> &'static str {
        "rsh"
    }
    fn reaches(&self, _node: &crate::alloc::Node) -> bool {
        true
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

    #[test]
    fn rsh_agent_command_line() {
        let a = RshAgent::new("ssh  -x", vec!["/opt/ox/bin/oxmpid".into()]).unwrap();
        assert_eq!(a.program(), "ssh");
        assert_eq!(
            a.command("n1", 2, "head:4000", "oxmpi-7.0"),
            [
                "ssh",
                "-x",
                "n1",
                "/opt/ox/bin/oxmpid",
                "--head",
                "head:4000",
                "--node",
                "2",
                "--jobid",
                "oxmpi-7.0"
            ]
        );
        let d = RshAgent::new("", vec!["/x/mpirun".into(), "--oxmpid".into()]).unwrap();
        assert_eq!(d.program(), "ssh");
        assert_eq!(
            d.command("h", 1, "a:1", "j")[2..4],
            ["/x/mpirun", "--oxmpid"]
        );
    }
}
