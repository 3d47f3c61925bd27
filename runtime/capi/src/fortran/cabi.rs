//! The C entry points the Fortran layer calls, declared by symbol name.
//!
//! The Fortran wrappers reach the C ABI exactly as a C program would (through the
//! `PMPI_*` symbols of `include/mpi.h`), not through the Rust modules that implement them:
//! the C layer's internals can be reorganised freely and this file only changes when
//! mpi.h does. Generated from mpi.h's `STROBE_MPI_FN` lines (handles are `c_int`,
//! `MPI_Aint` is `isize`); `tests/tests/fortran.rs` checks every one has a Fortran binding.

use std::os::raw::{c_char, c_int, c_void};

// Issue 13's second half (persistent collectives, Comm_idup, topologies, neighbour
// collectives, sessions), declared in their own file.
pub use super::cabi_mpi4::*;

/// `MPI_Status` as laid out in mpi.h.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CStatus {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    pub cancelled: c_int,
    pub bytes: i64,
}

extern "C" {
    pub fn PMPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int;
    pub fn PMPI_Init_thread(
        argc: *mut c_int,
        argv: *mut *mut *mut c_char,
        required: c_int,
        provided: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Query_thread(provided: *mut c_int) -> c_int;
    pub fn PMPI_Is_thread_main(flag: *mut c_int) -> c_int;
    pub fn PMPI_Initialized(flag: *mut c_int) -> c_int;
    pub fn PMPI_Finalize() -> c_int;
    pub fn PMPI_Finalized(flag: *mut c_int) -> c_int;
    pub fn PMPI_Abort(comm: c_int, errorcode: c_int) -> c_int;
    pub fn PMPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int;
    pub fn PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int;
    pub fn PMPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) -> c_int;
    pub fn PMPI_Wtime() -> f64;
    pub fn PMPI_Wtick() -> f64;
    pub fn PMPI_Alloc_mem(size: isize, info: c_int, baseptr: *mut c_void) -> c_int;
    pub fn PMPI_Free_mem(base: *mut c_void) -> c_int;
    pub fn PMPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int)
        -> c_int;
    pub fn PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int;
    pub fn PMPI_Comm_set_errhandler(comm: c_int, errhandler: c_int) -> c_int;
    pub fn PMPI_Comm_get_errhandler(comm: c_int, errhandler: *mut c_int) -> c_int;
    pub fn PMPI_Errhandler_free(errhandler: *mut c_int) -> c_int;
    pub fn PMPI_Send(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Ssend(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Rsend(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Bsend(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int;
    pub fn PMPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int;
    pub fn PMPI_Recv(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        source: c_int,
        tag: c_int,
        comm: c_int,
        status: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Isend(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Issend(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Irsend(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Irecv(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        source: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Sendrecv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        dest: c_int,
        sendtag: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        source: c_int,
        recvtag: c_int,
        comm: c_int,
        status: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Sendrecv_replace(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        sendtag: c_int,
        source: c_int,
        recvtag: c_int,
        comm: c_int,
        status: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Probe(source: c_int, tag: c_int, comm: c_int, status: *mut CStatus) -> c_int;
    pub fn PMPI_Iprobe(
        source: c_int,
        tag: c_int,
        comm: c_int,
        flag: *mut c_int,
        status: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Get_count(status: *const CStatus, datatype: c_int, count: *mut c_int) -> c_int;
    pub fn PMPI_Test_cancelled(status: *const CStatus, flag: *mut c_int) -> c_int;
    pub fn PMPI_Wait(request: *mut c_int, status: *mut CStatus) -> c_int;
    pub fn PMPI_Test(request: *mut c_int, flag: *mut c_int, status: *mut CStatus) -> c_int;
    pub fn PMPI_Waitall(
        count: c_int,
        array_of_requests: *mut c_int,
        array_of_statuses: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Testall(
        count: c_int,
        array_of_requests: *mut c_int,
        flag: *mut c_int,
        array_of_statuses: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Waitany(
        count: c_int,
        array_of_requests: *mut c_int,
        index: *mut c_int,
        status: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Testany(
        count: c_int,
        array_of_requests: *mut c_int,
        index: *mut c_int,
        flag: *mut c_int,
        status: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Waitsome(
        incount: c_int,
        array_of_requests: *mut c_int,
        outcount: *mut c_int,
        array_of_indices: *mut c_int,
        array_of_statuses: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Testsome(
        incount: c_int,
        array_of_requests: *mut c_int,
        outcount: *mut c_int,
        array_of_indices: *mut c_int,
        array_of_statuses: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Request_free(request: *mut c_int) -> c_int;
    pub fn PMPI_Cancel(request: *mut c_int) -> c_int;
    pub fn PMPI_Barrier(comm: c_int) -> c_int;
    pub fn PMPI_Bcast(
        buffer: *mut c_void,
        count: c_int,
        datatype: c_int,
        root: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Reduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        root: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Allreduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Reduce_scatter(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Reduce_scatter_block(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcount: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Scan(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Exscan(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Reduce_local(
        inbuf: *const c_void,
        inoutbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
    ) -> c_int;
    pub fn PMPI_Scatter(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Scatterv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        displs: *const c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Gather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Gatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Allgather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Allgatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Alltoall(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Alltoallv(
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
    pub fn PMPI_Op_create(user_fn: *mut c_void, commute: c_int, op: *mut c_int) -> c_int;
    pub fn PMPI_Op_free(op: *mut c_int) -> c_int;
    pub fn PMPI_Op_commutative(op: c_int, commute: *mut c_int) -> c_int;
    pub fn PMPI_Type_contiguous(count: c_int, oldtype: c_int, newtype: *mut c_int) -> c_int;
    pub fn PMPI_Type_vector(
        count: c_int,
        blocklength: c_int,
        stride: c_int,
        oldtype: c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_create_hvector(
        count: c_int,
        blocklength: c_int,
        stride: isize,
        oldtype: c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_indexed(
        count: c_int,
        array_of_blocklengths: *const c_int,
        array_of_displacements: *const c_int,
        oldtype: c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_create_hindexed(
        count: c_int,
        array_of_blocklengths: *const c_int,
        array_of_displacements: *const isize,
        oldtype: c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_create_indexed_block(
        count: c_int,
        blocklength: c_int,
        array_of_displacements: *const c_int,
        oldtype: c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_create_struct(
        count: c_int,
        array_of_blocklengths: *const c_int,
        array_of_displacements: *const isize,
        array_of_types: *const c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_create_resized(
        oldtype: c_int,
        lb: isize,
        extent: isize,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_dup(oldtype: c_int, newtype: *mut c_int) -> c_int;
    pub fn PMPI_Type_commit(datatype: *mut c_int) -> c_int;
    pub fn PMPI_Type_free(datatype: *mut c_int) -> c_int;
    pub fn PMPI_Type_size(datatype: c_int, size: *mut c_int) -> c_int;
    pub fn PMPI_Type_get_extent(datatype: c_int, lb: *mut isize, extent: *mut isize) -> c_int;
    pub fn PMPI_Type_get_true_extent(
        datatype: c_int,
        true_lb: *mut isize,
        true_extent: *mut isize,
    ) -> c_int;
    pub fn PMPI_Type_get_envelope(
        datatype: c_int,
        num_integers: *mut c_int,
        num_addresses: *mut c_int,
        num_datatypes: *mut c_int,
        combiner: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Get_address(location: *const c_void, address: *mut isize) -> c_int;
    pub fn PMPI_Pack(
        inbuf: *const c_void,
        incount: c_int,
        datatype: c_int,
        outbuf: *mut c_void,
        outsize: c_int,
        position: *mut c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Unpack(
        inbuf: *const c_void,
        insize: c_int,
        position: *mut c_int,
        outbuf: *mut c_void,
        outcount: c_int,
        datatype: c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Pack_size(incount: c_int, datatype: c_int, comm: c_int, size: *mut c_int) -> c_int;
    pub fn PMPI_Comm_rank(comm: c_int, rank: *mut c_int) -> c_int;
    pub fn PMPI_Comm_size(comm: c_int, size: *mut c_int) -> c_int;
    pub fn PMPI_Comm_dup(comm: c_int, newcomm: *mut c_int) -> c_int;
    pub fn PMPI_Comm_split(comm: c_int, color: c_int, key: c_int, newcomm: *mut c_int) -> c_int;
    pub fn PMPI_Comm_split_type(
        comm: c_int,
        split_type: c_int,
        key: c_int,
        info: c_int,
        newcomm: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Comm_get_parent(parent: *mut c_int) -> c_int;
    pub fn PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int;
    pub fn PMPI_Comm_create(comm: c_int, group: c_int, newcomm: *mut c_int) -> c_int;
    pub fn PMPI_Comm_create_group(
        comm: c_int,
        group: c_int,
        tag: c_int,
        newcomm: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Comm_free(comm: *mut c_int) -> c_int;
    pub fn PMPI_Comm_compare(comm1: c_int, comm2: c_int, result: *mut c_int) -> c_int;
    pub fn PMPI_Comm_group(comm: c_int, group: *mut c_int) -> c_int;
    pub fn PMPI_Comm_test_inter(comm: c_int, flag: *mut c_int) -> c_int;
    pub fn PMPI_Comm_remote_size(comm: c_int, size: *mut c_int) -> c_int;
    pub fn PMPI_Comm_set_name(comm: c_int, comm_name: *const c_char) -> c_int;
    pub fn PMPI_Comm_get_name(comm: c_int, comm_name: *mut c_char, resultlen: *mut c_int) -> c_int;
    pub fn PMPI_Comm_create_keyval(
        comm_copy_attr_fn: *mut c_void,
        comm_delete_attr_fn: *mut c_void,
        comm_keyval: *mut c_int,
        extra_state: *mut c_void,
    ) -> c_int;
    pub fn PMPI_Comm_free_keyval(comm_keyval: *mut c_int) -> c_int;
    pub fn PMPI_Comm_set_attr(comm: c_int, comm_keyval: c_int, attribute_val: *mut c_void)
        -> c_int;
    pub fn PMPI_Comm_get_attr(
        comm: c_int,
        comm_keyval: c_int,
        attribute_val: *mut c_void,
        flag: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Comm_delete_attr(comm: c_int, comm_keyval: c_int) -> c_int;
    pub fn PMPI_Attr_get(
        comm: c_int,
        keyval: c_int,
        attribute_val: *mut c_void,
        flag: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Group_size(group: c_int, size: *mut c_int) -> c_int;
    pub fn PMPI_Group_rank(group: c_int, rank: *mut c_int) -> c_int;
    pub fn PMPI_Group_incl(
        group: c_int,
        n: c_int,
        ranks: *const c_int,
        newgroup: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Group_excl(
        group: c_int,
        n: c_int,
        ranks: *const c_int,
        newgroup: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Group_range_incl(
        group: c_int,
        n: c_int,
        ranges: *mut c_int,
        newgroup: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Group_translate_ranks(
        group1: c_int,
        n: c_int,
        ranks1: *const c_int,
        group2: c_int,
        ranks2: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Group_compare(group1: c_int, group2: c_int, result: *mut c_int) -> c_int;
    pub fn PMPI_Group_free(group: *mut c_int) -> c_int;

    // Nonblocking collectives, Alltoallw and intercommunicators (issue 13).
    pub fn PMPI_Alltoallw(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtypes: *const c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtypes: *const c_int,
        comm: c_int,
    ) -> c_int;
    pub fn PMPI_Ialltoallw(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtypes: *const c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtypes: *const c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ibarrier(comm: c_int, request: *mut c_int) -> c_int;
    pub fn PMPI_Ibcast(
        buffer: *mut c_void,
        count: c_int,
        datatype: c_int,
        root: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ireduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        root: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Iallreduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Iscan(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Iexscan(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ireduce_scatter_block(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcount: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ireduce_scatter(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Igather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Igatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Iscatter(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Iscatterv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        displs: *const c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Iallgather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Iallgatherv(
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
    pub fn PMPI_Ialltoall(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ialltoallv(
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
    pub fn PMPI_Intercomm_create(
        local_comm: c_int,
        local_leader: c_int,
        peer_comm: c_int,
        remote_leader: c_int,
        tag: c_int,
        newintercomm: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Intercomm_merge(intercomm: c_int, high: c_int, newintracomm: *mut c_int) -> c_int;
    pub fn PMPI_Comm_remote_group(comm: c_int, group: *mut c_int) -> c_int;
}

// mpireq (issue 13): the C entry points fortran/mpireq.rs calls.
extern "C" {
    pub fn PMPI_Send_init(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Ssend_init(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Rsend_init(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Bsend_init(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Recv_init(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        source: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Start(request: *mut c_int) -> c_int;
    pub fn PMPI_Startall(count: c_int, requests: *mut c_int) -> c_int;
    pub fn PMPI_Request_get_status(request: c_int, flag: *mut c_int, status: *mut CStatus)
        -> c_int;
    pub fn PMPI_Ibsend(
        buf: *const c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Isendrecv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        dest: c_int,
        sendtag: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        source: c_int,
        recvtag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Isendrecv_replace(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        sendtag: c_int,
        source: c_int,
        recvtag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Mprobe(
        source: c_int,
        tag: c_int,
        comm: c_int,
        message: *mut c_int,
        status: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Improbe(
        source: c_int,
        tag: c_int,
        comm: c_int,
        flag: *mut c_int,
        message: *mut c_int,
        status: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Mrecv(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        message: *mut c_int,
        status: *mut CStatus,
    ) -> c_int;
    pub fn PMPI_Imrecv(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        message: *mut c_int,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Grequest_complete(request: c_int) -> c_int;
    pub fn PMPI_Status_set_elements(status: *mut CStatus, datatype: c_int, count: c_int) -> c_int;
    pub fn PMPI_Status_set_elements_x(status: *mut CStatus, datatype: c_int, count: i64) -> c_int;
    pub fn PMPI_Status_set_cancelled(status: *mut CStatus, flag: c_int) -> c_int;
    pub fn PMPI_Info_create(info: *mut c_int) -> c_int;
    pub fn PMPI_Info_set(info: c_int, key: *const c_char, value: *const c_char) -> c_int;
    pub fn PMPI_Info_delete(info: c_int, key: *const c_char) -> c_int;
    pub fn PMPI_Info_get(
        info: c_int,
        key: *const c_char,
        valuelen: c_int,
        value: *mut c_char,
        flag: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Info_get_string(
        info: c_int,
        key: *const c_char,
        buflen: *mut c_int,
        value: *mut c_char,
        flag: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Info_get_valuelen(
        info: c_int,
        key: *const c_char,
        valuelen: *mut c_int,
        flag: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Info_get_nkeys(info: c_int, nkeys: *mut c_int) -> c_int;
    pub fn PMPI_Info_get_nthkey(info: c_int, n: c_int, key: *mut c_char) -> c_int;
    pub fn PMPI_Info_dup(info: c_int, newinfo: *mut c_int) -> c_int;
    pub fn PMPI_Info_free(info: *mut c_int) -> c_int;
    pub fn PMPI_Comm_set_info(comm: c_int, info: c_int) -> c_int;
    pub fn PMPI_Comm_get_info(comm: c_int, info: *mut c_int) -> c_int;
    pub fn PMPI_Comm_dup_with_info(comm: c_int, info: c_int, newcomm: *mut c_int) -> c_int;
    pub fn PMPI_Keyval_free(keyval: *mut c_int) -> c_int;
    pub fn PMPI_Type_get_contents(
        datatype: c_int,
        max_integers: c_int,
        max_addresses: c_int,
        max_datatypes: c_int,
        array_of_integers: *mut c_int,
        array_of_addresses: *mut isize,
        array_of_datatypes: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_create_f90_integer(r: c_int, newtype: *mut c_int) -> c_int;
    pub fn PMPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut c_int) -> c_int;
    pub fn PMPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut c_int) -> c_int;
    pub fn PMPI_Type_match_size(typeclass: c_int, size: c_int, datatype: *mut c_int) -> c_int;
    pub fn PMPI_Pack_external(
        datarep: *const c_char,
        inbuf: *const c_void,
        incount: c_int,
        datatype: c_int,
        outbuf: *mut c_void,
        outsize: isize,
        position: *mut isize,
    ) -> c_int;
    pub fn PMPI_Pack_external_size(
        datarep: *const c_char,
        incount: c_int,
        datatype: c_int,
        size: *mut isize,
    ) -> c_int;
    pub fn PMPI_Unpack_external(
        datarep: *const c_char,
        inbuf: *const c_void,
        insize: isize,
        position: *mut isize,
        outbuf: *mut c_void,
        outcount: c_int,
        datatype: c_int,
    ) -> c_int;
    #[allow(clippy::too_many_arguments)]
    pub fn PMPI_Type_create_darray(
        size: c_int,
        rank: c_int,
        ndims: c_int,
        array_of_gsizes: *const c_int,
        array_of_distribs: *const c_int,
        array_of_dargs: *const c_int,
        array_of_psizes: *const c_int,
        order: c_int,
        oldtype: c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Grequest_start(
        query_fn: *mut c_void,
        free_fn: *mut c_void,
        cancel_fn: *mut c_void,
        extra_state: *mut c_void,
        request: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Comm_create_errhandler(function: *mut c_void, errhandler: *mut c_int) -> c_int;
    pub fn PMPI_Errhandler_create(function: *mut c_void, errhandler: *mut c_int) -> c_int;
    pub fn PMPI_Keyval_create(
        copy_fn: *mut c_void,
        delete_fn: *mut c_void,
        keyval: *mut c_int,
        extra_state: *mut c_void,
    ) -> c_int;
    pub fn PMPI_Type_create_keyval(
        type_copy_attr_fn: *mut c_void,
        type_delete_attr_fn: *mut c_void,
        type_keyval: *mut c_int,
        extra_state: *mut c_void,
    ) -> c_int;
    pub fn PMPI_Attr_put(comm: c_int, keyval: c_int, value: *mut c_void) -> c_int;
    pub fn PMPI_Attr_delete(comm: c_int, keyval: c_int) -> c_int;
    pub fn PMPI_Type_free_keyval(keyval: *mut c_int) -> c_int;
    pub fn PMPI_Type_set_attr(datatype: c_int, keyval: c_int, value: *mut c_void) -> c_int;
    pub fn PMPI_Type_get_attr(
        datatype: c_int,
        keyval: c_int,
        value: *mut c_void,
        flag: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_delete_attr(datatype: c_int, keyval: c_int) -> c_int;
    pub fn PMPI_Get_elements(status: *const CStatus, datatype: c_int, count: *mut c_int) -> c_int;
    pub fn PMPI_Get_elements_x(status: *const CStatus, datatype: c_int, count: *mut i64) -> c_int;
    pub fn PMPI_Type_size_x(datatype: c_int, size: *mut i64) -> c_int;
    pub fn PMPI_Type_get_extent_x(datatype: c_int, lb: *mut i64, extent: *mut i64) -> c_int;
    pub fn PMPI_Type_get_true_extent_x(datatype: c_int, lb: *mut i64, extent: *mut i64) -> c_int;
    pub fn PMPI_Type_extent(datatype: c_int, extent: *mut isize) -> c_int;
    pub fn PMPI_Type_lb(datatype: c_int, lb: *mut isize) -> c_int;
    pub fn PMPI_Type_ub(datatype: c_int, ub: *mut isize) -> c_int;
    pub fn PMPI_Type_hvector(
        count: c_int,
        blocklength: c_int,
        stride: isize,
        oldtype: c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_create_hindexed_block(
        count: c_int,
        blocklength: c_int,
        displacements: *const isize,
        oldtype: c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_create_subarray(
        ndims: c_int,
        sizes: *const c_int,
        subsizes: *const c_int,
        starts: *const c_int,
        order: c_int,
        oldtype: c_int,
        newtype: *mut c_int,
    ) -> c_int;
    pub fn PMPI_Type_set_name(datatype: c_int, name: *const c_char) -> c_int;
    pub fn PMPI_Type_get_name(datatype: c_int, name: *mut c_char, resultlen: *mut c_int) -> c_int;
    pub fn PMPI_Errhandler_set(comm: c_int, errhandler: c_int) -> c_int;
    pub fn PMPI_Errhandler_get(comm: c_int, errhandler: *mut c_int) -> c_int;
    pub fn PMPI_Comm_call_errhandler(comm: c_int, errorcode: c_int) -> c_int;
    pub fn PMPI_Add_error_class(errorclass: *mut c_int) -> c_int;
    pub fn PMPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int;
    pub fn PMPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int;
    pub fn PMPI_Group_union(group1: c_int, group2: c_int, newgroup: *mut c_int) -> c_int;
    pub fn PMPI_Group_intersection(group1: c_int, group2: c_int, newgroup: *mut c_int) -> c_int;
    pub fn PMPI_Group_difference(group1: c_int, group2: c_int, newgroup: *mut c_int) -> c_int;
    pub fn PMPI_Group_range_excl(
        group: c_int,
        n: c_int,
        ranges: *mut c_int,
        newgroup: *mut c_int,
    ) -> c_int;
}
