//! Fortran twins of the MPI-3 request, Info, attribute, error-handler and datatype
//! functions of issue 13 (persistent requests, matched probes, `MPI_Info`, ...).
//!
//! Functions taking a callback are in `callbacks.rs` and `keyval.rs`.

use std::os::raw::{c_char, c_int, c_void};

use super::args::{
    status_c2f, status_f2c, Aint, Buf, BufMut, Dt, FArg, Flag, In, Ptr, Status, StatusIn,
};
use super::cabi::{self, CStatus};
use super::env::{from_fortran, string_result, to_fortran};
use super::guard;

/// `INTEGER status(MPI_STATUS_SIZE)`, input and output (the status setters).
pub struct StatusInOut;
impl FArg for StatusInOut {
    type F = *mut c_int;
    type T = CStatus;
    type C = *mut CStatus;
    unsafe fn pre(f: *mut c_int) -> CStatus {
        // SAFETY: an INTEGER(MPI_STATUS_SIZE) array.
        unsafe { status_f2c(f) }
    }
    fn c(t: &mut CStatus) -> *mut CStatus {
        t
    }
    unsafe fn post(f: *mut c_int, t: &CStatus) {
        // SAFETY: as in `pre`.
        unsafe { status_c2f(t, f) };
    }
}

fortran! {
    pmpi_send_init_ => PMPI_Send_init(
        buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_ssend_init_ => PMPI_Ssend_init(
        buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_rsend_init_ => PMPI_Rsend_init(
        buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_bsend_init_ => PMPI_Bsend_init(
        buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_recv_init_ => PMPI_Recv_init(
        buf: BufMut, count: In, datatype: Dt, source: In, tag: In, comm: In,
        request: Ptr<*mut c_int>,
    );
    pmpi_start_ => PMPI_Start(request: Ptr<*mut c_int>);
    pmpi_startall_ => PMPI_Startall(count: In, requests: Ptr<*mut c_int>);
    pmpi_request_get_status_ => PMPI_Request_get_status(request: In, flag: Flag, status: Status);
    pmpi_ibsend_ => PMPI_Ibsend(
        buf: Buf, count: In, datatype: Dt, dest: In, tag: In, comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_isendrecv_ => PMPI_Isendrecv(
        sendbuf: Buf, sendcount: In, sendtype: Dt, dest: In, sendtag: In,
        recvbuf: BufMut, recvcount: In, recvtype: Dt, source: In, recvtag: In,
        comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_isendrecv_replace_ => PMPI_Isendrecv_replace(
        buf: BufMut, count: In, datatype: Dt, dest: In, sendtag: In, source: In, recvtag: In,
        comm: In, request: Ptr<*mut c_int>,
    );
    pmpi_mprobe_ => PMPI_Mprobe(
        source: In, tag: In, comm: In, message: Ptr<*mut c_int>, status: Status,
    );
    pmpi_improbe_ => PMPI_Improbe(
        source: In, tag: In, comm: In, flag: Flag, message: Ptr<*mut c_int>, status: Status,
    );
    pmpi_mrecv_ => PMPI_Mrecv(
        buf: BufMut, count: In, datatype: Dt, message: Ptr<*mut c_int>, status: Status,
    );
    pmpi_imrecv_ => PMPI_Imrecv(
        buf: BufMut, count: In, datatype: Dt, message: Ptr<*mut c_int>, request: Ptr<*mut c_int>,
    );
    pmpi_grequest_complete_ => PMPI_Grequest_complete(request: In);
    pmpi_status_set_elements_ => PMPI_Status_set_elements(status: StatusInOut, datatype: Dt, count: In);
    pmpi_status_set_cancelled_ => PMPI_Status_set_cancelled(status: StatusInOut, flag: In);
    pmpi_info_create_ => PMPI_Info_create(info: Ptr<*mut c_int>);
    pmpi_info_free_ => PMPI_Info_free(info: Ptr<*mut c_int>);
    pmpi_info_dup_ => PMPI_Info_dup(info: In, newinfo: Ptr<*mut c_int>);
    pmpi_info_get_nkeys_ => PMPI_Info_get_nkeys(info: In, nkeys: Ptr<*mut c_int>);
    pmpi_comm_set_info_ => PMPI_Comm_set_info(comm: In, info: In);
    pmpi_comm_get_info_ => PMPI_Comm_get_info(comm: In, info: Ptr<*mut c_int>);
    pmpi_comm_dup_with_info_ => PMPI_Comm_dup_with_info(comm: In, info: In, newcomm: Ptr<*mut c_int>);
    pmpi_keyval_free_ => PMPI_Keyval_free(keyval: Ptr<*mut c_int>);
    pmpi_attr_delete_ => PMPI_Attr_delete(comm: In, keyval: In);
    pmpi_type_free_keyval_ => PMPI_Type_free_keyval(keyval: Ptr<*mut c_int>);
    pmpi_type_delete_attr_ => PMPI_Type_delete_attr(datatype: Dt, keyval: In);
    pmpi_get_elements_ => PMPI_Get_elements(status: StatusIn, datatype: Dt, count: Ptr<*mut c_int>);
    pmpi_get_elements_x_ => PMPI_Get_elements_x(status: StatusIn, datatype: Dt, count: Ptr<*mut i64>);
    pmpi_type_size_x_ => PMPI_Type_size_x(datatype: Dt, size: Ptr<*mut i64>);
    pmpi_type_get_extent_x_ => PMPI_Type_get_extent_x(datatype: Dt, lb: Ptr<*mut i64>, extent: Ptr<*mut i64>);
    pmpi_type_get_true_extent_x_ => PMPI_Type_get_true_extent_x(
        datatype: Dt, lb: Ptr<*mut i64>, extent: Ptr<*mut i64>,
    );
    pmpi_type_hvector_ => PMPI_Type_hvector(
        count: In, blocklength: In, stride: Aint, oldtype: Dt, newtype: Ptr<*mut c_int>,
    );
    pmpi_type_create_hindexed_block_ => PMPI_Type_create_hindexed_block(
        count: In, blocklength: In, displacements: Ptr<*const isize>, oldtype: Dt,
        newtype: Ptr<*mut c_int>,
    );
    pmpi_type_create_subarray_ => PMPI_Type_create_subarray(
        ndims: In, sizes: Ptr<*const c_int>, subsizes: Ptr<*const c_int>,
        starts: Ptr<*const c_int>, order: In, oldtype: Dt, newtype: Ptr<*mut c_int>,
    );
    pmpi_errhandler_set_ => PMPI_Errhandler_set(comm: In, errhandler: In);
    pmpi_errhandler_get_ => PMPI_Errhandler_get(comm: In, errhandler: Ptr<*mut c_int>);
    pmpi_comm_call_errhandler_ => PMPI_Comm_call_errhandler(comm: In, errorcode: In);
    pmpi_add_error_class_ => PMPI_Add_error_class(errorclass: Ptr<*mut c_int>);
    pmpi_add_error_code_ => PMPI_Add_error_code(errorclass: In, errorcode: Ptr<*mut c_int>);
    pmpi_group_union_ => PMPI_Group_union(group1: In, group2: In, newgroup: Ptr<*mut c_int>);
    pmpi_group_intersection_ => PMPI_Group_intersection(group1: In, group2: In, newgroup: Ptr<*mut c_int>);
    pmpi_group_difference_ => PMPI_Group_difference(group1: In, group2: In, newgroup: Ptr<*mut c_int>);
    pmpi_group_range_excl_ => PMPI_Group_range_excl(
        group: In, n: In, ranges: Ptr<*mut c_int>, newgroup: Ptr<*mut c_int>,
    );
}

/// `MPI_STATUS_SET_ELEMENTS_X(status, datatype, count, ierror)`: `count` is
/// `INTEGER(KIND=MPI_COUNT_KIND)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_status_set_elements_x_(
    status: *mut c_int,
    datatype: *const c_int,
    count: *const i64,
    ierr: *mut c_int,
) {
    // SAFETY: a status array, an INTEGER and an INTEGER(KIND=MPI_COUNT_KIND) by reference.
    guard("MPI_Status_set_elements_x", ierr, || unsafe {
        let mut s = status_f2c(status);
        let rc = cabi::PMPI_Status_set_elements_x(&mut s, Dt::pre(datatype), count.read());
        status_c2f(&s, status);
        rc
    })
}

/// `MPI_TYPE_EXTENT`, `MPI_TYPE_LB`, `MPI_TYPE_UB` (MPI-1): default INTEGER results.
macro_rules! mpi1_query {
    ($($f:ident => $c:ident, $name:literal;)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $f(datatype: *const c_int, out: *mut c_int, ierr: *mut c_int) {
            // SAFETY: INTEGERs by reference.
            guard($name, ierr, || unsafe {
                let mut v: isize = 0;
                let rc = cabi::$c(Dt::pre(datatype), &mut v);
                out.write(v as c_int);
                rc
            })
        }
    )*};
}
mpi1_query! {
    pmpi_type_extent_ => PMPI_Type_extent, "MPI_Type_extent";
    pmpi_type_lb_ => PMPI_Type_lb, "MPI_Type_lb";
    pmpi_type_ub_ => PMPI_Type_ub, "MPI_Type_ub";
}

/// `MPI_TYPE_HINDEXED(count, blocklengths, displacements, oldtype, newtype, ierror)`
/// (MPI-1: default INTEGER displacements).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_type_hindexed_(
    count: *const c_int,
    blens: *const c_int,
    disps: *const c_int,
    oldtype: *const c_int,
    newtype: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs and INTEGER arrays of `count` elements by reference.
    guard("MPI_Type_hindexed", ierr, || unsafe {
        let n = count.read();
        let d: Vec<isize> = (0..n.max(0) as usize)
            .map(|i| disps.add(i).read() as isize)
            .collect();
        cabi::PMPI_Type_create_hindexed(n, blens, d.as_ptr(), Dt::pre(oldtype), newtype)
    })
}

/// `MPI_TYPE_STRUCT(count, blocklengths, displacements, types, newtype, ierror)` (MPI-1:
/// default INTEGER displacements).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_type_struct_(
    count: *const c_int,
    blens: *const c_int,
    disps: *const c_int,
    types: *const c_int,
    newtype: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs and INTEGER arrays of `count` elements by reference.
    guard("MPI_Type_struct", ierr, || unsafe {
        let n = count.read().max(0) as usize;
        let d: Vec<isize> = (0..n).map(|i| disps.add(i).read() as isize).collect();
        let t: Vec<c_int> = (0..n).map(|i| Dt::pre(types.add(i))).collect();
        cabi::PMPI_Type_create_struct(n as c_int, blens, d.as_ptr(), t.as_ptr(), newtype)
    })
}

/// `MPI_ATTR_PUT(comm, keyval, attribute_val, ierror)` (MPI-1: default INTEGER value).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_attr_put_(
    comm: *const c_int,
    keyval: *const c_int,
    value: *const c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs by reference; the value is stored, never dereferenced.
    guard("MPI_Attr_put", ierr, || unsafe {
        cabi::PMPI_Attr_put(
            comm.read(),
            keyval.read(),
            value.read() as isize as *mut c_void,
        )
    })
}

/// `MPI_TYPE_SET_ATTR(datatype, type_keyval, attribute_val, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_type_set_attr_(
    datatype: *const c_int,
    keyval: *const c_int,
    value: *const isize,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs by reference; the value is stored, never dereferenced.
    guard("MPI_Type_set_attr", ierr, || unsafe {
        cabi::PMPI_Type_set_attr(
            Dt::pre(datatype),
            keyval.read(),
            value.read() as *mut c_void,
        )
    })
}

