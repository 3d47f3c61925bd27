//! `MPI_Info` objects (MPI-4.0 10.0; MPI-3.1 9): ordered (key, value) string pairs, and
//! the communicator hints built on them (`MPI_Comm_set_info`, `MPI_Comm_get_info`,
//! `MPI_Comm_dup_with_info`).
//!
//! Info objects are purely local: nothing is posted, recorded or replayed. strobe
//! interprets no hint; `MPI_Comm_get_info` returns the standard assertion hints
//! (`mpi_assert_*`) the program set, and ignores the others.
//! `MPI_INFO_ENV` holds `command`, `argv`, `maxprocs`, `wdir` and `thread_level`; it is
//! predefined, so it cannot be modified or freed (`MPI_ERR_INFO`).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::error::{entry, fail, MpiResult};
use crate::state::st;
use crate::util::{put, put_str};

pub const INFO_NULL: c_int = 0;
pub const INFO_ENV: c_int = 1;
const FIRST_USER_INFO: c_int = 2;
/// `MPI_MAX_INFO_KEY`, `MPI_MAX_INFO_VAL` (as MPICH).
pub const MAX_INFO_KEY: usize = 255;
pub const MAX_INFO_VAL: usize = 1024;

const ERR_INFO_KEY: c_int = 23;
const ERR_INFO_VALUE: c_int = 24;
const ERR_INFO_NOKEY: c_int = 25;
const ERR_INFO: c_int = 33;

/// Keys in the order they were first set (`MPI_Info_get_nthkey` numbers them so).
#[derive(Clone, Default)]
pub struct InfoObj(Vec<(String, String)>);

impl InfoObj {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    pub fn set(&mut self, key: String, value: String) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(e) => e.1 = value,
            None => self.0.push((key, value)),
        }
    }
}

/// What `MPI_INFO_ENV` holds: how this process was started.
fn env_info() -> InfoObj {
    let mut i = InfoObj::default();
    let args: Vec<String> = std::env::args().collect();
    if let Some(cmd) = args.first() {
        i.set("command".into(), cmd.clone());
    }
    if args.len() > 1 {
        i.set("argv".into(), args[1..].join(" "));
    }
    if let Some(c) = strobe_runtime::rank::RankCtx::get() {
        i.set("maxprocs".into(), c.size().to_string());
    }
    if let Ok(d) = std::env::current_dir() {
        i.set("wdir".into(), d.display().to_string());
    }
    i.set("thread_level".into(), "MPI_THREAD_FUNNELED".into());
    i
}

/// A copy of info object `h` (`MPI_ERR_INFO` for a bad handle).
pub fn info_of(h: c_int) -> MpiResult<InfoObj> {
    if h == INFO_ENV {
        return Ok(env_info());
    }
    match st().infos.get(&h) {
        Some(i) => Ok(i.clone()),
        None => fail!(ERR_INFO, "invalid info handle {h}"),
    }
}

/// Change user info object `h`.
fn with_info<R>(h: c_int, f: impl FnOnce(&mut InfoObj) -> MpiResult<R>) -> MpiResult<R> {
    if h == INFO_ENV {
        fail!(
            ERR_INFO,
            "MPI_INFO_ENV is predefined and cannot be modified"
        );
    }
    match st().infos.get_mut(&h) {
        Some(i) => f(i),
        None => fail!(ERR_INFO, "invalid info handle {h}"),
    }
}

pub fn insert_info(i: InfoObj) -> c_int {
    let mut g = st();
    let s = &mut *g;
    let mut h = s.next_info.max(FIRST_USER_INFO);
    while s.infos.contains_key(&h) {
        h = if h == c_int::MAX {
            FIRST_USER_INFO
        } else {
            h + 1
        };
    }
    s.next_info = h.checked_add(1).unwrap_or(FIRST_USER_INFO);
    s.infos.insert(h, i);
    h
}

/// A C string argument, at most `max` bytes (`class` if longer, empty or NULL).
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn c_str(p: *const c_char, max: usize, class: c_int, what: &str) -> MpiResult<String> {
    if p.is_null() {
        fail!(class, "{what} is NULL");
    }
    // SAFETY: a NUL-terminated C string (this function's contract).
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy();
    // MPI: leading and trailing spaces of keys and values are not significant.
    let s = s.trim();
    if s.len() > max {
        fail!(
            class,
            "{what} of {} characters (MPI_MAX_INFO_{} is {max})",
            s.len(),
            if class == ERR_INFO_KEY { "KEY" } else { "VAL" }
        );
    }
    if s.is_empty() && class == ERR_INFO_KEY {
        fail!(class, "empty {what}");
    }
    Ok(s.to_string())
}

