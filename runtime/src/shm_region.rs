//! A shared memory region backed by an anonymous `memfd`.
//!
//! Why memfd and not `shm_open`: a memfd has no name in any filesystem, so a job that
//! crashes leaves nothing behind in `/dev/shm`. Other processes get at the region only by
//! inheriting (or being passed) the file descriptor; [`ShmRegion::inheritable_fd`] makes the
//! descriptor survive `exec`, and [`ShmRegion::from_fd`] maps it on the other side.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use rustix::fs::{fstat, ftruncate, memfd_create, MemfdFlags};
use rustix::io::{fcntl_getfd, fcntl_setfd, FdFlags};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};

/// A `MAP_SHARED`, read/write mapping of a memfd. Unmapped and closed on drop.
#[derive(Debug)]
pub struct ShmRegion {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the region owns its mapping and descriptor; the raw pointer is only handed out
// through `as_ptr`, and every access through it is `unsafe` code whose synchronisation is
// the caller's responsibility (the memory is shared with other processes anyway, so no
// Rust-level ownership of its contents could exist). Moving or sharing the handle itself
// between threads is harmless: munmap/close happen exactly once, in `Drop`.
unsafe impl Send for ShmRegion {}
// SAFETY: see `Send`; `&ShmRegion` only exposes the pointer, length and descriptor.
unsafe impl Sync for ShmRegion {}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

impl ShmRegion {
    /// Creates a new zero-filled region of `len` bytes. `name` only shows up in
    /// `/proc/<pid>/fd` and `/proc/<pid>/maps` (as `memfd:<name>`), for debugging.
    /// The descriptor is close-on-exec until [`inheritable_fd`](Self::inheritable_fd).
    pub fn create(name: &str, len: usize) -> io::Result<ShmRegion> {
        if len == 0 {
            return Err(invalid("shared memory region of length 0"));
        }
        if name.contains('\0') {
            return Err(invalid("name contains NUL"));
        }
        let fd = memfd_create(name, MemfdFlags::CLOEXEC)?;
        let size = u64::try_from(len).map_err(|_| invalid("region too large"))?;
        ftruncate(&fd, size)?;
        Self::map(fd, len)
    }

    /// Maps `len` bytes of an existing shared-memory descriptor, e.g. one inherited by a
    /// child process. Takes ownership of `fd`: it is closed on drop (and on error).
    /// Fails if the file is shorter than `len`, because touching a mapping beyond the end
    /// of its file raises SIGBUS instead of returning an error.
    pub fn from_fd(fd: OwnedFd, len: usize) -> io::Result<ShmRegion> {
        if len == 0 {
            return Err(invalid("shared memory region of length 0"));
        }
        let size = fd_size(fd.as_fd())?;
        if (size as u128) < len as u128 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "descriptor {} holds {size} bytes, {len} requested",
                    fd.as_raw_fd()
                ),
            ));
        }
        Self::map(fd, len)
    }

    /// Maps the whole of an existing shared-memory descriptor (its current size), taking
    /// ownership of `fd` as [`from_fd`](Self::from_fd) does.
    pub fn from_fd_whole(fd: OwnedFd) -> io::Result<ShmRegion> {
        let len = Self::file_len(fd.as_fd())?;
        Self::from_fd(fd, len)
    }

    /// Current size in bytes of the file behind `fd` (e.g. to map a whole inherited
    /// region whose length is not known yet).
    pub fn file_len(fd: BorrowedFd<'_>) -> io::Result<usize> {
        usize::try_from(fd_size(fd)?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large to map"))
    }

    fn map(fd: OwnedFd, len: usize) -> io::Result<ShmRegion> {
        // SAFETY: a fresh mapping chosen by the kernel (addr = null) cannot alias any Rust
        // object; `fd` is a valid descriptor at least `len` bytes long (checked by callers).
        let p = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }?;
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(ShmRegion { ptr, len, fd })
    }

    /// Start of the mapping (page aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: zero-length regions cannot be created. Present for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The backing descriptor (still owned by the region; close-on-exec unless
    /// [`inheritable_fd`](Self::inheritable_fd) was called).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Clears `FD_CLOEXEC` on the backing descriptor so that a child survives `exec` with
    /// it, and returns it. The region still owns (and eventually closes) the descriptor in
    /// this process; the child must pass it to [`from_fd`](Self::from_fd).
    pub fn inheritable_fd(&self) -> io::Result<RawFd> {
        let flags = fcntl_getfd(&self.fd)?;
        fcntl_setfd(&self.fd, flags - FdFlags::CLOEXEC)?;
        Ok(self.fd.as_raw_fd())
    }
}

impl Drop for ShmRegion {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe the mapping created in `map`, unmapped only here;
        // nothing derived from `as_ptr` may be used after the region is dropped (callers
        // tie their views to the region's lifetime). The descriptor closes with `fd`.
        let _ = unsafe { munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Size in bytes of the file behind `fd`.
fn fd_size(fd: BorrowedFd<'_>) -> io::Result<u64> {
    Ok(u64::try_from(fstat(fd)?.st_size).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloexec(fd: RawFd) -> bool {
        // SAFETY: `fd` is open for the duration of the borrow (owned by a live region).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        fcntl_getfd(fd).unwrap().contains(FdFlags::CLOEXEC)
    }

    fn dup(r: &ShmRegion) -> OwnedFd {
        r.fd.try_clone().unwrap()
    }

    #[test]
    fn create_is_zeroed_and_writable() {
        let r = ShmRegion::create("strobe-test", 10_000).unwrap();
        assert_eq!(r.len(), 10_000);
        assert!(!r.is_empty());
        assert_eq!(r.as_ptr() as usize % 4096, 0);
        // SAFETY: the mapping is 10_000 bytes long and only this test touches it.
        let s = unsafe { std::slice::from_raw_parts_mut(r.as_ptr(), r.len()) };
        assert!(s.iter().all(|&b| b == 0));
        s[9_999] = 7;
        assert_eq!(s[9_999], 7);
    }

    #[test]
    fn second_mapping_of_same_fd_shares_memory() {
        let a = ShmRegion::create("strobe-test", 4096).unwrap();
        let b = ShmRegion::from_fd(dup(&a), 4096).unwrap();
        assert_ne!(a.as_ptr(), b.as_ptr());
        // SAFETY: both mappings are 4096 bytes; single-threaded test.
        unsafe {
            a.as_ptr().add(100).write_volatile(42);
            assert_eq!(b.as_ptr().add(100).read_volatile(), 42);
        }
    }

    #[test]
    fn from_fd_refuses_short_file() {
        let a = ShmRegion::create("strobe-test", 4096).unwrap();
        // (from_fd closes the duplicate on error: it owns it.)
        assert!(ShmRegion::from_fd(dup(&a), 8192).is_err());
        assert_eq!(ShmRegion::file_len(a.fd.as_fd()).unwrap(), 4096);
        assert_eq!(ShmRegion::from_fd_whole(dup(&a)).unwrap().len(), 4096);
    }

    #[test]
    fn cloexec_until_made_inheritable() {
        let r = ShmRegion::create("strobe-test", 4096).unwrap();
        assert!(cloexec(r.fd()));
        let fd = r.inheritable_fd().unwrap();
        assert_eq!(fd, r.fd());
        assert!(!cloexec(fd));
    }

    #[test]
    fn zero_length_refused() {
        assert!(ShmRegion::create("strobe-test", 0).is_err());
    }
}
