//! `strobe tui` end to end: the real binary in a real (headless) terminal, tmux, on a
//! recorded fixture; keys sent as a person would type them, the pane captured and read.
//! `scripts/test.sh` installs tmux when the machine lacks it.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use strobe_tests::{record_fixture_into, strobe};

/// A tmux server of our own (its own socket), killed when the test ends.
static NEXT_SERVER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(cmd: &str, w: u16, h: u16) -> Tmux {
        let which = Command::new("tmux").arg("-V").output();
        assert!(
            which.is_ok_and(|o| o.status.success()),
            "tmux is not installed: scripts/test.sh installs it (apt-get install tmux)"
        );
        let t = Tmux {
            // One tmux server per session: tests run in parallel threads of one process, so
            // the pid alone (or the size) does not tell their servers apart.
            socket: format!(
                "strobe-test-{}-{}",
                std::process::id(),
                NEXT_SERVER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
        };
        let out = t.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &w.to_string(),
            "-y",
            &h.to_string(),
            cmd,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        t
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .env("TERM", "xterm-256color")
            .output()
            .expect("run tmux")
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            let out = self.run(&["send-keys", "-t", "t", k]);
            assert!(out.status.success(), "send-keys {k}: {out:?}");
        }
    }

    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    /// Wait until the pane shows every one of `what` (the program redraws asynchronously).
    fn wait_for(&self, what: &[&str], context: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.capture();
            if what.iter().all(|w| screen.contains(w)) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("{context}: the pane never showed {what:?}; it shows:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn tui_command(db: &Path) -> String {
    // After the UI exits, say how, and keep the pane open so the test can read it.
    format!(
        "{} tui {}; echo strobe-exited-$?; sleep 60",
        strobe().display(),
        db.display()
    )
}

#[test]
fn a_person_browses_a_deadlock_in_tmux() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "deadlock", 3);
    strobe_tui::synthetic::add_process_stats(&db, 3).unwrap();
    let t = Tmux::start(&tui_command(&db), 120, 40);

    // The overview: the job and the GETTS chart with bars.
    let s = t.wait_for(
        &["1 Overview", "GETTS", "NCOLL", "NP2P", "outcome deadlock"],
        "start",
    );
    let getts: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.starts_with("GETTS"))
        .take_while(|l| !l.starts_with("NCOLL"))
        .collect();
    assert!(
        getts.iter().any(|l| l.contains('█')),
        "GETTS has bars:\n{s}"
    );

    // The timeline at the deadlock: a blocked rank.
    t.keys(&["2", "e", "j"]);
    t.wait_for(
        &[
            "Blocked processes",
            "R  MPI_Recv",
            "rank 1 at slice",
            "blocked in MPI_Recv",
        ],
        "timeline",
    );

    // Drill down: the wait-for cycle.
    t.keys(&["Enter"]);
    t.wait_for(
        &["wait-for graph", "CYCLE 0 -> 1 -> 2 -> 0"],
        "slice detail",
    );
    // Each blocked rank with where the program made its call (the fixture's one receive).
    let line = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/src/bin/deadlock.rs"),
    )
    .unwrap()
    .lines()
    .position(|l| l.contains("world.recv("))
    .expect("the receive")
        + 1;
    let site = format!("at deadlock.rs:{line}");
    let s = t.wait_for(&[&site], "slice detail, call sites");
    assert_eq!(s.matches(&site).count(), 3, "{s}");

    // The statistics table.
    t.keys(&["4"]);
    t.wait_for(
        &[
            "Statistics of all ranks",
            "primitive",
            "MPI_Barrier",
            "all primitives",
        ],
        "statistics",
    );

    // The help screen.
    t.keys(&["?"]);
    t.wait_for(
        &["Keys", "zoom in / out", "any key closes this help"],
        "help",
    );
    // Esc alone (a key right after it would arrive as Alt-key, as in any terminal).
    t.keys(&["Escape"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while t.capture().contains("any key closes this help") {
        assert!(Instant::now() < deadline, "Esc did not close the help");
        std::thread::sleep(Duration::from_millis(100));
    }
    t.keys(&["1"]);
    t.wait_for(&["GETTS"], "help closed");

    // Resize: still usable at 80x24.
    t.run(&["resize-window", "-t", "t", "-x", "80", "-y", "24"]);
    t.keys(&["+"]);
    t.wait_for(&["GETTS", "NP2P", "slice "], "80x24");

    // Quit: the terminal is restored (the shell's echo shows on the normal screen).
    t.keys(&["q"]);
    let s = t.wait_for(&["strobe-exited-0"], "quit");
    assert!(!s.contains("GETTS"), "the alternate screen is gone:\n{s}");
}

/// Issue 12, items 6 and 7, on the real binary at 80x24, 120x40 and 200x60: the Overview
/// shows the deadlock report (not the exits of the ranks strobe stopped), `e` says why it
/// moved, the status line is not cut, and the help scrolls to its last key.
#[test]
fn the_deadlock_report_and_whole_messages_at_three_sizes_in_tmux() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "deadlock", 3);
    for (w, h) in [(80, 24), (120, 40), (200, 60)] {
        let ctx = format!("{w}x{h}");
        let t = Tmux::start(&tui_command(&db), w, h);
        let s = t.wait_for(
            &[
                "outcome deadlock",
                "deadlock in slice",
                "wait-for cycle: rank 0 -> rank 1 -> rank 2 -> rank 0",
            ],
            &ctx,
        );
        for stopped in ["signal 9", "exited with 1", "SIGKILL"] {
            assert!(!s.contains(stopped), "{ctx}: shows {stopped:?}:\n{s}");
        }
        t.keys(&["e"]);
        t.wait_for(
            &["deadlock formed in slice", "(blocked set fixed); Enter"],
            &ctx,
        );
        t.keys(&["?"]);
        t.wait_for(&["Keys"], &ctx);
        for _ in 0..4 {
            t.keys(&["PageDown"]);
        }
        t.wait_for(
            &["mouse", "live, held: gdb on the selected"],
            &format!("{ctx} help scrolled"),
        );
        t.keys(&["Escape"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while t.capture().contains("Keys ─") {
            assert!(
                Instant::now() < deadline,
                "{ctx}: Esc did not close the help"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        t.keys(&["q"]);
        t.wait_for(&["strobe-exited-0"], &format!("{ctx} quit"));
    }
}

#[test]
fn a_panic_leaves_a_usable_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "hello", 2);
    // The test seam exists in debug builds, which is what the tests run.
    let cmd = format!(
        "STROBE_TUI_TEST_PANIC=1 {} tui {}; echo strobe-exited-$?; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo; sleep 60",
        strobe().display(),
        db.display()
    );
    let t = Tmux::start(&cmd, 120, 40);
    let s = t.wait_for(&["strobe-exited-"], "panic");
    assert!(
        s.contains("panicking after the first frame"),
        "the panic message is shown:\n{s}"
    );
    // On its own line: nothing moved the cursor back over the message.
    assert!(
        s.lines().any(|l| l.trim() == "strobe-exited-101"),
        "the shell's echo follows the panic message:\n{s}"
    );
    assert!(
        !s.contains("1 Overview"),
        "the alternate screen is gone:\n{s}"
    );
    // Raw mode is off again: canonical input and echo are back.
    let modes = t.wait_for(&["icanon"], "stty");
    assert!(
        modes.contains(" icanon") || modes.lines().any(|l| l.starts_with("icanon")),
        "{modes}"
    );
    assert!(
        !modes.contains("-icanon") && !modes.contains("-echo"),
        "{modes}"
    );
}

#[test]
fn a_file_that_is_not_a_recording_never_touches_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, "not a database at all, just some text\n".repeat(8)).unwrap();
    let out = Command::new(strobe())
        .arg("tui")
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a strobe recording") && err.contains("junk.db"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing was written to the terminal: {:?}",
        out.stdout
    );

    // In a terminal too: the message, no alternate screen, the shell prompt back.
    let t = Tmux::start(&tui_command(&junk), 100, 20);
    let s = t.wait_for(&["strobe-exited-2"], "junk in tmux");
    assert!(s.contains("not a strobe recording"), "{s}");
}

