//! Issue 11, items 3, 13, 14 and the files part of item 5: recordings are private by
//! default, never written through a symlink, locked while written (a second writer is
//! refused and the first loses nothing), and a full disk keeps what was committed.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use strobe_tests::{fixture, strobe};

struct Out {
    code: i32,
    stderr: String,
}

fn strobe_out(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(strobe());
    cmd.args(args)
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("spawn strobe");
    Out {
        code: o.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn record(db: &Path, flags: &[&str], prog: &str, args: &[&str]) -> Out {
    let fx = fixture(prog).display().to_string();
    let dbs = db.display().to_string();
    let mut all = vec!["record", "-o", dbs.as_str(), "-n", "2"];
    all.extend_from_slice(flags);
    all.extend_from_slice(&["--", fx.as_str()]);
    all.extend_from_slice(args);
    strobe_out(&all, &[])
}

fn job_row(db: &Path) -> (Option<String>, Option<String>, i64) {
    let c = Connection::open(db).unwrap();
    let (o, m) = c
        .query_row("SELECT outcome, message FROM job", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let n = c
        .query_row("SELECT count(*) FROM slice", [], |r| r.get(0))
        .unwrap();
    (o, m, n)
}

#[test]
fn recordings_are_0600_by_default_and_mode_shares_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    assert_eq!(record(&db, &[], "token_ring", &[]).code, 0);
    assert_eq!(std::fs::metadata(&db).unwrap().mode() & 0o777, 0o600);
    let db = dir.path().join("b.db");
    let o = record(&db, &["--mode", "0640"], "token_ring", &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::metadata(&db).unwrap().mode() & 0o777, 0o640);
    // World-writable: a recording others can rewrite is a command for you to replay.
    let o = record(
        &dir.path().join("c.db"),
        &["--mode", "0666"],
        "token_ring",
        &[],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("writable by group or others"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_directory_a_symlink_or_a_fifo_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let o = record(&sub, &["--force"], "token_ring", &[]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("is a directory"), "{}", o.stderr);
    assert!(sub.is_dir());

    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for flags in [&[][..], &["--force"]] {
        let o = record(&link, flags, "token_ring", &[]);
        assert_ne!(o.code, 0, "{flags:?}");
        assert!(o.stderr.contains("symbolic link"), "{}", o.stderr);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    }

    // SQLite opens FILE-wal itself: a symlink planted there is refused too.
    let fresh = dir.path().join("fresh.db");
    std::os::unix::fs::symlink(&victim, dir.path().join("fresh.db-wal")).unwrap();
    let o = record(&fresh, &[], "token_ring", &[]);
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains("fresh.db-wal is a symbolic link"),
        "{}",
        o.stderr
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");

    let fifo = dir.path().join("fifo.db");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: a valid NUL-terminated path and a mode.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = record(&fifo, &["--force"], "token_ring", &[]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("a FIFO"), "{}", o.stderr);
}

#[test]
fn a_second_record_force_is_refused_and_the_first_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let fx = fixture("idle").display().to_string();
    let dbs = db.display().to_string();
    let mut first = Command::new(strobe())
        .args([
            "record", "-o", &dbs, "--force", "-n", "2", "--", &fx, "2500",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the first has its job row in.
    let t = Instant::now();
    while !(db.exists()
        && Connection::open(&db).is_ok_and(|c| {
            c.query_row("SELECT count(*) FROM job", [], |r| r.get::<_, i64>(0))
                .is_ok_and(|n| n == 1)
        }))
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the first never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = record(&db, &["--force"], "token_ring", &[]);
    // Refused before anything ran: exit 2 (docs/cli.md, "Exit status"; 127 is kept for a
    // program that cannot be started).
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("being written by another strobe"),
        "{}",
        o.stderr
    );
    let st = first.wait().unwrap();
    assert_eq!(st.code(), Some(0), "the first recording failed");
    let (outcome, _, slices) = job_row(&db);
    assert_eq!(outcome.as_deref(), Some("success"));
    assert!(slices > 0);
    // And it replays.
    let o = strobe_out(&["replay", &dbs], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Once it is finished, --force replaces it.
    assert_eq!(record(&db, &["--force"], "token_ring", &[]).code, 0);
}

#[test]
fn secrets_and_unlisted_variables_are_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let fx = fixture("token_ring").display().to_string();
    let dbs = db.display().to_string();
    let env = [
        ("OMP_NUM_THREADS", "1"),
        ("STROBE_JOB_FD", "7"),
        ("LD_PRELOAD", ""),
        ("API_TOKEN", "xyz"),
    ];
    let args = [
        "record",
        "-o",
        &dbs,
        "-n",
        "2",
        "--",
        &fx,
        "--password=hunter2",
        "--token",
        "abc",
        "DB_SECRET=s3",
    ];
    let o = strobe_out(&args, &env);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let c = Connection::open(&db).unwrap();
    let (command, envj): (String, String) = c
        .query_row("SELECT command, env FROM job", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    for secret in ["hunter2", "abc", "s3"] {
        assert!(!command.contains(secret), "{secret} stored: {command}");
    }
    assert!(command.contains("--password=<redacted>"), "{command}");
    assert_eq!(envj, r#"{"OMP_NUM_THREADS":"1"}"#);
    // --no-redact keeps them (the user's explicit choice).
    let db2 = dir.path().join("q.db");
    let d2 = db2.display().to_string();
    let o = strobe_out(
        &[
            "record",
            "-o",
            &d2,
            "-n",
            "2",
            "--no-redact",
            "--",
            &fx,
            "--password=hunter2",
        ],
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let command: String = Connection::open(&db2)
        .unwrap()
        .query_row("SELECT command FROM job", [], |r| r.get(0))
        .unwrap();
    assert!(command.contains("hunter2"), "{command}");
}

/// Item 13: a full disk (a 600 KiB tmpfs, 64 KiB of it the recorder's space reserve) during `record` of a ping-pong: the slices committed before
/// stay, the job row says where it was cut, and the file replays to there. Needs root to
/// mount; skipped with a message otherwise.
#[test]
fn a_full_disk_keeps_the_committed_slices() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let m = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=600k", "tmpfs"])
        .arg(&mnt)
        .output();
    if !m.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED: cannot mount a small tmpfs here (needs root): {m:?}");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _u = Unmount(&mnt);
    std::fs::set_permissions(&mnt, std::fs::Permissions::from_mode(0o700)).unwrap();
    let db = mnt.join("full.db");
    // A job that writes steadily (about 40,000 slices): `idle` now runs few slices (the
    // stretched strobe), and a new file's schema no longer fills a WAL of its own.
    let o = record(&db, &[], "pingpong", &["8", "20000"]);
    assert_ne!(o.code, 0, "a full disk must not be success: {}", o.stderr);
    let (outcome, message, slices) = job_row(&db);
    assert_eq!(outcome, None, "cut short");
    let message = message.unwrap_or_default();
    assert!(message.starts_with("cut: disk full at slice"), "{message}");
    assert!(slices > 0, "the committed slices were lost");
    assert!(
        message.contains(&format!("at slice {slices} ")),
        "{message} vs {slices} slices"
    );
    let o = strobe_out(&["replay", &db.display().to_string()], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("{slices} slices verified"))
            && o.stderr.contains("cut: disk full"),
        "{}",
        o.stderr
    );
}
