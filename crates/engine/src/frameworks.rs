//! Declarations of the frameworks whose components run in the C ABI (and `dpm_connect_timeout`
//! of its dynamic processes): `osc` (one-sided
//! communication: how window peers are reached, `oxmpi-capi`'s `rma/`) and `fcoll`
//! (collective file access, `oxmpi-capi`'s `io/`). The C ABI sits above the crates that
//! `mpirun` and `oxmpi-info` link; declaring them here, with the engine's own frameworks in
//! [`crate::PROVIDER`], lets both know the names and validate the values. Each default is
//! written here once.

use oxmpi_base::params::{Component, Framework, ParamDecl, ParamType};

/// `osc_pt2pt_idle_sleep_max`: the pt2pt progress thread's longest idle sleep (µs).
pub static IDLE_SLEEP_MAX: ParamDecl = ParamDecl::new(
    "osc",
    "pt2pt",
    "idle_sleep_max",
    ParamType::Int {
        min: 1,
        max: 1_000_000,
    },
    "500",
    "Longest sleep in microseconds of an idle one-sided progress thread between looks at \
     its window's incoming requests (it sleeps 1, 2, 4, ... microseconds up to this after \
     the last request)",
)
.level(5);

/// `osc_pt2pt_handoff_max`: how long the pt2pt progress thread sleeps on its doorbell
/// alone while another thread of the process polls the transports (µs; 0: never).
pub static HANDOFF_MAX: ParamDecl = ParamDecl::new(
    "osc",
    "pt2pt",
    "handoff_max",
    ParamType::Int {
        min: 0,
        max: 1_000_000,
    },
    "1000",
    "Longest sleep in microseconds of an idle one-sided progress thread on its doorbell \
     alone, without watching the sockets, while another thread of the process is inside a \
     blocking MPI call (that thread takes the window's requests off the sockets and rings \
     the doorbell); after it the thread looks whether that call is still going on. 0: \
     always watch the sockets (every message on them wakes the thread)",
)
.level(5);

/// `dpm_connect_timeout`: how long `MPI_Comm_connect` waits for an accept (seconds).
pub static CONNECT_TIMEOUT: ParamDecl = ParamDecl::new(
    "dpm",
    "",
    "connect_timeout",
    ParamType::Int {
        min: 1,
        max: 86_400,
    },
    "60",
    "Seconds MPI_Comm_connect waits for the port's owner to accept before it fails with \
     MPI_ERR_PORT (a port nobody listens on any more fails at once)",
)
.level(4)
.runtime();

/// `dpm_exchange_timeout`: how long the roots of two jobs that met (accept/connect, join)
/// wait for each other's next message (seconds).
pub static EXCHANGE_TIMEOUT: ParamDecl = ParamDecl::new(
    "dpm",
    "",
    "exchange_timeout",
    ParamType::Int {
        min: 1,
        max: 86_400,
    },
    "60",
    "Seconds the roots of MPI_Comm_accept/MPI_Comm_connect (and the two ends of \
     MPI_Comm_join) wait for the other job's next message once they have met; a peer job \
     that stops answering fails the call with MPI_ERR_PORT (MPI_ERR_OTHER for join)",
)
.level(4);

/// `mpi_max_context_ids`: a cap on the context ids communicators take (0: what the
/// transports carry, `Engine::context_limit`), for tests of their exhaustion.
pub static MAX_CONTEXT_IDS: ParamDecl = ParamDecl::new(
    "mpi",
    "",
    "max_context_ids",
    ParamType::Int {
        min: 0,
        max: 1 << 30,
    },
    "0",
    "Context ids (0 up, two per communicator, four per intercommunicator; 0 to 3 are \
     MPI_COMM_WORLD's and MPI_COMM_SELF's) the communicators may take: 0 means what the \
     transports carry (2^31, or under pml cm what the provider's tag has room for). \
     Freed ids are reused; creating a communicator when none are free at every member \
     fails with MPI_ERR_OTHER",
)
.level(9);

/// `io_base_verbose`: the MPI-IO component's own reports (`oxmpi-capi`'s `io/`: what each
/// `MPI_File_sync` did); the collective accesses report on `fcoll_base_verbose`.
pub static IO_VERBOSE: ParamDecl = ParamDecl::verbose("io");

/// The frameworks' own parameters (each framework's selection and `_base_verbose` are added
/// by the registry).
pub(crate) static PARAMS: [ParamDecl; 6] = [
    IDLE_SLEEP_MAX,
    HANDOFF_MAX,
    CONNECT_TIMEOUT,
    EXCHANGE_TIMEOUT,
    MAX_CONTEXT_IDS,
    IO_VERBOSE,
];

/// The frameworks (their selection `<name>` and `<name>_base_verbose` come with them).
pub(crate) const FRAMEWORKS: [Framework; 2] = [OSC, FCOLL];

/// The framework and its components: `osc=pt2pt` forces every window peer but the process
/// itself onto messages, `osc=sm` keeps only the direct path, `ofi` (with `pt2pt`) moves
/// the puts and gets of peers reached with messages over libfabric's RMA.
const OSC: Framework = Framework {
    name: "osc",
    description: "One-sided communication: how window peers are reached",
    components: &[
        Component {
            name: "sm",
            description: "Direct access to the memory of ranks on the same node \
                          (shared segment, cross-memory attach)",
        },
        Component {
            name: "pt2pt",
            description: "One-sided operations carried as messages over the btls, \
                          served by a progress thread at the target",
        },
        Component {
            name: "ofi",
            description: "Put and get straight into the registered window memory of \
                          peers reached with messages, over the ofi btl's libfabric \
                          endpoint (FI_RMA writes and reads); with pt2pt for the rest",
        },
    ],
};

/// Collective file access (`MPI_File_write_all` and the other collective reads and writes):
/// `two_phase` gathers the pieces at one aggregator per node, each writing or reading a
/// contiguous domain of the file; `fcoll=^two_phase` makes every rank access its own pieces.
const FCOLL: Framework = Framework {
    name: "fcoll",
    description: "Collective file access: how the ranks' pieces reach the file",
    components: &[Component {
        name: "two_phase",
        description: "One aggregator per node exchanges the pieces and accesses a \
                      contiguous file domain in large blocks",
    }],
};

#[cfg(test)]
mod tests {
    use oxmpi_base::params::{Registry, Sources};

    #[test]
    fn declarations_register_with_the_engine() {
        let mut r = Registry::new(Sources::default()).expect("registry");
        r.register_provider(&crate::PROVIDER).expect("register");
        assert_eq!(r.get_int("osc_pt2pt_idle_sleep_max"), Some(500));
        assert_eq!(r.get_int("dpm_connect_timeout"), Some(60));
        assert!(r.get_selection("osc").expect("selection").is_empty());
        assert!(r.get_selection("fcoll").expect("selection").is_empty());
        assert!(r.get("fcoll_base_verbose").is_some());
        assert!(r.get("io_base_verbose").is_some());
        assert!(r.set("osc_pt2pt_idle_sleep_max", "0").is_err());
    }
}
