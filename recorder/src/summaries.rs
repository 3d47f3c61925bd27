//! The chart summaries (`summary_getts`, `summary_node`: min and max per block of 64 and
//! of 4,096 slices, read by the TUI's charts), kept by whoever writes slice rows.
//!
//! Formats 3 to 17 kept them with `AFTER INSERT` triggers: four upserts per slice (two per
//! table), each with its own statement journal, which cost the writer thread ten times
//! what the slice's own rows cost (20,932 slices of `comet_exchange`: 180 ms with the
//! triggers, 18 ms without, `INSERT ... SELECT` in `sqlite3`). From format
//! [`crate::migrations::WRITER_SUMMARIES_VERSION`] there are no triggers: the writer keeps
//! the min and max of the blocks its transaction touched in memory ([`Pending`]) and merges
//! them into the stored rows just before it commits, so a committed recording's summaries
//! always equal what the triggers would have stored. Code that inserts slice or node rows
//! some other way (synthetic recordings, tests) calls [`refresh`] over the slices it wrote,
//! which rebuilds their blocks from the rows.

use std::collections::BTreeMap;

use rusqlite::{params, Connection};

/// Block sizes of the summaries, in slices.
const SPANS: [i64; 2] = [64, 4096];

/// The writer's summaries of the rows written since its last commit: min and max per
/// block, kept in memory and merged into the stored rows at the commit with one upsert per
/// touched block (`MIN`/`MAX` with what an earlier commit stored, as the old triggers did
/// per row). A commit of 512 slices writes about four rows instead of rebuilding its
/// blocks from the rows (which cost a tenth of the writer's time at 50 commits a second).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// (span, block) -> (min, max) GETTS.
    getts: BTreeMap<(i64, i64), (i64, i64)>,
    /// (span, block) -> min and max of NCOLLDEM, NCOLLMSM, NP2PDEM, NP2PMSM.
    node: BTreeMap<(i64, i64), [(i64, i64); 4]>,
}

fn widen(r: &mut (i64, i64), v: i64) {
    r.0 = r.0.min(v);
    r.1 = r.1.max(v);
}

impl Pending {
    /// A `slice` row: its GETTS counts unless NULL or the job's first slice (the old
    /// trigger's `WHEN`).
    pub fn slice(&mut self, slice: u64, first: bool, getts_ns: Option<i64>) {
        let Some(v) = getts_ns.filter(|_| !first && slice >= 1) else {
            return;
        };
        for span in SPANS {
            let key = (span, (slice as i64 - 1) / span);
            widen(self.getts.entry(key).or_insert((v, v)), v);
        }
    }

    /// A `node_metrics` row's counters.
    pub fn node(&mut self, slice: u64, counts: [i64; 4]) {
        if slice < 1 {
            return;
        }
        for span in SPANS {
            let key = (span, (slice as i64 - 1) / span);
            let e = self.node.entry(key).or_insert(counts.map(|v| (v, v)));
            for (r, v) in e.iter_mut().zip(counts) {
                widen(r, v);
            }
        }
    }

    /// Take `other`'s blocks into these.
    pub fn merge(&mut self, other: Pending) {
        for (k, (lo, hi)) in other.getts {
            let e = self.getts.entry(k).or_insert((lo, hi));
            widen(e, lo);
            widen(e, hi);
        }
        for (k, v) in other.node {
            let e = self.node.entry(k).or_insert(v);
            for (r, (lo, hi)) in e.iter_mut().zip(v) {
                widen(r, lo);
                widen(r, hi);
            }
        }
    }

