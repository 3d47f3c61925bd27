//! Distributed graph topologies (MPI-3.1 7.5.4): `MPI_Dist_graph_create_adjacent`,
//! `MPI_Dist_graph_create`, `MPI_Dist_graph_neighbors(_count)`. The topology model is in
//! topo.rs. `MPI_Dist_graph_create` lets any rank name any edge: the edges are
//! allgathered over the old communicator (two ordinary collectives), then every rank keeps
//! its own, in-edges and out-edges each in (naming rank, position) order.

use std::os::raw::c_int;

use strobe_runtime::api::ReduceOp;
use strobe_runtime::calls::Call;

use crate::comm::{comm_of, new_comm_handle};
use crate::consts::*;
use crate::error::{entry, fail, MpiResult};
use crate::intercomm::inter_of;
use crate::topo::{need, Shape, ERR_TOPOLOGY, UNWEIGHTED, WEIGHTS_EMPTY};
use crate::util::{array, count, put};

/// Read `n` weights at `p`: `None` for `MPI_UNWEIGHTED`.
///
/// # Safety
/// `p` must be a sentinel or hold `n` entries.
unsafe fn weights(p: *const c_int, n: usize, what: &str) -> MpiResult<Option<Vec<c_int>>> {
    match p as usize {
        UNWEIGHTED => Ok(None),
        WEIGHTS_EMPTY => Ok(Some(vec![0; n])),
        // SAFETY: this function's contract.
        _ => Ok(Some(unsafe { array(p, n, what)? }.to_vec())),
    }
}

fn check_ranks(v: &[c_int], size: c_int, what: &str) -> MpiResult {
    if let Some(x) = v.iter().find(|&&x| !(0..size).contains(&x)) {
        fail!(
            class::RANK,
            "{what} contains {x}, not a rank of the communicator"
        );
    }
    Ok(())
}

