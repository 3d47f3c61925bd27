//! The types calls exchange: [`Equivalence`] and the MINLOC/MAXLOC pair structs,
//! [`Error`] and [`Status`].

use super::{ElemType, InitError, Result, ANY_SOURCE, ANY_TAG};
use crate::descriptor::{Completion, RtError, COMPLETION_CANCELLED};

/// MPI error classes the runtime can produce.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("MPI_ERR_TRUNCATE: message longer than the receive buffer")]
    Truncate,
    #[error("MPI_ERR_RANK: rank outside the communicator")]
    Rank,
    #[error("MPI_ERR_TAG: tag outside 0..=MPI_TAG_UB")]
    Tag,
    #[error("MPI_ERR_COMM: unknown or freed communicator")]
    Comm,
    #[error("MPI_ERR_COUNT: counts or buffer sizes inconsistent with the call")]
    Count,
    #[error("MPI_ERR_OP: reduction op not defined on the element type")]
    Op,
    #[error("MPI_ERR_ARG: invalid argument")]
    Arg,
    #[error("MPI_ERR_BUFFER: invalid or missing buffer")]
    Buffer,
    #[error("collective mismatch: members called different collectives, roots, ops or sizes")]
    CollectiveMismatch,
    #[error("the job is being aborted")]
    Aborted,
    #[error("MPI_Init failed: {0}")]
    Init(#[from] InitError),
}

impl Error {
    /// The error a completion reports, `None` for success.
    pub fn from_rt(e: RtError) -> Option<Error> {
        Some(match e {
            RtError::Ok => return None,
            RtError::Truncate => Error::Truncate,
            RtError::Rank => Error::Rank,
            RtError::Comm => Error::Comm,
            RtError::CollectiveMismatch => Error::CollectiveMismatch,
            RtError::Op => Error::Op,
            RtError::Arg => Error::Arg,
            RtError::Aborted => Error::Aborted,
            RtError::Count => Error::Count,
            RtError::Buffer => Error::Buffer,
        })
    }
}

/// A type whose values can be sent as they are in memory: plain data with a C layout the
/// runtime knows ([`ElemType`]).
///
/// # Safety
/// `size_of::<Self>()` must equal `Self::ELEM.size()`, every bit pattern the runtime may
/// write must be a valid `Self`, and the layout must be the one `ELEM` describes.
pub unsafe trait Equivalence: Copy + 'static {
    const ELEM: ElemType;
}

macro_rules! equivalence {
    ($($t:ty => $e:ident),* $(,)?) => {
        $(unsafe impl Equivalence for $t { const ELEM: ElemType = ElemType::$e; })*
    };
}

equivalence! {
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f32 => F32, f64 => F64,
}

/// `MPI_FLOAT_INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FloatInt {
    pub v: f32,
    pub i: i32,
}

/// `MPI_DOUBLE_INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DoubleInt {
    pub v: f64,
    pub i: i32,
}

/// `MPI_LONG_INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LongInt {
    pub v: i64,
    pub i: i32,
}

/// `MPI_2INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TwoInt {
    pub v: i32,
    pub i: i32,
}

/// `MPI_SHORT_INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShortInt {
    pub v: i16,
    pub i: i32,
}

// The padding bytes of DoubleInt/LongInt/ShortInt may be written with anything: padding has
// no validity requirement.
equivalence! {
    FloatInt => FloatInt, DoubleInt => DoubleInt, LongInt => LongInt,
    TwoInt => TwoInt, ShortInt => ShortInt,
}

/// The status of a completed receive or probe (`MPI_Status`). `source` is comm-relative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    pub bytes: u64,
    pub cancelled: bool,
}

impl Status {
    /// The empty status of a completed-before or inactive request.
    pub const EMPTY: Status = Status {
        source: ANY_SOURCE,
        tag: ANY_TAG,
        bytes: 0,
        cancelled: false,
    };

    fn of(c: &Completion) -> Status {
        Status {
            source: c.source,
            tag: c.tag,
            bytes: c.bytes,
            cancelled: c.flags & COMPLETION_CANCELLED != 0,
        }
    }

    /// `MPI_Get_count`: whole elements of `T` received.
    pub fn count<T: Equivalence>(&self) -> usize {
        self.bytes as usize / std::mem::size_of::<T>().max(1)
    }
}

/// The completion's status, or its error.
pub(super) fn finish(c: &Completion) -> Result<Status> {
    match Error::from_rt(RtError::from_u32(c.error)) {
        None => Ok(Status::of(c)),
        Some(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size_matches<T: Equivalence>() {
        assert_eq!(
            std::mem::size_of::<T>(),
            T::ELEM.size(),
            "{}",
            T::ELEM.name()
        );
    }

    #[test]
    fn equivalence_sizes() {
        size_matches::<u8>();
        size_matches::<i8>();
        size_matches::<u16>();
        size_matches::<i16>();
        size_matches::<u32>();
        size_matches::<i32>();
        size_matches::<u64>();
        size_matches::<i64>();
        size_matches::<f32>();
        size_matches::<f64>();
        size_matches::<FloatInt>();
        size_matches::<DoubleInt>();
        size_matches::<LongInt>();
        size_matches::<TwoInt>();
        size_matches::<ShortInt>();
    }

    #[test]
    fn pair_layouts() {
        assert_eq!(std::mem::offset_of!(DoubleInt, i), 8);
        assert_eq!(std::mem::offset_of!(LongInt, i), 8);
        assert_eq!(std::mem::offset_of!(ShortInt, i), 4);
        assert_eq!(std::mem::offset_of!(FloatInt, i), 4);
        assert_eq!(std::mem::offset_of!(TwoInt, i), 4);
    }

    #[test]
    fn errors_from_runtime() {
        assert!(Error::from_rt(RtError::Ok).is_none());
        for (rt, want) in [
            (RtError::Truncate, "TRUNCATE"),
            (RtError::Rank, "RANK"),
            (RtError::Comm, "COMM"),
            (RtError::Count, "COUNT"),
            (RtError::Op, "ERR_OP"),
            (RtError::Arg, "ARG"),
            (RtError::Buffer, "BUFFER"),
        ] {
            let e = Error::from_rt(rt).unwrap();
            assert!(e.to_string().contains(want), "{e}");
        }
        assert!(matches!(
            Error::from_rt(RtError::CollectiveMismatch),
            Some(Error::CollectiveMismatch)
        ));
        assert!(matches!(
            Error::from_rt(RtError::Aborted),
            Some(Error::Aborted)
        ));
    }

    #[test]
    fn status_count_and_completion() {
        let c = Completion {
            request: 1,
            source: 2,
            tag: 7,
            bytes: 24,
            error: 0,
            flags: COMPLETION_CANCELLED,
            ..Default::default()
        };
        let s = finish(&c).unwrap();
        assert_eq!(s.source, 2);
        assert_eq!(s.tag, 7);
        assert!(s.cancelled);
        assert_eq!(s.count::<f64>(), 3);
        assert_eq!(s.count::<u8>(), 24);
        assert_eq!(s.count::<DoubleInt>(), 1);
        let bad = Completion {
            error: RtError::Truncate as u32,
            ..c
        };
        assert!(matches!(finish(&bad), Err(Error::Truncate)));
    }
}
