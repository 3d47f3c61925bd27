//! `MPI_Pack`, `MPI_Unpack`, `MPI_Pack_size`: the datatype engine's pack and unpack on
//! user buffers (the packed format is the bytes of the type map, in order, as sent).

use std::os::raw::{c_int, c_void};
use strobe_runtime::calls::Call;

use crate::comm::comm_of;
use crate::consts::*;
use crate::datatype::comm_type;
use crate::error::{entry, fail};
use crate::util::{count, put};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Pack(
    inbuf: *const c_void,
    incount: c_int,
    dt: MpiDatatype,
    outbuf: *mut c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Pack, comm, || {
        comm_of(comm)?;
        let k = count(incount, "incount")?;
        let cap = count(outsize, "outsize")?;
        let ty = comm_type(dt)?;
        if position.is_null() {
            fail!(class::ARG, "position is NULL");
        }
        // SAFETY: non-null pointer to the caller's position.
        let pos = count(unsafe { *position }, "position")?;
        let need = k * ty.size;
        if pos + need > cap {
            fail!(
                class::ARG,
                "packing {need} bytes at position {pos} overflows the {cap}-byte buffer"
            );
        }
        if need > 0 && (inbuf.is_null() || outbuf.is_null()) {
            fail!(class::BUFFER, "a buffer is NULL");
        }
        // SAFETY: MPI's contract: inbuf holds k elements; outbuf has `cap` bytes (checked).
        unsafe {
            let p = ty.pack(inbuf as *const u8, k);
            std::ptr::copy_nonoverlapping(p.as_ptr(), (outbuf as *mut u8).add(pos), need);
        }
        // SAFETY: `position` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(position, (pos + need) as c_int, "position") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Unpack(
    inbuf: *const c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut c_void,
    outcount: c_int,
    dt: MpiDatatype,
    comm: MpiComm,
) -> c_int {
    entry(Call::Unpack, comm, || {
        comm_of(comm)?;
        let cap = count(insize, "insize")?;
        let k = count(outcount, "outcount")?;
        let ty = comm_type(dt)?;
        if position.is_null() {
            fail!(class::ARG, "position is NULL");
        }
        // SAFETY: non-null pointer to the caller's position.
        let pos = count(unsafe { *position }, "position")?;
        let need = k * ty.size;
        if pos + need > cap {
            fail!(
                class::TRUNCATE,
                "unpacking {need} bytes at position {pos} runs past the {cap}-byte buffer"
            );
        }
        if need > 0 && (inbuf.is_null() || outbuf.is_null()) {
            fail!(class::BUFFER, "a buffer is NULL");
        }
        // SAFETY: inbuf holds `cap` bytes (checked above); outbuf holds k elements.
        unsafe {
            let src = std::slice::from_raw_parts((inbuf as *const u8).add(pos), need);
            ty.unpack(src, need, outbuf as *mut u8, k);
        }
        // SAFETY: `position` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(position, (pos + need) as c_int, "position") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Pack_size(
    incount: c_int,
    dt: MpiDatatype,
    comm: MpiComm,
    size: *mut c_int,
) -> c_int {
    entry(Call::PackSize, comm, || {
        comm_of(comm)?;
        let k = count(incount, "incount")?;
        let ty = comm_type(dt)?;
        match c_int::try_from(k * ty.size) {
            // SAFETY: `size` is a C output argument: NULL or writable (MPI contract).
            Ok(n) => unsafe { put(size, n, "size") },
            Err(_) => fail!(
                class::COUNT,
                "{k} elements of {} bytes do not fit an int",
                ty.size
            ),
        }
    })
}
