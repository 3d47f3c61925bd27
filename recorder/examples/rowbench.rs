//! What a `slice`-like row costs the writer, by how it is inserted (docs/benchmarks-detail.md,
//! "The per-slice rows, 16 to a statement"): 111,000 rows of 17 integer and text columns in
//! WAL mode, 1,000 rows a transaction, as the writer commits them.
//!
//! `cargo run --release -p strobe-recorder --example rowbench`

use std::path::Path;
use std::time::Instant;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;

const ROWS: i64 = 111_000;
const PER_TRANSACTION: i64 = 1_000;
const SLICE: &str = "CREATE TABLE slice (slice INTEGER PRIMARY KEY, reason TEXT NOT NULL,
    start_ns INTEGER NOT NULL, getts_ns INTEGER, gtdem_ns INTEGER, gtmsm_ns INTEGER,
    gtts_ns INTEGER, usrsts INTEGER, usrdem INTEGER, usrmsm INTEGER,
    n_descriptors INTEGER NOT NULL, n_matches INTEGER NOT NULL, n_chunks INTEGER NOT NULL,
    n_collectives INTEGER NOT NULL, n_completions INTEGER NOT NULL,
    n_blocked INTEGER NOT NULL, digest INTEGER NOT NULL)";

fn open(dir: &Path, name: &str, schema: &str) -> Connection {
    let c = Connection::open(dir.join(name)).expect("open");
    c.pragma_update(None, "journal_mode", "WAL").expect("wal");
    c.pragma_update(None, "synchronous", "NORMAL")
        .expect("sync");
    c.pragma_update(None, "wal_autocheckpoint", 0)
        .expect("no autocheckpoint");
    c.execute_batch(schema).expect("schema");
    c
}

/// A comet_exchange-like slice row.
fn row(i: i64) -> [ValueRef<'static>; 17] {
    let n = ValueRef::Integer;
    let digest = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64;
    [
        n(i),
        ValueRef::Text(b"early"),
        n(8_600_000 + i * 4_000),
        n(7_862),
        n(631),
        n(1_542),
        n(2_774),
        n(0),
        n(0),
        n(0),
        n(2),
        n(0),
        n(0),
        n(0),
        n(1),
        n(1),
        n(digest),
    ]
}

fn timed(what: &str, c: &Connection, mut insert: impl FnMut(&Connection, i64)) {
    let t = Instant::now();
    c.execute_batch("BEGIN").expect("begin");
    for i in 1..=ROWS {
        insert(c, i);
        if i % PER_TRANSACTION == 0 {
            c.execute_batch("COMMIT; BEGIN").expect("commit");
        }
    }
    c.execute_batch("COMMIT").expect("commit");
    let us = t.elapsed().as_secs_f64() * 1e6 / ROWS as f64;
    println!("{what:<36} {us:.3} us/row");
}

fn bind_execute(st: &mut rusqlite::Statement<'_>, values: &[ValueRef<'static>]) {
    for (k, v) in values.iter().enumerate() {
        st.raw_bind_parameter(k + 1, ToSqlOutput::Borrowed(*v))
            .expect("bind");
    }
    st.raw_execute().expect("insert");
}

fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let one = format!("INSERT INTO slice VALUES ({})", vec!["?"; 17].join(", "));
    let c = open(dir.path(), "cached.db", SLICE);
    timed("one row a statement, cached", &c, |c, i| {
        bind_execute(&mut c.prepare_cached(&one).expect("prepare"), &row(i));
    });
    let c = open(dir.path(), "batched.db", SLICE);
    let sixteen = format!(
        "INSERT INTO slice VALUES {}",
        vec![format!("({})", vec!["?"; 17].join(", ")); 16].join(", ")
    );
    let mut waiting: Vec<ValueRef<'static>> = Vec::new();
    timed("16 rows a statement (row_batch.rs)", &c, |c, i| {
        waiting.extend(row(i));
        if waiting.len() == 16 * 17 {
            bind_execute(&mut c.prepare_cached(&sixteen).expect("prepare"), &waiting);
            waiting.clear();
        }
    });
    let c = open(
        dir.path(),
        "blob.db",
        "CREATE TABLE batch (first INTEGER PRIMARY KEY, data BLOB NOT NULL)",
    );
    let mut blob = Vec::new();
    timed("one varint blob a 256 rows", &c, |c, i| {
        for v in row(i) {
            let mut x = match v {
                ValueRef::Integer(x) => x as u64,
                _ => 1,
            };
            loop {
                let b = (x & 0x7f) as u8;
                x >>= 7;
                if x == 0 {
                    blob.push(b);
                    break;
                }
                blob.push(b | 0x80);
            }
        }
        if i % 256 == 0 {
            c.prepare_cached("INSERT INTO batch VALUES (?1, ?2)")
                .expect("prepare")
                .execute(rusqlite::params![i - 255, &blob])
                .expect("insert");
            blob.clear();
        }
    });
}
