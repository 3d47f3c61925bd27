//! Process topologies (MPI-3.1 chapter 7): Cartesian (`MPI_Cart_*`), graph (`MPI_Graph_*`)
//! and distributed graph (`MPI_Dist_graph_*`) communicators, `MPI_Topo_test`.
//!
//! A topology is local knowledge attached to a communicator handle: creating one is a
//! split (Cartesian and graph: the ranks past the grid's size get `MPI_COMM_NULL`) or a dup
//! (distributed graphs) of the old communicator, plus a second, hidden context (a dup of
//! the new communicator) on which the neighbour collectives (neighbor.rs) run their point
//! to point transfers, so they never match the program's own messages. `reorder` is
//! accepted and ignored: ranks keep their order (the standard allows it). Everything that
//! moves is an ordinary split, dup or message: recorded and replayed like any other.
//! `MPI_Comm_dup` copies the topology with a new hidden context; `MPI_Comm_free` frees it.

use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::{Arc, LazyLock, Mutex};

use strobe_runtime::api::Comm;
use strobe_runtime::calls::Call;

use crate::comm::{comm_of, new_comm_handle};
use crate::consts::*;
use crate::error::{entry, fail, MpiResult};
use crate::intercomm::inter_of;
use crate::util::{array, count, put};

/// `MPI_GRAPH`, `MPI_CART`, `MPI_DIST_GRAPH` (MPICH's values).
pub const GRAPH: c_int = 1;
pub const CART: c_int = 2;
pub const DIST_GRAPH: c_int = 3;
/// `MPI_ERR_TOPOLOGY` (MPICH's value).
pub const ERR_TOPOLOGY: c_int = 11;
/// `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` (`int *` sentinels, as in mpi.h).
pub const UNWEIGHTED: usize = 1;
pub const WEIGHTS_EMPTY: usize = 2;

/// The shape of a topology.
#[derive(Clone, Debug)]
pub enum Shape {
    Cart {
        dims: Vec<c_int>,
        periods: Vec<bool>,
    },
    Graph {
        index: Vec<c_int>,
        edges: Vec<c_int>,
    },
    DistGraph {
        sources: Vec<c_int>,
        dests: Vec<c_int>,
        /// `None`: created `MPI_UNWEIGHTED`.
        weights: Option<(Vec<c_int>, Vec<c_int>)>,
    },
}

/// A communicator's topology and the hidden context of its neighbour collectives.
pub struct Topo {
    pub shape: Shape,
    pub hidden: Comm,
}

static TOPOS: LazyLock<Mutex<HashMap<MpiComm, Arc<Topo>>>> = LazyLock::new(Default::default);

fn topos() -> std::sync::MutexGuard<'static, HashMap<MpiComm, Arc<Topo>>> {
    TOPOS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The topology of `comm`, if it has one.
pub fn topo_of(comm: MpiComm) -> Option<Arc<Topo>> {
    topos().get(&comm).cloned()
}

/// Give the new communicator `h` (runtime communicator `c`) the topology `shape`.
pub fn attach_to(h: MpiComm, c: &Comm, shape: Shape) -> MpiResult {
    let hidden = c.dup()?;
    topos().insert(h, Arc::new(Topo { shape, hidden }));
    Ok(())
}

/// `MPI_Comm_dup` of a communicator with a topology: the copy gets it too, with its own
/// hidden context (collective, as the dup is).
pub fn on_dup(from: MpiComm, to: MpiComm) -> MpiResult {
    let Some(t) = topo_of(from) else {
        return Ok(());
    };
    let hidden = t.hidden.dup()?;
    topos().insert(
        to,
        Arc::new(Topo {
            shape: t.shape.clone(),
            hidden,
        }),
    );
    Ok(())
}

/// `MPI_Comm_free` of `comm`: free its hidden context (collective, as the free is).
pub fn on_free(comm: MpiComm) -> MpiResult {
    let Some(t) = topos().remove(&comm) else {
        return Ok(());
    };
    let hidden = t.hidden.clone();
    hidden.free()?;
    Ok(())
}

/// The topology of `comm`, or `MPI_ERR_TOPOLOGY`.
pub fn need(comm: MpiComm) -> MpiResult<Arc<Topo>> {
    comm_of(comm)?;
    match topo_of(comm) {
        Some(t) => Ok(t),
        None => fail!(ERR_TOPOLOGY, "communicator {comm} has no topology"),
    }
}

