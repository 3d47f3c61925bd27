//! `strobe stats FILE [--rank R] [--json]`: the recording's figures
//! (`strobe_recorder::Recording::stats`) as text, or as JSON with `serde_json`.

use std::fmt::Write as _;
use std::path::Path;

use strobe_recorder::mmds_stats::{MmdsStats, PrimitiveRow};
use strobe_recorder::recording::{KindCount, Stats};
use strobe_recorder::{RecordError, Recording};

/// Exit status of `strobe stats` when the accuracy check fails (the summary is printed).
pub const EXIT_INACCURATE: i32 = 2;

/// Exit status of `strobe stats` when the file is not a recording it can read: damaged
/// ("damaged recording: ..."), not a recording, a FIFO or directory, too new. The same as
/// `strobe replay`'s "cannot start" and the terminal UI's, so scripts test one number
/// (`docs/reliability.md`); nothing of the file is printed.
pub const EXIT_DAMAGED: i32 = 2;

/// Prints the summary, or a one-line error and exits 2 when the file cannot be read as a
/// recording ([`EXIT_DAMAGED`]), 1 for a `--rank` it has no statistics for; exits 2 with
/// a warning when computation + communication differs from the run time by more than
/// 0.01%.
pub fn stats(file: &Path, rank: Option<u32>, json: bool) -> i32 {
    // Reading a big recording takes a while (79 s for a 1,000-rank job): a spinner with
    // the file's size on a terminal, after a second.
    let reading = crate::progress::Progress::start(crate::progress::Work {
        verb: "reading",
        file: Some(file.to_path_buf()),
        total: None,
        current: None,
    });
    let stats = Recording::open(file).and_then(|r| r.stats(rank));
    drop(reading);
    let stats = match stats {
        Ok(s) => s,
        Err(e) => {
            eprintln!("strobe: {}: {e}", file.display());
            return match e {
                RecordError::NoMmds(_) => 1,
                _ => EXIT_DAMAGED,
            };
        }
    };
    if json {
        match serde_json::to_string(&stats) {
            Ok(j) => println!("{j}"),
            Err(e) => {
                eprintln!("strobe: {}: {e}", file.display());
                return 1;
            }
        }
    } else {
        print!("{}", text(&stats));
    }
    if stats.accurate {
        return 0;
    }
    eprintln!(
        "strobe: warning: {}: computation + communication time differs from the run \
         time by more than 0.01%: the per-process statistics lost or double-counted \
         time (see the accuracy lines)",
        file.display()
    );
    EXIT_INACCURATE
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1e3
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// A duration standing alone, in the unit that fits it. The rule for every duration strobe
/// prints (docs/cli.md, "Units"): a table column has one unit, named in its header; a
/// duration on its own carries its unit, scaled to its size (ns, us, ms, s).
pub fn dur(ns: i64) -> String {
    let a = ns.unsigned_abs();
    if a < 1_000 {
        format!("{ns} ns")
    } else if a < 1_000_000 {
        format!("{:.1} us", ns as f64 / 1e3)
    } else if a < 1_000_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.2} s", ns as f64 / 1e9)
    }
}

/// The recorded outcome in words (`rank_failed` is the stored name; docs/recording.md).
fn outcome_words(o: &str) -> &str {
    match o {
        "rank_failed" => "a rank failed",
        "engine_failed" => "runtime failure",
        "stopped" => "stopped by the replay",
        other => other,
    }
}

