//! Element types the runtime understands. Point-to-point and most collectives move bytes;
//! only reductions look inside a buffer, so the runtime knows the predefined element types
//! and the MINLOC/MAXLOC pair types, with their C layouts (x86-64 / aarch64 LP64 ABI).
//! Derived datatypes are packed on the rank side before they reach the runtime.

/// A predefined element type, as carried in a descriptor (`repr(u8)` so it fits the ring).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ElemType {
    /// Opaque bytes: valid for data movement, refused by every reduction op but
    /// the bitwise ones (MPI allows BAND/BOR/BXOR on MPI_BYTE).
    Byte = 0,
    I8 = 1,
    I16 = 2,
    I32 = 3,
    I64 = 4,
    U8 = 5,
    U16 = 6,
    U32 = 7,
    U64 = 8,
    F32 = 9,
    F64 = 10,
    /// C `_Bool` / `bool`, one byte.
    Bool = 11,
    /// `struct { float v; int i; }` (MPI_FLOAT_INT), 8 bytes.
    FloatInt = 12,
    /// `struct { double v; int i; }` (MPI_DOUBLE_INT), 16 bytes with padding.
    DoubleInt = 13,
    /// `struct { long v; int i; }` (MPI_LONG_INT), 16 bytes with padding.
    LongInt = 14,
    /// `struct { int v; int i; }` (MPI_2INT), 8 bytes.
    TwoInt = 15,
    /// `struct { short v; int i; }` (MPI_SHORT_INT), 8 bytes.
    ShortInt = 16,
}

impl ElemType {
    pub const ALL: [ElemType; 17] = [
        ElemType::Byte,
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::U8,
        ElemType::U16,
        ElemType::U32,
        ElemType::U64,
        ElemType::F32,
        ElemType::F64,
        ElemType::Bool,
        ElemType::FloatInt,
        ElemType::DoubleInt,
        ElemType::LongInt,
        ElemType::TwoInt,
        ElemType::ShortInt,
    ];

    /// Size of one element in bytes (its C `sizeof`, padding included).
    pub fn size(self) -> usize {
        match self {
            ElemType::Byte | ElemType::I8 | ElemType::U8 | ElemType::Bool => 1,
            ElemType::I16 | ElemType::U16 => 2,
            ElemType::I32 | ElemType::U32 | ElemType::F32 => 4,
            ElemType::I64 | ElemType::U64 | ElemType::F64 => 8,
            ElemType::FloatInt | ElemType::TwoInt | ElemType::ShortInt => 8,
            ElemType::DoubleInt | ElemType::LongInt => 16,
        }
    }

    pub fn from_u8(v: u8) -> Option<ElemType> {
        ElemType::ALL.get(v as usize).copied()
    }

    /// Its code in type signatures ([`TypeSig::basic`]): the C binding gives its
    /// predefined types with this representation the same code, so a Rust `i32` matches a
    /// C `MPI_INT`.
    pub const fn sig_code(self) -> u64 {
        self as u64 + 1
    }

    pub fn name(self) -> &'static str {
        match self {
            ElemType::Byte => "byte",
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::U8 => "u8",
            ElemType::U16 => "u16",
            ElemType::U32 => "u32",
            ElemType::U64 => "u64",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::Bool => "bool",
            ElemType::FloatInt => "float_int",
            ElemType::DoubleInt => "double_int",
            ElemType::LongInt => "long_int",
            ElemType::TwoInt => "2int",
            ElemType::ShortInt => "short_int",
        }
    }
}

/// A predefined reduction operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ReduceOp {
    Sum = 0,
    Prod = 1,
    Min = 2,
    Max = 3,
    Land = 4,
    Lor = 5,
    Lxor = 6,
    Band = 7,
    Bor = 8,
    Bxor = 9,
    MinLoc = 10,
    MaxLoc = 11,
    /// MPI_REPLACE: the result is the later operand (used by one-sided ops; harmless here).
    Replace = 12,
    /// MPI_NO_OP: the result is the earlier operand.
    NoOp = 13,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 14] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Land,
        ReduceOp::Lor,
        ReduceOp::Lxor,
        ReduceOp::Band,
        ReduceOp::Bor,
        ReduceOp::Bxor,
        ReduceOp::MinLoc,
        ReduceOp::MaxLoc,
        ReduceOp::Replace,
        ReduceOp::NoOp,
    ];

    pub fn from_u8(v: u8) -> Option<ReduceOp> {
        ReduceOp::ALL.get(v as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Land => "land",
            ReduceOp::Lor => "lor",
            ReduceOp::Lxor => "lxor",
            ReduceOp::Band => "band",
            ReduceOp::Bor => "bor",
            ReduceOp::Bxor => "bxor",
            ReduceOp::MinLoc => "minloc",
            ReduceOp::MaxLoc => "maxloc",
            ReduceOp::Replace => "replace",
            ReduceOp::NoOp => "no_op",
        }
    }
}

/// A compact summary of an MPI *type signature* (MPI-3.1 3.3.1: the sequence of basic
/// types of a datatype, displacements left out), for the type-matching check
/// (`strobe_runtime::checks`): a polynomial hash of the sequence and its length. The
/// hash of a concatenation is computed from the hashes of its parts, so a derived type's
/// summary is built from its parts' and `count` copies of a type cost `O(log count)`.
/// Equal sequences always give equal summaries; different ones collide with probability
/// about 2^-64 (a missed report, never a false one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeSig {
    /// The hash of the sequence (0 for the empty sequence).
    pub hash: u64,
    /// Basic elements in the sequence.
    pub len: u64,
}

