//! `MPI_BOTTOM`, `MPI_IN_PLACE`, `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE` in Fortran.
//!
//! Fortran has no null pointers to pass, so (as in MPICH and Open MPI) each sentinel is a
//! variable in a named common block, and the library recognises it by its address. mpif.h
//! and the `mpi` module declare
//!
//! ```fortran
//! common /mpifcmb1/ MPI_BOTTOM          ! INTEGER
//! common /mpifcmb2/ MPI_IN_PLACE        ! INTEGER
//! common /mpifcmb3/ MPI_STATUS_IGNORE   ! INTEGER(MPI_STATUS_SIZE)
//! common /mpifcmb4/ MPI_STATUSES_IGNORE ! INTEGER(MPI_STATUS_SIZE,1)
//! ```
//!
//! and this file defines the blocks (gfortran's symbol for `/name/` is `name_`) with the
//! same sizes, so a program needs no Fortran object of ours. Where a block ends up
//! depends on the link: a program's objects hold each block as a COMMON symbol, which
//! takes precedence over libmpi.so's definition, so the program's copy is the one in use
//! and libmpi.so's own references are bound to it by the dynamic linker; in a static link
//! the two merge into one. We compare against both the address the dynamic linker gives
//! the name (`dlsym`) and our own, which covers both cases.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;

/// `MPI_STATUS_SIZE`: the C `MPI_Status` is 6 ints long (source, tag, error, cancelled
/// and the 64-bit byte count as two halves).
pub const STATUS_SIZE: usize = 6;

// The blocks are defined in assembly, not as Rust statics: gfortran gives a COMMON
// symbol its exact size and 16-byte alignment, and a static link merging a program's
// COMMON with a definition of another size or alignment warns. They are writable `.bss`
// data because Fortran sees ordinary variables (a program may legally assign to them).
core::arch::global_asm!(
    ".pushsection .bss",
    ".p2align 4",
    ".globl mpifcmb1_",
    ".type mpifcmb1_, \"object\"",
    "mpifcmb1_:",
    ".zero 4",
    ".size mpifcmb1_, 4",
    ".p2align 4",
    ".globl mpifcmb2_",
    ".type mpifcmb2_, \"object\"",
    "mpifcmb2_:",
    ".zero 4",
    ".size mpifcmb2_, 4",
    ".p2align 4",
    ".globl mpifcmb3_",
    ".type mpifcmb3_, \"object\"",
    "mpifcmb3_:",
    ".zero 24",
    ".size mpifcmb3_, 24",
    ".p2align 4",
    ".globl mpifcmb4_",
    ".type mpifcmb4_, \"object\"",
    "mpifcmb4_:",
    ".zero 24",
    ".size mpifcmb4_, 24",
    ".popsection",
);

extern "C" {
    static mpifcmb1_: c_int;
    static mpifcmb2_: c_int;
    static mpifcmb3_: [c_int; STATUS_SIZE];
    static mpifcmb4_: [c_int; STATUS_SIZE];
}

#[derive(Clone, Copy)]
enum Which {
    Bottom = 0,
    InPlace = 1,
    StatusIgnore = 2,
    StatusesIgnore = 3,
}

const NAMES: [&std::ffi::CStr; 4] = [c"mpifcmb1_", c"mpifcmb2_", c"mpifcmb3_", c"mpifcmb4_"];

/// The addresses of each block: ours, and the one the dynamic linker resolves the name
/// to (the program's copy, when it has one).
fn addresses() -> &'static [[usize; 2]; 4] {
    static ADDRS: OnceLock<[[usize; 2]; 4]> = OnceLock::new();
    ADDRS.get_or_init(|| {
        let own = [
            (&raw const mpifcmb1_) as usize,
            (&raw const mpifcmb2_) as usize,
            (&raw const mpifcmb3_) as usize,
            (&raw const mpifcmb4_) as usize,
        ];
        let mut out = [[0usize; 2]; 4];
        for (i, name) in NAMES.iter().enumerate() {
            // SAFETY: dlsym with a NUL-terminated name; a null result means "not
            // exported" (a static link), and then our own address is the only one.
            let dynamic =
                unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr() as *const c_char) };
            let dynamic = if dynamic.is_null() {
                own[i]
            } else {
                dynamic as usize
            };
            out[i] = [own[i], dynamic];
        }
        out
    })
}

fn is(p: *const c_void, which: Which) -> bool {
    let a = p as usize;
    a != 0 && addresses()[which as usize].contains(&a)
}

/// A Fortran choice buffer as the C layer wants it: `MPI_BOTTOM` is address 0 and
/// `MPI_IN_PLACE` is C's `(void *)-1`.
pub fn buf(p: *const c_void) -> *const c_void {
    if is(p, Which::Bottom) {
        std::ptr::null()
    } else if is(p, Which::InPlace) {
        usize::MAX as *const c_void
    } else {
        p
    }
}

/// Whether a status argument is `MPI_STATUS_IGNORE` (or `MPI_STATUSES_IGNORE`, which MPI
/// allows wherever a status array is expected).
pub fn status_ignored(p: *const c_int) -> bool {
    is(p as *const c_void, Which::StatusIgnore) || is(p as *const c_void, Which::StatusesIgnore)
}
