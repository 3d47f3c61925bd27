//! `strobe diff`: a passing and a failing recording of the heisenbug fixture diff to the
//! wildcard receive whose match decides the outcome; a recording against itself has no
//! difference; what cannot be compared exits 2.

use strobe_tests::replay::strobe_cmd;
use strobe_tests::tools::{build_c, record_c, record_heisenbug};

fn diff(a: &std::path::Path, b: &std::path::Path, extra: &[&str]) -> strobe_tests::replay::Out {
    let (a, b) = (a.display().to_string(), b.display().to_string());
    let mut args = vec!["diff", a.as_str(), b.as_str()];
    args.extend_from_slice(extra);
    strobe_cmd(&args, &[])
}

#[test]
fn pass_and_fail_differ_at_the_deciding_wildcard_match() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("heisenbug", dir.path());
    let (pass, fail) = (dir.path().join("pass.db"), dir.path().join("fail.db"));
    record_heisenbug(&pass, &prog, true, 5);
    record_heisenbug(&fail, &prog, false, 20);

    let o = diff(&pass, &fail, &[]);
    assert_eq!(o.code, 1, "different: {}{}", o.stdout, o.stderr);
    let first: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| !l.starts_with("note:"))
        .collect();
    assert!(
        first[0].starts_with("first difference: rank 0, 0#0 MPI_Recv peer=ANY")
            && first[0].contains("wildcard"),
        "the first receive of rank 0 decides: {}",
        o.stdout
    );
    // The passing side matched rank 1's answer, the failing side another worker's.
    assert!(
        first[1].contains("match send 1#0 -> recv 0#0"),
        "{}",
        o.stdout
    );
    assert!(
        first
            .iter()
            .any(|l| l.contains("B (") && l.contains(" -> recv 0#0") && !l.contains("send 1#0")),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("B rank_failed"), "{}", o.stdout);
    // Both sides name the source lines of the calls involved (the fixture is built with
    // -g) where the recording knows them: rank 0's wildcard receive on both, and rank 1's
    // matched send on the passing side (a sender is only known when it was blocked in its
    // send when the slice began).
    // Whether a sender was already blocked in its send when the slice began is timing,
    // so a sender's line is checked only where the recording knows it.
    for side in ["A", "B"] {
        let line = o
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{side} source: ")))
            .unwrap_or_else(|| panic!("{side} has no source line: {}", o.stdout));
        assert!(
            line.contains(&format!(
                "{side} source: rank 0 at heisenbug.c:34 (in main)"
            )),
            "{side}: {line}"
        );
        for sender in 1..4 {
            if line.contains(&format!("rank {sender} at ")) {
                assert!(
                    line.contains(&format!("rank {sender} at heisenbug.c:48 (in main)")),
                    "{side}: {line}"
                );
            }
        }
    }

    // --all lists more than the first, the first still first; B against A mirrors it.
    let all = diff(&pass, &fail, &["--all"]);
    assert_eq!(all.code, 1);
    assert!(
        all.stdout.matches("difference: rank").count() > 1,
        "{}",
        all.stdout
    );
    assert!(all.stdout.contains("first difference: rank 0, 0#0"));
    let back = diff(&fail, &pass, &[]);
    assert_eq!(back.code, 1);
    assert!(
        back.stdout.contains("first difference: rank 0, 0#0"),
        "{}",
        back.stdout
    );
}

#[test]
fn a_recording_has_no_difference_with_itself_or_its_twin() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("heisenbug", dir.path());
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    record_heisenbug(&a, &prog, true, 5);
    let o = diff(&a, &a, &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.starts_with("no difference"), "{}", o.stdout);
    // Another run of a program without wildcards (its matches cannot differ; the
    // heisenbug's passing runs may still take ranks 2 and 3 in either order): other
    // slices and timing, the same calls, matches and collectives.
    let bsp = build_c("barrier_every", dir.path());
    let args = ["interval_ms=0.5", "iters=4"];
    assert_eq!(record_c(&a, &bsp, 4, &args, &[]).code, 0);
    assert_eq!(record_c(&b, &bsp, 4, &args, &[]).code, 0);
    let o = diff(&a, &b, &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.starts_with("no difference"), "{}", o.stdout);
    // Other arguments: noted, and a difference (more iterations: other calls).
    assert_eq!(
        record_c(&b, &bsp, 4, &["interval_ms=0.5", "iters=5"], &[]).code,
        0
    );
    let o = diff(&a, &b, &[]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.starts_with("note: the arguments differ"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("\nfirst difference: rank "),
        "{}",
        o.stdout
    );
}

#[test]
fn what_cannot_be_compared_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c("heisenbug", dir.path());
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    record_heisenbug(&a, &prog, true, 5);
    let o = record_c(&b, &prog, 2, &["gap=3000"], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = diff(&a, &b, &[]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("different numbers of ranks (4 and 2)"),
        "{}",
        o.stderr
    );
    let bad = dir.path().join("bad.db");
    std::fs::write(&bad, vec![0u8; 4096]).unwrap();
    let o = diff(&a, &bad, &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("cannot compare"), "{}", o.stderr);
    // Without a schedule log there is nothing to align.
    let quiet = dir.path().join("quiet.db");
    let (q, p) = (quiet.display().to_string(), prog.display().to_string());
    let o = strobe_cmd(
        &[
            "record",
            "-o",
            &q,
            "--schedule-log",
            "off",
            "-n",
            "4",
            "--",
            &p,
            "gap=3000",
        ],
        &[],
    );
    // (Whether this run passed does not matter here.)
    assert!(o.stderr.contains("recorded"), "{}", o.stderr);
    let o = diff(&a, &quiet, &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("schedule log"), "{}", o.stderr);
}
