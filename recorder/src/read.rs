//! Opening a recording for reading, with clear errors for files that are not recordings,
//! were written by a newer strobe, or are damaged; and `strobe stats`.

use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::migrations::CURRENT_VERSION;
use crate::RecordError;
use crate::{json, mmds_stats};

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Check the SQLite header ourselves first: SQLite's own messages for a garbage or cut-off
/// file ("file is not a database", "database disk image is malformed") do not say which.
pub fn check_header(path: &Path) -> Result<(), RecordError> {
    let io = |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let mut h = [0u8; 100];
    let mut got = 0;
    while got < h.len() {
        match f.read(&mut h[got..]).map_err(io)? {
            0 => break,
            n => got += n,
        }
    }
    if got < h.len() || &h[..16] != SQLITE_MAGIC {
        return Err(RecordError::NotARecording(format!(
            "{} is not an SQLite database",
            path.display()
        )));
    }
    let be32 = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let page_size = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65536u64,
        p => p as u64,
    };
    let pages = be32(28) as u64;
    // The in-header page count is valid when "version-valid-for" equals the change counter
    // (every SQLite since 3.7.0 keeps it so).
    if be32(92) == be32(24) && pages * page_size > len {
        return Err(RecordError::Corrupt(format!(
            "{} is truncated: {} bytes, but its header says {} pages of {} bytes",
            path.display(),
            len,
            pages,
            page_size
        )));
    }
    Ok(())
}

/// Open a finished (or cut-short) recording read-only, after checking that it is one.
pub fn open_recording(path: &Path) -> Result<Connection, RecordError> {
    check_header(path)?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        return Err(RecordError::NotARecording(format!(
            "{} is an SQLite database without a strobe schema",
            path.display()
        )));
    }
    if version > CURRENT_VERSION {
        return Err(RecordError::TooNew {
            found: version,
            supported: CURRENT_VERSION,
        });
    }
    let has_job: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'job'",
        [],
        |r| r.get(0),
    )?;
    if has_job == 0 {
        return Err(RecordError::NotARecording(format!(
            "{} has no job table",
            path.display()
        )));
    }
    // Reads every page once: cheap next to what `stats` reads anyway, and it turns a
    // damaged file into one clear error instead of a wrong summary.
    let check: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(RecordError::Corrupt(check));
    }
    Ok(conn)
}

