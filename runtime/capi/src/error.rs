//! Errors and the one wrapper every C entry point runs through.
//!
//! [`entry`] catches panics, turns an [`MpiErr`] into its error class and applies the
//! communicator's error handler: `MPI_ERRORS_ARE_FATAL` (the default) prints
//! `strobe: MPI_Send on rank 3: MPI_ERR_RANK: invalid rank 7 ...` on stderr and aborts the
//! job through the runtime's abort path; `MPI_ERRORS_RETURN` returns the class. Per-call
//! monitoring will hook in here too, so keep it the single place.

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use strobe_runtime::api;
use strobe_runtime::calls::Call;
use strobe_runtime::callsite;
use strobe_runtime::mmds;
use strobe_runtime::rank::RankCtx;

use crate::consts::{class, MpiComm, CLASS_NAMES, ERRORS_RETURN};
use crate::state;

thread_local! {
    /// The C entry point the calling thread is in (the outermost one, when an entry point
    /// calls another): which call created a request, for the leaked-request check.
    static CURRENT_CALL: std::cell::Cell<Option<Call>> = const { std::cell::Cell::new(None) };
}

/// The C entry point the calling thread is in.
pub fn current_call() -> Option<Call> {
    CURRENT_CALL.with(|c| c.get())
}

/// Marks the outermost entry point for its duration.
struct OutermostCall(bool);

impl OutermostCall {
    fn enter(call: Call) -> OutermostCall {
        let outermost = CURRENT_CALL.with(|c| c.get().is_none());
        if outermost {
            CURRENT_CALL.with(|c| c.set(Some(call)));
            // The type signatures this call's descriptors carry are the ones it sets.
            strobe_runtime::checks::begin_c_call();
        }
        OutermostCall(outermost)
    }
}

impl Drop for OutermostCall {
    fn drop(&mut self) {
        if self.0 {
            CURRENT_CALL.with(|c| c.set(None));
            strobe_runtime::checks::end_c_call();
        }
    }
}

/// An MPI error: its class and what exactly was wrong.
#[derive(Debug, Clone)]
pub struct MpiErr {
    pub class: c_int,
    pub msg: String,
}

pub type MpiResult<T = ()> = Result<T, MpiErr>;

impl MpiErr {
    pub fn new(class: c_int, msg: impl Into<String>) -> MpiErr {
        MpiErr {
            class,
            msg: msg.into(),
        }
    }
}

/// Shorthand: `Err(MpiErr)` with a formatted message.
macro_rules! fail {
    ($class:expr, $($fmt:tt)*) => {
        return Err($crate::error::MpiErr::new($class, format!($($fmt)*)))
    };
}
pub(crate) use fail;

impl From<api::Error> for MpiErr {
    fn from(e: api::Error) -> MpiErr {
        let c = match e {
            api::Error::Truncate => class::TRUNCATE,
            api::Error::Rank => class::RANK,
            api::Error::Tag => class::TAG,
            api::Error::Comm => class::COMM,
            api::Error::Count => class::COUNT,
            api::Error::Op => class::OP,
            api::Error::Arg => class::ARG,
            api::Error::Buffer => class::BUFFER,
            api::Error::CollectiveMismatch | api::Error::Aborted | api::Error::Init(_) => {
                class::OTHER
            }
        };
        // api::Error's text already starts with the class name where it has one.
        let text = e.to_string();
        let name = class_name(c);
        let msg = text
            .strip_prefix(name)
            .map(|s| s.trim_start_matches(':').trim().to_string())
            .unwrap_or(text);
        MpiErr::new(c, msg)
    }
}

/// The `MPI_ERR_*` name of a class.
pub fn class_name(c: c_int) -> &'static str {
    usize::try_from(c)
        .ok()
        .and_then(|i| CLASS_NAMES.get(i))
        .map_or("MPI_ERR_UNKNOWN", |(n, _)| n)
}

/// The description `MPI_Error_string` gives for a class.
pub fn class_text(c: c_int) -> Option<&'static str> {
    usize::try_from(c)
        .ok()
        .and_then(|i| CLASS_NAMES.get(i))
        .map(|(_, t)| *t)
}

fn rank_text() -> String {
    match RankCtx::get() {
        Some(c) => format!("rank {}", c.rank()),
        None => format!("pid {} (before MPI_Init)", std::process::id()),
    }
}

/// Where each C entry point's return address lies from its call-site marker, learned on
/// its first stack walk (`strobe_runtime::callsite::ReturnSlot`): one per entry point,
/// whose frame layout is fixed.
static RETURN_SLOTS: [callsite::ReturnSlot; Call::ALL.len()] =
    [const { callsite::ReturnSlot::new() }; Call::ALL.len()];

/// Run one C entry point. `call` is its identity in the call table
/// (`strobe_runtime::calls`), `comm` the communicator whose error handler applies
/// (`MPI_COMM_WORLD` for calls without one).
///
/// Always inlined into the exported function, so `marker` lives in that function's frame:
/// the call site of the program's call is found from it when the call blocks or polls in
/// vain, or posts in a replay (`strobe_runtime::callsite`; nothing is walked otherwise).
#[inline(always)]
pub fn entry(call: Call, comm: MpiComm, f: impl FnOnce() -> MpiResult) -> c_int {
    let _outermost = OutermostCall::enter(call);
    let marker = 0u8;
    let _site = callsite::enter_c_at(
        std::hint::black_box(&marker) as *const u8 as usize,
        &RETURN_SLOTS[call as usize],
    );
    // Clock reads and getpid calls made inside an MPI call are the runtime's: not recorded.
    let _in_mpi = crate::libc_replay::InMpi::enter();
    // Per-call monitoring (MMDS) under the C name: the Rust API calls inside are nested and
    // only pass up the bytes they move. Local calls (`MPI_Comm_rank`, ...) are not measured.
    // `primitive()` is a `match` on the typed identity: no string lookup per call.
    let _mmds = call.primitive().map(mmds::enter);
    let err = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return class::SUCCESS,
        Ok(Err(e)) => e,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_string());
            MpiErr::new(class::INTERN, format!("internal error: {what}"))
        }
    };
    let eh = state::errhandler_of(comm);
    if eh == ERRORS_RETURN {
        return err.class;
    }
    if let Some(f) = crate::errhan::user_handler(eh) {
        crate::errhan::invoke(f, comm, err.class);
        return err.class;
    }
    fatal(call.mpi_name(), &err)
}

/// `MPI_ERRORS_ARE_FATAL`: say what happened and take the whole job down.
pub fn fatal(name: &str, err: &MpiErr) -> ! {
    eprintln!(
        "strobe: {name} on {}: {}: {}",
        rank_text(),
        class_name(err.class),
        err.msg
    );
    // The class is the exit status the launcher reports (never 0).
    api::abort(err.class.max(1))
}
