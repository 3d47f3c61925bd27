//! The DMA Helper's access to rank memory: Linux cross-memory attach.
//!
//! Ranks are separate processes; descriptors carry the *addresses* of their buffers, and the
//! node manager moves the bytes with `process_vm_readv`/`process_vm_writev` — one kernel copy
//! per side, no shared staging area the rank must copy into first.
//!
//! Permission: the kernel applies the `ptrace` access check (`PTRACE_MODE_ATTACH_REALCREDS`)
//! to the target. Same uid is needed, and under the Yama LSM with
//! `kernel.yama.ptrace_scope = 1` only ancestors may attach unless the target opts in; each
//! rank therefore calls [`allow_cross_memory_attach`] at init.
//!
//! Writing into our *own* process through these functions (pid = our pid) bypasses Rust's
//! aliasing rules just like writing to `/proc/self/mem` does; like that file, it is outside
//! what Rust's safety guarantees cover, and callers must only name buffers they own.

use std::io;

/// Largest piece handed to one syscall. The kernel caps a single call at `MAX_RW_COUNT`
/// (`INT_MAX` rounded down to a page) and returns a partial count beyond it; staying well
/// under keeps every call a plain full transfer unless something actually faults.
const MAX_PIECE: usize = 1 << 30;

/// Why a cross-memory transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum ProcMemError {
    /// `EPERM`: the kernel's ptrace access check refused us.
    #[error(
        "permission denied accessing memory of pid {pid} (EPERM): cross-memory attach needs \
         ptrace permission over the target — same uid, and under the Yama LSM \
         (/proc/sys/kernel/yama/ptrace_scope = 1) the target must allow us with \
         prctl(PR_SET_PTRACER, ...), which strobe ranks do in allow_cross_memory_attach(); \
         ptrace_scope 2 requires CAP_SYS_PTRACE and 3 forbids it entirely"
    )]
    PermissionDenied { pid: i32 },
    /// `ESRCH`: the process does not exist (any more).
    #[error("no such process: pid {pid} (ESRCH); the rank has probably exited")]
    NoSuchProcess { pid: i32 },
    /// `EFAULT` on a transfer with one remote side: the range is not (fully) mapped with the
    /// access needed (readable for a read, writable for a write) in `pid`.
    #[error(
        "bad address (EFAULT): {len} bytes at {addr:#x} in pid {pid} are not mapped with the \
         needed access (failed after {done} bytes)"
    )]
    BadAddress {
        pid: i32,
        addr: u64,
        len: usize,
        done: usize,
    },
    /// `EFAULT` on a direct copy where one side is our own process: the kernel does not say
    /// which of the two ranges was bad.
    #[error(
        "bad address (EFAULT) copying {len} bytes from {src_addr:#x} in pid {src_pid} to \
         {dst_addr:#x} in pid {dst_pid}: one of the ranges is not mapped with the needed access"
    )]
    BadAddressPair {
        src_pid: i32,
        src_addr: u64,
        dst_pid: i32,
        dst_addr: u64,
        len: usize,
    },
    /// The kernel reported moving zero bytes without an error, so looping would not progress.
    #[error("short transfer with pid {pid} at {addr:#x}: {done} of {len} bytes moved")]
    ShortTransfer {
        pid: i32,
        addr: u64,
        len: usize,
        done: usize,
    },
    /// Any other failure (bad arguments, out of memory, ...).
    #[error("cross-memory {op} with pid {pid} failed: {source}")]
    Io {
        pid: i32,
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Remote -> local (`process_vm_readv`).
    Read,
    /// Local -> remote (`process_vm_writev`).
    Write,
}

/// Outcome of [`transfer_raw`] before it is given a caller-level meaning.
enum RawError {
    Errno { errno: i32, done: usize },
    Zero { done: usize },
}

