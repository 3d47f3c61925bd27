//! Small helpers shared by the entry points: aligned scratch buffers, byte element types
//! for the Rust API, and checked access to C output arguments.

use std::os::raw::{c_char, c_int, c_void};

use strobe_runtime::api::Equivalence;
use strobe_runtime::datatype::ElemType;

use crate::consts::class;
use crate::error::{fail, MpiResult};

/// Opaque bytes (`ElemType::Byte`): how the C layer moves data through the runtime.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RawByte(pub u8);
// SAFETY: one byte, any bit pattern valid, layout of ElemType::Byte.
unsafe impl Equivalence for RawByte {
    const ELEM: ElemType = ElemType::Byte;
}

/// C `_Bool` for logical reductions.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RawBool(pub u8);
// SAFETY: one byte; the Reduce Helper writes only 0 or 1 (and C _Bool is one byte).
unsafe impl Equivalence for RawBool {
    const ELEM: ElemType = ElemType::Bool;
}

/// A zeroed byte buffer aligned to 16 bytes, so it can be viewed as any element type
/// (C `malloc` gives the same guarantee; the runtime's pair types need 8).
pub struct Bytes {
    words: Vec<u128>,
    len: usize,
}

impl Bytes {
    pub fn zeroed(len: usize) -> Bytes {
        Bytes {
            words: vec![0u128; len.div_ceil(16)],
            len,
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn as_ptr(&self) -> *const u8 {
        self.words.as_ptr() as *const u8
    }
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.words.as_mut_ptr() as *mut u8
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr(), self.len) }
    }
    /// A typed view (the buffer is 16-aligned; `T` is plain data).
    pub fn typed<T: Equivalence>(&self) -> &[T] {
        let n = self.len / std::mem::size_of::<T>().max(1);
        // SAFETY: 16-byte alignment covers every Equivalence type; bytes are initialised
        // and every bit pattern is a valid T (Equivalence contract).
        unsafe { std::slice::from_raw_parts(self.as_ptr() as *const T, n) }
    }
    pub fn typed_mut<T: Equivalence>(&mut self) -> &mut [T] {
        let n = self.len / std::mem::size_of::<T>().max(1);
        // SAFETY: as in `typed`, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr() as *mut T, n) }
    }
    /// The bytes as the runtime's opaque element type. A non-blocking call that must
    /// outlive this borrow posts through the runtime's `unsafe` raw path, and the request
    /// table keeps the `Bytes` (whose heap block does not move with it) until completion.
    pub fn as_raw(&self) -> &[RawByte] {
        self.typed::<RawByte>()
    }
    pub fn as_raw_mut(&mut self) -> &mut [RawByte] {
        self.typed_mut::<RawByte>()
    }
}

/// A byte slice over C memory. `len == 0` gives an empty slice whatever `p` is.
///
/// # Safety
/// `p` must point at `len` readable bytes that stay valid for as long as the slice is used.
pub unsafe fn raw_bytes<'a>(p: *const u8, len: usize) -> &'a [RawByte] {
    if len == 0 || p.is_null() {
        return &[];
    }
    // SAFETY: per the function contract; RawByte has alignment 1.
    unsafe { std::slice::from_raw_parts(p as *const RawByte, len) }
}

/// A mutable byte slice over C memory.
///
/// # Safety
/// `p` must point at `len` writable bytes, not otherwise accessed while the slice is used.
pub unsafe fn raw_bytes_mut<'a>(p: *mut u8, len: usize) -> &'a mut [RawByte] {
    if len == 0 || p.is_null() {
        return &mut [];
    }
    // SAFETY: per the function contract; RawByte has alignment 1.
    unsafe { std::slice::from_raw_parts_mut(p as *mut RawByte, len) }
}

/// Store `v` through a C output pointer (`MPI_ERR_ARG` if it is NULL).
///
/// # Safety
/// `p` must be NULL or valid for writing one `T` (a C output argument).
pub unsafe fn put<T>(p: *mut T, v: T, what: &str) -> MpiResult {
    if p.is_null() {
        fail!(class::ARG, "{what} is NULL");
    }
    // SAFETY: non-null; the MPI program passes a pointer to a T it owns.
    unsafe { p.write(v) };
    Ok(())
}

/// Read a C input array of `n` elements (`MPI_ERR_ARG` if NULL while `n > 0`).
///
/// # Safety
/// `p` must be NULL or point at `n` initialised `T`s that stay valid and unmodified for
/// `'a` (a C input array, valid for the duration of the call).
pub unsafe fn array<'a, T>(p: *const T, n: usize, what: &str) -> MpiResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        fail!(class::ARG, "{what} is NULL");
    }
    // SAFETY: non-null; MPI requires the array to hold `n` elements.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Copy `s` into a C string buffer of `cap` bytes (NUL-terminated, truncated to fit) and
/// store its length in `len`.
///
/// # Safety
/// `buf` must be NULL or valid for writing `cap` bytes, and `len` NULL or valid for
/// writing one `c_int` (C output arguments).
pub unsafe fn put_str(buf: *mut c_char, cap: usize, s: &str, len: *mut c_int) -> MpiResult {
    if buf.is_null() {
        fail!(class::ARG, "string buffer is NULL");
    }
    let n = s.len().min(cap.saturating_sub(1));
    // SAFETY: MPI requires `buf` to hold `cap` bytes; we write n + 1 <= cap.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
    if !len.is_null() {
        // SAFETY: `len` is non-null and writable (this function's contract).
        unsafe { put(len, n as c_int, "resultlen")? };
    }
    Ok(())
}

/// A non-negative count (`MPI_ERR_COUNT` otherwise).
pub fn count(n: c_int, what: &str) -> MpiResult<usize> {
    if n < 0 {
        fail!(class::COUNT, "negative {what} {n}");
    }
    Ok(n as usize)
}

/// Whether `p` is `MPI_IN_PLACE`.
pub fn in_place(p: *const c_void) -> bool {
    p as usize == crate::consts::IN_PLACE
}
