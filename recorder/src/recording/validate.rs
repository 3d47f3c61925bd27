//! A recording is data, never a command (issue 11): every value read from a file is checked
//! against what strobe itself could have written (the limits the command line enforces,
//! the names the recorder uses) before a reader prints it or a replay acts on it. A value
//! outside them is damage, reported as [`RecordError::Corrupt`] ("damaged recording: ..."),
//! which `stats`, `replay` and the terminal UI turn into exit status 2 — never an
//! impossible figure on the screen, never a divergence.
//!
//! The limits are documented in `docs/reliability.md` ("Damage is data"). Where the
//! command line has no upper bound the limit here is the largest value a real job can
//! reach (e.g. the kernel's PID limit for ranks), not a policy: a recording a strobe made
//! must always open.

use rusqlite::Connection;
use strobe_runtime::engine::StrobePolicy;

use super::{Job, SliceRow};
use crate::RecordError;

/// No job can have more ranks than the kernel can have processes (`PID_MAX_LIMIT` on
/// 64-bit Linux, 2^22). The command line's own limit (`--max-ranks`, `pid_max`) is lower
/// and depends on the machine, so it is not what a file is judged against.
pub const MAX_RANKS: u32 = 1 << 22;
/// Longest slice a recording may claim (`--slice` accepts any duration; no job uses an
/// hour-long slice, and a larger value is a tampered or flipped field).
pub const MAX_SLICE_NS: u64 = 3_600_000_000_000;
/// Smallest chunk budget (`--chunk-budget` must be positive).
pub const MIN_CHUNK_BUDGET: u64 = 1;
/// Most slices a recording may claim: 2^32 slices of 1 us are more than an hour, and a
/// replay keeps 8 bytes per slice, so a bigger claim would be a memory bomb, not a job.
pub const MAX_SLICES: u64 = 1 << 32;
/// What the recorder writes in `job.outcome` (`crate::outcome_name`). A new outcome
/// must be added here, or files holding it read as damaged.
pub const OUTCOMES: &[&str] = &[
    "success",
    "rank_failed",
    "deadlock",
    // A livelock (runtime/src/engine/deadlock.rs, `LivelockWatch`).
    "livelock",
    "interrupted",
    "timeout",
    "engine_failed",
    "stopped",
    // `Recorder::finish_not_started`: the job could not be started at all.
    "not_started",
];
/// `slice.reason` (`strobe_core::slice::StartReason::name`).
pub const REASONS: &[&str] = &["first", "timer", "early", "logical"];
/// Variables the launcher sets for each rank itself: the launcher never has them, so the
/// recorder never records them, and one in a file would override strobe's own on replay.
pub const INTERNAL_ENV: &[&str] = &[
    "STROBE_JOB_FD",
    "STROBE_JOB_LEN",
    "STROBE_RANK",
    "STROBE_SIZE",
    "STROBE_REPLAY_OUTCOMES",
];

fn damaged(what: String) -> RecordError {
    RecordError::Corrupt(what)
}

/// Check the job row (called by every read of it: open and refresh).
pub(crate) fn job(j: &Job) -> Result<(), RecordError> {
    job_numbers(j)?;
    job_names(j)
}