#[test]
fn without_a_terminal_it_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "hello", 2);
    let out = Command::new(strobe()).arg("tui").arg(&db).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs a terminal"), "{err}");
    assert!(out.stdout.is_empty());
}

/// The pids of `gdb -p PID` lines on the screen.
fn gdb_pids(screen: &str) -> Vec<u32> {
    let mut pids: Vec<u32> = screen
        .split("gdb -p ")
        .skip(1)
        .filter_map(|s| {
            s.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse().ok())
        })
        .collect();
    pids.sort();
    pids.dedup();
    pids
}

#[test]
fn a_person_drives_a_live_replay_in_tmux() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "token_ring", 3);
    let out = dir.path().join("ranks.out");
    // `x` starts the debugger in a tmux window: here a shell no-op that names the pid (the
    // real gdb is the next test's).
    let cmd = format!(
        "STROBE_GDB=': gdb -p {{pid}}' {} replay {} --tui --output {}; echo strobe-exited-$?; sleep 60",
        strobe().display(),
        db.display(),
        out.display()
    );
    let t = Tmux::start(&cmd, 160, 40);
    t.wait_for(&["[replay paused before slice 1]", "GETTS"], "start");

    // The pids of the held ranks, to check they are gone at the end.
    t.keys(&["x"]);
    let s = t.wait_for(&["gdb: rank 0", "gdb -p "], "gdb popup");
    let pids = gdb_pids(&s);
    assert!(!pids.is_empty(), "gdb commands with pids:\n{s}");
    t.keys(&["Escape"]);
    // An Escape that reaches the UI in one read with the next key is taken for Alt+key
    // (the `/` of the search below was lost that way under load): let it arrive alone.
    std::thread::sleep(Duration::from_millis(300));

    // A breakpoint at slice 4 (the cursor goes there by search), run to it.
    t.keys(&["/4", "Enter", "b"]);
    t.wait_for(&["breakpoint 1: before slice 4"], "breakpoint set");
    t.keys(&["Space"]);
    t.wait_for(
        &[
            "[replay at breakpoint before slice 4]",
            "stopped at slice 4: breakpoint slice=4",
            " slice 4/",
        ],
        "at the breakpoint",
    );

    // One step.
    t.keys(&["n"]);
    t.wait_for(&["[replay paused before slice 5]", " slice 5/"], "stepped");

    // Quit: terminal restored, the replay stopped (exit 130), no rank left.
    t.keys(&["q"]);
    let s = t.wait_for(&["strobe-exited-130"], "quit");
    assert!(!s.contains("GETTS"), "the alternate screen is gone:\n{s}");
    assert!(s.contains("the ranks' output is in"), "{s}");
    let left: Vec<u32> = pids
        .into_iter()
        .filter(|p| {
            *p > 1
                && std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .is_ok_and(|st| !st.contains(") Z "))
        })
        .collect();
    assert!(left.is_empty(), "ranks left behind: {left:?}");
}

