//! The `ofi` transport's parameters: Open MPI's `mtl_ofi_provider_include`/`_exclude` (the
//! provider choice; libfabric itself honours `FI_PROVIDER`) and `btl_ofi_*`.

use oxmpi_base::params::{ParamDecl, ParamType};

/// `mtl_ofi_provider_include`.
pub(crate) static PROVIDER_INCLUDE: ParamDecl = ParamDecl::new(
    "mtl",
    "ofi",
    "provider_include",
    ParamType::List,
    "",
    "libfabric providers the ofi transport may use: full names as fi_info prints them \
     (tcp;ofi_rxm) or one of their parts (tcp, shm, verbs); the first offered by \
     fi_getinfo wins; empty: any; exclusive with mtl_ofi_provider_exclude",
)
.level(3);

/// `mtl_ofi_provider_exclude`.
pub(crate) static PROVIDER_EXCLUDE: ParamDecl = ParamDecl::new(
    "mtl",
    "ofi",
    "provider_exclude",
    ParamType::List,
    "",
    "libfabric providers the ofi transport must not use (full names or parts, as for \
     mtl_ofi_provider_include)",
)
.level(3);

/// `btl_ofi_max_payload`.
pub(crate) static MAX_PAYLOAD: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "max_payload",
    ParamType::Size,
    "64k",
    "Largest payload of one ofi message (rendezvous data moves in fragments of at most \
     this); each receive buffer holds one. Above the provider's own eager size (ofi_rxm: \
     16 KiB, shm: 4 KiB) the provider runs its own rendezvous for each message",
)
.level(5);

/// `btl_ofi_recv_depth`.
pub(crate) static RECV_DEPTH: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "recv_depth",
    ParamType::Int { min: 1, max: 1024 },
    "8",
    "Receives the ofi transport keeps posted per peer (each of btl_ofi_max_payload bytes)",
)
.level(5);

/// `btl_ofi_send_slots`.
pub(crate) static SEND_SLOTS: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "send_slots",
    ParamType::Int { min: 1, max: 65536 },
    "64",
    "Sends the ofi transport may have in flight (each copied into a buffer of \
     btl_ofi_max_payload bytes until the provider completes it)",
)
.level(5);

/// `btl_ofi_keepalive`.
pub(crate) static KEEPALIVE: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "keepalive",
    ParamType::Int { min: 0, max: 3600 },
    "1",
    "Seconds a peer the ofi transport exchanged messages with may stay silent, while this \
     rank waits, before it is sent a keepalive ping (a dead peer fails the ping, or the \
     provider refuses 3 pings in a row: the operations that depend on it end with \
     MPI_ERR_PROC_FAILED, as providers like tcp;ofi_rxm report nothing to a rank that \
     only receives); 0: never",
)
.level(5);

/// `btl_ofi_link_timeout`.
pub(crate) static LINK_TIMEOUT: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "link_timeout",
    ParamType::Int { min: 0, max: 86400 },
    "0",
    "Seconds a keepalive ping may stay without completion before its peer counts as \
     failed (0: never). Pings complete locally on tcp;ofi_rxm and by the peer's network \
     card on hardware providers, but on udp;ofi_rxd only when the peer process \
     acknowledges, so set it there (above the longest computation between MPI calls) to \
     notice a killed peer",
)
.level(5);

/// `btl_ofi_connect_timeout`.
pub(crate) static CONNECT_TIMEOUT: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "connect_timeout",
    ParamType::Int { min: 1, max: 86400 },
    "60",
    "Seconds sends to a peer the provider has never reached may wait before the peer \
     counts as failed, with one line naming it and its address (a published address \
     that leads nowhere, e.g. the tcp provider's first interface: set FI_TCP_IFACE; or a \
     peer process that never progresses); the operations that depend on it end with \
     MPI_ERR_PROC_FAILED",
)
.level(5);

/// `btl_ofi_tagged`.
pub(crate) static TAGGED: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "tagged",
    ParamType::Bool,
    "true",
    "Carry the ofi transport's messages as tagged messages (FI_TAGGED) where the provider \
     has them; false, or a provider without them: plain messages (FI_MSG) into receives \
     directed at their source, in send order (FI_DIRECTED_RECV, FI_ORDER_SAS)",
)
.level(5);

