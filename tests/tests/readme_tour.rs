//! The README's tour runs end to end: every command of its `sh` block under "A short tour",
//! as written, against the binaries this test was built with (the tour says
//! `target/release/`; under `cargo test` that is `target/debug/`, under
//! `cargo test --release` the release binaries: the path is the only thing substituted,
//! with `/tmp/` and `~/` moved into a private directory). No timing is checked: each
//! command must end with a status the tour promises (see `expected_statuses`).
//!
//! Not run here, each covered elsewhere: the build line (the binaries exist already);
//! the interactive ones, `strobe tui` and `replay --tui` (tests/tui_tmux.rs), `--step`,
//! `--until-slice` and `--break`, which hold the replay for a person or a client
//! (tests/replay_control.rs); and `strobe bench`, minutes of measurements
//! (tests/bench_suite.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

use strobe_tests::target_dir;

/// The commands of the tour block, without comments and blank lines.
fn tour_commands(readme: &str) -> Vec<String> {
    let tour = readme
        .split("## A short tour")
        .nth(1)
        .expect("README.md has a \"## A short tour\" section");
    let block = tour
        .split("```sh")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the tour has a ```sh block");
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Why a tour line is not run here, if it is not.
fn skipped(line: &str) -> Option<&'static str> {
    if line.starts_with("cargo build") {
        Some("the build (the binaries exist)")
    } else if line.contains(" tui ") || line.ends_with("--tui") {
        Some("interactive: tui_tmux.rs")
    } else if line.contains("--step") || line.contains("--until-slice") || line.contains("--break")
    {
        Some("holds for a person or a client: replay_control.rs")
    } else if line.contains("$S bench") {
        Some("minutes of benchmarks: bench_suite.rs")
    } else {
        None
    }
}

/// The statuses the tour promises for a line: its deadlocks exit 3; `hunt` exits 1 when it
/// kept a failing run (the heisenbug fails within a few chaos runs); `explore` and `diff`
/// exit 0 or 1 by what they find; the heisenbug recorded without noise usually passes but
/// may fail (SIGABRT, 134): that is the fixture's point.
fn expected_statuses(line: &str) -> &'static [i32] {
    if line.contains("target/release/deadlock") {
        &[3]
    } else if line.starts_with("$S hunt ") {
        &[1]
    } else if line.starts_with("$S explore ") || line.starts_with("$S diff ") {
        &[0, 1]
    } else if line.contains("/tmp/heisenbug") && line.starts_with("$S record ") {
        &[0, 134]
    } else {
        &[0]
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

#[test]
fn the_readme_tour_runs_end_to_end() {
    let root = workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let commands = tour_commands(&readme);
    assert!(
        commands.len() >= 20,
        "the tour has {} commands",
        commands.len()
    );
    let dir = tempfile::tempdir().unwrap();
    let tmp = format!("{}/", dir.path().display());
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let bin = format!("{}/", target_dir().display());
    let (mut ran, mut skips) = (0, Vec::new());
    for line in &commands {
        if let Some(why) = skipped(line) {
            skips.push(format!("{line}   ({why})"));
            continue;
        }
        // `/tmp/` and `~/` first: the binaries' path may itself be under /tmp (a clean
        // clone there) and must not be moved into the private directory.
        let script = line
            .replace("/tmp/", &tmp)
            .replace("~/", &format!("{}/", home.display()))
            .replace("target/release/", &bin);
        let script = if line.starts_with("S=") {
            script
        } else {
            format!("S={bin}strobe\n{script}")
        };
        let out = Command::new("bash")
            .args(["-c", &script])
            .current_dir(&root)
            .env("HOME", &home)
            .env_remove("STROBE_SCHEDULE_LOG")
            .env_remove("STROBE_METRICS")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run bash");
        let code = out.status.code().unwrap_or(-1);
        assert!(
            expected_statuses(line).contains(&code),
            "tour line {line:?} exited {code} (run as {script:?}):\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    eprintln!(
        "ran {ran} tour commands; skipped:\n  {}",
        skips.join("\n  ")
    );
    assert!(ran >= 18, "only {ran} tour commands ran");
}

#[test]
fn the_tour_parser_finds_the_commands() {
    let readme = "# x\n## A short tour\n\n```sh\ncargo build\n# c\n\n$S run -n 4 -- a\n```\n## Next\n```sh\nno\n```\n";
    let c = tour_commands(readme);
    assert_eq!(c, vec!["cargo build", "$S run -n 4 -- a"]);
    assert!(skipped("cargo build --release --workspace").is_some());
    assert!(skipped("$S tui /tmp/ring.db").is_some());
    assert!(skipped("$S replay /tmp/ring.db --step").is_some());
    assert!(skipped("$S stats /tmp/ring.db").is_none());
}
