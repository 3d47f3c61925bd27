//! Datatypes: the predefined C types and derived types (contiguous, vector, indexed,
//! struct, resized, ...), kept in the C layer as a flattened type map.
//!
//! The runtime moves contiguous bytes and knows only the predefined element types
//! ([`ElemType`]). A derived type is flattened into byte blocks (offset, length) for one
//! element; a buffer of `count` such elements is packed into a temporary contiguous buffer
//! before it is sent and unpacked after it is received. Types whose every block has the
//! same primitive type remember it ([`ElemKind::Uniform`]), so predefined reductions on,
//! say, a contiguous type of doubles still run in the node manager.
//!
//! Deviation from MPICH: the pair types (`MPI_DOUBLE_INT`, ...) have `size == extent ==
//! sizeof(struct)`, padding included, which is the layout the runtime reduces.

use std::os::raw::c_int;
use std::sync::Arc;
use strobe_runtime::calls::Call;

use strobe_runtime::datatype::{ElemType, TypeSig};

use crate::consts::*;
use crate::error::{entry, fail, MpiResult};
use crate::state::st;
use crate::typestore::store_c;
// The complex types live in typex.rs (state.rs builds the table from here).
pub use crate::typex::complex_types;
use crate::util::{array, count, put, Bytes};

/// A primitive type a block is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prim {
    /// A type the runtime reduces itself.
    Rt(ElemType),
    /// C `long double` (x87 80-bit in 16 bytes on x86-64): reduced on the rank side.
    LongDouble,
    /// `struct { long double v; int i; }`: reduced on the rank side.
    LongDoubleInt,
    /// A complex number of two `ElemType`s (`MPI_C_FLOAT_COMPLEX`, ...): sums are the
    /// runtime's on the parts, products are reduced on the rank side.
    Complex(ElemType),
    /// `long double _Complex`: reduced on the rank side.
    LongDoubleComplex,
}

/// What primitive types a datatype is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElemKind {
    Empty,
    Uniform(Prim),
    Mixed,
}

impl ElemKind {
    fn join(self, other: ElemKind) -> ElemKind {
        match (self, other) {
            (ElemKind::Empty, k) | (k, ElemKind::Empty) => k,
            (ElemKind::Uniform(a), ElemKind::Uniform(b)) if a == b => ElemKind::Uniform(a),
            _ => ElemKind::Mixed,
        }
    }
}

#[derive(Clone, Debug)]
pub struct TypeInfo {
    /// `MPI_INT`, ... for predefined types; empty for derived ones.
    pub name: &'static str,
    /// Bytes of data in one element.
    pub size: usize,
    pub lb: isize,
    pub extent: isize,
    pub true_lb: isize,
    pub true_ub: isize,
    /// One element's data: (offset from the element's start, length), coalesced.
    pub blocks: Vec<(isize, usize)>,
    pub elem: ElemKind,
    pub committed: bool,
    pub predefined: bool,
    pub combiner: c_int,
    /// (integers, addresses, datatypes) of `MPI_Type_get_envelope`.
    pub envelope: (c_int, c_int, c_int),
    /// Alignment of the most strictly aligned basic type inside: a struct's extent is
    /// rounded up to it (MPI-3.1 4.1.6, as a C compiler pads the struct).
    pub align: usize,
    /// `MPI_LB`/`MPI_UB` markers (MPI-1) fixed the bounds: no alignment padding then.
    pub sticky_bounds: bool,
    /// Basic elements in one element of the type (`MPI_Get_elements`).
    pub elems: usize,
    /// The type signature of one element, for the type-matching check; `None` for
    /// `MPI_PACKED` (and types built from it), which matches any signature.
    pub sig: Option<TypeSig>,
}

/// A primitive's code in type signatures. Types with the same C representation share a
/// primitive and so match each other (`MPI_INT` and `MPI_INT32_T`, `MPI_LONG` and
/// `MPI_INT64_T`): more lenient than the standard, never a false report. `MPI_BYTE` is its
/// own code: it matches only `MPI_BYTE` (MPI-3.1 3.3.1).
fn sig_code(prim: Prim) -> u64 {
    match prim {
        Prim::Rt(e) => e.sig_code(),
        Prim::LongDouble => 100,
        Prim::LongDoubleInt => 101,
        Prim::LongDoubleComplex => 102,
        Prim::Complex(e) => 200 + e as u64,
    }
}

