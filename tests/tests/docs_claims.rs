//! Issue 12, item 13: the docs said what was not so (the README called the Statistics rows
//! "sample rows written by hand", docs/cli.md had the `strobe stats` heading twice, the
//! heisenbug tour line promised to "record until the assertion fails" and recorded once).
//! These checks keep each of those from coming back.

use std::path::PathBuf;

fn doc(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_readme_does_not_call_real_statistics_hand_written() {
    let readme = doc("README.md").to_lowercase();
    assert!(!readme.contains("written by hand"));
    assert!(!readme.contains("sample rows"));
}

#[test]
fn every_heading_of_the_cli_reference_appears_once() {
    let cli = doc("docs/cli.md");
    let mut seen = std::collections::BTreeSet::new();
    let mut fenced = false;
    for h in cli.lines() {
        if h.starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !h.starts_with('#') {
            continue;
        }
        assert!(seen.insert(h.trim()), "docs/cli.md has {h:?} twice");
    }
}

#[test]
fn a_tour_line_that_records_until_a_failure_loops() {
    let readme = doc("README.md");
    let lines: Vec<&str> = readme.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with('#') && l.contains("until the assertion fails") {
            let next = lines[i + 1..]
                .iter()
                .find(|n| !n.starts_with('#'))
                .expect("a command after the comment");
            assert!(
                next.contains("for ") || next.contains("until ") || next.contains("while "),
                "the tour promises to record until the assertion fails but runs once: {next}"
            );
        }
    }
}
