//! Process topologies: Cartesian (`MPI_Cart_*`), graph (`MPI_Graph_*`) and distributed
//! graph (`MPI_Dist_graph_*`) communicators.
//!
//! A topology communicator is an ordinary communicator (made by `MPI_Comm_split` of the old
//! one, or `MPI_Comm_dup` for distributed graphs) plus a topology record kept in the table of
//! `table`, keyed by the communicator handle. `reorder` is accepted and ignored (ranks
//! are never reordered). `MPI_Comm_free` drops the record (`table::forget`) and
//! `MPI_Comm_dup` copies it (`table::copy`). Topology constructors and maps are only
//! defined on intracommunicators: on an intercommunicator they fail with `MPI_ERR_COMM`.

pub(crate) mod table;

use crate::consts::*;
use crate::ffi::{check_count, out, slice_in, slice_out, MpiError, MpiResult};
use crate::misc::{MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY};
use crate::state::lock;
use std::ffi::c_int;
use table::{forget, get, set, Topo};

fn cart(comm: c_int) -> MpiResult<(Vec<c_int>, Vec<bool>)> {
    lock().comm(comm)?;
    match get(comm) {
        Some(Topo::Cart { dims, periods }) => Ok((dims, periods)),
        _ => {
            Err(MpiError::new(MPI_ERR_TOPOLOGY, "communicator has no Cartesian topology").on(comm))
        }
    }
}

fn graph(comm: c_int) -> MpiResult<(Vec<c_int>, Vec<c_int>)> {
    lock().comm(comm)?;
    match get(comm) {
        Some(Topo::Graph { index, edges }) => Ok((index, edges)),
        _ => Err(MpiError::new(MPI_ERR_TOPOLOGY, "communicator has no graph topology").on(comm)),
    }
}

/// Rank of `coords` in a grid (periodic dimensions wrap).
pub(crate) fn cart_rank_of(dims: &[c_int], periods: &[bool], coords: &[c_int]) -> Option<c_int> {
    let mut r: c_int = 0;
    for ((&d, &p), &c) in dims.iter().zip(periods).zip(coords) {
        let c = if p {
            c.rem_euclid(d)
        } else if (0..d).contains(&c) {
            c
        } else {
            return None;
        };
        r = r * d + c;
    }
    Some(r)
}

/// Coordinates of `rank` in a grid (row-major).
pub(crate) fn cart_coords_of(dims: &[c_int], mut rank: c_int) -> Vec<c_int> {
    let mut c = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        c[i] = rank % dims[i];
        rank /= dims[i];
    }
    c
}

/// Size and our rank of intracommunicator `comm`; `MPI_ERR_COMM` (through `comm`'s error
/// handler) for an intercommunicator, on which `what` is not defined.
fn comm_size_rank(comm: c_int, what: &str) -> MpiResult<(c_int, c_int)> {
    crate::intercomm::require_intra(comm, what)?;
    let st = lock();
    st.check_active()?;
    let c = st.comm(comm)?;
    Ok((c.size, c.rank))
}

/// Split `comm` keeping ranks `0..n` in order (the others get `MPI_COMM_NULL`).
fn first_n(comm: c_int, n: c_int, rank: c_int) -> MpiResult<c_int> {
    let color = if rank < n { 0 } else { MPI_UNDEFINED };
    let mut nc = MPI_COMM_NULL;
    // SAFETY: forwarding valid arguments; `nc` is a valid output location.
    let rc = unsafe { crate::coll::PMPI_Comm_split(comm, color, rank, &mut nc) };
    if rc != MPI_SUCCESS {
        return Err(MpiError::new(rc, "MPI_Comm_split failed").on(comm));
    }
    Ok(nc)
}

