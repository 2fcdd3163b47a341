//! Engine parameters, declared in the `oxmpi-base` MCA registry (so `oxmpi-info` lists them
//! and values carry their source: `--mca`, `OXMPI_MCA_*`/`OMPI_MCA_*`, files, defaults), and
//! the engine's verbose streams.

use oxmpi_base::output::Stream;
use oxmpi_base::params::{self, Component, Framework, ParamDecl, ParamType, Provider, Value};

/// `btl` verbose stream (`btl_base_verbose`).
pub static BTL: Stream = Stream::new("btl");
/// `pml` verbose stream (`pml_base_verbose`).
pub static PML: Stream = Stream::new("pml");

/// `btl_sm_eager_limit`.
pub static SM_EAGER_LIMIT: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "eager_limit",
    ParamType::Size,
    "4096",
    "Largest message (bytes) the sm transport sends eagerly; larger ones use a rendezvous",
)
.level(4);
/// `btl_sm_fragment_size`.
pub static SM_FRAGMENT_SIZE: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "fragment_size",
    ParamType::Size,
    "128k",
    "Fragment size (bytes) of the rendezvous copy pipeline: at most half of \
     btl_sm_bulk_size (of the ring when the bulk buffer is 0)",
)
.level(5);
/// `btl_sm_ring_size`.
pub static SM_RING_SIZE: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "ring_size",
    ParamType::Size,
    "256k",
    "Bytes of each per-peer shared-memory ring (rounded down to 64 bytes, at least 4096)",
)
.level(5);
/// `btl_sm_bulk_size`.
pub static SM_BULK_SIZE: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "bulk_size",
    ParamType::Size,
    "1m",
    "Bytes of each per-peer shared buffer that carries the rendezvous fragments of the \
     pipelined copy next to the ring (rounded down to 64 bytes; fragments are at most half \
     of it); 0: fragments travel inside the ring",
)
.level(5);
/// `btl_sm_single_copy_mechanism`.
pub static SM_SINGLE_COPY: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "single_copy_mechanism",
    ParamType::Enum {
        values: &[(0, "none"), (1, "cma"), (2, "coop"), (3, "auto")],
        range: None,
    },
    "auto",
    "How large messages move between ranks on a node: none (pipelined copy through shared \
     memory, both sides copying), cma (the receiver reads the sender's buffer with \
     process_vm_readv), coop (cooperative single copy: the receiver reads from the front \
     while the sender writes from the back, both with CMA), auto (per peer, whichever of \
     none and coop measured faster lately; the placement of the two CPUs decides). CMA \
     modes fall back to none if the kernel denies it",
)
.level(4);
/// `btl_sm_coop_chunk_size`.
pub static SM_COOP_CHUNK: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "coop_chunk_size",
    ParamType::Size,
    "32k",
    "Unit of the cooperative single copy's claims (each side claims a quarter of what is \
     left, at least one unit, per process_vm_readv/writev call; rounded up to 4 KiB)",
)
.level(6);
/// `btl_sm_coop_min_size`.
pub static SM_COOP_MIN: ParamDecl = ParamDecl::new(
    "btl",
    "sm",
    "coop_min_size",
    ParamType::Size,
    "128k",
    "Smallest message that may use the cooperative single copy (single_copy_mechanism coop \
     or auto); smaller rendezvous messages use the pipelined copy",
)
.level(5);
/// `btl_tcp_if_include`.
pub static TCP_IF_INCLUDE: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "if_include",
    ParamType::List,
    "",
    "Interfaces (names, IPv4 addresses or subnets a.b.c.d/n) whose address the tcp \
     transport publishes for other hosts to connect to (the first in the system's order); \
     empty: the address of the host name",
)
.level(4);
/// `btl_tcp_if_exclude`.
pub static TCP_IF_EXCLUDE: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "if_exclude",
    ParamType::List,
    "",
    "Interfaces (names, IPv4 addresses or subnets a.b.c.d/n) the tcp transport must not \
     publish: it publishes the address of the first other non-loopback interface; exclusive \
     with btl_tcp_if_include",
)
.level(4);
/// `btl_tcp_port_min_v4`.
pub static TCP_PORT_MIN: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "port_min_v4",
    ParamType::Int { min: 0, max: 65535 },
    "0",
    "Lowest TCP port the tcp transport listens on (0: any free port)",
)
.level(5);
/// `btl_tcp_port_range_v4`.
pub static TCP_PORT_RANGE: ParamDecl = ParamDecl::new(
    "btl",
    "tcp",
    "port_range_v4",
    ParamType::Int { min: 1, max: 65535 },
    "64511",
    "Number of ports tried from btl_tcp_port_min_v4 upwards",
)
.level(5);
/// `mpi_yield_when_idle`.
pub static YIELD_WHEN_IDLE: ParamDecl = ParamDecl::new(
    "mpi",
    "",
    "yield_when_idle",
    ParamType::Bool,
    "false",
    "Yield the processor while waiting for communication (also automatic when the node has \
     more ranks than CPUs)",
)
.level(4);

