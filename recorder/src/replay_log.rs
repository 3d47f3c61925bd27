//! The replay log (model.md 4.3; `docs/recording.md`, "The replay log"): what a replay needs
//! and nothing more, always recorded, a few bytes per descriptor and nothing per empty slice.
//!
//! Three streams per rank, each a sequence of LEB128 varints cut into blob chunks (one row
//! of `replay_log` per rank, stream and commit, so a crash loses at most the last batch):
//!
//! * **posting slices** (stream 0): for each slice that handled descriptors of the rank,
//!   `varint(delta << 1 | one)` with `delta` the slices since the previous such slice and
//!   `one` set when the slice handled exactly one descriptor; otherwise `varint(count)`
//!   follows. A rank posting one descriptor per slice costs one byte per descriptor.
//! * **outcomes** (stream 1): the rank's timing-dependent outcomes in call order, one token
//!   `varint(x << 2 | t)`: `t = 0` a run of `x` failed tests; `t = 1` a call that reported
//!   all of its `x` requests; `t = 2` a list of `x` indices follows (first absolute, then
//!   each minus the previous minus one); `t = 3` an `MPI_Wtime` value, `x` the zigzag delta
//!   in nanoseconds from the rank's previous one. The token `2` (a list of no indices,
//!   which no call reports) is an escape for a libc call outside MPI (`time`, `getpid`,
//!   ...): `varint(which)` follows (`strobe_runtime::outcome::LibcCall`), then the zigzag
//!   delta of its value from the rank's previous value of the same call. Recordings made
//!   before it never hold a `2`, so they read as they did.
//! * **blocked** (stream 2): whether the rank was blocked in an MPI call when each slice
//!   started is timing, and deadlock detection and the schedule log's `blocked` table
//!   depend on it, so replay takes it from here. Most of it is predictable from the
//!   schedule ([`BlockedPredictor`]: a rank is blocked from the slice that handles its
//!   blocking descriptor until the slice that completes it), so the stream holds only the
//!   slices at which "actual differs from predicted" flips, as deltas (the first flip is
//!   to "differs"): blocking in `MPI_Wait*` after non-blocking calls, and races.
//!   Recordings since format 19 store it as stream 3, one episode of "differs" at a time:
//!   `varint(delta << 1 | short)` with `delta` the slices from the end of the previous
//!   episode (from 0 for the first) to its start, and `short` set when it lasts exactly
//!   one slice; otherwise `varint(length)` follows, unless the episode is still open when
//!   the stream ends (an episode that began in a commit's last slice is written with the
//!   next commit, so the bytes never depend on when commits fell). The common episode, a strobe that fired between a rank's post and
//!   its block, costs one byte instead of two (1.0 instead of 2.0 bytes per descriptor on
//!   a noisy `token_ring`). Stream 2 (one delta per flip) is still read.
//!
//! Slice digests are the `slice` table's, which is written for every slice whatever the
//! layers say.

use std::collections::BTreeMap;

use std::collections::BTreeSet;

use rusqlite::{params, Connection};
use strobe_runtime::descriptor::{Descriptor, FLAG_BLOCKING};
use strobe_runtime::outcome::{
    LibcCall, OutcomeRec, OUT_ALL, OUT_FAILS, OUT_INDEX, OUT_LIBC, OUT_LIST, OUT_WTIME,
};
use strobe_runtime::sched::Decision;

use crate::recording::validate::MAX_SLICES;
use crate::recording::Job;
use crate::RecordError;

pub const STREAM_POSTING: i64 = 0;
pub const STREAM_OUTCOMES: i64 = 1;
/// Blocked flips as deltas, one varint per flip (written before format 19; still read).
pub const STREAM_BLOCKED: i64 = 2;
/// Blocked flips as episodes of "differs" (written since format 19): see the module doc.
pub const STREAM_BLOCKED_EPISODES: i64 = 3;

