//! `MPI_Pack_external`, `MPI_Unpack_external`, `MPI_Pack_external_size`: the portable
//! "external32" representation (MPI-3.1 13.5.2): big-endian, IEEE formats, fixed sizes
//! (`MPI_LONG` is 4 bytes, `MPI_WCHAR` 2, `MPI_LONG_DOUBLE` a 16-byte IEEE quad).
//!
//! The runtime's type maps are untyped byte blocks, so the basic elements of a datatype
//! come from how it was built ([`crate::typecontents`]): a type made of one predefined
//! type is its blocks cut into that type's elements; a struct mixing types is walked
//! through its constructors.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::Arc;
use strobe_runtime::calls::Call;

use crate::consts::*;
use crate::datatype::{comm_type, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::typecontents::{self, Contents};
use crate::util::{count, put};

/// How one basic value is converted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Signed,
    Unsigned,
    /// IEEE binary32/binary64: the bytes reversed.
    Float,
    /// x87 80-bit extended (in 16 bytes) <-> IEEE binary128.
    LongDouble,
}

/// One basic value inside a predefined type: its offset there, native and external sizes.
#[derive(Clone, Copy, Debug)]
struct Atom {
    off: usize,
    native: usize,
    ext: usize,
    kind: Kind,
    /// The second half of a complex number: one basic element with the first.
    part_of_previous: bool,
}

const fn atom(off: usize, native: usize, ext: usize, kind: Kind) -> Atom {
    Atom {
        off,
        native,
        ext,
        kind,
        part_of_previous: false,
    }
}

/// A complex number: two parts, one basic element.
fn complex(part: usize, kind: Kind) -> Option<Vec<Atom>> {
    let mut im = atom(part, part, part, kind);
    im.part_of_previous = true;
    Some(vec![atom(0, part, part, kind), im])
}

/// The basic values of predefined type `name` (None: not a basic type strobe knows).
fn atoms(name: &str) -> Option<Vec<Atom>> {
    use Kind::*;
    let one = |n: usize, e: usize, k: Kind| Some(vec![atom(0, n, e, k)]);
    let pair = |v: Atom, i: Atom| Some(vec![v, i]);
    match name {
        "MPI_CHAR" | "MPI_SIGNED_CHAR" | "MPI_INT8_T" | "MPI_CHARACTER" | "MPI_INTEGER1" => {
            one(1, 1, Signed)
        }
        "MPI_UNSIGNED_CHAR" | "MPI_BYTE" | "MPI_PACKED" | "MPI_UINT8_T" | "MPI_C_BOOL"
        | "MPI_CXX_BOOL" => one(1, 1, Unsigned),
        "MPI_WCHAR" => one(4, 2, Unsigned),
        "MPI_SHORT" | "MPI_INT16_T" | "MPI_INTEGER2" => one(2, 2, Signed),
        "MPI_UNSIGNED_SHORT" | "MPI_UINT16_T" => one(2, 2, Unsigned),
        "MPI_INT" | "MPI_INT32_T" | "MPI_INTEGER" | "MPI_INTEGER4" | "MPI_LOGICAL" => {
            one(4, 4, Signed)
        }
        "MPI_UNSIGNED" | "MPI_UINT32_T" => one(4, 4, Unsigned),
        "MPI_LONG" => one(8, 4, Signed),
        "MPI_UNSIGNED_LONG" => one(8, 4, Unsigned),
        "MPI_LONG_LONG_INT" | "MPI_INT64_T" | "MPI_AINT" | "MPI_OFFSET" | "MPI_COUNT"
        | "MPI_INTEGER8" => one(8, 8, Signed),
        "MPI_UNSIGNED_LONG_LONG" | "MPI_UINT64_T" => one(8, 8, Unsigned),
        "MPI_FLOAT" | "MPI_REAL" | "MPI_REAL4" => one(4, 4, Float),
        "MPI_DOUBLE" | "MPI_DOUBLE_PRECISION" | "MPI_REAL8" => one(8, 8, Float),
        "MPI_LONG_DOUBLE" => one(16, 16, LongDouble),
        "MPI_C_COMPLEX" | "MPI_COMPLEX" | "MPI_COMPLEX8" | "MPI_CXX_FLOAT_COMPLEX" => {
            complex(4, Float)
        }
        "MPI_C_DOUBLE_COMPLEX"
        | "MPI_DOUBLE_COMPLEX"
        | "MPI_COMPLEX16"
        | "MPI_CXX_DOUBLE_COMPLEX" => complex(8, Float),
        "MPI_C_LONG_DOUBLE_COMPLEX" | "MPI_CXX_LONG_DOUBLE_COMPLEX" => complex(16, LongDouble),
        "MPI_2REAL" => pair(atom(0, 4, 4, Float), atom(4, 4, 4, Float)),
        "MPI_2DOUBLE_PRECISION" => pair(atom(0, 8, 8, Float), atom(8, 8, 8, Float)),
        "MPI_FLOAT_INT" => pair(atom(0, 4, 4, Float), atom(4, 4, 4, Signed)),
        "MPI_DOUBLE_INT" => pair(atom(0, 8, 8, Float), atom(8, 4, 4, Signed)),
        "MPI_LONG_INT" => pair(atom(0, 8, 4, Signed), atom(8, 4, 4, Signed)),
        "MPI_2INT" | "MPI_2INTEGER" => pair(atom(0, 4, 4, Signed), atom(4, 4, 4, Signed)),
        "MPI_SHORT_INT" => pair(atom(0, 2, 2, Signed), atom(4, 4, 4, Signed)),
        "MPI_LONG_DOUBLE_INT" => pair(atom(0, 16, 16, LongDouble), atom(16, 4, 4, Signed)),
        _ => None,
    }
}

