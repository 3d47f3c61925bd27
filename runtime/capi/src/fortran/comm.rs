//! Communicators, groups, names and attributes.
//!
//! Attribute values are `INTEGER(KIND=MPI_ADDRESS_KIND)` in Fortran and stored as the
//! value itself in the C layer's `void *`. The predefined attributes (`MPI_TAG_UB`, ...)
//! are pointers to ints in C and their int value in Fortran. Fortran copy and delete
//! callbacks have their own signature (all by reference, `ierror` last), so a keyval
//! created from Fortran gets C trampolines that call them ([`FKeyval`]).

use std::os::raw::{c_char, c_int, c_void};

use super::args::{Flag, In, Ptr};
use super::env::{from_fortran, string_result};
use super::{cabi, guard, SUCCESS};

fortran! {
    pmpi_comm_rank_ => PMPI_Comm_rank(comm: In, rank: Ptr<*mut c_int>);
    pmpi_comm_size_ => PMPI_Comm_size(comm: In, size: Ptr<*mut c_int>);
    pmpi_comm_dup_ => PMPI_Comm_dup(comm: In, newcomm: Ptr<*mut c_int>);
    pmpi_comm_split_ => PMPI_Comm_split(comm: In, color: In, key: In, newcomm: Ptr<*mut c_int>);
    pmpi_comm_split_type_ => PMPI_Comm_split_type(
        comm: In, split_type: In, key: In, info: In, newcomm: Ptr<*mut c_int>,
    );
    pmpi_comm_get_parent_ => PMPI_Comm_get_parent(parent: Ptr<*mut c_int>);
    pmpi_dims_create_ => PMPI_Dims_create(nnodes: In, ndims: In, dims: Ptr<*mut c_int>);
    pmpi_comm_create_ => PMPI_Comm_create(comm: In, group: In, newcomm: Ptr<*mut c_int>);
    pmpi_comm_create_group_ => PMPI_Comm_create_group(
        comm: In, group: In, tag: In, newcomm: Ptr<*mut c_int>,
    );
    pmpi_comm_free_ => PMPI_Comm_free(comm: Ptr<*mut c_int>);
    pmpi_comm_compare_ => PMPI_Comm_compare(comm1: In, comm2: In, result: Ptr<*mut c_int>);
    pmpi_comm_group_ => PMPI_Comm_group(comm: In, group: Ptr<*mut c_int>);
    pmpi_comm_test_inter_ => PMPI_Comm_test_inter(comm: In, flag: Flag);
    pmpi_comm_remote_size_ => PMPI_Comm_remote_size(comm: In, size: Ptr<*mut c_int>);
    pmpi_comm_free_keyval_ => PMPI_Comm_free_keyval(comm_keyval: Ptr<*mut c_int>);
    pmpi_comm_delete_attr_ => PMPI_Comm_delete_attr(comm: In, comm_keyval: In);
    pmpi_group_size_ => PMPI_Group_size(group: In, size: Ptr<*mut c_int>);
    pmpi_group_rank_ => PMPI_Group_rank(group: In, rank: Ptr<*mut c_int>);
    pmpi_group_incl_ => PMPI_Group_incl(
        group: In, n: In, ranks: Ptr<*const c_int>, newgroup: Ptr<*mut c_int>,
    );
    pmpi_group_excl_ => PMPI_Group_excl(
        group: In, n: In, ranks: Ptr<*const c_int>, newgroup: Ptr<*mut c_int>,
    );
    // ranges(3, n) in Fortran is C's int ranges[n][3]: same memory.
    pmpi_group_range_incl_ => PMPI_Group_range_incl(
        group: In, n: In, ranges: Ptr<*mut c_int>, newgroup: Ptr<*mut c_int>,
    );
    pmpi_group_translate_ranks_ => PMPI_Group_translate_ranks(
        group1: In, n: In, ranks1: Ptr<*const c_int>, group2: In, ranks2: Ptr<*mut c_int>,
    );
    pmpi_group_compare_ => PMPI_Group_compare(group1: In, group2: In, result: Ptr<*mut c_int>);
    pmpi_group_free_ => PMPI_Group_free(group: Ptr<*mut c_int>);
}

