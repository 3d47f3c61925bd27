//! MPI-4 persistent collectives, `MPI_COMM_IDUP(_WITH_INFO)`, topologies, neighbour
//! collectives and sessions (issue 13). The large-count `_c` calls have no `mpif.h`/`use
//! mpi` names (MPI-4.0 19.2: Fortran reaches them through `mpi_f08`'s overloading only).
//! `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` are C-only here: from Fortran, distributed
//! graphs are weighted (pass weight arrays).

use std::os::raw::{c_char, c_int, c_void};

use super::args::{Buf, BufMut, Dt, In, Ptr};
use super::env::{from_fortran, to_fortran};
use super::{cabi, guard, handles, sentinel};

fortran! {
    pmpi_barrier_init_ => PMPI_Barrier_init(
        comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_bcast_init_ => PMPI_Bcast_init(
        buffer: BufMut, count: In, datatype: Dt, root: In, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_gather_init_ => PMPI_Gather_init(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In, recvtype: Dt, root: In, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_gatherv_init_ => PMPI_Gatherv_init(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, recvtype: Dt, root: In, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_scatter_init_ => PMPI_Scatter_init(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In, recvtype: Dt, root: In, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_scatterv_init_ => PMPI_Scatterv_init(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, sendtype: Dt, recvbuf: BufMut, recvcount: In, recvtype: Dt, root: In, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_allgather_init_ => PMPI_Allgather_init(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In, recvtype: Dt, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_allgatherv_init_ => PMPI_Allgatherv_init(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, recvtype: Dt, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_alltoall_init_ => PMPI_Alltoall_init(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In, recvtype: Dt, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_alltoallv_init_ => PMPI_Alltoallv_init(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const c_int>, sendtype: Dt, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, rdispls: Ptr<*const c_int>, recvtype: Dt, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_alltoallw_init_ => PMPI_Alltoallw_init(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const c_int>, sendtypes: Ptr<*const c_int>, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, rdispls: Ptr<*const c_int>, recvtypes: Ptr<*const c_int>, comm: In, info: In, request: Ptr<*mut c_int>,
    );
    pmpi_comm_idup_ => PMPI_Comm_idup(
        comm: In, newcomm: Ptr<*mut c_int>, request: Ptr<*mut c_int>,
    );
    pmpi_comm_idup_with_info_ => PMPI_Comm_idup_with_info(
        comm: In, info: In, newcomm: Ptr<*mut c_int>, request: Ptr<*mut c_int>,
    );
    pmpi_cart_create_ => PMPI_Cart_create(
        comm_old: In, ndims: In, dims: Ptr<*const c_int>, periods: Ptr<*const c_int>, reorder: In, comm_cart: Ptr<*mut c_int>,
    );
    pmpi_cart_coords_ => PMPI_Cart_coords(
        comm: In, rank: In, maxdims: In, coords: Ptr<*mut c_int>,
    );
    pmpi_cart_rank_ => PMPI_Cart_rank(
        comm: In, coords: Ptr<*const c_int>, rank: Ptr<*mut c_int>,
    );
    pmpi_cart_shift_ => PMPI_Cart_shift(
        comm: In, direction: In, disp: In, rank_source: Ptr<*mut c_int>, rank_dest: Ptr<*mut c_int>,
    );
    pmpi_cart_sub_ => PMPI_Cart_sub(
        comm: In, remain_dims: Ptr<*const c_int>, newcomm: Ptr<*mut c_int>,
    );
    pmpi_cart_get_ => PMPI_Cart_get(
        comm: In, maxdims: In, dims: Ptr<*mut c_int>, periods: Ptr<*mut c_int>, coords: Ptr<*mut c_int>,
    );
    pmpi_cart_map_ => PMPI_Cart_map(
        comm: In, ndims: In, dims: Ptr<*const c_int>, periods: Ptr<*const c_int>, newrank: Ptr<*mut c_int>,
    );
    pmpi_cartdim_get_ => PMPI_Cartdim_get(
        comm: In, ndims: Ptr<*mut c_int>,
    );
    pmpi_graph_create_ => PMPI_Graph_create(
        comm_old: In, nnodes: In, index: Ptr<*const c_int>, edges: Ptr<*const c_int>, reorder: In, comm_graph: Ptr<*mut c_int>,
    );
    pmpi_graph_get_ => PMPI_Graph_get(
        comm: In, maxindex: In, maxedges: In, index: Ptr<*mut c_int>, edges: Ptr<*mut c_int>,
    );
    pmpi_graph_neighbors_ => PMPI_Graph_neighbors(
        comm: In, rank: In, maxneighbors: In, neighbors: Ptr<*mut c_int>,
    );
    pmpi_graph_neighbors_count_ => PMPI_Graph_neighbors_count(
        comm: In, rank: In, nneighbors: Ptr<*mut c_int>,
    );
    pmpi_graph_map_ => PMPI_Graph_map(
        comm: In, nnodes: In, index: Ptr<*const c_int>, edges: Ptr<*const c_int>, newrank: Ptr<*mut c_int>,
    );
    pmpi_graphdims_get_ => PMPI_Graphdims_get(
        comm: In, nnodes: Ptr<*mut c_int>, nedges: Ptr<*mut c_int>,
    );
    pmpi_dist_graph_create_ => PMPI_Dist_graph_create(
        comm_old: In, n: In, sources: Ptr<*const c_int>, degrees: Ptr<*const c_int>, destinations: Ptr<*const c_int>, weights: Ptr<*const c_int>, info: In, reorder: In, comm_dist_graph: Ptr<*mut c_int>,
    );
    pmpi_dist_graph_create_adjacent_ => PMPI_Dist_graph_create_adjacent(
        comm_old: In, indegree: In, sources: Ptr<*const c_int>, sourceweights: Ptr<*const c_int>, outdegree: In, destinations: Ptr<*const c_int>, destweights: Ptr<*const c_int>, info: In, reorder: In, comm_dist_graph: Ptr<*mut c_int>,
    );
    pmpi_dist_graph_neighbors_ => PMPI_Dist_graph_neighbors(
        comm: In, maxindegree: In, sources: Ptr<*mut c_int>, sourceweights: Ptr<*mut c_int>, maxoutdegree: In, destinations: Ptr<*mut c_int>, destweights: Ptr<*mut c_int>,
    );
    pmpi_dist_graph_neighbors_count_ => PMPI_Dist_graph_neighbors_count(
        comm: In, indegree: Ptr<*mut c_int>, outdegree: Ptr<*mut c_int>, weighted: Ptr<*mut c_int>,
    );
    pmpi_topo_test_ => PMPI_Topo_test(
        comm: In, status: Ptr<*mut c_int>,
    );
    pmpi_neighbor_allgather_ => PMPI_Neighbor_allgather(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In, recvtype: Dt, comm: In,
    );
    pmpi_neighbor_allgatherv_ => PMPI_Neighbor_allgatherv(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, recvtype: Dt, comm: In,
    );
    pmpi_neighbor_alltoall_ => PMPI_Neighbor_alltoall(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In, recvtype: Dt, comm: In,
    );
    pmpi_neighbor_alltoallv_ => PMPI_Neighbor_alltoallv(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const c_int>, sendtype: Dt, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, rdispls: Ptr<*const c_int>, recvtype: Dt, comm: In,
    );
    pmpi_neighbor_alltoallw_ => PMPI_Neighbor_alltoallw(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const isize>, sendtypes: Ptr<*const c_int>, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, rdispls: Ptr<*const isize>, recvtypes: Ptr<*const c_int>, comm: In,
    );
    pmpi_ineighbor_allgather_ => PMPI_Ineighbor_allgather(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In, recvtype: Dt, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_ineighbor_allgatherv_ => PMPI_Ineighbor_allgatherv(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, recvtype: Dt, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_ineighbor_alltoall_ => PMPI_Ineighbor_alltoall(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In, recvtype: Dt, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_ineighbor_alltoallv_ => PMPI_Ineighbor_alltoallv(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const c_int>, sendtype: Dt, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, rdispls: Ptr<*const c_int>, recvtype: Dt, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_ineighbor_alltoallw_ => PMPI_Ineighbor_alltoallw(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const isize>, sendtypes: Ptr<*const c_int>, recvbuf: BufMut, recvcounts: Ptr<*const c_int>, rdispls: Ptr<*const isize>, recvtypes: Ptr<*const c_int>, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_session_init_ => PMPI_Session_init(
        info: In, errhandler: In, session: Ptr<*mut c_int>,
    );
    pmpi_session_finalize_ => PMPI_Session_finalize(
        session: Ptr<*mut c_int>,
    );
    pmpi_session_get_info_ => PMPI_Session_get_info(
        session: In, info_used: Ptr<*mut c_int>,
    );
    pmpi_session_get_num_psets_ => PMPI_Session_get_num_psets(
        session: In, info: In, npset_names: Ptr<*mut c_int>,
    );
}

/// The persistent reductions: `(sendbuf, recvbuf, <count>, datatype, op, <rest>, info,
/// request)`, `<rest>` the INTEGERs between the op and the info (root, comm); the
/// (datatype, op) pair maps through [`handles::reduce_args`] as for the blocking calls.
macro_rules! preductions {
    ($($pname:ident => $cname:ident($count:ident: $array:tt; $($rest:ident),*);)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $pname(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            $count: *const c_int,
            datatype: *const c_int,
            op: *const c_int,
            $($rest: *const c_int,)*
            info: *const c_int,
            request: *mut c_int,
            ierr: *mut c_int,
        ) {
            let name = &stringify!($cname)[1..];
            // SAFETY: Fortran arguments of the reduction, by reference; the C entry point
            // has mpi.h's contract.
            guard(name, ierr, || unsafe {
                let comm = [$($rest),*].last().map_or(super::COMM_WORLD, |p| p.read());
                let (dt, op) = match handles::reduce_args(name, comm, datatype.read(), op.read()) {
                    Ok(p) => p,
                    Err(rc) => return rc,
                };
                cabi::$cname(
                    sentinel::buf(sendbuf),
                    sentinel::buf(recvbuf) as *mut c_void,
                    preductions!(@count $array, $count),
                    dt,
                    op,
                    $($rest.read(),)*
                    info.read(),
                    request,
                )
            })
        }
    )*};
    (@count true, $c:ident) => { $c };
    (@count false, $c:ident) => { $c.read() };
}

preductions! {
    pmpi_reduce_init_ => PMPI_Reduce_init(count: false; root, comm);
    pmpi_allreduce_init_ => PMPI_Allreduce_init(count: false; comm);
    pmpi_scan_init_ => PMPI_Scan_init(count: false; comm);
    pmpi_exscan_init_ => PMPI_Exscan_init(count: false; comm);
    pmpi_reduce_scatter_block_init_ => PMPI_Reduce_scatter_block_init(recvcount: false; comm);
    pmpi_reduce_scatter_init_ => PMPI_Reduce_scatter_init(recvcounts: true; comm);
}

/// `MPI_SESSION_GET_NTH_PSET(session, info, n, pset_len, pset_name, ierror)`: as C,
/// `pset_len` 0 asks for the length; the name comes back blank-padded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_session_get_nth_pset_(
    session: *const c_int,
    info: *const c_int,
    n: *const c_int,
    pset_len: *mut c_int,
    pset_name: *mut c_char,
    ierr: *mut c_int,
    name_len: usize,
) {
    // SAFETY: INTEGER arguments and a CHARACTER with its hidden length.
    guard("MPI_Session_get_nth_pset", ierr, || unsafe {
        let asked = pset_len.read();
        if asked == 0 {
            return cabi::PMPI_Session_get_nth_pset(
                session.read(),
                info.read(),
                n.read(),
                pset_len,
                std::ptr::null_mut(),
            );
        }
        let mut buf = vec![0 as c_char; name_len + 1];
        let mut len = buf.len() as c_int;
        let rc = cabi::PMPI_Session_get_nth_pset(
            session.read(),
            info.read(),
            n.read(),
            &mut len,
            buf.as_mut_ptr(),
        );
        if rc == super::SUCCESS {
            let s = std::ffi::CStr::from_ptr(buf.as_ptr()).to_bytes();
            to_fortran(s, pset_name, name_len);
            pset_len.write(s.len() as c_int);
        }
        rc
    })
}

/// `MPI_SESSION_GET_PSET_INFO(session, pset_name, info, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_session_get_pset_info_(
    session: *const c_int,
    pset_name: *const c_char,
    info: *mut c_int,
    ierr: *mut c_int,
    name_len: usize,
) {
    // SAFETY: INTEGER arguments and a CHARACTER with its hidden length.
    guard("MPI_Session_get_pset_info", ierr, || unsafe {
        let name = from_fortran(pset_name, name_len);
        cabi::PMPI_Session_get_pset_info(session.read(), name.as_ptr(), info)
    })
}

/// `MPI_GROUP_FROM_SESSION_PSET(session, pset_name, newgroup, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_group_from_session_pset_(
    session: *const c_int,
    pset_name: *const c_char,
    group: *mut c_int,
    ierr: *mut c_int,
    name_len: usize,
) {
    // SAFETY: INTEGER arguments and a CHARACTER with its hidden length.
    guard("MPI_Group_from_session_pset", ierr, || unsafe {
        let name = from_fortran(pset_name, name_len);
        cabi::PMPI_Group_from_session_pset(session.read(), name.as_ptr(), group)
    })
}

/// `MPI_COMM_CREATE_FROM_GROUP(group, stringtag, info, errhandler, newcomm, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_comm_create_from_group_(
    group: *const c_int,
    tag: *const c_char,
    info: *const c_int,
    errhandler: *const c_int,
    newcomm: *mut c_int,
    ierr: *mut c_int,
    tag_len: usize,
) {
    // SAFETY: INTEGER arguments and a CHARACTER with its hidden length.
    guard("MPI_Comm_create_from_group", ierr, || unsafe {
        let tag = from_fortran(tag, tag_len);
        cabi::PMPI_Comm_create_from_group(
            group.read(),
            tag.as_ptr(),
            info.read(),
            errhandler.read(),
            newcomm,
        )
    })
}
