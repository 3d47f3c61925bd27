-- Generated from recorder/src/migrations*.rs by `STROBE_BLESS_SCHEMA=1 cargo test -p strobe-recorder fresh_schema`: do not edit.
-- A new recording's schema (recorder/src/fresh_schema.rs).
CREATE TABLE job (
    format_version   INTEGER NOT NULL,
    strobe_version   TEXT NOT NULL,
    command          TEXT NOT NULL,
    cwd              TEXT NOT NULL,
    program          TEXT NOT NULL,
    program_sha256   TEXT,
    env              TEXT NOT NULL,
    ranks            INTEGER NOT NULL,
    nodes            INTEGER NOT NULL,
    slice_ns         INTEGER NOT NULL,
    policy           TEXT NOT NULL,
    deadlock_slices  INTEGER NOT NULL,
    chunk_budget     INTEGER NOT NULL,
    direct_copy_min  INTEGER NOT NULL,
    schedule_log     TEXT NOT NULL,
    metrics          TEXT NOT NULL,
    started_at       INTEGER NOT NULL,
    ended_at         INTEGER,
    elapsed_ns       INTEGER,
    outcome          TEXT,
    message          TEXT,
    exit_status      INTEGER,
    total_slices     INTEGER
, wire_format_version INTEGER, histogram_resolution INTEGER, scheduler_version INTEGER NOT NULL DEFAULT 1, captured_ranks TEXT, placement TEXT, transport TEXT);
CREATE TABLE rank (
    rank         INTEGER PRIMARY KEY,
    wait_status  INTEGER,
    exit_code    INTEGER,
    signal       INTEGER
);
CREATE TABLE slice (
    slice          INTEGER PRIMARY KEY,
    reason         TEXT NOT NULL,
    start_ns       INTEGER NOT NULL,
    getts_ns       INTEGER,
    gtdem_ns       INTEGER,
    gtmsm_ns       INTEGER,
    gtts_ns        INTEGER,
    usrsts         INTEGER,
    usrdem         INTEGER,
    usrmsm         INTEGER,
    n_descriptors  INTEGER NOT NULL,
    n_matches      INTEGER NOT NULL,
    n_chunks       INTEGER NOT NULL,
    n_collectives  INTEGER NOT NULL,
    n_completions  INTEGER NOT NULL,
    n_blocked      INTEGER NOT NULL,
    digest         INTEGER NOT NULL
);
CREATE TABLE descriptor (
    rank     INTEGER NOT NULL,
    seq      INTEGER NOT NULL,
    slice    INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    peer     INTEGER NOT NULL,
    tag      INTEGER NOT NULL,
    comm     INTEGER NOT NULL,
    bytes    INTEGER NOT NULL,
    rbytes   INTEGER NOT NULL,
    request  INTEGER NOT NULL,
    flags    INTEGER NOT NULL,
    PRIMARY KEY (rank, seq)
) WITHOUT ROWID;
CREATE INDEX descriptor_slice ON descriptor(slice);
CREATE TABLE decision (
    slice      INTEGER NOT NULL,
    idx        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    send_rank  INTEGER,
    send_seq   INTEGER,
    recv_rank  INTEGER,
    recv_seq   INTEGER,
    desc_rank  INTEGER,
    desc_seq   INTEGER,
    "offset"   INTEGER,
    bytes      INTEGER,
    comm       INTEGER,
    parent     INTEGER,
    coll_seq   INTEGER,
    coll_kind  TEXT,
    root       INTEGER,
    members    TEXT,
    request    INTEGER,
    source     INTEGER,
    tag        INTEGER,
    error      TEXT,
    flags      INTEGER,
    value      INTEGER,
    value2     INTEGER,
    PRIMARY KEY (slice, idx)
) WITHOUT ROWID;
CREATE INDEX decision_kind ON decision(kind, slice);
CREATE TABLE slice_decisions (
    slice      INTEGER PRIMARY KEY,
    decisions  BLOB NOT NULL
);
CREATE TABLE mmds_rank (
    rank                INTEGER PRIMARY KEY,
    wall_ns             INTEGER NOT NULL,
    compute_ns          INTEGER NOT NULL,
    comm_ns             INTEGER NOT NULL,
    calls               INTEGER NOT NULL,
    finalized           INTEGER NOT NULL,
    granularity_min_ns  INTEGER,
    granularity_max_ns  INTEGER
);
CREATE TABLE mmds_primitive (
    rank       INTEGER NOT NULL,
    primitive  TEXT NOT NULL,
    count      INTEGER NOT NULL,
    min_ns     INTEGER NOT NULL,
    max_ns     INTEGER NOT NULL,
    total_ns   INTEGER NOT NULL,
    bytes      INTEGER NOT NULL,
    PRIMARY KEY (rank, primitive)
) WITHOUT ROWID;
CREATE TABLE mmds_histogram (
    rank       INTEGER NOT NULL,
    primitive  TEXT NOT NULL,
    metric     TEXT NOT NULL CHECK (metric IN ('latency', 'size', 'granularity', 'overhead')),
    lo         INTEGER NOT NULL,
    hi         INTEGER NOT NULL,
    count      INTEGER NOT NULL,
    PRIMARY KEY (rank, primitive, metric, lo)
) WITHOUT ROWID;
CREATE VIEW slowest_slices AS
    SELECT slice, reason, getts_ns, gtdem_ns, gtmsm_ns, gtts_ns, n_descriptors, n_blocked,
           n_matches + n_chunks + n_collectives + n_completions AS n_decisions
    FROM slice WHERE getts_ns IS NOT NULL AND reason != 'first'
    ORDER BY getts_ns DESC;
