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
