//! Stopping and stepping a replay: `--until-slice`, `--break`, `--step`, driven through the
//! control socket and the terminal stepper, with real processes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strobe_tests::replay::record;
use strobe_tests::strobe;

/// A control-socket client that keeps events apart from replies.
struct Client {
    w: UnixStream,
    r: BufReader<UnixStream>,
    events: Vec<String>,
}

impl Client {
    fn connect(path: &Path) -> Client {
        let t = Instant::now();
        loop {
            match UnixStream::connect(path) {
                Ok(s) => {
                    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                    return Client {
                        r: BufReader::new(s.try_clone().unwrap()),
                        w: s,
                        events: Vec::new(),
                    };
                }
                Err(_) if t.elapsed() < Duration::from_secs(60) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => panic!("cannot connect to {}: {e}", path.display()),
            }
        }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        assert!(
            self.r.read_line(&mut l).unwrap() > 0,
            "control socket closed"
        );
        l
    }

    fn request(&mut self, req: &str) -> String {
        self.w.write_all(req.as_bytes()).unwrap();
        self.w.write_all(b"\n").unwrap();
        loop {
            let l = self.line();
            if l.starts_with("{\"ok\"") {
                return l;
            }
            self.events.push(l);
        }
    }

    /// The next `paused` event (from those already seen, or waiting for it).
    fn paused(&mut self) -> String {
        loop {
            if let Some(i) = self.events.iter().position(|e| e.contains("\"paused\"")) {
                return self.events.remove(i);
            }
            let l = self.line();
            self.events.push(l);
        }
    }
}

fn spawn_replay(db: &Path, args: &[&str], stdin: Stdio) -> Child {
    Command::new(strobe())
        .arg("replay")
        .arg(db)
        .args(["--timeout", "120s"])
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strobe replay")
}