/// `btl_ofi_rma`.
pub(crate) static RMA: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "rma",
    ParamType::Bool,
    "true",
    "Receive large messages by reading the sender's registered buffer (FI_RMA) where the \
     provider can; false: every message moves through the tagged (or plain) messages, in \
     fragments of btl_ofi_max_payload",
)
.level(5);

/// `btl_ofi_atomic`.
pub(crate) static ATOMIC: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "atomic",
    ParamType::Bool,
    "true",
    "Ask the provider for atomic operations on remote memory (FI_ATOMIC, with btl_ofi_rma) \
     so that windows reached over ofi (osc ofi) run MPI accumulates, fetch-and-op and \
     compare-and-swap as network atomics where every rank agrees the provider has them for \
     a datatype; false: accumulates go as active messages (osc pt2pt)",
)
.level(5);

/// `btl_ofi_rails`.
pub(crate) static RAILS: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "rails",
    ParamType::Int { min: 0, max: 8 },
    "0",
    "Endpoints the ofi transport opens on its domain (connections per pair of ranks on \
     tcp;ofi_rxm): rendezvous reads (FI_RMA) of 256 KiB or more are cut into one piece per \
     endpoint, read at once; records and pml cm stay on the first. 1: one endpoint; 0: \
     4 on libfabric's tcp provider (each connection's socket work runs in parallel in the \
     kernel), 1 on the others",
)
.level(5);

/// `btl_ofi_mr_cache_size`.
pub(crate) static MR_CACHE_SIZE: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "mr_cache_size",
    ParamType::Int {
        min: 0,
        max: 1 << 20,
    },
    "256",
    "Registrations of user memory (buffers of large messages read with FI_RMA) the ofi \
     transport keeps open while unused, least recently used closed first; 0: each closed \
     after its transfer. Kept only on providers that register by virtual address without \
     pinning pages (tcp, udp, sockets, shm), where memory freed and mapped again at the \
     same address is read as it is now; on the others (verbs, efa, cxi, psm3 pin pages) \
     libfabric's own cache, invalidated by its memory monitor (FI_MR_CACHE_MONITOR), \
     serves repeated registrations, unless btl_ofi_mr_cache_pinned",
)
.level(5);

/// `btl_ofi_mr_cache_pinned`.
pub(crate) static MR_CACHE_PINNED: ParamDecl = ParamDecl::new(
    "btl",
    "ofi",
    "mr_cache_pinned",
    ParamType::Bool,
    "false",
    "Keep registrations of user memory (btl_ofi_mr_cache_size) on providers that pin \
     pages too, as Open MPI's mpi_leave_pinned: only safe if the application never frees \
     memory it sent from and gets the same addresses mapped again while they are cached \
     (the registration would still name the old, pinned pages); MPI_Free_mem drops the \
     registrations of what it frees, other frees go unseen",
)
.level(5);

/// Every `ofi` parameter, in `oxmpi-info` order.
pub(crate) static PARAMS: [ParamDecl; 14] = [
    PROVIDER_INCLUDE,
    PROVIDER_EXCLUDE,
    MAX_PAYLOAD,
    RECV_DEPTH,
    SEND_SLOTS,
    KEEPALIVE,
    LINK_TIMEOUT,
    TAGGED,
    RMA,
    ATOMIC,
    CONNECT_TIMEOUT,
    MR_CACHE_SIZE,
    MR_CACHE_PINNED,
    RAILS,
];

/// Rails to open on provider `prov` for a `btl_ofi_rails` value of `set` (0: the automatic
/// choice, see the parameter's help).
pub(crate) fn rails_for(set: i64, prov: &str) -> usize {
    match set {
        0 if prov.split(';').any(|p| p == "tcp") => 4,
        0 => 1,
        n => n.max(1) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::rails_for;

    #[test]
    fn rails_are_four_on_tcp_by_default_and_as_set_otherwise() {
        assert_eq!(rails_for(0, "tcp;ofi_rxm"), 4);
        assert_eq!(rails_for(0, "udp;ofi_rxd"), 1);
        assert_eq!(rails_for(0, "shm"), 1);
        assert_eq!(rails_for(0, "verbs;ofi_rxm"), 1);
        assert_eq!(rails_for(1, "tcp;ofi_rxm"), 1);
        assert_eq!(rails_for(2, "udp;ofi_rxd"), 2);
    }
}