/// Move `len` bytes between local `local` and remote `(pid, remote)`, looping over partial
/// transfers and splitting at [`MAX_PIECE`]. One iovec per side, so `IOV_MAX` never applies.
///
/// `local` is a raw address because [`copy_between`] passes a rank-supplied address in our
/// own process straight through; the kernel validates it (faults become `EFAULT`, never a
/// crash), so no Rust reference to that memory is ever formed.
fn transfer_raw(dir: Dir, pid: i32, local: usize, remote: u64, len: usize) -> Result<(), RawError> {
    if pid <= 0 {
        // A rank not started, or one of another node (node managers know only their own
        // ranks' pids): there is no process to attach to. Never hand 0 to the kernel.
        return Err(RawError::Errno {
            errno: libc::ESRCH,
            done: 0,
        });
    }
    let mut done = 0;
    while done < len {
        let piece = (len - done).min(MAX_PIECE);
        let local_iov = libc::iovec {
            iov_base: (local + done) as *mut libc::c_void,
            iov_len: piece,
        };
        let remote_iov = libc::iovec {
            iov_base: remote.wrapping_add(done as u64) as usize as *mut libc::c_void,
            iov_len: piece,
        };
        // SAFETY: the syscalls only read the two iovec structs we pass (valid locals) and
        // copy between the described ranges; the kernel checks both ranges and reports bad
        // ones as EFAULT. The local range is either a live Rust buffer the caller borrowed
        // for this call or an address the caller named in our own process (module docs).
        let n = unsafe {
            match dir {
                Dir::Read => libc::process_vm_readv(pid, &local_iov, 1, &remote_iov, 1, 0),
                Dir::Write => libc::process_vm_writev(pid, &local_iov, 1, &remote_iov, 1, 0),
            }
        };
        if n < 0 {
            let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if errno == libc::EINTR {
                continue;
            }
            return Err(RawError::Errno { errno, done });
        }
        if n == 0 {
            return Err(RawError::Zero { done });
        }
        // A partial count means the kernel stopped at a page it could not access; the next
        // iteration starts there and turns that into EFAULT with the exact progress.
        done += n as usize;
    }
    Ok(())
}

fn op_name(dir: Dir) -> &'static str {
    match dir {
        Dir::Read => "read (process_vm_readv)",
        Dir::Write => "write (process_vm_writev)",
    }
}

/// Give a raw failure its meaning for a transfer with one remote range `(pid, addr, len)`.
fn remote_error(dir: Dir, pid: i32, addr: u64, len: usize, e: RawError) -> ProcMemError {
    match e {
        RawError::Zero { done } => ProcMemError::ShortTransfer {
            pid,
            addr,
            len,
            done,
        },
        RawError::Errno { errno, done } => match errno {
            libc::EPERM => ProcMemError::PermissionDenied { pid },
            libc::ESRCH => ProcMemError::NoSuchProcess { pid },
            libc::EFAULT => ProcMemError::BadAddress {
                pid,
                addr,
                len,
                done,
            },
            _ => ProcMemError::Io {
                pid,
                op: op_name(dir),
                source: io::Error::from_raw_os_error(errno),
            },
        },
    }
}

/// Read `buf.len()` bytes at `addr` in process `pid` into `buf`.
///
/// Loops over partial transfers and splits very large sizes. A zero-length read does nothing.
pub fn read_from(pid: i32, addr: u64, buf: &mut [u8]) -> Result<(), ProcMemError> {
    if buf.is_empty() {
        return Ok(());
    }
    transfer_raw(Dir::Read, pid, buf.as_mut_ptr() as usize, addr, buf.len())
        .map_err(|e| remote_error(Dir::Read, pid, addr, buf.len(), e))
}

/// Write `data` at `addr` in process `pid`.
///
/// Loops over partial transfers and splits very large sizes. A zero-length write does nothing.
pub fn write_to(pid: i32, addr: u64, data: &[u8]) -> Result<(), ProcMemError> {
    if data.is_empty() {
        return Ok(());
    }
    transfer_raw(Dir::Write, pid, data.as_ptr() as usize, addr, data.len())
        .map_err(|e| remote_error(Dir::Write, pid, addr, data.len(), e))
}

