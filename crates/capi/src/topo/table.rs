//! The table of process topologies, keyed by communicator handle: below the topology
//! entry points (`topo.rs`) and the communicator calls that free (`forget`) or duplicate
//! (`copy`) a communicator together with its topology.
//!
//! A record is shared (`Arc`), not copied, by the calls that read it, and keeps the calling
//! process's neighbour lists once a neighbourhood collective has computed them
//! ([`neighbours`]): a communicator's rank never changes, and a duplicate (same group, same
//! rank) shares its original's record.

use crate::consts::*;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{Arc, Mutex, OnceLock};

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

/// (incoming, outgoing) neighbours of the calling process as (rank, tag) pairs, in the
/// order of the neighbourhood collectives' blocks.
pub(crate) type Neighbours = (Vec<(i32, i32)>, Vec<(i32, i32)>);

/// A communicator's record: its topology and, once computed, the calling process's
/// neighbours in it.
struct Entry {
    topo: Topo,
    neighbours: OnceLock<Arc<Neighbours>>,
}

static TOPOS: Mutex<Option<HashMap<c_int, Arc<Entry>>>> = Mutex::new(None);

fn with_topos<R>(f: impl FnOnce(&mut HashMap<c_int, Arc<Entry>>) -> R) -> R {
    let mut g = TOPOS.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

fn entry(comm: c_int) -> Option<Arc<Entry>> {
    with_topos(|t| t.get(&comm).cloned())
}

/// The topology of `comm`, if any (a copy: for the topology queries).
pub(crate) fn get(comm: c_int) -> Option<Topo> {
    entry(comm).map(|e| e.topo.clone())
}

/// The calling process's neighbours in the topology of `comm` (`None`: it has none):
/// computed by `compute` from the topology at the first call, kept with the record.
pub(crate) fn neighbours(
    comm: c_int,
    compute: impl FnOnce(&Topo) -> Neighbours,
) -> Option<Arc<Neighbours>> {
    let e = entry(comm)?;
    Some(
        e.neighbours
            .get_or_init(|| Arc::new(compute(&e.topo)))
            .clone(),
    )
}

/// Drop the topology of a communicator being freed.
pub(crate) fn forget(comm: c_int) {
    with_topos(|t| t.remove(&comm));
}

/// Give `to` (a duplicate of `from`) the same topology.
pub(crate) fn copy(from: c_int, to: c_int) {
    with_topos(|t| {
        // Shared: same group, same rank, same neighbours.
        if let Some(x) = t.get(&from).cloned() {
            t.insert(to, x);
        }
    });
}

/// Attach `topo` to `comm` (a new topology communicator).
pub(super) fn set(comm: c_int, topo: Topo) {
    let e = Arc::new(Entry {
        topo,
        neighbours: OnceLock::new(),
    });
    with_topos(|t| t.insert(comm, e));
}

/// `MPI_Topo_test` status of `comm` (`MPI_UNDEFINED` without a topology).
pub(crate) fn kind(comm: c_int) -> c_int {
    match entry(comm).as_deref().map(|e| &e.topo) {
        Some(Topo::Cart { .. }) => MPI_CART,
        Some(Topo::Graph { .. }) => MPI_GRAPH,
        Some(Topo::Dist { .. }) => MPI_DIST_GRAPH,
        None => MPI_UNDEFINED,
    }
}