CREATE VIEW mmds_summary AS
    SELECT rank, primitive, count, min_ns, max_ns, total_ns,
           CAST(total_ns AS REAL) / count AS avg_ns, bytes
    FROM mmds_primitive WHERE count > 0;
CREATE TABLE summary_getts (
    span   INTEGER NOT NULL,
    block  INTEGER NOT NULL,
    lo     INTEGER NOT NULL,
    hi     INTEGER NOT NULL,
    PRIMARY KEY (span, block)
) WITHOUT ROWID;
CREATE TABLE summary_node (
    span          INTEGER NOT NULL,
    block         INTEGER NOT NULL,
    ncolldem_lo   INTEGER NOT NULL,
    ncolldem_hi   INTEGER NOT NULL,
    ncollmsm_lo   INTEGER NOT NULL,
    ncollmsm_hi   INTEGER NOT NULL,
    np2pdem_lo    INTEGER NOT NULL,
    np2pdem_hi    INTEGER NOT NULL,
    np2pmsm_lo    INTEGER NOT NULL,
    np2pmsm_hi    INTEGER NOT NULL,
    PRIMARY KEY (span, block)
) WITHOUT ROWID;
CREATE TABLE replay_log (
    stream      INTEGER NOT NULL,
    rank        INTEGER NOT NULL,
    chunk       INTEGER NOT NULL,
    last_slice  INTEGER NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (stream, rank, chunk)
) WITHOUT ROWID;
CREATE TABLE regenerated (
    source      TEXT NOT NULL,
    note        TEXT NOT NULL
);
CREATE TABLE payload (
    rank          INTEGER NOT NULL,
    seq           INTEGER NOT NULL,
    slice         INTEGER NOT NULL,
    kind          INTEGER NOT NULL,
    peer          INTEGER NOT NULL,
    tag           INTEGER NOT NULL,
    comm          INTEGER NOT NULL,
    bytes         INTEGER NOT NULL,
    source        INTEGER NOT NULL,
    status_tag    INTEGER NOT NULL,
    status_bytes  INTEGER NOT NULL,
    error         INTEGER NOT NULL,
    flags         INTEGER NOT NULL,
    value         INTEGER NOT NULL,
    value2        INTEGER NOT NULL,
    send_rank     INTEGER,
    send_seq      INTEGER,
    data          BLOB NOT NULL,
    PRIMARY KEY (rank, seq)
);
CREATE INDEX payload_send ON payload(send_rank, send_seq) WHERE send_rank IS NOT NULL;
CREATE TABLE check_finding (
    id INTEGER PRIMARY KEY,
    slice INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    kind TEXT NOT NULL,
    call TEXT NOT NULL,
    call_site TEXT,
    detail TEXT NOT NULL
);
CREATE TABLE call_site (
    id        INTEGER PRIMARY KEY,
    object    TEXT NOT NULL,
    offset    INTEGER NOT NULL,
    function  TEXT,
    file      TEXT,
    line      INTEGER
);
CREATE TABLE blocked_site (
    rank         INTEGER NOT NULL,
    first_slice  INTEGER NOT NULL,
    site         INTEGER NOT NULL REFERENCES call_site(id),
    PRIMARY KEY (rank, first_slice)
) WITHOUT ROWID;
CREATE TABLE content_checksum (
    algorithm  TEXT NOT NULL,
    covers     TEXT NOT NULL,
    digest     TEXT NOT NULL
);
CREATE TABLE explored (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    kind    TEXT NOT NULL,
    rank    INTEGER NOT NULL,
    slice   INTEGER,
    runs    INTEGER NOT NULL,
    detail  TEXT NOT NULL
);
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
CREATE VIEW schedule_bytes AS
    SELECT slice,
           length(descriptors) AS descriptor_bytes,
           length(decisions) AS decision_bytes,
           (substr(descriptors, 1, 1) = x'02') AS descriptors_packed,
           (substr(decisions, 1, 1) = x'02') AS decisions_packed
    FROM slice_schedule;
