//! The Reduce Helper's arithmetic: predefined MPI reduction operations (MPI-3.1 §5.9.2)
//! applied element-wise to raw byte buffers.
//!
//! # Operand order
//! [`reduce_into`] computes `acc[i] = acc[i] OP input[i]`, where `acc` holds the
//! combination of the *lower* ranks and `input` is the next *higher* rank's contribution.
//! Folding rank buffers in rank order (or along a fixed tree whose left operand is always
//! the lower-rank side) therefore yields `in_0 op in_1 op ... op in_{n-1}` as MPI requires.
//! [`reduce_many`] folds its inputs strictly left to right. Order matters for floating
//! point rounding, for `Replace`/`NoOp`, and for which operand survives a tie.
//!
//! # Semantics chosen where C/MPI leave room
//! - **Integer `Sum`/`Prod` wrap** (two's complement). Signed overflow is undefined in C;
//!   wrapping is the only behaviour a runtime can sensibly offer (no traps, deterministic).
//! - **Logical ops** (`Land`, `Lor`, `Lxor`) treat nonzero as true and store `0` or `1`
//!   of the element type. As MPICH (an extension of MPI-3.1 §5.9.2, which MPICH's own
//!   test suite relies on), they are defined on floating point too: `0.0`/`-0.0` are
//!   false, anything else (NaN too) true.
//! - **Float `Min`/`Max` propagate NaN**: if either operand is NaN the result is NaN (the
//!   NaN operand itself; the later one if both are NaN). This differs from C's
//!   `a < b ? a : b`, whose result with a NaN depends on operand position; propagation
//!   makes the outcome independent of fold order and tree shape, and matches `Sum`/`Prod`,
//!   which propagate NaN anyway. On equal operands (including `-0.0` vs `+0.0`) the
//!   earlier operand (`acc`) is kept.
//! - **`MinLoc`/`MaxLoc`** follow the standard: the smaller (larger) value wins; on equal
//!   values the smaller index wins. For the float pairs a NaN value wins over any number
//!   (consistent with `Min`/`Max`) and two NaN values tie (smaller index wins). Only the
//!   value and index fields of `acc` are written; padding bytes are left untouched.
//! - **`Replace`** copies `input` over `acc`; **`NoOp`** leaves `acc` unchanged. Both are
//!   defined on every element type (they never look inside an element).
//!
//! Buffers are raw bytes with no alignment guarantee: elements are read and written with
//! `from_ne_bytes`/`to_ne_bytes`. Each call dispatches on `(op, elem)` once and then runs a
//! monomorphised loop over the whole buffer.

use crate::datatype::{ElemType, ReduceOp};

/// Why a reduction was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum OpError {
    /// MPI_ERR_OP: the operation is not defined on this element type.
    #[error("MPI_ERR_OP: reduction op {} is not defined on element type {}", .op.name(), .elem.name())]
    Undefined { op: ReduceOp, elem: ElemType },
    /// MPI_ERR_COUNT: a buffer length is not a multiple of the element size.
    #[error("MPI_ERR_COUNT: buffer of {len} bytes is not a whole number of {} elements ({} bytes each)", .elem.name(), .elem.size())]
    Ragged { elem: ElemType, len: usize },
    /// MPI_ERR_COUNT: the accumulator and an input have different lengths.
    #[error("MPI_ERR_COUNT: accumulator has {acc} bytes but input has {input} bytes")]
    LengthMismatch { acc: usize, input: usize },
}

/// Is `op` defined on `elem` by MPI-3.1 (§5.9.2)?
///
/// - `Min`/`Max`: C integer, floating point.
/// - `Sum`/`Prod`: C integer, floating point (complex is not supported by the runtime).
/// - `Land`/`Lor`/`Lxor`: C integer, logical (`Bool`), and floating point (as MPICH).
/// - `Band`/`Bor`/`Bxor`: C integer, `Byte`.
/// - `MinLoc`/`MaxLoc`: the value/index pair types only.
/// - `Replace`/`NoOp`: every type.
pub fn op_defined(op: ReduceOp, elem: ElemType) -> bool {
    use ElemType as E;
    use ReduceOp as O;
    let int = matches!(
        elem,
        E::I8 | E::I16 | E::I32 | E::I64 | E::U8 | E::U16 | E::U32 | E::U64
    );
    let float = matches!(elem, E::F32 | E::F64);
    let pair = matches!(
        elem,
        E::FloatInt | E::DoubleInt | E::LongInt | E::TwoInt | E::ShortInt
    );
    match op {
        O::Sum | O::Prod | O::Min | O::Max => int || float,
        O::Land | O::Lor | O::Lxor => int || float || elem == E::Bool,
        O::Band | O::Bor | O::Bxor => int || elem == E::Byte,
        O::MinLoc | O::MaxLoc => pair,
        O::Replace | O::NoOp => true,
    }
}