/// What this crate declares for `oxmpi-info` and the registry.
pub static PROVIDER: Provider = Provider {
    name: "oxmpi-engine",
    frameworks: &[
        Framework {
            name: "btl",
            description: "Byte transfer layer: moves bytes between ranks",
            components: &[
                Component {
                    name: "self",
                    description: "messages to the own rank",
                },
                Component {
                    name: "sm",
                    description: "shared memory between ranks of one node (memfd rings)",
                },
                Component {
                    name: "tcp",
                    description: "TCP sockets between ranks on different hosts (or without sm)",
                },
            ],
        },
        Framework {
            name: "pml",
            description: "Point-to-point messaging layer: matching and protocols",
            components: &[Component {
                name: "ox",
                description: "matching, eager and rendezvous protocols over the btls",
            }],
        },
    ],
    params: &[
        SM_EAGER_LIMIT,
        SM_FRAGMENT_SIZE,
        SM_RING_SIZE,
        SM_BULK_SIZE,
        SM_SINGLE_COPY,
        SM_COOP_MIN,
        SM_COOP_CHUNK,
        TCP_IF_INCLUDE,
        TCP_IF_EXCLUDE,
        TCP_PORT_MIN,
        TCP_PORT_RANGE,
        YIELD_WHEN_IDLE,
    ],
};

/// Registers the engine's parameters (idempotent). A bad value keeps the default and is
/// reported on stderr.
pub fn register() {
    if let Err(e) = params::register_global(&PROVIDER) {
        oxmpi_base::output::warn(format_args!("{e}"));
    }
}

fn value(decl: &ParamDecl) -> Option<Value> {
    match params::resolve(decl) {
        Ok(v) => Some(v),
        Err(e) => {
            oxmpi_base::output::warn(format_args!("{e}"));
            None
        }
    }
}

/// A size parameter (default if unreadable).
pub fn size(decl: &ParamDecl, default: usize) -> usize {
    value(decl)
        .and_then(|v| v.as_size())
        .map_or(default, |v| v as usize)
}

/// `Some(value)` if `mpi_yield_when_idle` was set explicitly (any source but the default).
pub fn yield_when_idle_explicit() -> Option<bool> {
    params::register_global(&PROVIDER).ok()?;
    params::with_global(|r| {
        r.get("mpi_yield_when_idle")
            .filter(|e| e.source != oxmpi_base::params::Source::Default)
            .and_then(|e| e.value.as_bool())
    })
    .ok()
    .flatten()
}

/// An integer parameter (default if unreadable).
pub fn int(decl: &ParamDecl, default: i64) -> i64 {
    value(decl).and_then(|v| v.as_int()).unwrap_or(default)
}

/// A list parameter (empty if unreadable).
pub fn list(decl: &ParamDecl) -> Vec<String> {
    value(decl)
        .and_then(|v| v.as_list().map(<[String]>::to_vec))
        .unwrap_or_default()
}

/// The large-message mechanism `btl_sm_single_copy_mechanism` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SingleCopy {
    /// Pipelined copy only.
    None,
    /// The receiver reads the whole message with CMA.
    Cma,
    /// Cooperative single copy for messages of at least `btl_sm_coop_min_size`.
    Coop,
    /// Per peer, pipelined or cooperative by measured throughput.
    Auto,
}

/// `btl_sm_single_copy_mechanism`.
pub fn single_copy() -> SingleCopy {
    match value(&SM_SINGLE_COPY).and_then(|v| v.as_int()) {
        Some(0) => SingleCopy::None,
        Some(1) => SingleCopy::Cma,
        Some(2) => SingleCopy::Coop,
        _ => SingleCopy::Auto,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxmpi_base::params::{Registry, Sources};

    #[test]
    fn declarations_register_and_parse() {
        let mut r = Registry::new(Sources::default()).unwrap();
        r.register_provider(&PROVIDER).unwrap();
        assert_eq!(r.get_size("btl_sm_eager_limit"), Some(4096));
        assert_eq!(r.get_size("btl_sm_ring_size"), Some(256 * 1024));
        assert_eq!(r.get_size("btl_sm_bulk_size"), Some(1 << 20));
        assert_eq!(r.get_size("btl_sm_fragment_size"), Some(128 << 10));
        r.set("btl_sm_bulk_size", "0").unwrap();
        assert_eq!(r.get_size("btl_sm_bulk_size"), Some(0));
        assert_eq!(r.get_bool("mpi_yield_when_idle"), Some(false));
        assert_eq!(r.get_int("btl_sm_single_copy_mechanism"), Some(3));
        assert_eq!(r.get_size("btl_sm_coop_min_size"), Some(128 << 10));
        r.set("btl_sm_single_copy_mechanism", "cma").unwrap();
        assert_eq!(r.get_int("btl_sm_single_copy_mechanism"), Some(1));
        r.set("btl_sm_single_copy_mechanism", "coop").unwrap();
        assert_eq!(r.get_int("btl_sm_single_copy_mechanism"), Some(2));
        assert!(r.set("btl_sm_single_copy_mechanism", "xpmem").is_err());
        assert!(r.get("btl_base_verbose").is_some());
        assert_eq!(r.get_int("btl_tcp_port_min_v4"), Some(0));
        r.set("btl_tcp_if_include", "eth0,10.0.0.1").unwrap();
        assert!(r.set("btl_tcp_port_min_v4", "70000").is_err());
    }
}
