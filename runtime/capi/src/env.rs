//! Environment: init and finalize, abort, versions, clocks, memory, error classes and
//! error handlers.

use std::collections::BTreeMap;
use std::os::raw::{c_char, c_int, c_void};
use strobe_runtime::calls::Call;

use strobe_runtime::api;

use crate::consts::*;
use crate::error::{class_name, class_text, entry, fail, MpiResult};
use crate::state::{st, CommEntry};
use crate::util::{put, put_str};

/// `MPI_ERR_OTHER` unless `MPI_Init` has run and `MPI_Finalize` has not.
pub fn ready() -> MpiResult {
    let s = st();
    if !s.initialized {
        fail!(class::OTHER, "MPI_Init has not been called");
    }
    if s.finalized {
        fail!(class::OTHER, "called after MPI_Finalize");
    }
    Ok(())
}

pub fn init(provided: c_int) -> MpiResult {
    {
        let s = st();
        if s.initialized {
            fail!(class::OTHER, "MPI_Init was already called");
        }
    }
    let world = api::init().map_err(crate::error::MpiErr::from)?;
    let me = api::comm_self();
    let mut s = st();
    for (h, comm, name) in [
        (COMM_WORLD, world, "MPI_COMM_WORLD"),
        (COMM_SELF, me, "MPI_COMM_SELF"),
    ] {
        s.comms.insert(
            h,
            CommEntry {
                comm,
                errhandler: ERRORS_ARE_FATAL,
                name: name.to_string(),
                attrs: BTreeMap::new(),
            },
        );
    }
    s.initialized = true;
    s.thread_level = provided;
    crate::libc_replay::start();
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    entry(Call::Init, COMM_WORLD, || init(0))
}