/// The basic values of one element of a datatype: (offset in the element, value).
type Layout = Vec<(isize, Atom)>;

/// The predefined types a datatype is made of (by name).
fn leaves(t: &TypeInfo, c: Option<&Contents>, out: &mut Vec<&'static str>) {
    if t.predefined {
        if !out.contains(&t.name) && !t.name.is_empty() && t.size > 0 {
            out.push(t.name);
        }
        return;
    }
    if let Some(c) = c {
        for (info, inner) in c.types() {
            leaves(info, inner, out);
        }
    }
}

fn unsupported(t: &TypeInfo) -> crate::error::MpiErr {
    crate::error::MpiErr::new(
        class::TYPE,
        format!(
            "external32 of {}: its basic types are not known",
            t.display_name()
        ),
    )
}

/// The basic values of one element of `t` (built with contents `c`).
fn layout(t: &TypeInfo, c: Option<&Contents>) -> MpiResult<Layout> {
    let mut names = Vec::new();
    leaves(t, c, &mut names);
    match names.as_slice() {
        [] => Ok(Vec::new()),
        // One basic type: the type map's blocks, cut into its elements.
        [name] => {
            let atoms = atoms(name).ok_or_else(|| unsupported(t))?;
            let size: usize = atoms.iter().map(|a| a.native).sum::<usize>();
            let stride = atoms.last().map_or(size, |a| a.off + a.native);
            let mut out = Vec::new();
            for &(off, len) in &t.blocks {
                if stride == 0 || len % stride != 0 {
                    return Err(unsupported(t));
                }
                for j in 0..len / stride {
                    for a in &atoms {
                        out.push((off + (j * stride) as isize, *a));
                    }
                }
            }
            Ok(out)
        }
        _ => walk(t, c),
    }
}

