//! The C entry points of issue 13's second half that the Fortran layer calls (persistent
//! collectives, `MPI_Comm_idup`, topologies, neighbour collectives, sessions), declared by
//! symbol name as in [`super::cabi`], which re-exports them.

use std::os::raw::{c_char, c_int, c_void};

extern "C" {
    pub fn PMPI_Barrier_init(comm: c_int, info: c_int, request: *mut c_int) -> c_int;
    pub fn PMPI_Bcast_init(
        buffer: *mut c_void,
        count: c_int,
        datatype: c_int,
        root: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Reduce_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        root: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Allreduce_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Scan_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Exscan_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Reduce_scatter_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Reduce_scatter_block_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcount: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Gather_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Gatherv_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Scatter_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Scatterv_init(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        displs: *const c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Allgather_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Allgatherv_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Alltoall_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Alltoallv_init(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Alltoallw_init(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtypes: *const c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtypes: *const c_int,
        comm: c_int,
        info: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Comm_idup(comm: c_int, newcomm: *mut c_int, request: *mut c_int) -> c_int;
    pub fn PMPI_Comm_idup_with_info(
        comm: c_int,
        info: c_int,
        newcomm: *mut c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Cart_create(
        comm_old: c_int,
        ndims: c_int,
        dims: *const c_int,
        periods: *const c_int,
        reorder: c_int,
        comm_cart: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Cart_coords(comm: c_int, rank: c_int, maxdims: c_int, coords: *mut c_int) -> c_int;
    pub fn PMPI_Cart_rank(comm: c_int, coords: *const c_int, rank: *mut c_int) -> c_int;
    pub fn PMPI_Cart_shift(
        comm: c_int,
        direction: c_int,
        disp: c_int,
        rank_source: *mut c_int,
        rank_dest: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Cart_sub(comm: c_int, remain_dims: *const c_int, newcomm: *mut c_int) -> c_int;
    pub fn PMPI_Cart_get(
        comm: c_int,
        maxdims: c_int,
        dims: *mut c_int,
        periods: *mut c_int,
        coords: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Cart_map(
        comm: c_int,
        ndims: c_int,
        dims: *const c_int,
        periods: *const c_int,
        newrank: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Cartdim_get(comm: c_int, ndims: *mut c_int) -> c_int;
    pub fn PMPI_Graph_create(
        comm_old: c_int,
        nnodes: c_int,
        index: *const c_int,
        edges: *const c_int,
        reorder: c_int,
        comm_graph: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Graph_get(
        comm: c_int,
        maxindex: c_int,
        maxedges: c_int,
        index: *mut c_int,
        edges: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Graph_neighbors(
        comm: c_int,
        rank: c_int,
        maxneighbors: c_int,
        neighbors: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Graph_neighbors_count(comm: c_int, rank: c_int, nneighbors: *mut c_int) -> c_int;
    pub fn PMPI_Graph_map(
        comm: c_int,
        nnodes: c_int,
        index: *const c_int,
        edges: *const c_int,
        newrank: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Graphdims_get(comm: c_int, nnodes: *mut c_int, nedges: *mut c_int) -> c_int;
    pub fn PMPI_Dist_graph_create(
        comm_old: c_int,
        n: c_int,
        sources: *const c_int,
        degrees: *const c_int,
        destinations: *const c_int,
        weights: *const c_int,
        info: c_int,
        reorder: c_int,
        comm_dist_graph: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Dist_graph_create_adjacent(
        comm_old: c_int,
        indegree: c_int,
        sources: *const c_int,
        sourceweights: *const c_int,
        outdegree: c_int,
        destinations: *const c_int,
        destweights: *const c_int,
        info: c_int,
        reorder: c_int,
        comm_dist_graph: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Dist_graph_neighbors(
        comm: c_int,
        maxindegree: c_int,
        sources: *mut c_int,
        sourceweights: *mut c_int,
        maxoutdegree: c_int,
        destinations: *mut c_int,
        destweights: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Dist_graph_neighbors_count(
        comm: c_int,
        indegree: *mut c_int,
        outdegree: *mut c_int,
        weighted: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Topo_test(comm: c_int, status: *mut c_int) -> c_int;
    pub fn PMPI_Neighbor_allgather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Neighbor_allgatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Neighbor_alltoall(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Neighbor_alltoallv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Neighbor_alltoallw(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const isize,
        sendtypes: *const c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const isize,
        recvtypes: *const c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Ineighbor_allgather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ineighbor_allgatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ineighbor_alltoall(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ineighbor_alltoallv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ineighbor_alltoallw(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const isize,
        sendtypes: *const c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const isize,
        recvtypes: *const c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Session_init(info: c_int, errhandler: c_int, session: *mut c_int) -> c_int;
    pub fn PMPI_Session_finalize(session: *mut c_int) -> c_int;
    pub fn PMPI_Session_get_info(session: c_int, info_used: *mut c_int) -> c_int;
    pub fn PMPI_Session_get_num_psets(
        session: c_int,
        info: c_int,
        npset_names: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Session_get_nth_pset(
        session: c_int,
        info: c_int,
        n: c_int,
        pset_len: *mut c_int,
        pset_name: *mut c_char,
    ) -> c_int;
    pub fn PMPI_Session_get_pset_info(
        session: c_int,
        pset_name: *const c_char,
        info: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Group_from_session_pset(
        session: c_int,
        pset_name: *const c_char,
        newgroup: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Comm_create_from_group(
        group: c_int,
        stringtag: *const c_char,
        info: c_int,
        errhandler: c_int,
        newcomm: *mut c_int,
    ) -> c_int;
}