    /// Merge the blocks into the stored summaries (inside the writer's transaction), and
    /// forget them.
    pub fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let mut getts = conn.prepare_cached(
            "INSERT INTO summary_getts VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (span, block) DO UPDATE SET lo = min(lo, excluded.lo),
                hi = max(hi, excluded.hi)",
        )?;
        for ((span, block), (lo, hi)) in std::mem::take(&mut self.getts) {
            getts.execute(params![span, block, lo, hi])?;
        }
        let mut node = conn.prepare_cached(
            "INSERT INTO summary_node VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT (span, block) DO UPDATE SET
                ncolldem_lo = min(ncolldem_lo, excluded.ncolldem_lo),
                ncolldem_hi = max(ncolldem_hi, excluded.ncolldem_hi),
                ncollmsm_lo = min(ncollmsm_lo, excluded.ncollmsm_lo),
                ncollmsm_hi = max(ncollmsm_hi, excluded.ncollmsm_hi),
                np2pdem_lo = min(np2pdem_lo, excluded.np2pdem_lo),
                np2pdem_hi = max(np2pdem_hi, excluded.np2pdem_hi),
                np2pmsm_lo = min(np2pmsm_lo, excluded.np2pmsm_lo),
                np2pmsm_hi = max(np2pmsm_hi, excluded.np2pmsm_hi)",
        )?;
        for ((span, block), [a, b, c, d]) in std::mem::take(&mut self.node) {
            node.execute(params![span, block, a.0, a.1, b.0, b.1, c.0, c.1, d.0, d.1])?;
        }
        Ok(())
    }
}