/// `MPI_TYPE_GET_ATTR(datatype, type_keyval, attribute_val, flag, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_type_get_attr_(
    datatype: *const c_int,
    keyval: *const c_int,
    value: *mut isize,
    flag: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs, an INTEGER(KIND=MPI_ADDRESS_KIND) and a LOGICAL by reference.
    guard("MPI_Type_get_attr", ierr, || unsafe {
        let mut v: *mut c_void = std::ptr::null_mut();
        let rc = cabi::PMPI_Type_get_attr(
            Dt::pre(datatype),
            keyval.read(),
            &mut v as *mut *mut c_void as *mut c_void,
            flag,
        );
        if rc == 0 && flag.read() != 0 {
            value.write(v as isize);
        }
        rc
    })
}

/// `MPI_INFO_SET(info, key, value, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_info_set_(
    info: *const c_int,
    key: *const c_char,
    value: *const c_char,
    ierr: *mut c_int,
    key_len: usize,
    value_len: usize,
) {
    // SAFETY: an INTEGER and two CHARACTER arguments by reference.
    guard("MPI_Info_set", ierr, || unsafe {
        let k = from_fortran(key, key_len);
        let v = from_fortran(value, value_len);
        cabi::PMPI_Info_set(info.read(), k.as_ptr(), v.as_ptr())
    })
}