fn counts(v: &[KindCount]) -> String {
    v.iter()
        .map(|k| format!("{} {}", k.kind, k.count))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The whole text: the slice summary, then the MMDS table and the accuracy lines.
pub fn text(s: &Stats) -> String {
    let mut o = slice_summary(s);
    match &s.checks {
        None => o.push_str("checks     not recorded (the recording predates them)\n"),
        Some(c) if c.is_empty() => o.push_str("checks     no findings\n"),
        Some(c) => {
            let _ = writeln!(o, "checks     {} finding(s)", c.len());
            for f in c {
                let _ = writeln!(o, "  {f}");
            }
        }
    }
    if let Some(e) = &s.explored {
        let _ = writeln!(o, "explored   {e}");
    }
    match &s.mmds {
        None => o.push_str("MMDS       not recorded (the metrics layer was off)\n"),
        Some(m) => {
            o.push('\n');
            o.push_str(&mmds_table(m));
            if let Some(why) = s.outcome.as_deref().filter(|o| *o != "success") {
                // A deadlocked job's MMDS counted only MPI_Init and still said "within
                // 0.01%" as if it covered the job (issue 12, item 10): say what it covers.
                let _ = writeln!(
                    o,
                    "  note: the job did not finish ({}): a call still in progress when the ranks were stopped\n        (the call a deadlocked rank waits in) is not counted; times run from MPI_Init to each rank's last\n        completed call",
                    outcome_words(why)
                );
            }
        }
    }
    if s.rank.is_none() && !s.mmds_ranks.is_empty() {
        o.push_str("accuracy per rank: computation + communication vs run time\n");
        for m in &s.mmds_ranks {
            let _ = writeln!(
                o,
                "  rank {:<4} {:>12.3} ms {:>12.3} ms  error {:.4}%{}",
                m.rank.unwrap_or(0),
                ms(m.wall_ns),
                ms(m.compute_ns + m.comm_ns),
                m.error() * 100.0,
                if m.accurate() { "" } else { "  EXCEEDS 0.01%" }
            );
        }
    }
    o
}

/// The job and slice part (what the first increment printed). With `--rank` only the job
/// lines: the slice sections are job-wide and would repeat unchanged (issue 12, item 10).
fn slice_summary(s: &Stats) -> String {
    let (mut o, message) = job_lines(s);
    if let Some(r) = s.rank {
        let _ = writeln!(
            o,
            "           (slices, GETTS, decisions and blocked ranks are job-wide: strobe stats without --rank; rank {r} below)"
        );
        return o;
    }
    for line in message.iter().flat_map(|m| m.lines()) {
        let _ = writeln!(o, "           {line}");
    }
    o.push_str(&slice_lines(s));
    o
}

/// The recording, command, job and outcome lines, and the job's message to show under it.
fn job_lines(s: &Stats) -> (String, Option<String>) {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(
        w,
        "recording  {} (format {}), content {}",
        s.recording, s.format_version, s.content_checksum
    );
    let _ = writeln!(w, "command    {}", s.command.join(" "));
    let _ = writeln!(
        w,
        "job        {} ranks, {} node{}, {:.0} us slices, {} strobe",
        s.ranks,
        s.nodes,
        if s.nodes == 1 { "" } else { "s" },
        us(s.slice_ns as i64),
        s.policy
    );
    let recorded = s.recorded_slices;
    let _ = match &s.outcome {
        Some(out) => writeln!(
            w,
            "outcome    {} (exit status {}) after {}, {} slices ({recorded} recorded)",
            outcome_words(out),
            s.exit_status.unwrap_or(0),
            dur(s.elapsed_ns.unwrap_or(0)),
            s.total_slices.unwrap_or(0),
        ),
        None => writeln!(
            w,
            "outcome    unknown: still being recorded, or the recording was cut short ({recorded} slices recorded)"
        ),
    };
    (o, s.message.clone())
}

/// Slice start reasons, GETTS, decisions, the top slices and the blocked calls.
fn slice_lines(s: &Stats) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(w, "slices     {}", counts(&s.reasons));
    let g = &s.getts;
    let _ = match g.slices {
        0 => writeln!(w, "GETTS      (no metrics recorded)"),
        n => writeln!(
            w,
            "GETTS      p50 {}  p99 {}  max {}  ({n} slices)",
            dur(g.p50_ns),
            dur(g.p99_ns),
            dur(g.max_ns.unwrap_or(0)),
        ),
    };
    let _ = match s.decisions.is_empty() {
        true => writeln!(
            w,
            "decisions  none recorded ({} descriptors)",
            s.descriptors
        ),
        false => writeln!(
            w,
            "decisions  {} ({} descriptors)",
            counts(&s.decisions),
            s.descriptors
        ),
    };
    if !s.top_slices.is_empty() {
        let _ = writeln!(w, "top slices by GETTS");
        let _ = writeln!(
            w,
            "  {:>8}  {:>10}  {:<6}  {:>11}  {:>9}",
            "slice", "GETTS us", "reason", "descriptors", "decisions"
        );
        for t in &s.top_slices {
            let _ = writeln!(
                w,
                "  {:>8}  {:>10.1}  {:<6}  {:>11}  {:>9}",
                t.slice,
                us(t.getts_ns),
                t.reason,
                t.descriptors,
                t.decisions
            );
        }
    }
    if s.blocked.is_empty() {
        let _ = writeln!(w, "blocked    no rank was blocked at a slice start");
    } else {
        let _ = writeln!(w, "blocked    rank-slices per call (ranks)");
        for b in &s.blocked {
            let _ = writeln!(w, "  {:<24} {:>8}  ({})", b.call, b.rank_slices, b.ranks);
        }
    }
    o
}

/// The papers' per-process table (times in ms), then the accuracy check.
fn mmds_table(s: &MmdsStats) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = match s.rank {
        Some(r) => writeln!(w, "MMDS of rank {r} (times in ms)"),
        None => writeln!(
            w,
            "MMDS of the whole job, {} rank{} combined (times in ms)",
            s.ranks,
            if s.ranks == 1 { "" } else { "s" }
        ),
    };
    let _ = writeln!(
        w,
        "  {:<26} {:>10} {:>10} {:>12} {:>9} {:>10}",
        "Primitive", "Min", "Max", "Total", "Count", "Average"
    );
    let line = |w: &mut String, p: &PrimitiveRow| {
        let _ = writeln!(
            w,
            "  {:<26} {:>10.3} {:>10.3} {:>12.3} {:>9} {:>10.3}",
            p.primitive,
            ms(p.min_ns),
            ms(p.max_ns),
            ms(p.total_ns),
            p.count,
            p.average_ns() / 1e6
        );
    };
    for p in s.primitives.iter().chain([&s.granularity, &s.overhead]) {
        line(w, p);
    }
    let _ = writeln!(
        w,
        "  {} {:.3} ms; computation {:.3} + communication {:.3} = {:.3} ms; error {:.4}% ({})",
        match (s.rank, s.ranks) {
            (None, n) if n > 1 => format!("run time (summed over {n} ranks)"),
            _ => "run time".to_string(),
        },
        ms(s.wall_ns),
        ms(s.compute_ns),
        ms(s.comm_ns),
        ms(s.compute_ns + s.comm_ns),
        s.error() * 100.0,
        if s.accurate() {
            "within 0.01%"
        } else {
            "EXCEEDS 0.01%"
        }
    );
    o
}