fn need_cart(comm: MpiComm) -> MpiResult<(Vec<c_int>, Vec<bool>)> {
    match &need(comm)?.shape {
        Shape::Cart { dims, periods } => Ok((dims.clone(), periods.clone())),
        _ => fail!(
            ERR_TOPOLOGY,
            "communicator {comm} has no Cartesian topology"
        ),
    }
}

fn need_graph(comm: MpiComm) -> MpiResult<(Vec<c_int>, Vec<c_int>)> {
    match &need(comm)?.shape {
        Shape::Graph { index, edges } => Ok((index.clone(), edges.clone())),
        _ => fail!(ERR_TOPOLOGY, "communicator {comm} has no graph topology"),
    }
}

/// Coordinates of `rank` in a grid of `dims` (row-major: the last dimension varies fastest).
pub fn coords_of(dims: &[c_int], mut rank: c_int) -> Vec<c_int> {
    let mut out = vec![0; dims.len()];
    for (o, &d) in out.iter_mut().zip(dims).rev() {
        *o = rank % d.max(1);
        rank /= d.max(1);
    }
    out
}

/// The rank at `coords` (periodic dimensions wrap), or `None` off a non-periodic edge.
pub fn rank_of(dims: &[c_int], periods: &[bool], coords: &[c_int]) -> Option<c_int> {
    let mut r = 0;
    for ((&d, &p), &c) in dims.iter().zip(periods).zip(coords) {
        let c = if p {
            c.rem_euclid(d.max(1))
        } else if (0..d).contains(&c) {
            c
        } else {
            return None;
        };
        r = r * d + c;
    }
    Some(r)
}

/// `MPI_Cart_shift`: (source, dest) of a shift by `disp` along `dim` from `rank`.
pub fn shift(
    dims: &[c_int],
    periods: &[bool],
    rank: c_int,
    dim: usize,
    disp: c_int,
) -> (c_int, c_int) {
    let me = coords_of(dims, rank);
    let at = |delta: c_int| {
        let mut c = me.clone();
        c[dim] += delta;
        rank_of(dims, periods, &c).unwrap_or(PROC_NULL)
    };
    (at(-disp), at(disp))
}

/// The (in, out) neighbours of `rank` in `shape`, in the order the neighbour collectives
/// use (MPI-3.1 7.6): per dimension the negative then the positive direction for a
/// Cartesian topology, the adjacency list for a graph, sources and destinations for a
/// distributed graph.
pub fn neighbours(shape: &Shape, rank: c_int) -> (Vec<c_int>, Vec<c_int>) {
    match shape {
        Shape::Cart { dims, periods } => {
            let mut v = Vec::with_capacity(2 * dims.len());
            for d in 0..dims.len() {
                let (src, dst) = shift(dims, periods, rank, d, 1);
                v.push(src);
                v.push(dst);
            }
            (v.clone(), v)
        }
        Shape::Graph { index, edges } => {
            let v = graph_adjacent(index, edges, rank).to_vec();
            (v.clone(), v)
        }
        Shape::DistGraph { sources, dests, .. } => (sources.clone(), dests.clone()),
    }
}

fn graph_adjacent<'a>(index: &[c_int], edges: &'a [c_int], rank: c_int) -> &'a [c_int] {
    let r = rank as usize;
    let lo = if r == 0 { 0 } else { index[r - 1] as usize };
    let hi = index.get(r).map_or(lo, |&x| x as usize);
    edges.get(lo..hi).unwrap_or(&[])
}