impl TypeInfo {
    /// A predefined type of `size` bytes made of `prim` (typex.rs adds more of them).
    pub fn predefined_named(name: &'static str, size: usize, prim: Prim) -> TypeInfo {
        Self::predefined(name, size, prim)
    }

    fn predefined(name: &'static str, size: usize, prim: Prim) -> TypeInfo {
        TypeInfo {
            name,
            size,
            lb: 0,
            extent: size as isize,
            true_lb: 0,
            true_ub: size as isize,
            blocks: vec![(0, size)],
            elem: ElemKind::Uniform(prim),
            committed: true,
            predefined: true,
            combiner: COMBINER_NAMED,
            envelope: (0, 0, 0),
            align: match prim {
                Prim::Rt(ElemType::FloatInt | ElemType::TwoInt | ElemType::ShortInt) => 4,
                Prim::Rt(ElemType::DoubleInt | ElemType::LongInt) => 8,
                // A complex number is aligned as its parts (C11 6.2.5).
                Prim::Complex(e) => e.size(),
                Prim::LongDoubleComplex | Prim::LongDoubleInt => 16,
                _ => size.clamp(1, 16),
            },
            sticky_bounds: false,
            elems: match prim {
                Prim::Rt(
                    ElemType::FloatInt
                    | ElemType::DoubleInt
                    | ElemType::LongInt
                    | ElemType::TwoInt
                    | ElemType::ShortInt,
                )
                | Prim::LongDoubleInt => 2,
                _ => 1,
            },
            sig: (name != "MPI_PACKED").then(|| TypeSig::basic(sig_code(prim))),
        }
    }

    /// Whether `count` elements are one contiguous run of `count * size` bytes starting at
    /// the buffer address, so the runtime can use the buffer in place.
    pub fn dense_for(&self, count: usize) -> bool {
        self.size == 0
            || (self.blocks.len() == 1
                && self.blocks[0] == (0, self.size)
                && (count <= 1 || self.extent == self.size as isize))
    }

    pub fn display_name(&self) -> String {
        if self.name.is_empty() {
            "a derived datatype".to_string()
        } else {
            self.name.to_string()
        }
    }

    /// Pack `count` elements at `base` into a new contiguous buffer.
    ///
    /// # Safety
    /// `base` must hold `count` elements of this type (MPI's contract on the caller).
    pub unsafe fn pack(&self, base: *const u8, count: usize) -> Bytes {
        let mut out = Bytes::zeroed(self.size * count);
        let dst = out.as_mut_ptr();
        let mut at = 0usize;
        for i in 0..count {
            let elem = base.wrapping_offset(i as isize * self.extent);
            for &(off, len) in &self.blocks {
                // SAFETY: the source block lies inside element i of the caller's buffer;
                // the destination has room for count * size bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(elem.wrapping_offset(off), dst.add(at), len)
                };
                at += len;
            }
        }
        out
    }

    /// Unpack the first `bytes` bytes of packed data into `count` elements at `base`
    /// (a short message fills only the leading blocks).
    ///
    /// # Safety
    /// `base` must hold `count` elements of this type, writable.
    pub unsafe fn unpack(&self, src: &[u8], bytes: usize, base: *mut u8, count: usize) {
        let mut left = bytes.min(src.len()).min(self.size * count);
        let mut at = 0usize;
        'outer: for i in 0..count {
            let elem = base.wrapping_offset(i as isize * self.extent);
            for &(off, len) in &self.blocks {
                if left == 0 {
                    break 'outer;
                }
                let n = len.min(left);
                // SAFETY: the destination block lies inside element i of the caller's
                // buffer; `src` holds at least `at + n` bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.as_ptr().add(at),
                        elem.wrapping_offset(off),
                        n,
                    )
                };
                at += n;
                left -= n;
            }
        }
    }
}

