//! The engine's performance variables in their tools-interface order: the protocol's
//! counters (`pml::stats`), then the per-communicator ones (totals, then per peer rank),
//! which read the running engine (so they live above both).

use crate::pml::stats::{
    CommBinding, CommStats, Pvar, PvarClass, PML_PVARS, TRANSPORT_PVARS, WAIT_PVAR,
};

/// Starts or stops a reader of an engine communicator's traffic counters.
fn watch_comm(c: crate::CommId, on: bool) {
    if let Some(e) = crate::engine() {
        e.comm_watch(c, on);
    }
}

/// The traffic counters of engine communicator `c` (zeros if it is gone).
fn comm_stats(c: crate::CommId) -> CommStats {
    crate::engine()
        .and_then(|e| e.comm_stats(c))
        .unwrap_or_default()
}

const COMM_PVARS: [Pvar; 4] = [
    Pvar {
        name: "pml_ox_comm_msgs_sent",
        category: "pml_ox",
        desc: "Messages sent on the communicator the handle is bound to",
        class: PvarClass::Counter,
        level: 4,
        continuous: true,
        comm: Some(CommBinding {
            read: |c| comm_stats(c).msgs_sent,
            watch: watch_comm,
            collective: false,
            peers: None,
        }),
        read: |_| 0,
    },
    Pvar {
        name: "pml_ox_comm_bytes_sent",
        category: "pml_ox",
        desc: "Payload bytes sent on the communicator the handle is bound to",
        class: PvarClass::Counter,
        level: 4,
        continuous: true,
        comm: Some(CommBinding {
            read: |c| comm_stats(c).bytes_sent,
            watch: watch_comm,
            collective: false,
            peers: None,
        }),
        read: |_| 0,
    },
    Pvar {
        name: "pml_ox_comm_msgs_recv",
        category: "pml_ox",
        desc: "Messages that arrived on the communicator the handle is bound to",
        class: PvarClass::Counter,
        level: 4,
        continuous: true,
        comm: Some(CommBinding {
            read: |c| comm_stats(c).msgs_recv,
            watch: watch_comm,
            collective: false,
            peers: None,
        }),
        read: |_| 0,
    },
    Pvar {
        name: "pml_ox_comm_bytes_recv",
        category: "pml_ox",
        desc: "Payload bytes that arrived on the communicator the handle is bound to",
        class: PvarClass::Counter,
        level: 4,
        continuous: true,
        comm: Some(CommBinding {
            read: |c| comm_stats(c).bytes_recv,
            watch: watch_comm,
            collective: false,
            peers: None,
        }),
        read: |_| 0,
    },
];

/// The traffic counters of engine communicator `c` per peer rank, through `f`: one
/// value per rank of its (remote) group, zeros before the first reader started.
fn peer_values(c: crate::CommId, f: fn(&CommStats) -> u64) -> Vec<u64> {
    let Some(e) = crate::engine() else {
        return Vec::new();
    };
    let n = e.comm_peers(c).unwrap_or(0);
    let v = e.comm_peer_stats(c).unwrap_or_default();
    (0..n).map(|i| v.get(i).map_or(0, f)).collect()
}

/// A per-peer counter bound to a communicator: `read` picks the value from a peer's
/// counters.
macro_rules! peer_pvar {
    ($name:literal, $desc:literal, $read:expr) => {
        Pvar {
            name: $name,
            category: "pml_ox",
            desc: $desc,
            class: PvarClass::Counter,
            level: 5,
            continuous: true,
            comm: Some(CommBinding {
                read: |_| 0,
                watch: watch_comm,
                collective: false,
                peers: Some(|c| peer_values(c, $read)),
            }),
            read: |_| 0,
        }
    };
}

const PEER_PVARS: [Pvar; 4] = [
    peer_pvar!(
        "pml_ox_comm_peer_msgs_sent",
        "Messages sent to each rank of the communicator the handle is bound to (one value per rank)",
        |s| s.msgs_sent
    ),
    peer_pvar!(
        "pml_ox_comm_peer_bytes_sent",
        "Payload bytes sent to each rank of the communicator the handle is bound to (one value per rank)",
        |s| s.bytes_sent
    ),
    peer_pvar!(
        "pml_ox_comm_peer_msgs_recv",
        "Messages that arrived from each rank of the communicator the handle is bound to (one value per rank)",
        |s| s.msgs_recv
    ),
    peer_pvar!(
        "pml_ox_comm_peer_bytes_recv",
        "Payload bytes that arrived from each rank of the communicator the handle is bound to (one value per rank)",
        |s| s.bytes_recv
    ),
];

/// Every performance variable of the engine, in a fixed order (their tools-interface
/// indices).
pub fn pvars() -> impl Iterator<Item = &'static Pvar> {
    static ALL: std::sync::OnceLock<Vec<Pvar>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut v = TRANSPORT_PVARS.to_vec();
        v.extend(PML_PVARS);
        v.push(WAIT_PVAR);
        v.extend(COMM_PVARS);
        v.extend(PEER_PVARS);
        v
    })
    .iter()
}
