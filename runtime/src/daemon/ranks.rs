//! A daemon's ranks: spawning them (as `launcher.rs` does for a one-host job: each in a
//! process group of its own, killed with the daemon by `PR_SET_PDEATHSIG`), forwarding
//! their output to the Machine Manager line by line, and telling how each one ended.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use strobe_schema::{ControlMessage, Death, JobSpec};

use super::control::ControlWriter;
use crate::engine::JobShared;
use crate::segment::{RankState, ENV_FD, ENV_LEN, ENV_RANK, ENV_SIZE};

/// The longest piece of a line sent in one frame: a rank printing megabytes without a
/// newline is forwarded in pieces (the Machine Manager then tags only the first).
const MAX_LINE: usize = 64 * 1024;

/// Spawns global rank `rank` of the job on this host. Rank 0's stdin is a pipe the daemon
/// feeds with what the Machine Manager reads from its own stdin ([`feed_stdin`], as
/// mpiexec does); every other rank's is `/dev/null`. Stdout and stderr are pipes the
/// daemon forwards.
pub fn spawn_rank(spec: &JobSpec, rank: u32, fd: i32, seg_len: usize) -> std::io::Result<Child> {
    let mut cmd = Command::new(OsStr::from_bytes(&spec.program));
    cmd.args(spec.args.iter().map(|a| OsStr::from_bytes(a)))
        .env(ENV_FD, fd.to_string())
        .env(ENV_LEN, seg_len.to_string())
        .env(ENV_RANK, rank.to_string())
        .env(ENV_SIZE, spec.ranks.to_string())
        .env(
            crate::procmem::ENV_LAUNCHER_PID,
            std::process::id().to_string(),
        )
        .env_remove(crate::outcome::ENV_REPLAY_OUTCOMES)
        .env_remove(crate::transport::auth::SECRET_ENV)
        .stdin(if rank == 0 {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if !spec.cwd.is_empty() {
        cmd.current_dir(OsStr::from_bytes(&spec.cwd));
    }
    for (k, v) in &spec.env {
        cmd.env(OsStr::from_bytes(k), OsStr::from_bytes(v));
    }
    // SAFETY: the closure runs in the child between fork and exec and only calls
    // async-signal-safe functions (prctl, signal, setpgid).
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::setpgid(0, 0);
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd.spawn()
}

/// Forwards one of a rank's output pipes to the Machine Manager, a line (or a piece of at
/// most [`MAX_LINE`] bytes) per frame. Ends at the pipe's end or when the connection fails.
pub fn forward_output(
    pipe: impl Read + Send + 'static,
    rank: u32,
    stderr: bool,
    control: Arc<ControlWriter>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("strobe-out{rank}"))
        .spawn(move || {
            let mut r = BufReader::with_capacity(MAX_LINE, pipe);
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = match r
                    .by_ref()
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut line)
                {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return,
                };
                if n == 0 {
                    return;
                }
                let m = ControlMessage::RankOutput { rank, stderr };
                if control.send(&m, &line).is_err() {
                    return;
                }
            }
        })
}

/// Writes the chunks the Machine Manager forwards into rank 0's stdin; an empty chunk (or
/// the connection's end) closes it. Ends when the rank stops reading (EPIPE).
pub fn feed_stdin(
    mut pipe: std::process::ChildStdin,
    input: std::sync::mpsc::Receiver<Vec<u8>>,
) -> std::io::Result<JoinHandle<()>> {
    use std::io::Write;
    std::thread::Builder::new()
        .name("strobe-stdin".into())
        .spawn(move || {
            while let Ok(chunk) = input.recv() {
                if chunk.is_empty() || pipe.write_all(&chunk).is_err() {
                    return;
                }
            }
        })
}

/// How a reaped rank ended, from its wait status and its slot (the same rules as the
/// one-host launcher's): `(how, code)`.
pub fn classify(shared: &JobShared, rank: u32, raw: i32) -> (Death, i32) {
    let st = std::process::ExitStatus::from_raw(raw);
    let slot = shared.seg.slot(rank);
    let abort = slot.abort_code.load(Ordering::Acquire);
    if let Some(sig) = st.signal() {
        (Death::Signal, sig)
    } else if abort != 0 {
        (Death::Abort, abort as i32 - 1)
    } else if st.code() != Some(0) {
        (Death::ExitCode, st.code().unwrap_or(1))
    } else if slot.state() != RankState::Finalized {
        if crate::mmds::called_init(&shared.seg, rank) {
            (Death::NoFinalize, 0)
        } else {
            (Death::NoInit, 0)
        }
    } else {
        (Death::Clean, 0)
    }
}

/// The launcher's view of a death reported by a daemon (`None` for a clean exit).
pub fn rank_death(how: Death, code: i32) -> Option<crate::launcher::RankDeath> {
    use crate::launcher::RankDeath;
    Some(match how {
        Death::Clean => return None,
        Death::Signal => RankDeath::Signal(code),
        Death::ExitCode | Death::NotStarted => RankDeath::ExitCode(code),
        Death::NoFinalize => RankDeath::NoFinalize,
        Death::NoInit => RankDeath::NoInit,
        Death::Abort => RankDeath::Abort(code),
    })
}

/// Stops every local rank: tells them (blocked ranks exit on their own), then kills each
/// rank's process group (what a rank started dies with it).
pub fn kill_all(shared: &JobShared, children: &mut [Child], reaped: &[bool]) {
    shared.seg.header().shutdown.store(1, Ordering::Release);
    shared.request_stop();
    for r in 0..shared.seg.ranks() {
        shared.seg.wake_rank(r);
    }
    for (i, c) in children.iter_mut().enumerate() {
        if !reaped.get(i).copied().unwrap_or(false) {
            // SAFETY: kill with a negative pid signals a process group; no memory involved.
            let rc = unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            if rc != 0 {
                let _ = c.kill();
            }
        }
    }
}
