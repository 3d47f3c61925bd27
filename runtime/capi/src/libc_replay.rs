//! Nondeterminism outside MPI (issue 17, item 8): `libmpi` interposes `time`,
//! `gettimeofday`, `clock_gettime` (`CLOCK_REALTIME`, `CLOCK_MONOTONIC`), `getpid` and
//! `getrandom`, so a
//! program that seeds `rand()` with `time(NULL) ^ getpid()` replays the run it recorded.
//!
//! While the rank is inside a recorded job (from a successful `MPI_Init` to `MPI_Finalize`,
//! on the thread that called `MPI_Init`, outside any MPI call), each call's value goes
//! into the rank's outcome stream (`RankCtx::libc_value`, an `OUT_LIBC` record beside the
//! `MPI_Wtime` ones) and, in replay, the recorded value is returned; a different call at
//! that point is a divergence. Everything else passes straight to the C library:
//!
//! * other threads (their order against the main thread's calls is not recorded), calls
//!   made by the runtime itself (every MPI entry point raises [`InMpi`]), calls before
//!   `MPI_Init` or after `MPI_Finalize`, and every call when `STROBE_LIBC_REPLAY=0`
//!   (`strobe record --no-libc-replay`);
//! * other clocks (`CLOCK_PROCESS_CPUTIME_ID`, ...), and what is not interposed at all:
//!   `gethostname` (the replay runs on the recording's machine), `getentropy`, reads of
//!   `/dev/urandom`, `rdtsc`, and direct system calls. rr covers those at the syscall level;
//!   strobe stops at the libc entry points above (`docs/mpi-support.md`).
//!
//! The interposers run before Rust's runtime is ready and inside libc internals: they never
//! allocate or panic on the pass-through path (const thread-locals without destructors,
//! `dlsym(RTLD_NEXT)` for the real functions), and the recording path catches panics.

use std::cell::Cell;
use std::ffi::{c_int, c_uint, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{clockid_t, pid_t, time_t, timespec, timeval};
use strobe_runtime::outcome::LibcCall;
use strobe_runtime::rank::RankCtx;

/// Environment variable: `0` turns the recording of these calls off for the job.
pub const ENV_LIBC_REPLAY: &str = "STROBE_LIBC_REPLAY";

thread_local! {
    /// This thread called `MPI_Init`, the job has not finalized, and the calls are recorded.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
    /// Depth of MPI calls (and of the interposer itself) on this thread: nonzero means a
    /// clock read by the runtime or a nested call, which passes through.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Held for the duration of an MPI call: the runtime's own clock reads pass through.
pub struct InMpi;

impl InMpi {
    pub fn enter() -> InMpi {
        DEPTH.with(|d| d.set(d.get() + 1));
        InMpi
    }
}

impl Drop for InMpi {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// After a successful `MPI_Init`: record this thread's calls unless turned off.
pub fn start() {
    let off = std::env::var(ENV_LIBC_REPLAY).is_ok_and(|v| v.trim() == "0");
    RECORDING.with(|r| r.set(!off));
}

/// At `MPI_Finalize`: pass everything through from now on.
pub fn stop() {
    RECORDING.with(|r| r.set(false));
}

/// The recorded (or, in replay, recorded-then-returned) value of `call`, or `real()` when
/// the call is not recorded.
fn replayed(call: LibcCall, real: impl Fn() -> u64) -> u64 {
    let active = RECORDING.with(|r| r.get()) && DEPTH.with(|d| d.get()) == 0;
    if !active {
        return real();
    }
    let _nested = InMpi::enter();
    let got = catch_unwind(AssertUnwindSafe(|| match RankCtx::get() {
        Some(ctx) => ctx.libc_value(call, &real),
        None => real(),
    }));
    got.unwrap_or_else(|_| real())
}

/// The next definition of `name` after libmpi (the C library's), cached in `slot`
/// (0 = not looked up, 1 = not found).
fn next_symbol(slot: &AtomicUsize, name: &'static [u8]) -> Option<usize> {
    let mut p = slot.load(Ordering::Relaxed);
    if p == 0 {
        // SAFETY: `name` is a NUL-terminated literal; RTLD_NEXT looks past this object.
        let s = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
        p = if s == 0 { 1 } else { s };
        slot.store(p, Ordering::Relaxed);
    }
    (p != 1).then_some(p)
}

static REAL_CLOCK_GETTIME: AtomicUsize = AtomicUsize::new(0);
static REAL_GETPID: AtomicUsize = AtomicUsize::new(0);
static REAL_GETRANDOM: AtomicUsize = AtomicUsize::new(0);

/// The C library's `getrandom` into `buf`: the byte count, or `-errno`.
fn real_getrandom(buf: &mut [u8], flags: c_uint) -> i64 {
    real_getrandom_raw(buf.as_mut_ptr().cast(), buf.len(), flags)
}

/// The C library's `getrandom` on the caller's pointer as given (null, zero length).
fn real_getrandom_raw(p: *mut c_void, len: usize, flags: c_uint) -> i64 {
    let ret = match next_symbol(&REAL_GETRANDOM, b"getrandom\0") {
        Some(f) => {
            // SAFETY: the symbol is libc's getrandom, of this signature.
            let f: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> isize =
                unsafe { std::mem::transmute(f) };
            // SAFETY: the caller's pointer and length, as getrandom(2) takes them.
            unsafe { f(p, len, flags) as i64 }
        }
        // SAFETY: the caller's pointer and length, as getrandom(2) takes them.
        None => unsafe { libc::syscall(libc::SYS_getrandom, p, len, flags) },
    };
    if ret < 0 {
        // SAFETY: errno is this thread's.
        -i64::from(unsafe { *libc::__errno_location() })
    } else {
        ret
    }
}

/// The C library's `clock_gettime` (the system call if it cannot be found).
fn real_clock_gettime(clock: clockid_t, ts: *mut timespec) -> c_int {
    match next_symbol(&REAL_CLOCK_GETTIME, b"clock_gettime\0") {
        Some(f) => {
            // SAFETY: the symbol is libc's clock_gettime, of this signature.
            let f: unsafe extern "C" fn(clockid_t, *mut timespec) -> c_int =
                unsafe { std::mem::transmute(f) };
            // SAFETY: the caller's pointer, passed on unchanged.
            unsafe { f(clock, ts) }
        }
        // SAFETY: the caller's pointer, passed on unchanged.
        None => unsafe { libc::syscall(libc::SYS_clock_gettime, clock, ts) as c_int },
    }
}

fn real_ns(clock: clockid_t) -> u64 {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    real_clock_gettime(clock, &mut ts);
    // 64-bit time_t and tv_nsec on every target libmpi is built for.
    ts.tv_sec
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec) as u64
}

fn real_getpid() -> pid_t {
    match next_symbol(&REAL_GETPID, b"getpid\0") {
        Some(f) => {
            // SAFETY: the symbol is libc's getpid, of this signature.
            let f: unsafe extern "C" fn() -> pid_t = unsafe { std::mem::transmute(f) };
            // SAFETY: getpid has no preconditions.
            unsafe { f() }
        }
        // SAFETY: getpid has no preconditions.
        None => unsafe { libc::syscall(libc::SYS_getpid) as pid_t },
    }
}

/// `time(2)`, recorded in seconds.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn time(t: *mut time_t) -> time_t {
    let secs = replayed(LibcCall::Time, || {
        (real_ns(libc::CLOCK_REALTIME) as i64).div_euclid(1_000_000_000) as u64
    }) as time_t;
    if !t.is_null() {
        // SAFETY: time(2) writes its result through a non-null pointer.
        unsafe { *t = secs };
    }
    secs
}

/// `gettimeofday(2)`, recorded in microseconds; the time zone (obsolete) is not filled.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gettimeofday(tv: *mut timeval, _tz: *mut c_void) -> c_int {
    if tv.is_null() {
        return 0;
    }
    let us = replayed(LibcCall::Gettimeofday, || {
        (real_ns(libc::CLOCK_REALTIME) as i64).div_euclid(1000) as u64
    }) as i64;
    // SAFETY: a non-null timeval from the caller.
    unsafe {
        (*tv).tv_sec = us.div_euclid(1_000_000) as _;
        (*tv).tv_usec = us.rem_euclid(1_000_000) as _;
    }
    0
}

