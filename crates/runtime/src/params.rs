//! The runtime's MCA frameworks and parameters (listed by `oxmpi-info`, validated by
//! `mpirun` before anything is launched).

use oxmpi_base::params::{self, Component, Framework, ParamDecl, ParamType, Provider, Source};

/// `plm_rsh_agent`: the launch agent that starts `oxmpid` on other nodes.
pub const RSH_AGENT: ParamDecl = ParamDecl::new(
    "plm",
    "rsh",
    "agent",
    ParamType::String,
    "",
    "Launch agent for daemons on other nodes, run as '<agent> <host> <oxmpid command>' (empty: ssh, or srun inside a Slurm allocation)",
);

/// `plm_head_address`: the address daemons connect back to.
pub const HEAD_ADDRESS: ParamDecl = ParamDecl::new(
    "plm",
    "",
    "head_address",
    ParamType::String,
    "",
    "Address (host or IP) daemons on other nodes connect back to (empty: every address of this host's interfaces that are up, except loopback and virtual bridges, tried by each daemon same subnet first)",
)
.level(4);

/// `plm_daemon_timeout`: seconds a daemon has to connect back.
pub const DAEMON_TIMEOUT: ParamDecl = ParamDecl::new(
    "plm",
    "",
    "daemon_timeout",
    ParamType::String,
    "60",
    "Seconds (a positive number, fractions allowed) a daemon on another node has to connect back before the job is given up",
)
.level(4);

/// `plm_link_timeout`: seconds a control connection may stay silent.
pub const LINK_TIMEOUT: ParamDecl = ParamDecl::new(
    "plm",
    "",
    "link_timeout",
    ParamType::String,
    "20",
    "Seconds (fractions allowed; 0: never) the control connection between mpirun and a node's daemon may go unanswered (TCP keepalive probes, unacknowledged data) before the node counts as lost: mpirun then ends the job, the daemon kills its ranks",
)
.level(5);

/// `plm_heartbeat_interval`: seconds between heartbeats on the control channel.
pub const HEARTBEAT_INTERVAL: ParamDecl = ParamDecl::new(
    "plm",
    "",
    "heartbeat_interval",
    ParamType::String,
    "2",
    "Seconds (fractions allowed; 0: none) between the heartbeats mpirun and each node's daemon send each other on their control connection, so that a node that is alive on the network but stopped (a SIGSTOP'd or hung daemon) is noticed",
)
.level(5);

/// `plm_heartbeat_timeout`: seconds without a heartbeat before the other side counts as lost.
pub const HEARTBEAT_TIMEOUT: ParamDecl = ParamDecl::new(
    "plm",
    "",
    "heartbeat_timeout",
    ParamType::String,
    "20",
    "Seconds (fractions allowed; 0: never) mpirun or a node's daemon may hear nothing from the other side (no heartbeat, no message) before it counts as lost: mpirun then ends the job naming the node, the daemon kills its ranks",
)
.level(5);

/// `plm_teardown_timeout`: seconds mpirun waits for nodes once the job ends.
pub const TEARDOWN_TIMEOUT: ParamDecl = ParamDecl::new(
    "plm",
    "",
    "teardown_timeout",
    ParamType::String,
    "3",
    "Seconds (fractions allowed) mpirun waits, once the job ends (a failure, a signal, --timeout), for the daemons of other nodes to report their ranks gone; nodes that do not answer by then are given up (their launch agents killed) so that mpirun exits",
)
.level(5);

/// `plm_handshake_timeout`: seconds a control connection has to authenticate.
pub const HANDSHAKE_TIMEOUT: ParamDecl = ParamDecl::new(
    "plm",
    "",
    "handshake_timeout",
    ParamType::String,
    "2",
    "Seconds (fractions allowed) a connection to mpirun's control port has to complete the authentication handshake before it is dropped; connections are served side by side, so a slow or silent one delays nobody",
)
.level(5);

/// A parameter holding seconds: a non-negative number, fractions allowed (`0` only where
/// `allow_zero`); its declared default when it is not set. A bad value is a one-line error
/// naming the parameter.
pub fn seconds(decl: &ParamDecl, allow_zero: bool) -> crate::error::Result<std::time::Duration> {
    let v = explicit_value(decl).unwrap_or_else(|| decl.default.to_string());
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (s > 0.0 || (allow_zero && s == 0.0)) => {
            Ok(std::time::Duration::from_secs_f64(s))
        }
        _ => Err(crate::error::RuntimeError::BadValue {
            option: decl.full_name(),
            value: v,
            reason: format!(
                "expected a {} number of seconds",
                if allow_zero {
                    "non-negative"
                } else {
                    "positive"
                }
            ),
        }),
    }
}

/// The frameworks of `mpirun` and its daemons (one per verbose stream in
/// [`crate::streams`]: keep the two lists equal), with the runtime's own parameters.
pub static PROVIDER: Provider = Provider {
    name: "oxmpi-runtime",
    frameworks: &[
        Framework {
            name: "ras",
            description: "Resource allocation: --host, --hostfile, Slurm allocations, local cores",
            components: &[],
        },
        Framework {
            name: "rmaps",
            description: "Mapping of ranks to nodes and cores",
            components: &[],
        },
        Framework {
            name: "plm",
            description: "Process lifecycle management: launch agents that start daemons",
            components: &[
                Component {
                    name: "local",
                    description: "mpirun itself is the daemon of the node it runs on",
                },
                Component {
                    name: "rsh",
                    description: "daemons on other nodes started through plm_rsh_agent (ssh; srun inside a Slurm allocation)",
                },
            ],
        },
        Framework {
            name: "odls",
            description: "Local launch and reaping of ranks by the node daemon",
            components: &[],
        },
        Framework {
            name: "iof",
            description: "Forwarding of the ranks' stdin, stdout and stderr",
            components: &[],
        },
        Framework {
            name: "errmgr",
            description: "Error manager: why and how a job ends",
            components: &[],
        },
        Framework {
            name: "pmi",
            description: "The PMI-1/PMI-2 server that ranks bootstrap through",
            components: &[],
        },
    ],
    params: &[
        RSH_AGENT,
        HEAD_ADDRESS,
        DAEMON_TIMEOUT,
        LINK_TIMEOUT,
        HEARTBEAT_INTERVAL,
        HEARTBEAT_TIMEOUT,
        TEARDOWN_TIMEOUT,
        HANDSHAKE_TIMEOUT,
    ],
};

/// The value of one of the runtime's parameters when something other than its default set
/// it (command line, environment, files), from the process-wide registry.
pub fn explicit_value(decl: &ParamDecl) -> Option<String> {
    let name = decl.full_name();
    params::with_global(|r| {
        r.get(&name)
            .filter(|e| !matches!(e.source, Source::Default))
            .map(|e| e.rendered())
    })
    .ok()
    .flatten()
}
