//! Environment: init and finalize, names and versions, time, error strings and
//! handlers, memory. Also the Fortran string conventions ([`from_fortran`],
//! [`to_fortran`]).

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};

use super::args::{Aint, BufMut, Flag, In, Ptr};
use super::{cabi, guard};

/// A Fortran `CHARACTER(len)` argument as a C string: trailing blanks are padding, not
/// part of the value; an embedded NUL ends it (C could not see past it anyway).
///
/// # Safety
/// `p` points to `len` readable bytes (gfortran's hidden length).
pub unsafe fn from_fortran(p: *const c_char, len: usize) -> CString {
    let bytes: &[u8] = if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(p as *const u8, len) }
    };
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let value = bytes[..end].trim_ascii_end();
    CString::new(value).unwrap_or_default()
}

/// Store C string `s` into a Fortran `CHARACTER(len)` argument: truncated to `len`,
/// blank-padded (Fortran strings carry no terminator).
///
/// # Safety
/// `p` points to `len` writable bytes.
pub unsafe fn to_fortran(s: &[u8], p: *mut c_char, len: usize) {
    if p.is_null() {
        return;
    }
    // SAFETY: the caller's contract.
    let out = unsafe { std::slice::from_raw_parts_mut(p as *mut u8, len) };
    let n = s.len().min(len);
    out[..n].copy_from_slice(&s[..n]);
    out[n..].fill(b' ');
}

/// Run a C entry point that fills a string buffer of `cap` bytes and its length, and
/// pass the string back to Fortran (blank-padded) with its length.
///
/// # Safety
/// `out`/`out_len` are a Fortran `CHARACTER` argument, `resultlen` an INTEGER.
pub unsafe fn string_result(
    cap: usize,
    out: *mut c_char,
    out_len: usize,
    resultlen: *mut c_int,
    f: impl FnOnce(*mut c_char, *mut c_int) -> c_int,
) -> c_int {
    let mut buf = vec![0u8; cap + 1];
    let mut n: c_int = 0;
    let rc = f(buf.as_mut_ptr() as *mut c_char, &mut n);
    let n = usize::try_from(n).unwrap_or(0).min(cap);
    let n = buf[..n].iter().position(|&b| b == 0).unwrap_or(n);
    // SAFETY: the caller's contract.
    unsafe {
        to_fortran(&buf[..n], out, out_len);
        if !resultlen.is_null() {
            resultlen.write(n.min(out_len) as c_int);
        }
    }
    rc
}

/// `MPI_Init(ierror)`: Fortran has no argc/argv to pass.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_init_(ierr: *mut c_int) {
    // SAFETY: MPI_Init accepts NULL argc and argv.
    guard("MPI_Init", ierr, || unsafe {
        cabi::PMPI_Init(std::ptr::null_mut(), std::ptr::null_mut())
    })
}

/// `MPI_Init_thread(required, provided, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_init_thread_(
    required: *const c_int,
    provided: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: INTEGERs by reference; MPI_Init_thread accepts NULL argc and argv.
    guard("MPI_Init_thread", ierr, || unsafe {
        cabi::PMPI_Init_thread(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            required.read(),
            provided,
        )
    })
}

/// `DOUBLE PRECISION MPI_WTIME()`.
#[unsafe(no_mangle)]
pub extern "C" fn pmpi_wtime_() -> f64 {
    // SAFETY: no arguments; the C entry point catches its own panics.
    unsafe { cabi::PMPI_Wtime() }
}

/// `DOUBLE PRECISION MPI_WTICK()`.
#[unsafe(no_mangle)]
pub extern "C" fn pmpi_wtick_() -> f64 {
    // SAFETY: as for pmpi_wtime_.
    unsafe { cabi::PMPI_Wtick() }
}