CREATE TABLE "blocked_span" (
    rank         INTEGER NOT NULL,
    first_slice  INTEGER NOT NULL,
    last_slice   INTEGER,
    call         TEXT NOT NULL,
    PRIMARY KEY (rank, first_slice)
) WITHOUT ROWID;
CREATE INDEX blocked_span_last ON blocked_span(last_slice, first_slice, call);
CREATE INDEX blocked_span_length ON blocked_span(last_slice - first_slice);
CREATE TRIGGER blocked_span_site_delete AFTER DELETE ON blocked_span
BEGIN
    DELETE FROM blocked_site WHERE rank = OLD.rank AND first_slice = OLD.first_slice;
END;
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
CREATE TABLE schedule_batch (
    first_slice  INTEGER PRIMARY KEY,
    last_slice   INTEGER NOT NULL,
    entries      INTEGER NOT NULL,
    data         BLOB NOT NULL
);
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
INSERT INTO "desc_kind" VALUES (1, 'MPI_Send');
INSERT INTO "desc_kind" VALUES (2, 'MPI_Ssend');
INSERT INTO "desc_kind" VALUES (3, 'MPI_Rsend');
INSERT INTO "desc_kind" VALUES (4, 'MPI_Recv');
INSERT INTO "desc_kind" VALUES (5, 'MPI_Probe');
INSERT INTO "desc_kind" VALUES (6, 'MPI_Iprobe');
INSERT INTO "desc_kind" VALUES (7, 'MPI_Cancel');
INSERT INTO "desc_kind" VALUES (10, 'MPI_Barrier');
INSERT INTO "desc_kind" VALUES (11, 'MPI_Bcast');
INSERT INTO "desc_kind" VALUES (12, 'MPI_Reduce');
INSERT INTO "desc_kind" VALUES (13, 'MPI_Allreduce');
INSERT INTO "desc_kind" VALUES (14, 'MPI_Scatter');
INSERT INTO "desc_kind" VALUES (15, 'MPI_Scatterv');
INSERT INTO "desc_kind" VALUES (16, 'MPI_Gather');
INSERT INTO "desc_kind" VALUES (17, 'MPI_Gatherv');
INSERT INTO "desc_kind" VALUES (18, 'MPI_Allgather');
INSERT INTO "desc_kind" VALUES (19, 'MPI_Allgatherv');
INSERT INTO "desc_kind" VALUES (20, 'MPI_Alltoall');
INSERT INTO "desc_kind" VALUES (21, 'MPI_Alltoallv');
INSERT INTO "desc_kind" VALUES (22, 'MPI_Reduce_scatter');
INSERT INTO "desc_kind" VALUES (23, 'MPI_Reduce_scatter_block');
INSERT INTO "desc_kind" VALUES (24, 'MPI_Scan');
INSERT INTO "desc_kind" VALUES (25, 'MPI_Exscan');
INSERT INTO "desc_kind" VALUES (30, 'MPI_Comm_dup');
INSERT INTO "desc_kind" VALUES (31, 'MPI_Comm_split');
INSERT INTO "desc_kind" VALUES (32, 'MPI_Comm_free');
INSERT INTO "desc_kind" VALUES (40, 'MPI_Finalize');
