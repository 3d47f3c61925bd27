//! The per-row schedule log on demand: `descriptor` and `decision` rows expanded from the
//! compact `slice_schedule` blobs, column for column as the writer of formats 1 to 12 wrote
//! them (docs/recording.md, "descriptor", "decision"), and the `message` rows as the
//! writer of formats 14 and 15 wrote them (`messages.rs`). New recordings hold only the
//! blobs (about 440 bytes a message less); `strobe export FILE --format sqlite -o COPY.db`
//! writes a copy with these rows filled in, for SQL of one's own (`message_life`).

use rusqlite::{params, Connection};
use strobe_runtime::descriptor::{DescKind, DescRef, Descriptor, RtError};
pub use strobe_runtime::sched::error_name;
use strobe_runtime::sched::{Decision, DecisionKind, DecisionVisitor};

use crate::messages::MessageLog;
use crate::{compact, RecordError};

/// Fill `descriptor`, `decision` and `message` from every slice of the compact schedule
/// log (`slice_schedule` rows and `schedule_batch` entries) of the (writable) file `conn`, in one transaction (`message` rows a file already has are
/// written again, the same). Returns the rows written (descriptors, decisions).
/// A file without `slice_schedule` (older formats) already has its rows: nothing to do.
pub fn expand_schedule(conn: &mut Connection) -> Result<(u64, u64), RecordError> {
    let layouts = crate::schedule_rows::Layouts::of(conn)?;
    if !layouts.rows {
        return Ok((0, 0));
    }
    let tx = conn.transaction()?;
    let (mut nd, mut nc) = (0u64, 0u64);
    let mut messages = MessageLog::default();
    {
        let mut ins_desc = tx.prepare(DESCRIPTOR_INSERT)?;
        let mut ins_dec = tx.prepare(DECISION_INSERT)?;
        crate::schedule_rows::for_each(&tx, layouts, 0, u64::MAX, false, |row| {
            let slice = row.slice;
            let bad =
                |e: String| RecordError::Corrupt(format!("the schedule of slice {slice}: {e}"));
            let mut descriptors = Vec::new();
            if let Some(b) = &row.descriptors {
                descriptors = compact::decode_descriptors(b).map_err(bad)?;
                for d in &descriptors {
                    write_descriptor(&mut ins_desc, slice, d)?;
                    nd += 1;
                }
            }
            let mut decisions = Vec::new();
            if let Some(b) = &row.decisions {
                decisions = compact::decode_decisions(b).map_err(bad)?.0;
                for (idx, d) in decisions.iter().enumerate() {
                    write_decision(&mut ins_dec, slice, idx, d)?;
                    nc += 1;
                }
            }
            messages.slice(&tx, slice, &descriptors, &decisions)?;
            Ok(true)
        })?;
    }
    messages.flush(&tx)?;
    tx.commit()?;
    Ok((nd, nc))
}

const DESCRIPTOR_INSERT: &str =
    "INSERT INTO descriptor (rank, seq, slice, kind, peer, tag, comm, bytes, rbytes, request, flags)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

fn write_descriptor(
    st: &mut rusqlite::Statement<'_>,
    slice: u64,
    d: &Descriptor,
) -> rusqlite::Result<()> {
    // The MPI name; `?N` for an unknown kind code.
    let kind = match d.kind() {
        Some(k) => k.mpi_name().to_string(),
        None => format!("?{}", d.kind),
    };
    st.execute(params![
        d.rank,
        d.seq as i64,
        slice as i64,
        kind,
        d.peer,
        d.tag,
        d.comm,
        d.bytes as i64,
        d.rbytes as i64,
        d.request as i64,
        d.flags,
    ])?;
    Ok(())
}

/// One `decision` row; columns that do not apply to the kind stay NULL.
#[derive(Default)]
struct Row {
    send: Option<(u32, i64)>,
    recv: Option<(u32, i64)>,
    desc: Option<(u32, i64)>,
    offset: Option<i64>,
    bytes: Option<i64>,
    comm: Option<u32>,
    parent: Option<u32>,
    coll_seq: Option<i64>,
    coll_kind: Option<&'static str>,
    root: Option<i32>,
    members: Option<String>,
    request: Option<i64>,
    source: Option<i32>,
    tag: Option<i32>,
    error: Option<&'static str>,
    flags: Option<u32>,
    value: Option<i64>,
    value2: Option<i64>,
}

