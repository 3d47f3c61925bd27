//! The migration scripts of the compact recording formats (issue 14: recording that costs
//! almost nothing at any scale): the compact schedule log (format 14), its packed blobs
//! (15), open blocked spans written once (16) and derived rows left out (17). Part of
//! `migrations.rs` (its `MIGRATIONS` list orders them), kept apart for size.

/// The schedule log in compact form (issue 14: recording that costs almost nothing per
/// message). One `slice_schedule` row per slice holds the slice's descriptors and its
/// decision set as varint blobs (`compact.rs`), instead of one `descriptor` row per call
/// and one `decision` row per decision (about 400 of the 550 bytes a message cost); one
/// `message` row per matched message keeps what the History tab and `message_life` ask in
/// SQL, as integers (slices relative to the match). `desc_kind` names the call codes for
/// SQL. The `descriptor`, `decision` and `slice_decisions` tables stay for older files (a
/// migrated file keeps its rows) and are empty in new ones unless expanded (`expand.rs`);
/// `message_life` reads both, the rows only for slices without a compact schedule.
pub(super) const V_COMPACT_SCHEDULE: &str = r#"
CREATE TABLE slice_schedule (
    slice        INTEGER PRIMARY KEY,
    descriptors  BLOB,
    decisions    BLOB
);

CREATE TABLE message (
    recv_rank   INTEGER NOT NULL,
    matched     INTEGER NOT NULL,
    idx         INTEGER NOT NULL,
    recv_seq    INTEGER NOT NULL,
    send_rank   INTEGER NOT NULL,
    send_seq    INTEGER NOT NULL,
    bytes       INTEGER NOT NULL,
    flags       INTEGER NOT NULL,
    recv_kind   INTEGER,
    recv_peer   INTEGER,
    recv_tag    INTEGER,
    recv_bytes  INTEGER,
    recv_age    INTEGER,
    send_kind   INTEGER,
    send_tag    INTEGER,
    send_age    INTEGER,
    last_chunk  INTEGER,
    send_done   INTEGER,
    recv_done   INTEGER,
    PRIMARY KEY (recv_rank, matched, idx)
) WITHOUT ROWID;

CREATE TABLE desc_kind (
    code  INTEGER PRIMARY KEY,
    name  TEXT NOT NULL
);
INSERT INTO desc_kind VALUES
    (1, 'MPI_Send'), (2, 'MPI_Ssend'), (3, 'MPI_Rsend'), (4, 'MPI_Recv'), (5, 'MPI_Probe'),
    (6, 'MPI_Iprobe'), (7, 'MPI_Cancel'), (10, 'MPI_Barrier'), (11, 'MPI_Bcast'),
    (12, 'MPI_Reduce'), (13, 'MPI_Allreduce'), (14, 'MPI_Scatter'), (15, 'MPI_Scatterv'),
    (16, 'MPI_Gather'), (17, 'MPI_Gatherv'), (18, 'MPI_Allgather'), (19, 'MPI_Allgatherv'),
    (20, 'MPI_Alltoall'), (21, 'MPI_Alltoallv'), (22, 'MPI_Reduce_scatter'),
    (23, 'MPI_Reduce_scatter_block'), (24, 'MPI_Scan'), (25, 'MPI_Exscan'),
    (30, 'MPI_Comm_dup'), (31, 'MPI_Comm_split'), (32, 'MPI_Comm_free'), (40, 'MPI_Finalize');

DROP VIEW message_life;
CREATE VIEW message_life AS
    SELECT m.send_rank AS send_rank, m.send_seq AS send_seq, k.name AS send_kind,
           m.matched - m.send_age - 1 AS send_posted, m.recv_rank AS recv_rank,
           m.recv_seq AS recv_seq, m.matched - m.recv_age - 1 AS recv_posted,
           m.matched AS matched, m.bytes AS bytes, m.matched + m.last_chunk AS last_chunk,
           m.matched + m.send_done AS send_completed, m.matched + m.recv_done AS recv_completed
    FROM message m LEFT JOIN desc_kind k ON k.code = m.send_kind
    UNION ALL
    SELECT s.rank, s.seq, s.kind, s.slice - 1, r.rank, r.seq, r.slice - 1, m.slice, m.bytes,
           (SELECT max(c.slice) FROM decision c
             WHERE c.kind = 'chunk' AND c.send_rank = m.send_rank AND c.send_seq = m.send_seq),
           (SELECT c.slice FROM decision c
             WHERE c.kind = 'complete' AND c.desc_rank = m.send_rank AND c.desc_seq = m.send_seq),
           (SELECT c.slice FROM decision c
             WHERE c.kind = 'complete' AND c.desc_rank = m.recv_rank AND c.desc_seq = m.recv_seq)
    FROM decision m
    JOIN descriptor s ON s.rank = m.send_rank AND s.seq = m.send_seq
    JOIN descriptor r ON r.rank = m.recv_rank AND r.seq = m.recv_seq
    WHERE m.kind = 'match'
      AND NOT EXISTS (SELECT 1 FROM slice_schedule q WHERE q.slice = m.slice);