/// A datatype mixing basic types, through its constructors.
fn walk(t: &TypeInfo, c: Option<&Contents>) -> MpiResult<Layout> {
    if t.predefined {
        let atoms = atoms(t.name).ok_or_else(|| unsupported(t))?;
        return Ok(atoms.into_iter().map(|a| (0, a)).collect());
    }
    let c = c.ok_or_else(|| unsupported(t))?;
    let ints = c.ints();
    let addrs = c.addrs();
    let types = c.types();
    let inner = |i: usize| -> MpiResult<(Arc<TypeInfo>, Layout)> {
        let (info, ic) = types.get(i).ok_or_else(|| unsupported(t))?;
        Ok(((*info).clone(), layout(info, *ic)?))
    };
    let mut out = Layout::new();
    let mut place = |base: isize, n: usize, info: &TypeInfo, l: &Layout| {
        for k in 0..n {
            let at = base + k as isize * info.extent;
            out.extend(l.iter().map(|(o, a)| (at + o, *a)));
        }
    };
    let int = |i: usize| -> MpiResult<c_int> { ints.get(i).copied().ok_or_else(|| unsupported(t)) };
    let addr =
        |i: usize| -> MpiResult<MpiAint> { addrs.get(i).copied().ok_or_else(|| unsupported(t)) };
    match t.combiner {
        COMBINER_DUP | COMBINER_RESIZED => {
            let (info, l) = inner(0)?;
            place(0, 1, &info, &l);
        }
        COMBINER_CONTIGUOUS => {
            let (info, l) = inner(0)?;
            place(0, int(0)?.max(0) as usize, &info, &l);
        }
        COMBINER_VECTOR | COMBINER_HVECTOR => {
            let (info, l) = inner(0)?;
            let (n, blen) = (int(0)?.max(0), int(1)?.max(0) as usize);
            let stride = if t.combiner == COMBINER_VECTOR {
                int(2)? as isize * info.extent
            } else {
                addrs.first().copied().unwrap_or(0)
            };
            for i in 0..n as isize {
                place(i * stride, blen, &info, &l);
            }
        }
        COMBINER_STRUCT => {
            let n = int(0)?.max(0) as usize;
            for i in 0..n {
                let (info, l) = inner(i)?;
                place(addr(i)?, int(1 + i)?.max(0) as usize, &info, &l);
            }
        }
        COMBINER_INDEXED
        | COMBINER_HINDEXED
        | COMBINER_INDEXED_BLOCK
        | COMBINER_HINDEXED_BLOCK_E32 => {
            let (info, l) = inner(0)?;
            let n = int(0)?.max(0) as usize;
            for i in 0..n {
                let (blen, disp) = match t.combiner {
                    COMBINER_INDEXED => (int(1 + i)?, int(1 + n + i)? as isize * info.extent),
                    COMBINER_HINDEXED => (int(1 + i)?, addr(i)?),
                    COMBINER_INDEXED_BLOCK => (int(1)?, int(2 + i)? as isize * info.extent),
                    _ => (int(1)?, addr(i)?),
                };
                place(disp, blen.max(0) as usize, &info, &l);
            }
        }
        _ => return Err(unsupported(t)),
    }
    Ok(out)
}

/// `MPI_COMBINER_HINDEXED_BLOCK` (typex.rs).
const COMBINER_HINDEXED_BLOCK_E32: c_int = 9;

fn check_datarep(datarep: *const c_char) -> MpiResult {
    if datarep.is_null() {
        fail!(class::ARG, "datarep is NULL");
    }
    // SAFETY: non-null NUL-terminated C string (MPI contract).
    let d = unsafe { std::ffi::CStr::from_ptr(datarep) }.to_string_lossy();
    if d != "external32" {
        fail!(
            class::ARG,
            "unsupported data representation {d:?} (only \"external32\")"
        );
    }
    Ok(())
}

/// The committed type `dt` and the basic values of one of its elements.
fn typed(dt: MpiDatatype) -> MpiResult<(Arc<TypeInfo>, Layout)> {
    let t = comm_type(dt)?;
    let c = typecontents::get(dt);
    let l = layout(&t, c.as_deref())?;
    Ok((t, l))
}

fn ext_size(l: &Layout) -> usize {
    l.iter().map(|(_, a)| a.ext).sum()
}

