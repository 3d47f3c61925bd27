//! A synthetic recording generated directly with SQL into the recorder's schema (a
//! writer, so it lives with the recorder; `strobe_tui::synthetic` re-exports it): the
//! benchmark's million-slice job, and test data for views a small fixture cannot fill
//! (per-process statistics).
//!
//! The shape is a bulk-synchronous job: every 97th slice schedules a barrier (every rank
//! posted `MPI_Barrier` in the slice before), four ranks per slice sit in a blocking call
//! in a rotating pattern, GETTS wanders around the slice length with a spike every 50,000
//! slices, and the last 25 slices are a deadlock of ranks 0 and 1 on `MPI_Recv`.

use std::path::Path;

use rusqlite::{params, Connection};

use crate::RecordError;

/// Write a synthetic recording of `slices` slices, `ranks` ranks and `nodes` nodes into
/// `path` (which must not exist).
pub fn generate(path: &Path, slices: u64, ranks: u32, nodes: u32) -> Result<(), RecordError> {
    let mut conn = Connection::open(path)?;
    conn.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")?;
    crate::migrations::migrate(&mut conn)?;
    let tx = conn.transaction()?;
    let slice_ns = 500_000i64;
    let deadlock_from = slices.saturating_sub(25).max(1) as i64;
    let s = slices as i64;
    tx.execute(
        // Columns named: later formats add columns to `job` (ALTER TABLE ... ADD COLUMN).
        "INSERT INTO job (format_version, strobe_version, command, cwd, program, program_sha256,
            env, ranks, nodes, slice_ns, policy, deadlock_slices, chunk_budget, direct_copy_min,
            schedule_log, metrics, started_at, ended_at, elapsed_ns, outcome, message,
            exit_status, total_slices)
         VALUES (1, 'synthetic', '[\"synthetic\",\"--bsp\"]', '/', '/synthetic',
            NULL, '{}', ?1, ?2, ?3, 'adaptive', 20, 4194304, 2097152, 'on', 'on', 0, 0, ?4,
            'deadlock', 'deadlock: wait-for cycle rank 0 -> rank 1 -> rank 0 (MPI_Recv)', 3, ?5)",
        params![ranks, nodes, slice_ns, s * slice_ns, s],
    )?;
    tx.execute(
        "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?1)
         INSERT INTO rank SELECT i, NULL, NULL, NULL FROM r",
        [ranks],
    )?;
    tx.execute(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1)
         INSERT INTO slice SELECT i,
            CASE WHEN i = 1 THEN 'first' WHEN i % 3 = 0 THEN 'early' ELSE 'timer' END,
            (i - 1) * ?2,
            ?2 - 100000 + (i * 7919) % 200000 + CASE WHEN i % 50000 = 0 THEN 4000000 ELSE 0 END,
            20000, 40000, 90000, 0, i % 2, 0,
            CASE WHEN i % 97 = 0 THEN ?3 ELSE 0 END,
            0, 0, CASE WHEN i % 97 = 0 THEN 1 ELSE 0 END, CASE WHEN i % 97 = 0 THEN ?3 ELSE 0 END,
            CASE WHEN i >= ?4 THEN 2 ELSE 4 END,
            (i * 2654435761) % 4294967296
         FROM s",
        params![s, slice_ns, ranks, deadlock_from],
    )?;
    let per_node = (ranks / nodes.max(1)).max(1) as i64;
    tx.execute(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1),
                        n(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM n WHERE k + 1 < ?2)
         INSERT INTO node_metrics SELECT i, k, 480000, 20000, 40000, 90000,
            (i + k) % 3, (i + k) % 2,
            CASE WHEN i % 97 = 0 THEN ?3 ELSE 0 END, CASE WHEN i % 97 = 0 THEN 1 ELSE 0 END,
            1, 1000, 2000, 3000, 4000, 5000, 6000
         FROM s, n",
        params![s, nodes, per_node],
    )?;
    // Four ranks blocked per slice, rotating (spans of one slice); rank r's call depends
    // on r.
    tx.execute(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?2),
                        j(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM j WHERE k < 3)
         INSERT INTO blocked_span SELECT (i + k * (?1 / 4)) % ?1, i, i,
            CASE ((i + k * (?1 / 4)) % ?1) % 4 WHEN 0 THEN 'MPI_Recv' WHEN 1 THEN 'MPI_Barrier'
                 WHEN 2 THEN 'MPI_Wait' ELSE 'MPI_Allreduce' END
         FROM s, j WHERE i < ?3 AND ?1 >= 4",
        params![ranks, s, deadlock_from],
    )?;
    // The deadlock: ranks 0 and 1 each wait to receive from the other.
    tx.execute(
        "INSERT INTO blocked_span SELECT r, ?1, ?2, 'MPI_Recv' FROM (SELECT 0 AS r UNION SELECT 1)
         WHERE r < ?3",
        params![deadlock_from, s, ranks],
    )?;
    // The barrier every 97th slice: each rank's descriptor, and the collective decision.
    tx.execute(
        "WITH RECURSIVE s(i) AS (SELECT 97 UNION ALL SELECT i + 97 FROM s WHERE i + 97 <= ?2),
                        r(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM r WHERE k + 1 < ?1)
         INSERT INTO descriptor SELECT k, i / 97 - 1, i, 'MPI_Barrier', 0, 0, 0, 0, 0, 0, 1
         FROM s, r",
        params![ranks, s],
    )?;
    tx.execute(
        "WITH RECURSIVE s(i) AS (SELECT 97 UNION ALL SELECT i + 97 FROM s WHERE i + 97 <= ?1)
         INSERT INTO decision (slice, idx, kind, comm, coll_seq, coll_kind, root, members)
         SELECT i, 0, 'collective', 0, i / 97 - 1, 'MPI_Barrier', 0, '[]' FROM s",
        [s],
    )?;
    let next = |rank: i64| -> rusqlite::Result<i64> {
        tx.query_row(
            "SELECT coalesce(max(seq), -1) + 1 FROM descriptor WHERE rank = ?1",
            [rank],
            |r| r.get(0),
        )
    };
    for (rank, peer) in [(0i64, 1i64), (1, 0)] {
        if rank < ranks as i64 && peer < ranks as i64 {
            let seq = next(rank)?;
            tx.execute(
                "INSERT INTO descriptor VALUES (?1, ?2, ?3, 'MPI_Recv', ?4, 0, 0, 8, 0, 0, 1)",
                params![rank, seq, deadlock_from, peer],
            )?;
        }
    }
    // No triggers keep the chart summaries (format 18): they are built once, here.
    crate::summaries::refresh(&tx, 1, slices)?;
    tx.commit()?;
    Ok(())
}

