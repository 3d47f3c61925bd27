//! Collectives, reductions and user ops.
//!
//! Reductions go through [`handles::reduce_args`]: the Fortran-only datatypes (complex,
//! pairs of reals) choose the C (datatype, op) pair the reduction runs with.

use std::os::raw::{c_int, c_void};

use super::args::{Buf, BufMut, Dt, Flag, FlagIn, In, Ptr};
use super::{cabi, guard, handles, sentinel};

fortran! {
    pmpi_barrier_ => PMPI_Barrier(comm: In);
    pmpi_bcast_ => PMPI_Bcast(buffer: BufMut, count: In, datatype: Dt, root: In, comm: In);
    pmpi_scatter_ => PMPI_Scatter(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In,
        recvtype: Dt, root: In, comm: In,
    );
    pmpi_scatterv_ => PMPI_Scatterv(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, sendtype: Dt,
        recvbuf: BufMut, recvcount: In, recvtype: Dt, root: In, comm: In,
    );
    pmpi_gather_ => PMPI_Gather(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In,
        recvtype: Dt, root: In, comm: In,
    );
    pmpi_gatherv_ => PMPI_Gatherv(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut,
        recvcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, recvtype: Dt, root: In,
        comm: In,
    );
    pmpi_allgather_ => PMPI_Allgather(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In,
        recvtype: Dt, comm: In,
    );
    pmpi_allgatherv_ => PMPI_Allgatherv(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut,
        recvcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, recvtype: Dt, comm: In,
    );
    pmpi_alltoall_ => PMPI_Alltoall(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In,
        recvtype: Dt, comm: In,
    );
    pmpi_alltoallv_ => PMPI_Alltoallv(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const c_int>, sendtype: Dt,
        recvbuf: BufMut, recvcounts: Ptr<*const c_int>, rdispls: Ptr<*const c_int>,
        recvtype: Dt, comm: In,
    );
    pmpi_op_create_ => PMPI_Op_create(user_fn: Ptr<*mut c_void>, commute: FlagIn, op: Ptr<*mut c_int>);
    pmpi_op_free_ => PMPI_Op_free(op: Ptr<*mut c_int>);
    pmpi_op_commutative_ => PMPI_Op_commutative(op: In, commute: Flag);
}

/// The Fortran reductions: `(sendbuf, recvbuf, <count>, datatype, op, <rest>)` where
/// `<count>` is the INTEGER between the buffers and the datatype and `<rest>` INTEGERs after the op (root, comm).
macro_rules! reductions {
    ($($pname:ident => $cname:ident($count:ident; $($rest:ident),*);)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $pname(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            $count: *const c_int,
            datatype: *const c_int,
            op: *const c_int,
            $($rest: *const c_int,)*
            ierr: *mut c_int,
        ) {
            let name = &stringify!($cname)[1..];
            // SAFETY: Fortran arguments of the reduction, by reference; the C entry point
            // has mpi.h's contract.
            guard(name, ierr, || unsafe {
                let comm = reduction_comm(&[$($rest),*]);
                let (dt, op) = match handles::reduce_args(name, comm, datatype.read(), op.read()) {
                    Ok(p) => p,
                    Err(rc) => return rc,
                };
                cabi::$cname(
                    sentinel::buf(sendbuf),
                    sentinel::buf(recvbuf) as *mut c_void,
                    $count.read(),
                    dt,
                    op,
                    $($rest.read()),*
                )
            })
        }
    )*};
}

/// The communicator of a reduction: its last INTEGER argument (`MPI_COMM_WORLD` for
/// `MPI_Reduce_local`, which has none).
///
/// # Safety
/// Each pointer is an INTEGER by reference.
unsafe fn reduction_comm(rest: &[*const c_int]) -> c_int {
    // SAFETY: the caller's contract.
    rest.last()
        .map_or(super::COMM_WORLD, |p| unsafe { p.read() })
}

reductions! {
    pmpi_reduce_ => PMPI_Reduce(count; root, comm);
    pmpi_allreduce_ => PMPI_Allreduce(count; comm);
    pmpi_reduce_scatter_block_ => PMPI_Reduce_scatter_block(recvcount; comm);
    pmpi_scan_ => PMPI_Scan(count; comm);
    pmpi_exscan_ => PMPI_Exscan(count; comm);
    pmpi_reduce_local_ => PMPI_Reduce_local(count;);
}

/// `MPI_REDUCE_SCATTER(sendbuf, recvbuf, recvcounts, datatype, op, comm, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_reduce_scatter_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: *const c_int,
    op: *const c_int,
    comm: *const c_int,
    ierr: *mut c_int,
) {
    // SAFETY: the Fortran arguments, by reference.
    guard("MPI_Reduce_scatter", ierr, || unsafe {
        let comm = comm.read();
        let (dt, op) =
            match handles::reduce_args("MPI_Reduce_scatter", comm, datatype.read(), op.read()) {
                Ok(p) => p,
                Err(rc) => return rc,
            };
        cabi::PMPI_Reduce_scatter(
            sentinel::buf(sendbuf),
            sentinel::buf(recvbuf) as *mut c_void,
            recvcounts,
            dt,
            op,
            comm,
        )
    })
}