/// Fills a [`Row`] from [`Decision::visit`]. The columns are those of format 4 and keep
/// their meaning (docs/recording.md): most fields have the column of their name; a chunk's
/// `len` is stored in `bytes`, a match's `truncated` in `flags` (0/1), a collective's
/// `parts` in `members` as `[[rank,seq],...]` and its kind in `coll_kind` as the MPI name;
/// u64 values are stored as SQLite's signed 64-bit integers (two's complement).
impl DecisionVisitor for Row {
    fn kind(&mut self, _kind: DecisionKind) {}
    fn desc(&mut self, field: &'static str, v: DescRef) {
        let cell = Some((v.rank, v.seq as i64));
        match field {
            "send" => self.send = cell,
            "recv" => self.recv = cell,
            "desc" => self.desc = cell,
            _ => no_column(field),
        }
    }
    fn u32(&mut self, field: &'static str, v: u32) {
        match field {
            "comm" => self.comm = Some(v),
            "parent" => self.parent = Some(v),
            "flags" => self.flags = Some(v),
            _ => no_column(field),
        }
    }
    fn u64(&mut self, field: &'static str, v: u64) {
        let cell = Some(v as i64);
        match field {
            "bytes" | "len" => self.bytes = cell,
            "offset" => self.offset = cell,
            "coll_seq" => self.coll_seq = cell,
            "request" => self.request = cell,
            "value" => self.value = cell,
            "value2" => self.value2 = cell,
            _ => no_column(field),
        }
    }
    fn i32(&mut self, field: &'static str, v: i32) {
        match field {
            "root" => self.root = Some(v),
            "source" => self.source = Some(v),
            "tag" => self.tag = Some(v),
            _ => no_column(field),
        }
    }
    fn bool(&mut self, field: &'static str, v: bool) {
        match field {
            "truncated" => self.flags = Some(v as u32),
            _ => no_column(field),
        }
    }
    fn coll_kind(&mut self, _field: &'static str, v: DescKind) {
        self.coll_kind = Some(v.mpi_name());
    }
    /// A code outside `RtError` (never made by the scheduler) is stored as the catch-all
    /// `buffer`, as the Cap'n Proto encoding does.
    fn error(&mut self, _field: &'static str, v: u32) {
        self.error = Some(error_name(RtError::from_u32(v)));
    }
    fn desc_list(&mut self, _field: &'static str, v: &[DescRef]) {
        let items: Vec<String> = v
            .iter()
            .map(|p| format!("[{},{}]", p.rank, p.seq))
            .collect();
        self.members = Some(format!("[{}]", items.join(",")));
    }
    fn u32_list(&mut self, _field: &'static str, v: &[u32]) {
        let items: Vec<String> = v.iter().map(u32::to_string).collect();
        self.members = Some(format!("[{}]", items.join(",")));
    }
}

/// A decision field the `decision` table has no column for: a new field needs a column
/// (and a format migration) before it can be recorded. The writer tests visit every kind.
fn no_column(field: &str) -> ! {
    unreachable!("decision field `{field}` has no column in the decision table")
}

const DECISION_INSERT: &str =
    "INSERT INTO decision (slice, idx, kind, send_rank, send_seq, recv_rank, recv_seq,
        desc_rank, desc_seq, \"offset\", bytes, comm, parent, coll_seq, coll_kind, root,
        members, request, source, tag, error, flags, value, value2)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
        ?18, ?19, ?20, ?21, ?22, ?23, ?24)";

fn write_decision(
    st: &mut rusqlite::Statement<'_>,
    slice: u64,
    idx: usize,
    d: &Decision,
) -> rusqlite::Result<()> {
    let mut row = Row::default();
    d.visit(&mut row);
    st.execute(params![
        slice as i64,
        idx as i64,
        d.kind_name(),
        row.send.map(|x| x.0),
        row.send.map(|x| x.1),
        row.recv.map(|x| x.0),
        row.recv.map(|x| x.1),
        row.desc.map(|x| x.0),
        row.desc.map(|x| x.1),
        row.offset,
        row.bytes,
        row.comm,
        row.parent,
        row.coll_seq,
        row.coll_kind,
        row.root,
        row.members,
        row.request,
        row.source,
        row.tag,
        row.error,
        row.flags,
        row.value,
        row.value2,
    ])?;
    Ok(())
}

/// `strobe export FILE --format sqlite -o COPY.db`: a copy of the recording `src` (which
/// is only read) at `dst`, a new file, with `descriptor`, `decision` and `message` filled
/// in from the compact schedule. Returns the rows written (descriptors, decisions).
pub fn export_expanded(
    src: &std::path::Path,
    dst: &std::path::Path,
) -> Result<(u64, u64), RecordError> {
    if dst.exists() {
        return Err(RecordError::Exists(dst.to_path_buf()));
    }
    let conn = crate::open_recording(src)?;
    let target = dst.to_str().ok_or_else(|| {
        RecordError::NotARecording(format!("{}: not a UTF-8 path", dst.display()))
    })?;
    conn.execute("VACUUM INTO ?1", [target])?;
    drop(conn);
    let mut copy = Connection::open(dst)?;
    expand_schedule(&mut copy)
}