/// Ranks are single-threaded towards the runtime: at most `MPI_THREAD_FUNNELED`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    entry(Call::InitThread, COMM_WORLD, || {
        let level = required.clamp(0, THREAD_FUNNELED);
        init(level)?;
        // SAFETY: `provided` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(provided, level, "provided") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Query_thread(provided: *mut c_int) -> c_int {
    entry(Call::QueryThread, COMM_WORLD, || {
        let level = st().thread_level;
        // SAFETY: `provided` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(provided, level, "provided") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Is_thread_main(flag: *mut c_int) -> c_int {
    entry(Call::IsThreadMain, COMM_WORLD, || {
        // SAFETY: gettid has no preconditions; the main thread's tid is the pid.
        let main = unsafe { libc::gettid() } == std::process::id() as libc::pid_t;
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, main as c_int, "flag") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Initialized(flag: *mut c_int) -> c_int {
    entry(Call::Initialized, COMM_WORLD, || {
        let v = st().initialized;
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, v as c_int, "flag") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Finalized(flag: *mut c_int) -> c_int {
    entry(Call::Finalized, COMM_WORLD, || {
        let v = st().finalized;
        // SAFETY: `flag` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(flag, v as c_int, "flag") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Finalize() -> c_int {
    entry(Call::Finalize, COMM_WORLD, || {
        ready()?;
        crate::libc_replay::stop();
        // MPI-2.2 8.7.1: MPI_Finalize first deletes MPI_COMM_SELF's attributes (their
        // delete callbacks are how libraries learn that MPI is finalizing).
        crate::attrs::delete_attrs(COMM_SELF)?;
        // Requests freed while active (and buffered sends) must be done before we leave.
        crate::request::reap_detached();
        api::finalize_with_leaks(&crate::state::live_request_origins());
        st().finalized = true;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Abort(_comm: MpiComm, code: c_int) -> c_int {
    // MPI_Abort aborts every rank whatever the communicator: the runtime takes the whole
    // job down and the launcher reports the code.
    entry(Call::Abort, COMM_WORLD, || api::abort(code))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Get_processor_name(name: *mut c_char, len: *mut c_int) -> c_int {
    entry(Call::GetProcessorName, COMM_WORLD, || {
        let mut buf = [0u8; 256];
        // SAFETY: buf is writable for its length; gethostname NUL-terminates on success.
        let r = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut c_char, buf.len() - 1) };
        let host = if r == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).into_owned()
        } else {
            "localhost".to_string()
        };
        // SAFETY: `name` is a C string buffer of the given capacity, the length an output argument
        // (MPI contract).
        unsafe { put_str(name, MAX_PROCESSOR_NAME, &host, len) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    entry(Call::GetVersion, COMM_WORLD, || {
        // SAFETY: `version` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(version, 3, "version") }?;
        // SAFETY: `subversion` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(subversion, 1, "subversion") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Get_library_version(version: *mut c_char, len: *mut c_int) -> c_int {
    entry(Call::GetLibraryVersion, COMM_WORLD, || {
        let text = format!(
            "strobe {} (MPI 3.1 subset on a Buffered Coscheduling runtime, deterministic record/replay)",
            env!("CARGO_PKG_VERSION")
        );
        // SAFETY: `version` is a C string buffer of the given capacity, the length an output
        // argument (MPI contract).
        unsafe { put_str(version, MAX_LIBRARY_VERSION_STRING, &text, len) }
    })
}

/// `MPI_Wtime` reads the clock through the runtime only (`api::wtime`), so the recorder
/// captures every value and the replayer can force it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Wtime() -> f64 {
    let mut t = 0.0;
    entry(Call::Wtime, COMM_WORLD, || {
        t = api::wtime();
        Ok(())
    });
    t
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Wtick() -> f64 {
    let mut tick = 1e-9;
    entry(Call::Wtick, COMM_WORLD, || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespec pointer; CLOCK_MONOTONIC exists on Linux.
        if unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) } == 0 {
            tick = ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
        Ok(())
    });
    tick
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Alloc_mem(
    size: MpiAint,
    _info: c_int,
    baseptr: *mut c_void,
) -> c_int {
    entry(Call::AllocMem, COMM_WORLD, || {
        if size < 0 {
            fail!(class::ARG, "negative size {size}");
        }
        // SAFETY: malloc has no preconditions; a zero size still gets a unique pointer.
        let p = unsafe { libc::malloc((size as usize).max(1)) };
        if p.is_null() {
            fail!(class::NO_MEM, "cannot allocate {size} bytes");
        }
        // SAFETY: `baseptr as *mut *mut c_void` is a C output argument: NULL or writable (MPI
        // contract).
        unsafe { put(baseptr as *mut *mut c_void, p, "baseptr") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Free_mem(base: *mut c_void) -> c_int {
    entry(Call::FreeMem, COMM_WORLD, || {
        // SAFETY: MPI requires `base` to come from MPI_Alloc_mem (malloc) or be NULL.
        unsafe { libc::free(base) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Error_string(
    code: c_int,
    string: *mut c_char,
    len: *mut c_int,
) -> c_int {
    entry(Call::ErrorString, COMM_WORLD, || {
        if let Some(u) = crate::errhan::user_code(code) {
            // SAFETY: as below.
            return unsafe { put_str(string, MAX_ERROR_STRING, &u.text, len) };
        }
        let Some(text) = class_text(code) else {
            fail!(class::ARG, "unknown error code {code}");
        };
        // SAFETY: `string` is a C string buffer of the given capacity, the length an output
        // argument (MPI contract).
        unsafe {
            put_str(
                string,
                MAX_ERROR_STRING,
                &format!("{}: {text}", class_name(code)),
                len,
            )
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Error_class(code: c_int, out: *mut c_int) -> c_int {
    entry(Call::ErrorClass, COMM_WORLD, || {
        let class = match crate::errhan::user_code(code) {
            Some(u) => u.class,
            None if class_text(code).is_some() => code,
            None => fail!(class::ARG, "unknown error code {code}"),
        };
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(out, class, "errorclass") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_set_errhandler(comm: MpiComm, eh: MpiErrhandler) -> c_int {
    entry(Call::CommSetErrhandler, comm, || {
        ready()?;
        if !crate::errhan::is_errhandler(eh) {
            fail!(class::ARG, "invalid error handler {eh}");
        }
        match st().comms.get_mut(&comm) {
            Some(c) => c.errhandler = eh,
            None => fail!(class::COMM, "invalid communicator handle {comm}"),
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Comm_get_errhandler(comm: MpiComm, eh: *mut MpiErrhandler) -> c_int {
    entry(Call::CommGetErrhandler, comm, || {
        ready()?;
        let h = match st().comms.get(&comm) {
            Some(c) => c.errhandler,
            None => fail!(class::COMM, "invalid communicator handle {comm}"),
        };
        // SAFETY: `eh` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(eh, h, "errhandler") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Errhandler_free(eh: *mut MpiErrhandler) -> c_int {
    entry(Call::ErrhandlerFree, COMM_WORLD, || {
        // SAFETY: `eh` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(eh, ERRHANDLER_NULL, "errhandler") }
    })
}