/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn key_arg(p: *const c_char) -> MpiResult<String> {
    // SAFETY: this function's contract.
    unsafe { c_str(p, MAX_INFO_KEY, ERR_INFO_KEY, "key") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_create(info: *mut c_int) -> c_int {
    entry(Call::InfoCreate, COMM_WORLD, || {
        if info.is_null() {
            fail!(class::ARG, "info is NULL");
        }
        let h = insert_info(InfoObj::default());
        // SAFETY: `info` is a C output argument, checked non-NULL above.
        unsafe { put(info, h, "info") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_set(
    info: c_int,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    entry(Call::InfoSet, COMM_WORLD, || {
        // SAFETY: C string arguments (MPI contract).
        let k = unsafe { key_arg(key) }?;
        // SAFETY: C string arguments (MPI contract).
        let v = unsafe { c_str(value, MAX_INFO_VAL, ERR_INFO_VALUE, "value") }?;
        with_info(info, |i| {
            i.set(k, v);
            Ok(())
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_delete(info: c_int, key: *const c_char) -> c_int {
    entry(Call::InfoDelete, COMM_WORLD, || {
        // SAFETY: C string argument (MPI contract).
        let k = unsafe { key_arg(key) }?;
        with_info(info, |i| match i.0.iter().position(|(x, _)| *x == k) {
            Some(p) => {
                i.0.remove(p);
                Ok(())
            }
            None => fail!(ERR_INFO_NOKEY, "key {k:?} is not set"),
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_get(
    info: c_int,
    key: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    entry(Call::InfoGet, COMM_WORLD, || {
        // SAFETY: C string argument (MPI contract).
        let k = unsafe { key_arg(key) }?;
        if valuelen < 0 {
            fail!(class::ARG, "negative valuelen {valuelen}");
        }
        let i = info_of(info)?;
        match i.get(&k) {
            // MPI: `value` holds valuelen + 1 characters (the value and its NUL).
            // SAFETY: C output arguments (MPI contract).
            Some(v) => unsafe {
                put_str(value, valuelen as usize + 1, v, std::ptr::null_mut())?;
                put(flag, 1, "flag")
            },
            // SAFETY: C output argument (MPI contract).
            None => unsafe { put(flag, 0, "flag") },
        }
    })
}

/// `MPI_Info_get_string` (MPI-4.0): `*buflen` in is the buffer's size, out the value's
/// length plus one; a buffer too small gets the value truncated (NUL-terminated).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_get_string(
    info: c_int,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    entry(Call::InfoGetString, COMM_WORLD, || {
        // SAFETY: C string argument (MPI contract).
        let k = unsafe { key_arg(key) }?;
        if buflen.is_null() {
            fail!(class::ARG, "buflen is NULL");
        }
        // SAFETY: non-null in/out argument.
        let cap = unsafe { *buflen };
        let i = info_of(info)?;
        let Some(v) = i.get(&k) else {
            // SAFETY: C output argument (MPI contract).
            return unsafe { put(flag, 0, "flag") };
        };
        if cap > 0 {
            // SAFETY: `value` holds `cap` characters (MPI contract).
            unsafe { put_str(value, cap as usize, v, std::ptr::null_mut()) }?;
        }
        // SAFETY: C output arguments (MPI contract).
        unsafe {
            put(buflen, v.len() as c_int + 1, "buflen")?;
            put(flag, 1, "flag")
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_get_valuelen(
    info: c_int,
    key: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    entry(Call::InfoGetValuelen, COMM_WORLD, || {
        // SAFETY: C string argument (MPI contract).
        let k = unsafe { key_arg(key) }?;
        let i = info_of(info)?;
        match i.get(&k) {
            // SAFETY: C output arguments (MPI contract).
            Some(v) => unsafe {
                put(valuelen, v.len() as c_int, "valuelen")?;
                put(flag, 1, "flag")
            },
            // SAFETY: C output argument (MPI contract).
            None => unsafe { put(flag, 0, "flag") },
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_get_nkeys(info: c_int, nkeys: *mut c_int) -> c_int {
    entry(Call::InfoGetNkeys, COMM_WORLD, || {
        let n = info_of(info)?.0.len();
        // SAFETY: C output argument (MPI contract).
        unsafe { put(nkeys, n as c_int, "nkeys") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_get_nthkey(info: c_int, n: c_int, key: *mut c_char) -> c_int {
    entry(Call::InfoGetNthkey, COMM_WORLD, || {
        let i = info_of(info)?;
        let Some((k, _)) = usize::try_from(n).ok().and_then(|n| i.0.get(n)) else {
            fail!(
                class::ARG,
                "key number {n} out of range (the info has {} keys)",
                i.0.len()
            );
        };
        // SAFETY: `key` holds MPI_MAX_INFO_KEY + 1 characters (MPI contract).
        unsafe { put_str(key, MAX_INFO_KEY + 1, k, std::ptr::null_mut()) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_dup(info: c_int, out: *mut c_int) -> c_int {
    entry(Call::InfoDup, COMM_WORLD, || {
        let i = info_of(info)?;
        if out.is_null() {
            fail!(class::ARG, "newinfo is NULL");
        }
        let h = insert_info(i);
        // SAFETY: C output argument, checked non-NULL above.
        unsafe { put(out, h, "newinfo") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Info_free(info: *mut c_int) -> c_int {
    entry(Call::InfoFree, COMM_WORLD, || {
        if info.is_null() {
            fail!(class::ARG, "info is NULL");
        }
        // SAFETY: non-null in/out argument (MPI contract).
        let h = unsafe { *info };
        if h == INFO_ENV {
            fail!(ERR_INFO, "MPI_INFO_ENV is predefined and cannot be freed");
        }
        if st().infos.remove(&h).is_none() {
            fail!(ERR_INFO, "invalid info handle {h}");
        }
        // SAFETY: as above.
        unsafe { *info = INFO_NULL };
        Ok(())
    })
}

/// The hints of `info` (`MPI_INFO_NULL`: none).
fn hints(info: c_int) -> MpiResult<InfoObj> {
    if info == INFO_NULL {
        return Ok(InfoObj::default());
    }
    info_of(info)
}

/// The communicator hints strobe keeps: the standard's assertions (MPI-4.0 7.4.4), which
/// are the program's promises and safe to report back. Others are ignored, so
/// `MPI_Comm_get_info` does not report them (MPI: it returns the hints in use).
const COMM_HINTS: [&str; 4] = [
    "mpi_assert_no_any_tag",
    "mpi_assert_no_any_source",
    "mpi_assert_exact_length",
    "mpi_assert_allow_overtaking",
];

/// The hints of `info` strobe keeps for a communicator.
pub fn comm_hints(info: c_int) -> MpiResult<InfoObj> {
    let mut i = hints(info)?;
    i.0.retain(|(k, _)| COMM_HINTS.contains(&k.as_str()));
    Ok(i)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_set_info(comm: MpiComm, info: c_int) -> c_int {
    entry(Call::CommSetInfo, comm, || {
        crate::comm::comm_of(comm)?;
        let i = comm_hints(info)?;
        st().comm_infos.insert(comm, i);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_get_info(comm: MpiComm, out: *mut c_int) -> c_int {
    entry(Call::CommGetInfo, comm, || {
        crate::comm::comm_of(comm)?;
        if out.is_null() {
            fail!(class::ARG, "info_used is NULL");
        }
        let i = st().comm_infos.get(&comm).cloned().unwrap_or_default();
        let h = insert_info(i);
        // SAFETY: C output argument, checked non-NULL above.
        unsafe { put(out, h, "info_used") }
    })
}

/// `MPI_Comm_dup_with_info`: `MPI_Comm_dup` (attributes copied as there), then the new
/// communicator gets `info`'s hints instead of the old one's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_dup_with_info(
    comm: MpiComm,
    info: c_int,
    out: *mut MpiComm,
) -> c_int {
    entry(Call::CommDupWithInfo, comm, || {
        let i = comm_hints(info)?;
        // SAFETY: the caller's output argument, passed on (MPI contract).
        let rc = unsafe { crate::comm::PMPI_Comm_dup(comm, out) };
        if rc != class::SUCCESS {
            fail!(rc, "MPI_Comm_dup failed");
        }
        // SAFETY: MPI_Comm_dup succeeded, so `out` is non-NULL and holds the new handle.
        let h = unsafe { *out };
        st().comm_infos.insert(h, i);
        Ok(())
    })
}