/// Copy `len` bytes from `(src_pid, src_addr)` to `(dst_pid, dst_addr)`.
///
/// Between two other processes the data goes through `bounce` in pieces of `bounce.len()`
/// (the caller keeps it small enough to stay in cache, e.g. 256 KiB). If either pid is our
/// own, that side is addressed directly and the copy is a single kernel transfer without the
/// bounce buffer. A zero-length copy does nothing.
///
/// Errors: as for [`read_from`]/[`write_to`], reported against the piece that failed;
/// `EFAULT` on a direct copy is [`ProcMemError::BadAddressPair`]. An empty `bounce` when one
/// is needed is an `InvalidInput` [`ProcMemError::Io`].
pub fn copy_between(
    src_pid: i32,
    src_addr: u64,
    dst_pid: i32,
    dst_addr: u64,
    len: usize,
    bounce: &mut [u8],
) -> Result<(), ProcMemError> {
    if len == 0 {
        return Ok(());
    }
    let me = std::process::id() as i32;
    let pair_error = |e: RawError, remote_pid: i32, remote_addr: u64, dir: Dir| match e {
        RawError::Errno {
            errno: libc::EFAULT,
            ..
        } => ProcMemError::BadAddressPair {
            src_pid,
            src_addr,
            dst_pid,
            dst_addr,
            len,
        },
        other => remote_error(dir, remote_pid, remote_addr, len, other),
    };
    if src_pid == me {
        // Our memory is the local side: push it straight into the destination.
        return transfer_raw(Dir::Write, dst_pid, src_addr as usize, dst_addr, len)
            .map_err(|e| pair_error(e, dst_pid, dst_addr, Dir::Write));
    }
    if dst_pid == me {
        // Our memory is the local side: pull the source straight into it.
        return transfer_raw(Dir::Read, src_pid, dst_addr as usize, src_addr, len)
            .map_err(|e| pair_error(e, src_pid, src_addr, Dir::Read));
    }
    if bounce.is_empty() {
        return Err(ProcMemError::Io {
            pid: src_pid,
            op: "copy through bounce buffer",
            source: io::Error::new(io::ErrorKind::InvalidInput, "empty bounce buffer"),
        });
    }
    let mut off = 0;
    while off < len {
        let n = (len - off).min(bounce.len());
        let piece = &mut bounce[..n];
        // Wrapping: an address range running off the end of the address space is the
        // kernel's to reject (EFAULT), not a reason to panic here.
        read_from(src_pid, src_addr.wrapping_add(off as u64), piece)?;
        write_to(dst_pid, dst_addr.wrapping_add(off as u64), piece)?;
        off += n;
    }
    Ok(())
}

/// Allow any process of ours (same uid) to read/write our memory with cross-memory attach:
/// `prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)`. Called by each rank at init.
///
/// Without it, Yama's `ptrace_scope = 1` only lets ancestors in; the node manager is the
/// ranks' parent, but the launcher may not always be (e.g. ranks started by a wrapper).
/// `EINVAL` means the kernel has no Yama LSM, so there is nothing to relax: not an error.
pub fn allow_cross_memory_attach() -> io::Result<()> {
    // SAFETY: PR_SET_PTRACER takes plain integers and only changes this process's Yama
    // exception; no pointers are involved.
    let r = unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
    if r == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EINVAL) {
        return Ok(());
    }
    Err(err)
}

/// The pid of the `strobe` process that started this rank (set by the launcher).
pub const ENV_LAUNCHER_PID: &str = "STROBE_LAUNCHER_PID";
/// A rank started by strobe's launcher dies with it: `PR_SET_PDEATHSIG` (`SIGKILL`), set
/// by libmpi when it is loaded, before the program's `main` (`strobe-mpi`'s load-time
/// hook). The launcher spawns ranks with posix_spawn, which runs no code in the child
/// before exec, so the rank sets it itself; a launcher that died before that (its pid is
/// no longer the parent) kills the rank at once, as the signal would have. SIGINT and
/// SIGTERM are set back to their defaults, as the launcher's hook did (Ctrl-C is strobe's
/// to handle; an ignored disposition would otherwise survive exec). Nothing happens in a
/// process that strobe did not start (no [`ENV_LAUNCHER_PID`] and rank number).
pub fn die_with_launcher() {
    let launcher = std::env::var(ENV_LAUNCHER_PID)
        .ok()
        .and_then(|v| v.parse::<libc::pid_t>().ok());
    let Some(launcher) = launcher.filter(|_| std::env::var_os(crate::segment::ENV_RANK).is_some())
    else {
        return;
    };
    // SAFETY: prctl, signal, getppid and raise take plain integers; none has
    // preconditions beyond a valid signal number.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        if libc::getppid() != launcher {
            libc::raise(libc::SIGKILL);
        }
    }
}

