//! The per-process monitoring (MMDS) end to end: real jobs recorded, the `mmds_*` tables
//! checked against what the fixture programs call.

use rusqlite::Connection;
use strobe_tests::record_fixture;

fn count(c: &Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn prim_count(c: &Connection, rank: i64, prim: &str) -> i64 {
    c.query_row(
        "SELECT coalesce(sum(count), 0) FROM mmds_primitive WHERE rank = ?1 AND primitive = ?2",
        rusqlite::params![rank, prim],
        |r| r.get(0),
    )
    .unwrap()
}

/// Invariants every MMDS recording satisfies, whatever the program.
fn assert_consistent(c: &Connection) {
    // The papers' accuracy check: computation + communication = run time, per rank.
    let bad = count(
        c,
        "SELECT count(*) FROM mmds_rank
         WHERE abs(compute_ns + comm_ns - wall_ns) > wall_ns / 10000 OR wall_ns <= 0",
    );
    assert_eq!(bad, 0, "compute + comm differs from wall time");
    // Every call is counted once, under one primitive.
    assert_eq!(
        count(
            c,
            "SELECT count(*) FROM mmds_rank r
             WHERE calls != (SELECT sum(count) FROM mmds_primitive p WHERE p.rank = r.rank)"
        ),
        0
    );
    // min <= total/count <= max, and the time inside calls is the sum of the primitives'.
    assert_eq!(
        count(
            c,
            "SELECT count(*) FROM mmds_primitive
             WHERE min_ns > max_ns OR min_ns * count > total_ns OR max_ns * count < total_ns"
        ),
        0
    );
    assert_eq!(
        count(
            c,
            "SELECT count(*) FROM mmds_rank r
             WHERE comm_ns != (SELECT sum(total_ns) FROM mmds_primitive p WHERE p.rank = r.rank)"
        ),
        0
    );
    // Each latency and size histogram holds every call of its primitive.
    for metric in ["latency", "size"] {
        assert_eq!(
            count(
                c,
                &format!(
                    "SELECT count(*) FROM mmds_primitive p
                     WHERE count != (SELECT sum(count) FROM mmds_histogram h WHERE h.rank = p.rank
                        AND h.primitive = p.primitive AND h.metric = '{metric}')"
                )
            ),
            0,
            "{metric}"
        );
    }
    // Overhead: one sample per call; granularity: one per call but MPI_Init (nothing
    // computes before it), plus one for the call a rank died in (entered, never left).
    assert_eq!(
        count(
            c,
            "SELECT count(*) FROM mmds_rank r
             WHERE calls != (SELECT sum(count) FROM mmds_histogram h
                 WHERE h.rank = r.rank AND h.primitive = '*' AND h.metric = 'overhead')
                OR (SELECT coalesce(sum(count), 0) FROM mmds_histogram h
                 WHERE h.rank = r.rank AND h.primitive = '*' AND h.metric = 'granularity')
                 - (calls - 1) NOT IN (0, 1)"
        ),
        0
    );
    // A rank that finalized has no open call.
    assert_eq!(
        count(
            c,
            "SELECT count(*) FROM mmds_rank r
             WHERE EXISTS (SELECT 1 FROM mmds_primitive p WHERE p.rank = r.rank
                           AND p.primitive = 'MPI_Finalize')
               AND calls - 1 != (SELECT sum(count) FROM mmds_histogram h
                 WHERE h.rank = r.rank AND h.primitive = '*' AND h.metric = 'granularity')"
        ),
        0
    );
    // Every sample lies inside its bucket bounds (checked through the latency extremes).
    assert_eq!(
        count(
            c,
            "SELECT count(*) FROM mmds_primitive p WHERE
               min_ns < (SELECT min(lo) FROM mmds_histogram h WHERE h.rank = p.rank
                         AND h.primitive = p.primitive AND h.metric = 'latency')
            OR max_ns >= (SELECT max(hi) FROM mmds_histogram h WHERE h.rank = p.rank
                         AND h.primitive = p.primitive AND h.metric = 'latency')"
        ),
        0
    );
}

#[test]
fn token_ring_counts_match_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.db");
    let r = record_fixture(&db, &["-n", "4"], "token_ring", &[], &[]);
    r.assert_ok("record token_ring");
    let mut c = Connection::open(&db).unwrap();
    // The descriptor rows, expanded from the compact schedule log.
    strobe_recorder::expand::expand_schedule(&mut c).unwrap();
    assert_eq!(count(&c, "SELECT count(*) FROM mmds_rank"), 4);
    assert_eq!(count(&c, "SELECT histogram_resolution FROM job"), 4);
    assert_consistent(&c);
    for rank in 0..4 {
        // 50 rounds of one send and one receive, a barrier every 10 rounds.
        assert_eq!(prim_count(&c, rank, "MPI_Send"), 50, "rank {rank}");
        assert_eq!(prim_count(&c, rank, "MPI_Recv"), 50, "rank {rank}");
        assert_eq!(prim_count(&c, rank, "MPI_Barrier"), 5, "rank {rank}");
        assert_eq!(prim_count(&c, rank, "MPI_Init"), 1, "rank {rank}");
        assert_eq!(prim_count(&c, rank, "MPI_Finalize"), 1, "rank {rank}");
        // Each rank reads the clock once to seed its noise generator.
        assert_eq!(prim_count(&c, rank, "MPI_Wtime"), 1, "rank {rank}");
        // The calls that reached the runtime as descriptors agree with the schedule log.
        let posted: i64 = c
            .query_row(
                "SELECT count(*) FROM descriptor WHERE rank = ?1 AND kind = 'MPI_Send'",
                [rank],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(posted, prim_count(&c, rank, "MPI_Send"));
    }
    // Every send moved one i64.
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM mmds_primitive WHERE primitive = 'MPI_Send' AND bytes != 400"
        ),
        0
    );
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM mmds_histogram WHERE primitive = 'MPI_Send' AND metric = 'size'
             AND NOT (lo = 8 AND count = 50)"
        ),
        0
    );
}

