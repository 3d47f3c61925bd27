//! The replay control protocol (`replayer/src/socket.rs`, docs/replay-control.md) over a
//! real socket: any line a client sends gets one JSON line back with `"ok"`, and the
//! server keeps answering.
#![no_main]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use strobe_replayer::socket::ControlServer;
use strobe_replayer::Controller;

struct Server {
    path: PathBuf,
    _dir: tempfile::TempDir,
    _server: ControlServer,
}

fn server() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.sock");
        let server = ControlServer::start(&path, Arc::new(Controller::new())).unwrap();
        Server {
            path,
            _dir: dir,
            _server: server,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    // One request line: the protocol is line-based.
    let line: Vec<u8> = data.iter().copied().filter(|&b| b != b'\n').collect();
    let s = server();
    let mut c = UnixStream::connect(&s.path).unwrap();
    c.write_all(&line).unwrap();
    c.write_all(b"\n{\"cmd\":\"status\"}\n").unwrap();
    let mut r = BufReader::new(c);
    // A blank line gets no answer (the server skips it), so only the status request's.
    let blank = std::str::from_utf8(&line).is_ok_and(|l| l.trim().is_empty());
    for _ in 0..if blank { 1 } else { 2 } {
        let mut reply = String::new();
        // A line that is not UTF-8 ends the connection.
        if r.read_line(&mut reply).unwrap_or(0) == 0 {
            return;
        }
        assert!(reply.starts_with("{\"ok\":"), "{reply}");
    }
});
