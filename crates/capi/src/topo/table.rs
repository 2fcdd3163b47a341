//! The table of process topologies, keyed by communicator handle: below the topology
//! entry points (`topo.rs`) and the communicator calls that free (`forget`) or duplicate
//! (`copy`) a communicator together with its topology.

use crate::consts::*;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::Mutex;

/// The topology attached to a communicator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Topo {
    /// Cartesian grid (row-major rank order).
    Cart {
        dims: Vec<c_int>,
        periods: Vec<bool>,
    },
    /// General graph (`index`/`edges` as given to `MPI_Graph_create`).
    Graph {
        index: Vec<c_int>,
        edges: Vec<c_int>,
    },
    /// Distributed graph: this process's in and out neighbours.
    Dist {
        sources: Vec<c_int>,
        sweights: Vec<c_int>,
        dests: Vec<c_int>,
        dweights: Vec<c_int>,
        weighted: bool,
    },
}

static TOPOS: Mutex<Option<HashMap<c_int, Topo>>> = Mutex::new(None);

fn with_topos<R>(f: impl FnOnce(&mut HashMap<c_int, Topo>) -> R) -> R {
    let mut g = TOPOS.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

/// The topology of `comm`, if any.
pub(crate) fn get(comm: c_int) -> Option<Topo> {
    with_topos(|t| t.get(&comm).cloned())
}

/// Drop the topology of a communicator being freed.
pub(crate) fn forget(comm: c_int) {
    with_topos(|t| t.remove(&comm));
}

/// Give `to` (a duplicate of `from`) the same topology.
pub(crate) fn copy(from: c_int, to: c_int) {
    with_topos(|t| {
        if let Some(x) = t.get(&from).cloned() {
            t.insert(to, x);
        }
    });
}

/// Attach `topo` to `comm` (a new topology communicator).
pub(super) fn set(comm: c_int, topo: Topo) {
    with_topos(|t| t.insert(comm, topo));
}

/// `MPI_Topo_test` status of `comm` (`MPI_UNDEFINED` without a topology).
pub(crate) fn kind(comm: c_int) -> c_int {
    match get(comm) {
        Some(Topo::Cart { .. }) => MPI_CART,
        Some(Topo::Graph { .. }) => MPI_GRAPH,
        Some(Topo::Dist { .. }) => MPI_DIST_GRAPH,
        None => MPI_UNDEFINED,
    }
}
