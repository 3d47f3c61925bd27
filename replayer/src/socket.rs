//! The replay control protocol over a local Unix socket: one JSON object per line each
//! way (`docs/replay-control.md`). Requests are answered in order on the same connection;
//! events (paused, resumed, finished) are pushed to every connected client as they happen.
//!
//! Who can talk to a replay (issue 11, items 2, 5, 6): the socket is created mode 0600
//! whatever the umask (bound in a private 0700 directory, chmod-ed, then hard-linked into
//! place, which never replaces a file), and every connection's peer credentials
//! (`SO_PEERCRED`) are checked: the replay's own uid or root, others are refused and logged
//! on stderr. `--control PATH` never deletes a file that is there: a non-socket is refused,
//! a live socket (something accepts connections) is refused, only a stale socket (nobody
//! listening) is replaced. Without `--control`, the socket lives in a fresh private
//! directory ([`ControlServer::start_private`]), never at a predictable name in /tmp.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::control::{Break, Controller, Event, Pause, Travel};
use serde::Serialize;
use serde_json::Value;

/// A running control server; the socket file is removed when it is dropped.
pub struct ControlServer {
    path: PathBuf,
    done: Arc<AtomicBool>,
    /// The private directory of a default socket, removed with it.
    _dir: Option<tempfile::TempDir>,
}

fn refused(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::AlreadyExists, msg)
}

/// What is at `path` may be replaced only if it is a socket nobody listens on.
fn check_free(path: &Path) -> std::io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(refused(format!(
            "{} exists and is not a socket; refusing to replace it",
            path.display()
        )));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(refused(format!(
            "{} is the live control socket of another replay; choose another --control path",
            path.display()
        ))),
        // Nobody listening: a stale socket left by a replay that was killed.
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => std::fs::remove_file(path),
        Err(e) => Err(e),
    }
}

/// A fresh directory only we can enter. Created with mode 0700 (masked by the umask, so
/// never wider); tempfile's default (0777 & !umask) is world-open under `umask 000`.
fn private_dir(prefix: &str, parent: &Path) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
}

/// Bind a listener at `path`, mode 0600 whatever the umask: bound in a private directory
/// beside `path`, chmod-ed there (where nobody else can reach it), then hard-linked to
/// `path` (link(2) fails rather than replace a file planted meanwhile).
fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = private_dir(".strobe-sock-", parent)?;
    let tmp = dir.path().join("s");
    let listener = UnixListener::bind(&tmp)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    std::fs::hard_link(&tmp, path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            refused(format!(
                "{} appeared while binding; refusing to replace it",
                path.display()
            ))
        } else {
            e
        }
    })?;
    Ok(listener)
}