/// `MPI_COMM_SET_NAME(comm, comm_name, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_comm_set_name_(
    comm: *const c_int,
    name: *const c_char,
    ierr: *mut c_int,
    name_len: usize,
) {
    // SAFETY: an INTEGER and a CHARACTER argument with its hidden length.
    guard("MPI_Comm_set_name", ierr, || unsafe {
        let name = from_fortran(name, name_len);
        cabi::PMPI_Comm_set_name(comm.read(), name.as_ptr())
    })
}

/// `MPI_COMM_GET_NAME(comm, comm_name, resultlen, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_comm_get_name_(
    comm: *const c_int,
    name: *mut c_char,
    resultlen: *mut c_int,
    ierr: *mut c_int,
    name_len: usize,
) {
    // SAFETY: INTEGERs and a CHARACTER argument with its hidden length.
    guard("MPI_Comm_get_name", ierr, || unsafe {
        let comm = comm.read();
        string_result(128, name, name_len, resultlen, |b, n| {
            cabi::PMPI_Comm_get_name(comm, b, n)
        })
    })
}

/// The predefined attribute keys (`MPI_TAG_UB` .. `MPI_LASTUSEDCODE` in mpi.h), whose C
/// values are pointers to ints.
fn predefined_key(k: c_int) -> bool {
    (1..=7).contains(&k)
}

/// `MPI_COMM_SET_ATTR(comm, comm_keyval, attribute_val, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_comm_set_attr_(
    comm: *const c_int,
    keyval: *const c_int,
    value: *const isize,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs by reference; the value is stored, never dereferenced.
    guard("MPI_Comm_set_attr", ierr, || unsafe {
        cabi::PMPI_Comm_set_attr(comm.read(), keyval.read(), value.read() as *mut c_void)
    })
}

type GetAttr = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_int) -> c_int;

/// Read attribute `k` of `comm` as Fortran sees it (None: not set).
///
/// # Safety
/// `flag` is a LOGICAL by reference.
unsafe fn get_attr(
    get: GetAttr,
    comm: c_int,
    k: c_int,
    flag: *mut c_int,
) -> (c_int, Option<isize>) {
    let mut v: *mut c_void = std::ptr::null_mut();
    // SAFETY: `v` is a local `void *`, `flag` the caller's LOGICAL.
    let rc = unsafe { get(comm, k, &mut v as *mut *mut c_void as *mut c_void, flag) };
    // SAFETY: as above.
    let set = rc == SUCCESS && unsafe { flag.read() } != 0;
    if !set {
        return (rc, None);
    }
    let value = if predefined_key(k) && !v.is_null() {
        // SAFETY: the C layer's predefined attributes point to static ints.
        unsafe { (v as *const c_int).read() as isize }
    } else {
        v as isize
    };
    (rc, Some(value))
}

/// `MPI_COMM_GET_ATTR(comm, comm_keyval, attribute_val, flag, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_comm_get_attr_(
    comm: *const c_int,
    keyval: *const c_int,
    value: *mut isize,
    flag: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs, an INTEGER(KIND=MPI_ADDRESS_KIND) and a LOGICAL by reference.
    guard("MPI_Comm_get_attr", ierr, || unsafe {
        let (rc, v) = get_attr(cabi::PMPI_Comm_get_attr, comm.read(), keyval.read(), flag);
        if let Some(v) = v {
            value.write(v);
        }
        rc
    })
}

/// `MPI_ATTR_GET(comm, keyval, attribute_val, flag, ierror)`: MPI-1, default INTEGER.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_attr_get_(
    comm: *const c_int,
    keyval: *const c_int,
    value: *mut c_int,
    flag: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs and a LOGICAL by reference.
    guard("MPI_Attr_get", ierr, || unsafe {
        let (rc, v) = get_attr(cabi::PMPI_Attr_get, comm.read(), keyval.read(), flag);
        if let Some(v) = v {
            // MPI-1's INTEGER attribute: the low bits, as MPICH does.
            value.write(v as c_int);
        }
        rc
    })
}
