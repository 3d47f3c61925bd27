//! Opening a recording for reading, with clear errors for files that are not recordings,
//! were written by a newer strobe, or are damaged.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::migrations::CURRENT_VERSION;
use crate::RecordError;

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Open `path` for reading only if it is a regular file (issue 11 item 9): a FIFO would
/// block `open()` until a writer comes, a device could be anything. `O_NONBLOCK` makes the
/// open itself return at once whatever the file is, `fstat` on the descriptor then says
/// what was opened (no window between a check and the open), and a regular file ignores
/// the flag.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = f.metadata()?.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else {
            "not a regular file"
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what}: a recording is a regular file"),
        ));
    }
    Ok(f)
}

/// Check the SQLite header ourselves first: SQLite's own messages for a garbage or cut-off
/// file ("file is not a database", "database disk image is malformed") do not say which.
pub fn check_header(path: &Path) -> Result<(), RecordError> {
    let io = |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = open_regular(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let mut h = [0u8; 100];
    let mut got = 0;
    while got < h.len() {
        match f.read(&mut h[got..]).map_err(io)? {
            0 => break,
            n => got += n,
        }
    }
    if got < h.len() || &h[..16] != SQLITE_MAGIC {
        return Err(RecordError::NotARecording(format!(
            "{} is not an SQLite database",
            path.display()
        )));
    }
    let be32 = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let page_size = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65536u64,
        p => p as u64,
    };
    let pages = be32(28) as u64;
    // The in-header page count is valid when "version-valid-for" equals the change counter
    // (every SQLite since 3.7.0 keeps it so).
    // A WAL next to the file may hold the pages a checkpoint has not copied yet (a
    // recording cut by a full disk: the checkpoint that would fold it back had no room).
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal_len = std::fs::metadata(&wal).map_or(0, |m| m.len());
    if be32(92) == be32(24) && pages * page_size > len && wal_len == 0 {
        return Err(RecordError::Corrupt(format!(
            "{} is truncated: {} bytes, but its header says {} pages of {} bytes",
            path.display(),
            len,
            pages,
            page_size
        )));
    }
    Ok(())
}

/// Open the file read-only and check that it holds a strobe schema this build can read.
pub(crate) fn open_connection(path: &Path) -> Result<Connection, RecordError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        return Err(RecordError::NotARecording(format!(
            "{} is an SQLite database without a strobe schema",
            path.display()
        )));
    }
    if version > CURRENT_VERSION {
        return Err(RecordError::TooNew {
            found: version,
            supported: CURRENT_VERSION,
        });
    }
    let has_job: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'job'",
        [],
        |r| r.get(0),
    )?;
    if has_job == 0 {
        return Err(RecordError::NotARecording(format!(
            "{} has no job table",
            path.display()
        )));
    }
    Ok(conn)
}

/// Read every page once: it turns a damaged file into one clear error instead of a wrong
/// summary.
pub(crate) fn quick_check(conn: &Connection) -> Result<(), RecordError> {
    let check: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(RecordError::Corrupt(check));
    }
    Ok(())
}

/// A read-only connection to a checked recording, for SQL of one's own (readers inside
/// strobe use [`crate::Recording`], which has every query they need).
pub fn open_recording(path: &Path) -> Result<Connection, RecordError> {
    check_header(path)?;
    let conn = open_connection(path)?;
    quick_check(&conn)?;
    Ok(conn)
}
