//! Small parsers for the command line.

use std::time::Duration;

/// Exit status for a command line strobe refuses (as clap's own usage errors).
pub const EXIT_USAGE: i32 = 2;

/// The smallest `--chunk-budget`: below a page, a large message is cut into so many chunks
/// (one or more slices each) that a job crawls for minutes (`--chunk-budget 1` ran 1.27 M
/// slices of a small p2p test without finishing). Decision: 4 KiB, the page size.
pub const MIN_CHUNK_BUDGET: u64 = 4096;

/// A refusal of the command line or environment, reported with exit [`EXIT_USAGE`].
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A [`UsageError`] as an `anyhow::Error`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// The program cannot be started (not found, a directory, not executable): exit
/// [`EXIT_CANNOT_START`], as a shell's "command not found".
#[derive(Debug)]
pub struct ProgramError(pub String);

impl std::fmt::Display for ProgramError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProgramError {}

/// Exit status when the program cannot be started (`run`, `record`): 127, as shells.
pub const EXIT_CANNOT_START: i32 = strobe_runtime::launcher::EXIT_CANNOT_START;

/// Check that `path` names a program this user can run, saying what it is otherwise.
pub fn check_program(path: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .map_err(|_| format!("program {} does not exist", path.display()))?;
    if meta.is_dir() {
        return Err(format!(
            "program {} is a directory, not a program",
            path.display()
        ));
    }
    if !meta.is_file() {
        return Err(format!("program {} is not a regular file", path.display()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!(
            "program {} is not executable (chmod +x it)",
            path.display()
        ));
    }
    Ok(())
}

/// The exit status for an error (the one table in docs/cli.md, "Exit status"): the
/// program could not be started: 127; strobe's runtime could not be set up: 70;
/// anything else refused before the job ran (the command line, its files, the
/// environment): 2.
pub fn exit_status_of(e: &anyhow::Error) -> i32 {
    use strobe_runtime::launcher::{LaunchError, EXIT_INTERNAL};
    if e.is::<ProgramError>() {
        return EXIT_CANNOT_START;
    }
    match e.downcast_ref::<LaunchError>() {
        Some(LaunchError::Spawn { .. }) => EXIT_CANNOT_START,
        Some(LaunchError::Segment(_) | LaunchError::Engine(_)) => EXIT_INTERNAL,
        _ => EXIT_USAGE,
    }
}

/// An error and its causes in one line, each cause once: libraries often put their
/// source's text in their own message too ("cannot start /tmp: Permission denied (os
/// error 13)" with the same io::Error as its source), and `{:#}` would repeat it. Repeated
/// neighbouring parts ("creating x.db: x.db: No such file") are also dropped.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(text.trim()) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(text.trim());
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in out.split(": ") {
        if !parts.last().is_some_and(|last| last.ends_with(part)) {
            parts.push(part);
        }
    }
    parts.join(": ").replace('\n', " ")
}

/// `--chunk-budget`: a byte count of at least [`MIN_CHUNK_BUDGET`].
pub fn parse_chunk_budget(s: &str) -> Result<u64, String> {
    let b = parse_bytes(s)?;
    if b < MIN_CHUNK_BUDGET {
        return Err(format!(
            "{s:?} is below the minimum chunk budget of 4KiB ({MIN_CHUNK_BUDGET} bytes)"
        ));
    }
    Ok(b)
}

/// Parse a duration such as `500us`, `500µs`, `0.25ms`, `2ms`, `1s`, `100ns`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 500us, 2ms, 1s)"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "" => return Err(format!("{s:?} needs a unit (ns, us, ms, s)")),
        u => return Err(format!("unknown unit {u:?} in {s:?} (ns, us, ms, s)")),
    };
    let secs = v * scale;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{s:?} is not a valid duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parse a byte count such as `4MiB`, `256KiB`, `1000`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count (try 4MiB)"))?;
    let mul = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        u => return Err(format!("unknown unit {u:?} in {s:?}")),
    };
    v.checked_mul(mul)
        .ok_or_else(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("500µs").unwrap(), Duration::from_micros(500));
        assert_eq!(
            parse_duration("0.25ms").unwrap(),
            Duration::from_micros(250)
        );
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("500").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn bytes() {
        assert_eq!(parse_bytes("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_bytes("12").unwrap(), 12);
        assert!(parse_bytes("4XB").is_err());
    }

    #[test]
    fn errors_print_each_cause_once_on_one_line() {
        let io = std::io::Error::from_raw_os_error(13);
        let e = anyhow::Error::new(std::io::Error::from_raw_os_error(13))
            .context(format!("cannot start /tmp: {io}"));
        assert_eq!(
            one_line(&e),
            "cannot start /tmp: Permission denied (os error 13)"
        );
        let e = anyhow::anyhow!("/x/y.db: No such file or directory (os error 2)")
            .context("creating the recording /x/y.db");
        assert_eq!(
            one_line(&e),
            "creating the recording /x/y.db: No such file or directory (os error 2)"
        );
        assert_eq!(exit_status_of(&usage("bad")), EXIT_USAGE);
        assert_eq!(
            exit_status_of(&anyhow::Error::new(ProgramError("gone".into()))),
            127
        );
    }

    #[test]
    fn chunk_budget_minimum() {
        assert_eq!(parse_chunk_budget("4KiB").unwrap(), 4096);
        let e = parse_chunk_budget("1").unwrap_err();
        assert!(e.contains("4KiB"), "{e}");
        assert!(parse_chunk_budget("0").is_err());
    }
}
