//! The replay control protocol over a local Unix socket: one JSON object per line each
//! way (`docs/replay-control.md`). Requests are answered in order on the same connection;
//! events (paused, resumed, finished) are pushed to every connected client as they happen.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::control::{Break, Controller, Event, Pause};
use serde::Serialize;
use serde_json::Value;

/// A running control server; the socket file is removed when it is dropped.
pub struct ControlServer {
    path: PathBuf,
    done: Arc<AtomicBool>,
}

impl ControlServer {
    /// Listen on `path` (a stale socket file there is replaced).
    pub fn start(path: &Path, ctl: Arc<Controller>) -> std::io::Result<ControlServer> {
        if path.exists() {
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
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
                        let ctl = ctl.clone();
                        let _ = std::thread::Builder::new()
                            .name("strobe-control-client".into())
                            .spawn(move || serve(c, ctl));
                    }
                }
            })?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            done,
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

fn send(w: &Mutex<UnixStream>, line: &str) -> bool {
    let mut s = w.lock().expect("client lock");
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
    let w = Arc::new(Mutex::new(write_half));
    let we = w.clone();
    ctl.subscribe_fn(Box::new(move |e| send(&we, &event_json(e))));
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(req) => handle(&req, &ctl),
            Err(e) => err(&format!("bad JSON: {e}")),
        };
        if !send(&w, &reply) {
            return;
        }
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
            Some(Ok(b)) => {
                ctl.add_break(b);
                OK.into()
            }
            Some(Err(e)) => err(&e),
            None => err("break needs \"spec\": \"slice=S\" or \"rank=R,call=MPI_Name\""),
        },
        "quit" => {
            ctl.stop("stopped by the user".into());
            OK.into()
        }
        other => err(&format!(
            "unknown command {other:?} (status, continue, step, pause, run_to, break, quit)"
        )),
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
