//! Creating a recording file safely (issue 11): never through a symlink, never over a file
//! another `strobe record` is writing, with a mode the user chose (0600 by default: a
//! recording holds the program's arguments and output timing, and people share it only on
//! purpose).
//!
//! Decisions (docs/recording.md, "Files"):
//! - The file is created with `O_CREAT | O_EXCL | O_NOFOLLOW` and then `fchmod`ed to the
//!   requested mode (so the umask cannot widen nor silently narrow it).
//! - While a recording is written, its writer holds an exclusive `flock` on it (released
//!   when the [`FileLock`] is dropped, or by the kernel when the process dies). SQLite's
//!   own locks are POSIX record locks and are independent of it.
//! - `--force` (replace) first takes that lock on the existing file: if another writer
//!   holds it, the replacement is refused and the other recording is left untouched. Then
//!   the old file (and its SQLite side files) is unlinked and the new one created with
//!   `O_EXCL`; if a third process creates the name in between, creation fails cleanly.
//!   Not a temp-file-and-rename: a recording must be readable at its final name while it
//!   is written (a SIGKILLed `strobe record` leaves a usable file there).
//! - Only regular files are replaced: a directory, a symlink, a FIFO or a device at the
//!   path is refused with a message naming what it is.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::RecordError;

/// The default mode of a new recording.
pub const DEFAULT_MODE: u32 = 0o600;

/// An exclusive `flock` on a recording, held while it is written.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

fn io(path: &Path, source: std::io::Error) -> RecordError {
    RecordError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What is at `path`, if it is not a plain regular file: "a directory", "a symbolic link".
fn not_regular(ft: std::fs::FileType) -> Option<&'static str> {
    if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("a directory")
    } else if ft.is_symlink() {
        Some("a symbolic link (not followed)")
    } else if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_socket() {
        Some("a socket")
    } else {
        Some("a device or special file")
    }
}

/// Take an exclusive, non-blocking `flock` on `file`; false when someone else holds it.
fn try_lock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock takes a valid open descriptor (owned by `file`) and plain flags.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

fn busy(path: &Path) -> RecordError {
    RecordError::Busy(path.to_path_buf())
}

/// Remove an existing recording at `path` for `--force`, only if it is a regular file no
/// other writer holds.
fn replace_existing(path: &Path) -> Result<(), RecordError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(path, e)),
    };
    if let Some(what) = not_regular(meta.file_type()) {
        return Err(RecordError::NotRegular(path.to_path_buf(), what));
    }
    let old = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io(path, e))?;
    if !try_lock(&old).map_err(|e| io(path, e))? {
        return Err(busy(path));
    }
    clear_side_files(path)?;
    std::fs::remove_file(path).map_err(|e| io(path, e))?;
    // `old` (and its lock) is released here: the name now belongs to the new file.
    Ok(())
}

/// SQLite opens `FILE-wal`, `FILE-shm` and `FILE-journal` itself, following symlinks: a
/// side file left without its database is stale (or planted, in a shared directory such as
/// /tmp) and is removed; anything but a regular file there is refused.
fn clear_side_files(path: &Path) -> Result<(), RecordError> {
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        match std::fs::symlink_metadata(&p) {
            Ok(m) => {
                if let Some(what) = not_regular(m.file_type()) {
                    return Err(RecordError::NotRegular(p, what));
                }
                std::fs::remove_file(&p).map_err(|e| io(&p, e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&p, e)),
        }
    }
    Ok(())
}

/// Create the recording file `path` with `mode`, locked; `replace` is `--force`.
pub fn create_locked(path: &Path, mode: u32, replace: bool) -> Result<FileLock, RecordError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !replace => {
            if let Some(what) = not_regular(m.file_type()) {
                return Err(RecordError::NotRegular(path.to_path_buf(), what));
            }
            return Err(RecordError::Exists(path.to_path_buf()));
        }
        Ok(_) => replace_existing(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(path, e)),
    }
    clear_side_files(path)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode & 0o777)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => RecordError::Exists(path.to_path_buf()),
            _ => io(path, e),
        })?;
    // The umask narrowed the mode given to open(): set exactly what was asked.
    file.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))
        .map_err(|e| io(path, e))?;
    if !try_lock(&file).map_err(|e| io(path, e))? {
        return Err(busy(path));
    }
    Ok(FileLock { _file: file })
}

/// Parse a `--mode` value: octal, at most 0o777, and never writable by others (a
/// recording others may write is one they can turn into a command for you to replay).
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let t = s.trim_start_matches("0o");
    let m = u32::from_str_radix(t, 8).map_err(|_| format!("{s:?} is not an octal mode"))?;
    if m > 0o777 {
        return Err(format!("{s:?}: a mode is at most 0777"));
    }
    if m & 0o022 != 0 {
        return Err(format!(
            "{s:?}: a recording writable by group or others is refused (use e.g. 0640 or 0644)"
        ));
    }
    if m & 0o600 != 0o600 {
        return Err(format!(
            "{s:?}: the owner must be able to read and write it"
        ));
    }
    Ok(m)
}

/// Disk space held next to a recording while it is written (`<file>-reserve`, like
/// SQLite's `-wal`), released when the writer fails: a full disk (ENOSPC) stops the writer
/// mid-batch, and the few pages that mark the file as cut ("cut: disk full at slice S")
/// and seal its checksum need room the disk no longer has. Without the reserve that last
/// update failed now and then, and the recording lost its explanation. Removed when the
/// recording is finished (or the recorder dropped); a `strobe record` killed by SIGKILL
/// leaves it behind (64 KiB, next to the file, removed by the next record to that path).
#[derive(Debug)]
pub struct SpaceReserve {
    path: Option<PathBuf>,
}

/// What the cut needs: the job row's update and the checksum row through the WAL, a few
/// pages each.
const RESERVE_BYTES: usize = 64 << 10;

impl SpaceReserve {
    /// Hold the space next to `recording`. Best effort: where the reserve cannot be
    /// written (a disk already full), the recording goes on without one.
    pub fn hold(recording: &Path) -> SpaceReserve {
        let mut name = recording.as_os_str().to_os_string();
        name.push("-reserve");
        let path = PathBuf::from(name);
        // Not through a symbolic link planted at that name (docs/reliability.md).
        let written = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut f| {
                // Allocated, not `set_len`: a sparse file would hold no blocks. `fallocate`
                // takes the blocks at once; writing zeros holds them only once written
                // back, hence the flush where the filesystem cannot allocate (an fsync
                // that took up to 160 ms of `strobe record`'s start on a busy disk).
                let len = RESERVE_BYTES as u64;
                if rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, len).is_ok() {
                    return Ok(());
                }
                use std::io::Write as _;
                f.write_all(&[0u8; RESERVE_BYTES])?;
                f.sync_data()
            });
        match written {
            Ok(()) => SpaceReserve { path: Some(path) },
            Err(_) => {
                let _ = std::fs::remove_file(&path);
                SpaceReserve { path: None }
            }
        }
    }

    /// Give the space back (idempotent).
    pub fn release(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for SpaceReserve {
    fn drop(&mut self) {
        self.release();
    }
}