/// Issue 17, item 3, in the live UI: `t` travels to the cursor's slice (forward, then back:
/// the job runs again from the start), `<` one slice back; the ranks' output file holds
/// every line of the program once.
#[test]
fn a_person_travels_back_in_time_in_a_live_replay_in_tmux() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "steps", 3);
    let out = dir.path().join("ranks.out");
    let cmd = format!(
        "{} replay {} --tui --output {}; echo strobe-exited-$?; sleep 60",
        strobe().display(),
        db.display(),
        out.display()
    );
    let t = Tmux::start(&cmd, 160, 40);
    t.wait_for(&["[replay paused before slice 1]", "GETTS"], "start");
    t.keys(&["?"]);
    t.wait_for(&["time travel"], "the help lists the time-travel keys");
    // Any key but j/k closes the help; not Escape, which with the next key can be read as
    // Alt+key. `h` on the help is consumed by closing it.
    t.keys(&["h"]);
    std::thread::sleep(Duration::from_millis(300));

    t.keys(&["/15", "Enter", "t"]);
    t.wait_for(
        &["[replay paused before slice 15]", " slice 15/"],
        "forward",
    );
    t.keys(&["/6", "Enter", "t"]);
    t.wait_for(
        &["[replay paused before slice 6]", " slice 6/"],
        "back to 6",
    );
    t.keys(&["<"]);
    t.wait_for(&["[replay paused before slice 5]", " slice 5/"], "one back");

    t.keys(&["Space"]);
    t.wait_for(&["[replay finished]"], "to the end");
    t.keys(&["q"]);
    t.wait_for(&["strobe-exited-0"], "quit");
    let mut lines: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    let mut want: Vec<String> = (0..3)
        .flat_map(|r| (0..20).map(move |i| format!("rank {r} step {i}")))
        .collect();
    want.sort();
    assert_eq!(lines, want, "every line once in {}", out.display());
}

