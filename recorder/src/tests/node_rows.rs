//! `node_slice` (a view over `node_metrics` from format 17) reads back every node's
//! metrics as they were sent, whether the node's values equal the slice's (then stored as
//! NULL) or not, and whether they reach the writer before the slice (node 0's) or after.

use std::time::Duration;

use rusqlite::Connection;
use strobe_runtime::engine::{LocalMetrics, SliceSink};
use strobe_runtime::launcher::JobOutcome;

use super::{job, record, report};
use crate::{open_recording, RecordOptions, Recorder};

/// Node 0 reports the slice's own values before the slice; node 1 reports other values
/// (and, every third slice, the same ones) after it.
fn metrics(i: u64, node: u32) -> LocalMetrics {
    let g = record(i).global;
    let same = node == 0 || i.is_multiple_of(3);
    let us = |same_v: Duration, own: u64| {
        if same {
            same_v
        } else {
            Duration::from_nanos(own)
        }
    };
    LocalMetrics {
        node,
        letts: us(g.getts, 7 + i),
        ltdem: us(g.gtdem, 11),
        ltmsm: us(g.gtmsm, 13 * i),
        ltts: us(g.gtts, 17),
        np2pdem: 2,
        np2pmsm: i as u32,
        bpts: if same { 1 } else { 5 },
        t_drain: Duration::from_nanos(100 + i),
        t_deliver: Duration::from_nanos(3),
        ..LocalMetrics::default()
    }
}

fn row(m: &LocalMetrics, slice: u64) -> Vec<i64> {
    let ns = |d: Duration| d.as_nanos() as i64;
    vec![
        slice as i64,
        m.node.into(),
        ns(m.letts),
        ns(m.ltdem),
        ns(m.ltmsm),
        ns(m.ltts),
        m.np2pdem.into(),
        m.np2pmsm.into(),
        m.ncolldem.into(),
        m.ncollmsm.into(),
        m.bpts.into(),
        ns(m.t_drain),
        ns(m.t_schedule),
        ns(m.t_p2p),
        ns(m.t_bbm),
        ns(m.t_rm),
        ns(m.t_deliver),
    ]
}

#[test]
fn node_slice_reads_back_what_each_node_reported() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nodes.db");
    let opts = RecordOptions {
        batch_slices: 4,
        ..RecordOptions::default()
    };
    let rec = Recorder::create(&p, &job(), opts).unwrap();
    let n = 12;
    let mut want = Vec::new();
    for i in 1..=n {
        let (m0, m1) = (metrics(i, 0), metrics(i, 1));
        rec.node_metrics(i, &m0);
        rec.slice(&record(i));
        rec.node_metrics(i, &m1);
        want.push(row(&m0, i));
        want.push(row(&m1, i));
    }
    rec.finish(&report(JobOutcome::Success, n)).unwrap();
    let c = open_recording(&p).unwrap();
    let mut st = c
        .prepare("SELECT * FROM node_slice ORDER BY slice, node")
        .unwrap();
    let got: Vec<Vec<i64>> = st
        .query_map([], |r| (0..17).map(|i| r.get(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, want);
    // Node 0's copies of the slice's values are not stored (whatever the commits: batches
    // of 4 slices here), nor node 1's equal ones (every third slice).
    let nulls: i64 = c
        .query_row(
            "SELECT count(*) FROM node_metrics WHERE letts_ns IS NULL AND bpts IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(nulls, 12 + 4);
    // The view still takes rows and deletes them.
    let w = Connection::open(&p).unwrap();
    w.execute_batch(
        "INSERT INTO node_slice SELECT slice, 2, letts_ns, ltdem_ns, ltmsm_ns, ltts_ns, np2pdem,
            np2pmsm, ncolldem, ncollmsm, bpts, t_drain_ns, t_schedule_ns, t_p2p_ns, t_bbm_ns,
            t_rm_ns, t_deliver_ns FROM node_slice WHERE node = 1;
         DELETE FROM node_slice WHERE node = 0;",
    )
    .unwrap();
    // Rows written outside the writer get their chart summaries from a refresh.
    crate::summaries::refresh(&w, 1, n).unwrap();
    let count = |sql: &str| -> i64 { w.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT count(*) FROM node_slice WHERE node = 2"),
        n as i64
    );
    assert_eq!(count("SELECT count(*) FROM node_slice WHERE node = 0"), 0);
    assert_eq!(
        count("SELECT count(*) FROM summary_node WHERE span = 64"),
        1
    );
}
