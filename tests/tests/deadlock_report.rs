//! Issue 12: a deadlock is reported with the source line of every blocked rank's call (C
//! through the C ABI's call-site capture, Rust through `#[track_caller]`), by `strobe run`
//! and by `strobe stats` of the recording, with a hint for the classic patterns.

use std::path::Path;

use strobe_tests::c_fixtures::source_dir;
use strobe_tests::replay::strobe_cmd;
use strobe_tests::tools::{build_c, record_c};
use strobe_tests::{fixture, run_fixture};

/// The 1-based line of `fixtures/c/<file>` holding `needle` (its first occurrence).
fn line_of(file: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(source_dir().join(file)).expect("fixture source");
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{needle} not in {file}"))
}

fn run_c(prog: &Path, ranks: u32, args: &[&str]) -> strobe_tests::replay::Out {
    let n = ranks.to_string();
    let p = prog.display().to_string();
    let mut all = vec!["run", "-n", &n, "--timeout", "60s", "--", &p];
    all.extend_from_slice(args);
    strobe_cmd(&all, &[])
}

#[test]
fn a_c_deadlock_names_the_file_line_and_function_of_every_blocked_rank_in_run_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("deadlock", dir.path());
    let line = line_of("deadlock.c", "FX_MPI(MPI_Recv(");
    let want = |r: u32| {
        format!(
            "rank {r} blocked in MPI_Recv(source={}, tag=66, comm=MPI_COMM_WORLD, 8 bytes) at deadlock.c:{line} (in main)",
            (r + 1) % 3
        )
    };
    let run = run_c(&prog, 3, &[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    for r in 0..3 {
        assert!(
            run.stderr.contains(&want(r)),
            "{}\nwanted: {}",
            run.stderr,
            want(r)
        );
    }
    // The recording keeps the report (and the sites of the blocked spans).
    let db = dir.path().join("dl.db");
    let rec = record_c(&db, &prog, 3, &[], &[]);
    assert_eq!(rec.code, 3, "{}", rec.stderr);
    let stats = strobe_cmd(&["stats", &db.display().to_string()], &[]);
    assert_eq!(stats.code, 0, "{}", stats.stderr);
    for r in 0..3 {
        assert!(stats.stdout.contains(&want(r)), "{}", stats.stdout);
    }
    tui_slice_detail_shows_the_sites(&db, line);
    damaged_sites_are_refused(&db, dir.path());
    // A replay held before the deadlock's slice names the sites of the held ranks.
    let slice: u64 = rec
        .stderr
        .split("deadlock in slice ")
        .nth(1)
        .and_then(|t| t.split(':').next())
        .and_then(|n| n.parse().ok())
        .expect("the deadlock's slice");
    let until = (slice - 1).to_string();
    let held = held_replay(&db, &until);
    let at = format!("blocked in MPI_Recv at deadlock.c:{line} (in main)");
    assert_eq!(held.matches(&at).count(), 3, "{held}");
    let sites = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg("SELECT DISTINCT file, line, function FROM blocked_where WHERE file IS NOT NULL AND last_slice = (SELECT max(last_slice) FROM blocked_span)")
        .output()
        .expect("sqlite3");
    let sites = String::from_utf8_lossy(&sites.stdout);
    assert!(
        sites.contains(&format!("deadlock.c|{line}|main")),
        "{sites}"
    );
}

#[test]
fn each_classic_pattern_gets_its_hint_and_the_line_inside_its_function() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("deadlock_patterns", dir.path());
    let src = "deadlock_patterns.c";
    let cases = [
        (
            "mode=sendsend",
            "hint: send-send without buffering: ranks 0, 1 and 2",
            vec![(0, format!("MPI_Ssend(dest=1, tag=7, comm=MPI_COMM_WORLD, 8 bytes) at {src}:{} (in exchange)", line_of(src, "MPI_Ssend(")))],
        ),
        (
            "mode=collective",
            "hint: collective mismatch: rank 0 waits in MPI_Barrier while rank 1 is in MPI_Recv",
            vec![
                (0, format!("MPI_Barrier(comm=MPI_COMM_WORLD) at {src}:{} (in sync_then_send)", line_of(src, "MPI_Barrier("))),
                (1, format!("MPI_Recv(source=0, tag=8, comm=MPI_COMM_WORLD, 8 bytes) at {src}:{} (in sync_then_send)", line_of(src, ", 0, 8, MPI_COMM_WORLD"))),
            ],
        ),
        (
            "mode=wildcard",
            "hint: wildcard receive starvation: rank 0 waits in MPI_Recv(MPI_ANY_SOURCE)",
            vec![(0, format!("MPI_Recv(source=MPI_ANY_SOURCE, tag=9, comm=MPI_COMM_WORLD, 8 bytes) at {src}:{} (in serve_requests)", line_of(src, "MPI_ANY_SOURCE, 9")))],
        ),
    ];
    for (mode, hint, ranks) in cases {
        let run = run_c(&prog, 3, &[mode]);
        assert_eq!(run.code, 3, "{mode}: {}", run.stderr);
        assert!(run.stderr.contains(hint), "{mode}: {}", run.stderr);
        for (r, what) in ranks {
            let line = format!("rank {r} blocked in {what}");
            assert!(
                run.stderr.contains(&line),
                "{mode}: {}\nwanted: {line}",
                run.stderr
            );
        }
        // One pattern each: the hints do not fire where they do not apply.
        assert_eq!(
            run.stderr.matches("hint:").count(),
            1,
            "{mode}: {}",
            run.stderr
        );
    }
}

