//! Property tests of the control protocol's request handling (issue 11, "Fuzzing"): a
//! client can send any line; the server parses it as `serve` does and answers with one
//! JSON object holding `"ok"`, and never panics (a panic would kill the connection's
//! thread and, through a poisoned lock, the replay's controller).

use proptest::prelude::*;
use serde_json::Value;

use super::{err, handle};
use crate::control::{Bounds, Controller};

/// What `serve` does with one line.
fn answer(line: &str, ctl: &Controller) -> String {
    match serde_json::from_str::<Value>(line) {
        Ok(req) => handle(&req, ctl),
        Err(e) => err(&format!("bad JSON: {e}")),
    }
}

fn check(reply: &str) {
    let v: Value = serde_json::from_str(reply).expect("the reply is JSON");
    assert!(v.get("ok").and_then(Value::as_bool).is_some(), "{reply}");
    assert!(!reply.contains('\n'), "one line: {reply:?}");
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        "(slice|rank|call)=[-0-9A-Za-z_,=]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const CMDS: &[&str] = &[
    "status",
    "continue",
    "step",
    "pause",
    "run_to",
    "break",
    "quit",
    "",
    "STATUS",
    "run",
    "goto",
    "back",
    "reverse_step",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_lines_get_a_json_answer(line in ".{0,200}") {
        let ctl = Controller::new();
        check(&answer(&line, &ctl));
    }

    #[test]
    fn arbitrary_requests_get_a_json_answer(
        cmd in proptest::sample::select(CMDS),
        slice in json_value(),
        slices in json_value(),
        spec in json_value(),
        extra in json_value(),
    ) {
        let ctl = Controller::new();
        let req = serde_json::json!({
            "cmd": cmd, "slice": slice, "slices": slices, "spec": spec, "x": extra
        });
        check(&answer(&req.to_string(), &ctl));
        // And the controller still answers afterwards.
        check(&answer(r#"{"cmd":"status"}"#, &ctl));
    }

    /// Time-travel requests in any order, with any numbers, on a replay of 50 slices: each
    /// gets one JSON answer; `goto S` is accepted exactly for the slices that exist.
    #[test]
    fn travel_requests_in_any_order(
        reqs in proptest::collection::vec(
            (proptest::sample::select(&["goto", "back", "reverse_step", "step", "continue",
                                        "run_to", "pause", "status"][..]),
             0u64..80),
            1..12),
    ) {
        let ctl = Controller::new();
        ctl.set_bounds(Bounds { ranks: 4, last_slice: 50 });
        for (cmd, n) in reqs {
            let req = serde_json::json!({ "cmd": cmd, "slice": n, "slices": n });
            let reply = answer(&req.to_string(), &ctl);
            check(&reply);
            if cmd == "goto" {
                prop_assert_eq!(reply.contains("\"ok\":true"), (1..=50).contains(&n), "{}", reply);
            }
        }
    }
}

/// Found by the `control_request` fuzz target (fuzz/): a line that is not UTF-8 ended the
/// server's reading but left the connection open (the event subscription held a clone of
/// it), so the client waited for ever. Now: an error line, then the end of the stream.
#[test]
fn a_line_that_is_not_utf8_gets_an_error_and_the_end_of_the_connection() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.sock");
    let _server = super::ControlServer::start(&path, Arc::new(Controller::new())).unwrap();
    let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    c.write_all(b"\xff\xfe\n{\"cmd\":\"status\"}\n").unwrap();
    let mut r = BufReader::new(c);
    let mut first = String::new();
    r.read_line(&mut first).expect("an answer, not a wait");
    check(first.trim_end());
    assert!(first.contains("not a UTF-8 line"), "{first}");
    let mut rest = String::new();
    assert_eq!(
        r.read_line(&mut rest).expect("the end, not a wait"),
        0,
        "{rest}"
    );
}

/// Also found by the fuzz target: a closed connection kept its descriptor (held by the
/// event subscription) until the next event. Now it is closed when the client leaves.
#[test]
fn connections_that_come_and_go_do_not_keep_descriptors() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::Arc;
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.sock");
    let _server = super::ControlServer::start(&path, Arc::new(Controller::new())).unwrap();
    let before = fds();
    for _ in 0..200 {
        let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
        c.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        let mut r = BufReader::new(c);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        // The server closes its side once this side is gone: wait for that end.
        let mut rest = String::new();
        r.get_mut().shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(r.read_line(&mut rest).unwrap(), 0);
    }
    // Other tests of this process open files too: allow some slack, not 200 leaks.
    assert!(
        fds() < before + 50,
        "{} descriptors before, {} after",
        before,
        fds()
    );
}