/// The uid of the process at the other end of `conn` (`SO_PEERCRED`).
fn peer_uid(conn: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is a connected Unix socket; `cred` and `len` are valid for writes of
    // the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Same uid as this replay, or root.
fn peer_allowed(conn: &UnixStream) -> bool {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    match peer_uid(conn) {
        Ok(uid) if uid == me || uid == 0 => true,
        Ok(uid) => {
            eprintln!("strobe: control socket: refused a connection from uid {uid}");
            false
        }
        Err(e) => {
            eprintln!("strobe: control socket: refused a connection (no peer credentials: {e})");
            false
        }
    }
}

impl ControlServer {
    /// Listen on `path`: refused if a file other than a stale socket is there (see the
    /// module comment); the socket is mode 0600.
    pub fn start(path: &Path, ctl: Arc<Controller>) -> std::io::Result<ControlServer> {
        check_free(path)?;
        let listener = bind_private(path)?;
        Self::serve_on(listener, path.to_path_buf(), None, ctl)
    }

    /// Listen on a fresh socket in a private 0700 directory under `$XDG_RUNTIME_DIR` (when
    /// set) or the temporary directory: `.../strobe-XXXXXX/replay.sock`.
    pub fn start_private(ctl: Arc<Controller>) -> std::io::Result<ControlServer> {
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let dir = private_dir("strobe-", &base)?;
        let path = dir.path().join("replay.sock");
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Self::serve_on(listener, path, Some(dir), ctl)
    }

    fn serve_on(
        listener: UnixListener,
        path: PathBuf,
        dir: Option<tempfile::TempDir>,
        ctl: Arc<Controller>,
    ) -> std::io::Result<ControlServer> {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        std::thread::Builder::new()
            .name("strobe-control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if d.load(Ordering::Acquire) {
                        return;
                    }
                    if let Ok(c) = conn {
                        if !peer_allowed(&c) {
                            continue;
                        }
                        let ctl = ctl.clone();
                        let _ = std::thread::Builder::new()
                            .name("strobe-control-client".into())
                            .spawn(move || serve(c, ctl));
                    }
                }
            })?;
        Ok(ControlServer {
            path,
            done,
            _dir: dir,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        // Wake the accept loop so it sees `done`.
        let _ = UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The write half of a client's connection; `None` once the connection is closed.
type Client = Mutex<Option<UnixStream>>;

fn send(w: &Client, line: &str) -> bool {
    let mut guard = w.lock().expect("client lock");
    let Some(s) = guard.as_mut() else {
        return false;
    };
    s.write_all(line.as_bytes())
        .and_then(|_| s.write_all(b"\n"))
        .is_ok()
}

fn serve(conn: UnixStream, ctl: Arc<Controller>) {
    let Ok(write_half) = conn.try_clone() else {
        return;
    };
    // A client that stops reading must not stall the replay for long.
    let _ = write_half.set_write_timeout(Some(std::time::Duration::from_secs(1)));
    let w: Arc<Client> = Arc::new(Mutex::new(Some(write_half)));
    let we = w.clone();
    ctl.subscribe_fn(Box::new(move |e| send(&we, &event_json(e))));
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else {
            // Not UTF-8 (or a read error): say so, then close below.
            send(&w, &err("not a UTF-8 line: closing the connection"));
            break;
        };
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(req) => handle(&req, &ctl),
            Err(e) => err(&format!("bad JSON: {e}")),
        };
        if !send(&w, &reply) {
            break;
        }
    }
    // However the requests ended, close the connection here: the event subscription
    // holds the write half, so without this a client whose line was not UTF-8 waited for
    // ever for an answer or an end, and every closed connection kept its descriptor until
    // the next event (a client polling `status` during a long run ran the replay out of
    // descriptors). Both found by the `control_request` fuzz target (fuzz/). The
    // subscription itself goes at the next event, whose send now fails.
    let closed = w.lock().expect("client lock").take();
    if let Some(s) = closed {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
}

#[derive(Serialize)]
struct ErrorReply<'a> {
    ok: bool,
    error: &'a str,
}

fn err(msg: &str) -> String {
    to_line(&ErrorReply {
        ok: false,
        error: msg,
    })
}

const OK: &str = "{\"ok\":true}";

fn handle(req: &Value, ctl: &Controller) -> String {
    let Some(cmd) = req.get("cmd").and_then(Value::as_str) else {
        return err("missing \"cmd\"");
    };
    match cmd {
        "status" => {
            let st = ctl.status();
            to_line(&StatusReply {
                ok: true,
                slice: st.slice,
                paused: st.paused.as_ref().map(PauseBody::of),
                finished: st.finished.as_deref(),
            })
        }
        "continue" => {
            ctl.resume();
            OK.into()
        }
        "step" => {
            ctl.step();
            OK.into()
        }
        "pause" => {
            ctl.pause();
            OK.into()
        }
        "run_to" => match req.get("slice").and_then(Value::as_u64) {
            Some(s) => {
                ctl.run_to(s);
                OK.into()
            }
            None => err("run_to needs \"slice\": N"),
        },
        "break" => match req
            .get("spec")
            .and_then(Value::as_str)
            .map(str::parse::<Break>)
        {
            Some(Ok(b)) => match ctl.add_break(b) {
                Ok(_) => OK.into(),
                Err(e) => err(&e),
            },
            Some(Err(e)) => err(&e),
            None => err("break needs \"spec\": \"slice=S\" or \"rank=R,call=MPI_Name\""),
        },
        "goto" => match req.get("slice").and_then(Value::as_u64) {
            Some(s) => travel_reply(ctl.goto(s, format!("goto {s}"))),
            None => err("goto needs \"slice\": S"),
        },
        "reverse_step" => travel_reply(ctl.reverse_step()),
        "back" => match req.get("slices").map(Value::as_u64) {
            None => travel_reply(ctl.reverse_step()),
            Some(Some(n)) => travel_reply(ctl.back(n, format!("back {n}"))),
            Some(None) => err("back takes \"slices\": N (a positive integer)"),
        },
        "quit" => {
            ctl.stop("stopped by the user".into());
            OK.into()
        }
        other => err(&format!(
            "unknown command {other:?} (status, continue, step, pause, run_to, goto, back, reverse_step, break, quit)"
        )),
    }
}