/// `MPI_INFO_DELETE(info, key, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_info_delete_(
    info: *const c_int,
    key: *const c_char,
    ierr: *mut c_int,
    key_len: usize,
) {
    // SAFETY: an INTEGER and a CHARACTER argument by reference.
    guard("MPI_Info_delete", ierr, || unsafe {
        let k = from_fortran(key, key_len);
        cabi::PMPI_Info_delete(info.read(), k.as_ptr())
    })
}

/// `MPI_INFO_GET(info, key, valuelen, value, flag, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_info_get_(
    info: *const c_int,
    key: *const c_char,
    valuelen: *const c_int,
    value: *mut c_char,
    flag: *mut c_int,
    ierr: *mut c_int,
    key_len: usize,
    value_len: usize,
) {
    // SAFETY: INTEGERs, CHARACTER arguments and a LOGICAL by reference.
    guard("MPI_Info_get", ierr, || unsafe {
        let k = from_fortran(key, key_len);
        let cap = (valuelen.read().max(0) as usize).min(value_len);
        let mut buf = vec![0u8; cap + 1];
        let rc = cabi::PMPI_Info_get(
            info.read(),
            k.as_ptr(),
            cap as c_int,
            buf.as_mut_ptr() as *mut c_char,
            flag,
        );
        if rc == 0 && flag.read() != 0 {
            let n = buf.iter().position(|&b| b == 0).unwrap_or(cap);
            to_fortran(&buf[..n], value, value_len);
        }
        rc
    })
}