#[test]
fn a_rust_deadlock_names_the_rust_source_line() {
    let src = std::fs::read_to_string(
        fixture("deadlock")
            .parent()
            .map(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/src/bin/deadlock.rs"))
            .expect("path"),
    )
    .expect("deadlock.rs");
    let line = src
        .lines()
        .position(|l| l.contains("world.recv("))
        .expect("the recv")
        + 1;
    let r = run_fixture(&["-n", "2"], "deadlock", &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    for rank in 0..2 {
        let want = format!(
            "rank {rank} blocked in MPI_Recv(source={}, tag=0",
            (rank + 1) % 2
        );
        assert!(r.stderr.contains(&want), "{}", r.stderr);
    }
    assert_eq!(
        r.stderr.matches(&format!("deadlock.rs:{line}")).count(),
        2,
        "{}",
        r.stderr
    );
}

/// The TUI, offline on the recording: `G` (the last slice, inside the deadlock), Enter
/// (slice detail) shows each blocked rank's call site, at 200x60 and 120x40; the
/// timeline's crosshair names it too.
fn tui_slice_detail_shows_the_sites(db: &Path, line: usize) {
    use strobe_tui::app::Event;
    use strobe_tui::ratatui::backend::TestBackend;
    use strobe_tui::ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use strobe_tui::ratatui::Terminal;
    use strobe_tui::{App, Recording, Theme};
    let key = |c: KeyCode| Event::Key(KeyEvent::new(c, KeyModifiers::NONE));
    let want = format!("at deadlock.c:{line} (in main)");
    for (w, h) in [(200u16, 60u16), (120, 40)] {
        let rec = Recording::open(db).unwrap();
        let mut app = App::new(rec, Theme { color: false });
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let mut screen = |app: &mut App, events: &[Event]| {
            for e in events {
                app.handle(e.clone());
            }
            strobe_tui::terminal::draw(&mut term, app).unwrap();
            let buf = term.backend().buffer();
            let mut s = String::new();
            for y in 0..buf.area.height {
                for x in 0..buf.area.width {
                    s.push_str(buf[(x, y)].symbol());
                }
                s.push('\n');
            }
            s
        };
        let detail = screen(&mut app, &[key(KeyCode::Char('G')), key(KeyCode::Enter)]);
        assert_eq!(
            detail.matches(&want).count(),
            3,
            "{w}x{h}: every blocked rank's site:\n{detail}"
        );
        assert!(detail.contains("CYCLE 0 -> 1 -> 2 -> 0"), "{detail}");
        let timeline = screen(&mut app, &[key(KeyCode::Esc), key(KeyCode::Char('2'))]);
        assert!(
            timeline.contains(&format!("blocked in MPI_Recv {want}")),
            "{w}x{h}: the timeline's crosshair:\n{timeline}"
        );
    }
}

/// `strobe replay DB --until-slice N`: its stderr up to the hold's last line (the replay
/// then waits for the control socket; it is stopped here).
fn held_replay(db: &Path, until: &str) -> String {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(strobe_tests::strobe())
        .args(["replay", &db.display().to_string(), "--until-slice", until])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strobe replay");
    let mut text = String::new();
    for l in BufReader::new(child.stderr.take().expect("stderr")).lines() {
        let l = l.expect("stderr line");
        text.push_str(&l);
        text.push('\n');
        if l.contains("to the control socket") || l.contains("replay DIVERGED") {
            break;
        }
    }
    // SIGINT: the replay stops (exit 130) and takes its ranks down.
    // SAFETY: kill(2) on our own child's pid, which it keeps until we wait for it.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    text
}

/// A tampered call site is damage (exit 2, "damaged recording"), never printed.
fn damaged_sites_are_refused(db: &Path, dir: &Path) {
    for (i, sql) in [
        "UPDATE call_site SET line = 'twenty'",
        "UPDATE call_site SET file = zeroblob(10)",
        "UPDATE blocked_site SET site = 999",
        "UPDATE blocked_site SET rank = -1 - rank",
    ]
    .iter()
    .enumerate()
    {
        let bad = dir.join(format!("bad{i}.db"));
        std::fs::copy(db, &bad).unwrap();
        let o = std::process::Command::new("sqlite3")
            .arg(&bad)
            .arg(sql)
            .output()
            .expect("sqlite3");
        assert!(
            o.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let stats = strobe_cmd(&["stats", &bad.display().to_string()], &[]);
        assert_eq!(stats.code, 2, "{sql}: {}{}", stats.stdout, stats.stderr);
        assert!(
            stats.stderr.contains("damaged recording") && stats.stderr.contains("_site table"),
            "{sql}: {}",
            stats.stderr
        );
    }
}

/// Fortran calls go through their own entry wrapper: the site is the Fortran source line.
/// Linked statically too, the C fixture's sites are found (the marker is frame-based, not
/// object-based).
#[test]
fn fortran_and_statically_linked_c_deadlocks_name_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("dl.f90");
    std::fs::write(
        &src,
        "program dl\n  use mpi\n  integer :: ierr, rank, size, buf(1)\n  call MPI_Init(ierr)\n  \
         call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)\n  \
         call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)\n  \
         call MPI_Recv(buf, 1, MPI_INTEGER, mod(rank+1, size), 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)\n  \
         call MPI_Finalize(ierr)\nend program dl\n",
    )
    .unwrap();
    let prog = dir.path().join("fdl");
    let (s, p) = (src.display().to_string(), prog.display().to_string());
    let built = strobe_cmd(&["mpifort", "-g", "-o", &p, &s], &[]);
    assert_eq!(built.code, 0, "{}", built.stderr);
    let run = run_c(&prog, 2, &[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(
        run.stderr.matches("at dl.f90:7 (in dl)").count(),
        2,
        "{}",
        run.stderr
    );
    let stat = dir.path().join("deadlock_static");
    let c = source_dir().join("deadlock.c").display().to_string();
    let inc = source_dir().display().to_string();
    let st = stat.display().to_string();
    let built = strobe_cmd(
        &[
            "mpicc",
            "-static-mpi",
            "-std=c11",
            "-O2",
            "-g",
            "-I",
            &inc,
            "-o",
            &st,
            &c,
        ],
        &[],
    );
    assert_eq!(built.code, 0, "{}", built.stderr);
    let run = run_c(&stat, 2, &[]);
    let line = line_of("deadlock.c", "FX_MPI(MPI_Recv(");
    assert_eq!(
        run.stderr
            .matches(&format!("at deadlock.c:{line} (in main)"))
            .count(),
        2,
        "{}",
        run.stderr
    );
}
