//! Hostile neighbours (issue 11, items 5, 6 and 14) with a real other user: recordings,
//! the control socket and strobe's private directories shut out a user created with
//! `useradd` (`strobe-other`, made here if missing: idempotent; the tests need root to make
//! it and to act as it, and skip with a message otherwise); `strobe demo`'s default file
//! is in a private directory; ranks name only the launcher as their ptracer outside the
//! replays that hold them (strace: no Yama on the test machine, so the call is what can be
//! checked).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use strobe_tests::{fixture, record_fixture_into, strobe};

const OTHER: &str = "strobe-other";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The uid and gid of `strobe-other`, created (a system user without a home or a shell)
/// if missing.
fn other_user() -> (u32, u32) {
    let id = |flag: &str| -> Option<u32> {
        let o = Command::new("id").args([flag, OTHER]).output().ok()?;
        String::from_utf8_lossy(&o.stdout).trim().parse().ok()
    };
    if id("-u").is_none() {
        let o = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                OTHER,
            ])
            .output()
            .expect("run useradd");
        // Another test may have created it meanwhile (exit 9: already exists).
        assert!(
            o.status.success() || o.status.code() == Some(9),
            "useradd: {o:?}"
        );
    }
    (id("-u").expect("uid"), id("-g").expect("gid"))
}

/// Run `f` in a thread whose credentials are the other user's (credentials are per thread
/// in the kernel: raw syscalls change only this thread, not the test process).
fn as_other<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (uid, gid) = other_user();
    std::thread::spawn(move || {
        // SAFETY: raw syscalls changing only this thread's groups and ids; setgroups gets
        // an empty list (a null pointer with length 0).
        unsafe {
            assert_eq!(
                libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<u32>()),
                0
            );
            assert_eq!(libc::syscall(libc::SYS_setresgid, gid, gid, gid), 0);
            assert_eq!(libc::syscall(libc::SYS_setresuid, uid, uid, uid), 0);
        }
        f()
    })
    .join()
    .expect("the other user's thread")
}

fn skip_unless_root(what: &str) -> bool {
    if !is_root() {
        eprintln!("SKIPPED {what}: needs root to create and act as another user");
        return true;
    }
    false
}

/// A directory everyone may traverse, so only the modes under test keep the other user
/// out (tempfile makes 0700 directories, which would keep them out of everything).
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn denied(r: std::io::Result<impl Sized>) -> bool {
    matches!(r, Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied)
}