/// `MPI_INFO_GET_VALUELEN(info, key, valuelen, flag, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_info_get_valuelen_(
    info: *const c_int,
    key: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
    ierr: *mut c_int,
    key_len: usize,
) {
    // SAFETY: INTEGERs, a CHARACTER argument and a LOGICAL by reference.
    guard("MPI_Info_get_valuelen", ierr, || unsafe {
        let k = from_fortran(key, key_len);
        cabi::PMPI_Info_get_valuelen(info.read(), k.as_ptr(), valuelen, flag)
    })
}

/// `MPI_INFO_GET_STRING(info, key, buflen, value, flag, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_info_get_string_(
    info: *const c_int,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
    ierr: *mut c_int,
    key_len: usize,
    value_len: usize,
) {
    // SAFETY: INTEGERs, CHARACTER arguments and a LOGICAL by reference.
    guard("MPI_Info_get_string", ierr, || unsafe {
        let k = from_fortran(key, key_len);
        let cap = buflen.read().max(0) as usize;
        // Fortran's buflen counts characters (no terminator): room for `cap` of them
        // and C's NUL; a zero buflen only asks for the length, `value` is left alone.
        let mut buf = vec![0u8; cap + 1];
        let mut n = (cap + 1) as c_int;
        let rc = cabi::PMPI_Info_get_string(
            info.read(),
            k.as_ptr(),
            &mut n,
            buf.as_mut_ptr() as *mut c_char,
            flag,
        );
        if rc == 0 && flag.read() != 0 {
            if cap > 0 {
                let end = buf.iter().position(|&b| b == 0).unwrap_or(cap).min(cap);
                to_fortran(&buf[..end], value, value_len);
            }
            // Fortran strings have no terminator: the value's length.
            buflen.write(n - 1);
        }
        rc
    })
}

/// `MPI_INFO_GET_NTHKEY(info, n, key, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_info_get_nthkey_(
    info: *const c_int,
    n: *const c_int,
    key: *mut c_char,
    ierr: *mut c_int,
    key_len: usize,
) {
    // SAFETY: INTEGERs and a CHARACTER argument by reference.
    guard("MPI_Info_get_nthkey", ierr, || unsafe {
        let mut buf = vec![0u8; 256 + 1];
        let rc = cabi::PMPI_Info_get_nthkey(info.read(), n.read(), buf.as_mut_ptr() as *mut c_char);
        if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            to_fortran(&buf[..end], key, key_len);
        }
        rc
    })
}

/// `MPI_TYPE_SET_NAME(datatype, type_name, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_type_set_name_(
    datatype: *const c_int,
    name: *const c_char,
    ierr: *mut c_int,
    name_len: usize,
) {
    // SAFETY: an INTEGER and a CHARACTER argument by reference.
    guard("MPI_Type_set_name", ierr, || unsafe {
        let n = from_fortran(name, name_len);
        cabi::PMPI_Type_set_name(Dt::pre(datatype), n.as_ptr())
    })
}

/// `MPI_TYPE_GET_NAME(datatype, type_name, resultlen, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_type_get_name_(
    datatype: *const c_int,
    name: *mut c_char,
    resultlen: *mut c_int,
    ierr: *mut c_int,
    name_len: usize,
) {
    // SAFETY: INTEGERs and a CHARACTER argument by reference.
    guard("MPI_Type_get_name", ierr, || unsafe {
        let dt = Dt::pre(datatype);
        string_result(128, name, name_len, resultlen, |b, n| {
            cabi::PMPI_Type_get_name(dt, b, n)
        })
    })
}

/// `MPI_ADD_ERROR_STRING(errorcode, string, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_add_error_string_(
    code: *const c_int,
    text: *const c_char,
    ierr: *mut c_int,
    text_len: usize,
) {
    // SAFETY: an INTEGER and a CHARACTER argument by reference.
    guard("MPI_Add_error_string", ierr, || unsafe {
        let t = from_fortran(text, text_len);
        cabi::PMPI_Add_error_string(code.read(), t.as_ptr())
    })
}
