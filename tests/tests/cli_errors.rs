//! Issue 12, item 9: every refusal is one clean line on stderr (no cause repeated, no
//! backtrace) with the exit status of the one table in docs/cli.md: 2 for a command line,
//! file or environment strobe refuses before anything runs, 127 for a program that cannot
//! be started; and a closed stdout (`strobe demo | head`) ends strobe quietly.

use std::io::Read;
use std::process::{Command, Stdio};

use strobe_tests::replay::strobe_cmd;
use strobe_tests::{fixture, strobe};

/// Run strobe; return (status, stderr), checking the stderr is one clean line.
fn refused(args: &[&str]) -> (i32, String) {
    let out = strobe_cmd(args, &[]);
    // clap's usage errors end with its "For more information, try '--help'." hint.
    let err = out
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line:\n{err}");
    assert!(
        err.starts_with("strobe: ") || err.starts_with("error: "),
        "{args:?}: {err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    // No cause printed twice ("Permission denied (os error 13): Permission denied ...").
    let parts: Vec<&str> = err.split(": ").collect();
    for w in parts.windows(2) {
        assert!(
            !w[0].ends_with(w[1]),
            "{args:?}: repeated {:?} in {err}",
            w[1]
        );
    }
    assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    (out.code, err)
}

#[test]
fn refusals_are_one_line_with_the_documented_status() {
    let dir = tempfile::tempdir().unwrap();
    let ring = fixture("token_ring").display().to_string();
    let tmp = std::env::temp_dir().display().to_string();
    let missing_dir = dir.path().join("no/such/dir/x.db").display().to_string();
    let src = dir.path().join("prog.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let src = src.display().to_string();
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        // The output is a directory: not "removing /tmp: Is a directory".
        (
            vec!["record", "-o", &tmp, "--force", "-n", "2", "--", &ring],
            2,
            "is a directory",
        ),
        (
            vec!["record", "-o", &missing_dir, "-n", "2", "--", &ring],
            2,
            "No such file or directory",
        ),
        (
            vec!["run", "-n", "0", "--", &ring],
            2,
            "-n must be at least 1",
        ),
        (
            vec!["run", "-n", "2", "--nodes", "3", "--", &ring],
            2,
            "--nodes",
        ),
        (
            vec!["run", "-n", "2", "--slice", "fast", "--", &ring],
            2,
            "fast",
        ),
        (
            vec!["run", "-n", "2", "--", "--bogus"],
            2,
            "unknown option --bogus",
        ),
        (vec!["run", "--bogus", "--", &ring], 2, "--bogus"),
        (vec!["stats", "/etc/hostname"], 2, "not"),
        // The program: 127, saying what is wrong with it.
        (
            vec!["run", "-n", "2", "--", &tmp],
            127,
            "is a directory, not a program",
        ),
        (vec!["run", "-n", "2", "--", &src], 127, "is not executable"),
        (
            vec!["run", "-n", "2", "--", "/nonexistent/prog"],
            127,
            "does not exist",
        ),
        (
            vec!["run", "-n", "2", "--", "no-such-program-xyz"],
            127,
            "not found in PATH",
        ),
    ];
    for (args, code, want) in cases {
        let (got, err) = refused(&args);
        assert_eq!(got, code, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert!(
        !std::path::Path::new(&missing_dir).exists(),
        "nothing was created"
    );
}

/// `strobe demo | true` and `strobe stats FILE | true`: the reader is gone before strobe
/// prints; strobe ends quietly with 141 (as if killed by SIGPIPE), no panic, and the
/// demo's temporary recording is removed.
#[test]
fn a_closed_stdout_ends_strobe_quietly() {
    let dir = tempfile::tempdir().unwrap();
    for args in [vec!["demo", "-n", "2"], vec!["--version"]] {
        let mut child = Command::new(strobe())
            .args(&args)
            .env("TMPDIR", dir.path())
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before strobe writes anything.
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            matches!(status.code(), Some(141) | Some(0)),
            "{args:?}: {status:?}\n{err}"
        );
        if args[0] == "demo" {
            assert_eq!(status.code(), Some(141), "{err}");
        }
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("strobe-demo-"))
        .collect();
    assert!(left.is_empty(), "the demo recording was left behind");
}
