//! `strobe stats --json`: the same figures as the text, for scripts. Written by hand (the
//! recorder has no JSON dependency; the output is numbers, strings and nulls only).

use std::path::Path;

use rusqlite::Connection;

use crate::json_str;
use crate::mmds_stats::{MmdsStats, PrimitiveRow};
use crate::RecordError;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_string(), |x| x.to_string())
}

fn opt_str(v: Option<&str>) -> String {
    v.map_or_else(|| "null".to_string(), json_str)
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".to_string()
    }
}

fn row(p: &PrimitiveRow) -> String {
    format!(
        "{{\"primitive\":{},\"min_ns\":{},\"max_ns\":{},\"total_ns\":{},\"count\":{},\"average_ns\":{},\"bytes\":{}}}",
        json_str(&p.primitive),
        p.min_ns,
        p.max_ns,
        p.total_ns,
        p.count,
        num(p.average_ns()),
        p.bytes
    )
}

fn mmds(s: &MmdsStats) -> String {
    format!(
        "{{\"rank\":{},\"ranks\":{},\"wall_ns\":{},\"compute_ns\":{},\"comm_ns\":{},\"calls\":{},\"error\":{},\"accurate\":{},\"primitives\":[{}],\"granularity\":{},\"overhead\":{}}}",
        opt(s.rank),
        s.ranks,
        s.wall_ns,
        s.compute_ns,
        s.comm_ns,
        s.calls,
        num(s.error()),
        s.accurate(),
        s.primitives.iter().map(row).collect::<Vec<_>>().join(","),
        row(&s.granularity),
        row(&s.overhead)
    )
}

/// The whole report as one JSON object (see docs/recording.md, "strobe stats --json").
pub(crate) fn report(
    conn: &Connection,
    path: &Path,
    shown: Option<&MmdsStats>,
    rank: Option<u32>,
    per_rank: &[MmdsStats],
    accurate: bool,
) -> Result<String, RecordError> {
    type Job = (
        i64,
        i64,
        i64,
        String,
        Option<String>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
    );
    let (fmt, ranks, nodes, policy, outcome, exit, elapsed, total): Job = conn.query_row(
        "SELECT format_version, ranks, nodes, policy, outcome, exit_status, elapsed_ns,
            total_slices FROM job",
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
            ))
        },
    )?;
    let (recorded, getts_n, getts_max, getts_sum): (i64, i64, Option<i64>, Option<i64>) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM slice), count(getts_ns), max(getts_ns), sum(getts_ns)
             FROM slice WHERE getts_ns IS NOT NULL AND reason != 'first'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
    let per_rank_json = match rank {
        Some(_) => shown.map(mmds).into_iter().collect::<Vec<_>>(),
        None => per_rank.iter().map(mmds).collect(),
    };
    Ok(format!(
        "{{\"recording\":{},\"format_version\":{},\"ranks\":{},\"nodes\":{},\"policy\":{},\"outcome\":{},\"exit_status\":{},\"elapsed_ns\":{},\"total_slices\":{},\"recorded_slices\":{},\"getts\":{{\"slices\":{},\"max_ns\":{},\"mean_ns\":{}}},\"mmds\":{},\"mmds_ranks\":[{}],\"accurate\":{}}}\n",
        json_str(&path.display().to_string()),
        fmt,
        ranks,
        nodes,
        json_str(&policy),
        opt_str(outcome.as_deref()),
        opt(exit),
        opt(elapsed),
        opt(total),
        recorded,
        getts_n,
        opt(getts_max),
        match getts_sum {
            Some(s) if getts_n > 0 => num(s as f64 / getts_n as f64),
            _ => "null".into(),
        },
        shown.map_or_else(|| "null".to_string(), mmds),
        per_rank_json.join(","),
        accurate
    ))
}
