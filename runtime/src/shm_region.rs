//! A shared memory region backed by an anonymous `memfd`.
//!
//! Why memfd and not `shm_open`: a memfd has no name in any filesystem, so a job that
//! crashes leaves nothing behind in `/dev/shm`. Other processes get at the region only by
//! inheriting (or being passed) the file descriptor; [`ShmRegion::inheritable_fd`] makes the
//! descriptor survive `exec`, and [`ShmRegion::from_fd`] maps it on the other side.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// A `MAP_SHARED`, read/write mapping of a memfd. Unmapped and closed on drop.
#[derive(Debug)]
pub struct ShmRegion {
    ptr: NonNull<u8>,
    len: usize,
    fd: RawFd,
}

// SAFETY: the region owns its mapping and descriptor; the raw pointer is only handed out
// through `as_ptr`, and every access through it is `unsafe` code whose synchronisation is
// the caller's responsibility (the memory is shared with other processes anyway, so no
// Rust-level ownership of its contents could exist). Moving or sharing the handle itself
// between threads is harmless: munmap/close happen exactly once, in `Drop`.
unsafe impl Send for ShmRegion {}
// SAFETY: see `Send`; `&ShmRegion` only exposes the pointer, length and descriptor.
unsafe impl Sync for ShmRegion {}

impl ShmRegion {
    /// Creates a new zero-filled region of `len` bytes. `name` only shows up in
    /// `/proc/<pid>/fd` and `/proc/<pid>/maps` (as `memfd:<name>`), for debugging.
    /// The descriptor is close-on-exec until [`inheritable_fd`](Self::inheritable_fd).
    pub fn create(name: &str, len: usize) -> io::Result<ShmRegion> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "shared memory region of length 0",
            ));
        }
        let cname = CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name contains NUL"))?;
        // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let off = libc::off_t::try_from(len).map_err(|_| {
            close_quietly(fd);
            io::Error::new(io::ErrorKind::InvalidInput, "region too large")
        })?;
        // SAFETY: `fd` is the memfd we just created and own.
        if unsafe { libc::ftruncate(fd, off) } != 0 {
            let err = io::Error::last_os_error();
            close_quietly(fd);
            return Err(err);
        }
        Self::map(fd, len).inspect_err(|_| close_quietly(fd))
    }

    /// Maps `len` bytes of an existing shared-memory descriptor, e.g. one inherited by a
    /// child process. Takes ownership of `fd`: it is closed on drop (and on error).
    /// Fails if the file is shorter than `len`, because touching a mapping beyond the end
    /// of its file raises SIGBUS instead of returning an error.
    pub fn from_fd(fd: RawFd, len: usize) -> io::Result<ShmRegion> {
        let result = (|| {
            if len == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "shared memory region of length 0",
                ));
            }
            let size = fd_size(fd)?;
            if (size as u128) < len as u128 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("descriptor {fd} holds {size} bytes, {len} requested"),
                ));
            }
            Self::map(fd, len)
        })();
        if result.is_err() {
            close_quietly(fd);
        }
        result
    }

    /// Maps the whole of an existing shared-memory descriptor (its current size), taking
    /// ownership of `fd` as [`from_fd`](Self::from_fd) does.
    pub fn from_fd_whole(fd: RawFd) -> io::Result<ShmRegion> {
        match Self::file_len(fd) {
            Ok(len) => Self::from_fd(fd, len),
            Err(e) => {
                close_quietly(fd);
                Err(e)
            }
        }
    }

    /// Current size in bytes of the file behind `fd` (e.g. to map a whole inherited
    /// region whose length is not known yet).
    pub fn file_len(fd: RawFd) -> io::Result<usize> {
        usize::try_from(fd_size(fd)?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large to map"))
    }

    fn map(fd: RawFd, len: usize) -> io::Result<ShmRegion> {
        // SAFETY: a fresh mapping chosen by the kernel (addr = null) cannot alias any Rust
        // object; `fd` is a valid descriptor at least `len` bytes long (checked by callers).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
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
        self.fd
    }

    /// Clears `FD_CLOEXEC` on the backing descriptor so that a child survives `exec` with
    /// it, and returns it. The region still owns (and eventually closes) the descriptor in
    /// this process; the child must pass it to [`from_fd`](Self::from_fd).
    pub fn inheritable_fd(&self) -> io::Result<RawFd> {
        // SAFETY: F_GETFD on a descriptor we own has no memory-safety requirements.
        let flags = unsafe { libc::fcntl(self.fd, libc::F_GETFD) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above; F_SETFD only changes the descriptor flags.
        if unsafe { libc::fcntl(self.fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(self.fd)
    }
}

impl Drop for ShmRegion {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe the mapping created in `map`, unmapped only here;
        // nothing derived from `as_ptr` may be used after the region is dropped (callers
        // tie their views to the region's lifetime).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
        close_quietly(self.fd);
    }
}

/// Size in bytes of the file behind `fd`.
fn fd_size(fd: RawFd) -> io::Result<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a writable buffer of the right type; fstat fills it on success.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat returned 0, so it initialised `st`.
    let st = unsafe { st.assume_init() };
    Ok(u64::try_from(st.st_size).unwrap_or(0))
}

fn close_quietly(fd: RawFd) {
    // SAFETY: closing a descriptor we own; errors from close cannot be acted upon here.
    unsafe {
        libc::close(fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloexec(fd: RawFd) -> bool {
        // SAFETY: F_GETFD on a valid descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert!(flags >= 0);
        flags & libc::FD_CLOEXEC != 0
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
        // SAFETY: dup of a valid descriptor; `b` takes ownership of the duplicate.
        let dupfd = unsafe { libc::dup(a.fd()) };
        assert!(dupfd >= 0);
        let b = ShmRegion::from_fd(dupfd, 4096).unwrap();
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
        // SAFETY: dup of a valid descriptor; ownership passes to from_fd.
        let dupfd = unsafe { libc::dup(a.fd()) };
        // (from_fd closes the duplicate on error; not checked here because another test
        // thread may reuse the descriptor number at once.)
        assert!(ShmRegion::from_fd(dupfd, 8192).is_err());
        assert_eq!(ShmRegion::file_len(a.fd()).unwrap(), 4096);
        // SAFETY: as above.
        let dupfd = unsafe { libc::dup(a.fd()) };
        assert_eq!(ShmRegion::from_fd_whole(dupfd).unwrap().len(), 4096);
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
