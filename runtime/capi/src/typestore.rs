//! Registering new datatypes: the handle (the most recently freed one first, as MPICH) and
//! the constructor's arguments for `MPI_Type_get_contents` ([`crate::typecontents`]).

use std::os::raw::c_int;
use std::sync::Arc;

use crate::consts::*;
use crate::datatype::TypeInfo;
use crate::error::{fail, MpiResult};
use crate::state::{self, st};
use crate::util::put;

/// [`store`] datatype `t`, remembering the constructor's arguments for
/// `MPI_Type_get_contents`.
///
/// # Safety
/// As [`store`].
pub unsafe fn store_c(
    t: TypeInfo,
    out: *mut MpiDatatype,
    ints: Vec<c_int>,
    addrs: Vec<MpiAint>,
    types: &[MpiDatatype],
) -> MpiResult {
    // SAFETY: the caller's contract.
    unsafe { store(t, out) }?;
    // SAFETY: `store` succeeded, so `out` is non-NULL and holds the new handle.
    crate::typecontents::remember(unsafe { *out }, ints, addrs, types);
    Ok(())
}

/// Register datatype `t` and store its handle in `*out`.
///
/// # Safety
/// `out` must be NULL or valid for writing one handle (a C output argument).
pub unsafe fn store(t: TypeInfo, out: *mut MpiDatatype) -> MpiResult {
    if out.is_null() {
        fail!(class::ARG, "newtype is NULL");
    }
    let h = insert_reusing(t);
    // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
    unsafe { put(out, h, "newtype") }
}

/// Handles of freed datatypes, the most recently freed last.
fn freed_handles() -> std::sync::MutexGuard<'static, Vec<MpiDatatype>> {
    static FREED: std::sync::Mutex<Vec<MpiDatatype>> = std::sync::Mutex::new(Vec::new());
    FREED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Register `t` under the most recently freed handle, else a fresh one. As MPICH (whose
/// handles come from a free list), a type built right after one was freed gets its
/// handle: MPICH's own tests (datatype/indexed_misc) reuse a stale handle that way.
fn insert_reusing(t: TypeInfo) -> MpiDatatype {
    let reuse = freed_handles().pop();
    match reuse {
        Some(h) if !st().types.contains_key(&h) => {
            st().types.insert(h, Arc::new(t));
            h
        }
        _ => state::insert_type(t),
    }
}

/// Datatype `h` was freed: the next new datatype may take its handle.
pub fn freed(h: MpiDatatype) {
    // A name set with MPI_Type_set_name goes with the type, not the handle.
    st().type_names.remove(&h);
    freed_handles().push(h);
}
