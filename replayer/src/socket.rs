//! The replay control protocol over a local Unix socket: one JSON object per line each
//! way (`docs/replay-control.md`). Requests are answered in order on the same connection;
//! events (paused, resumed, finished) are pushed to every connected client as they happen.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::control::{Break, Controller, Event, Pause};
use crate::json::{self, quote, Json};

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
        let reply = match json::parse(&line) {
            Ok(req) => handle(&req, &ctl),
            Err(e) => err(&format!("bad JSON: {e}")),
        };
        if !send(&w, &reply) {
            return;
        }
    }
}

fn err(msg: &str) -> String {
    format!("{{\"ok\":false,\"error\":{}}}", quote(msg))
}

fn handle(req: &Json, ctl: &Controller) -> String {
    let Some(cmd) = req.get("cmd").and_then(Json::as_str) else {
        return err("missing \"cmd\"");
    };
    match cmd {
        "status" => {
            let st = ctl.status();
            format!(
                "{{\"ok\":true,\"slice\":{},\"paused\":{},\"finished\":{}}}",
                st.slice,
                st.paused.as_ref().map_or("null".into(), pause_json),
                st.finished.as_deref().map_or("null".into(), quote)
            )
        }
        "continue" => {
            ctl.resume();
            "{\"ok\":true}".into()
        }
        "step" => {
            ctl.step();
            "{\"ok\":true}".into()
        }
        "pause" => {
            ctl.pause();
            "{\"ok\":true}".into()
        }
        "run_to" => match req.get("slice").and_then(Json::as_u64) {
            Some(s) => {
                ctl.run_to(s);
                "{\"ok\":true}".into()
            }
            None => err("run_to needs \"slice\": N"),
        },
        "break" => match req
            .get("spec")
            .and_then(Json::as_str)
            .map(str::parse::<Break>)
        {
            Some(Ok(b)) => {
                ctl.add_break(b);
                "{\"ok\":true}".into()
            }
            Some(Err(e)) => err(&e),
            None => err("break needs \"spec\": \"slice=S\" or \"rank=R,call=MPI_Name\""),
        },
        "quit" => {
            ctl.stop("stopped by the user".into());
            "{\"ok\":true}".into()
        }
        other => err(&format!(
            "unknown command {other:?} (status, continue, step, pause, run_to, break, quit)"
        )),
    }
}

pub fn pause_json(p: &Pause) -> String {
    let ranks: Vec<String> = p
        .ranks
        .iter()
        .map(|r| {
            format!(
                "{{\"rank\":{},\"pid\":{},\"state\":{},\"call\":{},\"posted\":{}}}",
                r.rank,
                r.pid,
                quote(r.state),
                quote(r.call),
                r.posted
            )
        })
        .collect();
    format!(
        "{{\"slice\":{},\"reason\":{},\"ranks\":[{}]}}",
        p.slice,
        quote(&p.reason),
        ranks.join(",")
    )
}

pub fn event_json(e: &Event) -> String {
    match e {
        Event::Paused(p) => {
            let body = pause_json(p);
            format!("{{\"event\":\"paused\",{}", &body[1..])
        }
        Event::Resumed { slice } => format!("{{\"event\":\"resumed\",\"slice\":{slice}}}"),
        Event::Finished(v) => format!("{{\"event\":\"finished\",\"verdict\":{}}}", quote(v)),
    }
}