"#;

/// The schedule log's blobs packed (issue 14): a `slice_schedule` blob whose first byte
/// is 2 is the plain blob packed by a small LZ77 pass (`compact::pack`); short blobs stay
/// plain (first byte 1). Nothing to convert: plain blobs keep their meaning, and a strobe
/// that knows only format 14 refuses the file ("use a newer strobe") instead of calling a
/// packed blob damage. `schedule_bytes` shows what each slice's blobs cost, and which
/// are packed, for `sqlite3` users measuring a recording.
pub(super) const V_PACKED_SCHEDULE: &str = r#"
CREATE VIEW schedule_bytes AS
    SELECT slice,
           length(descriptors) AS descriptor_bytes,
           length(decisions) AS decision_bytes,
           (substr(descriptors, 1, 1) = x'02') AS descriptors_packed,
           (substr(decisions, 1, 1) = x'02') AS decisions_packed
    FROM slice_schedule;
"#;

/// Open blocked spans written once (issue 14): `blocked_span.last_slice` may be NULL, "still
/// open". The writer inserts a span once when it opens, with `last_slice` NULL, and sets
/// `last_slice` once when it closes (at the latest when the recording is finished), instead
/// of rewriting every open span at every commit. A recording cut short (strobe killed) keeps
/// its open spans NULL: they read as blocked through the recording's last slice (the
/// highest `slice` row), which the `blocked` view and the reading API do. SQLite cannot drop
/// a NOT NULL constraint in place, so the table is rebuilt (rows unchanged) with its indexes,
/// the site trigger, and the views and triggers over it. Self-contained.
pub(super) const V_OPEN_SPANS: &str = r#"
CREATE TABLE blocked_span_open (
    rank         INTEGER NOT NULL,
    first_slice  INTEGER NOT NULL,
    last_slice   INTEGER,
    call         TEXT NOT NULL,
    PRIMARY KEY (rank, first_slice)
) WITHOUT ROWID;
INSERT INTO blocked_span_open (rank, first_slice, last_slice, call)
SELECT rank, first_slice, last_slice, call FROM blocked_span;

DROP VIEW blocked_where;
DROP VIEW blocked_per_slice;
DROP VIEW blocked;
DROP TABLE blocked_span;
ALTER TABLE blocked_span_open RENAME TO blocked_span;

-- NULL sorts first: the open spans are the start of `blocked_span_last`.
CREATE INDEX blocked_span_last ON blocked_span(last_slice, first_slice, call);
CREATE INDEX blocked_span_length ON blocked_span(last_slice - first_slice);

CREATE TRIGGER blocked_span_site_delete AFTER DELETE ON blocked_span
BEGIN
    DELETE FROM blocked_site WHERE rank = OLD.rank AND first_slice = OLD.first_slice;
END;

-- Closed spans over their slices, open ones over every slice from their first on.
CREATE VIEW blocked AS
    SELECT s.slice AS slice, b.rank AS rank, b.call AS call
    FROM blocked_span b JOIN slice s ON s.slice BETWEEN b.first_slice AND b.last_slice
    UNION ALL
    SELECT s.slice, b.rank, b.call
    FROM blocked_span b JOIN slice s ON s.slice >= b.first_slice
    WHERE b.last_slice IS NULL;

CREATE VIEW blocked_per_slice AS
    SELECT slice, count(*) AS n_blocked, group_concat(rank || ':' || call, ' ') AS ranks
    FROM blocked GROUP BY slice;