/// The job's sizes, times and counts.
fn job_numbers(j: &Job) -> Result<(), RecordError> {
    if j.format_version < 1 {
        return Err(damaged(format!(
            "job.format_version is {}",
            j.format_version
        )));
    }
    if !(1..=MAX_RANKS).contains(&j.ranks) {
        return Err(damaged(format!(
            "job.ranks is {} (1 to {MAX_RANKS})",
            j.ranks
        )));
    }
    if !(1..=j.ranks).contains(&j.nodes) {
        return Err(damaged(format!(
            "job.nodes is {} (1 to the {} ranks)",
            j.nodes, j.ranks
        )));
    }
    if !(1..=MAX_SLICE_NS).contains(&j.slice_ns) {
        return Err(damaged(format!(
            "job.slice_ns is {} (1 ns to 1 hour)",
            j.slice_ns
        )));
    }
    // Stored as a signed integer: a negative one reads back above i64::MAX.
    if j.chunk_budget < MIN_CHUNK_BUDGET || j.chunk_budget > i64::MAX as u64 {
        return Err(damaged(format!(
            "job.chunk_budget is {} (at least {MIN_CHUNK_BUDGET})",
            j.chunk_budget as i64
        )));
    }
    for (name, v) in [("elapsed_ns", j.elapsed_ns), ("ended_at", j.ended_at)] {
        if v.is_some_and(|v| v < 0) {
            return Err(damaged(format!("job.{name} is negative")));
        }
    }
    if j.started_at < 0 {
        return Err(damaged("job.started_at is negative".into()));
    }
    if let Some(t) = j.total_slices.filter(|&t| t > MAX_SLICES) {
        return Err(damaged(format!(
            "job.total_slices is {t} (at most {MAX_SLICES})"
        )));
    }
    if let Some(p) = &j.placement {
        if p.len() != j.ranks as usize {
            return Err(damaged(format!(
                "job.placement places {} ranks (the job has {})",
                p.len(),
                j.ranks
            )));
        }
        if let Some((r, n)) = p.iter().enumerate().find(|&(_, &n)| n >= j.nodes) {
            return Err(damaged(format!(
                "job.placement puts rank {r} on node {n} (the job has {} nodes)",
                j.nodes
            )));
        }
    }
    if !["shm", "tcp", "verbs"].contains(&j.transport.as_str()) {
        return Err(damaged(format!(
            "job.transport is {:?} (shm, tcp or verbs)",
            j.transport
        )));
    }
    if j.scheduler_version < 1 {
        return Err(damaged("job.scheduler_version is 0".into()));
    }
    for f in &j.failed_ranks {
        if f.rank >= j.ranks {
            return Err(damaged(format!(
                "rank table has rank {} (the job has {} ranks)",
                f.rank, j.ranks
            )));
        }
    }
    Ok(())
}

/// The job's names: policy, outcome, message, command, environment.
fn job_names(j: &Job) -> Result<(), RecordError> {
    if let Err(e) = j.policy.parse::<StrobePolicy>() {
        return Err(damaged(format!("job.policy: {e}")));
    }
    if let Some(o) = &j.outcome {
        if !OUTCOMES.contains(&o.as_str()) {
            return Err(damaged(format!("job.outcome {o:?} is not an outcome")));
        }
    }
    // What `JobReport::message` writes: nothing for a success, the failed rank first for a
    // failure. (Other outcomes' messages are free text the replay compares as recorded.)
    match (j.outcome.as_deref(), j.message.as_deref()) {
        (Some("success"), Some(_)) => {
            return Err(damaged("job.message is set for a success".into()))
        }
        (Some("rank_failed"), m) if !m.is_some_and(|m| m.starts_with("rank ")) => {
            return Err(damaged("job.message does not name the failed rank".into()))
        }
        _ => {}
    }
    if j.command.is_empty() || j.command[0].is_empty() {
        return Err(damaged("job.command names no program".into()));
    }
    if let Some((k, _)) = j
        .env
        .iter()
        .find(|(k, _)| INTERNAL_ENV.contains(&k.as_str()))
    {
        return Err(damaged(format!(
            "job.env holds {k}, which strobe sets itself and never records"
        )));
    }
    Ok(())
}

