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
//!   The walk costs 1-3 us (a 2-rank `MPI_Allreduce` took 11 us with it, 7.6 without), so
//!   an exported C function learns where its return address lies ([`ReturnSlot`]): the
//!   first walk finds the slot (x86-64: just below the caller's stack pointer, which the
//!   unwinder reports) and checks that it holds the address the unwinder returned; then
//!   the slot's distance from the marker is fixed for that function (unless its prologue
//!   realigns the stack, which the first walk checks), and later calls read the return
//!   address from it, walking again every [`RECHECK`]th call: a function whose distance
//!   changes stops being read that way. (docs/recording.md once rejected such a cache for
//!   realigned frames: the prologue check and the rechecks answer that.)
//!
//! Only the outermost entry counts: the C layer calls the Rust API, and some exported
//! functions call others; the program's call is the outermost one.

use std::cell::Cell;
use std::panic::Location;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

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
    /// A C entry's marker (and where its function's return address lies, if it learns
    /// it): the stack has not been walked yet.
    Marker(usize, Option<&'static ReturnSlot>),
    Known(SiteWords),
}

/// One exported function's return address slot, as a distance from its marker (see the
/// module docs): learned on its first walk, rechecked every [`RECHECK`]th call.
pub struct ReturnSlot {
    offset: AtomicI64,
    calls: AtomicU32,
}

/// Not learned yet.
const UNKNOWN: i64 = i64::MIN;
/// Not at a fixed distance (or not checkable): always walk.
const UNUSABLE: i64 = i64::MIN + 1;
/// One call in this many walks the stack anyway, to check the learned slot.
pub const RECHECK: u32 = 256;
/// Largest distance learned from a marker to its return address slot: an exported
/// function's frame. A larger one is not learned (the function keeps walking), so a
/// learned slot read from another frame layout (one call entered from two functions,
/// until the next recheck notices) stays within a frame's reach of a live local.
const MAX_FRAME: usize = 4096;

impl Default for ReturnSlot {
    fn default() -> Self {
        Self::new()
    }
}

impl ReturnSlot {
    pub const fn new() -> ReturnSlot {
        ReturnSlot {
            offset: AtomicI64::new(UNKNOWN),
            calls: AtomicU32::new(0),
        }
    }

    /// The return address of the call whose marker is `marker`.
    fn return_address(&self, marker: usize) -> u64 {
        let offset = self.offset.load(Ordering::Relaxed);
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        if cfg!(target_arch = "x86_64") && offset > UNUSABLE && call % RECHECK != 0 {
            // SAFETY: `marker` is the address of a local of the exported function's frame,
            // which is live (this runs inside the call, deeper on the same stack), and a
            // walk of this function found its return address slot `offset` bytes from its
            // marker and checked it (`learn`): the slot is the 8 bytes the caller's `call`
            // pushed, inside the live stack above the frame. Read as plain bytes.
            return unsafe {
                std::ptr::read_volatile(marker.wrapping_add_signed(offset as isize) as *const u64)
            };
        }
        let walked = return_address_above(marker);
        if offset != UNUSABLE {
            self.learn(marker, walked, offset);
        }
        walked.ip
    }

    /// After a walk: keep (or confirm) the slot's distance if the slot holds the return
    /// address and the function does not realign its stack.
    fn learn(&self, marker: usize, walked: Walked, known: i64) {
        let Walked {
            ip,
            caller_sp,
            function,
        } = walked;
        let slot = caller_sp.wrapping_sub(8);
        let fits = cfg!(target_arch = "x86_64")
            && ip != 0
            && slot > marker
            && slot - marker < MAX_FRAME
            && (known != UNKNOWN || !realigns_stack(function));
        // SAFETY: read only when `slot` lies just below the caller's stack pointer and
        // above the marker, within `MAX_FRAME`: inside the live stack between the exported
        // function's frame and its caller's (the return address `call` pushed).
        let holds_ip = fits && unsafe { std::ptr::read_volatile(slot as *const u64) } == ip;
        let offset = (slot as i64).wrapping_sub(marker as i64);
        let learned = match (holds_ip, known) {
            (true, UNKNOWN) => offset,
            (true, k) if k == offset => return,
            _ => UNUSABLE,
        };
        self.offset.store(learned, Ordering::Relaxed);
    }
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
    enter(|| Pending::Marker(marker, None))
}