/// `clock_gettime(2)`: the realtime and monotonic clocks recorded in nanoseconds, others
/// passed through.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clock_gettime(clock: clockid_t, ts: *mut timespec) -> c_int {
    let call = match clock {
        libc::CLOCK_REALTIME => LibcCall::ClockRealtime,
        libc::CLOCK_MONOTONIC => LibcCall::ClockMonotonic,
        _ => return real_clock_gettime(clock, ts),
    };
    if ts.is_null() {
        return real_clock_gettime(clock, ts);
    }
    let ns = replayed(call, || real_ns(clock)) as i64;
    // SAFETY: a non-null timespec from the caller.
    unsafe {
        (*ts).tv_sec = ns.div_euclid(1_000_000_000) as _;
        (*ts).tv_nsec = ns.rem_euclid(1_000_000_000) as _;
    }
    0
}

/// `getpid(2)`: a replay runs in new processes, the program sees the recorded pid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getpid() -> pid_t {
    replayed(LibcCall::Getpid, || real_getpid() as u32 as u64) as u32 as pid_t
}

/// `getrandom(2)`: the bytes (and the count, or the error) recorded and replayed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(buf: *mut c_void, len: usize, flags: c_uint) -> isize {
    let ret = if buf.is_null() || len == 0 || len > isize::MAX as usize {
        real_getrandom_raw(buf, len, flags)
    } else {
        // SAFETY: getrandom(2) writes up to `len` bytes at a non-null `buf`.
        let bytes = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        if !RECORDING.with(|r| r.get()) || DEPTH.with(|d| d.get()) != 0 {
            real_getrandom(bytes, flags)
        } else {
            let _nested = InMpi::enter();
            let got = catch_unwind(AssertUnwindSafe(|| {
                RankCtx::get().map(|ctx| ctx.libc_random(bytes, |b| real_getrandom(b, flags)))
            }));
            match got {
                Ok(Some(r)) => r,
                _ => real_getrandom(bytes, flags),
            }
        }
    };
    if ret < 0 {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = (-ret) as c_int };
        return -1;
    }
    ret as isize
}