/// Check the job row against the rest of the file (the recorder writes them together, so
/// a difference is damage that would otherwise make a replay spawn ranks the job never had,
/// or diverge where the recorded job "went on").
pub(crate) fn job_in_file(conn: &Connection, j: &Job) -> Result<(), RecordError> {
    // `Recorder::finish_with` writes the outcome, the message, the end time and the
    // `rank` rows in one transaction: an end without an outcome is a deleted outcome. The
    // one exception is a recording cut by a write error (`mark_cut`: a full disk), which
    // keeps the outcome NULL and says `cut: ... at slice S` with its end time.
    let cut_by_write_error = j.message.as_deref().is_some_and(|m| m.starts_with("cut: "));
    if j.outcome.is_none() && !cut_by_write_error && (j.ended_at.is_some() || j.message.is_some()) {
        return Err(damaged(
            "job.outcome is missing although the job ended".into(),
        ));
    }
    // Outcomes that need every rank started: a `rank` row for each (a job interrupted
    // while spawning, or one that never started, may have fewer).
    let every_rank = matches!(
        j.outcome.as_deref(),
        Some("success" | "rank_failed" | "deadlock" | "timeout")
    );
    if every_rank {
        let rows: i64 = conn.query_row("SELECT count(*) FROM rank", [], |r| r.get(0))?;
        if rows != j.ranks as i64 {
            return Err(damaged(format!(
                "job.ranks is {}, but the rank table has {rows} ranks",
                j.ranks
            )));
        }
    }
    // A deadlock is declared after `deadlock_slices` idle slices: a job that deadlocked
    // ran at least that many.
    if j.outcome.as_deref() == Some("deadlock")
        && j.total_slices
            .is_some_and(|t| t < u64::from(j.deadlock_slices))
    {
        return Err(damaged(format!(
            "job.deadlock_slices is {}, but the deadlocked job ran {} slices",
            j.deadlock_slices,
            j.total_slices.unwrap_or(0)
        )));
    }
    Ok(())
}

/// Check one `slice` row as a reader gets it.
pub(crate) fn slice(r: &SliceRow) -> Result<(), RecordError> {
    if r.slice == 0 || r.slice > MAX_SLICES {
        return Err(damaged(format!("slice number {}", r.slice)));
    }
    if !REASONS.contains(&r.reason.as_str()) {
        return Err(damaged(format!(
            "slice {} has reason {:?}",
            r.slice, r.reason
        )));
    }
    let counts = [
        r.n_descriptors,
        r.n_matches,
        r.n_chunks,
        r.n_collectives,
        r.n_completions,
        r.n_blocked,
    ];
    let times = [r.getts_ns, r.gtdem_ns, r.gtmsm_ns, r.gtts_ns];
    if r.start_ns < 0 || counts.iter().any(|&c| c < 0) || times.iter().flatten().any(|&t| t < 0) {
        return Err(damaged(format!(
            "slice {} has a negative count or time",
            r.slice
        )));
    }
    Ok(())
}

/// The conditions of [`slice`] as SQL, with each column's type: one pass over the table
/// (what `stats` and a full open check, without decoding every row).
const BAD_SLICE_SQL: &str = "SELECT slice FROM slice WHERE
    typeof(slice) != 'integer' OR slice < 1 OR slice > 4294967296
    OR typeof(reason) != 'text' OR reason NOT IN ('first', 'timer', 'early', 'logical')
    OR typeof(start_ns) != 'integer' OR start_ns < 0
    OR typeof(digest) != 'integer'
    OR typeof(n_descriptors) != 'integer' OR n_descriptors < 0
    OR typeof(n_matches) != 'integer' OR n_matches < 0
    OR typeof(n_chunks) != 'integer' OR n_chunks < 0
    OR typeof(n_collectives) != 'integer' OR n_collectives < 0
    OR typeof(n_completions) != 'integer' OR n_completions < 0
    OR typeof(n_blocked) != 'integer' OR n_blocked < 0
    OR typeof(getts_ns) NOT IN ('integer', 'null') OR getts_ns < 0
    OR typeof(gtdem_ns) NOT IN ('integer', 'null') OR gtdem_ns < 0
    OR typeof(gtmsm_ns) NOT IN ('integer', 'null') OR gtmsm_ns < 0
    OR typeof(gtts_ns) NOT IN ('integer', 'null') OR gtts_ns < 0
    LIMIT 1";

