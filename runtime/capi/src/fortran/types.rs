//! Datatypes and packing.

use std::os::raw::c_int;

use super::args::{Aint, Buf, BufMut, Dt, FArg, In, Ptr};
use super::{cabi, guard, handles};

/// A datatype handle the C call reads and may rewrite (`MPI_Type_commit`,
/// `MPI_Type_free`): written back only when it changed, because a program may pass a
/// predefined type's PARAMETER, which gfortran keeps in read-only memory.
pub struct DtInOut;
impl FArg for DtInOut {
    type F = *mut c_int;
    type T = (c_int, c_int);
    type C = *mut c_int;
    unsafe fn pre(f: *mut c_int) -> (c_int, c_int) {
        // SAFETY: an INTEGER passed by reference.
        let h = unsafe { f.read() };
        (h, handles::dt_f2c(h))
    }
    fn c(t: &mut (c_int, c_int)) -> *mut c_int {
        &mut t.1
    }
    unsafe fn post(f: *mut c_int, t: &(c_int, c_int)) {
        let h = handles::dt_c2f(t.1);
        if h != t.0 {
            // SAFETY: an INTEGER passed by reference, and a variable since the C call
            // changed it (predefined types are never changed).
            unsafe { f.write(h) };
        }
    }
}

fortran! {
    pmpi_type_contiguous_ => PMPI_Type_contiguous(
        count: In, oldtype: Dt, newtype: Ptr<*mut c_int>,
    );
    pmpi_type_vector_ => PMPI_Type_vector(
        count: In, blocklength: In, stride: In, oldtype: Dt, newtype: Ptr<*mut c_int>,
    );
    pmpi_type_create_hvector_ => PMPI_Type_create_hvector(
        count: In, blocklength: In, stride: Aint, oldtype: Dt, newtype: Ptr<*mut c_int>,
    );
    pmpi_type_indexed_ => PMPI_Type_indexed(
        count: In, blocklengths: Ptr<*const c_int>, displacements: Ptr<*const c_int>,
        oldtype: Dt, newtype: Ptr<*mut c_int>,
    );
    pmpi_type_create_hindexed_ => PMPI_Type_create_hindexed(
        count: In, blocklengths: Ptr<*const c_int>, displacements: Ptr<*const isize>,
        oldtype: Dt, newtype: Ptr<*mut c_int>,
    );
    pmpi_type_create_indexed_block_ => PMPI_Type_create_indexed_block(
        count: In, blocklength: In, displacements: Ptr<*const c_int>, oldtype: Dt,
        newtype: Ptr<*mut c_int>,
    );
    pmpi_type_create_resized_ => PMPI_Type_create_resized(
        oldtype: Dt, lb: Aint, extent: Aint, newtype: Ptr<*mut c_int>,
    );
    pmpi_type_dup_ => PMPI_Type_dup(oldtype: Dt, newtype: Ptr<*mut c_int>);
    pmpi_type_commit_ => PMPI_Type_commit(datatype: DtInOut);
    pmpi_type_free_ => PMPI_Type_free(datatype: DtInOut);
    pmpi_type_size_ => PMPI_Type_size(datatype: Dt, size: Ptr<*mut c_int>);
    pmpi_type_get_extent_ => PMPI_Type_get_extent(
        datatype: Dt, lb: Ptr<*mut isize>, extent: Ptr<*mut isize>,
    );
    pmpi_type_get_true_extent_ => PMPI_Type_get_true_extent(
        datatype: Dt, true_lb: Ptr<*mut isize>, true_extent: Ptr<*mut isize>,
    );
    pmpi_type_get_envelope_ => PMPI_Type_get_envelope(
        datatype: Dt, num_integers: Ptr<*mut c_int>, num_addresses: Ptr<*mut c_int>,
        num_datatypes: Ptr<*mut c_int>, combiner: Ptr<*mut c_int>,
    );
    pmpi_get_address_ => PMPI_Get_address(location: Buf, address: Ptr<*mut isize>);
    pmpi_pack_ => PMPI_Pack(
        inbuf: Buf, incount: In, datatype: Dt, outbuf: BufMut, outsize: In,
        position: Ptr<*mut c_int>, comm: In,
    );
    pmpi_unpack_ => PMPI_Unpack(
        inbuf: Buf, insize: In, position: Ptr<*mut c_int>, outbuf: BufMut, outcount: In,
        datatype: Dt, comm: In,
    );
    pmpi_pack_size_ => PMPI_Pack_size(
        incount: In, datatype: Dt, comm: In, size: Ptr<*mut c_int>,
    );
}

/// `MPI_TYPE_CREATE_STRUCT(count, array_of_blocklengths, array_of_displacements,
/// array_of_types, newtype, ierror)`: the member types may be Fortran-only datatypes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_type_create_struct_(
    count: *const c_int,
    blocklengths: *const c_int,
    displacements: *const isize,
    types: *const c_int,
    newtype: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs and arrays of `count` elements, by reference.
    guard("MPI_Type_create_struct", ierr, || unsafe {
        let n = count.read();
        let ctypes: Vec<c_int> = if types.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(types, usize::try_from(n).unwrap_or(0))
                .iter()
                .map(|&t| handles::dt_f2c(t))
                .collect()
        };
        let ctypes_ptr = if types.is_null() {
            types
        } else {
            ctypes.as_ptr()
        };
        cabi::PMPI_Type_create_struct(n, blocklengths, displacements, ctypes_ptr, newtype)
    })
}