/// `acc[i] = acc[i] OP input[i]` for every element: `acc` is the combination of the lower
/// ranks, `input` the next higher rank's contribution. On error `acc` is left unchanged.
pub fn reduce_into(
    op: ReduceOp,
    elem: ElemType,
    acc: &mut [u8],
    input: &[u8],
) -> Result<(), OpError> {
    check(op, elem, acc.len(), std::iter::once(input.len()))?;
    let applied = apply_op(op, elem, acc, input);
    debug_assert!(applied, "op_defined and apply_op disagree");
    Ok(())
}

/// Folds `inputs` into `acc` left to right: `acc = (((acc OP in[0]) OP in[1]) ...)`.
/// Every length is validated before anything is written, so on error `acc` is unchanged.
pub fn reduce_many(
    op: ReduceOp,
    elem: ElemType,
    acc: &mut [u8],
    inputs: &[&[u8]],
) -> Result<(), OpError> {
    check(op, elem, acc.len(), inputs.iter().map(|i| i.len()))?;
    match op {
        // Only the last input matters / nothing changes: skip the redundant passes.
        ReduceOp::Replace => {
            if let Some(last) = inputs.last() {
                acc.copy_from_slice(last);
            }
        }
        ReduceOp::NoOp => {}
        _ => {
            for input in inputs {
                let applied = apply_op(op, elem, acc, input);
                debug_assert!(applied, "op_defined and apply_op disagree");
            }
        }
    }
    Ok(())
}

fn check(
    op: ReduceOp,
    elem: ElemType,
    acc_len: usize,
    input_lens: impl Iterator<Item = usize>,
) -> Result<(), OpError> {
    if !op_defined(op, elem) {
        return Err(OpError::Undefined { op, elem });
    }
    // `usize::is_multiple_of` needs Rust 1.87; the workspace's MSRV is 1.80.
    #[allow(clippy::manual_is_multiple_of)]
    if acc_len % elem.size() != 0 {
        return Err(OpError::Ragged { elem, len: acc_len });
    }
    for len in input_lens {
        if len != acc_len {
            return Err(OpError::LengthMismatch {
                acc: acc_len,
                input: len,
            });
        }
    }
    Ok(())
}

/// A fixed-size scalar readable from / writable to unaligned native-endian bytes.
trait Scalar: Copy + PartialOrd {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    #[inline(always)]
    fn is_nan(self) -> bool {
        false
    }
}

macro_rules! impl_scalar {
    ($($t:ty),* ; floats: $($f:ty),*) => {
        $(impl Scalar for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b[..Self::SIZE].try_into().unwrap())
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
        })*
        $(impl Scalar for $f {
            const SIZE: usize = std::mem::size_of::<$f>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$f>::from_ne_bytes(b[..Self::SIZE].try_into().unwrap())
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$f>::is_nan(self)
            }
        })*
    };
}
impl_scalar!(i8, i16, i32, i64, u8, u16, u32, u64; floats: f32, f64);

/// The element-wise loop: `acc[i] = f(acc[i], input[i])`. Lengths are pre-validated.
#[inline(always)]
fn zip_apply<T: Scalar>(acc: &mut [u8], input: &[u8], f: impl Fn(T, T) -> T) {
    for (a, b) in acc
        .chunks_exact_mut(T::SIZE)
        .zip(input.chunks_exact(T::SIZE))
    {
        f(T::load(a), T::load(b)).store(a);
    }
}

/// MINLOC (`MAX == false`) / MAXLOC (`MAX == true`) over `{ V value; int index; }` pairs of
/// `SIZE` bytes with the value at offset 0 and the `i32` index at offset `IOFF`.
#[inline(always)]
fn loc_apply<V: Scalar, const SIZE: usize, const IOFF: usize, const MAX: bool>(
    acc: &mut [u8],
    input: &[u8],
) {
    for (a, b) in acc.chunks_exact_mut(SIZE).zip(input.chunks_exact(SIZE)) {
        let (av, bv) = (V::load(a), V::load(b));
        let (an, bn) = (av.is_nan(), bv.is_nan());
        let later_wins = if MAX { bv > av } else { bv < av } || (bn && !an);
        let tie = av == bv || (an && bn);
        if later_wins {
            // Field-wise copy so acc's padding bytes stay untouched.
            bv.store(a);
            i32::load(&b[IOFF..]).store(&mut a[IOFF..]);
        } else if tie {
            let (ai, bi) = (i32::load(&a[IOFF..]), i32::load(&b[IOFF..]));
            if bi < ai {
                bi.store(&mut a[IOFF..]);
            }
        }
    }
}

