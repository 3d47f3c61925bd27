//! Timing-dependent outcomes: what a rank's `MPI_Test*`, `MPI_Waitany`/`Waitsome` and
//! `MPI_Wtime` calls returned (model.md 4.3). They are the only rank-side facts that the
//! slice schedule does not determine, so a recording must hold them and a replay must force
//! them.
//!
//! Capture costs no system call: the rank pushes fixed-size [`OutcomeRec`]s into a
//! single-producer/single-consumer ring in its job-segment slot, and a run of failed tests
//! is only a counter in the slot (`RankSlot::pending_fails`) until some other outcome (or
//! `MPI_Finalize`) closes it. The node manager drains the ring at every slice and hands the
//! records to its `SliceSink::outcomes`; after the job the launcher drains what is left,
//! including the open run of failures of a rank that died.
//!
//! The same record type is what a replaying rank consumes (from the file the replayer hands
//! it through [`ENV_REPLAY_OUTCOMES`]), so the runtime never parses the recorder's encoding.

/// Environment variable naming the file a replaying rank reads its recorded outcomes from
/// (set by the replayer; its presence puts the rank in replay mode).
pub const ENV_REPLAY_OUTCOMES: &str = "STROBE_REPLAY_OUTCOMES";

/// Capacity of each rank's outcome ring (records, 64 KiB). A rank that makes more
/// timing-dependent calls than this within one slice (an `MPI_Wtime` spin loop) waits for
/// its node manager to drain the ring at the next slice.
pub const OUTCOME_CAPACITY: usize = 4096;

/// `n` consecutive tests that reported nothing complete.
pub const OUT_FAILS: u32 = 1;
/// A test or wait that reported every request of its set: indices `0..n`.
pub const OUT_ALL: u32 = 2;
/// The head of an explicit index list of `n` entries; `n` [`OUT_INDEX`] records follow.
pub const OUT_LIST: u32 = 3;
/// One index of a list (`value`).
pub const OUT_INDEX: u32 = 4;
/// `MPI_Wtime` returned `value` nanoseconds on `CLOCK_MONOTONIC`.
pub const OUT_WTIME: u32 = 5;
/// A libc call outside MPI (`time`, `gettimeofday`, `clock_gettime`, `getpid`,
/// `getrandom`) returned `value`; `n` is which one ([`LibcCall`]).
pub const OUT_LIBC: u32 = 6;

/// The libc calls whose results a rank records and replays (`n` of an [`OUT_LIBC`] record).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LibcCall {
    /// `time()`: seconds since the epoch.
    Time = 1,
    /// `gettimeofday()`: microseconds since the epoch.
    Gettimeofday = 2,
    /// `clock_gettime(CLOCK_REALTIME)`: nanoseconds.
    ClockRealtime = 3,
    /// `clock_gettime(CLOCK_MONOTONIC)`: nanoseconds.
    ClockMonotonic = 4,
    /// `getpid()`.
    Getpid = 5,
    /// `getrandom()`: its return value (bytes, or `-errno`); `RandomBytes` records follow.
    Getrandom = 6,
    /// Eight bytes `getrandom()` returned (little-endian; the last record zero-padded).
    RandomBytes = 7,
}

impl LibcCall {
    /// The highest `n` a well-formed [`OUT_LIBC`] record has.
    pub const MAX: u32 = 7;

    pub fn from_n(n: u32) -> Option<LibcCall> {
        Some(match n {
            1 => LibcCall::Time,
            2 => LibcCall::Gettimeofday,
            3 => LibcCall::ClockRealtime,
            4 => LibcCall::ClockMonotonic,
            5 => LibcCall::Getpid,
            6 => LibcCall::Getrandom,
            7 => LibcCall::RandomBytes,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            LibcCall::Time => "time",
            LibcCall::Gettimeofday => "gettimeofday",
            LibcCall::ClockRealtime => "clock_gettime(CLOCK_REALTIME)",
            LibcCall::ClockMonotonic => "clock_gettime(CLOCK_MONOTONIC)",
            LibcCall::Getpid => "getpid",
            LibcCall::Getrandom => "getrandom",
            LibcCall::RandomBytes => "getrandom (its bytes)",
        }
    }
}

/// One timing-dependent outcome record (16 bytes, plain data: it crosses processes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutcomeRec {
    pub kind: u32,
    pub n: u32,
    pub value: u64,
}

