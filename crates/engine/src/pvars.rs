//! The engine's performance variables in their tools-interface order: the protocol's
//! counters (`pml::stats`), then the per-communicator ones, which read the running engine
//! (so they live above both).

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
        }),
        read: |_| 0,
    },
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
        v
    })
    .iter()
}
