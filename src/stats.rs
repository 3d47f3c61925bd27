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
    let stats = match Recording::open(file).and_then(|r| r.stats(rank)) {
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

fn counts(v: &[KindCount]) -> String {
    v.iter()
        .map(|k| format!("{} {}", k.kind, k.count))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The whole text: the slice summary, then the MMDS table and the accuracy lines.
pub fn text(s: &Stats) -> String {
    let mut o = slice_summary(s);
    match &s.mmds {
        None => o.push_str("MMDS       not recorded (the metrics layer was off)\n"),
        Some(m) => {
            o.push('\n');
            o.push_str(&mmds_table(m));
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

/// The job and slice part (what the first increment printed).
fn slice_summary(s: &Stats) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(
        w,
        "recording  {} (format {})",
        s.recording, s.format_version
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
            "outcome    {out} (exit status {}) after {:.3} s, {} slices ({recorded} recorded)",
            s.exit_status.unwrap_or(0),
            s.elapsed_ns.unwrap_or(0) as f64 / 1e9,
            s.total_slices.unwrap_or(0),
        ),
        None => writeln!(
            w,
            "outcome    unknown: still being recorded, or the recording was cut short ({recorded} slices recorded)"
        ),
    };
    for line in s.message.iter().flat_map(|m| m.lines()) {
        let _ = writeln!(w, "           {line}");
    }
    let _ = writeln!(w, "slices     {}", counts(&s.reasons));
    let g = &s.getts;
    let _ = match g.slices {
        0 => writeln!(w, "GETTS      (no metrics recorded)"),
        n => writeln!(
            w,
            "GETTS      p50 {:.1} us  p99 {:.1} us  max {:.1} us  ({n} slices)",
            us(g.p50_ns),
            us(g.p99_ns),
            us(g.max_ns.unwrap_or(0)),
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
        "  run time {:.3} ms; computation {:.3} + communication {:.3} = {:.3} ms; error {:.4}% ({})",
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
