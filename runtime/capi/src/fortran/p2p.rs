//! Point to point: sends, receives, probes, statuses.

use std::os::raw::{c_int, c_void};

use super::args::{Buf, BufMut, Dt, Flag, In, Ptr, Status, StatusIn};
use super::{cabi, guard};

fortran! {
    pmpi_send_ => PMPI_Send(buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In);
    pmpi_ssend_ => PMPI_Ssend(buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In);
    pmpi_rsend_ => PMPI_Rsend(buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In);
    pmpi_bsend_ => PMPI_Bsend(buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In);
    pmpi_buffer_attach_ => PMPI_Buffer_attach(buffer: BufMut, size: In);
    pmpi_recv_ => PMPI_Recv(
        buf: BufMut, count: In, datatype: Dt, source: In, tag: In, comm: In, status: Status,
    );
    pmpi_isend_ => PMPI_Isend(
        buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In,
        request: Ptr<*mut c_int>,
    );
    pmpi_issend_ => PMPI_Issend(
        buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In,
        request: Ptr<*mut c_int>,
    );
    pmpi_irsend_ => PMPI_Irsend(
        buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In,
        request: Ptr<*mut c_int>,
    );
    pmpi_irecv_ => PMPI_Irecv(
        buf: BufMut, count: In, datatype: Dt, source: In, tag: In, comm: In,
        request: Ptr<*mut c_int>,
    );
    pmpi_sendrecv_ => PMPI_Sendrecv(
        sendbuf: Buf, sendcount: In, sendtype: Dt, dest: In, sendtag: In,
        recvbuf: BufMut, recvcount: In, recvtype: Dt, source: In, recvtag: In,
        comm: In, status: Status,
    );
    pmpi_sendrecv_replace_ => PMPI_Sendrecv_replace(
        buf: BufMut, count: In, datatype: Dt, dest: In, sendtag: In, source: In, recvtag: In,
        comm: In, status: Status,
    );
    pmpi_probe_ => PMPI_Probe(source: In, tag: In, comm: In, status: Status);
    pmpi_iprobe_ => PMPI_Iprobe(source: In, tag: In, comm: In, flag: Flag, status: Status);
    pmpi_get_count_ => PMPI_Get_count(status: StatusIn, datatype: Dt, count: Ptr<*mut c_int>);
    pmpi_test_cancelled_ => PMPI_Test_cancelled(status: StatusIn, flag: Flag);
}

/// `MPI_BUFFER_DETACH(buffer_addr, size, ierror)`. C stores the buffer's address in
/// `*buffer_addr`; in Fortran `buffer_addr` is the buffer itself (a choice argument), so
/// the address goes to a local instead, as MPICH does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_buffer_detach_(
    _buffer_addr: *mut c_void,
    size: *mut c_int,
    ierr: *mut c_int,
) {
    let mut addr: *mut c_void = std::ptr::null_mut();
    // SAFETY: `size` is an INTEGER by reference; `addr` a local.
    guard("MPI_Buffer_detach", ierr, || unsafe {
        cabi::PMPI_Buffer_detach(&mut addr as *mut *mut c_void as *mut c_void, size)
    })
}