/// The decision set recorded for `slice` (table `slice_decisions`, schedule log), decoded
/// and digest-checked: what a replayer shows when a replayed slice diverges. `None` when
/// the slice decided nothing or lies outside the schedule log's window.
pub fn recorded_decisions(
    conn: &Connection,
    slice: u64,
) -> Result<Option<strobe_runtime::sched::SliceDecisions>, RecordError> {
    let blob: Option<Vec<u8>> = conn
        .query_row(
            "SELECT decisions FROM slice_decisions WHERE slice = ?1",
            [slice as i64],
            |r| r.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    Ok(match blob {
        Some(b) => Some(strobe_schema::decode_slice_decisions(&b)?),
        None => None,
    })
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1e3
}

fn pct(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The `strobe stats` text of a recording (whole job).
pub fn stats(path: &Path) -> Result<String, RecordError> {
    Ok(stats_report(path, None)?.text)
}

/// What `strobe stats` shows: the text, the same as JSON, and the accuracy check's verdict.
#[derive(Clone, Debug)]
pub struct StatsReport {
    pub text: String,
    pub json: String,
    /// False when some rank's (or the job's) computation + communication differs from its
    /// run time by more than 0.01%: the monitoring lost or double-counted time.
    pub accurate: bool,
}

/// `strobe stats`: the slice summary and the MMDS table of `rank` (whole job if `None`).
pub fn stats_report(path: &Path, rank: Option<u32>) -> Result<StatsReport, RecordError> {
    let conn = open_recording(path)?;
    let mut text = slice_summary(&conn, path)?;
    let job = mmds_stats::mmds_stats(&conn, None)?;
    let per_rank = mmds_stats::mmds_per_rank(&conn)?;
    let shown = match rank {
        Some(r) => Some(
            per_rank
                .iter()
                .find(|s| s.rank == Some(r))
                .cloned()
                .ok_or(RecordError::NoMmds(r))?,
        ),
        None => job.clone(),
    };
    let mut accurate = true;
    match &shown {
        None => text.push_str("MMDS       not recorded (the metrics layer was off)\n"),
        Some(s) => {
            text.push('\n');
            text.push_str(&mmds_stats::render(s));
            accurate &= s.accurate();
        }
    }
    if rank.is_none() && !per_rank.is_empty() {
        text.push_str("accuracy per rank: computation + communication vs run time\n");
        for s in &per_rank {
            let _ = writeln!(
                text,
                "  rank {:<4} {:>12.3} ms {:>12.3} ms  error {:.4}%{}",
                s.rank.unwrap_or(0),
                s.wall_ns as f64 / 1e6,
                (s.compute_ns + s.comm_ns) as f64 / 1e6,
                s.error() * 100.0,
                if s.accurate() { "" } else { "  EXCEEDS 0.01%" }
            );
            accurate &= s.accurate();
        }
    }
    let json = json::report(&conn, path, shown.as_ref(), rank, &per_rank, accurate)?;
    Ok(StatsReport {
        text,
        json,
        accurate,
    })
}

/// The job and slice part of `strobe stats` (what the first increment printed).
fn slice_summary(conn: &Connection, path: &Path) -> Result<String, RecordError> {
    let mut o = String::new();
    let w = &mut o;
    type JobRow = (
        String,
        i64,
        i64,
        i64,
        String,
        Option<String>,
        Option<String>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        i64,
    );
    let job: JobRow = conn
        .query_row(
            "SELECT command, ranks, nodes, slice_ns, policy, outcome, message, exit_status,
                elapsed_ns, total_slices, format_version FROM job",
            [],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                    r.get(10)?,
                ))
            },
        )
        .map_err(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => {
                RecordError::NotARecording("the job table is empty".into())
            }
            e => e.into(),
        })?;
    let (command, ranks, nodes, slice_ns, policy, outcome, message, exit, elapsed, total, fmt) =
        job;
    // `command` is a JSON array: let SQLite unpack it rather than carry a JSON parser.
    let mut st = conn.prepare("SELECT value FROM json_each(?1)")?;
    let args: Vec<String> = st
        .query_map([&command], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    let recorded: i64 = conn.query_row("SELECT count(*) FROM slice", [], |r| r.get(0))?;
    writeln!(w, "recording  {} (format {fmt})", path.display()).ok();
    writeln!(w, "command    {}", args.join(" ")).ok();
    writeln!(
        w,
        "job        {ranks} ranks, {nodes} node{}, {:.0} us slices, {policy} strobe",
        if nodes == 1 { "" } else { "s" },
        us(slice_ns)
    )
    .ok();
    match outcome {
        Some(out) => writeln!(
            w,
            "outcome    {out} (exit status {}) after {:.3} s, {} slices ({recorded} recorded)",
            exit.unwrap_or(0),
            elapsed.unwrap_or(0) as f64 / 1e9,
            total.unwrap_or(0),
        ),
        None => writeln!(
            w,
            "outcome    unknown: still being recorded, or the recording was cut short ({recorded} slices recorded)"
        ),
    }
    .ok();
    if let Some(m) = message {
        for line in m.lines() {
            writeln!(w, "           {line}").ok();
        }
    }

    let mut st = conn.prepare(
        "SELECT reason, count(*) FROM slice GROUP BY reason
         ORDER BY CASE reason WHEN 'first' THEN 0 WHEN 'timer' THEN 1 ELSE 2 END",
    )?;
    let reasons: Vec<String> = st
        .query_map([], |r| {
            Ok(format!(
                "{} {}",
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?
            ))
        })?
        .collect::<Result<_, _>>()?;
    writeln!(w, "slices     {}", reasons.join(", ")).ok();

    // The first slice's GETTS measures nothing (there is no previous slice).
    let mut st = conn.prepare(
        "SELECT getts_ns FROM slice WHERE getts_ns IS NOT NULL AND reason != 'first' ORDER BY getts_ns",
    )?;
    let getts: Vec<i64> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    if getts.is_empty() {
        writeln!(w, "GETTS      (no metrics recorded)").ok();
    } else {
        writeln!(
            w,
            "GETTS      p50 {:.1} us  p99 {:.1} us  max {:.1} us  ({} slices)",
            us(pct(&getts, 0.5)),
            us(pct(&getts, 0.99)),
            us(pct(&getts, 1.0)),
            getts.len()
        )
        .ok();
    }

    let mut st = conn.prepare(
        "SELECT kind, count(*) FROM decision GROUP BY kind ORDER BY count(*) DESC, kind",
    )?;
    let kinds: Vec<String> = st
        .query_map([], |r| {
            Ok(format!(
                "{} {}",
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?
            ))
        })?
        .collect::<Result<_, _>>()?;
    let ndesc: i64 = conn.query_row("SELECT count(*) FROM descriptor", [], |r| r.get(0))?;
    if kinds.is_empty() {
        writeln!(w, "decisions  none recorded ({ndesc} descriptors)").ok();
    } else {
        writeln!(w, "decisions  {} ({ndesc} descriptors)", kinds.join(", ")).ok();
    }

    let mut st = conn.prepare(
        "SELECT slice, reason, getts_ns, n_descriptors, n_matches + n_chunks + n_collectives + n_completions
         FROM slice WHERE getts_ns IS NOT NULL AND reason != 'first'
         ORDER BY getts_ns DESC, slice LIMIT 5",
    )?;
    let top: Vec<(i64, String, i64, i64, i64)> = st
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
        .collect::<Result<_, _>>()?;
    if !top.is_empty() {
        writeln!(w, "top slices by GETTS").ok();
        writeln!(
            w,
            "  {:>8}  {:>10}  {:<6}  {:>11}  {:>9}",
            "slice", "GETTS us", "reason", "descriptors", "decisions"
        )
        .ok();
        for (slice, reason, g, nd, ndec) in top {
            writeln!(
                w,
                "  {slice:>8}  {:>10.1}  {reason:<6}  {nd:>11}  {ndec:>9}",
                us(g)
            )
            .ok();
        }
    }

    let mut st = conn.prepare(
        "SELECT call, count(*), count(DISTINCT rank) FROM blocked GROUP BY call ORDER BY count(*) DESC, call",
    )?;
    let blocked: Vec<(String, i64, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    if blocked.is_empty() {
        writeln!(w, "blocked    no rank was blocked at a slice start").ok();
    } else {
        writeln!(w, "blocked    rank-slices per call (ranks)").ok();
        for (call, n, r) in blocked {
            writeln!(w, "  {call:<24} {n:>8}  ({r})").ok();
        }
    }
    Ok(o)
}