/// A communicator of the first `n` ranks of `comm` (the others get `None`), for a
/// Cartesian or graph topology of `n` nodes.
fn first_ranks(comm: MpiComm, n: usize) -> MpiResult<Option<(MpiComm, Comm)>> {
    if inter_of(comm).is_some() {
        fail!(
            class::COMM,
            "topologies on intercommunicators are not allowed"
        );
    }
    let c = comm_of(comm)?;
    if n > c.size() as usize {
        fail!(
            class::ARG,
            "the topology has {n} nodes, more than the communicator's {} ranks",
            c.size()
        );
    }
    let colour = (c.rank() < n as c_int).then_some(0);
    Ok(c.split(colour, c.rank())?
        .map(|s| (new_comm_handle(comm, Some(s.clone())), s)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Cart_create(
    comm: MpiComm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    _reorder: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::CartCreate, comm, || {
        let k = count(ndims, "ndims")?;
        // SAFETY: MPI requires `ndims` entries in each array.
        let (d, p) = unsafe { (array(dims, k, "dims")?, array(periods, k, "periods")?) };
        if let Some(x) = d.iter().find(|&&x| x <= 0) {
            fail!(class::DIMS, "invalid dimension size {x}");
        }
        if out.is_null() {
            fail!(class::ARG, "comm_cart is NULL");
        }
        let n: usize = d.iter().map(|&x| x as usize).product();
        let shape = Shape::Cart {
            dims: d.to_vec(),
            periods: p.iter().map(|&x| x != 0).collect(),
        };
        let h = match first_ranks(comm, n)? {
            Some((h, c)) => {
                attach_to(h, &c, shape)?;
                h
            }
            None => COMM_NULL,
        };
        // SAFETY: checked non-NULL; the program's output argument.
        unsafe { put(out, h, "comm_cart") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Graph_create(
    comm: MpiComm,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    _reorder: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::GraphCreate, comm, || {
        let n = count(nnodes, "nnodes")?;
        // SAFETY: MPI requires `nnodes` entries in index.
        let idx = unsafe { array(index, n, "index")? };
        let nedges = idx.last().copied().unwrap_or(0);
        let ne = count(nedges, "number of edges")?;
        if idx.windows(2).any(|w| w[1] < w[0]) {
            fail!(class::ARG, "index is not non-decreasing");
        }
        // SAFETY: MPI requires index[nnodes-1] entries in edges.
        let e = unsafe { array(edges, ne, "edges")? };
        if let Some(x) = e.iter().find(|&&x| x < 0 || x as usize >= n) {
            fail!(class::ARG, "edge to {x}, which is not a node of the graph");
        }
        if out.is_null() {
            fail!(class::ARG, "comm_graph is NULL");
        }
        let shape = Shape::Graph {
            index: idx.to_vec(),
            edges: e.to_vec(),
        };
        let h = match first_ranks(comm, n)? {
            Some((h, c)) => {
                attach_to(h, &c, shape)?;
                h
            }
            None => COMM_NULL,
        };
        // SAFETY: checked non-NULL; the program's output argument.
        unsafe { put(out, h, "comm_graph") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Topo_test(comm: MpiComm, status: *mut c_int) -> c_int {
    entry(Call::TopoTest, comm, || {
        comm_of(comm)?;
        let s = match topo_of(comm).map(|t| t.shape.clone()) {
            Some(Shape::Cart { .. }) => CART,
            Some(Shape::Graph { .. }) => GRAPH,
            Some(Shape::DistGraph { .. }) => DIST_GRAPH,
            None => UNDEFINED,
        };
        // SAFETY: the program's output argument.
        unsafe { put(status, s, "status") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Cartdim_get(comm: MpiComm, ndims: *mut c_int) -> c_int {
    entry(Call::CartdimGet, comm, || {
        let (d, _) = need_cart(comm)?;
        // SAFETY: the program's output argument.
        unsafe { put(ndims, d.len() as c_int, "ndims") }
    })
}

/// Copy `v` into the program's array `p` of `max` entries (at most).
///
/// # Safety
/// `p` must be NULL or hold `max` writable entries.
unsafe fn put_array(p: *mut c_int, max: c_int, v: &[c_int], what: &str) -> MpiResult {
    let k = v.len().min(count(max, what)?);
    if k == 0 {
        return Ok(());
    }
    if p.is_null() {
        fail!(class::ARG, "{what} is NULL");
    }
    // SAFETY: non-NULL, and holds `max` >= `k` entries (MPI contract).
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, k) };
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Cart_get(
    comm: MpiComm,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    entry(Call::CartGet, comm, || {
        let (d, p) = need_cart(comm)?;
        let me = coords_of(&d, comm_of(comm)?.rank());
        let p: Vec<c_int> = p.iter().map(|&x| x as c_int).collect();
        // SAFETY: MPI requires `maxdims` entries in each array.
        unsafe {
            put_array(dims, maxdims, &d, "dims")?;
            put_array(periods, maxdims, &p, "periods")?;
            put_array(coords, maxdims, &me, "coords")
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Cart_coords(
    comm: MpiComm,
    rank: c_int,
    maxdims: c_int,
    coords: *mut c_int,
) -> c_int {
    entry(Call::CartCoords, comm, || {
        let (d, _) = need_cart(comm)?;
        let size: c_int = d.iter().product();
        if !(0..size).contains(&rank) {
            fail!(class::RANK, "invalid rank {rank} (grid of {size})");
        }
        if (maxdims as usize) < d.len() {
            fail!(
                class::ARG,
                "maxdims {maxdims} is less than ndims {}",
                d.len()
            );
        }
        // SAFETY: MPI requires `maxdims` entries.
        unsafe { put_array(coords, maxdims, &coords_of(&d, rank), "coords") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Cart_rank(
    comm: MpiComm,
    coords: *const c_int,
    rank: *mut c_int,
) -> c_int {
    entry(Call::CartRank, comm, || {
        let (d, p) = need_cart(comm)?;
        // SAFETY: MPI requires ndims entries.
        let c = unsafe { array(coords, d.len(), "coords")? };
        let Some(r) = rank_of(&d, &p, c) else {
            fail!(class::ARG, "coordinates {c:?} are off the grid {d:?}");
        };
        // SAFETY: the program's output argument.
        unsafe { put(rank, r, "rank") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Cart_shift(
    comm: MpiComm,
    direction: c_int,
    disp: c_int,
    source: *mut c_int,
    dest: *mut c_int,
) -> c_int {
    entry(Call::CartShift, comm, || {
        let (d, p) = need_cart(comm)?;
        if !(0..d.len() as c_int).contains(&direction) {
            fail!(
                class::ARG,
                "invalid direction {direction} ({} dimensions)",
                d.len()
            );
        }
        let me = comm_of(comm)?.rank();
        let (s, t) = shift(&d, &p, me, direction as usize, disp);
        // SAFETY: the program's output arguments.
        unsafe {
            put(source, s, "rank_source")?;
            put(dest, t, "rank_dest")
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Cart_sub(
    comm: MpiComm,
    remain: *const c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::CartSub, comm, || {
        let (d, p) = need_cart(comm)?;
        // SAFETY: MPI requires ndims entries.
        let keep = unsafe { array(remain, d.len(), "remain_dims")? };
        if out.is_null() {
            fail!(class::ARG, "newcomm is NULL");
        }
        let c = comm_of(comm)?;
        let me = coords_of(&d, c.rank());
        // Colour: the coordinates dropped; key: the rank in the kept grid.
        let (mut colour, mut key) = (0, 0);
        let (mut kd, mut kp) = (Vec::new(), Vec::new());
        for i in 0..d.len() {
            if keep[i] != 0 {
                key = key * d[i] + me[i];
                kd.push(d[i]);
                kp.push(p[i]);
            } else {
                colour = colour * d[i] + me[i];
            }
        }
        // No dimension kept: a zero-dimensional grid of one process, rank 0's (as MPICH,
        // whose cartsuball test checks it); the others get MPI_COMM_NULL.
        let colour = if kd.is_empty() {
            (c.rank() == 0).then_some(0)
        } else {
            Some(colour)
        };
        let Some(s) = c.split(colour, key)? else {
            // SAFETY: checked non-NULL; the program's output argument.
            return unsafe { put(out, COMM_NULL, "newcomm") };
        };
        let h = new_comm_handle(comm, Some(s.clone()));
        attach_to(
            h,
            &s,
            Shape::Cart {
                dims: kd,
                periods: kp,
            },
        )?;
        // SAFETY: checked non-NULL; the program's output argument.
        unsafe { put(out, h, "newcomm") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Cart_map(
    comm: MpiComm,
    ndims: c_int,
    dims: *const c_int,
    _periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    entry(Call::CartMap, comm, || {
        let c = comm_of(comm)?;
        let k = count(ndims, "ndims")?;
        // SAFETY: MPI requires `ndims` entries.
        let d = unsafe { array(dims, k, "dims")? };
        if let Some(x) = d.iter().find(|&&x| x <= 0) {
            fail!(class::DIMS, "invalid dimension size {x}");
        }
        let n: i64 = d.iter().map(|&x| i64::from(x)).product();
        if n > i64::from(c.size()) {
            fail!(
                class::DIMS,
                "the grid has {n} nodes, more than {} ranks",
                c.size()
            );
        }
        let r = if i64::from(c.rank()) < n {
            c.rank()
        } else {
            UNDEFINED
        };
        // SAFETY: the program's output argument.
        unsafe { put(newrank, r, "newrank") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Graph_map(
    comm: MpiComm,
    nnodes: c_int,
    _index: *const c_int,
    _edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    entry(Call::GraphMap, comm, || {
        let c = comm_of(comm)?;
        let n = count(nnodes, "nnodes")? as c_int;
        if n > c.size() {
            fail!(
                class::ARG,
                "the graph has {n} nodes, more than {} ranks",
                c.size()
            );
        }
        let r = if c.rank() < n { c.rank() } else { UNDEFINED };
        // SAFETY: the program's output argument.
        unsafe { put(newrank, r, "newrank") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Graphdims_get(
    comm: MpiComm,
    nnodes: *mut c_int,
    nedges: *mut c_int,
) -> c_int {
    entry(Call::GraphdimsGet, comm, || {
        let (i, e) = need_graph(comm)?;
        // SAFETY: the program's output arguments.
        unsafe {
            put(nnodes, i.len() as c_int, "nnodes")?;
            put(nedges, e.len() as c_int, "nedges")
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Graph_get(
    comm: MpiComm,
    maxindex: c_int,
    maxedges: c_int,
    index: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    entry(Call::GraphGet, comm, || {
        let (i, e) = need_graph(comm)?;
        // SAFETY: MPI requires `maxindex` and `maxedges` entries.
        unsafe {
            put_array(index, maxindex, &i, "index")?;
            put_array(edges, maxedges, &e, "edges")
        }
    })
}

fn check_graph_rank(i: &[c_int], rank: c_int) -> MpiResult {
    if !(0..i.len() as c_int).contains(&rank) {
        fail!(
            class::RANK,
            "invalid rank {rank} (graph of {} nodes)",
            i.len()
        );
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Graph_neighbors_count(
    comm: MpiComm,
    rank: c_int,
    n: *mut c_int,
) -> c_int {
    entry(Call::GraphNeighborsCount, comm, || {
        let (i, e) = need_graph(comm)?;
        check_graph_rank(&i, rank)?;
        let k = graph_adjacent(&i, &e, rank).len() as c_int;
        // SAFETY: the program's output argument.
        unsafe { put(n, k, "nneighbors") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Graph_neighbors(
    comm: MpiComm,
    rank: c_int,
    max: c_int,
    out: *mut c_int,
) -> c_int {
    entry(Call::GraphNeighbors, comm, || {
        let (i, e) = need_graph(comm)?;
        check_graph_rank(&i, rank)?;
        // SAFETY: MPI requires `maxneighbors` entries.
        unsafe { put_array(out, max, graph_adjacent(&i, &e, rank), "neighbors") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cartesian_coordinates_ranks_and_shifts() {
        let dims = [3, 2];
        assert_eq!(coords_of(&dims, 0), vec![0, 0]);
        assert_eq!(coords_of(&dims, 5), vec![2, 1]);
        assert_eq!(rank_of(&dims, &[true, false], &[-1, 1]), Some(5));
        assert_eq!(rank_of(&dims, &[true, false], &[0, 2]), None);
        // Rank 1 = (0, 1): along 0 (periodic) 2 and 1 rows away; along 1 off the edge.
        assert_eq!(shift(&dims, &[true, false], 1, 0, 1), (5, 3));
        assert_eq!(shift(&dims, &[true, false], 1, 1, 1), (0, PROC_NULL));
    }

    #[test]
    fn neighbours_follow_the_standard_order() {
        let cart = Shape::Cart {
            dims: vec![1],
            periods: vec![true],
        };
        // A periodic ring of one: itself in both directions.
        assert_eq!(neighbours(&cart, 0), (vec![0, 0], vec![0, 0]));
        let graph = Shape::Graph {
            index: vec![2, 3, 4],
            edges: vec![1, 2, 0, 0],
        };
        assert_eq!(neighbours(&graph, 0).0, vec![1, 2]);
        assert_eq!(neighbours(&graph, 2).1, vec![0]);
        let dist = Shape::DistGraph {
            sources: vec![3],
            dests: vec![1, 2],
            weights: None,
        };
        assert_eq!(neighbours(&dist, 0), (vec![3], vec![1, 2]));
    }
}
