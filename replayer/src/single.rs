//! Single-rank replay (`strobe replay FILE --rank R`): rank R runs alone, with no other
//! rank and no node manager, fed from the payloads `strobe record --capture-payloads`
//! stored (`payload` table) and its timing-dependent outcomes from the replay log. The
//! runtime's rank-alone mode (`strobe_runtime::alone`) drives it; this module is its
//! [`DeliverySource`]: the recorded slices as far as rank R saw them, and the checks of
//! what it posts.
//!
//! Verification is per call rather than per slice digest (the other ranks' descriptors
//! are not there to schedule): every descriptor the rank posts must be the recorded one
//! (call, peer, tag, communicator, size), and a send's bytes must be what its receiver
//! got when the receiver was captured too.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt;

use strobe_runtime::alone::{
    launch_alone, AloneReport, Debugger, Delivery, DeliverySource, ReadRank,
};
use strobe_runtime::descriptor::{DescKind, Descriptor};
use strobe_runtime::engine::Payload;
use strobe_runtime::launcher::{JobOutcome, JobReport, LaunchConfig};
use strobe_runtime::outcome::encode_file;

use crate::{safety, Divergence, Recording, ReplayError, ReplayOptions, ReplayReport, Verdict};

/// Rank R's recorded slices, from the replay log and the `payload` table.
struct RankFeed {
    rank: u32,
    last_slice: u64,
    /// (slice, descriptors handled in it), ascending, cumulated.
    handled: Vec<(u64, u64)>,
    /// The recorded completion of each descriptor, by sequence number.
    recorded: BTreeMap<u64, Payload>,
    /// Deliveries by slice (taken as delivered).
    by_slice: BTreeMap<u64, Vec<Delivery>>,
    /// For each of rank R's sends, what its captured receiver got: (receiver, bytes).
    sent: BTreeMap<u64, (u32, Vec<u8>)>,
    /// The recorded rank ran to its own end ([`ran_to_its_end`]).
    exits: bool,
}

fn call_name(kind: u8) -> String {
    DescKind::from_u8(kind).map_or_else(|| format!("call kind {kind}"), |k| k.mpi_name().into())
}

fn describe(d: &Descriptor) -> String {
    format!(
        "{} (descriptor #{}: peer {}, tag {}, communicator {}, {} bytes)",
        call_name(d.kind),
        d.seq,
        d.peer,
        d.tag,
        d.comm,
        d.bytes
    )
}

impl RankFeed {
    fn new(rec: &Recording, rank: u32) -> Result<RankFeed, ReplayError> {
        let reader = rec.reader();
        let mut handled = Vec::new();
        let mut total = 0u64;
        for &(slice, n) in &rec.log.ranks[rank as usize].posting {
            total += n as u64;
            handled.push((slice, total));
        }
        let mut recorded = BTreeMap::new();
        let mut by_slice: BTreeMap<u64, Vec<Delivery>> = BTreeMap::new();
        for p in reader.payloads(rank)? {
            by_slice.entry(p.slice).or_default().push(Delivery {
                seq: p.desc.seq,
                completion: p.completion,
                data: p.data.clone(),
            });
            recorded.insert(p.desc.seq, p);
        }
        let sent = reader
            .payloads_sent_by(rank)?
            .into_iter()
            .filter_map(|p| Some((p.matched_send?.seq, (p.desc.rank, p.data))))
            .collect();
        Ok(RankFeed {
            rank,
            last_slice: rec.log.last_slice(),
            handled,
            recorded,
            by_slice,
            sent,
            exits: ran_to_its_end(rec, rank),
        })
    }

    fn total(&self) -> u64 {
        self.handled.last().map_or(0, |&(_, n)| n)
    }

    fn check_bytes(&self, d: &Descriptor, read: ReadRank<'_>) -> Result<(), String> {
        let Some((to, want)) = self.sent.get(&d.seq) else {
            return Ok(());
        };
        let got = read(d.buf, want.len() as u64).ok_or_else(|| {
            format!(
                "{}: cannot read the send buffer of rank {}",
                describe(d),
                self.rank
            )
        })?;
        if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
            return Err(format!(
                "{} sends different bytes than rank {to} received in the recording: first difference at byte {i} (sent 0x{:02x}, recorded 0x{:02x})",
                describe(d),
                got[i],
                want[i]
            ));
        }
        Ok(())
    }
}

impl DeliverySource for RankFeed {
    fn last_slice(&self) -> u64 {
        self.last_slice
    }