/// `1`: this rank may be held for the user's debugger (a replay that stops), so any
/// process of the user may attach (`gdb -p PID`), not only strobe and its descendants.
pub const ENV_DEBUG_ATTACH: &str = "STROBE_DEBUG_ATTACH";

/// Declare who may attach to this rank (issue 11, item 14: not every process of the user).
/// Yama's exception covers the named process *and its descendants*, so naming the `strobe`
/// launcher lets in the node manager (strobe itself) and the sibling ranks' DMA Helpers,
/// which is all cross-memory attach needs. A replay that can hold ranks for a debugger
/// passes [`ENV_DEBUG_ATTACH`]`=1` and gets `PR_SET_PTRACER_ANY` instead.
pub fn restrict_cross_memory_attach() -> io::Result<()> {
    if std::env::var_os(ENV_DEBUG_ATTACH).is_some_and(|v| v == "1") {
        return allow_cross_memory_attach();
    }
    let launcher = std::env::var(ENV_LAUNCHER_PID)
        .ok()
        .and_then(|v| v.parse::<libc::c_ulong>().ok())
        // SAFETY: getppid has no preconditions.
        .unwrap_or_else(|| unsafe { libc::getppid() } as libc::c_ulong);
    // SAFETY: PR_SET_PTRACER takes plain integers; no pointers are involved.
    let r = unsafe { libc::prctl(libc::PR_SET_PTRACER, launcher, 0, 0, 0) };
    if r == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EINVAL) {
        return Ok(());
    }
    Err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> i32 {
        std::process::id() as i32
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
            .collect()
    }

    /// A pipe used to tell a forked child when to proceed (or to hear that it is ready).
    struct Pipe {
        r: i32,
        w: i32,
    }

    impl Pipe {
        fn new() -> Pipe {
            let mut fds = [0; 2];
            // SAFETY: `fds` is a valid two-int array for pipe(2) to fill.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            Pipe {
                r: fds[0],
                w: fds[1],
            }
        }

        /// Async-signal-safe: usable in a forked child.
        fn signal(&self) {
            let b = 1u8;
            // SAFETY: writing one byte from a valid local.
            unsafe { libc::write(self.w, (&b as *const u8).cast(), 1) };
        }

        /// Async-signal-safe: usable in a forked child. Returns false on EOF/error. Closes
        /// our write end first, so the waiter sees EOF instead of hanging if the other side
        /// dies without signalling.
        fn wait(&mut self) -> bool {
            if self.w >= 0 {
                // SAFETY: closing a write end this Pipe owns, exactly once.
                unsafe { libc::close(self.w) };
                self.w = -1;
            }
            let mut b = 0u8;
            // SAFETY: reading one byte into a valid local.
            unsafe { libc::read(self.r, (&mut b as *mut u8).cast(), 1) == 1 }
        }
    }

    impl Drop for Pipe {
        fn drop(&mut self) {
            // SAFETY: closing the fds this Pipe owns.
            unsafe {
                libc::close(self.r);
                if self.w >= 0 {
                    libc::close(self.w);
                }
            }
        }
    }

    /// Fork; the child runs `body` (which must be async-signal-safe in spirit: no locks, no
    /// allocation, no panics) and `_exit`s with its return value.
    fn fork_child(body: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child never returns into the test harness: it runs `body` and _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = body();
            // SAFETY: leave the child without running the harness's atexit handlers.
            unsafe { libc::_exit(code) };
        }
        pid
    }

    fn wait_exit_code(pid: i32) -> i32 {
        let mut status = 0;
        // SAFETY: blocking wait on our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status),
            "child {pid} did not exit normally: {status:#x}"
        );
        libc::WEXITSTATUS(status)
    }

    #[test]
    fn own_pid_read_write() {
        let src = pattern(10_000, 3);
        let mut dst = vec![0u8; 10_000];
        read_from(me(), src.as_ptr() as u64, &mut dst).unwrap();
        assert_eq!(dst, src);
        let data = pattern(777, 9);
        write_to(me(), dst.as_mut_ptr() as u64 + 100, &data).unwrap();
        assert_eq!(&dst[100..877], &data[..]);
        assert_eq!(&dst[..100], &src[..100]);
    }

    #[test]
    fn zero_length_is_noop() {
        // Pid 0 and address 0 would fail if a syscall were made.
        read_from(0, 0, &mut []).unwrap();
        write_to(0, 0, &[]).unwrap();
        copy_between(0, 0, 0, 0, 0, &mut []).unwrap();
    }

    #[test]
    fn forked_child_read_and_write() {
        const LEN: usize = 64 * 1024;
        let mut buf = vec![0u8; LEN];
        let addr = buf.as_mut_ptr() as u64;
        let (mut go, mut ready) = (Pipe::new(), Pipe::new());
        let expect_written = pattern(LEN, 77);
        let pid = fork_child(|| {
            // Fill after the fork, so only the child's copy holds the pattern.
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (i % 251) as u8;
            }
            ready.signal();
            if !go.wait() {
                return 2;
            }
            if buf == expect_written {
                0
            } else {
                1
            }
        });
        assert!(ready.wait());
        let mut seen = vec![0u8; LEN];
        read_from(pid, addr, &mut seen).unwrap();
        assert!(seen.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        // Our own copy is untouched: we really read the child.
        assert!(buf.iter().all(|&b| b == 0));
        write_to(pid, addr, &expect_written).unwrap();
        go.signal();
        assert_eq!(wait_exit_code(pid), 0, "child saw the bytes we wrote");
    }

    #[test]
    fn copy_between_two_children_through_small_bounce() {
        const LEN: usize = 1 << 20;
        let mut src = vec![0u8; LEN];
        let dst = vec![0u8; LEN];
        let expect = pattern(LEN, 5);
        let (src_addr, dst_addr) = (src.as_ptr() as u64, dst.as_ptr() as u64);
        let (mut src_ready, mut src_go) = (Pipe::new(), Pipe::new());
        let (mut dst_ready, mut dst_go) = (Pipe::new(), Pipe::new());
        let src_pid = fork_child(|| {
            src.copy_from_slice(&expect);
            src_ready.signal();
            src_go.wait();
            0
        });
        let dst_pid = fork_child(|| {
            dst_ready.signal();
            if !dst_go.wait() {
                return 2;
            }
            if dst == expect {
                0
            } else {
                1
            }
        });
        assert!(src_ready.wait() && dst_ready.wait());
        let mut bounce = vec![0u8; 4096];
        // Odd offsets/length so pieces do not line up with pages.
        copy_between(
            src_pid,
            src_addr + 3,
            dst_pid,
            dst_addr + 3,
            LEN - 10,
            &mut bounce,
        )
        .unwrap();
        copy_between(src_pid, src_addr, dst_pid, dst_addr, 3, &mut bounce).unwrap();
        copy_between(
            src_pid,
            src_addr + LEN as u64 - 7,
            dst_pid,
            dst_addr + LEN as u64 - 7,
            7,
            &mut bounce,
        )
        .unwrap();
        dst_go.signal();
        src_go.signal();
        assert_eq!(
            wait_exit_code(dst_pid),
            0,
            "destination child holds the source bytes"
        );
        assert_eq!(wait_exit_code(src_pid), 0);
    }

    #[test]
    fn copy_between_direct_when_one_side_is_us() {
        const LEN: usize = 300_000;
        let mut local = vec![0u8; LEN];
        let local_addr = local.as_mut_ptr() as u64;
        let expect = pattern(LEN, 11);
        let (mut ready, mut go) = (Pipe::new(), Pipe::new());
        let mut child_buf = vec![0u8; LEN];
        let child_addr = child_buf.as_mut_ptr() as u64;
        let pid = fork_child(|| {
            child_buf.copy_from_slice(&expect);
            ready.signal();
            go.wait();
            0
        });
        assert!(ready.wait());
        // Empty bounce: the direct path must not need it.
        copy_between(pid, child_addr, me(), local_addr, LEN, &mut []).unwrap();
        assert!(local == expect);
        local.iter_mut().for_each(|b| *b = 0);
        let back = pattern(LEN, 200);
        copy_between(me(), back.as_ptr() as u64, me(), local_addr, LEN, &mut []).unwrap();
        assert!(local == back);
        go.signal();
        assert_eq!(wait_exit_code(pid), 0);
    }

    /// An address no access can reach: a page reserved with `PROT_NONE` and never
    /// released. (Mapping a page and unmapping it again was racy: another test thread of
    /// this process could map something there before the access, and then the "bad"
    /// address was readable.)
    fn unmapped_addr() -> u64 {
        // SAFETY: an anonymous private mapping without access rights, checked; it is left
        // mapped (4 KiB per call, in a test process) so the address stays unusable.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            p as u64
        }
    }

    #[test]
    fn efault_is_bad_address() {
        let addr = unmapped_addr();
        let mut buf = [0u8; 64];
        let err = read_from(me(), addr, &mut buf).unwrap_err();
        assert!(
            matches!(err, ProcMemError::BadAddress { pid, addr: a, len: 64, done: 0 } if pid == me() && a == addr),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("EFAULT") && msg.contains(&format!("{addr:#x}")),
            "{msg}"
        );
        assert!(matches!(
            write_to(me(), addr, &buf),
            Err(ProcMemError::BadAddress { .. })
        ));
        // Direct copy: the kernel cannot say which side was bad.
        let err = copy_between(me(), addr, me(), buf.as_mut_ptr() as u64, 64, &mut []).unwrap_err();
        assert!(
            matches!(err, ProcMemError::BadAddressPair { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn partially_mapped_range_reports_progress() {
        // Two pages, second one unmapped: the first call moves one page, the retry faults.
        // SAFETY: anonymous mapping, checked; second page unmapped, first unmapped at the end.
        let p = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            libc::munmap(p.cast::<u8>().add(4096).cast(), 4096);
            p
        };
        let mut buf = vec![0u8; 8192];
        let err = read_from(me(), p as u64, &mut buf).unwrap_err();
        assert!(
            matches!(
                err,
                ProcMemError::BadAddress {
                    done: 4096,
                    len: 8192,
                    ..
                }
            ),
            "{err:?}"
        );
        // SAFETY: unmapping the first page we still own.
        unsafe { libc::munmap(p, 4096) };
    }

    #[test]
    fn dead_pid_is_no_such_process() {
        let pid = fork_child(|| 0);
        assert_eq!(wait_exit_code(pid), 0); // reaped: the pid no longer exists
        let mut buf = [0u8; 8];
        let err = read_from(pid, buf.as_ptr() as u64, &mut buf).unwrap_err();
        assert!(
            matches!(err, ProcMemError::NoSuchProcess { pid: p } if p == pid),
            "{err:?}"
        );
        assert!(err.to_string().contains("ESRCH"));
        let err = copy_between(pid, 0, me(), buf.as_mut_ptr() as u64, 8, &mut []).unwrap_err();
        assert!(matches!(err, ProcMemError::NoSuchProcess { .. }), "{err:?}");
    }

    #[test]
    fn allow_cross_memory_attach_succeeds() {
        allow_cross_memory_attach().unwrap();
    }

    /// Ranks are siblings; check whether one can read another here (Yama permitting).
    #[test]
    fn sibling_can_read_after_allow() {
        const LEN: usize = 4096;
        let mut target_buf = vec![0u8; LEN];
        let addr = target_buf.as_mut_ptr() as u64;
        let expect = pattern(LEN, 42);
        let (mut ready, mut go) = (Pipe::new(), Pipe::new());
        let target = fork_child(|| {
            if allow_cross_memory_attach().is_err() {
                return 3;
            }
            target_buf.copy_from_slice(&expect);
            ready.signal();
            go.wait();
            0
        });
        assert!(ready.wait());
        let mut scratch = vec![0u8; LEN];
        let reader = fork_child(|| match read_from(target, addr, &mut scratch) {
            Ok(()) if scratch == expect => 0,
            Ok(()) => 1,
            Err(ProcMemError::PermissionDenied { .. }) => 2,
            Err(_) => 4,
        });
        let code = wait_exit_code(reader);
        go.signal();
        assert_eq!(wait_exit_code(target), 0);
        assert_eq!(
            code, 0,
            "sibling read failed (2 = EPERM, 1 = wrong bytes, 4 = other)"
        );
    }
}