/// Integer (and 1-byte bool/byte) ops; makes `apply_op` return `false` for any other op.
macro_rules! int_ops {
    ($t:ty, $op:expr, $acc:expr, $inp:expr) => {{
        let (acc, inp) = ($acc, $inp);
        match $op {
            ReduceOp::Sum => zip_apply::<$t>(acc, inp, |a, b| a.wrapping_add(b)),
            ReduceOp::Prod => zip_apply::<$t>(acc, inp, |a, b| a.wrapping_mul(b)),
            ReduceOp::Min => zip_apply::<$t>(acc, inp, |a, b| if b < a { b } else { a }),
            ReduceOp::Max => zip_apply::<$t>(acc, inp, |a, b| if b > a { b } else { a }),
            ReduceOp::Land => zip_apply::<$t>(acc, inp, |a, b| ((a != 0) & (b != 0)) as $t),
            ReduceOp::Lor => zip_apply::<$t>(acc, inp, |a, b| ((a != 0) | (b != 0)) as $t),
            ReduceOp::Lxor => zip_apply::<$t>(acc, inp, |a, b| ((a != 0) ^ (b != 0)) as $t),
            ReduceOp::Band => zip_apply::<$t>(acc, inp, |a, b| a & b),
            ReduceOp::Bor => zip_apply::<$t>(acc, inp, |a, b| a | b),
            ReduceOp::Bxor => zip_apply::<$t>(acc, inp, |a, b| a ^ b),
            _ => return false,
        }
    }};
}

macro_rules! float_ops {
    ($t:ty, $op:expr, $acc:expr, $inp:expr) => {{
        let (acc, inp) = ($acc, $inp);
        match $op {
            ReduceOp::Sum => zip_apply::<$t>(acc, inp, |a, b| a + b),
            ReduceOp::Prod => zip_apply::<$t>(acc, inp, |a, b| a * b),
            // NaN-propagating; ties (incl. -0.0 vs +0.0) keep the earlier operand.
            ReduceOp::Min => {
                zip_apply::<$t>(acc, inp, |a, b| if b < a || b.is_nan() { b } else { a })
            }
            ReduceOp::Max => {
                zip_apply::<$t>(acc, inp, |a, b| if b > a || b.is_nan() { b } else { a })
            }
            ReduceOp::Land => {
                zip_apply::<$t>(acc, inp, |a, b| ((a != 0.0) & (b != 0.0)) as u8 as $t)
            }
            ReduceOp::Lor => {
                zip_apply::<$t>(acc, inp, |a, b| ((a != 0.0) | (b != 0.0)) as u8 as $t)
            }
            ReduceOp::Lxor => {
                zip_apply::<$t>(acc, inp, |a, b| ((a != 0.0) ^ (b != 0.0)) as u8 as $t)
            }
            _ => return false,
        }
    }};
}

macro_rules! loc_ops {
    ($v:ty, $size:literal, $ioff:literal, $op:expr, $acc:expr, $inp:expr) => {
        match $op {
            ReduceOp::MinLoc => loc_apply::<$v, $size, $ioff, false>($acc, $inp),
            ReduceOp::MaxLoc => loc_apply::<$v, $size, $ioff, true>($acc, $inp),
            _ => return false,
        }
    };
}