/// The stepper in a real terminal: the ranks' output reaches it through pseudo-terminals
/// (line-buffered as before, no `\r` added), and a travel back prints no line twice.
#[test]
fn the_stepper_in_a_terminal_goes_back_and_prints_each_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "steps", 3);
    let err = dir.path().join("stepper.err");
    let cmd = format!(
        "{} replay {} --step 2>{}; echo strobe-exited-$?; sleep 60",
        strobe().display(),
        db.display(),
        err.display()
    );
    let t = Tmux::start(&cmd, 120, 40);
    let held = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&err).is_ok_and(|e| e.contains(what)) {
            assert!(Instant::now() < deadline, "never {what:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    held("held before slice 1 (step)");
    t.keys(&["run 12", "Enter"]);
    held("held before slice 12 (reached slice 12)");
    t.keys(&["goto 5", "Enter"]);
    held("held before slice 5 (goto 5)");
    t.keys(&["continue", "Enter"]);
    t.wait_for(&["strobe-exited-0"], "the end");
    let out = t.run(&["capture-pane", "-p", "-t", "t", "-S", "-1000"]);
    let pane = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<&str> = pane.lines().filter(|l| l.contains(" step ")).collect();
    lines.sort();
    let want: Vec<String> = {
        let mut w: Vec<String> = (0..3)
            .flat_map(|r| (0..20).map(move |i| format!("rank {r} step {i}")))
            .collect();
        w.sort();
        w
    };
    assert_eq!(lines, want, "each line once, from column 0:\n{pane}");
}

/// The file `path` once it contains `what` (gdb writes it from another process).
fn wait_for_file(path: &Path, what: &str, context: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(what) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{context}: {} never showed {what:?}: {text}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 12: `x` in a live replay inside tmux starts gdb on the selected rank in a new tmux
/// window (gdb in batch mode through `$STROBE_GDB`: it attaches, prints the backtrace of
/// the held rank, detaches); the UI goes on, and the replay still steps and quits cleanly.
#[test]
fn x_starts_gdb_in_a_tmux_window_on_a_held_live_replay() {
    if Command::new("gdb").arg("--version").output().is_err() {
        eprintln!("SKIPPED: gdb is not installed (scripts/ensure-tools.sh installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "token_ring", 3);
    let bt = dir.path().join("bt.txt");
    let cmd = format!(
        "STROBE_GDB='gdb -batch -p {{pid}} -ex \"info threads\" -ex bt > {bt} 2>&1; echo rank {{rank}} >> {bt}' \
         {s} replay {db} --tui --output {out}; echo strobe-exited-$?; sleep 60",
        bt = bt.display(),
        s = strobe().display(),
        db = db.display(),
        out = dir.path().join("ranks.out").display(),
    );
    let t = Tmux::start(&cmd, 120, 40);
    // The greeting takes the status line; after a key the mode shows.
    t.wait_for(&["live replay: space runs/pauses"], "start");
    t.keys(&["2"]);
    t.wait_for(&["[replay paused before slice 1]"], "held");
    // Rank 1 (j on the Timeline selects it), then x.
    t.keys(&["j", "x"]);
    let text = wait_for_file(&bt, "rank 1", "gdb in its tmux window");
    assert!(text.contains("#0"), "gdb printed a backtrace:\n{text}");
    assert!(
        !text.contains("ptrace: Operation not permitted"),
        "gdb could attach:\n{text}"
    );
    // The UI is still there (back in its window once gdb's closed), and steps on.
    let s = t.wait_for(
        &["gdb on rank 1 (pid"],
        "the status line says where gdb went",
    );
    assert!(s.contains("tmux window"), "{s}");
    // The popup with every rank's pid is still open: any key closes it.
    assert!(s.contains("gdb: rank 1"), "{s}");
    t.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(300));
    t.keys(&["n"]);
    t.wait_for(&["[replay paused before slice 2]"], "stepped after gdb");
    t.keys(&["q"]);
    t.wait_for(&["strobe-exited-130"], "quit");
}

/// Outside tmux `x` runs gdb in the foreground: the UI gives the terminal back, gdb runs,
/// and the UI returns with the replay still held.
#[test]
fn x_runs_gdb_in_the_foreground_outside_tmux() {
    if Command::new("gdb").arg("--version").output().is_err() {
        eprintln!("SKIPPED: gdb is not installed (scripts/ensure-tools.sh installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "token_ring", 3);
    let bt = dir.path().join("bt.txt");
    let cmd = format!(
        "env -u TMUX {s} replay {db} --tui --output {out} \
         --gdb-command 'gdb -batch -p {{pid}} -ex bt > {bt} 2>&1; echo gdb-in-the-foreground; sleep 2'; \
         echo strobe-exited-$?; sleep 60",
        bt = bt.display(),
        s = strobe().display(),
        db = db.display(),
        out = dir.path().join("ranks.out").display(),
    );
    let t = Tmux::start(&cmd, 80, 24);
    // At 80 columns the greeting takes the whole status line; the mode shows after a key.
    t.wait_for(&["live replay: space runs/pauses"], "start");
    t.keys(&["x"]);
    // The terminal is the debugger's while it runs: strobe's line, then gdb's output.
    t.wait_for(
        &["strobe: gdb on rank 0 (pid", "gdb-in-the-foreground"],
        "gdb in the foreground",
    );
    let text = wait_for_file(&bt, "#0", "gdb's backtrace");
    assert!(!text.contains("Operation not permitted"), "{text}");
    // Then the UI is back, still held.
    t.wait_for(
        &["gdb on rank 0 exited; still held before slice 1", "GETTS"],
        "the UI is back",
    );
    t.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(300));
    t.keys(&["n"]);
    t.wait_for(
        &[" slice 2/", "[replay paused before slice"],
        "stepped after gdb",
    );
    t.keys(&["q"]);
    t.wait_for(&["strobe-exited-130"], "quit");
}

/// Issue 17, item 9, in a real terminal at three sizes: `strobe tui FAIL.db --diff
/// PASS.db` on the C heisenbug (a wildcard receive order decides the outcome): the status
/// line names the first difference, `m` opens it, `5` shows the match history with the
/// wildcard receives, `/rank=0 call=MPI_Recv` finds rank 0's receive.
#[test]
fn history_and_diff_in_tmux_at_three_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let prog = strobe_tests::tools::build_c("heisenbug", dir.path());
    let pass = dir.path().join("pass.db");
    let fail = dir.path().join("fail.db");
    strobe_tests::tools::record_heisenbug(&pass, &prog, true, 20);
    strobe_tests::tools::record_heisenbug(&fail, &prog, false, 40);
    for (w, h) in [(80, 24), (120, 40), (200, 60)] {
        let ctx = format!("{w}x{h}");
        let cmd = format!(
            "{} tui {} --diff {}; echo strobe-exited-$?; sleep 60",
            strobe().display(),
            fail.display(),
            pass.display()
        );
        let t = Tmux::start(&cmd, w, h);
        t.wait_for(&["first difference from pass.db in slice"], &ctx);
        t.keys(&["m"]);
        t.wait_for(&["First difference from", "MPI_Recv"], &ctx);
        // Escape then 5 at once would read as Alt-5: any key closes the popup anyway.
        t.keys(&["Escape"]);
        std::thread::sleep(Duration::from_millis(300));
        t.keys(&["5"]);
        let s = t.wait_for(&["5 History", "with MPI_ANY_SOURCE (*)", "ANY*"], &ctx);
        // The failing run aborted after its first receive: rank 2's message came first.
        assert!(
            s.contains("rank 0: 1 receive matched, 1 with"),
            "{ctx}:\n{s}"
        );
        assert!(s.contains("<- first difference (m)"), "{ctx}:\n{s}");
        t.keys(&["/", "rank=0 call=MPI_Recv", "Enter"]);
        t.wait_for(&["rank 0"], &ctx);
        t.keys(&["q"]);
        t.wait_for(&["strobe-exited-0"], &ctx);
    }
}
