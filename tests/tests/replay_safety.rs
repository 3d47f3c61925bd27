//! Issue 11, item 1: a recording is data, never a command. Real recordings, tampered with
//! plain SQL the way an attacker would, replayed by the real `strobe` binary with stdin not
//! a terminal: nothing the user did not record, name or confirm may run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rusqlite::Connection;
use strobe_tests::{fixture, strobe};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `strobe ARGS` with stdin closed (not a terminal), `$HOME` and `$XDG_STATE_HOME` set
/// to `home` (whose launch list says what "this user" recorded).
fn strobe_in(home: &Path, args: &[&str]) -> Out {
    let o = Command::new(strobe())
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .stdin(Stdio::null())
        .output()
        .expect("spawn strobe");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

struct Setup {
    dir: tempfile::TempDir,
    home: PathBuf,
    db: PathBuf,
}

/// A token_ring recording made by "this user" (home `dir/home`), run in `dir`.
fn setup(extra: &[&str]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let db = dir.path().join("t.db");
    let fx = fixture("token_ring").display().to_string();
    let dbs = db.display().to_string();
    let mut args = vec!["record", "-o", &dbs, "-n", "2", "--", &fx];
    args.extend_from_slice(extra);
    let o = strobe_in(&home, &args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    Setup { dir, home, db }
}

/// Edit the recording as an attacker would: including the content checksum, which anyone
/// who can edit the file can recompute (it detects damage, not forgery). The defences
/// tested here must hold without it; `an_edit_without_resealing_is_damage` checks it.
fn sql(db: &Path, s: &str) {
    let c = Connection::open(db).unwrap();
    c.execute_batch(s).unwrap();
    strobe_recorder::checksum::seal(&c).unwrap();
}

fn sha256(p: &Path) -> String {
    strobe_recorder::sha256_file(p).unwrap()
}

#[test]
fn the_issue_attack_with_no_hash_is_refused_and_runs_nothing() {
    let s = setup(&[]);
    let pwned = s.dir.path().join("pwned");
    sql(
        &s.db,
        &format!(
            "UPDATE job SET program='/bin/sh', program_sha256=NULL, \
             command='[\"/bin/sh\",\"-c\",\"id > {}\"]'",
            pwned.display()
        ),
    );
    let dbs = s.db.display().to_string();
    for extra in [&[][..], &["--yes"], &["--dry-run"]] {
        let mut args = vec!["replay", dbs.as_str()];
        args.extend_from_slice(extra);
        let o = strobe_in(&s.home, &args);
        assert_eq!(o.code, 2, "{extra:?}: {}{}", o.stdout, o.stderr);
        assert!(o.stderr.contains("cannot verify"), "{}", o.stderr);
        assert!(!pwned.exists(), "{extra:?} ran the recorded shell command");
    }
}

/// The same edit without recomputing the content checksum: damage, exit 2, before the
/// launch plan is even made (and nothing runs).
#[test]
fn an_edit_without_resealing_is_damage() {
    let s = setup(&[]);
    let pwned = s.dir.path().join("pwned");
    Connection::open(&s.db)
        .unwrap()
        .execute_batch(&format!(
            "UPDATE job SET program='/bin/sh', program_sha256=NULL, \
             command='[\"/bin/sh\",\"-c\",\"id > {}\"]'",
            pwned.display()
        ))
        .unwrap();
    let dbs = s.db.display().to_string();
    for extra in [&[][..], &["--yes"], &["--dry-run"]] {
        let mut args = vec!["replay", dbs.as_str()];
        args.extend_from_slice(extra);
        let o = strobe_in(&s.home, &args);
        assert_eq!(o.code, 2, "{extra:?}: {}{}", o.stdout, o.stderr);
        assert!(
            o.stderr.contains("damaged recording: content checksum"),
            "{}",
            o.stderr
        );
        assert!(!pwned.exists(), "{extra:?} ran the recorded shell command");
    }
}

#[test]
fn a_forged_hash_of_a_real_program_needs_confirmation_and_drops_ld_preload() {
    let s = setup(&[]);
    let pwned = s.dir.path().join("pwned");
    sql(
        &s.db,
        &format!(
            "UPDATE job SET program='/bin/sh', program_sha256='{}', \
             command='[\"/bin/sh\",\"-c\",\"id > {}\"]', \
             env='{{\"LD_PRELOAD\":\"/nonexistent/evil.so\",\"STROBE_SPIN_US\":\"0\",\"OMP_NUM_THREADS\":\"1\"}}'",
            sha256(Path::new("/bin/sh")),
            pwned.display()
        ),
    );
    let dbs = s.db.display().to_string();
    // Not a launch this user recorded: refused without a terminal or --yes.
    let o = strobe_in(&s.home, &["replay", &dbs]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("not recorded by you"), "{}", o.stderr);
    assert!(o.stderr.contains("--yes"), "{}", o.stderr);
    assert!(!pwned.exists(), "ran the recorded shell command");
    // --dry-run shows exactly what would run, and runs nothing.
    let o = strobe_in(&s.home, &["replay", &dbs, "--dry-run"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for want in [
        "program: /bin/sh (from the recording)",
        "hash:    SHA-256 matches the recording",
        "\"-c\"",
        "env:     OMP_NUM_THREADS=1",
        "dropped: LD_PRELOAD, STROBE_SPIN_US",
        "recorded by you: no",
        "would ask:",
    ] {
        assert!(o.stdout.contains(want), "{want}:\n{}", o.stdout);
    }
    assert!(!pwned.exists(), "--dry-run ran the recorded shell command");
}

#[test]
fn ld_preload_from_the_recording_never_reaches_the_ranks() {
    let s = setup(&[]);
    // An edit of the environment only (the user then confirms with --yes): the ranks
    // must not get LD_PRELOAD (the loader would complain about the missing object).
    sql(
        &s.db,
        "UPDATE job SET env='{\"LD_PRELOAD\":\"/nonexistent/evil.so\",\"OMP_NUM_THREADS\":\"1\"}'",
    );
    let dbs = s.db.display().to_string();
    let o = strobe_in(&s.home, &["replay", &dbs, "--yes"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("replay matched"), "{}", o.stderr);
    assert!(
        !o.stderr.contains("evil.so"),
        "LD_PRELOAD passed: {}",
        o.stderr
    );
    // The user may pass it explicitly, and then it does reach them.
    let o = strobe_in(
        &s.home,
        &[
            "replay",
            &dbs,
            "--yes",
            "--env",
            "LD_PRELOAD=/nonexistent/evil.so",
        ],
    );
    assert!(
        o.stderr.contains("evil.so"),
        "--env not passed: {}",
        o.stderr
    );
}

#[test]
fn own_recordings_run_without_a_question_and_mailed_ones_ask() {
    let s = setup(&[]);
    let dbs = s.db.display().to_string();
    let o = strobe_in(&s.home, &["replay", &dbs]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // The same file opened by someone else (another home: another launch list).
    let other = s.dir.path().join("other-home");
    std::fs::create_dir(&other).unwrap();
    let o = strobe_in(&other, &["replay", &dbs]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("program: "), "{}", o.stderr);
    let o = strobe_in(&other, &["replay", &dbs, "--yes"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // A different binary named by the user needs --allow-different-binary AND --yes.
    let hello = fixture("hello").display().to_string();
    let o = strobe_in(
        &s.home,
        &[
            "replay",
            &dbs,
            "--program",
            &hello,
            "--allow-different-binary",
        ],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--yes"), "{}", o.stderr);
}

#[test]
fn the_working_directory_must_exist_and_be_the_users() {
    let s = setup(&[]);
    let dbs = s.db.display().to_string();
    let gone = s.dir.path().join("gone");
    sql(&s.db, &format!("UPDATE job SET cwd='{}'", gone.display()));
    let o = strobe_in(&s.home, &["replay", &dbs, "--yes"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("does not exist"), "{}", o.stderr);
    // World-writable: refused too; --cwd gives another.
    let open = s.dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = strobe_in(
        &s.home,
        &[
            "replay",
            &dbs,
            "--yes",
            "--cwd",
            &open.display().to_string(),
        ],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("writable by everyone"), "{}", o.stderr);
    let here = s.dir.path().display().to_string();
    let o = strobe_in(&s.home, &["replay", &dbs, "--yes", "--cwd", &here]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn redacted_arguments_replay_only_with_the_users_arguments() {
    let s = setup(&["--password=hunter2"]);
    let c = Connection::open(&s.db).unwrap();
    let command: String = c
        .query_row("SELECT command FROM job", [], |r| r.get(0))
        .unwrap();
    assert!(command.contains("--password=<redacted>"), "{command}");
    assert!(!command.contains("hunter2"), "{command}");
    let dbs = s.db.display().to_string();
    let o = strobe_in(&s.home, &["replay", &dbs]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("redacted"), "{}", o.stderr);
    let o = strobe_in(&s.home, &["replay", &dbs, "--", "--password=hunter2"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

/// A tmux server of our own, killed when the test ends (as in tui_tmux.rs).
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .env("TERM", "xterm-256color")
            .output()
            .expect("run tmux")
    }

    fn wait_for(&self, what: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let out = self.run(&["capture-pane", "-p", "-J", "-t", "t"]);
            let screen = String::from_utf8_lossy(&out.stdout).into_owned();
            if screen.contains(what) {
                return screen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the pane never showed {what:?}:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// Item 5: `replay --tui` used to append the ranks' output to `$TMPDIR/strobe-replay-PID.out`,
/// following a symlink planted there. Plant one at every name the next pids would give;
/// none may be followed, and the output goes to a private 0700 directory.
#[test]
fn the_tui_output_file_is_private_and_never_a_planted_symlink() {
    if !Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("SKIPPED: tmux is not installed (scripts/test.sh installs it)");
        return;
    }
    let s = setup(&[]);
    let tmp = s.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let victim = s.dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1);
    for pid in last + 1..last + 2000 {
        let _ = std::os::unix::fs::symlink(&victim, tmp.join(format!("strobe-replay-{pid}.out")));
    }
    let cmd = format!(
        "env -u XDG_RUNTIME_DIR -u XDG_STATE_HOME HOME={} TMPDIR={} {} replay {} --tui; echo strobe-exited-$?; sleep 60",
        s.home.display(),
        tmp.display(),
        strobe().display(),
        s.db.display()
    );
    let t = Tmux {
        socket: format!("strobe-safety-{}", std::process::id()),
    };
    let out = t.run(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "250",
        "-y",
        "40",
        &cmd,
    ]);
    assert!(out.status.success(), "tmux: {out:?}");
    t.wait_for("[replay paused before slice 1]");
    // Run to the end (the ranks print), then quit.
    let _ = t.run(&["send-keys", "-t", "t", "Space"]);
    t.wait_for("matched");
    let _ = t.run(&["send-keys", "-t", "t", "q"]);
    let screen = t.wait_for("strobe-exited-");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let line = screen
        .lines()
        .find(|l| l.contains("the ranks' output is in "))
        .unwrap_or_else(|| panic!("no output file named:\n{screen}"));
    let path = PathBuf::from(
        line.split("the ranks' output is in ")
            .nth(1)
            .unwrap()
            .trim(),
    );
    let dir = path.parent().unwrap();
    assert!(dir.starts_with(&tmp), "{}", path.display());
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir).unwrap();
    assert!(
        meta.is_dir() && meta.mode() & 0o777 == 0o700,
        "{:o}",
        meta.mode()
    );
    assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
}

/// On a terminal, a launch that needs confirmation is shown and asked about: "n" (or
/// anything but yes) runs nothing, "y" runs it.
#[test]
fn a_terminal_is_asked_and_no_runs_nothing() {
    if !Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("SKIPPED: tmux is not installed (scripts/test.sh installs it)");
        return;
    }
    let s = setup(&[]);
    let pwned = s.dir.path().join("pwned");
    sql(
        &s.db,
        &format!(
            "UPDATE job SET program='/bin/sh', program_sha256='{}', \
             command='[\"/bin/sh\",\"-c\",\"id > {}\"]'",
            sha256(Path::new("/bin/sh")),
            pwned.display()
        ),
    );
    for (answer, runs) in [("n", false), ("y", true)] {
        let cmd = format!(
            "env -u XDG_STATE_HOME HOME={} {} replay {}; echo strobe-exited-$?; sleep 60",
            s.home.display(),
            strobe().display(),
            s.db.display()
        );
        let t = Tmux {
            socket: format!("strobe-ask-{}-{answer}", std::process::id()),
        };
        let out = t.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "250",
            "-y",
            "40",
            &cmd,
        ]);
        assert!(out.status.success(), "tmux: {out:?}");
        let screen = t.wait_for("Run this? [y/N]");
        assert!(screen.contains("program: /bin/sh"), "{screen}");
        let _ = t.run(&["send-keys", "-t", "t", answer, "Enter"]);
        let screen = t.wait_for("strobe-exited-");
        assert_eq!(pwned.exists(), runs, "answer {answer}:\n{screen}");
        if !runs {
            assert!(screen.contains("nothing was run"), "{screen}");
            assert!(screen.contains("strobe-exited-2"), "{screen}");
        }
    }
}
