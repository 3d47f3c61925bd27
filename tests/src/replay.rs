//! Helpers for the record/replay tests: run `strobe record` and `strobe replay` as real
//! processes and compare what they printed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::{fixture, strobe};

/// What one `strobe` invocation printed and how it ended.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `strobe <args>` with extra environment; the recorder's layer variables are cleared so
/// the caller's environment cannot change what is recorded.
pub fn strobe_cmd(args: &[&str], env: &[(&str, &str)]) -> Out {
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
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `strobe record -o db --force --tag-output <args> --timeout 120s -- <fixture> <fargs>`.
pub fn record(db: &Path, args: &[&str], name: &str, fargs: &[&str], env: &[(&str, &str)]) -> Out {
    let fx = fixture(name).display().to_string();
    let db = db.display().to_string();
    let mut all = vec!["record", "-o", db.as_str(), "--force", "--tag-output"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--timeout", "120s", "--", fx.as_str()]);
    all.extend_from_slice(fargs);
    strobe_cmd(&all, env)
}

/// `strobe replay db --tag-output --timeout 120s <args>`.
pub fn replay(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Out {
    let db = db.display().to_string();
    let mut all = vec!["replay", db.as_str(), "--tag-output", "--timeout", "120s"];
    all.extend_from_slice(args);
    strobe_cmd(&all, env)
}

/// Output lines grouped by the `[rank] ` tag, in order within each rank (lines of
/// different ranks interleave differently from run to run).
pub fn per_rank(out: &str) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in out.lines() {
        let (tag, rest) = match line.split_once("] ") {
            Some((t, r)) if t.starts_with('[') => (t.to_string(), r.to_string()),
            _ => (String::new(), line.to_string()),
        };
        m.entry(tag).or_default().push(rest);
    }
    m
}

/// The launcher's message about how a job ended, without the pid (it differs per run).
pub fn end_message(stderr: &str) -> Option<String> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("strobe: rank ") || l.starts_with("strobe: deadlock"))?;
    let mut s = line.trim_start_matches("strobe: ").to_string();
    if let (Some(a), Some(b)) = (s.find("(pid "), s.find(") ")) {
        if a < b {
            s.replace_range(a..b + 2, "");
        }
    }
    Some(s)
}

/// Each slice's recorded descriptors and decisions up to `last` (the recording's last slice
/// when `None`), as text: compares the schedule log of two recordings slice by slice,
/// whatever batches each writer made of it.
pub fn schedule_log(db: &std::path::Path, last: Option<u64>) -> Vec<String> {
    let rec = strobe_recorder::Recording::open(db).expect("a recording");
    (1..=last.unwrap_or_else(|| rec.last_slice()))
        .map(|s| {
            format!(
                "{s}: {:?} {:?}",
                rec.descriptors(s).expect("descriptors"),
                rec.decisions(s).expect("decisions")
            )
        })
        .collect()
}
