//! The ranks' output relayed through strobe, skipping what was already shown: a replay
//! that goes back in time executes the job again from the start (the replayer's time
//! travel), and the program's output up to where the user had been must not be printed
//! twice. A replayed rank prints the same bytes in the same order every time (its inputs
//! are forced), so counting the bytes of each rank's stdout and stderr that were passed on
//! ([`OutputMarks`], shared by every run of the job) is enough: a later run skips that
//! many bytes of the stream, then passes on (and counts) the rest.
//!
//! Buffering is kept as it was: a stream that would have gone to a terminal gets a
//! pseudo-terminal in raw mode (the program sees a terminal and line-buffers as before,
//! no `\r` is added); any other destination gets a pipe (the program would have
//! block-buffered into the file anyway).

use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Bytes of each rank's stdout and stderr already passed on, across runs of a job.
#[derive(Debug, Default)]
pub struct OutputMarks {
    shown: Mutex<Vec<[u64; 2]>>,
}

impl OutputMarks {
    pub fn new() -> Arc<OutputMarks> {
        Arc::new(OutputMarks::default())
    }

    /// Bytes of `rank`'s `stream` (0 stdout, 1 stderr) passed on so far.
    pub fn shown(&self, rank: u32, stream: usize) -> u64 {
        let g = self.shown.lock().expect("output marks lock");
        g.get(rank as usize).map_or(0, |s| s[stream])
    }

    fn advance(&self, rank: u32, stream: usize, to: u64) {
        let mut g = self.shown.lock().expect("output marks lock");
        if g.len() <= rank as usize {
            g.resize(rank as usize + 1, [0, 0]);
        }
        let m = &mut g[rank as usize][stream];
        *m = (*m).max(to);
    }
}

/// Where a relayed stream goes.
enum Dest {
    Stdout,
    Stderr,
    File(File),
}

impl Dest {
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Dest::Stdout => {
                let mut o = std::io::stdout().lock();
                o.write_all(b).and_then(|_| o.flush())
            }
            Dest::Stderr => std::io::stderr().lock().write_all(b),
            Dest::File(f) => f.write_all(b),
        }
    }

    fn is_terminal(&self) -> bool {
        match self {
            Dest::Stdout => std::io::stdout().is_terminal(),
            Dest::Stderr => std::io::stderr().is_terminal(),
            Dest::File(_) => false,
        }
    }
}

/// A rank's two streams, set on its `Command`, to relay once it is spawned.
pub(crate) struct Relays {
    rank: u32,
    tag: bool,
    marks: Arc<OutputMarks>,
    readers: Vec<(File, Dest)>,
}

/// Give the rank's stdout and stderr to relays that write to `file` (or strobe's own
/// stdout and stderr), prefixing lines with `[rank] ` if `tag`.
pub(crate) fn attach(
    cmd: &mut Command,
    rank: u32,
    marks: &Arc<OutputMarks>,
    tag: bool,
    file: Option<&File>,
) -> std::io::Result<Relays> {
    let dests = match file {
        Some(f) => [Dest::File(f.try_clone()?), Dest::File(f.try_clone()?)],
        None => [Dest::Stdout, Dest::Stderr],
    };
    let mut readers = Vec::with_capacity(2);
    for (stream, dest) in dests.into_iter().enumerate() {
        // Out of pseudo-terminals (kernel.pty.max), a pipe still relays the bytes.
        let (reader, writer) = if dest.is_terminal() {
            pty(if stream == 0 { 1 } else { 2 }).or_else(|_| pipe())?
        } else {
            pipe()?
        };
        if stream == 0 {
            cmd.stdout(Stdio::from(writer));
        } else {
            cmd.stderr(Stdio::from(writer));
        }
        readers.push((reader, dest));
    }
    Ok(Relays {
        rank,
        tag,
        marks: marks.clone(),
        readers,
    })
}