/// The most bytes of a stream in one `replay_log` row. A row of the (`WITHOUT ROWID`)
/// table longer than about 1,000 bytes does not fit in its 4 KiB B-tree page's share and
/// spills into an overflow page of its own, nearly empty: a writer commit's kilobyte of one
/// stream (`comet_exchange`) took a 4 KiB page for 20-50 bytes, and the table's pages held
/// 2.9 bytes a descriptor instead of 1.05. The loader concatenates a stream's chunks, so a
/// commit's bytes may be cut anywhere.
pub const CHUNK_MAX: usize = 960;

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads varints from a byte stream; errors name the stream for the corruption report.
pub struct VarintReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> VarintReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        VarintReader { bytes, pos: 0 }
    }
    pub fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }
    pub fn read(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .bytes
                .get(self.pos)
                .ok_or_else(|| format!("varint cut short at byte {}", self.pos))?;
            self.pos += 1;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint too long at byte {}", self.pos))
    }
    /// The next `n` bytes as they are.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("{n} bytes cut short at byte {}", self.pos))?;
        let b = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(b)
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Predicts which ranks are blocked when a slice starts, from the schedule alone: a rank is
/// blocked from the slice that handles one of its blocking descriptors until that
/// descriptor completes (it is not blocked at the start of the next slice). The recorder
/// and the replayer run the same predictor, so only the differences are stored.
#[derive(Clone, Debug, Default)]
pub struct BlockedPredictor {
    pending: BTreeMap<u32, BTreeSet<u64>>,
}

impl BlockedPredictor {
    /// Blocking descriptors `(rank, seq)` handled in the slice (before asking for its
    /// prediction); see [`blocking_of`].
    pub fn handled(&mut self, blocking: &[(u32, u64)]) {
        for &(rank, seq) in blocking {
            self.pending.entry(rank).or_default().insert(seq);
        }
    }
    pub fn predicted(&self, rank: u32) -> bool {
        self.pending.get(&rank).is_some_and(|p| !p.is_empty())
    }
    /// The descriptors `(rank, seq)` the slice completed (after its prediction was used);
    /// see [`completions_of`].
    pub fn decided(&mut self, completed: &[(u32, u64)]) {
        for (rank, seq) in completed {
            if let Some(p) = self.pending.get_mut(rank) {
                p.remove(seq);
            }
        }
    }
}

/// The blocking descriptors of a slice's batch.
pub fn blocking_of(descs: &[Descriptor]) -> Vec<(u32, u64)> {
    let mut v = Vec::new();
    blocking_into(descs, &mut v);
    v
}

/// [`blocking_of`] into `v` (cleared first), keeping its capacity.
pub fn blocking_into(descs: &[Descriptor], v: &mut Vec<(u32, u64)>) {
    v.clear();
    v.extend(
        descs
            .iter()
            .filter(|d| d.flags & FLAG_BLOCKING != 0)
            .map(|d| (d.rank, d.seq)),
    );
}

/// The descriptors a slice's decisions complete.
pub fn completions_of(decisions: &[Decision]) -> Vec<(u32, u64)> {
    let mut v = Vec::new();
    completions_into(decisions, &mut v);
    v
}

/// [`completions_of`] into `v` (cleared first), keeping its capacity.
pub fn completions_into(decisions: &[Decision], v: &mut Vec<(u32, u64)>) {
    v.clear();
    v.extend(
        decisions
            .iter()
            .filter_map(Decision::completion)
            .map(|(d, _)| (d.rank, d.seq)),
    );
}

/// Descriptors per rank in a slice's canonical batch (sorted by rank, then sequence).
pub fn posted_per_rank(descs: &[Descriptor]) -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    posted_per_rank_into(descs, &mut v);
    v
}

/// [`posted_per_rank`] into `v` (cleared first), keeping its capacity.
pub fn posted_per_rank_into(descs: &[Descriptor], v: &mut Vec<(u32, u32)>) {
    v.clear();
    for d in descs {
        match v.last_mut() {
            Some((r, n)) if *r == d.rank => *n += 1,
            _ => v.push((d.rank, 1)),
        }
    }
}

