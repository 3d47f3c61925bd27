//! Handle values and constants of `include/mpi.h` (keep the two in step; the C tests
//! compile against the header and check the values the library hands back).

use std::os::raw::c_int;

pub type MpiComm = c_int;
pub type MpiDatatype = c_int;
pub type MpiOp = c_int;
pub type MpiRequest = c_int;
pub type MpiGroup = c_int;
pub type MpiErrhandler = c_int;
pub type MpiAint = isize;

/// `MPI_Status` as laid out in mpi.h.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MpiStatus {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    pub cancelled: c_int,
    pub bytes: i64,
}

pub const COMM_NULL: MpiComm = 0;
pub const COMM_WORLD: MpiComm = 1;
pub const COMM_SELF: MpiComm = 2;
pub const FIRST_USER_COMM: MpiComm = 3;

pub const GROUP_NULL: MpiGroup = 0;
pub const GROUP_EMPTY: MpiGroup = 1;
pub const FIRST_USER_GROUP: MpiGroup = 2;

pub const REQUEST_NULL: MpiRequest = 0;

pub const ERRHANDLER_NULL: MpiErrhandler = 0;
pub const ERRORS_ARE_FATAL: MpiErrhandler = 1;
pub const ERRORS_RETURN: MpiErrhandler = 2;

pub const DATATYPE_NULL: MpiDatatype = 0;
/// The last predefined datatype handle (`MPI_LONG_DOUBLE_INT`).
pub const LAST_PREDEFINED_TYPE: MpiDatatype = 35;
pub const FIRST_USER_TYPE: MpiDatatype = 64;

pub const OP_NULL: MpiOp = 0;
pub const LAST_PREDEFINED_OP: MpiOp = 14;
pub const FIRST_USER_OP: MpiOp = 32;

pub const ANY_SOURCE: c_int = -1;
pub const ANY_TAG: c_int = -1;
pub const PROC_NULL: c_int = -2;
pub const UNDEFINED: c_int = -32766;
pub const KEYVAL_INVALID: c_int = 0;

/// `MPI_IN_PLACE`.
pub const IN_PLACE: usize = usize::MAX;
/// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE`.
pub const STATUS_IGNORE: usize = 1;

pub const MAX_PROCESSOR_NAME: usize = 256;
pub const MAX_ERROR_STRING: usize = 512;
pub const MAX_OBJECT_NAME: usize = 128;
pub const MAX_LIBRARY_VERSION_STRING: usize = 8192;
pub const BSEND_OVERHEAD: usize = 128;

pub const THREAD_FUNNELED: c_int = 1;
pub const COMM_TYPE_SHARED: c_int = 1;
/// MPI-4 split types (MPICH's values).
pub const COMM_TYPE_HW_UNGUIDED: c_int = 2;
pub const COMM_TYPE_HW_GUIDED: c_int = 3;

pub const IDENT: c_int = 0;
pub const CONGRUENT: c_int = 1;
pub const SIMILAR: c_int = 2;
pub const UNEQUAL: c_int = 3;

pub const TAG_UB_KEY: c_int = 1;
pub const LASTUSEDCODE_KEY: c_int = 7;
pub const FIRST_USER_KEYVAL: c_int = 16;

pub const COMBINER_NAMED: c_int = 1;
pub const COMBINER_DUP: c_int = 2;
pub const COMBINER_CONTIGUOUS: c_int = 3;
pub const COMBINER_VECTOR: c_int = 4;
pub const COMBINER_HVECTOR: c_int = 5;
pub const COMBINER_INDEXED: c_int = 6;
pub const COMBINER_HINDEXED: c_int = 7;
pub const COMBINER_INDEXED_BLOCK: c_int = 8;
pub const COMBINER_STRUCT: c_int = 10;
pub const COMBINER_RESIZED: c_int = 16;