    fn handled_by(&self, slice: u64) -> u64 {
        match self.handled.partition_point(|&(s, _)| s <= slice) {
            0 => 0,
            i => self.handled[i - 1].1,
        }
    }

    fn check(&mut self, slice: u64, d: &Descriptor, read: ReadRank<'_>) -> Result<(), String> {
        let rank = self.rank;
        let Some(p) = self.recorded.get(&d.seq) else {
            if d.seq >= self.total() {
                return Err(format!(
                    "slice {slice}: rank {rank} posts {}, but the recording holds only {} descriptors of it",
                    describe(d),
                    self.total()
                ));
            }
            // Recorded but never completed (the job ended first): nothing to compare.
            return Ok(());
        };
        let r = &p.desc;
        let same =
            (r.kind, r.peer, r.tag, r.comm, r.bytes) == (d.kind, d.peer, d.tag, d.comm, d.bytes);
        if !same {
            return Err(format!(
                "slice {slice}: rank {rank} posts {}, but the recording has {}",
                describe(d),
                describe(r)
            ));
        }
        self.check_bytes(d, read)
            .map_err(|e| format!("slice {slice}: rank {rank}: {e}"))
    }

    fn deliveries(&mut self, slice: u64) -> Vec<Delivery> {
        self.by_slice.remove(&slice).unwrap_or_default()
    }

    fn recorded_exit(&self) -> bool {
        self.exits
    }
}

/// The command that records `rec` again with rank `rank` captured.
fn capture_command(rec: &Recording, rank: u32) -> String {
    let job = &rec.job;
    format!(
        "strobe record --capture-payloads {rank} -o FILE -n {} --nodes {} -- {}",
        job.ranks,
        job.nodes,
        shell_words(&job.command)
    )
}

fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Refuse a rank whose payloads were not captured, saying how to capture them.
fn check_captured(rec: &Recording, rank: u32) -> Result<(), ReplayError> {
    if rank >= rec.job.ranks {
        return Err(ReplayError::NotCaptured(format!(
            "rank {rank} is not a rank of this {}-rank recording",
            rec.job.ranks
        )));
    }
    let captured = rec.reader().captured_ranks()?;
    if captured.contains(&rank) {
        return Ok(());
    }
    let had = if captured.is_empty() {
        "no rank's payloads were captured".to_string()
    } else {
        format!(
            "only the payloads of rank(s) {} were captured",
            captured
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    Err(ReplayError::NotCaptured(format!(
        "cannot replay rank {rank} alone: {had}; record the job again with rank {rank}'s payloads: {}",
        capture_command(rec, rank)
    )))
}

/// Whether the recorded rank ended by itself: every rank of a job that succeeded, and in
/// a job with a failed rank the ranks that were not SIGKILLed by strobe when another one
/// failed first (like a full replay, a killed rank agrees with stopping at the
/// recording's last slice). Deadlocks, timeouts and cut recordings end at their last
/// slice.
fn ran_to_its_end(rec: &Recording, rank: u32) -> bool {
    match rec.job.outcome.as_deref() {
        Some("success") => true,
        Some("rank_failed") => recorded_end(rec, rank).1 != Some(libc::SIGKILL),
        _ => false,
    }
}

/// How the recorded rank ended: its exit code and signal (0 and none: a clean exit).
fn recorded_end(rec: &Recording, rank: u32) -> (Option<i32>, Option<i32>) {
    match rec.job.failed_ranks.iter().find(|f| f.rank == rank) {
        Some(f) => (f.exit_code, f.signal),
        None => (Some(0), None),
    }
}

/// Replay rank `rank` of `opts.recording` alone. Changes this process's working directory
/// to the recorded one, as [`crate::replay`] does. With a `debugger` (`--gdb`), it is
/// started on the rank's pid and the rank is held at its first MPI call until it attached.
pub fn replay_rank(
    opts: &ReplayOptions,
    rank: u32,
    debugger: Option<Debugger>,
) -> Result<ReplayReport, ReplayError> {
    let rec = Recording::open_planned(
        &std::path::absolute(&opts.recording).unwrap_or(opts.recording.clone()),
    )?;
    check_captured(&rec, rank)?;
    let plan = safety::plan(&rec, opts)?;
    if let (Some(why), false) = (plan.needs_confirmation(), opts.confirmed) {
        return Err(ReplayError::NeedsConfirmation(why));
    }
    let warnings = plan.warnings();
    let mut feed = RankFeed::new(&rec, rank)?;

    // The rank's recorded outcomes, in the file every replaying rank reads at init (the
    // others' lists are empty: they do not run).
    let mut per_rank = vec![Vec::new(); rec.job.ranks as usize];
    per_rank[rank as usize] = rec.log.ranks[rank as usize].outcomes.clone();
    let mut outfile = tempfile::Builder::new()
        .prefix("strobe-replay-outcomes-")
        .tempfile()
        .map_err(|source| ReplayError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    outfile
        .write_all(&encode_file(&per_rank))
        .and_then(|_| outfile.flush())
        .map_err(|source| ReplayError::Io {
            path: outfile.path().to_path_buf(),
            source,
        })?;
    std::env::set_current_dir(&plan.cwd).map_err(|source| ReplayError::Io {
        path: plan.cwd.clone(),
        source,
    })?;
    let cfg = LaunchConfig {
        engine: rec.job.engine(),
        program: plan.program.clone(),
        args: plan.args.clone(),
        tag_output: opts.tag_output,
        timeout: opts.timeout,
        env: safety::rank_env(&plan, opts, outfile.path()),
        mmds_resolution: 0,
        output: opts.output.clone(),
        output_marks: None,
    };
    let report = launch_alone(&cfg, rank, &mut feed, debugger)?;
    Ok(verdict(&rec, rank, report, warnings))
}

fn verdict(rec: &Recording, rank: u32, r: AloneReport, warnings: Vec<String>) -> ReplayReport {
    let last = rec.log.last_slice();
    let status = r.status.map(std::process::ExitStatus::from_raw);
    let (want_code, want_signal) = recorded_end(rec, rank);
    let (got_code, got_signal) = (
        status.and_then(|s| s.code()),
        status.and_then(|s| s.signal()),
    );
    let diverged = |slice: u64, what: String| {
        let d = Divergence {
            slice,
            rank: Some(rank),
            recorded: String::new(),
            replayed: what.clone(),
            calls: Vec::new(),
            decisions: Vec::new(),
            sites: Vec::new(),
        };
        (
            Verdict::Diverged(d),
            format!("strobe: single-rank replay of rank {rank} diverged: {what}"),
        )
    };
    let (verdict, text) = if let Some(what) = r.divergence.clone() {
        diverged(r.slices + 1, what)
    } else if r.end_of_recording {
        (
            Verdict::Matched,
            format!(
                "strobe: single-rank replay of rank {rank} matched the recording: {} slices, every call verified, to the end of the recording (the recorded job was {})",
                r.slices,
                rec.job.outcome.as_deref().unwrap_or("cut short")
            ),
        )
    } else if r.interrupted || r.timed_out {
        (
            Verdict::Stopped,
            format!(
                "strobe: single-rank replay of rank {rank} stopped at slice {} of {last}; the calls so far matched",
                r.slices
            ),
        )
    } else if (got_code, got_signal) == (want_code, want_signal) {
        (
            Verdict::Matched,
            format!(
                "strobe: single-rank replay of rank {rank} matched the recording: {} slices, every call verified, the rank ended as recorded",
                r.slices
            ),
        )
    } else {
        diverged(
            r.slices,
            format!(
                "rank {rank} ended with {}, the recording with {}",
                end_text(got_code, got_signal),
                end_text(want_code, want_signal)
            ),
        )
    };
    let outcome = match (&verdict, r.interrupted) {
        (Verdict::Diverged(_), _) => JobOutcome::SourceStopped(text.clone()),
        (_, true) => JobOutcome::Interrupted,
        _ if r.timed_out => JobOutcome::Timeout,
        _ => JobOutcome::Success,
    };
    let mut rank_status = vec![None; rec.job.ranks as usize];
    rank_status[rank as usize] = r.status;
    ReplayReport {
        verdict,
        text,
        job: JobReport {
            outcome,
            slices: r.slices,
            elapsed: r.elapsed,
            rank_status,
        },
        warnings,
        slices: r.slices,
        // The checks need every rank's descriptors; a rank replayed alone has one side of
        // each match only, so none are run.
        checks: Vec::new(),
    }
}

fn end_text(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (_, Some(s)) => format!("signal {}", strobe_runtime::launcher::signal_name(s)),
        (Some(c), None) => format!("exit status {c}"),
        (None, None) => "no exit (killed by strobe)".into(),
    }
}