/// The predefined types, by handle (index 0 is `MPI_DATATYPE_NULL`).
pub fn predefined_types() -> Vec<(MpiDatatype, TypeInfo)> {
    use ElemType as E;
    use Prim::*;
    let list: [(&'static str, usize, Prim); LAST_PREDEFINED_TYPE as usize] = [
        ("MPI_CHAR", 1, Rt(E::I8)),
        ("MPI_SIGNED_CHAR", 1, Rt(E::I8)),
        ("MPI_UNSIGNED_CHAR", 1, Rt(E::U8)),
        ("MPI_BYTE", 1, Rt(E::Byte)),
        ("MPI_WCHAR", 4, Rt(E::I32)),
        ("MPI_SHORT", 2, Rt(E::I16)),
        ("MPI_UNSIGNED_SHORT", 2, Rt(E::U16)),
        ("MPI_INT", 4, Rt(E::I32)),
        ("MPI_UNSIGNED", 4, Rt(E::U32)),
        ("MPI_LONG", 8, Rt(E::I64)),
        ("MPI_UNSIGNED_LONG", 8, Rt(E::U64)),
        ("MPI_LONG_LONG_INT", 8, Rt(E::I64)),
        ("MPI_UNSIGNED_LONG_LONG", 8, Rt(E::U64)),
        ("MPI_FLOAT", 4, Rt(E::F32)),
        ("MPI_DOUBLE", 8, Rt(E::F64)),
        ("MPI_LONG_DOUBLE", 16, LongDouble),
        ("MPI_INT8_T", 1, Rt(E::I8)),
        ("MPI_INT16_T", 2, Rt(E::I16)),
        ("MPI_INT32_T", 4, Rt(E::I32)),
        ("MPI_INT64_T", 8, Rt(E::I64)),
        ("MPI_UINT8_T", 1, Rt(E::U8)),
        ("MPI_UINT16_T", 2, Rt(E::U16)),
        ("MPI_UINT32_T", 4, Rt(E::U32)),
        ("MPI_UINT64_T", 8, Rt(E::U64)),
        ("MPI_C_BOOL", 1, Rt(E::Bool)),
        ("MPI_AINT", 8, Rt(E::I64)),
        ("MPI_OFFSET", 8, Rt(E::I64)),
        ("MPI_COUNT", 8, Rt(E::I64)),
        ("MPI_PACKED", 1, Rt(E::Byte)),
        ("MPI_FLOAT_INT", 8, Rt(E::FloatInt)),
        ("MPI_DOUBLE_INT", 16, Rt(E::DoubleInt)),
        ("MPI_LONG_INT", 16, Rt(E::LongInt)),
        ("MPI_2INT", 8, Rt(E::TwoInt)),
        ("MPI_SHORT_INT", 8, Rt(E::ShortInt)),
        ("MPI_LONG_DOUBLE_INT", 32, LongDoubleInt),
    ];
    list.into_iter()
        .enumerate()
        .map(|(i, (n, s, p))| (i as MpiDatatype + 1, TypeInfo::predefined(n, s, p)))
        .chain(crate::typex::more_predefined())
        .collect()
}

/// A datatype usable for communication (valid and committed).
pub fn comm_type(dt: MpiDatatype) -> MpiResult<Arc<TypeInfo>> {
    let t = any_type(dt)?;
    if !t.committed {
        fail!(
            class::TYPE,
            "datatype {dt} is not committed (call MPI_Type_commit)"
        );
    }
    Ok(t)
}

/// Any valid datatype, committed or not.
pub fn any_type(dt: MpiDatatype) -> MpiResult<Arc<TypeInfo>> {
    if dt == DATATYPE_NULL {
        fail!(class::TYPE, "MPI_DATATYPE_NULL is not a datatype");
    }
    // The Fortran-only types (`MPI_COMPLEX`, `MPI_LOGICAL`, ...) are negative handles in
    // both headers: C programs may use them too. The complex ones are registered as
    // themselves (complex_types); the others map to their C datatype.
    let dt = if dt < 0 && !st().types.contains_key(&dt) {
        let c = crate::fortran::handles::dt_f2c(dt);
        crate::typex::name_fortran_type(dt, c);
        c
    } else {
        dt
    };
    match st().types.get(&dt) {
        Some(t) => Ok(t.clone()),
        None => fail!(class::TYPE, "invalid datatype handle {dt}"),
    }
}

/// Build a derived type from `parts`: (displacement in bytes, count, old type).
fn derive(
    parts: &[(isize, usize, Arc<TypeInfo>)],
    combiner: c_int,
    envelope: (c_int, c_int, c_int),
) -> TypeInfo {
    let mut blocks: Vec<(isize, usize)> = Vec::new();
    let mut elem = ElemKind::Empty;
    let (mut lb, mut ub): (Option<isize>, Option<isize>) = (None, None);
    let mut size = 0usize;
    let mut align = 1;
    let mut sticky = false;
    let mut elems = 0;
    let mut sig = Some(TypeSig::EMPTY);
    for (disp, n, old) in parts {
        if *n == 0 {
            continue;
        }
        sig = sig.zip(old.sig).map(|(s, o)| s.concat(o.repeat(*n as u64)));
        elem = elem.join(old.elem);
        align = align.max(old.align);
        sticky |= old.sticky_bounds;
        elems += n * old.elems;
        // The bounds of the copies (MPI-3.1 4.1.6: lb is the least lower bound of a copy,
        // ub the greatest upper bound), also for a negative extent (a type resized so
        // that its copies go downwards).
        let first_lb = disp + old.lb;
        let last_lb = first_lb + (*n as isize - 1) * old.extent;
        let lo = first_lb.min(last_lb);
        let hi = (first_lb + old.extent).max(last_lb + old.extent);
        lb = Some(lb.map_or(lo, |v| v.min(lo)));
        ub = Some(ub.map_or(hi, |v| v.max(hi)));
        for j in 0..*n {
            let base = disp + j as isize * old.extent;
            for &(off, len) in &old.blocks {
                size += len;
                let o = base + off;
                match blocks.last_mut() {
                    Some((po, pl)) if *po + *pl as isize == o => *pl += len,
                    _ => blocks.push((o, len)),
                }
            }
        }
    }
    let lb = lb.unwrap_or(0);
    let mut ub = ub.unwrap_or(0);
    if combiner == COMBINER_STRUCT && !sticky && align > 1 {
        // The padding a C compiler puts at the end of the struct.
        let rem = (ub - lb).rem_euclid(align as isize);
        if rem != 0 {
            ub += align as isize - rem;
        }
    }
    let true_lb = blocks.iter().map(|b| b.0).min().unwrap_or(0);
    let true_ub = blocks.iter().map(|b| b.0 + b.1 as isize).max().unwrap_or(0);
    TypeInfo {
        name: "",
        size,
        lb,
        extent: ub - lb,
        true_lb,
        true_ub,
        blocks,
        elem,
        committed: false,
        predefined: false,
        combiner,
        envelope,
        align,
        sticky_bounds: sticky,
        elems,
        sig,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_contiguous(
    n: c_int,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeContiguous, COMM_WORLD, || {
        let (n0, oldh) = (n, old);
        let n = count(n, "count")?;
        let old = any_type(old)?;
        let t = derive(&[(0, n, old)], COMBINER_CONTIGUOUS, (1, 0, 1));
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { store_c(t, out, vec![n0], vec![], &[oldh]) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_vector(
    n: c_int,
    blen: c_int,
    stride: c_int,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeVector, COMM_WORLD, || {
        let (ints, oldh) = (vec![n, blen, stride], old);
        let n = count(n, "count")?;
        let blen = count(blen, "blocklength")?;
        let old = any_type(old)?;
        let parts: Vec<_> = (0..n)
            .map(|i| (i as isize * stride as isize * old.extent, blen, old.clone()))
            .collect();
        let t = derive(&parts, COMBINER_VECTOR, (3, 0, 1));
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { store_c(t, out, ints, vec![], &[oldh]) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_hvector(
    n: c_int,
    blen: c_int,
    stride: MpiAint,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeCreateHvector, COMM_WORLD, || {
        let (ints, oldh) = (vec![n, blen], old);
        let n = count(n, "count")?;
        let blen = count(blen, "blocklength")?;
        let old = any_type(old)?;
        let parts: Vec<_> = (0..n)
            .map(|i| (i as isize * stride, blen, old.clone()))
            .collect();
        let t = derive(&parts, COMBINER_HVECTOR, (2, 1, 1));
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { store_c(t, out, ints, vec![stride], &[oldh]) }
    })
}

/// # Safety
/// `out` must be NULL or valid for writing one handle (a C output argument).
unsafe fn indexed(
    call: Call,
    n: c_int,
    blens: &dyn Fn(usize) -> c_int,
    disps: &dyn Fn(usize) -> isize,
    old: MpiDatatype,
    out: *mut MpiDatatype,
    combiner: c_int,
    env: (c_int, c_int, c_int),
    contents: (Vec<c_int>, Vec<MpiAint>),
) -> c_int {
    entry(call, COMM_WORLD, || {
        let oldh = old;
        let n = count(n, "count")?;
        let old = any_type(old)?;
        let mut parts = Vec::with_capacity(n);
        for i in 0..n {
            parts.push((disps(i), count(blens(i), "blocklength")?, old.clone()));
        }
        let t = derive(&parts, combiner, env);
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { store_c(t, out, contents.0, contents.1, &[oldh]) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_indexed(
    n: c_int,
    blens: *const c_int,
    disps: *const c_int,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    let k = n.max(0) as usize;
    let (b, d) = match (
        // SAFETY: `blens` is a C input array of `k` elements, or NULL (MPI contract).
        unsafe { array(blens, k, "array_of_blocklengths") },
        // SAFETY: `disps` is a C input array of `k` elements, or NULL (MPI contract).
        unsafe { array(disps, k, "array_of_displacements") },
    ) {
        (Ok(b), Ok(d)) => (b, d),
        (Err(e), _) | (_, Err(e)) => return entry(Call::TypeIndexed, COMM_WORLD, || Err(e)),
    };
    let ext = any_type(old).map(|t| t.extent).unwrap_or(0);
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        indexed(
            Call::TypeIndexed,
            n,
            &|i| b[i],
            &|i| d[i] as isize * ext,
            old,
            out,
            COMBINER_INDEXED,
            (2 * n + 1, 0, 1),
            ([&[n][..], b, d].concat(), vec![]),
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_hindexed(
    n: c_int,
    blens: *const c_int,
    disps: *const MpiAint,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    let k = n.max(0) as usize;
    let (b, d) = match (
        // SAFETY: `blens` is a C input array of `k` elements, or NULL (MPI contract).
        unsafe { array(blens, k, "array_of_blocklengths") },
        // SAFETY: `disps` is a C input array of `k` elements, or NULL (MPI contract).
        unsafe { array(disps, k, "array_of_displacements") },
    ) {
        (Ok(b), Ok(d)) => (b, d),
        (Err(e), _) | (_, Err(e)) => return entry(Call::TypeCreateHindexed, COMM_WORLD, || Err(e)),
    };
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        indexed(
            Call::TypeCreateHindexed,
            n,
            &|i| b[i],
            &|i| d[i],
            old,
            out,
            COMBINER_HINDEXED,
            (n + 1, n, 1),
            ([&[n][..], b].concat(), d.to_vec()),
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_indexed_block(
    n: c_int,
    blen: c_int,
    disps: *const c_int,
    old: MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    let k = n.max(0) as usize;
    // SAFETY: `disps` is a C input array of `k` elements, or NULL (MPI contract).
    let d = match unsafe { array(disps, k, "array_of_displacements") } {
        Ok(d) => d,
        Err(e) => return entry(Call::TypeCreateIndexedBlock, COMM_WORLD, || Err(e)),
    };
    let ext = any_type(old).map(|t| t.extent).unwrap_or(0);
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    unsafe {
        indexed(
            Call::TypeCreateIndexedBlock,
            n,
            &|_| blen,
            &|i| d[i] as isize * ext,
            old,
            out,
            COMBINER_INDEXED_BLOCK,
            (n + 2, 0, 1),
            ([&[n, blen][..], d].concat(), vec![]),
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_struct(
    n: c_int,
    blens: *const c_int,
    disps: *const MpiAint,
    types: *const MpiDatatype,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeCreateStruct, COMM_WORLD, || {
        let k = count(n, "count")?;
        // SAFETY: `blens` is a C input array of `k` elements, or NULL (MPI contract).
        let b = unsafe { array(blens, k, "array_of_blocklengths") }?;
        // SAFETY: `disps` is a C input array of `k` elements, or NULL (MPI contract).
        let d = unsafe { array(disps, k, "array_of_displacements") }?;
        // SAFETY: `types` is a C input array of `k` elements, or NULL (MPI contract).
        let t = unsafe { array(types, k, "array_of_types") }?;
        let mut parts = Vec::with_capacity(k);
        for i in 0..k {
            if t[i] == crate::typex::TYPE_LB || t[i] == crate::typex::TYPE_UB {
                continue;
            }
            parts.push((d[i], count(b[i], "blocklength")?, any_type(t[i])?));
        }
        let mut ty = derive(&parts, COMBINER_STRUCT, (n + 1, n, n));
        // MPI-1 markers: explicit bounds (MPI-3.1 4.1.7, deprecated but still used).
        let (lb, ub) = crate::typex::marker_bounds(d, t);
        if lb.is_some() || ub.is_some() {
            let new_lb = lb.unwrap_or(ty.lb);
            let new_ub = ub.unwrap_or(ty.lb + ty.extent);
            if lb.is_none() && parts.is_empty() {
                ty.lb = new_ub;
            } else {
                ty.lb = new_lb;
            }
            ty.extent = new_ub - ty.lb;
            ty.sticky_bounds = true;
        }
        let ints = [&[n][..], b].concat();
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { store_c(ty, out, ints, d.to_vec(), t) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_create_resized(
    old: MpiDatatype,
    lb: MpiAint,
    extent: MpiAint,
    out: *mut MpiDatatype,
) -> c_int {
    entry(Call::TypeCreateResized, COMM_WORLD, || {
        let mut t = (*any_type(old)?).clone();
        t.lb = lb;
        t.extent = extent;
        t.name = "";
        t.predefined = false;
        t.committed = false;
        t.combiner = COMBINER_RESIZED;
        t.envelope = (0, 2, 1);
        // Explicit bounds: a struct built on this type is not padded past them.
        t.sticky_bounds = true;
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { store_c(t, out, vec![], vec![lb, extent], &[old]) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_dup(old: MpiDatatype, out: *mut MpiDatatype) -> c_int {
    entry(Call::TypeDup, COMM_WORLD, || {
        let src = any_type(old)?;
        let mut t = (*src).clone();
        t.name = "";
        t.predefined = false;
        t.committed = src.committed;
        t.combiner = COMBINER_DUP;
        t.envelope = (0, 0, 1);
        // SAFETY: `out` is a C output argument: NULL or writable (MPI contract).
        unsafe { store_c(t, out, vec![], vec![], &[old]) }?;
        // SAFETY: `store` succeeded, so `out` is non-NULL and holds the new handle.
        let h = unsafe { *out };
        if let Err(e) = crate::attrs_more::copy_type_attrs(old, h) {
            // A failed copy callback: no new type (MPI_DATATYPE_NULL, as MPICH).
            st().types.remove(&h);
            // SAFETY: as above.
            unsafe { *out = DATATYPE_NULL };
            return Err(e);
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_commit(dt: *mut MpiDatatype) -> c_int {
    entry(Call::TypeCommit, COMM_WORLD, || {
        if dt.is_null() {
            fail!(class::ARG, "datatype is NULL");
        }
        // SAFETY: non-null pointer to the caller's handle.
        let h = unsafe { *dt };
        any_type(h)?;
        let mut s = st();
        if let Some(t) = s.types.get_mut(&h) {
            Arc::make_mut(t).committed = true;
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_free(dt: *mut MpiDatatype) -> c_int {
    entry(Call::TypeFree, COMM_WORLD, || {
        if dt.is_null() {
            fail!(class::ARG, "datatype is NULL");
        }
        // SAFETY: non-null pointer to the caller's handle.
        let h = unsafe { *dt };
        let t = any_type(h)?;
        if t.predefined {
            fail!(class::TYPE, "{} is predefined and cannot be freed", t.name);
        }
        crate::attrs_more::delete_type_attrs(h)?;
        // Pending operations keep their own Arc of the type, as MPI requires.
        st().types.remove(&h);
        crate::typecontents::forget(h);
        crate::typestore::freed(h);
        // SAFETY: `dt` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(dt, DATATYPE_NULL, "datatype") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_size(dt: MpiDatatype, size: *mut c_int) -> c_int {
    entry(Call::TypeSize, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: `size` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(size, c_int::try_from(t.size).unwrap_or(UNDEFINED), "size") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_extent(
    dt: MpiDatatype,
    lb: *mut MpiAint,
    extent: *mut MpiAint,
) -> c_int {
    entry(Call::TypeGetExtent, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: `lb` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(lb, t.lb, "lb") }?;
        // SAFETY: `extent` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(extent, t.extent, "extent") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_true_extent(
    dt: MpiDatatype,
    lb: *mut MpiAint,
    extent: *mut MpiAint,
) -> c_int {
    entry(Call::TypeGetTrueExtent, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: `lb` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(lb, t.true_lb, "true_lb") }?;
        // SAFETY: `extent` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(extent, t.true_ub - t.true_lb, "true_extent") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Type_get_envelope(
    dt: MpiDatatype,
    ni: *mut c_int,
    na: *mut c_int,
    nd: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    entry(Call::TypeGetEnvelope, COMM_WORLD, || {
        let t = any_type(dt)?;
        // SAFETY: `ni` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(ni, t.envelope.0, "num_integers") }?;
        // SAFETY: `na` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(na, t.envelope.1, "num_addresses") }?;
        // SAFETY: `nd` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(nd, t.envelope.2, "num_datatypes") }?;
        // SAFETY: `combiner` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(combiner, t.combiner, "combiner") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Get_address(
    p: *const std::os::raw::c_void,
    addr: *mut MpiAint,
) -> c_int {
    entry(Call::GetAddress, COMM_WORLD, || {
        // SAFETY: `addr` is a C output argument: NULL or writable (MPI contract).
        unsafe { put(addr, p as MpiAint, "address") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Arc<TypeInfo> {
        Arc::new(TypeInfo::predefined("MPI_INT", 4, Prim::Rt(ElemType::I32)))
    }

    #[test]
    fn vector_flattening_pack_and_unpack() {
        // 3 blocks of 2 ints, stride 4 ints.
        let parts: Vec<_> = (0..3).map(|i| (i * 16, 2, int())).collect();
        let v = derive(&parts, COMBINER_VECTOR, (3, 0, 1));
        assert_eq!(v.size, 24);
        assert_eq!((v.lb, v.extent), (0, 40));
        assert_eq!(v.blocks, vec![(0, 8), (16, 8), (32, 8)]);
        assert_eq!(v.elem, ElemKind::Uniform(Prim::Rt(ElemType::I32)));
        assert!(!v.dense_for(1));
        let src: Vec<i32> = (0..12).collect();
        // SAFETY: src holds the 10 ints one element of the vector spans.
        let p = unsafe { v.pack(src.as_ptr() as *const u8, 1) };
        let got: Vec<i32> = p
            .as_slice()
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, vec![0, 1, 4, 5, 8, 9]);
        let mut dst = vec![-1i32; 12];
        // SAFETY: dst holds 12 ints.
        // A short message (12 of 24 bytes) fills only the leading blocks.
        unsafe { v.unpack(p.as_slice(), 12, dst.as_mut_ptr() as *mut u8, 1) };
        assert_eq!(dst, vec![0, 1, -1, -1, 4, -1, -1, -1, -1, -1, -1, -1]);
        // SAFETY: as above.
        unsafe { v.unpack(p.as_slice(), 24, dst.as_mut_ptr() as *mut u8, 1) };
        assert_eq!(dst, vec![0, 1, -1, -1, 4, 5, -1, -1, 8, 9, -1, -1]);
    }

    #[test]
    fn contiguous_coalesces_and_mixed_types_are_mixed() {
        let c = derive(&[(0, 5, int())], COMBINER_CONTIGUOUS, (1, 0, 1));
        assert_eq!(c.blocks, vec![(0, 20)]);
        assert!(c.dense_for(7));
        let d = Arc::new(TypeInfo::predefined(
            "MPI_DOUBLE",
            8,
            Prim::Rt(ElemType::F64),
        ));
        let s = derive(&[(0, 1, int()), (8, 1, d)], COMBINER_STRUCT, (3, 2, 2));
        assert_eq!(s.elem, ElemKind::Mixed);
        assert_eq!((s.size, s.extent, s.true_lb, s.true_ub), (12, 16, 0, 16));
        let e = derive(&[], COMBINER_CONTIGUOUS, (1, 0, 1));
        assert_eq!((e.size, e.extent, e.elem), (0, 0, ElemKind::Empty));
    }

    #[test]
    fn predefined_table_is_complete() {
        let all = predefined_types();
        let t = &all[..LAST_PREDEFINED_TYPE as usize];
        assert_eq!(t[0].1.name, "MPI_CHAR");
        assert_eq!(t[14].1.name, "MPI_DOUBLE");
        assert_eq!(t.last().unwrap().1.name, "MPI_LONG_DOUBLE_INT");
        assert!(all.iter().all(|(h, _)| *h < FIRST_USER_TYPE));
        for (_, ty) in t {
            if let ElemKind::Uniform(Prim::Rt(e)) = ty.elem {
                assert_eq!(e.size(), ty.size, "{}", ty.name);
            }
        }
    }
}