/// `MPI_GET_PROCESSOR_NAME(name, resultlen, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_get_processor_name_(
    name: *mut c_char,
    resultlen: *mut c_int,
    ierr: *mut c_int,
    name_len: usize,
) {
    // SAFETY: a CHARACTER argument with its hidden length and an INTEGER.
    guard("MPI_Get_processor_name", ierr, || unsafe {
        string_result(256, name, name_len, resultlen, |b, n| {
            cabi::PMPI_Get_processor_name(b, n)
        })
    })
}

/// `MPI_GET_LIBRARY_VERSION(version, resultlen, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_get_library_version_(
    version: *mut c_char,
    resultlen: *mut c_int,
    ierr: *mut c_int,
    version_len: usize,
) {
    // SAFETY: as for pmpi_get_processor_name_.
    guard("MPI_Get_library_version", ierr, || unsafe {
        string_result(8192, version, version_len, resultlen, |b, n| {
            cabi::PMPI_Get_library_version(b, n)
        })
    })
}

/// `MPI_ERROR_STRING(errorcode, string, resultlen, ierror)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pmpi_error_string_(
    code: *const c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
    ierr: *mut c_int,
    string_len: usize,
) {
    // SAFETY: an INTEGER, a CHARACTER argument with its hidden length and an INTEGER.
    guard("MPI_Error_string", ierr, || unsafe {
        let code = code.read();
        string_result(512, string, string_len, resultlen, |b, n| {
            cabi::PMPI_Error_string(code, b, n)
        })
    })
}

fortran! {
    pmpi_finalize_ => PMPI_Finalize();
    pmpi_query_thread_ => PMPI_Query_thread(provided: Ptr<*mut c_int>);
    pmpi_is_thread_main_ => PMPI_Is_thread_main(flag: Flag);
    pmpi_initialized_ => PMPI_Initialized(flag: Flag);
    pmpi_finalized_ => PMPI_Finalized(flag: Flag);
    pmpi_abort_ => PMPI_Abort(comm: In, errorcode: In);
    pmpi_get_version_ => PMPI_Get_version(version: Ptr<*mut c_int>, subversion: Ptr<*mut c_int>);
    pmpi_alloc_mem_ => PMPI_Alloc_mem(size: Aint, info: In, baseptr: Ptr<*mut c_void>);
    pmpi_free_mem_ => PMPI_Free_mem(base: BufMut);
    pmpi_error_class_ => PMPI_Error_class(errorcode: In, errorclass: Ptr<*mut c_int>);
    pmpi_comm_set_errhandler_ => PMPI_Comm_set_errhandler(comm: In, errhandler: In);
    pmpi_comm_get_errhandler_ => PMPI_Comm_get_errhandler(comm: In, errhandler: Ptr<*mut c_int>);
    pmpi_errhandler_free_ => PMPI_Errhandler_free(errhandler: Ptr<*mut c_int>);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_strings_drop_trailing_blanks_and_come_back_padded() {
        let name = *b"the ring   ";
        // SAFETY: a local buffer with its length.
        let c = unsafe { from_fortran(name.as_ptr() as *const c_char, name.len()) };
        assert_eq!(c.to_bytes(), b"the ring");
        let mut out = [0u8; 6];
        // SAFETY: as above.
        unsafe { to_fortran(b"abc", out.as_mut_ptr() as *mut c_char, out.len()) };
        assert_eq!(&out, b"abc   ");
        // SAFETY: as above.
        unsafe { to_fortran(b"abcdefgh", out.as_mut_ptr() as *mut c_char, out.len()) };
        assert_eq!(&out, b"abcdef");
        let mut len = 0;
        // SAFETY: as above; the closure plays a C entry point filling 5 bytes.
        let rc = unsafe {
            string_result(8, out.as_mut_ptr() as *mut c_char, 4, &mut len, |b, n| {
                std::ptr::copy_nonoverlapping(c"hello".as_ptr(), b, 6);
                *n = 5;
                0
            })
        };
        assert_eq!((rc, len, &out[..4]), (0, 4, &b"hell"[..]));
    }
}