impl OutcomeRec {
    pub fn fails(n: u32) -> Self {
        OutcomeRec {
            kind: OUT_FAILS,
            n,
            value: 0,
        }
    }
    pub fn wtime(ns: u64) -> Self {
        OutcomeRec {
            kind: OUT_WTIME,
            n: 0,
            value: ns,
        }
    }
    pub fn libc(call: LibcCall, value: u64) -> Self {
        OutcomeRec {
            kind: OUT_LIBC,
            n: call as u32,
            value,
        }
    }

    /// The records for a call that reported `indices` (ascending) out of `of` requests.
    pub fn for_indices(indices: &[usize], of: usize) -> Vec<OutcomeRec> {
        if indices.is_empty() {
            return vec![OutcomeRec::fails(1)];
        }
        if indices.len() == of && indices.iter().enumerate().all(|(i, &x)| i == x) {
            return vec![OutcomeRec {
                kind: OUT_ALL,
                n: of as u32,
                value: 0,
            }];
        }
        let mut v = Vec::with_capacity(indices.len() + 1);
        v.push(OutcomeRec {
            kind: OUT_LIST,
            n: indices.len() as u32,
            value: 0,
        });
        v.extend(indices.iter().map(|&i| OutcomeRec {
            kind: OUT_INDEX,
            n: 0,
            value: i as u64,
        }));
        v
    }
}

/// A decoded outcome, as a replaying rank consumes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A test that reported nothing.
    Fail,
    /// A test or wait that reported these indices (ascending).
    Indices(Vec<usize>),
    /// `MPI_Wtime`, in nanoseconds.
    Wtime(u64),
    /// A libc call outside MPI and the value it returned.
    Libc(LibcCall, u64),
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self {
            Outcome::Fail => "a test that found nothing complete".into(),
            Outcome::Indices(i) => format!("a test/wait reporting requests {i:?}"),
            Outcome::Wtime(ns) => format!("MPI_Wtime = {:.9}", *ns as f64 * 1e-9),
            Outcome::Libc(call, v) => format!("{} = {v}", call.name()),
        }
    }
}

/// Reads a stream of [`OutcomeRec`]s one [`Outcome`] at a time (runs of failures are
/// handed out one by one).
#[derive(Debug, Default)]
pub struct OutcomeCursor {
    recs: Vec<OutcomeRec>,
    pos: usize,
    fails_left: u32,
    /// Outcomes handed out so far (for divergence reports).
    pub consumed: u64,
}

/// More requests than one test or wait can name (a bound for damaged files).
const MAX_REQUESTS: u32 = 1 << 24;

/// The stream does not hold a well-formed outcome where one was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed outcome record {kind} at position {pos}")]
pub struct MalformedOutcome {
    pub kind: u32,
    pub pos: usize,
}

impl OutcomeCursor {
    pub fn new(recs: Vec<OutcomeRec>) -> Self {
        OutcomeCursor {
            recs,
            ..Default::default()
        }
    }

    /// The next outcome, `Ok(None)` at the end of the stream.
    pub fn next_outcome(&mut self) -> Result<Option<Outcome>, MalformedOutcome> {
        if self.fails_left > 0 {
            self.fails_left -= 1;
            self.consumed += 1;
            return Ok(Some(Outcome::Fail));
        }
        let Some(r) = self.recs.get(self.pos).copied() else {
            return Ok(None);
        };
        let bad = MalformedOutcome {
            kind: r.kind,
            pos: self.pos,
        };
        self.pos += 1;
        let o = match r.kind {
            OUT_FAILS if r.n > 0 => {
                self.fails_left = r.n - 1;
                Outcome::Fail
            }
            // More requests than any call could pass means a damaged file, not a call.
            OUT_ALL if r.n <= MAX_REQUESTS => Outcome::Indices((0..r.n as usize).collect()),
            OUT_LIST if r.n <= MAX_REQUESTS => {
                let n = r.n as usize;
                let items = self.recs.get(self.pos..self.pos + n).ok_or(bad.clone())?;
                if items.iter().any(|x| x.kind != OUT_INDEX) {
                    return Err(bad);
                }
                self.pos += n;
                Outcome::Indices(items.iter().map(|x| x.value as usize).collect())
            }
            OUT_WTIME => Outcome::Wtime(r.value),
            OUT_LIBC => Outcome::Libc(LibcCall::from_n(r.n).ok_or(bad)?, r.value),
            _ => return Err(bad),
        };
        self.consumed += 1;
        Ok(Some(o))
    }
}