#[derive(Default)]
struct RankState {
    last_post_slice: u64,
    posting: Vec<u8>,
    last_wtime: u64,
    /// The previous value of each libc call (`LibcCall as usize`), for deltas.
    last_libc: [u64; LibcCall::MAX as usize + 1],
    prev_index: Option<u64>,
    outcomes: Vec<u8>,
    /// Whether the rank's actual blocked state differs from the prediction.
    differs: bool,
    /// The slice at which the last episode of "differs" ended (0: none yet).
    last_end: u64,
    /// The open episode's first slice, and whether its start token is written (a flush
    /// writes it in the long form, so a crash loses no open episode).
    open: Option<(u64, bool)>,
    blocked: Vec<u8>,
    /// Chunks written so far, per stream.
    chunks: [i64; 4],
}

/// Encodes the replay log as slices and outcomes arrive (writer thread only).
#[derive(Default)]
pub struct ReplayLogEncoder {
    ranks: BTreeMap<u32, RankState>,
    predictor: BlockedPredictor,
    last_slice: u64,
    /// The previous slice's blocked ranks (ascending) and the ranks its decisions
    /// completed a descriptor of: what can change a rank's state in the next slice.
    prev_blocked: Vec<u32>,
    completed_ranks: Vec<u32>,
    /// Bytes of varint data produced so far (for size reports).
    pub bytes: u64,
}

/// Append to `out` the ranks in exactly one of two ascending lists.
fn symmetric_difference(a: &[u32], b: &[u32], out: &mut Vec<u32>) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

impl ReplayLogEncoder {
    /// One slice: descriptors handled per rank (ranks ascending, counts non-zero), the
    /// blocking ones among them, the ranks blocked when it started (ascending), and the
    /// descriptors its decisions completed.
    pub fn slice(
        &mut self,
        slice: u64,
        posted: &[(u32, u32)],
        blocking: &[(u32, u64)],
        blocked: &[u32],
        completed: &[(u32, u64)],
    ) {
        self.last_slice = slice;
        for &(rank, count) in posted {
            let st = self.ranks.entry(rank).or_default();
            let delta = slice - st.last_post_slice;
            st.last_post_slice = slice;
            put_varint(&mut st.posting, delta << 1 | (count == 1) as u64);
            if count != 1 {
                put_varint(&mut st.posting, count as u64);
            }
        }
        self.predictor.handled(blocking);
        // Ranks whose "differs from the prediction" state may change in this slice: those
        // whose blocked state changed since the previous slice, and those whose prediction
        // may have (a blocking descriptor handled now, a completion in the previous
        // slice). Every other rank's state is what it was: a 1,000-rank job costs the
        // ranks that moved, not 1,000 lookups per slice.
        let mut candidates = std::mem::take(&mut self.completed_ranks);
        symmetric_difference(&self.prev_blocked, blocked, &mut candidates);
        candidates.extend(blocking.iter().map(|&(r, _)| r));
        candidates.sort_unstable();
        candidates.dedup();
        self.prev_blocked.clear();
        self.prev_blocked.extend_from_slice(blocked);
        for &r in &candidates {
            let actual = blocked.binary_search(&r).is_ok();
            let differs = actual != self.predictor.predicted(r);
            if differs != self.ranks.get(&r).is_some_and(|s| s.differs) {
                self.flip(r, slice);
            }
        }
        self.predictor.decided(completed);
        candidates.clear();
        candidates.extend(completed.iter().map(|&(r, _)| r));
        self.completed_ranks = candidates;
    }

    /// A flip at `slice`, the slice just handled (as `slice` would find it).
    #[cfg(test)]
    pub(crate) fn flip_at(&mut self, rank: u32, slice: u64) {
        self.last_slice = slice;
        self.flip(rank, slice);
    }

    fn flip(&mut self, rank: u32, slice: u64) {
        let st = self.ranks.entry(rank).or_default();
        st.differs = !st.differs;
        if st.differs {
            st.open = Some((slice, false));
            return;
        }
        let Some((start, written)) = st.open.take() else {
            return;
        };
        let len = slice - start;
        let delta = start - st.last_end;
        match (written, len) {
            (true, _) => put_varint(&mut st.blocked, len),
            (false, 1) => put_varint(&mut st.blocked, delta << 1 | 1),
            (false, _) => {
                put_varint(&mut st.blocked, delta << 1);
                put_varint(&mut st.blocked, len);
            }
        }
        st.last_end = slice;
    }