/// Recompute the summary blocks covering slices `first..=last` (slice numbers start at 1;
/// block `b` of span `s` holds slices `b*s+1 ..= (b+1)*s`). Exact whatever was there: a
/// block is deleted and rebuilt from the rows.
pub fn refresh(conn: &Connection, first: u64, last: u64) -> rusqlite::Result<()> {
    let (first, last) = (first.max(1), last.max(first.max(1)));
    let lo64 = ((first - 1) / 64) as i64;
    let hi64 = ((last - 1) / 64) as i64;
    let (lo4k, hi4k) = (lo64 / 64, hi64 / 64);
    let rows = (lo64 * 64 + 1, (hi64 + 1) * 64);
    conn.prepare_cached(
        "DELETE FROM summary_getts WHERE (span = 64 AND block BETWEEN ?1 AND ?2)
            OR (span = 4096 AND block BETWEEN ?3 AND ?4)",
    )?
    .execute(params![lo64, hi64, lo4k, hi4k])?;
    conn.prepare_cached(
        "INSERT INTO summary_getts
         SELECT 64, (slice - 1) / 64, min(getts_ns), max(getts_ns) FROM slice
         WHERE slice BETWEEN ?1 AND ?2 AND getts_ns IS NOT NULL AND reason != 'first'
         GROUP BY (slice - 1) / 64",
    )?
    .execute(params![rows.0, rows.1])?;
    conn.prepare_cached(
        "INSERT INTO summary_getts
         SELECT 4096, block / 64, min(lo), max(hi) FROM summary_getts
         WHERE span = 64 AND block BETWEEN ?1 AND ?2 GROUP BY block / 64",
    )?
    .execute(params![lo4k * 64, hi4k * 64 + 63])?;
    conn.prepare_cached(
        "DELETE FROM summary_node WHERE (span = 64 AND block BETWEEN ?1 AND ?2)
            OR (span = 4096 AND block BETWEEN ?3 AND ?4)",
    )?
    .execute(params![lo64, hi64, lo4k, hi4k])?;
    conn.prepare_cached(
        "INSERT INTO summary_node
         SELECT 64, (slice - 1) / 64, min(ncolldem), max(ncolldem), min(ncollmsm),
                max(ncollmsm), min(np2pdem), max(np2pdem), min(np2pmsm), max(np2pmsm)
         FROM node_metrics WHERE slice BETWEEN ?1 AND ?2 GROUP BY (slice - 1) / 64",
    )?
    .execute(params![rows.0, rows.1])?;
    conn.prepare_cached(
        "INSERT INTO summary_node
         SELECT 4096, block / 64, min(ncolldem_lo), max(ncolldem_hi), min(ncollmsm_lo),
                max(ncollmsm_hi), min(np2pdem_lo), max(np2pdem_hi), min(np2pmsm_lo),
                max(np2pmsm_hi)
         FROM summary_node WHERE span = 64 AND block BETWEEN ?1 AND ?2 GROUP BY block / 64",
    )?
    .execute(params![lo4k * 64, hi4k * 64 + 63])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refresh stores what the triggers of formats 3 to 17 stored, whatever order and
    /// grouping the rows came in.
    #[test]
    fn refresh_equals_the_old_triggers() {
        let old = Connection::open_in_memory().unwrap();
        let new = Connection::open_in_memory().unwrap();
        let mut o = old;
        let mut n = new;
        crate::migrations::migrate_to(&mut o, crate::migrations::WRITER_SUMMARIES_VERSION - 1)
            .unwrap();
        crate::migrations::migrate(&mut n).unwrap();
        let fill = |c: &Connection, from: u64, to: u64| {
            for s in from..=to {
                let reason = if s == 1 { "first" } else { "timer" };
                c.execute(
                    "INSERT INTO slice (slice, reason, start_ns, getts_ns, n_descriptors,
                        n_matches, n_chunks, n_collectives, n_completions, n_blocked, digest)
                     VALUES (?1, ?2, 0, ?3, 0, 0, 0, 0, 0, 0, 0)",
                    params![s as i64, reason, ((s * 7919) % 1000) as i64],
                )
                .unwrap();
                for node in 0..2i64 {
                    c.execute(
                        "INSERT INTO node_metrics (slice, node, np2pdem, np2pmsm, ncolldem,
                            ncollmsm, t_drain_ns, t_schedule_ns, t_p2p_ns, t_bbm_ns, t_rm_ns,
                            t_deliver_ns)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, 0, 0, 0, 0, 0)",
                        params![
                            s as i64,
                            node,
                            ((s + 3) % 5) as i64,
                            (s % 7) as i64,
                            ((s * 13) % 11) as i64 + node,
                            (s % 3) as i64
                        ],
                    )
                    .unwrap();
                }
            }
        };
        // The new file in uneven commits, as a writer would, refreshed after each.
        fill(&o, 1, 9000);
        let mut at = 1;
        for step in [1u64, 63, 64, 65, 500, 4095, 4300] {
            let to = (at + step - 1).min(9000);
            fill(&n, at, to);
            refresh(&n, at, to).unwrap();
            at = to + 1;
        }
        fill(&n, at, 9000);
        refresh(&n, at, 9000).unwrap();
        // The writer's way: the same rows through `Pending`, flushed at uneven commits,
        // node rows of one block arriving two commits late.
        let mut w = Connection::open_in_memory().unwrap();
        crate::migrations::migrate(&mut w).unwrap();
        let mut pending = Pending::default();
        let mut late = Vec::new();
        for s in 1..=9000u64 {
            fill(&w, s, s);
            let v = ((s * 7919) % 1000) as i64;
            pending.slice(s, s == 1, Some(v));
            for node in 0..2i64 {
                let counts = [
                    ((s * 13) % 11) as i64 + node,
                    (s % 3) as i64,
                    ((s + 3) % 5) as i64,
                    (s % 7) as i64,
                ];
                if (4100..4200).contains(&s) {
                    late.push((s, counts));
                } else {
                    pending.node(s, counts);
                }
            }
            if s % 500 == 0 || s % 777 == 0 {
                if s >= 5000 {
                    for (ls, c) in late.drain(..) {
                        pending.node(ls, c);
                    }
                }
                pending.flush(&w).unwrap();
            }
        }
        pending.flush(&w).unwrap();
        let dump = |c: &Connection, sql: &str| -> Vec<Vec<i64>> {
            let mut st = c.prepare(sql).unwrap();
            let cols = st.column_count();
            st.query_map([], |r| (0..cols).map(|i| r.get(i)).collect())
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        for sql in [
            "SELECT * FROM summary_getts ORDER BY span, block",
            "SELECT * FROM summary_node ORDER BY span, block",
        ] {
            let want = dump(&o, sql);
            assert!(want.len() > 140, "{sql}: {}", want.len());
            assert_eq!(dump(&n, sql), want, "{sql}: refresh");
            assert_eq!(dump(&w, sql), want, "{sql}: pending");
        }
    }
}