/// The replay outcome file: magic, rank count, then per rank a record count and its
/// records. Written by the replayer, read by each replaying rank at init.
pub const FILE_MAGIC: u64 = u64::from_le_bytes(*b"strbOUT1");

/// Serialize every rank's outcome records into the replay outcome file format.
pub fn encode_file(per_rank: &[Vec<OutcomeRec>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&FILE_MAGIC.to_le_bytes());
    out.extend_from_slice(&(per_rank.len() as u64).to_le_bytes());
    for recs in per_rank {
        out.extend_from_slice(&(recs.len() as u64).to_le_bytes());
        for r in recs {
            out.extend_from_slice(&r.kind.to_le_bytes());
            out.extend_from_slice(&r.n.to_le_bytes());
            out.extend_from_slice(&r.value.to_le_bytes());
        }
    }
    out
}

/// Read rank `rank`'s records from a replay outcome file.
pub fn decode_file(bytes: &[u8], rank: u32) -> Result<Vec<OutcomeRec>, String> {
    let mut pos = 0usize;
    let u64_at = |pos: &mut usize| -> Result<u64, String> {
        let b = bytes
            .get(*pos..*pos + 8)
            .ok_or_else(|| "replay outcome file truncated".to_string())?;
        *pos += 8;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    if u64_at(&mut pos)? != FILE_MAGIC {
        return Err("not a replay outcome file".into());
    }
    let ranks = u64_at(&mut pos)?;
    if rank as u64 >= ranks {
        return Err(format!(
            "replay outcome file has {ranks} ranks, not rank {rank}"
        ));
    }
    for r in 0..=rank {
        let n = u64_at(&mut pos)? as usize;
        if n > bytes.len() / 16 {
            return Err("replay outcome file truncated".into());
        }
        if r < rank {
            pos += n * 16;
            continue;
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let b = bytes
                .get(pos..pos + 16)
                .ok_or_else(|| "replay outcome file truncated".to_string())?;
            v.push(OutcomeRec {
                kind: u32::from_le_bytes(b[0..4].try_into().expect("4")),
                n: u32::from_le_bytes(b[4..8].try_into().expect("4")),
                value: u64::from_le_bytes(b[8..16].try_into().expect("8")),
            });
            pos += 16;
        }
        return Ok(v);
    }
    unreachable!("loop returns at rank")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_expands_runs_and_lists() {
        let mut recs = vec![
            OutcomeRec::fails(3),
            OutcomeRec::wtime(42),
            OutcomeRec::libc(LibcCall::Getpid, 7),
        ];
        recs.extend(OutcomeRec::for_indices(&[0, 1], 2));
        recs.extend(OutcomeRec::for_indices(&[1, 3], 4));
        let mut c = OutcomeCursor::new(recs);
        for _ in 0..3 {
            assert_eq!(c.next_outcome(), Ok(Some(Outcome::Fail)));
        }
        assert_eq!(c.next_outcome(), Ok(Some(Outcome::Wtime(42))));
        assert_eq!(
            c.next_outcome(),
            Ok(Some(Outcome::Libc(LibcCall::Getpid, 7)))
        );
        assert_eq!(c.next_outcome(), Ok(Some(Outcome::Indices(vec![0, 1]))));
        assert_eq!(c.next_outcome(), Ok(Some(Outcome::Indices(vec![1, 3]))));
        assert_eq!(c.next_outcome(), Ok(None));
        assert_eq!(c.consumed, 7);
    }

    #[test]
    fn cursor_rejects_a_list_cut_short() {
        let mut c = OutcomeCursor::new(vec![OutcomeRec {
            kind: OUT_LIST,
            n: 2,
            value: 0,
        }]);
        assert!(c.next_outcome().is_err());
    }

    #[test]
    fn file_round_trip_and_damage() {
        let per = vec![
            vec![OutcomeRec::fails(2)],
            vec![],
            vec![OutcomeRec::wtime(7)],
        ];
        let f = encode_file(&per);
        for r in 0..3 {
            assert_eq!(decode_file(&f, r).unwrap(), per[r as usize]);
        }
        assert!(decode_file(&f, 3).is_err());
        assert!(decode_file(&f[..f.len() - 3], 2).is_err());
        assert!(decode_file(b"garbage!garbage!", 0).is_err());
    }
}