CREATE VIEW blocked_where AS
    SELECT b.rank, b.first_slice, b.last_slice, b.call,
           c.file, c.line, c.function, c.object, c.offset
    FROM blocked_span b
    LEFT JOIN blocked_site s ON s.rank = b.rank AND s.first_slice = b.first_slice
    LEFT JOIN call_site c ON c.id = s.site;

CREATE TRIGGER blocked_insert INSTEAD OF INSERT ON blocked
BEGIN
    UPDATE blocked_span SET last_slice = NEW.slice
    WHERE rank = NEW.rank AND call = NEW.call AND last_slice = NEW.slice - 1;
    INSERT INTO blocked_span (rank, first_slice, last_slice, call)
    SELECT NEW.rank, NEW.slice, NEW.slice, NEW.call
    WHERE NOT EXISTS (SELECT 1 FROM blocked_span
                      WHERE rank = NEW.rank AND call = NEW.call
                        AND (last_slice = NEW.slice
                             OR (last_slice IS NULL AND first_slice <= NEW.slice)));
END;

CREATE TRIGGER blocked_delete INSTEAD OF DELETE ON blocked
BEGIN
    INSERT INTO blocked_span (rank, first_slice, last_slice, call)
    SELECT rank, OLD.slice + 1, last_slice, call FROM blocked_span
    WHERE rank = OLD.rank AND first_slice <= OLD.slice
      AND (last_slice > OLD.slice OR last_slice IS NULL);
    UPDATE blocked_span SET last_slice = OLD.slice - 1
    WHERE rank = OLD.rank AND first_slice <= OLD.slice
      AND (last_slice >= OLD.slice OR last_slice IS NULL);
    DELETE FROM blocked_span WHERE rank = OLD.rank
      AND (last_slice < first_slice
           OR (last_slice IS NULL AND first_slice > (SELECT max(slice) FROM slice)));
END;
"#;

/// Derived rows left out (issue 14: at most 64 bytes a message with everything on).
/// The writer no longer writes `message` rows: all they hold is in the `slice_schedule`
/// blobs (the History tab decodes those, `strobe export --format sqlite` writes the rows
/// back, and `message_life` reads them there); the table stays, and a migrated file keeps
/// its rows. And `node_slice` becomes a view over `node_metrics`, whose `letts_ns`,
/// `ltdem_ns`, `ltmsm_ns`, `ltts_ns` and `bpts` are NULL where they equal the slice's
/// `getts_ns`, `gtdem_ns`, `gtmsm_ns`, `gtts_ns` and `n_blocked` (always, on one node):
/// the view fills them from `slice`, so `node_slice` reads as before. Existing rows are
/// copied whole. INSTEAD OF triggers keep `INSERT INTO node_slice` and `DELETE FROM
/// node_slice` working; the chart summary's trigger moves to `node_metrics`.
pub(super) const V_DERIVED_ROWS: &str = r#"
CREATE TABLE node_metrics (
    slice          INTEGER NOT NULL,
    node           INTEGER NOT NULL,
    letts_ns       INTEGER,
    ltdem_ns       INTEGER,
    ltmsm_ns       INTEGER,
    ltts_ns        INTEGER,
    np2pdem        INTEGER NOT NULL,
    np2pmsm        INTEGER NOT NULL,
    ncolldem       INTEGER NOT NULL,
    ncollmsm       INTEGER NOT NULL,
    bpts           INTEGER,
    t_drain_ns     INTEGER NOT NULL,
    t_schedule_ns  INTEGER NOT NULL,
    t_p2p_ns       INTEGER NOT NULL,
    t_bbm_ns       INTEGER NOT NULL,
    t_rm_ns        INTEGER NOT NULL,
    t_deliver_ns   INTEGER NOT NULL,
    PRIMARY KEY (slice, node)
) WITHOUT ROWID;

INSERT INTO node_metrics SELECT slice, node, letts_ns, ltdem_ns, ltmsm_ns, ltts_ns, np2pdem,
    np2pmsm, ncolldem, ncollmsm, bpts, t_drain_ns, t_schedule_ns, t_p2p_ns, t_bbm_ns,
    t_rm_ns, t_deliver_ns FROM node_slice;
DROP TABLE node_slice;

