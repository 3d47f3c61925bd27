//! User error handlers and user error classes and codes (MPI-3.1 8.3, 8.5):
//! `MPI_Comm_create_errhandler` (and the MPI-1 `MPI_Errhandler_create`),
//! `MPI_Comm_call_errhandler`, `MPI_Errhandler_set`/`get`, `MPI_Add_error_class`,
//! `MPI_Add_error_code`, `MPI_Add_error_string`.
//!
//! A user handler is called by `error::entry` when a call on its communicator fails (with
//! the communicator and the error code), then the call returns the code, as with
//! `MPI_ERRORS_RETURN`. User classes and codes are numbered after `MPI_ERR_LASTCODE`;
//! `MPI_LASTUSEDCODE` follows them.

use std::os::raw::{c_char, c_int};
use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::error::{entry, fail, MpiResult};
use crate::state::st;
use crate::util::put;

/// `MPI_Comm_errhandler_function`: `void f(MPI_Comm *, int *, ...)`.
pub type HandlerFn = unsafe extern "C" fn(*mut MpiComm, *mut c_int);
const FIRST_USER_ERRHANDLER: MpiErrhandler = 3;

/// A user error code: its class and its string.
#[derive(Clone)]
pub struct UserCode {
    pub class: c_int,
    pub text: String,
}

/// The user handler registered as `eh`, if it is one.
pub fn user_handler(eh: MpiErrhandler) -> Option<HandlerFn> {
    let f = *st().errhandlers.get(&eh)?;
    // SAFETY: registered by MPI_Comm_create_errhandler from a function pointer.
    Some(unsafe { std::mem::transmute::<usize, HandlerFn>(f) })
}

/// Whether `eh` is a valid error handler (predefined or user).
pub fn is_errhandler(eh: MpiErrhandler) -> bool {
    eh == ERRORS_ARE_FATAL || eh == ERRORS_RETURN || st().errhandlers.contains_key(&eh)
}

/// The class and string of user error code `code`.
pub fn user_code(code: c_int) -> Option<UserCode> {
    st().user_codes.get(&code).cloned()
}

/// Call user handler `f` for `code` on `comm` (without the state lock).
pub fn invoke(f: HandlerFn, comm: MpiComm, code: c_int) {
    let mut c = comm;
    let mut e = code;
    // SAFETY: the program's handler, called as MPI specifies.
    unsafe { f(&mut c, &mut e) };
}

fn create(f: Option<HandlerFn>, out: *mut MpiErrhandler) -> MpiResult {
    let Some(f) = f else {
        fail!(class::ARG, "the error handler function is NULL");
    };
    if out.is_null() {
        fail!(class::ARG, "errhandler is NULL");
    }
    let h = {
        let mut s = st();
        let h = (FIRST_USER_ERRHANDLER..)
            .find(|h| !s.errhandlers.contains_key(h))
            .expect("handles left");
        s.errhandlers.insert(h, f as usize);
        h
    };
    // SAFETY: checked non-NULL above.
    unsafe { put(out, h, "errhandler") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_create_errhandler(
    f: Option<HandlerFn>,
    out: *mut MpiErrhandler,
) -> c_int {
    entry(Call::CommCreateErrhandler, COMM_WORLD, || create(f, out))
}

/// MPI-1 name of `MPI_Comm_create_errhandler`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Errhandler_create(
    f: Option<HandlerFn>,
    out: *mut MpiErrhandler,
) -> c_int {
    entry(Call::ErrhandlerCreate, COMM_WORLD, || create(f, out))
}

/// MPI-1 name of `MPI_Comm_set_errhandler`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Errhandler_set(comm: MpiComm, eh: MpiErrhandler) -> c_int {
    // SAFETY: the same arguments, under the same contract.
    unsafe { crate::env::PMPI_Comm_set_errhandler(comm, eh) }
}

/// MPI-1 name of `MPI_Comm_get_errhandler`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Errhandler_get(comm: MpiComm, eh: *mut MpiErrhandler) -> c_int {
    // SAFETY: the same arguments, under the same contract.
    unsafe { crate::env::PMPI_Comm_get_errhandler(comm, eh) }
}

/// `MPI_Comm_call_errhandler`: what a failing call on `comm` would do with `code`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_call_errhandler(comm: MpiComm, code: c_int) -> c_int {
    let eh = match st().comms.get(&comm) {
        Some(c) => c.errhandler,
        None => return class::COMM,
    };
    if let Some(f) = user_handler(eh) {
        invoke(f, comm, code);
        return class::SUCCESS;
    }
    if eh == ERRORS_RETURN {
        return class::SUCCESS;
    }
    entry(Call::CommCallErrhandler, comm, || {
        fail!(code, "MPI_Comm_call_errhandler with error code {code}")
    })
}

/// The next free user code (classes and codes share the numbering).
fn next_code() -> c_int {
    let s = st();
    s.user_codes
        .keys()
        .max()
        .map_or(class::LASTCODE + 1, |m| m + 1)
}

fn add_code(class_of: Option<c_int>) -> c_int {
    let c = next_code();
    let class = class_of.unwrap_or(c);
    st().user_codes.insert(
        c,
        UserCode {
            class,
            text: String::new(),
        },
    );
    crate::attrs::set_last_used_code(c);
    c
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Add_error_class(out: *mut c_int) -> c_int {
    entry(Call::AddErrorClass, COMM_WORLD, || {
        if out.is_null() {
            fail!(class::ARG, "errorclass is NULL");
        }
        // SAFETY: checked non-NULL above.
        unsafe { put(out, add_code(None), "errorclass") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Add_error_code(errorclass: c_int, out: *mut c_int) -> c_int {
    entry(Call::AddErrorCode, COMM_WORLD, || {
        let known = crate::error::class_text(errorclass).is_some()
            || user_code(errorclass).is_some_and(|u| u.class == errorclass);
        if !known {
            fail!(class::ARG, "{errorclass} is not an error class");
        }
        if out.is_null() {
            fail!(class::ARG, "errorcode is NULL");
        }
        // SAFETY: checked non-NULL above.
        unsafe { put(out, add_code(Some(errorclass)), "errorcode") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Add_error_string(code: c_int, text: *const c_char) -> c_int {
    entry(Call::AddErrorString, COMM_WORLD, || {
        if text.is_null() {
            fail!(class::ARG, "string is NULL");
        }
        // SAFETY: non-null NUL-terminated C string (MPI contract).
        let t = unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy();
        if t.len() >= MAX_ERROR_STRING {
            fail!(class::ARG, "the string is longer than MPI_MAX_ERROR_STRING");
        }
        match st().user_codes.get_mut(&code) {
            Some(u) => u.text = t.into_owned(),
            None => fail!(
                class::ARG,
                "{code} is not a user error code or class (predefined strings cannot be changed)"
            ),
        }
        Ok(())
    })
}