/// Dup `comm` and attach `shape` to the copy.
fn create(comm: MpiComm, shape: Shape, out: *mut MpiComm) -> MpiResult {
    let c = comm_of(comm)?;
    let d = c.dup()?;
    let h = new_comm_handle(comm, Some(d.clone()));
    crate::topo::attach_to(h, &d, shape)?;
    // SAFETY: the program's output argument (checked non-NULL by the callers).
    unsafe { put(out, h, "comm_dist_graph") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Dist_graph_create_adjacent(
    comm: MpiComm,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    dests: *const c_int,
    destweights: *const c_int,
    _info: c_int,
    _reorder: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::DistGraphCreateAdjacent, comm, || {
        if inter_of(comm).is_some() {
            fail!(
                class::COMM,
                "topologies on intercommunicators are not allowed"
            );
        }
        let size = comm_of(comm)?.size();
        let (ni, no) = (count(indegree, "indegree")?, count(outdegree, "outdegree")?);
        // SAFETY: MPI requires `indegree`/`outdegree` entries (or the sentinels).
        let (s, sw, d, dw) = unsafe {
            (
                array(sources, ni, "sources")?.to_vec(),
                weights(sourceweights, ni, "sourceweights")?,
                array(dests, no, "destinations")?.to_vec(),
                weights(destweights, no, "destweights")?,
            )
        };
        check_ranks(&s, size, "sources")?;
        check_ranks(&d, size, "destinations")?;
        if out.is_null() {
            fail!(class::ARG, "comm_dist_graph is NULL");
        }
        let weights = match (sw, dw) {
            (Some(a), Some(b)) => Some((a, b)),
            (None, None) => None,
            _ => fail!(
                class::ARG,
                "either both or neither weight arrays are MPI_UNWEIGHTED"
            ),
        };
        let shape = Shape::DistGraph {
            sources: s,
            dests: d,
            weights,
        };
        create(comm, shape, out)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Dist_graph_create(
    comm: MpiComm,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    dests: *const c_int,
    weights_in: *const c_int,
    _info: c_int,
    _reorder: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::DistGraphCreate, comm, || {
        if inter_of(comm).is_some() {
            fail!(
                class::COMM,
                "topologies on intercommunicators are not allowed"
            );
        }
        let c = comm_of(comm)?;
        let n = count(n, "n")?;
        // SAFETY: MPI requires `n` sources and degrees, then sum(degrees) destinations.
        let (s, deg) = unsafe { (array(sources, n, "sources")?, array(degrees, n, "degrees")?) };
        check_ranks(s, c.size(), "sources")?;
        let mut ne = 0usize;
        for &k in deg {
            ne += count(k, "degrees")?;
        }
        // SAFETY: as above.
        let (d, w) = unsafe {
            (
                array(dests, ne, "destinations")?,
                weights(weights_in, ne, "weights")?,
            )
        };
        check_ranks(d, c.size(), "destinations")?;
        if out.is_null() {
            fail!(class::ARG, "comm_dist_graph is NULL");
        }
        // My edges as (source, destination, weight) triples.
        let mut mine = Vec::with_capacity(3 * ne);
        let mut at = 0;
        for (&src, &k) in s.iter().zip(deg) {
            for _ in 0..k {
                mine.extend([src, d[at], w.as_ref().map_or(0, |w| w[at])]);
                at += 1;
            }
        }
        // Everyone's: pad to the longest list, allgather.
        let mut longest = [mine.len() as i64, i64::from(w.is_none())];
        c.allreduce_in_place(&mut longest, ReduceOp::Max)?;
        let (len, any_unweighted) = (longest[0] as usize, longest[1] != 0);
        if any_unweighted && w.is_some() && ne > 0 {
            fail!(
                class::ARG,
                "some ranks gave weights and others MPI_UNWEIGHTED"
            );
        }
        mine.resize(len, -1);
        let mut all = vec![0 as c_int; len * c.size() as usize];
        c.allgather(&mine, &mut all)?;
        let me = c.rank();
        let (mut ins, mut iw, mut outs, mut ow) = (vec![], vec![], vec![], vec![]);
        for t in all.chunks_exact(3).filter(|t| t[0] >= 0) {
            if t[1] == me {
                ins.push(t[0]);
                iw.push(t[2]);
            }
            if t[0] == me {
                outs.push(t[1]);
                ow.push(t[2]);
            }
        }
        let shape = Shape::DistGraph {
            sources: ins,
            dests: outs,
            weights: (!any_unweighted).then_some((iw, ow)),
        };
        create(comm, shape, out)
    })
}

/// (sources, destinations, weights) of a distributed graph.
type DistShape = (Vec<c_int>, Vec<c_int>, Option<(Vec<c_int>, Vec<c_int>)>);

fn dist_shape(comm: MpiComm) -> MpiResult<DistShape> {
    match &need(comm)?.shape {
        Shape::DistGraph {
            sources,
            dests,
            weights,
        } => Ok((sources.clone(), dests.clone(), weights.clone())),
        _ => fail!(
            ERR_TOPOLOGY,
            "communicator {comm} has no distributed graph topology"
        ),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Dist_graph_neighbors_count(
    comm: MpiComm,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    entry(Call::DistGraphNeighborsCount, comm, || {
        let (s, d, w) = dist_shape(comm)?;
        // SAFETY: the program's output arguments.
        unsafe {
            put(indegree, s.len() as c_int, "indegree")?;
            put(outdegree, d.len() as c_int, "outdegree")?;
            put(weighted, w.is_some() as c_int, "weighted")
        }
    })
}

/// Copy `v` into the program's array `p` of `max` entries; weights arrays may be the
/// `MPI_UNWEIGHTED` sentinel (nothing written).
///
/// # Safety
/// `p` must be NULL, a sentinel or hold `max` writable entries.
unsafe fn put_list(p: *mut c_int, max: usize, v: &[c_int], what: &str) -> MpiResult {
    let k = v.len().min(max);
    if k == 0 || matches!(p as usize, UNWEIGHTED | WEIGHTS_EMPTY) {
        return Ok(());
    }
    if p.is_null() {
        fail!(class::ARG, "{what} is NULL");
    }
    // SAFETY: non-NULL, holds `max` >= `k` entries (MPI contract).
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, k) };
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Dist_graph_neighbors(
    comm: MpiComm,
    maxin: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxout: c_int,
    dests: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    entry(Call::DistGraphNeighbors, comm, || {
        let (s, d, w) = dist_shape(comm)?;
        let (mi, mo) = (count(maxin, "maxindegree")?, count(maxout, "maxoutdegree")?);
        // SAFETY: MPI requires `maxindegree`/`maxoutdegree` entries.
        unsafe {
            put_list(sources, mi, &s, "sources")?;
            put_list(dests, mo, &d, "destinations")?;
            if let Some((iw, ow)) = &w {
                put_list(sourceweights, mi, iw, "sourceweights")?;
                put_list(destweights, mo, ow, "destweights")?;
            }
        }
        Ok(())
    })
}