    /// Outcome records of one rank, in order (a list may be split across calls).
    pub fn outcomes(&mut self, rank: u32, recs: &[OutcomeRec]) {
        let st = self.ranks.entry(rank).or_default();
        for r in recs {
            let o = &mut st.outcomes;
            match r.kind {
                OUT_FAILS => put_varint(o, (r.n as u64) << 2),
                OUT_ALL => put_varint(o, (r.n as u64) << 2 | 1),
                OUT_LIST => {
                    put_varint(o, (r.n as u64) << 2 | 2);
                    st.prev_index = None;
                }
                OUT_INDEX => {
                    let v = match st.prev_index {
                        None => r.value,
                        Some(p) => r.value.saturating_sub(p + 1),
                    };
                    st.prev_index = Some(r.value);
                    put_varint(o, v);
                }
                OUT_WTIME => {
                    let d = r.value.wrapping_sub(st.last_wtime) as i64;
                    st.last_wtime = r.value;
                    put_varint(o, zigzag(d) << 2 | 3);
                }
                OUT_LIBC if LibcCall::from_n(r.n).is_some() => {
                    let last = &mut st.last_libc[r.n as usize];
                    let d = r.value.wrapping_sub(*last) as i64;
                    *last = r.value;
                    put_varint(o, LIBC_ESCAPE);
                    put_varint(o, r.n as u64);
                    put_varint(o, zigzag(d));
                }
                // Unknown kinds cannot come from this runtime; dropping one would shift the
                // stream, so record it as a zero-length run the replay treats as damage.
                _ => put_varint(o, 0),
            }
        }
    }

    /// The recording ends: write the start of every episode still open (one that began
    /// in the last slice included), for the final flush. Whether anything was written.
    pub fn end_episodes(&mut self) -> bool {
        let mut wrote = false;
        for s in self.ranks.values_mut() {
            if let Some((start, written @ false)) = s.open.as_mut() {
                put_varint(&mut s.blocked, (*start - s.last_end) << 1);
                *written = true;
                wrote = true;
            }
        }
        wrote
    }

    /// Write what accumulated since the last flush as chunks (inside the writer's open
    /// transaction, so a chunk commits together with its slices).
    pub fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let mut st = conn.prepare_cached(
            "INSERT INTO replay_log (stream, rank, chunk, last_slice, data) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for (&rank, s) in self.ranks.iter_mut() {
            // An open episode that began before this batch's last slice is long: its
            // start goes out now, in the long form it would have anyway (its length
            // follows when it ends), so a crash leaves it open to the end of the file and
            // the bytes never depend on when commits fell (a regenerated recording's are
            // the original's). One that began in the last slice waits for the next commit.
            if let Some((start, written @ false)) = s.open.as_mut() {
                if *start < self.last_slice {
                    put_varint(&mut s.blocked, (*start - s.last_end) << 1);
                    *written = true;
                }
            }
            for (stream, buf) in [
                (STREAM_POSTING, &mut s.posting),
                (STREAM_OUTCOMES, &mut s.outcomes),
                (STREAM_BLOCKED_EPISODES, &mut s.blocked),
            ] {
                if buf.is_empty() {
                    continue;
                }
                let chunk = &mut s.chunks[stream as usize];
                for piece in buf.chunks(CHUNK_MAX) {
                    st.execute(params![stream, rank, *chunk, self.last_slice as i64, piece])?;
                    *chunk += 1;
                }
                self.bytes += buf.len() as u64;
                buf.clear();
            }
        }
        Ok(())
    }
}

