//! More attribute caching: the MPI-1 names (`MPI_Attr_put`, `MPI_Attr_delete`,
//! `MPI_Keyval_create`, `MPI_Keyval_free`, with `MPI_NULL_COPY_FN`, `MPI_NULL_DELETE_FN`,
//! `MPI_DUP_FN`) and attributes on datatypes (`MPI_Type_create_keyval`,
//! `MPI_Type_set_attr`, ...; copied by `MPI_Type_dup`, deleted by `MPI_Type_free`).
//!
//! Keyvals of communicators and datatypes share one table (and the copy/delete sentinel
//! values 0 = NULL_COPY/NULL_DELETE, 1 = DUP). Type attributes live in
//! `State::type_attrs`; callbacks run with the state lock released, as for communicators.

use std::os::raw::{c_int, c_void};
use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::datatype::any_type;
use crate::error::{entry, fail, MpiErr, MpiResult};
use crate::state::{self, st, Keyval};
use crate::util::put;

/// `MPI_Type_copy_attr_function` (and the communicator one: same shape, int handles).
type CopyFn =
    unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Keyval_create(
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    // SAFETY: the same arguments, under the same contract.
    unsafe { crate::attrs::PMPI_Comm_create_keyval(copy, delete, keyval, extra) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Keyval_free(keyval: *mut c_int) -> c_int {
    // SAFETY: the same argument, under the same contract.
    unsafe { crate::attrs::PMPI_Comm_free_keyval(keyval) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Attr_put(comm: MpiComm, k: c_int, val: *mut c_void) -> c_int {
    // SAFETY: the same arguments, under the same contract.
    unsafe { crate::attrs::PMPI_Comm_set_attr(comm, k, val) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Attr_delete(comm: MpiComm, k: c_int) -> c_int {
    // SAFETY: the same arguments, under the same contract.
    unsafe { crate::attrs::PMPI_Comm_delete_attr(comm, k) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_keyval(
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    entry(Call::TypeCreateKeyval, COMM_WORLD, || {
        if keyval.is_null() {
            fail!(class::ARG, "type_keyval is NULL");
        }
        let k = state::insert_keyval(Keyval {
            copy: copy as usize,
            delete: delete as usize,
            extra: extra as usize,
        });
        st().freed_keyvals.remove(&k);
        // SAFETY: C output argument, checked non-NULL above.
        unsafe { put(keyval, k, "type_keyval") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_free_keyval(keyval: *mut c_int) -> c_int {
    entry(Call::TypeFreeKeyval, COMM_WORLD, || {
        if keyval.is_null() {
            fail!(class::ARG, "type_keyval is NULL");
        }
        // SAFETY: non-null pointer to the caller's keyval.
        let k = unsafe { *keyval };
        crate::attrs::free_keyval(k)?;
        // SAFETY: as above.
        unsafe { put(keyval, KEYVAL_INVALID, "type_keyval") }
    })
}

fn keyval(k: c_int) -> MpiResult<Keyval> {
    if st().freed_keyvals.contains_key(&k) {
        fail!(class::KEYVAL, "keyval {k} was freed");
    }
    match st().keyvals.get(&k) {
        Some(v) => Ok(*v),
        None => fail!(class::KEYVAL, "invalid keyval {k}"),
    }
}

fn call_delete(dt: MpiDatatype, k: c_int, kv: Keyval, val: usize) -> MpiResult {
    if kv.delete == 0 {
        return Ok(());
    }
    // SAFETY: the program registered this address as an MPI_Type_delete_attr_function.
    let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(kv.delete) };
    // SAFETY: calling the user's callback with the arguments MPI defines, lock released.
    let r = unsafe { f(dt, k, val as *mut c_void, kv.extra as *mut c_void) };
    if r != class::SUCCESS {
        fail!(
            r,
            "the attribute delete callback of keyval {k} returned {r}"
        );
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_set_attr(dt: MpiDatatype, k: c_int, val: *mut c_void) -> c_int {
    entry(Call::TypeSetAttr, COMM_WORLD, || {
        any_type(dt)?;
        let kv = keyval(k)?;
        let old = st().type_attrs.get(&(dt, k)).copied();
        if let Some(old) = old {
            call_delete(dt, k, kv, old)?;
        }
        st().type_attrs.insert((dt, k), val as usize);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_attr(
    dt: MpiDatatype,
    k: c_int,
    out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    entry(Call::TypeGetAttr, COMM_WORLD, || {
        any_type(dt)?;
        keyval(k)?;
        let v = st().type_attrs.get(&(dt, k)).copied();
        if let Some(v) = v {
            // SAFETY: C output argument (MPI contract: a `void **`).
            unsafe { put(out as *mut *mut c_void, v as *mut c_void, "attribute_val") }?;
        }
        // SAFETY: C output argument (MPI contract).
        unsafe { put(flag, v.is_some() as c_int, "flag") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_delete_attr(dt: MpiDatatype, k: c_int) -> c_int {
    entry(Call::TypeDeleteAttr, COMM_WORLD, || {
        any_type(dt)?;
        let kv = keyval(k)?;
        let old = st().type_attrs.get(&(dt, k)).copied();
        match old {
            Some(v) => {
                call_delete(dt, k, kv, v)?;
                st().type_attrs.remove(&(dt, k));
                Ok(())
            }
            None => fail!(
                class::KEYVAL,
                "no attribute for keyval {k} on this datatype"
            ),
        }
    })
}

/// `MPI_Type_dup`: copy `from`'s attributes to `to` through their copy callbacks.
pub fn copy_type_attrs(from: MpiDatatype, to: MpiDatatype) -> MpiResult {
    let attrs: Vec<(c_int, usize)> = st()
        .type_attrs
        .iter()
        .filter(|((t, _), _)| *t == from)
        .map(|((_, k), v)| (*k, *v))
        .collect();
    for (k, v) in attrs {
        let Some(kv) = st().keyvals.get(&k).copied() else {
            continue;
        };
        let copied = match kv.copy {
            0 => None,
            1 => Some(v),
            f => {
                // SAFETY: the program registered this address as an
                // MPI_Type_copy_attr_function.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut out: *mut c_void = std::ptr::null_mut();
                let mut flag: c_int = 0;
                // SAFETY: the callback gets the arguments MPI defines, lock released.
                let r = unsafe {
                    f(
                        from,
                        k,
                        kv.extra as *mut c_void,
                        v as *mut c_void,
                        &mut out as *mut _ as *mut c_void,
                        &mut flag,
                    )
                };
                if r != class::SUCCESS {
                    return Err(MpiErr::new(
                        r,
                        format!("the attribute copy callback of keyval {k} returned {r}"),
                    ));
                }
                (flag != 0).then_some(out as usize)
            }
        };
        if let Some(v) = copied {
            st().type_attrs.insert((to, k), v);
        }
    }
    Ok(())
}

/// `MPI_Type_free`: run the delete callbacks of every attribute of `dt`.
pub fn delete_type_attrs(dt: MpiDatatype) -> MpiResult {
    let attrs: Vec<(c_int, usize)> = {
        let mut s = st();
        let keys: Vec<(MpiDatatype, c_int)> = s
            .type_attrs
            .keys()
            .filter(|(t, _)| *t == dt)
            .copied()
            .collect();
        keys.into_iter()
            .filter_map(|key| s.type_attrs.remove(&key).map(|v| (key.1, v)))
            .collect()
    };
    for (k, v) in attrs {
        let kv = st().keyvals.get(&k).copied();
        if let Some(kv) = kv {
            call_delete(dt, k, kv, v)?;
        }
    }
    Ok(())
}
