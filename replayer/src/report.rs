//! Turning a finished replay into a verdict and its report.

use std::os::unix::process::ExitStatusExt;

use strobe_runtime::launcher::{JobOutcome, JobReport, RankDeath};
use strobe_runtime::sched::Decision;

use crate::recording::Recording;
use crate::source::{Divergence, Shared};
use crate::{outcome_name, Verdict};

const HINT: &str = "hint: the program did something the recorded run did not. Typical causes: \
nondeterminism that does not pass through MPI (threads, signals, getrandom or /dev/urandom, \
clocks read in other threads or under --no-libc-replay, addresses), a different binary (rebuilt, \
other flags: see --program), different input files, or a different environment or working \
directory than the recording's (the recording keeps STROBE_*, OMP_* and MPIEXEC_TIMEOUT).";

/// "rank 2 (pid 1234) was killed ..." without the pid, which differs between runs.
fn without_pids(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("(pid ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 5..];
        match after.find(')') {
            Some(j) if after[..j].chars().all(|c| c.is_ascii_digit()) => {
                rest = after[j + 1..].strip_prefix(' ').unwrap_or(&after[j + 1..]);
            }
            _ => {
                out.push_str("(pid ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.trim_end().to_string()
}

/// The slice number of "... in slice N; ...".
fn slice_in(msg: &str) -> Option<u64> {
    let i = msg.find(" in slice ")?;
    let rest = &msg[i + 10..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The message without its " in slice N".
fn without_slice(msg: &str) -> String {
    match (msg.find(" in slice "), slice_in(msg)) {
        (Some(i), Some(n)) => format!("{}{}", &msg[..i], &msg[i + 10 + n.to_string().len()..]),
        _ => msg.to_string(),
    }
}

/// Fill in the recorded side of a digest divergence from the schedule log, if it has it:
/// the first call, then the first decision, that differs.
fn refine(rec: &Recording, d: &mut Divergence) {
    if d.calls.is_empty() && d.decisions.is_empty() {
        return;
    }
    if let Some(calls) = rec.descriptors(d.slice) {
        let n = calls.len().max(d.calls.len());
        for i in 0..n {
            let (a, b) = (calls.get(i), d.calls.get(i));
            if a.map(|x| &x.1) != b.map(|x| &x.1) {
                d.rank = a.or(b).map(|x| x.0);
                d.recorded = a.map_or("no call".into(), |x| format!("call {}", x.1));
                d.replayed = b.map_or("no call".into(), |x| format!("call {}", x.1));
                return;
            }
        }
    }
    // Decisions are compared by their one-line text (`Display` on `Decision`), which tells
    // any two different decisions apart.
    if let Some(decs) = rec.decisions(d.slice) {
        let n = decs.len().max(d.decisions.len());
        for i in 0..n {
            let a = decs.get(i).map(ToString::to_string);
            let b = d.decisions.get(i);
            if a != b.map(ToString::to_string) {
                d.rank = b.map(Decision::rank).or(d.rank);
                d.recorded = a.map_or("no decision".into(), |x| format!("decision #{i}: {x}"));
                d.replayed = b.map_or("no decision".into(), |x| format!("decision #{i}: {x}"));
                return;
            }
        }
    }
}

fn render(d: &Divergence, shared: &Shared, node_of_rank: &[u32]) -> String {
    let mut s = format!(
        "strobe: replay DIVERGED from the recording at slice {}",
        d.slice
    );
    if let Some(r) = d.rank {
        let node = node_of_rank.get(r as usize).copied().unwrap_or(0);
        s.push_str(&format!(" (node {node}, rank {r})"));
        // Where the replayed program was (issue 12: source locations everywhere).
        if let Some((_, site)) = d.sites.iter().find(|(x, _)| *x == r) {
            s.push_str(&format!(" at {site}"));
        }
    }
    s.push('\n');
    s.push_str(&format!(
        "  recorded: {}\n  replayed: {}\n",
        d.recorded, d.replayed
    ));
    if d.recorded.starts_with("digest") {
        s.push_str(
            "  (the recording has no schedule log for this slice; the replayed slice was:)\n",
        );
        for (_, c) in &d.calls {
            s.push_str(&format!("    handled {c}\n"));
        }
        for c in &d.decisions {
            s.push_str(&format!("    {c}\n"));
        }
    }
    if let Some(r) = d.rank {
        let lc = shared.last_calls.lock().expect("last calls lock");
        if let Some(q) = lc.get(r as usize) {
            s.push_str(&format!("  last calls of rank {r} (replayed):\n"));
            if q.is_empty() {
                s.push_str("    (none)\n");
            }
            for (slice, d) in q {
                let t = crate::source::descriptor_text(d);
                s.push_str(&format!("    slice {slice}: {t}\n"));
            }
        }
    }
    s.push_str("  ");
    s.push_str(HINT);
    s.push('\n');
    s
}

/// How one rank ended, as far as it was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RankEnd {
    Exit(i32),
    Signal(i32),
    /// Not seen: not reaped, or SIGKILLed by strobe when another rank failed first.
    Unseen,
}

impl RankEnd {
    fn from_raw(raw: Option<i32>) -> RankEnd {
        match raw.map(std::process::ExitStatus::from_raw) {
            None => RankEnd::Unseen,
            Some(st) => match (st.signal(), st.code()) {
                (Some(libc::SIGKILL), _) => RankEnd::Unseen,
                (Some(s), _) => RankEnd::Signal(s),
                (None, Some(c)) => RankEnd::Exit(c),
                (None, None) => RankEnd::Unseen,
            },
        }
    }

    fn agrees(self, other: RankEnd) -> bool {
        self == other || self == RankEnd::Unseen || other == RankEnd::Unseen
    }
}

/// Several ranks failing at the end of a job (MPICH's `init/exitst1`: every rank returns 1
/// after MPI_Finalize) race to the launcher: which one it names first, and which of the
/// others it kills before they exit by themselves, changes from run to run (issue 12, item
/// 11). Decision: the verdict compares the set of rank outcomes, not the first one named:
/// every rank whose end was seen both in the recording and in the replay ended the same
/// way; a rank strobe SIGKILLed (it was stopped because another failed) agrees with
/// anything, since its own end was never observed.
fn rank_ends_agree(rec: &Recording, report: &JobReport) -> bool {
    let recorded = |rank: u32| {
        match rec.job.failed_ranks.iter().find(|f| f.rank == rank) {
            // Not listed: the recorded rank exited with status 0.
            None => RankEnd::Exit(0),
            Some(f) => match (f.signal, f.exit_code) {
                (Some(libc::SIGKILL), _) => RankEnd::Unseen,
                (Some(s), _) => RankEnd::Signal(s),
                (None, Some(c)) => RankEnd::Exit(c),
                (None, None) => RankEnd::Unseen,
            },
        }
    };
    let seen_failure = |rank: u32| match recorded(rank) {
        RankEnd::Exit(c) => c != 0,
        RankEnd::Signal(_) => true,
        RankEnd::Unseen => false,
    };
    // The replayed first failure must be one the recording saw (or could not see).
    let JobOutcome::RankFailed { rank, how, .. } = &report.outcome else {
        return false;
    };
    if !matches!(how, RankDeath::ExitCode(_) | RankDeath::Signal(_)) {
        return false;
    }
    let replayed_first =
        RankEnd::from_raw(report.rank_status.get(*rank as usize).copied().flatten());
    if !(replayed_first.agrees(recorded(*rank))
        && (seen_failure(*rank) || recorded(*rank) == RankEnd::Unseen))
    {
        return false;
    }
    (0..rec.job.ranks).all(|r| {
        RankEnd::from_raw(report.rank_status.get(r as usize).copied().flatten()).agrees(recorded(r))
    })
}

pub(crate) fn verdict(
    rec: &Recording,
    report: &JobReport,
    shared: &Shared,
    node_of_rank: &[u32],
) -> (Verdict, String) {
    let last = rec.log.last_slice();
    if let Some(mut d) = shared.divergence.lock().expect("divergence lock").clone() {
        refine(rec, &mut d);
        let text = render(&d, shared, node_of_rank);
        return (Verdict::Diverged(d), text);
    }
    let replayed = report.message().map(|m| without_pids(&m));
    match &report.outcome {
        JobOutcome::SourceStopped(_)
            if shared.end_of_recording.lock().expect("end lock").is_some() =>
        {
            // A recording cut by Ctrl-C (outcome `interrupted`) ends where the user stopped
            // it: reaching that point is a match (exit 0), never a divergence.
            let text = if rec.job.outcome.as_deref() == Some("interrupted") {
                format!(
                    "strobe: replay matched the recording: {last} slices verified; the recorded job was stopped by the user at slice {last}"
                )
            } else {
                format!(
                    "strobe: replay matched the recording: {last} slices verified, to the end of the recording (the recorded job was {})",
                    // A recording cut by a write error (a full disk) says where.
                    rec.job.outcome.as_deref().unwrap_or_else(|| match &rec.job.message {
                        Some(m) if m.starts_with("cut: ") => m.as_str(),
                        _ => "cut short",
                    })
                )
            };
            return (Verdict::Matched, text);
        }
        JobOutcome::SourceStopped(_) | JobOutcome::Interrupted => {
            return (
                Verdict::Stopped,
                format!(
                    "strobe: replay stopped at slice {} of {last}; the slices so far matched",
                    report.slices
                ),
            );
        }
        _ => {}
    }
    let recorded_msg = rec.job.message.as_deref().map(without_pids);
    let same_outcome = rec.job.outcome.as_deref() == Some(outcome_name(&report.outcome));
    let same = match &report.outcome {
        // Which slice a death is noticed in is itself racy in a live run (the slice the
        // exit lets start early, or the next timer slice): the same rank dying the same
        // way, with every recorded slice up to its death verified and none run beyond the
        // recording, is the same failure; the recorded report is what is shown.
        // The replay may also notice it *earlier*: in the live run other ranks went on
        // posting (timer slices) until the death was seen, while the replay's logical
        // slices wait for those posts. That is the same failure when the dead rank made
        // every call it made in the recording and all of them were verified (`strobe
        // explore`'s runs, with ranks held back, end this way).
        JobOutcome::RankFailed { rank, .. } => {
            let rank_done = rec
                .log
                .ranks
                .get(*rank as usize)
                .is_some_and(|r| r.posting.iter().all(|&(slice, _)| slice <= report.slices));
            same_outcome
                && (recorded_msg.as_deref().map(without_slice)
                    == replayed.as_deref().map(without_slice)
                    || rank_ends_agree(rec, report))
                && report.slices <= last
                && recorded_msg
                    .as_deref()
                    .and_then(slice_in)
                    .is_some_and(|s| report.slices + 1 >= s || rank_done)
        }
        // Likewise the slice in which the launcher sees the last rank exit after a
        // successful MPI_Finalize: the recording may hold trailing slices in which nothing
        // was decided; a replay that ends before them ended the same way.
        _ => {
            same_outcome
                && recorded_msg == replayed
                && report.slices <= last
                && rec
                    .log
                    .digests
                    .iter()
                    .skip(report.slices as usize)
                    .take((last - report.slices) as usize)
                    .all(|&d| d == strobe_recorder::replay_log::empty_digest())
        }
    };
    if same {
        let how = match &recorded_msg {
            None => "success".to_string(),
            Some(m) => m.clone(),
        };
        return (
            Verdict::Matched,
            format!("strobe: replay matched the recording: {last} slices verified; the job ended as recorded: {how}"),
        );
    }
    let rank = match &report.outcome {
        JobOutcome::RankFailed { rank, .. } => Some(*rank),
        _ => None,
    };
    let d = Divergence {
        slice: report.slices,
        rank,
        recorded: format!(
            "the job ended in slice {last}: {}",
            recorded_msg.unwrap_or_else(|| rec.job.outcome.clone().unwrap_or("(cut short)".into()))
        ),
        replayed: format!(
            "the job ended in slice {}: {}",
            report.slices,
            replayed.unwrap_or_else(|| "success".into())
        ),
        calls: Vec::new(),
        decisions: Vec::new(),
        sites: Vec::new(),
    };
    let text = render(&d, shared, node_of_rank);
    (Verdict::Diverged(d), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_are_dropped_from_messages() {
        assert_eq!(
            without_pids("rank 2 (pid 1234) was killed by SIGSEGV in slice 5"),
            "rank 2 was killed by SIGSEGV in slice 5"
        );
        assert_eq!(without_pids("(pid x) stays"), "(pid x) stays");
        let m = "rank 2 was killed by SIGSEGV in slice 57; the other ranks were stopped";
        assert_eq!(slice_in(m), Some(57));
        assert_eq!(
            without_slice(m),
            "rank 2 was killed by SIGSEGV; the other ranks were stopped"
        );
    }
}
