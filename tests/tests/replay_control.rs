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

/// Each rank's `(state, call, posted)` in a `paused` event, without the pids (a re-executed
/// job has new processes): what "held exactly as a fresh --until-slice holds" compares.
fn held_ranks(paused: &str) -> Vec<String> {
    paused
        .split("{\"rank\":")
        .skip(1)
        .map(|r| {
            let field = |k: &str| {
                r.split(&format!("\"{k}\":"))
                    .nth(1)
                    .and_then(|v| v.split([',', '}']).next())
                    .unwrap_or("?")
                    .to_string()
            };
            format!(
                "rank {} {} {} posted {}",
                r.split(',').next().unwrap(),
                field("state"),
                field("call"),
                field("posted")
            )
        })
        .collect()
}

/// The `steps` fixture's lines (`rank R step I`) for `ranks` ranks and `rounds` rounds,
/// sorted: what the replay's stdout must hold, each line once.
fn every_step(ranks: u32, rounds: u32) -> Vec<String> {
    let mut v: Vec<String> = (0..ranks)
        .flat_map(|r| (0..rounds).map(move |i| format!("rank {r} step {i}")))
        .collect();
    v.sort();
    v
}

fn sorted_lines(stdout: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(stdout)
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// Issue 17, item 3: `goto` back and forth, `reverse_step` and `back` over the socket. Every
/// landing holds every rank where a fresh `--until-slice S` holds them (same states, calls
/// and descriptor counts; new pids), breakpoints survive, a bad slice is refused, and the
/// program's output is shown once although the job runs again from the start.
#[test]
fn goto_back_lands_where_a_fresh_until_slice_holds_and_prints_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steps.db");
    assert_eq!(record(&db, &["-n", "3"], "steps", &["30"], &[]).code, 0);
    let fresh = |s: u64| {
        let sock = dir.path().join(format!("fresh{s}.sock"));
        let child = spawn_replay(
            &db,
            &[
                "--until-slice",
                &s.to_string(),
                "--control",
                &sock.display().to_string(),
            ],
            Stdio::null(),
        );
        let mut c = Client::connect(&sock);
        let p = c.paused();
        c.request(r#"{"cmd":"quit"}"#);
        assert_eq!(finish(child).0, 130);
        held_ranks(&p)
    };
    let (at12, at8) = (fresh(12), fresh(8));
    assert_eq!(at12.len(), 3, "{at12:?}");

    let sock = dir.path().join("ctl.sock");
    let child = spawn_replay(
        &db,
        &[
            "--until-slice",
            "20",
            "--break",
            "slice=15",
            "--control",
            &sock.display().to_string(),
        ],
        Stdio::null(),
    );
    let mut c = Client::connect(&sock);
    let p = c.paused();
    assert!(p.contains("\"slice\":15"), "the breakpoint first: {p}");
    c.request(r#"{"cmd":"run_to","slice":20}"#);
    let p = c.paused();
    assert!(p.contains("\"slice\":20"), "{p}");
    let old_pids = pids(&p);

    let r = c.request(r#"{"cmd":"goto","slice":12}"#);
    assert!(r.contains("\"travel\":\"back\""), "{r}");
    let p = c.paused();
    assert!(
        p.contains("\"slice\":12") && p.contains("\"reason\":\"goto 12\""),
        "{p}"
    );
    assert_eq!(
        held_ranks(&p),
        at12,
        "held as a fresh --until-slice 12:\n{p}"
    );
    assert!(
        pids(&p).iter().all(|pid| !old_pids.contains(pid)),
        "a new job"
    );
    assert!(c.events.iter().any(|e| e.contains("\"travelling\"")));
    let st = c.request(r#"{"cmd":"status"}"#);
    assert!(st.contains("\"paused\":{\"slice\":12"), "{st}");

    assert!(c
        .request(r#"{"cmd":"reverse_step"}"#)
        .contains("\"travel\":\"back\""));
    let p = c.paused();
    assert!(
        p.contains("\"slice\":11") && p.contains("reverse-step"),
        "{p}"
    );
    assert!(c
        .request(r#"{"cmd":"back","slices":3}"#)
        .contains("\"travel\":\"back\""));
    let p = c.paused();
    assert!(p.contains("\"slice\":8") && p.contains("back 3"), "{p}");
    assert_eq!(held_ranks(&p), at8, "held as a fresh --until-slice 8:\n{p}");

    for bad in [
        r#"{"cmd":"goto","slice":0}"#,
        r#"{"cmd":"goto","slice":99999}"#,
        r#"{"cmd":"back","slices":100}"#,
        r#"{"cmd":"goto"}"#,
    ] {
        let r = c.request(bad);
        assert!(r.contains("\"ok\":false"), "{bad}: {r}");
    }
    // The breakpoint set before the travels still fires: continue stops at slice 15.
    c.request(r#"{"cmd":"continue"}"#);
    let p = c.paused();
    assert!(
        p.contains("\"slice\":15") && p.contains("breakpoint slice=15"),
        "{p}"
    );
    // Forward: runs on, over no breakpoint, to the slice.
    let r = c.request(r#"{"cmd":"goto","slice":25}"#);
    assert!(r.contains("\"travel\":\"forward\""), "{r}");
    let p = c.paused();
    assert!(p.contains("\"slice\":25") && p.contains("goto 25"), "{p}");
    assert!(c
        .request(r#"{"cmd":"goto","slice":25}"#)
        .contains("\"travel\":\"here\""));
    c.request(r#"{"cmd":"continue"}"#);
    let mut last = String::new();
    while !last.contains("\"finished\"") {
        last = c.line();
    }
    assert!(last.contains("replay matched the recording"), "{last}");
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(
        sorted_lines(&o.stdout),
        every_step(3, 30),
        "every line once, none twice:\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// The terminal stepper's time-travel commands: `goto S` (`g S`) back and forward,
/// `reverse-step` (`rs`), `back N`; breakpoints listed after the travels; output once.
#[test]
fn the_terminal_stepper_goes_back_and_forth_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steps.db");
    assert_eq!(record(&db, &["-n", "2"], "steps", &["25"], &[]).code, 0);
    let mut child = spawn_replay(&db, &["--step", "--break", "slice=18"], Stdio::piped());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"run 14\ng 6\nrs\nback 2\nback 99\ngoto 10\nbreak\ncontinue\ncontinue\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let holds: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.split("held before slice ").nth(1))
        .map(|l| l.split(';').next().unwrap())
        .collect();
    assert_eq!(
        holds,
        [
            "1 (step)",
            "14 (reached slice 14)",
            "6 (goto 6)",
            "5 (reverse-step)",
            "3 (back 2)",
            "10 (goto 10)",
            "18 (breakpoint slice=18)",
        ],
        "{stderr}"
    );
    for want in [
        "going back: re-executing the job from the start",
        "cannot go 99 slices back from slice 3",
        "  1  slice=18\n",
        "replay matched the recording",
    ] {
        assert!(stderr.contains(want), "missing {want:?}:\n{stderr}");
    }
    assert_eq!(sorted_lines(&o.stdout), every_step(2, 25));
}