mpi_fn! {
    /// `MPI_Cart_create` (no reordering).
    fn PMPI_Cart_create / "MPI_Cart_create" (comm_old: c_int, ndims: c_int, dims: *const c_int, periods: *const c_int, _reorder: c_int, comm_cart: *mut c_int) {
        let (size, rank) = comm_size_rank(comm_old, "MPI_Cart_create")?;
        let nd = check_count(ndims).map_err(|e| e.on(comm_old))?;
        let d = slice_in(dims, nd, "dims")?.to_vec();
        let p: Vec<bool> = slice_in(periods, nd, "periods")?.iter().map(|&x| x != 0).collect();
        if d.iter().any(|&x| x <= 0) {
            return Err(MpiError::new(MPI_ERR_DIMS, format!("invalid dimensions {d:?}")).on(comm_old));
        }
        let n = d.iter().try_fold(1 as c_int, |a, &x| a.checked_mul(x));
        let Some(n) = n.filter(|&n| n <= size) else {
            return Err(MpiError::new(MPI_ERR_DIMS, format!("grid {d:?} needs more than {size} processes")).on(comm_old));
        };
        if comm_cart.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL comm_cart").on(comm_old));
        }
        let nc = first_n(comm_old, n, rank)?;
        if nc != MPI_COMM_NULL {
            set(nc, Topo::Cart { dims: d, periods: p });
        }
        out(comm_cart, nc, "comm_cart")
    }
}

mpi_fn! {
    /// `MPI_Cartdim_get`.
    fn PMPI_Cartdim_get / "MPI_Cartdim_get" (comm: c_int, ndims: *mut c_int) {
        let (d, _) = cart(comm)?;
        out(ndims, d.len() as c_int, "ndims")
    }
}

mpi_fn! {
    /// `MPI_Cart_get`.
    fn PMPI_Cart_get / "MPI_Cart_get" (comm: c_int, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) {
        let (d, p) = cart(comm)?;
        let m = check_count(maxdims)?.min(d.len());
        let rank = lock().comm(comm)?.rank;
        let c = cart_coords_of(&d, rank);
        slice_out(dims, m, "dims")?.copy_from_slice(&d[..m]);
        for (o, &x) in slice_out(periods, m, "periods")?.iter_mut().zip(&p) {
            *o = x as c_int;
        }
        slice_out(coords, m, "coords")?.copy_from_slice(&c[..m]);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Cart_rank`.
    fn PMPI_Cart_rank / "MPI_Cart_rank" (comm: c_int, coords: *const c_int, rank: *mut c_int) {
        let (d, p) = cart(comm)?;
        let c = slice_in(coords, d.len(), "coords")?;
        match cart_rank_of(&d, &p, c) {
            Some(r) => out(rank, r, "rank"),
            None => Err(MpiError::new(MPI_ERR_ARG, format!("coordinates {c:?} outside the grid {d:?}")).on(comm)),
        }
    }
}

mpi_fn! {
    /// `MPI_Cart_coords`.
    fn PMPI_Cart_coords / "MPI_Cart_coords" (comm: c_int, rank: c_int, maxdims: c_int, coords: *mut c_int) {
        let (d, _) = cart(comm)?;
        let size = lock().comm(comm)?.size;
        if !(0..size).contains(&rank) {
            return Err(MpiError::new(MPI_ERR_RANK, format!("rank {rank} not in 0..{size}")).on(comm));
        }
        let m = check_count(maxdims)?;
        if m < d.len() {
            return Err(MpiError::new(MPI_ERR_ARG, format!("maxdims {m} < {} dimensions", d.len())).on(comm));
        }
        let c = cart_coords_of(&d, rank);
        slice_out(coords, d.len(), "coords")?.copy_from_slice(&c);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Cart_shift`.
    fn PMPI_Cart_shift / "MPI_Cart_shift" (comm: c_int, direction: c_int, disp: c_int, rank_source: *mut c_int, rank_dest: *mut c_int) {
        let (d, p) = cart(comm)?;
        let Some(dir) = usize::try_from(direction).ok().filter(|&x| x < d.len()) else {
            return Err(MpiError::new(MPI_ERR_ARG, format!("direction {direction} not in 0..{}", d.len())).on(comm));
        };
        let rank = lock().comm(comm)?.rank;
        let c = cart_coords_of(&d, rank);
        let at = |delta: c_int| {
            let mut x = c.clone();
            x[dir] += delta;
            cart_rank_of(&d, &p, &x).unwrap_or(MPI_PROC_NULL)
        };
        out(rank_source, at(-disp), "rank_source")?;
        out(rank_dest, at(disp), "rank_dest")
    }
}

mpi_fn! {
    /// `MPI_Cart_sub`.
    fn PMPI_Cart_sub / "MPI_Cart_sub" (comm: c_int, remain_dims: *const c_int, newcomm: *mut c_int) {
        let (d, p) = cart(comm)?;
        let keep: Vec<bool> = slice_in(remain_dims, d.len(), "remain_dims")?.iter().map(|&x| x != 0).collect();
        let rank = lock().comm(comm)?.rank;
        let c = cart_coords_of(&d, rank);
        let (mut color, mut key) = (0, 0);
        for i in 0..d.len() {
            if keep[i] {
                key = key * d[i] + c[i];
            } else {
                color = color * d[i] + c[i];
            }
        }
        if newcomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
        }
        let mut nc = MPI_COMM_NULL;
        // SAFETY: forwarding valid arguments; `nc` is a valid output location.
        let rc = unsafe { crate::coll::PMPI_Comm_split(comm, color, key, &mut nc) };
        if rc != MPI_SUCCESS {
            return Err(MpiError::new(rc, "MPI_Comm_split failed").on(comm));
        }
        let nd: Vec<c_int> = (0..d.len()).filter(|&i| keep[i]).map(|i| d[i]).collect();
        let np: Vec<bool> = (0..d.len()).filter(|&i| keep[i]).map(|i| p[i]).collect();
        // MPI: keeping no dimension gives a 0-dimensional Cartesian communicator (1 process).
        set(nc, Topo::Cart { dims: nd, periods: np });
        out(newcomm, nc, "newcomm")
    }
}