/// Stream 3: episodes of "differs" as flips (see the module doc).
pub(crate) fn decode_episodes(rd: &mut VarintReader<'_>) -> Result<Vec<u64>, String> {
    let mut flips = Vec::new();
    let mut end = 0u64;
    while !rd.at_end() {
        let v = rd.read()?;
        let delta = v >> 1;
        if delta == 0 {
            return Err(format!(
                "an episode starts where the last ended, slice {end}"
            ));
        }
        let start = end
            .checked_add(delta)
            .ok_or_else(|| "slice overflow".to_string())?;
        flips.push(start);
        let len = if v & 1 == 1 {
            1
        } else if rd.at_end() {
            // Still open when the recording ended.
            break;
        } else {
            rd.read()?
        };
        if len == 0 {
            return Err(format!("an episode of no slices at slice {start}"));
        }
        end = start
            .checked_add(len)
            .ok_or_else(|| "slice overflow".to_string())?;
        flips.push(end);
    }
    Ok(flips)
}

/// The digest of a slice without decisions (the `slice` table has no row for a slice in
/// which nothing happened outside the metrics and schedule-log windows).
pub fn empty_digest() -> u64 {
    strobe_runtime::sched::SliceDecisions::default().digest()
}

/// A rank's replay log, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankLog {
    /// (slice, descriptors of this rank handled in it), slices ascending.
    pub posting: Vec<(u64, u32)>,
    /// Timing-dependent outcomes, in call order.
    pub outcomes: Vec<OutcomeRec>,
    /// Slices at which "blocked when the slice started" began or stopped differing from
    /// the [`BlockedPredictor`] (first flip: differs).
    pub blocked_flips: Vec<u64>,
}

/// The whole replay log of a recording.
#[derive(Clone, Debug, Default)]
pub struct ReplayLog {
    pub ranks: Vec<RankLog>,
    /// Digest of every slice, index `slice - 1`.
    pub digests: Vec<u64>,
}

fn corrupt(what: String) -> RecordError {
    RecordError::Corrupt(what)
}