#[derive(Serialize)]
struct TravelReply {
    ok: bool,
    /// `here` (already held there), `forward` (runs on to it) or `back` (re-executes).
    travel: &'static str,
}

fn travel_reply(r: Result<Travel, String>) -> String {
    match r {
        Ok(t) => to_line(&TravelReply {
            ok: true,
            travel: match t {
                Travel::Here => "here",
                Travel::Forward => "forward",
                Travel::Back => "back",
            },
        }),
        Err(e) => err(&e),
    }
}

// The protocol's objects, as structs so their keys keep the documented order (clients
// and tests read `{"ok":...` and `"paused":{"slice":N` as they are written).

#[derive(Serialize)]
struct StatusReply<'a> {
    ok: bool,
    slice: u64,
    paused: Option<PauseBody<'a>>,
    finished: Option<&'a str>,
}

#[derive(Serialize)]
struct RankBody<'a> {
    rank: u32,
    pid: u32,
    state: &'a str,
    call: &'a str,
    posted: u64,
}

#[derive(Serialize)]
struct PauseBody<'a> {
    slice: u64,
    reason: &'a str,
    ranks: Vec<RankBody<'a>>,
}

impl<'a> PauseBody<'a> {
    fn of(p: &'a Pause) -> PauseBody<'a> {
        PauseBody {
            slice: p.slice,
            reason: &p.reason,
            ranks: p
                .ranks
                .iter()
                .map(|r| RankBody {
                    rank: r.rank,
                    pid: r.pid,
                    state: r.state,
                    call: r.call,
                    posted: r.posted,
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
enum EventBody<'a> {
    Paused(PauseBody<'a>),
    Resumed { slice: u64 },
    Travelling { to: u64 },
    Finished { verdict: &'a str },
}

fn to_line<T: Serialize>(v: &T) -> String {
    // Serializing these plain structs cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

pub fn pause_json(p: &Pause) -> String {
    to_line(&PauseBody::of(p))
}

pub fn event_json(e: &Event) -> String {
    to_line(&match e {
        Event::Paused(p) => EventBody::Paused(PauseBody::of(p)),
        Event::Resumed { slice } => EventBody::Resumed { slice: *slice },
        Event::Travelling { to } => EventBody::Travelling { to: *to },
        Event::Finished(v) => EventBody::Finished { verdict: v },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_and_events_keep_their_documented_key_order() {
        assert_eq!(err("no \"cmd\""), r#"{"ok":false,"error":"no \"cmd\""}"#);
        assert_eq!(
            event_json(&Event::Resumed { slice: 7 }),
            r#"{"event":"resumed","slice":7}"#
        );
        assert_eq!(
            event_json(&Event::Travelling { to: 3 }),
            r#"{"event":"travelling","to":3}"#
        );
        assert_eq!(
            event_json(&Event::Finished("matched".into())),
            r#"{"event":"finished","verdict":"matched"}"#
        );
        let p = Pause {
            slice: 20,
            reason: "step".into(),
            ranks: Vec::new(),
        };
        assert_eq!(
            event_json(&Event::Paused(p)),
            r#"{"event":"paused","slice":20,"reason":"step","ranks":[]}"#
        );
    }
}

#[cfg(test)]
mod props;