mpi_fn! {
    /// `MPI_Cart_map`: the identity placement.
    fn PMPI_Cart_map / "MPI_Cart_map" (comm: c_int, ndims: c_int, dims: *const c_int, _periods: *const c_int, newrank: *mut c_int) {
        let (size, rank) = comm_size_rank(comm, "MPI_Cart_map")?;
        let nd = check_count(ndims)?;
        let d = slice_in(dims, nd, "dims")?;
        let n = d.iter().try_fold(1 as c_int, |a, &x| if x > 0 { a.checked_mul(x) } else { None });
        let Some(n) = n.filter(|&n| n <= size) else {
            return Err(MpiError::new(MPI_ERR_DIMS, format!("invalid grid {d:?} for {size} processes")).on(comm));
        };
        out(newrank, if rank < n { rank } else { MPI_UNDEFINED }, "newrank")
    }
}

/// Validate graph arrays: `index` non-decreasing, edges within `0..nnodes`.
fn check_graph(nnodes: usize, index: &[c_int], edges: &[c_int]) -> MpiResult {
    let mut prev = 0;
    for &i in index {
        if i < prev {
            mpi_bail!(MPI_ERR_ARG, "graph index is not non-decreasing");
        }
        prev = i;
    }
    if let Some(&e) = edges.iter().find(|&&e| e < 0 || e as usize >= nnodes) {
        mpi_bail!(MPI_ERR_ARG, "graph edge to {e} outside 0..{nnodes}");
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Graph_create` (no reordering).
    fn PMPI_Graph_create / "MPI_Graph_create" (comm_old: c_int, nnodes: c_int, index: *const c_int, edges: *const c_int, _reorder: c_int, comm_graph: *mut c_int) {
        let (size, rank) = comm_size_rank(comm_old, "MPI_Graph_create")?;
        let n = check_count(nnodes).map_err(|e| e.on(comm_old))?;
        if n as c_int > size {
            return Err(MpiError::new(MPI_ERR_ARG, format!("{n} graph nodes > {size} processes")).on(comm_old));
        }
        let idx = slice_in(index, n, "index")?.to_vec();
        let ne = idx.last().copied().unwrap_or(0);
        let e = slice_in(edges, check_count(ne)?, "edges")?.to_vec();
        check_graph(n, &idx, &e).map_err(|x| x.on(comm_old))?;
        if comm_graph.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL comm_graph").on(comm_old));
        }
        let nc = first_n(comm_old, n as c_int, rank)?;
        if nc != MPI_COMM_NULL {
            set(nc, Topo::Graph { index: idx, edges: e });
        }
        out(comm_graph, nc, "comm_graph")
    }
}

mpi_fn! {
    /// `MPI_Graphdims_get`.
    fn PMPI_Graphdims_get / "MPI_Graphdims_get" (comm: c_int, nnodes: *mut c_int, nedges: *mut c_int) {
        let (i, e) = graph(comm)?;
        out(nnodes, i.len() as c_int, "nnodes")?;
        out(nedges, e.len() as c_int, "nedges")
    }
}

mpi_fn! {
    /// `MPI_Graph_get`.
    fn PMPI_Graph_get / "MPI_Graph_get" (comm: c_int, maxindex: c_int, maxedges: c_int, index: *mut c_int, edges: *mut c_int) {
        let (i, e) = graph(comm)?;
        let mi = check_count(maxindex)?.min(i.len());
        let me = check_count(maxedges)?.min(e.len());
        slice_out(index, mi, "index")?.copy_from_slice(&i[..mi]);
        slice_out(edges, me, "edges")?.copy_from_slice(&e[..me]);
        Ok(())
    }
}

/// Neighbours of `rank` in a graph topology.
fn graph_neighbors(index: &[c_int], edges: &[c_int], rank: c_int) -> Option<Vec<c_int>> {
    let r = usize::try_from(rank).ok().filter(|&r| r < index.len())?;
    let lo = if r == 0 { 0 } else { index[r - 1] as usize };
    Some(edges[lo..index[r] as usize].to_vec())
}

mpi_fn! {
    /// `MPI_Graph_neighbors_count`.
    fn PMPI_Graph_neighbors_count / "MPI_Graph_neighbors_count" (comm: c_int, rank: c_int, nneighbors: *mut c_int) {
        let (i, e) = graph(comm)?;
        let Some(n) = graph_neighbors(&i, &e, rank) else {
            return Err(MpiError::new(MPI_ERR_RANK, format!("rank {rank} not a graph node")).on(comm));
        };
        out(nneighbors, n.len() as c_int, "nneighbors")
    }
}

mpi_fn! {
    /// `MPI_Graph_neighbors`.
    fn PMPI_Graph_neighbors / "MPI_Graph_neighbors" (comm: c_int, rank: c_int, maxneighbors: c_int, neighbors: *mut c_int) {
        let (i, e) = graph(comm)?;
        let Some(n) = graph_neighbors(&i, &e, rank) else {
            return Err(MpiError::new(MPI_ERR_RANK, format!("rank {rank} not a graph node")).on(comm));
        };
        let m = check_count(maxneighbors)?.min(n.len());
        slice_out(neighbors, m, "neighbors")?.copy_from_slice(&n[..m]);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Graph_map`: the identity placement.
    fn PMPI_Graph_map / "MPI_Graph_map" (comm: c_int, nnodes: c_int, _index: *const c_int, _edges: *const c_int, newrank: *mut c_int) {
        let (size, rank) = comm_size_rank(comm, "MPI_Graph_map")?;
        if nnodes < 1 || nnodes > size {
            return Err(MpiError::new(MPI_ERR_ARG, format!("{nnodes} graph nodes for {size} processes")).on(comm));
        }
        out(newrank, if rank < nnodes { rank } else { MPI_UNDEFINED }, "newrank")
    }
}

/// The address `MPI_UNWEIGHTED` / `MPI_WEIGHTS_EMPTY` stand for (the C header declares
/// them as `int * const` objects holding a sentinel address).
fn sentinel(p: &crate::misc::ConstPtr) -> *const c_int {
    // SAFETY: `ConstPtr` is `repr(transparent)` over `*const c_int`.
    unsafe { std::mem::transmute_copy::<crate::misc::ConstPtr, *const c_int>(p) }
}

/// Read a weights array (`MPI_UNWEIGHTED`/`MPI_WEIGHTS_EMPTY` allowed): (weights, weighted).
fn weights(p: *const c_int, n: usize) -> MpiResult<(Vec<c_int>, bool)> {
    if p == sentinel(&MPI_UNWEIGHTED) {
        return Ok((vec![1; n], false));
    }
    if p == sentinel(&MPI_WEIGHTS_EMPTY) || n == 0 {
        return Ok((vec![1; n], true));
    }
    Ok((slice_in(p, n, "weights")?.to_vec(), true))
}

fn dup(comm: c_int) -> MpiResult<c_int> {
    let mut nc = MPI_COMM_NULL;
    // SAFETY: forwarding a valid argument; `nc` is a valid output location.
    let rc = unsafe { crate::coll::PMPI_Comm_dup(comm, &mut nc) };
    if rc != MPI_SUCCESS {
        return Err(MpiError::new(rc, "MPI_Comm_dup failed").on(comm));
    }
    // The duplicate inherited the old communicator's topology (if any); the caller sets
    // the new one.
    forget(nc);
    Ok(nc)
}

fn check_ranks(v: &[c_int], size: c_int, comm: c_int) -> MpiResult {
    if let Some(&r) = v.iter().find(|&&r| !(0..size).contains(&r)) {
        return Err(
            MpiError::new(MPI_ERR_RANK, format!("neighbour rank {r} not in 0..{size}")).on(comm),
        );
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Dist_graph_create_adjacent` (no reordering; info ignored).
    fn PMPI_Dist_graph_create_adjacent / "MPI_Dist_graph_create_adjacent" (comm_old: c_int, indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int, destinations: *const c_int, destweights: *const c_int, _info: c_int, _reorder: c_int, comm_dist_graph: *mut c_int) {
        let (size, _) = comm_size_rank(comm_old, "MPI_Dist_graph_create_adjacent")?;
        let ni = check_count(indegree).map_err(|e| e.on(comm_old))?;
        let no = check_count(outdegree).map_err(|e| e.on(comm_old))?;
        let s = slice_in(sources, ni, "sources")?.to_vec();
        let d = slice_in(destinations, no, "destinations")?.to_vec();
        check_ranks(&s, size, comm_old)?;
        check_ranks(&d, size, comm_old)?;
        let (sw, w1) = weights(sourceweights, ni)?;
        let (dw, w2) = weights(destweights, no)?;
        if comm_dist_graph.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL comm_dist_graph").on(comm_old));
        }
        let nc = dup(comm_old)?;
        set(nc, Topo::Dist { sources: s, sweights: sw, dests: d, dweights: dw, weighted: w1 || w2 });
        out(comm_dist_graph, nc, "comm_dist_graph")
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_create` (no reordering; info ignored): the edges given by every
    /// process are redistributed to their endpoints with an alltoall(v).
    fn PMPI_Dist_graph_create / "MPI_Dist_graph_create" (comm_old: c_int, n: c_int, sources: *const c_int, degrees: *const c_int, destinations: *const c_int, weights_in: *const c_int, _info: c_int, _reorder: c_int, comm_dist_graph: *mut c_int) {
        let (size, _) = comm_size_rank(comm_old, "MPI_Dist_graph_create")?;
        let n = check_count(n).map_err(|e| e.on(comm_old))?;
        let src = slice_in(sources, n, "sources")?;
        let deg = slice_in(degrees, n, "degrees")?;
        let total = deg.iter().try_fold(0usize, |a, &x| Ok::<_, MpiError>(a + check_count(x)?))?;
        let dst = slice_in(destinations, total, "destinations")?;
        let (w, weighted) = weights(weights_in, total)?;
        check_ranks(src, size, comm_old)?;
        check_ranks(dst, size, comm_old)?;
        // Edge (s -> d, w) goes to s (as an out-edge) and to d (as an in-edge): records of
        // 3 ints [kind, peer, weight], kind 0 = out, 1 = in.
        let p = size as usize;
        let mut per: Vec<Vec<c_int>> = vec![Vec::new(); p];
        let mut k = 0;
        for (i, &s) in src.iter().enumerate() {
            for _ in 0..deg[i] {
                let (d, wt) = (dst[k], w[k]);
                per[s as usize].extend([0, d, wt]);
                per[d as usize].extend([1, s, wt]);
                k += 1;
            }
        }
        let scounts: Vec<c_int> = per.iter().map(|v| v.len() as c_int).collect();
        let mut rcounts = vec![0 as c_int; p];
        // SAFETY: arrays of `p` ints each.
        let rc = unsafe { crate::coll::PMPI_Alltoall(scounts.as_ptr().cast(), 1, MPI_INT, rcounts.as_mut_ptr().cast(), 1, MPI_INT, comm_old) };
        if rc != MPI_SUCCESS {
            return Err(MpiError::new(rc, "MPI_Alltoall failed").on(comm_old));
        }
        let displs = |c: &[c_int]| c.iter().scan(0, |a, &x| { let d = *a; *a += x; Some(d) }).collect::<Vec<c_int>>();
        let (sd, rd) = (displs(&scounts), displs(&rcounts));
        let sendv: Vec<c_int> = per.concat();
        let mut recvv = vec![0 as c_int; rcounts.iter().sum::<c_int>() as usize];
        // SAFETY: buffers sized by the counts and displacements above.
        let rc = unsafe { crate::coll::PMPI_Alltoallv(sendv.as_ptr().cast(), scounts.as_ptr(), sd.as_ptr(), MPI_INT, recvv.as_mut_ptr().cast(), rcounts.as_ptr(), rd.as_ptr(), MPI_INT, comm_old) };
        if rc != MPI_SUCCESS {
            return Err(MpiError::new(rc, "MPI_Alltoallv failed").on(comm_old));
        }
        let (mut s, mut sw, mut d, mut dw) = (vec![], vec![], vec![], vec![]);
        for rec in recvv.chunks_exact(3) {
            if rec[0] == 0 {
                d.push(rec[1]);
                dw.push(rec[2]);
            } else {
                s.push(rec[1]);
                sw.push(rec[2]);
            }
        }
        // Any rank's weighted flag decides for all (MPI requires consistency).
        if comm_dist_graph.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL comm_dist_graph").on(comm_old));
        }
        let nc = dup(comm_old)?;
        set(nc, Topo::Dist { sources: s, sweights: sw, dests: d, dweights: dw, weighted });
        out(comm_dist_graph, nc, "comm_dist_graph")
    }
}

fn dist(comm: c_int) -> MpiResult<Topo> {
    lock().comm(comm)?;
    match get(comm) {
        Some(t @ Topo::Dist { .. }) => Ok(t),
        _ => Err(MpiError::new(
            MPI_ERR_TOPOLOGY,
            "communicator has no distributed graph topology",
        )
        .on(comm)),
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_neighbors_count`.
    fn PMPI_Dist_graph_neighbors_count / "MPI_Dist_graph_neighbors_count" (comm: c_int, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) {
        let Topo::Dist { sources, dests, weighted: w, .. } = dist(comm)? else { unreachable!() };
        out(indegree, sources.len() as c_int, "indegree")?;
        out(outdegree, dests.len() as c_int, "outdegree")?;
        out(weighted, w as c_int, "weighted")
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_neighbors`.
    fn PMPI_Dist_graph_neighbors / "MPI_Dist_graph_neighbors" (comm: c_int, maxindegree: c_int, sources: *mut c_int, sourceweights: *mut c_int, maxoutdegree: c_int, destinations: *mut c_int, destweights: *mut c_int) {
        let Topo::Dist { sources: s, sweights, dests, dweights, weighted } = dist(comm)? else { unreachable!() };
        let mi = check_count(maxindegree)?.min(s.len());
        let mo = check_count(maxoutdegree)?.min(dests.len());
        slice_out(sources, mi, "sources")?.copy_from_slice(&s[..mi]);
        slice_out(destinations, mo, "destinations")?.copy_from_slice(&dests[..mo]);
        if weighted {
            if sourceweights.cast_const() != sentinel(&MPI_UNWEIGHTED) {
                slice_out(sourceweights, mi, "sourceweights")?.copy_from_slice(&sweights[..mi]);
            }
            if destweights.cast_const() != sentinel(&MPI_UNWEIGHTED) {
                slice_out(destweights, mo, "destweights")?.copy_from_slice(&dweights[..mo]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cart_rank_and_coords_are_inverse_row_major() {
        let dims = [2, 3, 4];
        let per = [false, true, false];
        for r in 0..24 {
            let c = cart_coords_of(&dims, r);
            assert_eq!(cart_rank_of(&dims, &per, &c), Some(r));
        }
        assert_eq!(cart_coords_of(&dims, 5), vec![0, 1, 1]);
        // periodic dimension wraps, the others do not
        assert_eq!(cart_rank_of(&dims, &per, &[0, -1, 0]), Some(8));
        assert_eq!(cart_rank_of(&dims, &per, &[2, 0, 0]), None);
    }

    #[test]
    fn graph_neighbours_follow_index() {
        let index = [2, 3, 4];
        let edges = [1, 2, 0, 0];
        assert_eq!(graph_neighbors(&index, &edges, 0), Some(vec![1, 2]));
        assert_eq!(graph_neighbors(&index, &edges, 2), Some(vec![0]));
        assert_eq!(graph_neighbors(&index, &edges, 3), None);
        assert!(check_graph(3, &index, &edges).is_ok());
        assert!(check_graph(3, &[2, 1, 4], &edges).is_err());
        assert!(check_graph(2, &index, &edges).is_err());
    }
}