#[test]
fn a_crashed_rank_keeps_its_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let r = record_fixture(&db, &["-n", "3"], "crash", &[], &[]);
    assert_eq!(r.code, 128 + 6, "{}", r.stderr);
    let c = Connection::open(&db).unwrap();
    assert_eq!(count(&c, "SELECT count(*) FROM mmds_rank"), 3);
    // Rank 2 died after its first barrier, never reaching the second or MPI_Finalize.
    assert_eq!(prim_count(&c, 2, "MPI_Barrier"), 1);
    assert_eq!(prim_count(&c, 2, "MPI_Finalize"), 0);
    assert_consistent(&c);
}

#[test]
fn resolution_follows_flag_and_environment_and_metrics_off_turns_mmds_off() {
    let dir = tempfile::tempdir().unwrap();
    let buckets = |db: &std::path::Path| {
        let c = Connection::open(db).unwrap();
        assert_consistent(&c);
        (
            count(&c, "SELECT histogram_resolution FROM job"),
            count(
                &c,
                "SELECT count(*) FROM mmds_histogram WHERE metric = 'granularity'",
            ),
        )
    };
    let fine = dir.path().join("fine.db");
    record_fixture(
        &fine,
        &["-n", "2", "--histogram-resolution", "8"],
        "token_ring",
        &[],
        &[],
    )
    .assert_ok("resolution 8");
    let coarse = dir.path().join("coarse.db");
    record_fixture(
        &coarse,
        &["-n", "2"],
        "token_ring",
        &[],
        &[("STROBE_HISTOGRAM_RESOLUTION", "1")],
    )
    .assert_ok("resolution 1 from the environment");
    let (rf, nf) = buckets(&fine);
    let (rc, nc) = buckets(&coarse);
    assert_eq!((rf, rc), (8, 1));
    assert!(nf > nc, "finer buckets: {nf} vs {nc}");

    let bad = dir.path().join("bad.db");
    let r = record_fixture(
        &bad,
        &["-n", "2", "--histogram-resolution", "3"],
        "token_ring",
        &[],
        &[],
    );
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("1, 2, 4 or 8"), "{}", r.stderr);
    let r = record_fixture(
        &bad,
        &["-n", "2"],
        "token_ring",
        &[],
        &[("STROBE_HISTOGRAM_RESOLUTION", "x")],
    );
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("STROBE_HISTOGRAM_RESOLUTION"),
        "{}",
        r.stderr
    );

    let off = dir.path().join("off.db");
    record_fixture(
        &off,
        &["-n", "2", "--metrics", "off"],
        "token_ring",
        &[],
        &[],
    )
    .assert_ok("metrics off");
    let c = Connection::open(&off).unwrap();
    for t in ["mmds_rank", "mmds_primitive", "mmds_histogram"] {
        assert_eq!(count(&c, &format!("SELECT count(*) FROM {t}")), 0, "{t}");
    }
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM job WHERE histogram_resolution IS NULL"
        ),
        1
    );
}