#[test]
fn another_user_cannot_read_a_recording_unless_it_is_shared() {
    if skip_unless_root("recordings 0600") {
        return;
    }
    let dir = open_dir();
    let db = record_fixture_into(dir.path(), "token_ring", 2);
    assert_eq!(std::fs::metadata(&db).unwrap().mode() & 0o777, 0o600);
    let p = db.clone();
    assert!(
        as_other(move || denied(std::fs::read(&p))),
        "read a 0600 recording"
    );
    // `--mode 0644` shares it: the same check now reads it (the test can fail).
    let shared = dir.path().join("shared.db");
    let o = Command::new(strobe())
        .args(["record", "--mode", "0644", "-n", "2", "-o"])
        .arg(&shared)
        .arg("--")
        .arg(fixture("token_ring"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = shared.clone();
    assert!(as_other(move || std::fs::read(&p).is_ok()), "--mode 0644");
}

/// A replay held at slice 2, listening on `control` (or in a private directory under
/// `tmpdir` when `None`); returns the child, its socket, and the rest of its stderr.
fn held_replay(
    db: &Path,
    control: Option<&Path>,
    tmpdir: &Path,
) -> (Child, PathBuf, mpsc::Receiver<String>) {
    let mut cmd = Command::new(strobe());
    cmd.arg("replay")
        .arg(db)
        .args(["--timeout", "120s", "--until-slice", "2"])
        .env("TMPDIR", tmpdir)
        .env_remove("XDG_RUNTIME_DIR");
    if let Some(c) = control {
        cmd.arg("--control").arg(c);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let sock = loop {
        let line = lines
            .next()
            .expect("the replay ended before listening")
            .unwrap();
        if let Some(p) = line.strip_prefix("strobe: replay control socket: ") {
            break PathBuf::from(p);
        }
    };
    std::thread::spawn(move || {
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let _ = tx.send(rest.join("\n"));
    });
    (child, sock, rx)
}

fn quit(mut child: Child, sock: &Path, rx: mpsc::Receiver<String>) {
    let mut s = UnixStream::connect(sock).expect("the owner connects");
    s.write_all(b"{\"cmd\":\"quit\"}\n").unwrap();
    let st = child.wait().unwrap();
    let err = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
    assert_eq!(st.code(), Some(130), "{err}");
}

#[test]
fn another_user_cannot_connect_to_a_replay_nor_enter_its_private_directory() {
    if skip_unless_root("the control socket") {
        return;
    }
    let dir = open_dir();
    let db = record_fixture_into(dir.path(), "token_ring", 2);
    // --control in a directory everyone may enter: the socket's own mode (0600) refuses.
    let ctl = dir.path().join("ctl.sock");
    let (child, sock, rx) = held_replay(&db, Some(&ctl), dir.path());
    assert_eq!(std::fs::metadata(&sock).unwrap().mode() & 0o777, 0o600);
    let s = sock.clone();
    assert!(
        as_other(move || denied(UnixStream::connect(&s))),
        "connected"
    );
    quit(child, &sock, rx);
    // The default: a fresh 0700 directory under $TMPDIR (here an open one).
    let (child, sock, rx) = held_replay(&db, None, dir.path());
    let private = sock.parent().unwrap().to_path_buf();
    assert_eq!(private.parent(), Some(dir.path()), "{}", sock.display());
    assert_eq!(std::fs::metadata(&private).unwrap().mode() & 0o777, 0o700);
    let (s, p) = (sock.clone(), private.clone());
    let (connect, list) = as_other(move || {
        (
            denied(UnixStream::connect(&s)),
            denied(std::fs::read_dir(&p)),
        )
    });
    assert!(connect && list, "the other user got in: {connect} {list}");
    quit(child, &sock, rx);
}

#[test]
fn the_demo_recording_is_in_a_private_directory() {
    let dir = open_dir();
    let mut child = Command::new(strobe())
        .args(["demo", "-n", "2"])
        .env("TMPDIR", dir.path())
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().expect("demo said nothing").unwrap();
    let path = PathBuf::from(first.rsplit(" to ").next().unwrap());
    // Stopped while it records, so its directory can be looked at before it is removed.
    let pid = child.id() as i32;
    // SAFETY: signals to our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let private = path.parent().unwrap().to_path_buf();
    let meta = std::fs::symlink_metadata(&private);
    let other_denied = is_root().then(|| {
        let p = private.clone();
        as_other(move || denied(std::fs::read_dir(&p)))
    });
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0), "{}", rest.join("\n"));
    let meta = meta.expect("the demo's directory");
    assert!(meta.is_dir() && meta.mode() & 0o777 == 0o700, "{first}");
    assert_eq!(private.parent(), Some(dir.path()), "{first}");
    let name = private.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("strobe-demo-"), "{name}");
    // The old predictable name had the pid in it.
    assert_ne!(name, format!("strobe-demo-{pid}.db"));
    assert_eq!(other_denied, is_root().then_some(true));
    assert!(!private.exists(), "the demo's directory is removed");
}

/// `prctl(PR_SET_PTRACER, X)` calls under `strace -f`: `(X, count)`.
fn ptracer_calls(args: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("strace.log");
    let o = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=prctl", "-o"])
        .arg(&log)
        .arg(strobe())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("strace is not installed: scripts/ensure-tools.sh installs it");
    assert!(
        matches!(o.status.code(), Some(0)),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    text.lines()
        .filter_map(|l| l.split_once("prctl(PR_SET_PTRACER, ").map(|(_, r)| r))
        // `12 prctl(PR_SET_PTRACER, 10) = -1 EINVAL`, or `... 10 <unfinished ...>` when
        // another process's call interleaves.
        .map(|r| r.split([')', ' ']).next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn ranks_name_only_the_launcher_as_ptracer_outside_replay_holds() {
    let dir = tempfile::tempdir().unwrap();
    let db = record_fixture_into(dir.path(), "token_ring", 3);
    let dbs = db.display().to_string();
    let fx = fixture("token_ring").display().to_string();
    // run, record and a plain replay: each of the 3 ranks names one pid, the launcher's,
    // never PR_SET_PTRACER_ANY.
    let rec = dir.path().join("again.db").display().to_string();
    for args in [
        vec!["run", "-n", "3", "--", &fx],
        vec!["record", "-o", &rec, "-n", "3", "--", &fx],
        vec!["replay", &dbs],
    ] {
        let calls = ptracer_calls(&args);
        assert_eq!(calls.len(), 3, "{args:?}: {calls:?}");
        assert!(
            calls
                .iter()
                .all(|c| c == &calls[0] && c.parse::<u32>().is_ok_and(|p| p > 1)),
            "{args:?}: {calls:?}"
        );
    }
    // A replay that can hold its ranks for the user's debugger (here: --control, which
    // can stop them at any time): PR_SET_PTRACER_ANY.
    let ctl = dir.path().join("c.sock").display().to_string();
    let calls = ptracer_calls(&["replay", &dbs, "--control", &ctl]);
    let any = calls
        .iter()
        .filter(|c| *c == "PR_SET_PTRACER_ANY" || *c == "-1" || *c == "0xffffffffffffffff")
        .count();
    assert_eq!(any, 3, "{calls:?}");
}