/// Native value -> external32 bytes (big-endian).
fn encode(a: &Atom, src: &[u8], dst: &mut [u8]) {
    match a.kind {
        Kind::Float => {
            for (d, s) in dst.iter_mut().zip(src.iter().rev()) {
                *d = *s;
            }
        }
        Kind::LongDouble => {
            let q = x87_to_quad(src);
            dst.copy_from_slice(&q.to_be_bytes());
        }
        Kind::Signed | Kind::Unsigned => {
            // Little-endian native: the low `ext` bytes, most significant first.
            for (i, d) in dst.iter_mut().enumerate() {
                *d = src[a.ext - 1 - i];
            }
        }
    }
}

/// external32 bytes -> native value.
fn decode(a: &Atom, src: &[u8], dst: &mut [u8]) {
    match a.kind {
        Kind::Float => {
            for (d, s) in dst.iter_mut().zip(src.iter().rev()) {
                *d = *s;
            }
        }
        Kind::LongDouble => {
            let q = u128::from_be_bytes(src.try_into().unwrap_or([0; 16]));
            dst.copy_from_slice(&quad_to_x87(q));
        }
        Kind::Signed | Kind::Unsigned => {
            let negative = a.kind == Kind::Signed && src[0] & 0x80 != 0;
            for (i, d) in dst.iter_mut().enumerate() {
                *d = if i < a.ext {
                    src[a.ext - 1 - i]
                } else if negative {
                    0xff
                } else {
                    0
                };
            }
        }
    }
}

/// x87 80-bit extended (little-endian, in 16 bytes) -> IEEE binary128 bits.
fn x87_to_quad(b: &[u8]) -> u128 {
    let mant = u64::from_le_bytes(b[0..8].try_into().unwrap_or([0; 8]));
    let se = u16::from_le_bytes([b[8], b[9]]) as u128;
    // Same sign and exponent (bias 16383); binary128 has no explicit integer bit.
    (se << 112) | (u128::from(mant & !(1 << 63)) << 49)
}

/// IEEE binary128 bits -> x87 80-bit extended (in 16 bytes, little-endian).
fn quad_to_x87(q: u128) -> [u8; 16] {
    let se = (q >> 112) as u16;
    let frac = ((q >> 49) as u64) & !(1 << 63);
    let int_bit = if se & 0x7fff != 0 { 1u64 << 63 } else { 0 };
    let mut out = [0u8; 16];
    out[0..8].copy_from_slice(&(frac | int_bit).to_le_bytes());
    out[8..10].copy_from_slice(&se.to_le_bytes());
    out
}

