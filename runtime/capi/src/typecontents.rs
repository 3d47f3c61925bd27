//! `MPI_Type_get_contents`: the arguments a derived datatype was built with.
//!
//! Every constructor [`remember`]s its integer, address and datatype arguments under the
//! new handle (MPI-3.1 4.1.13, table of combiners). The datatype arguments are kept as
//! the type maps they were then (and their own contents), so a program may free them
//! after the construction and still ask: `MPI_Type_get_contents` hands out new handles
//! for the derived ones (the caller frees them, as the standard says) and the
//! predefined handles themselves.

use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::{Arc, Mutex, OnceLock};
use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::datatype::{any_type, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::state::{self, st};

/// One datatype argument of a constructor.
#[derive(Debug)]
struct Inner {
    handle: MpiDatatype,
    info: Arc<TypeInfo>,
    contents: Option<Arc<Contents>>,
}

/// The arguments a derived datatype was built with.
#[derive(Debug, Default)]
pub struct Contents {
    ints: Vec<c_int>,
    addrs: Vec<MpiAint>,
    types: Vec<Inner>,
}

impl Contents {
    pub fn ints(&self) -> &[c_int] {
        &self.ints
    }
    pub fn addrs(&self) -> &[MpiAint] {
        &self.addrs
    }
    /// The datatype arguments: their type maps and how they were built.
    pub fn types(&self) -> Vec<(&Arc<TypeInfo>, Option<&Contents>)> {
        self.types
            .iter()
            .map(|i| (&i.info, i.contents.as_deref()))
            .collect()
    }
}

/// How datatype `h` was built (None: predefined, or not recorded).
pub fn get(h: MpiDatatype) -> Option<Arc<Contents>> {
    table().get(&h).cloned()
}

fn table() -> std::sync::MutexGuard<'static, HashMap<MpiDatatype, Arc<Contents>>> {
    static TABLE: OnceLock<Mutex<HashMap<MpiDatatype, Arc<Contents>>>> = OnceLock::new();
    TABLE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Record how datatype `h` was built.
pub fn remember(h: MpiDatatype, ints: Vec<c_int>, addrs: Vec<MpiAint>, types: &[MpiDatatype]) {
    let types = types
        .iter()
        .filter_map(|&t| {
            let info = any_type(t).ok()?;
            let contents = table().get(&t).cloned();
            Some(Inner {
                handle: t,
                info,
                contents,
            })
        })
        .collect();
    table().insert(h, Arc::new(Contents { ints, addrs, types }));
}

/// Datatype `h` was freed: its handle may be reused.
pub fn forget(h: MpiDatatype) {
    table().remove(&h);
}

/// Copy `src` into the C array `dst` of capacity `max`.
///
/// # Safety
/// `dst` is NULL or holds `max` writable elements (the caller's contract).
unsafe fn copy_out<T: Copy>(src: &[T], dst: *mut T, max: c_int, what: &str) -> MpiResult<()> {
    if src.len() > max.max(0) as usize {
        fail!(
            class::ARG,
            "{what} has room for {max} entries, the datatype has {}",
            src.len()
        );
    }
    if src.is_empty() {
        return Ok(());
    }
    if dst.is_null() {
        fail!(class::ARG, "{what} is NULL");
    }
    // SAFETY: checked non-NULL; the caller's array holds at least `src.len()` elements.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_contents(
    dt: MpiDatatype,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    integers: *mut c_int,
    addresses: *mut MpiAint,
    datatypes: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeGetContents, COMM_WORLD, || {
        let t = any_type(dt)?;
        if t.predefined {
            fail!(
                class::TYPE,
                "{} is predefined: it has no contents (combiner MPI_COMBINER_NAMED)",
                t.display_name()
            );
        }
        let Some(c) = table().get(&dt).cloned() else {
            fail!(class::TYPE, "no contents recorded for datatype {dt}");
        };
        // SAFETY: C output arrays of the given capacities (MPI contract).
        unsafe {
            copy_out(&c.ints, integers, max_integers, "array_of_integers")?;
            copy_out(&c.addrs, addresses, max_addresses, "array_of_addresses")?;
        }
        let handles: Vec<MpiDatatype> = c
            .types
            .iter()
            .map(|inner| {
                if inner.info.predefined {
                    return inner.handle;
                }
                // A new handle on the same type map (and the same contents).
                let h = state::insert_type((*inner.info).clone());
                if let Some(ic) = &inner.contents {
                    table().insert(h, ic.clone());
                }
                h
            })
            .collect();
        // SAFETY: as above.
        let r = unsafe { copy_out(&handles, datatypes, max_datatypes, "array_of_datatypes") };
        if r.is_err() {
            for h in handles {
                if h >= FIRST_USER_TYPE {
                    st().types.remove(&h);
                    forget(h);
                }
            }
        }
        r
    })
}