impl ReplayLog {
    /// Read and decode the replay log of the recording of `job` (`Recording::replay_log`).
    pub(crate) fn load(conn: &Connection, job: &Job) -> Result<ReplayLog, RecordError> {
        // One read transaction: the replay log and the slice table are cross-checked, and a
        // recording still being written must not commit between the two reads. (Dropped
        // at the end: nothing is written, the rollback only ends the snapshot.)
        let conn = &*conn.unchecked_transaction()?;
        let ranks = job.ranks;
        let has: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'replay_log'",
            [],
            |r| r.get(0),
        )?;
        if has == 0 {
            return Err(RecordError::NotARecording(
                "this recording has no replay log (it was made before strobe recorded one)".into(),
            ));
        }
        let mut streams: BTreeMap<(i64, i64), Vec<u8>> = BTreeMap::new();
        let mut st = conn.prepare(
            "SELECT stream, rank, chunk, data FROM replay_log ORDER BY stream, rank, chunk",
        )?;
        let mut rows = st.query([])?;
        let mut expect: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        while let Some(row) = rows.next()? {
            let (stream, rank, chunk): (i64, i64, i64) = (row.get(0)?, row.get(1)?, row.get(2)?);
            let data: Vec<u8> = row.get(3)?;
            if !(0..=3).contains(&stream) || rank < 0 || rank >= ranks as i64 {
                return Err(corrupt(format!(
                    "replay_log has a chunk for stream {stream}, rank {rank} (the job has {ranks} ranks)"
                )));
            }
            let next = expect.entry((stream, rank)).or_insert(0);
            if chunk != *next {
                return Err(corrupt(format!(
                    "replay_log stream {stream} of rank {rank} is missing chunk {next}"
                )));
            }
            *next += 1;
            streams
                .entry((stream, rank))
                .or_default()
                .extend_from_slice(&data);
        }
        let mut log = ReplayLog {
            ranks: vec![RankLog::default(); ranks as usize],
            digests: Vec::new(),
        };
        for ((stream, rank), bytes) in &streams {
            let rl = &mut log.ranks[*rank as usize];
            let bad =
                |e: String| corrupt(format!("replay_log stream {stream} of rank {rank}: {e}"));
            let mut rd = VarintReader::new(bytes);
            match *stream {
                STREAM_POSTING => {
                    let mut slice = 0u64;
                    while !rd.at_end() {
                        let v = rd.read().map_err(bad)?;
                        let delta = v >> 1;
                        let count = if v & 1 == 1 {
                            1
                        } else {
                            rd.read().map_err(bad)?
                        };
                        if delta == 0 || count == 0 || count > u32::MAX as u64 {
                            return Err(bad(format!("bad entry after slice {slice}")));
                        }
                        slice = slice
                            .checked_add(delta)
                            .ok_or_else(|| bad("slice overflow".into()))?;
                        rl.posting.push((slice, count as u32));
                    }
                }
                STREAM_OUTCOMES => rl.outcomes = decode_outcomes(&mut rd).map_err(bad)?,
                STREAM_BLOCKED_EPISODES => {
                    if streams.contains_key(&(STREAM_BLOCKED, *rank)) {
                        return Err(bad("the rank also has blocked flips as stream 2".into()));
                    }
                    rl.blocked_flips = decode_episodes(&mut rd).map_err(bad)?;
                }
                _ => {
                    let mut slice = 0u64;
                    while !rd.at_end() {
                        let d = rd.read().map_err(bad)?;
                        if d == 0 {
                            return Err(bad(format!("zero delta after slice {slice}")));
                        }
                        slice = slice
                            .checked_add(d)
                            .ok_or_else(|| bad("slice overflow".into()))?;
                        rl.blocked_flips.push(slice);
                    }
                }
            }
        }
        // Digests; slices without a row (nothing happened, outside both windows) have the
        // empty digest. A missing row inside a window is damage.
        let (schedule, metrics) = (job.schedule_log, job.metrics);
        let empty = empty_digest();
        let mut st =
            conn.prepare("SELECT slice, digest, n_descriptors FROM slice ORDER BY slice")?;
        let mut rows = st.query([])?;
        let mut posted = Posted::new(&log);
        let fill = |log: &mut ReplayLog, upto: u64| -> Result<(), RecordError> {
            while (log.digests.len() as u64) < upto {
                let missing = log.digests.len() as u64 + 1;
                if schedule.covers(missing) || metrics.covers(missing) {
                    return Err(corrupt(format!(
                        "slice {missing} is missing from the slice table"
                    )));
                }
                log.digests.push(empty);
            }
            Ok(())
        };
        while let Some(row) = rows.next()? {
            let (slice, digest, n): (i64, i64, i64) = (row.get(0)?, row.get(1)?, row.get(2)?);
            if slice <= log.digests.len() as i64 {
                return Err(corrupt(format!("slice {slice} appears out of order")));
            }
            if slice as u64 > MAX_SLICES || job.total_slices.is_some_and(|t| slice as u64 > t) {
                return Err(corrupt(format!(
                    "slice {slice} lies beyond the recording's end"
                )));
            }
            posted.check(slice as u64, n)?;
            fill(&mut log, slice as u64 - 1)?;
            log.digests.push(digest as u64);
        }
        posted.check(u64::MAX, 0)?;
        if let Some(t) = job.total_slices {
            // Slices past the last row are quiet ones, each 8 bytes here: no engine runs
            // ten million slices a second, so more than that is a tampered count (and a
            // memory bomb), not a job.
            let quiet = t.saturating_sub(log.digests.len() as u64);
            let possible = job.elapsed_ns.unwrap_or(0).max(0) as u64 / 100;
            if quiet > possible {
                return Err(corrupt(format!(
                    "job.total_slices is {t}, but the slice table ends at {} and the job ran {} ns",
                    log.digests.len(),
                    job.elapsed_ns.unwrap_or(0)
                )));
            }
            fill(&mut log, t)?;
        }
        Ok(log)
    }

    /// The last recorded slice.
    pub fn last_slice(&self) -> u64 {
        self.digests.len() as u64
    }
}