/// Error classes (every error code strobe returns is its class).
pub mod class {
    use std::os::raw::c_int;
    pub const SUCCESS: c_int = 0;
    pub const BUFFER: c_int = 1;
    pub const COUNT: c_int = 2;
    pub const TYPE: c_int = 3;
    pub const TAG: c_int = 4;
    pub const COMM: c_int = 5;
    pub const RANK: c_int = 6;
    pub const REQUEST: c_int = 7;
    pub const ROOT: c_int = 8;
    pub const GROUP: c_int = 9;
    pub const OP: c_int = 10;
    pub const DIMS: c_int = 12;
    pub const ARG: c_int = 13;
    pub const TRUNCATE: c_int = 15;
    pub const OTHER: c_int = 16;
    pub const INTERN: c_int = 17;
    pub const IN_STATUS: c_int = 18;
    pub const KEYVAL: c_int = 20;
    pub const NO_MEM: c_int = 21;
    pub const UNSUPPORTED_OPERATION: c_int = 42;
    pub const LASTCODE: c_int = 57;
}

/// `MPI_ERR_*` names by class number, for messages and `MPI_Error_string`.
pub const CLASS_NAMES: [(&str, &str); 58] = [
    ("MPI_SUCCESS", "no error"),
    ("MPI_ERR_BUFFER", "invalid buffer pointer"),
    ("MPI_ERR_COUNT", "invalid count argument"),
    ("MPI_ERR_TYPE", "invalid datatype"),
    ("MPI_ERR_TAG", "invalid tag"),
    ("MPI_ERR_COMM", "invalid communicator"),
    ("MPI_ERR_RANK", "invalid rank"),
    ("MPI_ERR_REQUEST", "invalid request"),
    ("MPI_ERR_ROOT", "invalid root"),
    ("MPI_ERR_GROUP", "invalid group"),
    ("MPI_ERR_OP", "invalid reduction operation"),
    ("MPI_ERR_TOPOLOGY", "invalid topology"),
    ("MPI_ERR_DIMS", "invalid dimension argument"),
    ("MPI_ERR_ARG", "invalid argument"),
    ("MPI_ERR_UNKNOWN", "unknown error"),
    ("MPI_ERR_TRUNCATE", "message truncated on receive"),
    ("MPI_ERR_OTHER", "other error"),
    ("MPI_ERR_INTERN", "internal error in strobe"),
    ("MPI_ERR_IN_STATUS", "error code is in the status"),
    ("MPI_ERR_PENDING", "pending request"),
    ("MPI_ERR_KEYVAL", "invalid keyval"),
    ("MPI_ERR_NO_MEM", "out of memory"),
    ("MPI_ERR_BASE", "invalid base address"),
    ("MPI_ERR_INFO_KEY", "info key too long"),
    ("MPI_ERR_INFO_VALUE", "info value too long"),
    ("MPI_ERR_INFO_NOKEY", "info key not defined"),
    ("MPI_ERR_SPAWN", "error spawning processes"),
    ("MPI_ERR_PORT", "invalid port name"),
    ("MPI_ERR_SERVICE", "invalid service name"),
    ("MPI_ERR_NAME", "invalid name"),
    ("MPI_ERR_WIN", "invalid window"),
    ("MPI_ERR_SIZE", "invalid size"),
    ("MPI_ERR_DISP", "invalid displacement"),
    ("MPI_ERR_INFO", "invalid info object"),
    ("MPI_ERR_LOCKTYPE", "invalid lock type"),
    ("MPI_ERR_ASSERT", "invalid assert"),
    ("MPI_ERR_RMA_CONFLICT", "conflicting accesses to a window"),
    ("MPI_ERR_RMA_SYNC", "wrong synchronization of RMA calls"),
    ("MPI_ERR_FILE", "invalid file handle"),
    (
        "MPI_ERR_NOT_SAME",
        "collective argument not identical on all processes",
    ),
    ("MPI_ERR_AMODE", "invalid file access mode"),
    (
        "MPI_ERR_UNSUPPORTED_DATAREP",
        "unsupported data representation",
    ),
    (
        "MPI_ERR_UNSUPPORTED_OPERATION",
        "operation not supported by strobe",
    ),
    ("MPI_ERR_NO_SUCH_FILE", "file does not exist"),
    ("MPI_ERR_FILE_EXISTS", "file exists"),
    ("MPI_ERR_BAD_FILE", "invalid file name"),
    ("MPI_ERR_ACCESS", "permission denied"),
    ("MPI_ERR_NO_SPACE", "not enough space"),
    ("MPI_ERR_QUOTA", "quota exceeded"),
    ("MPI_ERR_READ_ONLY", "read-only file or file system"),
    ("MPI_ERR_FILE_IN_USE", "file in use"),
    ("MPI_ERR_DUP_DATAREP", "data representation already defined"),
    ("MPI_ERR_CONVERSION", "data conversion failed"),
    ("MPI_ERR_IO", "I/O error"),
    ("MPI_ERR_RMA_RANGE", "target memory outside the window"),
    ("MPI_ERR_RMA_ATTACH", "memory cannot be attached"),
    ("MPI_ERR_RMA_SHARED", "memory cannot be shared"),
    ("MPI_ERR_RMA_FLAVOR", "wrong window flavor"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The value `mpi.h` gives `name` (`#define name ((type)N)` or `#define name N`).
    fn header_value(header: &str, name: &str) -> i64 {
        let line = header
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name) && l.starts_with("#define"))
            .unwrap_or_else(|| panic!("{name} not in mpi.h"));
        let mut v: String = line.split_whitespace().skip(2).collect();
        // Strip outer parentheses, then a leading cast: "((MPI_Comm)0)" -> "0".
        while v.starts_with('(') && v.ends_with(')') {
            v = v[1..v.len() - 1].to_string();
        }
        if v.starts_with('(') {
            v = v[v.find(')').map_or(0, |i| i + 1)..].to_string();
        }
        v.parse()
            .unwrap_or_else(|_| panic!("{name}: cannot parse {line:?}"))
    }

    #[test]
    fn header_and_library_agree() {
        let h = include_str!("../include/mpi.h");
        let pairs: &[(&str, i64)] = &[
            ("MPI_COMM_NULL", COMM_NULL as i64),
            ("MPI_COMM_WORLD", COMM_WORLD as i64),
            ("MPI_COMM_SELF", COMM_SELF as i64),
            ("MPI_GROUP_EMPTY", GROUP_EMPTY as i64),
            ("MPI_ERRORS_ARE_FATAL", ERRORS_ARE_FATAL as i64),
            ("MPI_ERRORS_RETURN", ERRORS_RETURN as i64),
            ("MPI_LONG_DOUBLE_INT", LAST_PREDEFINED_TYPE as i64),
            ("MPI_NO_OP", LAST_PREDEFINED_OP as i64),
            ("MPI_ANY_SOURCE", ANY_SOURCE as i64),
            ("MPI_ANY_TAG", ANY_TAG as i64),
            ("MPI_PROC_NULL", PROC_NULL as i64),
            ("MPI_UNDEFINED", UNDEFINED as i64),
            ("MPI_MAX_PROCESSOR_NAME", MAX_PROCESSOR_NAME as i64),
            ("MPI_MAX_ERROR_STRING", MAX_ERROR_STRING as i64),
            ("MPI_MAX_OBJECT_NAME", MAX_OBJECT_NAME as i64),
            ("MPI_BSEND_OVERHEAD", BSEND_OVERHEAD as i64),
            ("MPI_THREAD_FUNNELED", THREAD_FUNNELED as i64),
            ("MPI_COMM_TYPE_SHARED", COMM_TYPE_SHARED as i64),
            ("MPI_COMM_TYPE_HW_UNGUIDED", COMM_TYPE_HW_UNGUIDED as i64),
            ("MPI_COMM_TYPE_HW_GUIDED", COMM_TYPE_HW_GUIDED as i64),
            ("MPI_CONGRUENT", CONGRUENT as i64),
            ("MPI_TAG_UB", TAG_UB_KEY as i64),
            ("MPI_LASTUSEDCODE", LASTUSEDCODE_KEY as i64),
            ("MPI_COMBINER_RESIZED", COMBINER_RESIZED as i64),
            ("MPI_COMBINER_STRUCT", COMBINER_STRUCT as i64),
            ("MPI_ERR_LASTCODE", class::LASTCODE as i64),
        ];
        for (name, v) in pairs {
            assert_eq!(header_value(h, name), *v, "{name}");
        }
        // Every error class: the header's number is its index in CLASS_NAMES.
        for (i, (name, _)) in CLASS_NAMES.iter().enumerate() {
            assert_eq!(header_value(h, name), i as i64, "{name}");
        }
    }
}