#[test]
fn stats_shows_the_table_checks_accuracy_and_speaks_json() {
    use strobe_tests::strobe_cmd;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("stats.db");
    record_fixture(&db, &["-n", "4"], "token_ring", &[], &[]).assert_ok("record");
    let dbs = db.display().to_string();

    let s = strobe_cmd(&["stats", &dbs], &[]);
    s.assert_ok("stats");
    for want in [
        "MMDS of the whole job, 4 ranks combined",
        "MPI_Send",
        "MPI_Barrier",
        "Comp Granularity",
        "Comm Overhead",
        "within 0.01%",
        "rank 3",
        "top slices by GETTS",
    ] {
        assert!(s.stdout.contains(want), "{want}:\n{}", s.stdout);
    }
    let s = strobe_cmd(&["stats", &dbs, "--rank", "1"], &[]);
    s.assert_ok("stats --rank 1");
    assert!(s.stdout.contains("MMDS of rank 1"), "{}", s.stdout);

    // JSON: valid, and the same figures as the tables.
    let s = strobe_cmd(&["stats", &dbs, "--json"], &[]);
    s.assert_ok("stats --json");
    let c = Connection::open_in_memory().unwrap();
    let (valid, calls, ranks, ok): (i64, i64, i64, i64) = c
        .query_row(
            "SELECT json_valid(?1), json_extract(?1, '$.mmds.calls'),
                json_array_length(json_extract(?1, '$.mmds_ranks')), json_extract(?1, '$.accurate')",
            [&s.stdout],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!((valid, ranks, ok), (1, 4, 1), "{}", s.stdout);
    let rec = Connection::open(&db).unwrap();
    assert_eq!(calls, count(&rec, "SELECT sum(calls) FROM mmds_rank"));
    drop(rec);

    let s = strobe_cmd(&["stats", &dbs, "--rank", "9"], &[]);
    assert_eq!(s.code, 1);
    assert!(
        s.stderr.contains("rank 9 has no per-process statistics"),
        "{}",
        s.stderr
    );

    // Lose 1% of rank 2's computation: the accuracy check must catch it. Resealed (the
    // content checksum would call the edit damage): a monitoring that lost time writes a
    // file like this one.
    let c = Connection::open(&db).unwrap();
    c.execute_batch("UPDATE mmds_rank SET compute_ns = compute_ns - wall_ns / 100 WHERE rank = 2")
        .unwrap();
    strobe_recorder::checksum::seal(&c).unwrap();
    drop(c);
    let s = strobe_cmd(&["stats", &dbs], &[]);
    assert_eq!(s.code, 2, "{}", s.stderr);
    assert!(
        s.stderr.contains("warning") && s.stderr.contains("0.01%"),
        "{}",
        s.stderr
    );
    assert!(s.stdout.contains("EXCEEDS 0.01%"), "{}", s.stdout);
    let s = strobe_cmd(&["stats", &dbs, "--json"], &[]);
    assert_eq!(s.code, 2);
    assert!(s.stdout.contains("\"accurate\":false"), "{}", s.stdout);
}