/// Decision kinds the recorder writes in the `decision` table (`stats` counts them by
/// name) and the checks on its other readable tables.
const BAD_OTHER_SQL: &[(&str, &str)] = &[
    // The correctness checks' findings: the names the checker writes
    // (`strobe_runtime::checks::CheckKind::name`), ranks of the job, text fields.
    (
        "the check_finding table",
        "SELECT id FROM check_finding WHERE typeof(slice) != 'integer' OR slice < 0
         OR typeof(rank) != 'integer' OR rank < 0 OR rank >= (SELECT ranks FROM job)
         OR kind NOT IN ('type-mismatch', 'leaked-request', 'buffer-reuse', 'unsafe-send-send')
         OR typeof(call) != 'text' OR typeof(detail) != 'text'
         OR (call_site IS NOT NULL AND typeof(call_site) != 'text') LIMIT 1",
    ),
    (
        "the decision table",
        "SELECT slice FROM decision WHERE typeof(kind) != 'text' OR typeof(slice) != 'integer'
         OR slice < 1 LIMIT 1",
    ),
    (
        "the descriptor table",
        "SELECT slice FROM descriptor WHERE typeof(kind) != 'text' OR rank < 0
         OR typeof(rank) != 'integer' OR typeof(slice) != 'integer' OR slice < 1 LIMIT 1",
    ),
    (
        "the blocked table",
        "SELECT slice FROM blocked WHERE typeof(call) != 'text' OR rank < 0
         OR typeof(rank) != 'integer' OR slice < 1 LIMIT 1",
    ),
    // Format 6: spans must be well-formed and never overlap for one rank (the old table's
    // primary key (slice, rank) made a rank blocked twice in one slice impossible). An
    // open span (`last_slice` NULL, `migrations::OPEN_SPANS_VERSION`) is its rank's last.
    (
        "the blocked_span table",
        "SELECT rank FROM blocked_span WHERE typeof(call) != 'text' OR rank < 0
         OR typeof(rank) != 'integer' OR typeof(first_slice) != 'integer'
         OR typeof(last_slice) NOT IN ('integer', 'null') OR first_slice < 1
         OR last_slice < first_slice
         UNION ALL
         SELECT rank FROM (SELECT rank, first_slice,
                lag(last_slice) OVER w AS prev, lag(first_slice) OVER w AS prev_first
                FROM blocked_span WINDOW w AS (PARTITION BY rank ORDER BY first_slice))
         WHERE first_slice <= prev OR (prev IS NULL AND prev_first IS NOT NULL)
         LIMIT 1",
    ),
    // Payload capture (`--capture-payloads`): what a lone rank is fed. Kinds are
    // `DescKind` codes, errors `RtError` codes; a receive's bytes fit its buffer.
    (
        "the payload table",
        "SELECT rank FROM payload WHERE typeof(rank) != 'integer' OR rank < 0
         OR rank >= (SELECT ranks FROM job) OR typeof(seq) != 'integer' OR seq < 0
         OR typeof(slice) != 'integer' OR slice < 1
         OR kind NOT IN (1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                         21, 22, 23, 24, 25, 30, 31, 32, 40)
         OR typeof(bytes) != 'integer' OR bytes < 0
         OR typeof(status_bytes) != 'integer' OR status_bytes < 0
         OR typeof(error) != 'integer' OR error < 0 OR error > 9
         OR typeof(flags) != 'integer' OR flags < 0
         OR (send_rank IS NOT NULL AND (typeof(send_rank) != 'integer' OR send_rank < 0
             OR send_rank >= (SELECT ranks FROM job) OR typeof(send_seq) != 'integer'
             OR send_seq < 0))
         OR typeof(data) != 'blob' OR (kind = 4 AND length(data) > bytes) LIMIT 1",
    ),
    // The per-process statistics `stats` prints (formats with the metrics tables). A
    // rank's wall, compute and communication times are not bounded here: they must add
    // up, which `stats`' accuracy check verifies and reports (exit 2 with a warning).
    (
        "the mmds_rank table",
        "SELECT rank FROM mmds_rank WHERE typeof(rank) != 'integer' OR rank < 0
         OR rank >= (SELECT ranks FROM job)
         OR typeof(wall_ns) != 'integer' OR wall_ns < 0
         OR typeof(compute_ns) != 'integer' OR typeof(comm_ns) != 'integer'
         OR typeof(calls) != 'integer' OR calls < 0 LIMIT 1",
    ),
    (
        "the mmds_primitive table",
        "SELECT rank FROM mmds_primitive WHERE typeof(rank) != 'integer' OR rank < 0
         OR rank >= (SELECT ranks FROM job) OR typeof(primitive) != 'text'
         OR typeof(count) != 'integer' OR count < 0
         OR typeof(min_ns) != 'integer' OR min_ns < 0
         OR typeof(max_ns) != 'integer' OR max_ns < 0
         OR typeof(total_ns) != 'integer' OR total_ns < 0
         OR typeof(bytes) != 'integer' OR bytes < 0 LIMIT 1",
    ),
    // Readers add these up (over ranks, over primitives, compute + comm - wall) in i64:
    // the sums must fit with room to spare (4e18 ns is 127 years), or a tampered
    // i64::MIN would overflow them. `total()` sums in floating point, so the check itself
    // cannot overflow.
    (
        "the mmds_rank table",
        "SELECT 1 WHERE (SELECT total(abs(CAST(wall_ns AS REAL)))
            + total(abs(CAST(compute_ns AS REAL))) + total(abs(CAST(comm_ns AS REAL)))
            + total(abs(CAST(calls AS REAL))) FROM mmds_rank) > 4e18",
    ),
    (
        "the mmds_primitive table",
        "SELECT 1 WHERE (SELECT max(total(CAST(count AS REAL)), total(CAST(max_ns AS REAL)),
            total(CAST(total_ns AS REAL)), total(CAST(bytes AS REAL))) FROM mmds_primitive)
            > 4e18",
    ),
    // Call sites (`migrations::CALL_SITES_VERSION`): what the TUI and the reports print
    // as `file:line (in function)`. Bounded lengths (a path, a demangled name), and every
    // blocked_site row names an existing site. (A row whose span is gone is harmless:
    // readers join through the span, and `DELETE FROM blocked` on an older strobe's file
    // leaves such rows.)
    (
        "the call_site table",
        "SELECT id FROM call_site WHERE typeof(id) != 'integer' OR id < 1
         OR typeof(object) != 'text' OR length(object) > 4096
         OR typeof(offset) != 'integer' OR offset < 0
         OR typeof(function) NOT IN ('text', 'null') OR length(function) > 65536
         OR typeof(file) NOT IN ('text', 'null') OR length(file) > 4096
         OR typeof(line) NOT IN ('integer', 'null') OR line < 0 OR line > 4294967295
         LIMIT 1",
    ),
    (
        "the blocked_site table",
        "SELECT rank FROM blocked_site s WHERE typeof(rank) != 'integer' OR rank < 0
         OR typeof(first_slice) != 'integer' OR first_slice < 1
         OR typeof(site) != 'integer'
         OR NOT EXISTS (SELECT 1 FROM call_site c WHERE c.id = s.site)
         LIMIT 1",
    ),
    // What explore forced (`migrations::EXPLORED_VERSION`): one row, a kind explore
    // writes, a rank of the job, a slice of the recording, one line of text.
    (
        "the explored table",
        "SELECT id FROM explored WHERE id != 1
         OR kind NOT IN ('wildcard', 'test')
         OR typeof(rank) != 'integer' OR rank < 0 OR rank >= (SELECT ranks FROM job)
         OR (slice IS NOT NULL AND (typeof(slice) != 'integer' OR slice < 1
             OR slice > (SELECT coalesce(max(slice), 0) FROM slice)))
         OR typeof(runs) != 'integer' OR runs < 1
         OR typeof(detail) != 'text' OR length(detail) > 4096 LIMIT 1",
    ),
    // The compact schedule log (`migrations::COMPACT_SCHEDULE_VERSION`). The blobs'
    // contents are checked as they are decoded (a damaged one is "damaged recording").
    (
        "the slice_schedule table",
        "SELECT slice FROM slice_schedule WHERE typeof(slice) != 'integer' OR slice < 1
         OR typeof(descriptors) NOT IN ('blob', 'null')
         OR typeof(decisions) NOT IN ('blob', 'null') LIMIT 1",
    ),
    // Schedule batches (`migrations::SCHEDULE_BATCHES_VERSION`): slices in order, no two
    // batches overlapping (the readers merge them in slice order); the entries are checked
    // against these columns as a batch is decoded.
    (
        "the schedule_batch table",
        "SELECT first_slice FROM (
             SELECT first_slice, last_slice, entries, data,
                    lag(last_slice) OVER (ORDER BY first_slice) AS previous_last
             FROM schedule_batch)
         WHERE typeof(first_slice) != 'integer' OR first_slice < 1
         OR typeof(last_slice) != 'integer' OR last_slice < first_slice
         OR typeof(entries) != 'integer' OR entries < 1
         OR entries > last_slice - first_slice + 1
         OR typeof(data) != 'blob' OR previous_last >= first_slice LIMIT 1",
    ),
    (
        "the message table",
        "SELECT recv_rank FROM message WHERE typeof(recv_rank) != 'integer' OR recv_rank < 0
         OR recv_rank >= (SELECT ranks FROM job)
         OR typeof(send_rank) != 'integer' OR send_rank < 0
         OR send_rank >= (SELECT ranks FROM job)
         OR typeof(matched) != 'integer' OR matched < 1 OR typeof(idx) != 'integer' OR idx < 0
         OR typeof(recv_seq) != 'integer' OR recv_seq < 0
         OR typeof(send_seq) != 'integer' OR send_seq < 0
         OR typeof(bytes) != 'integer' OR bytes < 0 OR typeof(flags) != 'integer'
         OR typeof(recv_kind) NOT IN ('integer', 'null')
         OR typeof(recv_peer) NOT IN ('integer', 'null')
         OR typeof(recv_tag) NOT IN ('integer', 'null')
         OR typeof(recv_bytes) NOT IN ('integer', 'null')
         OR typeof(recv_age) NOT IN ('integer', 'null')
         OR typeof(send_kind) NOT IN ('integer', 'null')
         OR typeof(send_tag) NOT IN ('integer', 'null')
         OR typeof(send_age) NOT IN ('integer', 'null')
         OR typeof(last_chunk) NOT IN ('integer', 'null')
         OR typeof(send_done) NOT IN ('integer', 'null')
         OR typeof(recv_done) NOT IN ('integer', 'null') LIMIT 1",
    ),
    (
        "the desc_kind table",
        "SELECT code FROM desc_kind WHERE typeof(code) != 'integer' OR typeof(name) != 'text'
         OR length(name) > 64 LIMIT 1",
    ),
    (
        "the mmds_histogram table",
        "SELECT rank FROM mmds_histogram WHERE typeof(count) != 'integer' OR count < 0
         OR typeof(rank) != 'integer' OR rank < 0 LIMIT 1",
    ),
];

/// Check every row of the `slice` table and the schedule-log tables in SQL.
pub(crate) fn tables(conn: &Connection) -> Result<(), RecordError> {
    use rusqlite::OptionalExtension;
    let bad: Option<rusqlite::types::Value> =
        conn.query_row(BAD_SLICE_SQL, [], |r| r.get(0)).optional()?;
    if let Some(v) = bad {
        return Err(damaged(format!(
            "the slice table has an impossible row (slice {v:?})"
        )));
    }
    for (what, sql) in BAD_OTHER_SQL {
        // Each table as far as the file's format has it (format 1 has no MMDS tables).
        let table = what.trim_start_matches("the ").trim_end_matches(" table");
        let exists: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get(0),
        )?;
        if exists == 0 {
            continue;
        }
        let bad: Option<rusqlite::types::Value> =
            conn.query_row(sql, [], |r| r.get(0)).optional()?;
        if bad.is_some() {
            return Err(damaged(format!("{what} has an impossible row")));
        }
    }
    Ok(())
}