/// The base of the polynomial hash (odd, so multiplication by it is a bijection mod 2^64).
const SIG_BASE: u64 = 0x9E37_79B9_7F4A_7C15;

/// `SIG_BASE^n` mod 2^64.
fn sig_base_pow(mut n: u64) -> u64 {
    let (mut acc, mut b) = (1u64, SIG_BASE);
    while n > 0 {
        if n & 1 == 1 {
            acc = acc.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        n >>= 1;
    }
    acc
}

impl TypeSig {
    /// The empty signature (a datatype with no data, or a count of 0).
    pub const EMPTY: TypeSig = TypeSig { hash: 0, len: 0 };

    /// One basic type, named by a code the caller keeps stable (any `u64`; codes are
    /// mixed here so that small codes do not line up in the polynomial).
    pub fn basic(code: u64) -> TypeSig {
        // splitmix64's finaliser: a bijection, so distinct codes stay distinct.
        let mut z = code.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        TypeSig {
            hash: (z ^ (z >> 31)) | 1,
            len: 1,
        }
    }

    /// The signature of `self` followed by `next`.
    pub fn concat(self, next: TypeSig) -> TypeSig {
        TypeSig {
            hash: self
                .hash
                .wrapping_mul(sig_base_pow(next.len))
                .wrapping_add(next.hash),
            len: self.len.saturating_add(next.len),
        }
    }

    /// `n` copies of `self` in a row (`n` elements of a datatype).
    pub fn repeat(self, mut n: u64) -> TypeSig {
        let (mut acc, mut unit) = (TypeSig::EMPTY, self);
        while n > 0 {
            if n & 1 == 1 {
                acc = acc.concat(unit);
            }
            unit = unit.concat(unit);
            n >>= 1;
        }
        acc
    }
}

/// The outcome of comparing a message's type signature with its receive's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigMatch {
    /// The message's signature is a prefix of the receive's (MPI-3.1 3.3.1).
    Match,
    /// It is not: the standard calls the program erroneous.
    Mismatch,
    /// Cannot tell: a side carries no signature (`MPI_PACKED`, the Rust API, a
    /// persistent or combined call), the message is longer than the receive (reported as
    /// truncation instead), or it ends inside a receive element of a derived type.
    Unknown,
}

/// Compare the signature of a message of `send_count` elements of signature `send` with
/// that of a receive of `recv_count` elements of `recv`. `None` is "no signature". The
/// message must equal the first elements of the receive: it is compared with the receive
/// signature repeated as many whole times as the message is long.
pub fn compare_signatures(
    send: Option<TypeSig>,
    send_count: u64,
    recv: Option<TypeSig>,
    recv_count: u64,
) -> SigMatch {
    let (Some(s), Some(r)) = (send, recv) else {
        return SigMatch::Unknown;
    };
    let msg = s.repeat(send_count);
    if msg.len == 0 {
        return SigMatch::Match;
    }
    if r.len == 0 || msg.len > r.len.saturating_mul(recv_count) || msg.len % r.len != 0 {
        return SigMatch::Unknown;
    }
    if r.repeat(msg.len / r.len) == msg {
        SigMatch::Match
    } else {
        SigMatch::Mismatch
    }
}

#[cfg(test)]
mod sig_tests {
    use super::*;

    const INT: u64 = 7;
    const BYTE: u64 = 1;

    #[test]
    fn repeat_and_concat_agree() {
        let a = TypeSig::basic(INT);
        let b = TypeSig::basic(BYTE);
        let three = a.concat(a).concat(a);
        assert_eq!(a.repeat(3), three);
        assert_eq!(a.concat(b).repeat(2), a.concat(b).concat(a).concat(b));
        assert_ne!(a.concat(b), b.concat(a));
        assert_eq!(a.repeat(0), TypeSig::EMPTY);
    }

    #[test]
    fn int_against_bytes_is_a_mismatch_and_against_a_contiguous_int_a_match() {
        let int = Some(TypeSig::basic(INT));
        let byte = Some(TypeSig::basic(BYTE));
        assert_eq!(compare_signatures(int, 1, byte, 4), SigMatch::Mismatch);
        assert_eq!(compare_signatures(int, 4, int, 8), SigMatch::Match);
        let four_ints = Some(TypeSig::basic(INT).repeat(4));
        assert_eq!(compare_signatures(int, 4, four_ints, 1), SigMatch::Match);
        assert_eq!(compare_signatures(four_ints, 2, int, 8), SigMatch::Match);
        // Ends inside a receive element: cannot tell.
        assert_eq!(compare_signatures(int, 2, four_ints, 1), SigMatch::Unknown);
        assert_eq!(compare_signatures(None, 2, int, 2), SigMatch::Unknown);
        assert_eq!(compare_signatures(int, 0, byte, 4), SigMatch::Match);
        // Longer than the receive: truncation, reported elsewhere.
        assert_eq!(compare_signatures(int, 9, int, 8), SigMatch::Unknown);
    }
}