CREATE VIEW node_slice AS
    SELECT n.slice AS slice, n.node AS node,
           coalesce(n.letts_ns, s.getts_ns) AS letts_ns,
           coalesce(n.ltdem_ns, s.gtdem_ns) AS ltdem_ns,
           coalesce(n.ltmsm_ns, s.gtmsm_ns) AS ltmsm_ns,
           coalesce(n.ltts_ns, s.gtts_ns) AS ltts_ns,
           n.np2pdem AS np2pdem, n.np2pmsm AS np2pmsm, n.ncolldem AS ncolldem,
           n.ncollmsm AS ncollmsm, coalesce(n.bpts, s.n_blocked) AS bpts,
           n.t_drain_ns AS t_drain_ns, n.t_schedule_ns AS t_schedule_ns,
           n.t_p2p_ns AS t_p2p_ns, n.t_bbm_ns AS t_bbm_ns, n.t_rm_ns AS t_rm_ns,
           n.t_deliver_ns AS t_deliver_ns
    FROM node_metrics n LEFT JOIN slice s ON s.slice = n.slice;

CREATE TRIGGER node_slice_insert INSTEAD OF INSERT ON node_slice
BEGIN
    INSERT INTO node_metrics VALUES (NEW.slice, NEW.node, NEW.letts_ns, NEW.ltdem_ns,
        NEW.ltmsm_ns, NEW.ltts_ns, NEW.np2pdem, NEW.np2pmsm, NEW.ncolldem, NEW.ncollmsm,
        NEW.bpts, NEW.t_drain_ns, NEW.t_schedule_ns, NEW.t_p2p_ns, NEW.t_bbm_ns, NEW.t_rm_ns,
        NEW.t_deliver_ns);
END;

CREATE TRIGGER node_slice_delete INSTEAD OF DELETE ON node_slice
BEGIN
    DELETE FROM node_metrics WHERE slice = OLD.slice AND node = OLD.node;
END;

CREATE TRIGGER summary_node_insert AFTER INSERT ON node_metrics
BEGIN
    INSERT INTO summary_node VALUES (64, (NEW.slice - 1) / 64,
        NEW.ncolldem, NEW.ncolldem, NEW.ncollmsm, NEW.ncollmsm,
        NEW.np2pdem, NEW.np2pdem, NEW.np2pmsm, NEW.np2pmsm)
    ON CONFLICT (span, block) DO UPDATE SET
        ncolldem_lo = min(ncolldem_lo, excluded.ncolldem_lo),
        ncolldem_hi = max(ncolldem_hi, excluded.ncolldem_hi),
        ncollmsm_lo = min(ncollmsm_lo, excluded.ncollmsm_lo),
        ncollmsm_hi = max(ncollmsm_hi, excluded.ncollmsm_hi),
        np2pdem_lo = min(np2pdem_lo, excluded.np2pdem_lo),
        np2pdem_hi = max(np2pdem_hi, excluded.np2pdem_hi),
        np2pmsm_lo = min(np2pmsm_lo, excluded.np2pmsm_lo),
        np2pmsm_hi = max(np2pmsm_hi, excluded.np2pmsm_hi);
    INSERT INTO summary_node VALUES (4096, (NEW.slice - 1) / 4096,
        NEW.ncolldem, NEW.ncolldem, NEW.ncollmsm, NEW.ncollmsm,
        NEW.np2pdem, NEW.np2pdem, NEW.np2pmsm, NEW.np2pmsm)
    ON CONFLICT (span, block) DO UPDATE SET
        ncolldem_lo = min(ncolldem_lo, excluded.ncolldem_lo),
        ncolldem_hi = max(ncolldem_hi, excluded.ncolldem_hi),
        ncollmsm_lo = min(ncollmsm_lo, excluded.ncollmsm_lo),
        ncollmsm_hi = max(ncollmsm_hi, excluded.ncollmsm_hi),
        np2pdem_lo = min(np2pdem_lo, excluded.np2pdem_lo),
        np2pdem_hi = max(np2pdem_hi, excluded.np2pdem_hi),
        np2pmsm_lo = min(np2pmsm_lo, excluded.np2pmsm_lo),
        np2pmsm_hi = max(np2pmsm_hi, excluded.np2pmsm_hi);
END;
"#;

