//! Nonblocking collectives, `MPI_ALLTOALLW` and intercommunicators.
//!
//! The nonblocking reductions map (datatype, op) through [`handles::reduce_args`] like
//! the blocking ones (see `coll.rs`). `MPI_ALLTOALLW`'s datatype arrays are passed as
//! they are: C knows Fortran's `MPI_COMPLEX` and `MPI_DOUBLE_COMPLEX` handles, the other
//! Fortran-only types (`MPI_LOGICAL`, `MPI_2REAL`, ...) are not accepted in them.

use std::os::raw::{c_int, c_void};

use super::args::{Buf, BufMut, Dt, FlagIn, In, Ptr};
use super::{cabi, guard, handles, sentinel};

fortran! {
    pmpi_alltoallw_ => PMPI_Alltoallw(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const c_int>,
        sendtypes: Ptr<*const c_int>, recvbuf: BufMut, recvcounts: Ptr<*const c_int>,
        rdispls: Ptr<*const c_int>, recvtypes: Ptr<*const c_int>, comm: In,
    );
    pmpi_ialltoallw_ => PMPI_Ialltoallw(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const c_int>,
        sendtypes: Ptr<*const c_int>, recvbuf: BufMut, recvcounts: Ptr<*const c_int>,
        rdispls: Ptr<*const c_int>, recvtypes: Ptr<*const c_int>, comm: In,
        request: Ptr<*mut c_int>,
    );
    pmpi_ibarrier_ => PMPI_Ibarrier(comm: In, request: Ptr<*mut c_int>);
    pmpi_ibcast_ => PMPI_Ibcast(
        buffer: BufMut, count: In, datatype: Dt, root: In, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_igather_ => PMPI_Igather(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In,
        recvtype: Dt, root: In, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_igatherv_ => PMPI_Igatherv(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut,
        recvcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, recvtype: Dt, root: In,
        comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_iscatter_ => PMPI_Iscatter(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In,
        recvtype: Dt, root: In, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_iscatterv_ => PMPI_Iscatterv(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, sendtype: Dt,
        recvbuf: BufMut, recvcount: In, recvtype: Dt, root: In, comm: In,
        request: Ptr<*mut c_int>,
    );
    pmpi_iallgather_ => PMPI_Iallgather(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In,
        recvtype: Dt, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_iallgatherv_ => PMPI_Iallgatherv(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut,
        recvcounts: Ptr<*const c_int>, displs: Ptr<*const c_int>, recvtype: Dt, comm: In,
        request: Ptr<*mut c_int>,
    );
    pmpi_ialltoall_ => PMPI_Ialltoall(
        sendbuf: Buf, sendcount: In, sendtype: Dt, recvbuf: BufMut, recvcount: In,
        recvtype: Dt, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_ialltoallv_ => PMPI_Ialltoallv(
        sendbuf: Buf, sendcounts: Ptr<*const c_int>, sdispls: Ptr<*const c_int>, sendtype: Dt,
        recvbuf: BufMut, recvcounts: Ptr<*const c_int>, rdispls: Ptr<*const c_int>,
        recvtype: Dt, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_intercomm_create_ => PMPI_Intercomm_create(
        local_comm: In, local_leader: In, peer_comm: In, remote_leader: In, tag: In,
        newintercomm: Ptr<*mut c_int>,
    );
    pmpi_intercomm_merge_ => PMPI_Intercomm_merge(
        intercomm: In, high: FlagIn, newintracomm: Ptr<*mut c_int>,
    );
    pmpi_comm_remote_group_ => PMPI_Comm_remote_group(comm: In, group: Ptr<*mut c_int>);
}

/// The nonblocking reductions: `(sendbuf, recvbuf, <count>, datatype, op, <rest>,
/// request)`, `<rest>` the INTEGERs between the op and the request (root, comm).
macro_rules! ireductions {
    ($($pname:ident => $cname:ident($count:ident: $ck:ty; $($rest:ident),*);)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $pname(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            $count: *const c_int,
            datatype: *const c_int,
            op: *const c_int,
            $($rest: *const c_int,)*
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
                    <$ck>::count($count),
                    dt,
                    op,
                    $($rest.read(),)*
                    request,
                )
            })
        }
    )*};
}

/// How a reduction's count argument reaches C: by value, or as the array it is.
trait CountArg<T> {
    /// # Safety
    /// `p` points at the Fortran argument.
    unsafe fn count(p: *const c_int) -> T;
}
struct Value;
impl CountArg<c_int> for Value {
    unsafe fn count(p: *const c_int) -> c_int {
        // SAFETY: the caller's contract.
        unsafe { p.read() }
    }
}
struct Array;
impl CountArg<*const c_int> for Array {
    unsafe fn count(p: *const c_int) -> *const c_int {
        p
    }
}

ireductions! {
    pmpi_ireduce_ => PMPI_Ireduce(count: Value; root, comm);
    pmpi_iallreduce_ => PMPI_Iallreduce(count: Value; comm);
    pmpi_iscan_ => PMPI_Iscan(count: Value; comm);
    pmpi_iexscan_ => PMPI_Iexscan(count: Value; comm);
    pmpi_ireduce_scatter_block_ => PMPI_Ireduce_scatter_block(recvcount: Value; comm);
    pmpi_ireduce_scatter_ => PMPI_Ireduce_scatter(recvcounts: Array; comm);
}
