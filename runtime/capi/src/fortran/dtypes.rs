//! Fortran twins of the datatype functions of mpi13b: `MPI_TYPE_GET_CONTENTS`,
//! `MPI_TYPE_MATCH_SIZE`, `MPI_PACK_EXTERNAL(_SIZE)`, `MPI_UNPACK_EXTERNAL` and
//! `MPI_TYPE_CREATE_DARRAY`.

use std::os::raw::{c_char, c_int, c_void};

use super::args::{Aint, Buf, BufMut, Dt, FArg, In, Ptr};
use super::env::from_fortran;
use super::{cabi, guard, handles};

fortran! {
    pmpi_type_create_f90_integer_ => PMPI_Type_create_f90_integer(r: In, newtype: Ptr<*mut c_int>);
    pmpi_type_create_f90_real_ => PMPI_Type_create_f90_real(p: In, r: In, newtype: Ptr<*mut c_int>);
    pmpi_type_create_f90_complex_ => PMPI_Type_create_f90_complex(
        p: In, r: In, newtype: Ptr<*mut c_int>,
    );
    pmpi_type_match_size_ => PMPI_Type_match_size(typeclass: In, size: In, datatype: Ptr<*mut c_int>);
    pmpi_type_create_darray_ => PMPI_Type_create_darray(
        size: In, rank: In, ndims: In, gsizes: Ptr<*const c_int>, distribs: Ptr<*const c_int>,
        dargs: Ptr<*const c_int>, psizes: Ptr<*const c_int>, order: In, oldtype: Dt,
        newtype: Ptr<*mut c_int>,
    );
}

/// `MPI_TYPE_GET_CONTENTS(datatype, max_integers, max_addresses, max_datatypes,
/// array_of_integers, array_of_addresses, array_of_datatypes, ierror)`: the datatypes
/// come back as Fortran handles.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_type_get_contents_(
    datatype: *const c_int,
    max_integers: *const c_int,
    max_addresses: *const c_int,
    max_datatypes: *const c_int,
    integers: *mut c_int,
    addresses: *mut isize,
    datatypes: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs by reference and arrays of the given sizes.
    guard("MPI_Type_get_contents", ierr, || unsafe {
        let nd = max_datatypes.read();
        let rc = cabi::PMPI_Type_get_contents(
            Dt::pre(datatype),
            max_integers.read(),
            max_addresses.read(),
            nd,
            integers,
            addresses,
            datatypes,
        );
        if rc == 0 && !datatypes.is_null() {
            let mut n = 0;
            let mut na = 0;
            let mut ni = 0;
            let mut comb = 0;
            cabi::PMPI_Type_get_envelope(Dt::pre(datatype), &mut ni, &mut na, &mut n, &mut comb);
            for i in 0..n.clamp(0, nd.max(0)) as usize {
                let p = datatypes.add(i);
                p.write(handles::dt_c2f(p.read()));
            }
        }
        rc
    })
}

/// `MPI_PACK_EXTERNAL_SIZE(datarep, incount, datatype, size, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_pack_external_size_(
    datarep: *const c_char,
    incount: *const c_int,
    datatype: *const c_int,
    size: *mut isize,
    ierr: *mut c_int,
    datarep_len: usize,
) {
    // SAFETY: a CHARACTER argument, INTEGERs by reference.
    guard("MPI_Pack_external_size", ierr, || unsafe {
        let d = from_fortran(datarep, datarep_len);
        cabi::PMPI_Pack_external_size(d.as_ptr(), incount.read(), Dt::pre(datatype), size)
    })
}

/// `MPI_PACK_EXTERNAL(datarep, inbuf, incount, datatype, outbuf, outsize, position,
/// ierror)`.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_pack_external_(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: *const c_int,
    datatype: *const c_int,
    outbuf: *mut c_void,
    outsize: *const isize,
    position: *mut isize,
    ierr: *mut c_int,
    datarep_len: usize,
) {
    // SAFETY: a CHARACTER argument, buffers and INTEGERs by reference.
    guard("MPI_Pack_external", ierr, || unsafe {
        let d = from_fortran(datarep, datarep_len);
        cabi::PMPI_Pack_external(
            d.as_ptr(),
            Buf::pre(inbuf),
            incount.read(),
            Dt::pre(datatype),
            BufMut::pre(outbuf),
            Aint::pre(outsize),
            position,
        )
    })
}

/// `MPI_UNPACK_EXTERNAL(datarep, inbuf, insize, position, outbuf, outcount, datatype,
/// ierror)`.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_unpack_external_(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: *const isize,
    position: *mut isize,
    outbuf: *mut c_void,
    outcount: *const c_int,
    datatype: *const c_int,
    ierr: *mut c_int,
    datarep_len: usize,
) {
    // SAFETY: as in pmpi_pack_external_.
    guard("MPI_Unpack_external", ierr, || unsafe {
        let d = from_fortran(datarep, datarep_len);
        cabi::PMPI_Unpack_external(
            d.as_ptr(),
            Buf::pre(inbuf),
            Aint::pre(insize),
            position,
            BufMut::pre(outbuf),
            outcount.read(),
            Dt::pre(datatype),
        )
    })
}

/// `MPI_SIZEOF(x, size, ierror)` for one type and kind (the `mpi` module's generic
/// interface picks it): the size is the kind's, whatever `x` holds.
macro_rules! sizeof_fns {
    ($($name:ident = $size:expr;)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(_x: *const c_void, size: *mut c_int, ierr: *mut c_int) {
            // SAFETY: two INTEGERs by reference.
            guard("MPI_Sizeof", ierr, || unsafe {
                size.write($size);
                0
            })
        }
    )*};
}
sizeof_fns! {
    mpi_sizeof_i1_ = 1;
    mpi_sizeof_i2_ = 2;
    mpi_sizeof_i4_ = 4;
    mpi_sizeof_i8_ = 8;
    mpi_sizeof_r4_ = 4;
    mpi_sizeof_r8_ = 8;
    mpi_sizeof_c4_ = 8;
    mpi_sizeof_c8_ = 16;
    mpi_sizeof_l4_ = 4;
}

/// `MPI_SIZEOF` of a CHARACTER: its length (gfortran's hidden length argument).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_sizeof_ch_(
    _x: *const c_void,
    size: *mut c_int,
    ierr: *mut c_int,
    len: usize,
) {
    // SAFETY: two INTEGERs by reference.
    guard("MPI_Sizeof", ierr, || unsafe {
        size.write(c_int::try_from(len).unwrap_or(c_int::MAX));
        0
    })
}