/// Format 18: the chart summaries are kept by the writer (`summaries.rs`), which merges the
/// min and max of the blocks a transaction touched into them before it commits, instead of
/// by four upserts per slice in triggers (ten times the cost of the slice's own rows on
/// the writer thread). Existing summaries are complete and stay.
pub(super) const V_WRITER_SUMMARIES: &str = r#"
DROP TRIGGER IF EXISTS summary_getts_insert;
DROP TRIGGER IF EXISTS summary_node_insert;
"#;

/// Format 19: the replay log's blocked flips are written as episodes (`replay_log` stream 3,
/// `replay_log.rs`): one byte for the common one-slice episode instead of two. No table
/// changes; the version tells an older strobe, which would take stream 3 for damage, that
/// the file is newer than it. Files of format 18 and older keep stream 2 and read as before.
pub(super) const V_BLOCKED_EPISODES: &str = r#"
-- Format 19: replay_log stream 3 (blocked episodes); no schema change.
SELECT 19;
"#;

/// Format 20: the schedule log in batches (issue 14, `compact/batch.rs`): the descriptors
/// and decisions of every slice one writer transaction holds (up to 512 slices or 20 ms)
/// are one `schedule_batch` row, packed as one blob, instead of one `slice_schedule` row
/// per slice. The writer no longer writes `slice_schedule` rows; a migrated file keeps
/// its rows and the readers take both (docs/recording.md, `schedule_batch`).
/// `message_life` counts the `decision` rows (old files, or expanded by `strobe export`)
/// only for slices neither layout covers, so an exported copy counts no message twice.
pub(super) const V_SCHEDULE_BATCHES: &str = r#"
CREATE TABLE schedule_batch (
    first_slice  INTEGER PRIMARY KEY,
    last_slice   INTEGER NOT NULL,
    entries      INTEGER NOT NULL,
    data         BLOB NOT NULL
);
DROP VIEW message_life;
CREATE VIEW message_life AS
    SELECT m.send_rank AS send_rank, m.send_seq AS send_seq, k.name AS send_kind,
           m.matched - m.send_age - 1 AS send_posted, m.recv_rank AS recv_rank,
           m.recv_seq AS recv_seq, m.matched - m.recv_age - 1 AS recv_posted,
           m.matched AS matched, m.bytes AS bytes, m.matched + m.last_chunk AS last_chunk,
           m.matched + m.send_done AS send_completed, m.matched + m.recv_done AS recv_completed
    FROM message m LEFT JOIN desc_kind k ON k.code = m.send_kind
    UNION ALL
    SELECT s.rank, s.seq, s.kind, s.slice - 1, r.rank, r.seq, r.slice - 1, m.slice, m.bytes,
           (SELECT max(c.slice) FROM decision c
             WHERE c.kind = 'chunk' AND c.send_rank = m.send_rank AND c.send_seq = m.send_seq),
           (SELECT c.slice FROM decision c
             WHERE c.kind = 'complete' AND c.desc_rank = m.send_rank AND c.desc_seq = m.send_seq),
           (SELECT c.slice FROM decision c
             WHERE c.kind = 'complete' AND c.desc_rank = m.recv_rank AND c.desc_seq = m.recv_seq)
    FROM decision m
    JOIN descriptor s ON s.rank = m.send_rank AND s.seq = m.send_seq
    JOIN descriptor r ON r.rank = m.recv_rank AND r.seq = m.recv_seq
    WHERE m.kind = 'match'
      AND NOT EXISTS (SELECT 1 FROM slice_schedule q WHERE q.slice = m.slice)
      AND NOT EXISTS (SELECT 1 FROM (SELECT last_slice FROM schedule_batch
                                     WHERE first_slice <= m.slice
                                     ORDER BY first_slice DESC LIMIT 1)
                      WHERE last_slice >= m.slice);
"#;

/// Format 21: the content checksum by table (`checksum::ALGORITHM`, `sha256-tables-v2`): a
/// SHA-256 of each covered table's rows, then one over the tables' names and digests, so
/// the writer hashes the `slice` rows as it inserts them instead of `finish` reading them
/// back. No schema change: the version makes a strobe that knows only `sha256-rows-v1`
/// refuse the file as too new rather than call it damaged. Files of format 20 and older
/// keep their `sha256-rows-v1` checksum and verify as before.
pub(super) const V_TABLES_CHECKSUM: &str = r#"
-- Format 21: content_checksum.algorithm sha256-tables-v2; no schema change.
SELECT 21;
"#;
