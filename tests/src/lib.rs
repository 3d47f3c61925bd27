//! Helpers for the end-to-end tests: locate the `strobe` binary and the fixtures in the
//! target directory, run jobs as real processes, and check that nothing is left behind.

pub mod replay;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The target directory the tests were built into (`target/debug` or `target/release`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test-binary>
    exe.parent()
        .and_then(|p| p.parent())
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

pub fn strobe() -> PathBuf {
    let p = target_dir().join("strobe");
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (scripts/test.sh does)",
        p.display()
    );
    p
}

pub fn fixture(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    assert!(
        p.exists(),
        "fixture {} is missing: build the workspace first (scripts/test.sh does)",
        p.display()
    );
    p
}

/// Result of one `strobe run`.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    pub fn assert_ok(&self, what: &str) {
        assert_eq!(
            self.code, 0,
            "{what}: exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
    }
}

/// `strobe run <args> -- <fixture> <fixture_args>`.
pub fn run_fixture(args: &[&str], name: &str, fixture_args: &[&str]) -> Run {
    run_fixture_env(args, name, fixture_args, &[])
}

pub fn run_fixture_env(
    args: &[&str],
    name: &str,
    fixture_args: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let mut cmd = Command::new(strobe());
    cmd.arg("run")
        .args(args)
        .arg("--timeout")
        .arg("120s")
        .arg("--")
        .arg(fixture(name));
    cmd.args(fixture_args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = Instant::now();
    let out: Output = cmd.output().expect("spawn strobe");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: t.elapsed(),
    }
}

/// Processes whose command line mentions `needle` (leftover ranks).
pub fn processes_matching(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let me = std::process::id().to_string();
    for e in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) || name == me {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                // Skip zombies that are already being reaped by someone else's test.
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                if !stat.contains(") Z ") {
                    found.push(format!("{name}: {cmd}"));
                }
            }
        }
    }
    found
}

/// Entries in /dev/shm that a strobe job could have created (there should never be any:
/// jobs use memfd).
/// Waits until no process's command line contains `needle`, for at most 10 s; panics
/// naming the survivors (`what` says after what).
pub fn assert_processes_gone(needle: &str, what: &str) {
    let t = std::time::Instant::now();
    while !processes_matching(needle).is_empty() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "{what}: ranks survived: {:?}",
            processes_matching(needle)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub fn dev_shm_strobe_entries() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("strobe"))
                .collect()
        })
        .unwrap_or_default()
}

pub mod c_fixtures;
/// Record `name` on `ranks` ranks into `dir/<name>.db` with `strobe record` and return the
/// file. Panics if strobe could not write it (a failing job is fine: it is recorded too).
pub fn record_fixture_into(dir: &std::path::Path, name: &str, ranks: u32) -> PathBuf {
    let db = dir.join(format!("{name}.db"));
    let out = Command::new(strobe())
        .arg("record")
        .arg("-o")
        .arg(&db)
        .arg("--force")
        .arg("-n")
        .arg(ranks.to_string())
        .args(["--timeout", "120s", "--"])
        .arg(fixture(name))
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .output()
        .expect("spawn strobe record");
    assert!(
        db.exists(),
        "strobe record {name} wrote no file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    db
}

/// `strobe <args>` with the recorder's layer switches cleared from the environment, plus
/// `env`.
pub fn strobe_cmd(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(strobe());
    cmd.args(args)
        .env_remove("STROBE_SCHEDULE_LOG")
        .env_remove("STROBE_METRICS")
        .env_remove("STROBE_HISTOGRAM_RESOLUTION");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = Instant::now();
    let o = cmd.output().expect("spawn strobe");
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        elapsed: t.elapsed(),
    }
}

/// `strobe record -o db <args> --timeout 120s -- <fixture> <fixture_args>`.
pub fn record_fixture(
    db: &std::path::Path,
    args: &[&str],
    name: &str,
    fixture_args: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let fx = fixture(name).display().to_string();
    let db = db.display().to_string();
    let mut all = vec!["record", "-o", db.as_str()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--timeout", "120s", "--", fx.as_str()]);
    all.extend_from_slice(fixture_args);
    strobe_cmd(&all, env)
}

pub mod tools;