/// Runs the (validated) op. Returns `false` only if the combination is undefined, which
/// `check` has already ruled out; kept as a value rather than a panic for robustness.
fn apply_op(op: ReduceOp, elem: ElemType, acc: &mut [u8], input: &[u8]) -> bool {
    use ElemType as E;
    match op {
        ReduceOp::Replace => {
            acc.copy_from_slice(input);
            return true;
        }
        ReduceOp::NoOp => return true,
        _ => {}
    }
    match elem {
        E::I8 => int_ops!(i8, op, acc, input),
        E::I16 => int_ops!(i16, op, acc, input),
        E::I32 => int_ops!(i32, op, acc, input),
        E::I64 => int_ops!(i64, op, acc, input),
        E::U8 => int_ops!(u8, op, acc, input),
        E::U16 => int_ops!(u16, op, acc, input),
        E::U32 => int_ops!(u32, op, acc, input),
        E::U64 => int_ops!(u64, op, acc, input),
        E::F32 => float_ops!(f32, op, acc, input),
        E::F64 => float_ops!(f64, op, acc, input),
        // Logical ops on a one-byte bool: same 0/1 arithmetic as on u8.
        E::Bool => match op {
            ReduceOp::Land | ReduceOp::Lor | ReduceOp::Lxor => int_ops!(u8, op, acc, input),
            _ => return false,
        },
        E::Byte => match op {
            ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => int_ops!(u8, op, acc, input),
            _ => return false,
        },
        E::FloatInt => loc_ops!(f32, 8, 4, op, acc, input),
        E::DoubleInt => loc_ops!(f64, 16, 8, op, acc, input),
        E::LongInt => loc_ops!(i64, 16, 8, op, acc, input),
        E::TwoInt => loc_ops!(i32, 8, 4, op, acc, input),
        E::ShortInt => loc_ops!(i16, 8, 4, op, acc, input),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use ElemType as E;
    use ReduceOp as O;

    fn bytes<T: Scalar>(v: &[T]) -> Vec<u8> {
        let mut out = vec![0u8; v.len() * T::SIZE];
        for (x, c) in v.iter().zip(out.chunks_exact_mut(T::SIZE)) {
            x.store(c);
        }
        out
    }

    fn vals<T: Scalar>(b: &[u8]) -> Vec<T> {
        b.chunks_exact(T::SIZE).map(T::load).collect()
    }

    /// `a OP b` on typed slices, through byte buffers.
    fn run<T: Scalar>(op: ReduceOp, elem: ElemType, a: &[T], b: &[T]) -> Vec<T> {
        let mut acc = bytes(a);
        reduce_into(op, elem, &mut acc, &bytes(b)).unwrap();
        vals(&acc)
    }

    /// Independent restatement of MPI-3.1's table, by type class.
    fn expected_defined(op: ReduceOp, elem: ElemType) -> bool {
        let class = match elem {
            E::I8 | E::I16 | E::I32 | E::I64 | E::U8 | E::U16 | E::U32 | E::U64 => "int",
            E::F32 | E::F64 => "float",
            E::Bool => "logical",
            E::Byte => "byte",
            _ => "pair",
        };
        let ok: &[&str] = match op {
            O::Sum | O::Prod | O::Min | O::Max => &["int", "float"],
            O::Land | O::Lor | O::Lxor => &["int", "float", "logical"],
            O::Band | O::Bor | O::Bxor => &["int", "byte"],
            O::MinLoc | O::MaxLoc => &["pair"],
            O::Replace | O::NoOp => &["int", "float", "logical", "byte", "pair"],
        };
        ok.contains(&class)
    }

    #[test]
    fn defined_table_matches_standard() {
        for op in ReduceOp::ALL {
            for elem in ElemType::ALL {
                assert_eq!(
                    op_defined(op, elem),
                    expected_defined(op, elem),
                    "{op:?} {elem:?}"
                );
            }
        }
        assert!(!op_defined(O::Sum, E::Byte));
        assert!(!op_defined(O::Sum, E::Bool));
        assert!(!op_defined(O::Band, E::Bool));
        assert!(op_defined(O::Land, E::F64));
        assert!(!op_defined(O::Min, E::TwoInt));
        assert!(!op_defined(O::MinLoc, E::I32));
    }

    #[test]
    fn reduce_errors_exactly_when_undefined() {
        for op in ReduceOp::ALL {
            for elem in ElemType::ALL {
                let n = 3 * elem.size();
                let (mut acc, input) = (vec![1u8; n], vec![2u8; n]);
                let before = acc.clone();
                let r = reduce_into(op, elem, &mut acc, &input);
                if op_defined(op, elem) {
                    assert_eq!(r, Ok(()), "{op:?} {elem:?}");
                } else {
                    assert_eq!(r, Err(OpError::Undefined { op, elem }));
                    assert_eq!(acc, before, "acc touched on error");
                    let r = reduce_many(op, elem, &mut acc, &[&input]);
                    assert_eq!(r, Err(OpError::Undefined { op, elem }));
                }
            }
        }
    }

    #[test]
    fn length_errors() {
        let mut acc = vec![0u8; 12];
        assert_eq!(
            reduce_into(O::Sum, E::I64, &mut acc, &[0u8; 12]),
            Err(OpError::Ragged {
                elem: E::I64,
                len: 12
            })
        );
        assert_eq!(
            reduce_into(O::Sum, E::I32, &mut acc, &[0u8; 8]),
            Err(OpError::LengthMismatch { acc: 12, input: 8 })
        );
        assert_eq!(
            reduce_into(O::Replace, E::DoubleInt, &mut acc, &[0u8; 12]),
            Err(OpError::Ragged {
                elem: E::DoubleInt,
                len: 12
            })
        );
        // reduce_many validates every input before writing anything.
        let mut acc = bytes(&[1i32, 2, 3]);
        let good = bytes(&[10i32, 20, 30]);
        let r = reduce_many(O::Sum, E::I32, &mut acc, &[&good, &good[..8]]);
        assert_eq!(r, Err(OpError::LengthMismatch { acc: 12, input: 8 }));
        assert_eq!(vals::<i32>(&acc), vec![1, 2, 3]);
        // Error messages carry the MPI class.
        let e = reduce_into(O::Sum, E::Byte, &mut [0u8], &[0u8]).unwrap_err();
        assert!(e.to_string().starts_with("MPI_ERR_OP"), "{e}");
        assert!(e.to_string().contains("sum") && e.to_string().contains("byte"));
        let e = reduce_into(O::Sum, E::I16, &mut [0u8; 3], &[0u8; 3]).unwrap_err();
        assert!(e.to_string().starts_with("MPI_ERR_COUNT"), "{e}");
    }

    #[test]
    fn empty_buffers_are_fine() {
        for op in ReduceOp::ALL {
            for elem in ElemType::ALL {
                if op_defined(op, elem) {
                    assert_eq!(reduce_into(op, elem, &mut [], &[]), Ok(()));
                    assert_eq!(reduce_many(op, elem, &mut [], &[]), Ok(()));
                }
            }
        }
    }

    /// Every integer op on one integer type, plus wrapping.
    macro_rules! int_type_test {
        ($name:ident, $t:ty, $e:expr, $signed:expr) => {
            #[test]
            fn $name() {
                let c = |v: &[i64]| -> Vec<$t> { v.iter().map(|&x| x as $t).collect() };
                let a = c(&[5, 0, 7, 3]);
                let b = c(&[3, 0, 7, 12]);
                assert_eq!(run(O::Sum, $e, &a, &b), c(&[8, 0, 14, 15]));
                assert_eq!(run(O::Prod, $e, &a, &b), c(&[15, 0, 49, 36]));
                assert_eq!(run(O::Min, $e, &a, &b), c(&[3, 0, 7, 3]));
                assert_eq!(run(O::Max, $e, &a, &b), c(&[5, 0, 7, 12]));
                let a = c(&[0, 0, 5, 2, -1]);
                let b = c(&[0, 3, 0, 4, 64]);
                assert_eq!(run(O::Land, $e, &a, &b), c(&[0, 0, 0, 1, 1]));
                assert_eq!(run(O::Lor, $e, &a, &b), c(&[0, 1, 1, 1, 1]));
                assert_eq!(run(O::Lxor, $e, &a, &b), c(&[0, 1, 1, 0, 0]));
                let a = c(&[0b1100, -1, 0]);
                let b = c(&[0b1010, 0x55, 0]);
                assert_eq!(run(O::Band, $e, &a, &b), c(&[0b1000, 0x55, 0]));
                assert_eq!(run(O::Bor, $e, &a, &b), c(&[0b1110, -1, 0]));
                assert_eq!(run(O::Bxor, $e, &a, &b), c(&[0b0110, !0x55, 0]));
                // Wrapping: MAX + 1 == MIN, MAX * 2 == -2 (mod 2^n), MIN + MIN == 0.
                let a = [<$t>::MAX, <$t>::MAX, <$t>::MIN];
                let b = [1 as $t, 2, <$t>::MIN];
                assert_eq!(
                    run(O::Sum, $e, &a, &b),
                    vec![<$t>::MIN, <$t>::MIN.wrapping_add(1), 0]
                );
                assert_eq!(
                    run(O::Prod, $e, &a[..2], &b[..2]),
                    vec![<$t>::MAX, (-2i64) as $t]
                );
                // Signedness matters for Min/Max: -1 is the smallest signed, largest unsigned.
                let a = c(&[-1, 1]);
                let b = c(&[1, -1]);
                let (lo, hi) = if $signed { (-1, 1) } else { (1, -1) };
                assert_eq!(run(O::Min, $e, &a, &b), c(&[lo, lo]));
                assert_eq!(run(O::Max, $e, &a, &b), c(&[hi, hi]));
            }
        };
    }
    int_type_test!(int_ops_i8, i8, E::I8, true);
    int_type_test!(int_ops_i16, i16, E::I16, true);
    int_type_test!(int_ops_i32, i32, E::I32, true);
    int_type_test!(int_ops_i64, i64, E::I64, true);
    int_type_test!(int_ops_u8, u8, E::U8, false);
    int_type_test!(int_ops_u16, u16, E::U16, false);
    int_type_test!(int_ops_u32, u32, E::U32, false);
    int_type_test!(int_ops_u64, u64, E::U64, false);

    macro_rules! float_type_test {
        ($name:ident, $t:ty, $e:expr) => {
            #[test]
            fn $name() {
                let (nan, inf) = (<$t>::NAN, <$t>::INFINITY);
                let a: [$t; 4] = [1.5, -2.0, 0.0, inf];
                let b: [$t; 4] = [2.25, 4.0, -3.0, 1.0];
                assert_eq!(run(O::Sum, $e, &a, &b), vec![3.75, 2.0, -3.0, inf]);
                assert_eq!(run(O::Prod, $e, &a, &b), vec![3.375, -8.0, -0.0, inf]);
                assert_eq!(run(O::Min, $e, &a, &b), vec![1.5, -2.0, -3.0, 1.0]);
                assert_eq!(run(O::Max, $e, &a, &b), vec![2.25, 4.0, 0.0, inf]);
                // NaN propagates from either side, for Min and Max.
                for op in [O::Min, O::Max] {
                    let r = run(op, $e, &[nan, 1.0, nan], &[1.0, nan, nan]);
                    assert!(r.iter().all(|x| x.is_nan()), "{op:?} {r:?}");
                    let r = run(op, $e, &[nan, -inf], &[inf, nan]);
                    assert!(r.iter().all(|x| x.is_nan()), "{op:?} {r:?}");
                }
                // NaN from the first rank survives a fold over later numbers.
                let mut acc = bytes(&[nan]);
                let later = [bytes(&[0.0 as $t]), bytes(&[-inf]), bytes(&[inf])];
                let refs: Vec<&[u8]> = later.iter().map(|v| v.as_slice()).collect();
                reduce_many(O::Min, $e, &mut acc, &refs).unwrap();
                assert!(vals::<$t>(&acc)[0].is_nan());
                // Equal operands keep acc: min/max(-0.0, +0.0) is the earlier one.
                for op in [O::Min, O::Max] {
                    let r: Vec<$t> = run(op, $e, &[-0.0, 0.0], &[0.0, -0.0]);
                    assert!(r[0].is_sign_negative() && r[1].is_sign_positive(), "{op:?}");
                }
                // Sum/Prod propagate NaN as IEEE says.
                assert!(run(O::Sum, $e, &[nan], &[1.0])[0].is_nan());
                assert!(run(O::Prod, $e, &[2.0], &[nan])[0].is_nan());
                // Logical ops (as MPICH): nonzero (NaN too) is true, -0.0 false.
                let (x, y): ([$t; 4], [$t; 4]) = ([0.0, -0.0, 2.5, nan], [1.0, 0.0, -1.0, 0.0]);
                assert_eq!(run(O::Land, $e, &x, &y), vec![0.0, 0.0, 1.0, 0.0]);
                assert_eq!(run(O::Lor, $e, &x, &y), vec![1.0, 0.0, 1.0, 1.0]);
                assert_eq!(run(O::Lxor, $e, &x, &y), vec![1.0, 0.0, 0.0, 1.0]);
            }
        };
    }
    float_type_test!(float_ops_f32, f32, E::F32);
    float_type_test!(float_ops_f64, f64, E::F64);

    #[test]
    fn bool_logical_ops() {
        let a = [0u8, 0, 1, 7, 2];
        let b = [0u8, 1, 0, 1, 0xff];
        assert_eq!(run(O::Land, E::Bool, &a, &b), vec![0, 0, 0, 1, 1]);
        assert_eq!(run(O::Lor, E::Bool, &a, &b), vec![0, 1, 1, 1, 1]);
        assert_eq!(run(O::Lxor, E::Bool, &a, &b), vec![0, 1, 1, 0, 0]);
    }

    #[test]
    fn byte_bitwise_ops() {
        let a = [0b1100_0011u8, 0xff, 0];
        let b = [0b1010_0110u8, 0x0f, 0];
        assert_eq!(run(O::Band, E::Byte, &a, &b), vec![0b1000_0010, 0x0f, 0]);
        assert_eq!(run(O::Bor, E::Byte, &a, &b), vec![0b1110_0111, 0xff, 0]);
        assert_eq!(run(O::Bxor, E::Byte, &a, &b), vec![0b0110_0101, 0xf0, 0]);
    }

    /// Encodes `{value; pad; index; pad}` with `pad` bytes set to `fill`.
    fn pair<V: Scalar>(elem: ElemType, ioff: usize, items: &[(V, i32)], fill: u8) -> Vec<u8> {
        let size = elem.size();
        let mut out = vec![fill; items.len() * size];
        for (&(v, i), c) in items.iter().zip(out.chunks_exact_mut(size)) {
            v.store(c);
            i.store(&mut c[ioff..]);
        }
        out
    }

    fn unpair<V: Scalar>(elem: ElemType, ioff: usize, b: &[u8]) -> Vec<(V, i32)> {
        b.chunks_exact(elem.size())
            .map(|c| (V::load(c), i32::load(&c[ioff..])))
            .collect()
    }

    macro_rules! loc_type_test {
        ($name:ident, $v:ty, $e:expr, $ioff:expr) => {
            #[test]
            fn $name() {
                let c = |v: i64| v as $v;
                // (acc, input): smaller wins, larger wins, tie with larger acc index,
                // tie with smaller acc index, negative values.
                let acc = [(c(1), 7), (c(5), 2), (c(3), 9), (c(3), 1), (c(-4), 0)];
                let inp = [(c(2), 0), (c(4), 8), (c(3), 4), (c(3), 6), (c(-5), 3)];
                let run_loc = |op| {
                    let mut a = pair($e, $ioff, &acc, 0xAB);
                    reduce_into(op, $e, &mut a, &pair($e, $ioff, &inp, 0xCD)).unwrap();
                    // Padding bytes of acc are never written.
                    let size = $e.size();
                    for ch in a.chunks_exact(size) {
                        let vs = std::mem::size_of::<$v>();
                        assert!(ch[vs..$ioff].iter().all(|&x| x == 0xAB));
                        assert!(ch[$ioff + 4..].iter().all(|&x| x == 0xAB));
                    }
                    unpair::<$v>($e, $ioff, &a)
                };
                assert_eq!(
                    run_loc(O::MinLoc),
                    vec![(c(1), 7), (c(4), 8), (c(3), 4), (c(3), 1), (c(-5), 3)]
                );
                assert_eq!(
                    run_loc(O::MaxLoc),
                    vec![(c(2), 0), (c(5), 2), (c(3), 4), (c(3), 1), (c(-4), 0)]
                );
                // Negative indices compare as signed on ties.
                let mut a = pair($e, $ioff, &[(c(1), 0)], 0);
                reduce_into(O::MinLoc, $e, &mut a, &pair($e, $ioff, &[(c(1), -1)], 0)).unwrap();
                assert_eq!(unpair::<$v>($e, $ioff, &a), vec![(c(1), -1)]);
            }
        };
    }
    loc_type_test!(loc_float_int, f32, E::FloatInt, 4);
    loc_type_test!(loc_double_int, f64, E::DoubleInt, 8);
    loc_type_test!(loc_long_int, i64, E::LongInt, 8);
    loc_type_test!(loc_two_int, i32, E::TwoInt, 4);
    loc_type_test!(loc_short_int, i16, E::ShortInt, 4);

    #[test]
    fn loc_float_nan_wins_and_ties() {
        for op in [O::MinLoc, O::MaxLoc] {
            let acc = [(f64::NAN, 5), (1.0, 5), (f64::NAN, 5), (f64::NAN, 2)];
            let inp = [(1.0, 0), (f64::NAN, 9), (f64::NAN, 3), (f64::NAN, 4)];
            let mut a = pair(E::DoubleInt, 8, &acc, 0);
            reduce_into(op, E::DoubleInt, &mut a, &pair(E::DoubleInt, 8, &inp, 0)).unwrap();
            let r = unpair::<f64>(E::DoubleInt, 8, &a);
            assert!(r.iter().all(|(v, _)| v.is_nan()), "{op:?}");
            let idx: Vec<i32> = r.iter().map(|p| p.1).collect();
            assert_eq!(idx, vec![5, 9, 3, 2], "{op:?}");
        }
    }

    #[test]
    fn minloc_fold_over_ranks_picks_lowest_rank_on_tie() {
        // Ranks contribute (value, rank); values 3,1,4,1,5,1 -> min 1 first at rank 1.
        let values = [3i32, 1, 4, 1, 5, 1];
        let bufs: Vec<Vec<u8>> = (0..6)
            .map(|r| pair(E::TwoInt, 4, &[(values[r], r as i32)], 0))
            .collect();
        let mut acc = bufs[0].clone();
        let refs: Vec<&[u8]> = bufs[1..].iter().map(|b| b.as_slice()).collect();
        reduce_many(O::MinLoc, E::TwoInt, &mut acc, &refs).unwrap();
        assert_eq!(unpair::<i32>(E::TwoInt, 4, &acc), vec![(1, 1)]);
        let mut acc = bufs[0].clone();
        reduce_many(O::MaxLoc, E::TwoInt, &mut acc, &refs).unwrap();
        assert_eq!(unpair::<i32>(E::TwoInt, 4, &acc), vec![(5, 4)]);
    }

    #[test]
    fn replace_and_noop_on_every_type() {
        for elem in ElemType::ALL {
            let n = 2 * elem.size();
            let orig: Vec<u8> = (0..n as u8).collect();
            let inp: Vec<u8> = (100..100 + n as u8).collect();
            let mut acc = orig.clone();
            reduce_into(O::NoOp, elem, &mut acc, &inp).unwrap();
            assert_eq!(acc, orig, "{elem:?}");
            reduce_into(O::Replace, elem, &mut acc, &inp).unwrap();
            assert_eq!(acc, inp, "{elem:?}");
            // Folded: Replace yields the last input, NoOp the accumulator.
            let last = vec![7u8; n];
            let mut acc = orig.clone();
            reduce_many(O::Replace, elem, &mut acc, &[&inp, &last]).unwrap();
            assert_eq!(acc, last);
            let mut acc = orig.clone();
            reduce_many(O::NoOp, elem, &mut acc, &[&inp, &last]).unwrap();
            assert_eq!(acc, orig);
        }
    }

    /// A copy of `data` placed at an address that is `skew` mod 16 (so, for odd `skew`,
    /// misaligned for every multi-byte type); returns the backing store and the offset.
    fn skewed(data: &[u8], skew: usize) -> (Vec<u8>, usize) {
        let mut store = vec![0u8; data.len() + 16];
        let off = (skew + 16 - store.as_ptr() as usize % 16) % 16;
        store[off..off + data.len()].copy_from_slice(data);
        (store, off)
    }

    #[test]
    fn unaligned_buffers() {
        let (mut acc, ao) = skewed(&bytes(&[1.5f64, -2.0, 1e300]), 1);
        let (inp, io) = skewed(&bytes(&[0.25f64, 8.0, 1e300]), 3);
        assert_eq!(acc[ao..].as_ptr() as usize % 8, 1);
        reduce_into(O::Sum, E::F64, &mut acc[ao..ao + 24], &inp[io..io + 24]).unwrap();
        assert_eq!(vals::<f64>(&acc[ao..ao + 24]), [1.75, 6.0, 2e300]);
        assert!(acc[..ao].iter().chain(&acc[ao + 24..]).all(|&x| x == 0));

        let (mut acc, ao) = skewed(&bytes(&[1i32, -7, i32::MAX]), 5);
        let (inp, io) = skewed(&bytes(&[2i32, 3, 1]), 7);
        reduce_into(O::Max, E::I32, &mut acc[ao..ao + 12], &inp[io..io + 12]).unwrap();
        assert_eq!(vals::<i32>(&acc[ao..ao + 12]), [2, 3, i32::MAX]);

        let (mut acc, ao) = skewed(&pair(E::DoubleInt, 8, &[(2.0f64, 4), (1.0, 0)], 0), 9);
        let (inp, io) = skewed(&pair(E::DoubleInt, 8, &[(2.0f64, 1), (0.5, 3)], 0), 1);
        let (a, i) = (&mut acc[ao..ao + 32], &inp[io..io + 32]);
        reduce_into(O::MinLoc, E::DoubleInt, a, i).unwrap();
        assert_eq!(unpair::<f64>(E::DoubleInt, 8, a), [(2.0, 1), (0.5, 3)]);
    }

    #[test]
    fn f64_sum_folds_left_to_right() {
        // (1e16 + 1) - 1e16 == 0 (the 1 is lost), but (1e16 - 1e16) + 1 == 1.
        let big = bytes(&[1e16f64]);
        let one = bytes(&[1.0f64]);
        let neg = bytes(&[-1e16f64]);
        let mut acc = big.clone();
        reduce_many(O::Sum, E::F64, &mut acc, &[&one, &neg]).unwrap();
        assert_eq!(vals::<f64>(&acc), vec![0.0]);
        let mut acc = big.clone();
        reduce_many(O::Sum, E::F64, &mut acc, &[&neg, &one]).unwrap();
        assert_eq!(vals::<f64>(&acc), vec![1.0]);
        // reduce_many == repeated reduce_into in order.
        let mut stepwise = big;
        reduce_into(O::Sum, E::F64, &mut stepwise, &one).unwrap();
        reduce_into(O::Sum, E::F64, &mut stepwise, &neg).unwrap();
        assert_eq!(vals::<f64>(&stepwise), vec![0.0]);
    }

    #[test]
    fn large_buffer_matches_scalar_reference() {
        let n = 10_007;
        let a: Vec<i64> = (0..n).map(|i| i * 3 - 5000).collect();
        let b: Vec<i64> = (0..n).map(|i| (i * 7919) % 10_000 - 5000).collect();
        let want: Vec<i64> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();
        assert_eq!(run(O::Sum, E::I64, &a, &b), want);
        let want: Vec<i64> = a.iter().zip(&b).map(|(x, y)| *x.min(y)).collect();
        assert_eq!(run(O::Min, E::I64, &a, &b), want);
    }
}