/// Add per-process statistics tables (the recorder's MMDS layout) with plausible rows:
/// for views and tests until every recording carries them.
pub fn add_process_stats(path: &Path, ranks: u32) -> Result<(), RecordError> {
    let conn = Connection::open(path)?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS mmds_rank (rank INTEGER PRIMARY KEY, wall_ns INTEGER,
             compute_ns INTEGER, comm_ns INTEGER, calls INTEGER, finalized INTEGER);
         CREATE TABLE IF NOT EXISTS mmds_primitive (rank INTEGER, primitive TEXT, count INTEGER,
             min_ns INTEGER, max_ns INTEGER, total_ns INTEGER, bytes INTEGER,
             PRIMARY KEY (rank, primitive));
         CREATE TABLE IF NOT EXISTS mmds_histogram (rank INTEGER, primitive TEXT, metric TEXT,
             lo INTEGER, hi INTEGER, count INTEGER);",
    )?;
    // Sample rows replace whatever the recording measured, so tests see known figures.
    conn.execute_batch(
        "DELETE FROM mmds_rank; DELETE FROM mmds_primitive; DELETE FROM mmds_histogram;",
    )?;
    let prims = [
        ("MPI_Send", 120i64, 800i64, 30_000i64, 1024i64),
        ("MPI_Recv", 120, 1_200, 95_000, 1024),
        ("MPI_Barrier", 40, 2_000, 60_000, 0),
        ("MPI_Allreduce", 20, 5_000, 250_000, 8),
    ];
    for rank in 0..ranks as i64 {
        let comm: i64 = prims.iter().map(|p| p.1 * (p.2 + p.3) / 2).sum::<i64>() + rank * 1000;
        conn.execute(
            "INSERT INTO mmds_rank (rank, wall_ns, compute_ns, comm_ns, calls, finalized)
             VALUES (?1, ?2, ?3, ?4, ?5, 1)",
            params![rank, 50_000_000 + comm, 50_000_000, comm, 300],
        )?;
        for (i, (name, count, min, max, bytes)) in prims.iter().enumerate() {
            let total = count * (min + max) / 2 + rank * 100 * (i as i64 + 1);
            conn.execute(
                "INSERT INTO mmds_primitive VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![rank, name, count, min, max + rank, total, count * bytes],
            )?;
        }
        for (metric, bins) in [
            (
                "granularity",
                [(0, 1_000, 10), (1_000, 10_000, 120), (10_000, 100_000, 150)],
            ),
            (
                "overhead",
                [(0, 1_000, 90), (1_000, 10_000, 160), (10_000, 100_000, 50)],
            ),
        ] {
            for (lo, hi, n) in bins {
                conn.execute(
                    "INSERT INTO mmds_histogram VALUES (?1, '*', ?2, ?3, ?4, ?5)",
                    params![rank, metric, lo, hi, n + rank],
                )?;
            }
        }
    }
    // A finished recording's content checksum covers these tables: reseal it, as the
    // recorder would have had it measured these figures.
    if crate::checksum::stored(&conn)?.is_some() {
        crate::checksum::seal(&conn)?;
    }
    Ok(())
}