/// A pipe: (read end, write end), both close-on-exec.
fn pipe() -> std::io::Result<(File, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both fds are open and ours alone.
    Ok(unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A pseudo-terminal in raw mode: (master, to read; slave, the rank's stream), with the
/// window size of strobe's own terminal on `like_fd` (a program that asks for the width
/// gets what it got writing to the terminal itself). Both close-on-exec (the child gets
/// the slave through dup2, which clears it).
fn pty(like_fd: i32) -> std::io::Result<(File, OwnedFd)> {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: winsize is plain data; TIOCGWINSZ fills it or fails, leaving zeros.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: `size` is valid for writes of a winsize.
    let sized = unsafe { libc::ioctl(like_fd, libc::TIOCGWINSZ, &mut size) } == 0;
    let winp: *const libc::winsize = if sized { &size } else { std::ptr::null() };
    // SAFETY: openpty writes two fds into the given ints; the name and termios pointers
    // may be null, `winp` is null or points to `size`, alive for the call.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            winp,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: openpty succeeded: both fds are open and ours alone.
    let (master, slave) = unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [master.as_raw_fd(), slave.as_raw_fd()] {
        // SAFETY: fd is open; F_SETFD with FD_CLOEXEC has no other effect.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: termios is plain data, filled by tcgetattr before use; the fd is a tty.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(slave.as_raw_fd(), &mut t) == 0 {
            libc::cfmakeraw(&mut t);
            libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t);
        }
    }
    Ok((master, slave))
}

impl Relays {
    /// Start relaying (after the spawn: the `Command` holds the write ends until then).
    pub(crate) fn start(self) -> Vec<JoinHandle<()>> {
        let Relays {
            rank,
            tag,
            marks,
            readers,
        } = self;
        readers
            .into_iter()
            .enumerate()
            .map(|(stream, (reader, dest))| {
                let marks = marks.clone();
                std::thread::spawn(move || relay(reader, dest, rank, stream, tag, &marks))
            })
            .collect()
    }
}

/// Copy one stream, skipping the bytes a previous run already passed on.
fn relay(mut reader: File, mut dest: Dest, rank: u32, stream: usize, tag: bool, m: &OutputMarks) {
    let mut buf = vec![0u8; 64 * 1024];
    // Bytes read in this run, and those read but not yet passed on (a tagged partial line).
    let mut pos = 0u64;
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A pty's master reads EIO once the rank (every slave fd) has gone.
            Err(_) => break,
        };
        let start = pos;
        pos += n as u64;
        let shown = m.shown(rank, stream);
        if pos <= shown {
            continue;
        }
        let skip = shown.saturating_sub(start) as usize;
        pending.extend_from_slice(&buf[skip..n]);
        let cut = if tag {
            pending
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
        } else {
            pending.len()
        };
        if cut > 0 && pass_on(&mut dest, &pending[..cut], rank, tag).is_err() {
            return;
        }
        pending.drain(..cut);
        m.advance(rank, stream, pos - pending.len() as u64);
    }
    if !pending.is_empty() {
        pending.push(b'\n');
        if pass_on(&mut dest, &pending, rank, tag).is_ok() {
            m.advance(rank, stream, pos);
        }
    }
}

/// Write `bytes` (whole lines when `tag`), each line prefixed with `[rank] ` if `tag`.
fn pass_on(dest: &mut Dest, bytes: &[u8], rank: u32, tag: bool) -> std::io::Result<()> {
    if !tag {
        return dest.write_all(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len() + 16);
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        out.extend_from_slice(format!("[{rank}] ").as_bytes());
        out.extend_from_slice(line);
    }
    dest.write_all(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second run of the same stream passes on only what the first did not.
    #[test]
    fn a_second_run_skips_what_the_first_showed() {
        let marks = OutputMarks::new();
        // The relays write into a pipe read back at the end (small: fits its buffer).
        let (mut shown, sink) = pipe().unwrap();
        let sink = File::from(sink);
        let run = |text: &[u8]| {
            let (r, w) = pipe().unwrap();
            File::from(w).write_all(text).unwrap();
            relay(r, Dest::File(sink.try_clone().unwrap()), 1, 0, true, &marks);
        };
        run(b"one\ntwo\n");
        run(b"one\ntwo\nthree\nfour");
        drop(sink);
        let mut text = String::new();
        shown.read_to_string(&mut text).unwrap();
        assert_eq!(text, "[1] one\n[1] two\n[1] three\n[1] four\n");
        assert_eq!(marks.shown(1, 0), 18);
        assert_eq!(marks.shown(1, 1), 0);
    }
}