fn finish(child: Child) -> (i32, String) {
    let o = child.wait_with_output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn pids(paused: &str) -> Vec<u32> {
    paused
        .split("\"pid\":")
        .skip(1)
        .map(|s| s.split(',').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn until_slice_holds_every_rank_and_the_socket_steps_breaks_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    assert_eq!(record(&db, &["-n", "4"], "token_ring", &[], &[]).code, 0);
    let sock = dir.path().join("ctl.sock");
    let child = spawn_replay(
        &db,
        &[
            "--until-slice",
            "20",
            "--control",
            &sock.display().to_string(),
        ],
        Stdio::null(),
    );
    let mut c = Client::connect(&sock);
    let p = c.paused();
    assert!(p.contains("\"slice\":20"), "{p}");
    assert!(p.contains("reached slice 20"), "{p}");
    let ps = pids(&p);
    assert_eq!(ps.len(), 4, "{p}");
    for pid in &ps {
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "rank pid {pid} is live"
        );
    }
    // Held: the replay does not move on by itself.
    std::thread::sleep(Duration::from_millis(300));
    let st = c.request(r#"{"cmd":"status"}"#);
    assert!(
        st.contains("\"slice\":19") && st.contains("\"paused\":{\"slice\":20"),
        "{st}"
    );

    assert!(c.request(r#"{"cmd":"step"}"#).contains("true"));
    let p = c.paused();
    assert!(
        p.contains("\"slice\":21") && p.contains("\"reason\":\"step\""),
        "{p}"
    );

    let r = c.request(r#"{"cmd":"break","spec":"rank=2,call=MPI_Barrier"}"#);
    assert!(r.contains("true"), "{r}");
    assert!(c.request(r#"{"cmd":"bogus"}"#).contains("unknown command"));
    assert!(c.request(r#"{"cmd":"continue"}"#).contains("true"));
    let p = c.paused();
    assert!(p.contains("breakpoint rank=2,call=MPI_Barrier"), "{p}");
    assert!(p.contains("rank 2's MPI_Barrier"), "{p}");

    assert!(c
        .request(r#"{"cmd":"run_to","slice":150}"#)
        .contains("true"));
    let p = c.paused();
    // A barrier breakpoint may fire again first (every 10 rounds); go on until slice 150.
    let mut p = p;
    while !p.contains("\"slice\":150") {
        assert!(p.contains("breakpoint"), "{p}");
        c.request(r#"{"cmd":"run_to","slice":150}"#);
        p = c.paused();
    }
    c.request(r#"{"cmd":"continue"}"#);
    let mut last = String::new();
    while !last.contains("\"finished\"") {
        last = c.line();
        if last.contains("\"paused\"") {
            c.request(r#"{"cmd":"continue"}"#);
        }
    }
    assert!(last.contains("replay matched the recording"), "{last}");
    let (code, stderr) = finish(child);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("gdb -p "), "{stderr}");
    assert!(stderr.contains("held before slice 20"), "{stderr}");
}

#[test]
fn break_on_a_slice_from_the_command_line_and_quit_from_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    assert_eq!(record(&db, &["-n", "3"], "token_ring", &[], &[]).code, 0);
    let sock = dir.path().join("ctl.sock");
    let child = spawn_replay(
        &db,
        &[
            "--break",
            "slice=7",
            "--control",
            &sock.display().to_string(),
        ],
        Stdio::null(),
    );
    let mut c = Client::connect(&sock);
    let p = c.paused();
    assert!(
        p.contains("\"slice\":7") && p.contains("breakpoint slice=7"),
        "{p}"
    );
    assert!(c.request(r#"{"cmd":"quit"}"#).contains("true"));
    let (code, stderr) = finish(child);
    assert_eq!(code, 130, "{stderr}");
    assert!(stderr.contains("replay stopped at slice"), "{stderr}");
}

#[test]
fn the_terminal_stepper_steps_prints_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    assert_eq!(record(&db, &["-n", "2"], "token_ring", &[], &[]).code, 0);
    let mut child = spawn_replay(&db, &["--step"], Stdio::piped());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"next\n\nprint\nrun 30\nbreak slice=40\ncontinue\ncontinue\n")
        .unwrap();
    let (code, stderr) = finish(child);
    assert_eq!(code, 0, "{stderr}");
    for want in [
        "held before slice 1 (step)",
        "held before slice 2 (step)",
        "held before slice 3 (step)",
        "held before slice 30 (reached slice 30)",
        "held before slice 40 (breakpoint slice=40)",
        "replay matched the recording",
    ] {
        assert!(stderr.contains(want), "missing {want:?}:\n{stderr}");
    }
    // Issue 12, item 8: the first hold names real pids, and each report comes whole, its
    // rank lines, then the prompt (one write).
    assert!(!stderr.contains("gdb -p 0\n"), "{stderr}");
    let first = stderr
        .split("held before slice 1 (step)")
        .nth(1)
        .expect("a first hold");
    let (report, _) = first.split_once("(strobe) ").expect("a prompt after it");
    let ranks: Vec<&str> = report.lines().skip(1).collect();
    assert_eq!(ranks.len(), 2, "two rank lines, then the prompt:\n{report}");
    for l in ranks {
        assert!(l.starts_with("  rank ") && l.contains("gdb -p "), "{l}");
        let pid: u32 = l
            .split("pid")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(pid > 0, "{l}");
    }
}

/// Issue 12, item 3: a stop that can never happen is refused (exit 2) before anything runs,
/// with one line saying why, instead of replaying to the end and exiting 0.
#[test]
fn breakpoints_that_can_never_fire_are_refused_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    assert_eq!(record(&db, &["-n", "4"], "token_ring", &[], &[]).code, 0);
    let cases: [(&[&str], &str); 6] = [
        (&["--until-slice", "0"], "numbered from 1"),
        (
            &["--until-slice", "99999"],
            "beyond the recording's last slice",
        ),
        (
            &["--break", "slice=99999"],
            "beyond the recording's last slice",
        ),
        (&["--break", "rank=9,call=MPI_Recv"], "4 ranks (0..=3)"),
        (&["--break", "rank=1,call=MPI_Foo"], "unknown MPI call"),
        (&["--break", "rank=1,call=MPI_Isend"], "use call=MPI_Send"),
    ];
    for (args, want) in cases {
        let out = strobe_tests::replay::replay(&db, args, &[]);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
        assert_eq!(
            out.stderr.trim().lines().count(),
            1,
            "{args:?}: one clean line, nothing started: {}",
            out.stderr
        );
        assert!(
            out.stderr.starts_with("strobe: cannot replay"),
            "{}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "nothing ran: {}", out.stdout);
    }
}

/// The stepper confirms `break`, lists breakpoints (`break` alone), deletes them
/// (`delete N`) and refuses one that can never fire; a deleted breakpoint does not stop.
#[test]
fn the_terminal_stepper_lists_confirms_and_deletes_breakpoints() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    assert_eq!(record(&db, &["-n", "2"], "token_ring", &[], &[]).code, 0);
    let mut child = spawn_replay(&db, &["--step"], Stdio::piped());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"break slice=30\nbreak slice=40\nbreak rank=5,call=MPI_Recv\nbreak\ndelete 1\ndelete 7\nbreak\ncontinue\ncontinue\n",
        )
        .unwrap();
    let (code, stderr) = finish(child);
    assert_eq!(code, 0, "{stderr}");
    for want in [
        "breakpoint 1: slice=30",
        "breakpoint 2: slice=40",
        "breakpoint rank=5,call=MPI_Recv refused: rank 5 does not exist",
        "  1  slice=30\n  2  slice=40\n",
        "deleted breakpoint 1: slice=30",
        "no breakpoint 7: breakpoints are numbered 1..=1",
        "  1  slice=40\n",
        "held before slice 40 (breakpoint slice=40)",
        "replay matched the recording",
    ] {
        assert!(stderr.contains(want), "missing {want:?}:\n{stderr}");
    }
    assert!(
        !stderr.contains("held before slice 30"),
        "a deleted breakpoint stopped the replay:\n{stderr}"
    );
}