/// The native sizes of the basic elements of one element of `dt`, in type-map order (a
/// complex number is one element; a pair type two). None: not known.
pub fn element_sizes(dt: MpiDatatype) -> Option<Vec<usize>> {
    let t = crate::datatype::any_type(dt).ok()?;
    let c = typecontents::get(dt);
    let l = layout(&t, c.as_deref()).ok()?;
    let mut out: Vec<usize> = Vec::new();
    for (_, a) in &l {
        match out.last_mut() {
            Some(last) if a.part_of_previous => *last += a.native,
            _ => out.push(a.native),
        }
    }
    Some(out)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Pack_external_size(
    datarep: *const c_char,
    incount: c_int,
    dt: MpiDatatype,
    size: *mut MpiAint,
) -> c_int {
    entry(Call::PackExternalSize, COMM_WORLD, || {
        check_datarep(datarep)?;
        let k = count(incount, "incount")?;
        let (_, l) = typed(dt)?;
        // SAFETY: `size` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(size, (k * ext_size(&l)) as MpiAint, "size") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: c_int,
    dt: MpiDatatype,
    outbuf: *mut c_void,
    outsize: MpiAint,
    position: *mut MpiAint,
) -> c_int {
    entry(Call::PackExternal, COMM_WORLD, || {
        check_datarep(datarep)?;
        let k = count(incount, "incount")?;
        let (t, l) = typed(dt)?;
        if position.is_null() {
            fail!(class::ARG, "position is NULL");
        }
        // SAFETY: non-null pointer to the caller's position.
        let pos = unsafe { *position }.max(0) as usize;
        let need = k * ext_size(&l);
        if pos + need > outsize.max(0) as usize {
            fail!(
                class::ARG,
                "packing {need} bytes at position {pos} overflows the {outsize}-byte buffer"
            );
        }
        if need > 0 && (inbuf.is_null() || outbuf.is_null()) {
            fail!(class::BUFFER, "a buffer is NULL");
        }
        let mut at = pos;
        for i in 0..k {
            let elem = (inbuf as *const u8).wrapping_offset(i as isize * t.extent);
            for (off, a) in &l {
                // SAFETY: the value lies inside element i of the caller's buffer (MPI's
                // contract); the output has room (checked above).
                unsafe {
                    let src = std::slice::from_raw_parts(
                        elem.wrapping_offset(off + a.off as isize),
                        a.native,
                    );
                    let dst = std::slice::from_raw_parts_mut((outbuf as *mut u8).add(at), a.ext);
                    encode(a, src, dst);
                }
                at += a.ext;
            }
        }
        // SAFETY: `position` is a C output argument, checked non-NULL.
        unsafe { put(position, at as MpiAint, "position") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MpiAint,
    position: *mut MpiAint,
    outbuf: *mut c_void,
    outcount: c_int,
    dt: MpiDatatype,
) -> c_int {
    entry(Call::UnpackExternal, COMM_WORLD, || {
        check_datarep(datarep)?;
        let k = count(outcount, "outcount")?;
        let (t, l) = typed(dt)?;
        if position.is_null() {
            fail!(class::ARG, "position is NULL");
        }
        // SAFETY: non-null pointer to the caller's position.
        let pos = unsafe { *position }.max(0) as usize;
        let need = k * ext_size(&l);
        if pos + need > insize.max(0) as usize {
            fail!(
                class::TRUNCATE,
                "unpacking {need} bytes at position {pos} runs past the {insize}-byte buffer"
            );
        }
        if need > 0 && (inbuf.is_null() || outbuf.is_null()) {
            fail!(class::BUFFER, "a buffer is NULL");
        }
        let mut at = pos;
        for i in 0..k {
            let elem = (outbuf as *mut u8).wrapping_offset(i as isize * t.extent);
            for (off, a) in &l {
                // SAFETY: as in PMPI_Pack_external, the other way round.
                unsafe {
                    let src = std::slice::from_raw_parts((inbuf as *const u8).add(at), a.ext);
                    let dst = std::slice::from_raw_parts_mut(
                        elem.wrapping_offset(off + a.off as isize),
                        a.native,
                    );
                    decode(a, src, dst);
                }
                at += a.ext;
            }
        }
        // SAFETY: `position` is a C output argument, checked non-NULL.
        unsafe { put(position, at as MpiAint, "position") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_shrink_and_sign_extend() {
        let a = atom(0, 8, 4, Kind::Signed);
        let mut ext = [0u8; 4];
        encode(&a, &(-2i64).to_le_bytes(), &mut ext);
        assert_eq!(ext, [0xff, 0xff, 0xff, 0xfe]);
        let mut back = [0u8; 8];
        decode(&a, &ext, &mut back);
        assert_eq!(i64::from_le_bytes(back), -2);
    }

    #[test]
    fn doubles_are_big_endian() {
        let a = atom(0, 8, 8, Kind::Float);
        let mut ext = [0u8; 8];
        encode(&a, &1.5f64.to_le_bytes(), &mut ext);
        assert_eq!(ext, 1.5f64.to_be_bytes());
    }

    #[test]
    fn long_double_round_trips_through_quad() {
        // 1.0L: exponent 16383, explicit integer bit.
        let mut x = [0u8; 16];
        x[0..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
        x[8..10].copy_from_slice(&16383u16.to_le_bytes());
        let q = x87_to_quad(&x);
        assert_eq!(q >> 112, 16383);
        assert_eq!(quad_to_x87(q), x);
    }
}