/// [`enter_c`] for an exported function with its own [`ReturnSlot`] (one `static` per
/// function: the distance is a property of its frame).
#[inline(always)]
pub fn enter_c_at(marker: usize, slot: &'static ReturnSlot) -> SiteScope {
    enter(|| Pending::Marker(marker, Some(slot)))
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
        Pending::Marker(m, slot) => {
            let ip = match slot {
                Some(slot) => slot.return_address(m),
                None => return_address_above(m).ip,
            };
            let w = SiteWords::code(ip);
            s.set(Pending::Known(w));
            w
        }
    })
}

/// What a walk from inside an MPI call finds about the exported function's frame.
#[derive(Clone, Copy, Default)]
struct Walked {
    /// The return address into the program (0: the unwinder could not get there).
    ip: u64,
    /// The program's stack pointer at the call (the exported function's frame is below).
    caller_sp: usize,
    /// The start of the exported function's code (0: unknown).
    function: usize,
}

/// The return address of the frame that holds `marker`: the instruction pointer of the
/// first frame whose stack pointer lies above `marker` (the unwinder reports each frame's
/// stack pointer as it was inside that frame, below its locals, so the frame holding the
/// marker is the last one below it and the next one is its caller), with that caller's
/// stack pointer and the start of the function that holds the marker.
#[inline(never)]
fn return_address_above(marker: usize) -> Walked {
    let mut found = Walked::default();
    let mut function = 0usize;
    backtrace::trace(|frame| {
        if frame.sp() as usize > marker {
            found = Walked {
                ip: frame.ip() as u64,
                caller_sp: frame.sp() as usize,
                function,
            };
            return false;
        }
        function = frame.symbol_address() as usize;
        true
    });
    found
}

/// Whether the x86-64 code at `function` realigns its stack in its prologue (`and rsp,
/// imm`: `48 83 e4 ib` or `48 81 e4 id` within its first 64 bytes): such a frame's
/// locals move against its return address with the caller's stack alignment, so the
/// distance from the marker is not fixed. A false match only makes the function walk.
fn realigns_stack(function: usize) -> bool {
    if function == 0 {
        return true;
    }
    // SAFETY: `function` is the start of a function of this library, found by the unwinder
    // from a frame that is executing it: its code is mapped and readable (text segments are
    // r-x), at least the 64 bytes of a prologue long or followed by more of the segment.
    let code = unsafe { std::slice::from_raw_parts(function as *const u8, 64) };
    code.windows(3)
        .any(|w| w[0] == 0x48 && (w[1] == 0x83 || w[1] == 0x81) && w[2] == 0xe4)
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

    // Not inlined into the test harness (a release build did): the return address must
    // lie in this function's own code.
    #[test]
    #[inline(never)]
    fn a_c_entry_finds_the_return_address_into_its_caller() {
        let mut got = 0;
        exported_like(&mut got);
        // The return address lies inside this test function.
        let me = a_c_entry_finds_the_return_address_into_its_caller as *const () as u64;
        assert!(got > me && got < me + 4096, "{got:#x} vs {me:#x}");
    }

    static SLOT: ReturnSlot = ReturnSlot::new();

    #[inline(never)]
    fn exported_with_slot(out: &mut u64) {
        let marker = 0u8;
        let _s = enter_c_at(std::hint::black_box(&marker) as *const u8 as usize, &SLOT);
        *out = nested();
    }

    // Not inlined into the test harness (a release build did): the return address must
    // lie in this function's own code.
    #[test]
    #[inline(never)]
    fn a_learned_return_slot_gives_each_call_its_own_return_address() {
        let me = a_learned_return_slot_gives_each_call_its_own_return_address as *const () as u64;
        let inside = |a: u64| a > me && a < me + 4096;
        let (mut first, mut second, mut third) = (0, 0, 0);
        exported_with_slot(&mut first); // walks, learns the slot
        exported_with_slot(&mut second); // reads the slot
        exported_with_slot(&mut third);
        assert!(
            inside(first) && inside(second) && inside(third),
            "{first:#x} {second:#x} {third:#x} vs {me:#x}"
        );
        assert!(
            first < second && second < third,
            "three call sites in order: {first:#x} {second:#x} {third:#x}"
        );
        if cfg!(target_arch = "x86_64") {
            let offset = SLOT.offset.load(Ordering::Relaxed);
            assert!(offset > 0 && offset < MAX_FRAME as i64, "learned {offset}");
        }
    }
}
