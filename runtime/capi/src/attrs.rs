//! Communicator names, keyvals and attributes (C-layer state), including the predefined
//! attributes of `MPI_COMM_WORLD` (`MPI_TAG_UB`, ...). Attribute callbacks are user code:
//! they run with the state lock released.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;
use strobe_runtime::calls::Call;

use crate::comm::comm_of;
use crate::consts::*;
use crate::error::{entry, fail, MpiErr, MpiResult};
use crate::state::{self, st, Keyval};
use crate::util::{put, put_str};

type CopyFn = unsafe extern "C" fn(
    MpiComm,
    c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
) -> c_int;
type DeleteFn = unsafe extern "C" fn(MpiComm, c_int, *mut c_void, *mut c_void) -> c_int;

/// Storage of the predefined attribute values (their addresses are handed out).
fn predefined_value(key: c_int) -> Option<*mut c_void> {
    static VALUES: OnceLock<usize> = OnceLock::new();
    let base = *VALUES.get_or_init(|| {
        let size = strobe_runtime::rank::RankCtx::get().map_or(1, |c| c.size() as c_int);
        let v: Box<[c_int; 8]> = Box::new([
            0,
            strobe_runtime::api::TAG_UB,
            PROC_NULL,
            ANY_SOURCE,
            0,
            size,
            0,
            class::LASTCODE,
        ]);
        Box::leak(v).as_mut_ptr() as usize
    });
    (TAG_UB_KEY..=LASTUSEDCODE_KEY)
        .contains(&key)
        // SAFETY: index 1..=7 of a leaked 8-element array.
        .then(|| unsafe { (base as *mut c_int).add(key as usize) } as *mut c_void)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_set_name(comm: MpiComm, name: *const c_char) -> c_int {
    entry(Call::CommSetName, comm, || {
        comm_of(comm)?;
        if name.is_null() {
            fail!(class::ARG, "comm_name is NULL");
        }
        // SAFETY: non-null NUL-terminated C string (MPI contract).
        let s = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
        let s: String = s.chars().take(MAX_OBJECT_NAME - 1).collect();
        if let Some(c) = st().comms.get_mut(&comm) {
            c.name = s;
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_get_name(
    comm: MpiComm,
    name: *mut c_char,
    len: *mut c_int,
) -> c_int {
    entry(Call::CommGetName, comm, || {
        comm_of(comm)?;
        let n = st()
            .comms
            .get(&comm)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        // SAFETY: `name` is a C string buffer of the given capacity, the length an output argument
        // (MPI contract).
        unsafe { put_str(name, MAX_OBJECT_NAME, &n, len) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_create_keyval(
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    entry(Call::CommCreateKeyval, COMM_WORLD, || {
        if keyval.is_null() {
            fail!(class::ARG, "comm_keyval is NULL");
        }
        let k = state::insert_keyval(Keyval {
            copy: copy as usize,
            delete: delete as usize,
            extra: extra as usize,
        });
        st().freed_keyvals.remove(&k);
        // SAFETY: `keyval` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(keyval, k, "comm_keyval") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_free_keyval(keyval: *mut c_int) -> c_int {
    entry(Call::CommFreeKeyval, COMM_WORLD, || {
        if keyval.is_null() {
            fail!(class::ARG, "comm_keyval is NULL");
        }
        // SAFETY: non-null pointer to the caller's keyval.
        let k = unsafe { *keyval };
        free_keyval(k)?;
        // SAFETY: `keyval` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(keyval, KEYVAL_INVALID, "comm_keyval") }
    })
}

/// Free keyval `k`. A keyval freed while attributes use it lives on for their delete
/// callbacks (MPI-3.1 6.7.2); it cannot be used to set or get attributes any more. As
/// MPICH (which counts references), a freed keyval may be freed again (from a copy of the
/// handle, or from a delete callback) without an error.
pub fn free_keyval(k: c_int) -> MpiResult {
    let mut s = st();
    if !s.keyvals.contains_key(&k) && !s.freed_keyvals.contains_key(&k) {
        fail!(class::KEYVAL, "invalid keyval {k}");
    }
    let in_use = s.comms.values().any(|c| c.attrs.contains_key(&k))
        || s.type_attrs.keys().any(|(_, kk)| *kk == k);
    *s.freed_keyvals.entry(k).or_insert(0) += 1;
    if !in_use {
        s.keyvals.remove(&k);
    }
    Ok(())
}

fn keyval(k: c_int) -> MpiResult<Keyval> {
    if st().freed_keyvals.contains_key(&k) {
        fail!(class::KEYVAL, "keyval {k} was freed");
    }
    match st().keyvals.get(&k) {
        Some(v) => Ok(*v),
        None if predefined_value(k).is_some() => {
            fail!(class::KEYVAL, "keyval {k} is predefined and read-only")
        }
        None => fail!(class::KEYVAL, "invalid keyval {k}"),
    }
}

/// The keyval of an attribute to delete: a freed keyval still names the attributes set
/// with it (it lives until they are deleted, MPI-3.1 6.7.2), so they can be deleted by it.
fn keyval_for_delete(k: c_int) -> MpiResult<Keyval> {
    let live = st().keyvals.get(&k).copied();
    match live {
        Some(v) => Ok(v),
        None => keyval(k),
    }
}

fn call_delete(comm: MpiComm, k: c_int, kv: Keyval, val: usize) -> MpiResult {
    if kv.delete == 0 {
        return Ok(());
    }
    // SAFETY: the program registered this address as an MPI_Comm_delete_attr_function.
    let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(kv.delete) };
    // SAFETY: calling the user's callback with the arguments MPI defines.
    let r = unsafe { f(comm, k, val as *mut c_void, kv.extra as *mut c_void) };
    if r != class::SUCCESS {
        fail!(
            r,
            "the attribute delete callback of keyval {k} returned {r}"
        );
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_set_attr(comm: MpiComm, k: c_int, val: *mut c_void) -> c_int {
    entry(Call::CommSetAttr, comm, || {
        comm_of(comm)?;
        let kv = keyval(k)?;
        let old = st().comms.get(&comm).and_then(|c| c.attrs.get(&k).copied());
        // The old value's delete callback runs first: if it fails, the attribute keeps
        // its old value (MPI-3.1 6.7.2).
        if let Some(old) = old {
            call_delete(comm, k, kv, old)?;
        }
        set_value(comm, k, val as usize);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_delete_attr(comm: MpiComm, k: c_int) -> c_int {
    entry(Call::CommDeleteAttr, comm, || {
        comm_of(comm)?;
        let kv = keyval_for_delete(k)?;
        let old = st().comms.get(&comm).and_then(|c| c.attrs.get(&k).copied());
        match old {
            // Removed only once its delete callback succeeded.
            Some(v) => {
                call_delete(comm, k, kv, v)?;
                let mut s = st();
                if let Some(c) = s.comms.get_mut(&comm) {
                    c.attrs.remove(&k);
                }
                s.attr_seq.remove(&(comm, k));
                Ok(())
            }
            None => fail!(
                class::KEYVAL,
                "no attribute for keyval {k} on this communicator"
            ),
        }
    })
}

/// Look attribute `k` up on `comm` and store it in `*out`, `*flag` saying whether it is set.
///
/// # Safety
/// `out` must be NULL or valid for writing a pointer, `flag` NULL or valid for writing an
/// int (C output arguments).
unsafe fn get_attr(comm: MpiComm, k: c_int, out: *mut c_void, flag: *mut c_int) -> MpiResult {
    comm_of(comm)?;
    let v = match predefined_value(k) {
        Some(p) if comm == COMM_WORLD => Some(p as usize),
        Some(_) => None,
        None => {
            let s = st();
            if !s.keyvals.contains_key(&k) {
                fail!(class::KEYVAL, "invalid keyval {k}");
            }
            s.comms.get(&comm).and_then(|c| c.attrs.get(&k).copied())
        }
    };
    if let Some(v) = v {
        // SAFETY: `out as *mut *mut c_void` is a C output argument: NULL or writable (MPI
        // contract).
        unsafe { put(out as *mut *mut c_void, v as *mut c_void, "attribute_val") }?;
    }
    // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
    unsafe { put(flag, v.is_some() as c_int, "flag") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_get_attr(
    comm: MpiComm,
    k: c_int,
    out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: `out` and `flag` are C output arguments: NULL or writable (MPI contract).
    entry(Call::CommGetAttr, comm, || unsafe {
        get_attr(comm, k, out, flag)
    })
}

/// MPI-1 name of `MPI_Comm_get_attr`, still used by many programs for `MPI_TAG_UB`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Attr_get(
    comm: MpiComm,
    k: c_int,
    out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: `out` and `flag` are C output arguments: NULL or writable (MPI contract).
    entry(Call::AttrGet, comm, || unsafe {
        get_attr(comm, k, out, flag)
    })
}

/// `MPI_Comm_dup`: copy `from`'s attributes to `to` through their copy callbacks.
pub fn copy_attrs(from: MpiComm, to: MpiComm) -> MpiResult {
    let attrs: Vec<(c_int, usize)> = st()
        .comms
        .get(&from)
        .map(|c| c.attrs.iter().map(|(k, v)| (*k, *v)).collect())
        .unwrap_or_default();
    for (k, v) in attrs {
        let Some(kv) = st().keyvals.get(&k).copied() else {
            continue;
        };
        let copied = match kv.copy {
            0 => None,
            1 => Some(v),
            f => {
                // SAFETY: the program registered this address as an
                // MPI_Comm_copy_attr_function.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut out: *mut c_void = std::ptr::null_mut();
                let mut flag: c_int = 0;
                // SAFETY: the callback gets the arguments MPI defines.
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
            set_value(to, k, v);
        }
    }
    Ok(())
}

/// `MPI_Comm_free`: run the delete callbacks of every attribute of `comm`.
pub fn delete_attrs(comm: MpiComm) -> MpiResult {
    let attrs: Vec<(c_int, usize)> = {
        let mut g = st();
        let s = &mut *g;
        let mut a: Vec<(c_int, usize)> = s
            .comms
            .get_mut(&comm)
            .map(|c| std::mem::take(&mut c.attrs).into_iter().collect())
            .unwrap_or_default();
        // The most recently set first (as MPICH; MPI-2.2 asks it of MPI_COMM_SELF at
        // MPI_Finalize).
        let mut keyed: Vec<(u64, c_int, usize)> = a
            .drain(..)
            .map(|(k, v)| (s.attr_seq.remove(&(comm, k)).unwrap_or(0), k, v))
            .collect();
        keyed.sort_by_key(|(seq, ..)| std::cmp::Reverse(*seq));
        keyed.into_iter().map(|(_, k, v)| (k, v)).collect()
    };
    for (k, v) in attrs {
        let kv = st().keyvals.get(&k).copied();
        if let Some(kv) = kv {
            call_delete(comm, k, kv, v)?;
        }
    }
    Ok(())
}

/// `MPI_Add_error_class`/`code`: the value of the `MPI_LASTUSEDCODE` attribute.
pub fn set_last_used_code(code: c_int) {
    if let Some(p) = predefined_value(LASTUSEDCODE_KEY) {
        // SAFETY: the leaked storage of the predefined attribute values (an int).
        unsafe { (p as *mut c_int).write(code) };
    }
}

/// Store attribute `k` of `comm`, remembering when it was first set.
fn set_value(comm: MpiComm, k: c_int, v: usize) {
    let mut g = st();
    let s = &mut *g;
    if let Some(c) = s.comms.get_mut(&comm) {
        c.attrs.insert(k, v);
        if !s.attr_seq.contains_key(&(comm, k)) {
            s.next_attr_seq += 1;
            s.attr_seq.insert((comm, k), s.next_attr_seq);
        }
    }
}
