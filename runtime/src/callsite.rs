//! Where in the program an MPI call was made (issue 12, "source locations").
//!
//! A rank keeps the call site of the MPI call it is in as two words, [`SiteWords`], and
//! publishes them in its slot of the job segment when the call blocks, fails a test (see
//! `RankCtx::capture_fail`) or, in a replay, posts a descriptor, so the launcher can say `rank 1 blocked in MPI_Recv(...) at deadlock.c:23 (in
//! exchange)` (the launcher turns the words into a [`crate::symbolize::CallSite`]).
//!
//! * **Rust API** (`api`): its public functions are `#[track_caller]`, so the site is
//!   `Location::caller()`, free at run time. The words carry the file name's address and
//!   length in the rank's memory and the line; the launcher reads the name with
//!   cross-memory attach (`procmem`).
//! * **C and Fortran ABI** (`strobe-mpi`): Rust has no `__builtin_return_address`. The entry
//!   wrapper, inlined into every exported function, only records the address of a local of
//!   that function's frame (a marker: nothing else, so `MPI_Comm_rank` costs nothing more).
//!   When the call blocks (or, in replay, posts), [`current`] walks the stack once with the system
//!   unwinder (`backtrace`): the first frame whose stack pointer lies above the marker is
//!   the program's (the exported function's own stack pointer is below its locals); its
//!   instruction pointer is the return address into the program. Measured in
//!   docs/recording.md ("Call sites").
//!
//! Only the outermost entry counts: the C layer calls the Rust API, and some exported
//! functions call others; the program's call is the outermost one.

use std::cell::Cell;
use std::panic::Location;

/// A call site as the rank publishes it: `info == 0`: `addr` is a return address into the
/// program (0: unknown); otherwise `addr` is the address of a Rust source file name in the
/// rank's memory, `info` its length (high 32 bits) and the line (low 32 bits, never 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SiteWords {
    pub addr: u64,
    pub info: u64,
}

/// A [`SiteWords`] decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawSite {
    Unknown,
    /// A return address into the program (the call instruction ends just before it).
    Code(u64),
    /// A Rust source location: the file name's address and length, and the line.
    Rust {
        file: u64,
        len: u32,
        line: u32,
    },
}

impl SiteWords {
    pub const UNKNOWN: SiteWords = SiteWords { addr: 0, info: 0 };

    pub fn code(return_address: u64) -> SiteWords {
        SiteWords {
            addr: return_address,
            info: 0,
        }
    }

    pub fn rust(loc: &'static Location<'static>) -> SiteWords {
        let file = loc.file();
        SiteWords {
            addr: file.as_ptr() as u64,
            info: (u64::from(u32::try_from(file.len()).unwrap_or(u32::MAX)) << 32)
                | u64::from(loc.line().max(1)),
        }
    }

    pub fn decode(self) -> RawSite {
        match (self.addr, self.info) {
            (0, _) => RawSite::Unknown,
            (a, 0) => RawSite::Code(a),
            (a, i) => RawSite::Rust {
                file: a,
                len: (i >> 32) as u32,
                line: i as u32,
            },
        }
    }
}

#[derive(Clone, Copy)]
enum Pending {
    None,
    /// A C entry's marker: the stack has not been walked yet.
    Marker(usize),
    Known(SiteWords),
}

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    static SITE: Cell<Pending> = const { Cell::new(Pending::None) };
}

/// Held for the duration of an MPI call (see [`enter_c`], [`enter_rust`]).
pub struct SiteScope(());

impl Drop for SiteScope {
    fn drop(&mut self) {
        let depth = DEPTH.with(|d| {
            let n = d.get().saturating_sub(1);
            d.set(n);
            n
        });
        if depth == 0 {
            // The marker points into a frame that is about to go away.
            SITE.with(|s| s.set(Pending::None));
        }
    }
}

fn enter(site: impl FnOnce() -> Pending) -> SiteScope {
    let outer = DEPTH.with(|d| {
        let n = d.get();
        d.set(n + 1);
        n == 0
    });
    if outer {
        SITE.with(|s| s.set(site()));
    }
    SiteScope(())
}

/// A C or Fortran entry: `marker` is the address of a local of the exported function's own
/// frame (the entry wrapper is inlined into it).
#[inline(always)]
pub fn enter_c(marker: usize) -> SiteScope {
    enter(|| Pending::Marker(marker))
}

/// A Rust API entry (`#[track_caller]`).
#[inline]
pub fn enter_rust(loc: &'static Location<'static>) -> SiteScope {
    enter(|| Pending::Known(SiteWords::rust(loc)))
}

/// The site of the MPI call this thread is in (walking the stack once per call for a C
/// entry); [`SiteWords::UNKNOWN`] outside an MPI call.
pub fn current() -> SiteWords {
    SITE.with(|s| match s.get() {
        Pending::None => SiteWords::UNKNOWN,
        Pending::Known(w) => w,
        Pending::Marker(m) => {
            let w = SiteWords::code(return_address_above(m));
            s.set(Pending::Known(w));
            w
        }
    })
}

/// The return address of the frame that holds `marker`: the instruction pointer of the
/// first frame whose stack pointer lies above `marker` (the unwinder reports each frame's
/// stack pointer as it was inside that frame, below its locals, so the frame holding the
/// marker is the last one below it and the next one is its caller); 0 if the unwinder
/// cannot get there.
#[inline(never)]
fn return_address_above(marker: usize) -> u64 {
    let mut ret = 0u64;
    backtrace::trace(|frame| {
        if frame.sp() as usize > marker {
            ret = frame.ip() as u64;
            return false;
        }
        true
    });
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_sites_round_trip_and_only_the_outermost_entry_counts() {
        assert_eq!(current(), SiteWords::UNKNOWN);
        let here = Location::caller();
        let outer = enter_rust(here);
        {
            let _inner = enter_rust(Location::caller());
            assert_eq!(current(), SiteWords::rust(here));
        }
        match current().decode() {
            RawSite::Rust { len, line, .. } => {
                assert_eq!(len as usize, here.file().len());
                assert_eq!(line, here.line());
            }
            other => panic!("{other:?}"),
        }
        drop(outer);
        assert_eq!(current(), SiteWords::UNKNOWN);
    }

    #[inline(never)]
    fn exported_like(out: &mut u64) {
        let marker = 0u8;
        let _s = enter_c(std::hint::black_box(&marker) as *const u8 as usize);
        *out = nested();
    }

    #[inline(never)]
    fn nested() -> u64 {
        match current().decode() {
            RawSite::Code(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_c_entry_finds_the_return_address_into_its_caller() {
        let mut got = 0;
        exported_like(&mut got);
        // The return address lies inside this test function.
        let me = a_c_entry_finds_the_return_address_into_its_caller as *const () as u64;
        assert!(got > me && got < me + 4096, "{got:#x} vs {me:#x}");
    }
}