/// Cross-check of the posting streams with the `slice` table: the descriptors the ranks'
/// streams say a slice handled must add up to the slice row's `n_descriptors`, and no
/// stream may post in a slice without a row (such a slice handled nothing). Both are
/// written in the same transaction, so a difference is damage — an emptied replay log, a
/// deleted trailing chunk — which a replay would otherwise report as a divergence
/// (issue 11 item 10).
struct Posted {
    /// (slice, descriptors) over all ranks, sorted by slice; `next` walks it.
    entries: Vec<(u64, u64)>,
    next: usize,
}

impl Posted {
    fn new(log: &ReplayLog) -> Posted {
        let mut entries: Vec<(u64, u64)> = log
            .ranks
            .iter()
            .flat_map(|r| r.posting.iter().map(|&(s, c)| (s, c as u64)))
            .collect();
        entries.sort_unstable();
        Posted { entries, next: 0 }
    }

    /// The slice row `slice` says it handled `n` descriptors (`u64::MAX`: the end).
    fn check(&mut self, slice: u64, n: i64) -> Result<(), RecordError> {
        let mut sum = 0u64;
        while let Some(&(s, c)) = self.entries.get(self.next) {
            if s > slice {
                break;
            }
            if s < slice {
                return Err(corrupt(format!(
                    "the replay log posts descriptors in slice {s}, which has no slice row"
                )));
            }
            sum = sum.saturating_add(c);
            self.next += 1;
        }
        if slice != u64::MAX && sum != n as u64 {
            return Err(corrupt(format!(
                "slice {slice} handled {n} descriptors, but the replay log has {sum}"
            )));
        }
        Ok(())
    }
}

/// Most requests one test or wait call can report: the replaying rank refuses a record
/// naming more (`strobe_runtime::outcome`, `MAX_REQUESTS`) and stops as diverged with "the
/// recording is damaged". Refusing it here instead makes that damage what it is — exit 2
/// before anything runs — and leaves the rank's check for an outcome file changed during
/// the replay, which no recording can cause.
const MAX_REQUESTS: u64 = 1 << 24;

/// The outcome token that introduces a libc call (an empty index list, which no call reports).
const LIBC_ESCAPE: u64 = 2;

fn decode_outcomes(rd: &mut VarintReader<'_>) -> Result<Vec<OutcomeRec>, String> {
    let mut out = Vec::new();
    let mut last_wtime = 0u64;
    let mut last_libc = [0u64; LibcCall::MAX as usize + 1];
    while !rd.at_end() {
        let v = rd.read()?;
        let x = v >> 2;
        if v == LIBC_ESCAPE {
            let which = rd.read()?;
            let call = u32::try_from(which)
                .ok()
                .and_then(LibcCall::from_n)
                .ok_or_else(|| format!("bad libc call {which} in the outcome stream"))?;
            let last = &mut last_libc[call as usize];
            *last = last.wrapping_add(unzigzag(rd.read()?) as u64);
            out.push(OutcomeRec::libc(call, *last));
            continue;
        }
        match v & 3 {
            0 if x > 0 && x <= u32::MAX as u64 => out.push(OutcomeRec::fails(x as u32)),
            1 if x <= MAX_REQUESTS => out.push(OutcomeRec {
                kind: OUT_ALL,
                n: x as u32,
                value: 0,
            }),
            2 if x <= MAX_REQUESTS => {
                out.push(OutcomeRec {
                    kind: OUT_LIST,
                    n: x as u32,
                    value: 0,
                });
                let mut prev: Option<u64> = None;
                for _ in 0..x {
                    let d = rd.read()?;
                    let i = match prev {
                        None => d,
                        Some(p) => p.checked_add(d + 1).ok_or("index overflow")?,
                    };
                    prev = Some(i);
                    out.push(OutcomeRec {
                        kind: OUT_INDEX,
                        n: 0,
                        value: i,
                    });
                }
            }
            3 => {
                last_wtime = last_wtime.wrapping_add(unzigzag(x) as u64);
                out.push(OutcomeRec::wtime(last_wtime));
            }
            _ => return Err(format!("bad outcome token {v}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "replay_log_tests.rs"]
mod tests;
