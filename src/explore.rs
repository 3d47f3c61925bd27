//! `strobe explore FILE -o FOUND.db`: systematic exploration of the wildcard receives of a
//! recorded run. From the recording, every wildcard receive (`MPI_ANY_SOURCE`) that could
//! have matched another sender is an alternative; each is tried in a new run that forces
//! it (`strobe_replayer::alternatives`: the competing senders are held before their send
//! until the receive has been matched, then let go one at a time in rank order; earlier
//! wildcard receives keep their recorded senders), depth first: a run that passes has its
//! own later wildcard receives explored before the next alternative of the level above, up
//! to `--max-depth` forced alternatives in a row and `--max-runs` runs in all. The first
//! run that fails (non-zero exit: a rank died or aborted, a deadlock, the timeout) is kept
//! as FOUND.db, an ordinary recording that `strobe replay` reproduces exactly.
//!
//! The outcomes of `MPI_Test*`, `Waitany` and `Waitsome` are alternatives too
//! (`strobe_replayer::alternatives`, [`test_alternatives`]): a test that failed at its
//! first try is forced to find its request complete, one that succeeded at once to find
//! nothing, a call over a set that reported request i to report a lower one (one run each,
//! from the recorded run; tried after the wildcard receives).
//!
//! A forced alternative can be impossible (the chosen sender only sends after the receive
//! completed): when no slice has anything posted or decided for `--idle` while a hold is
//! pending, every hold is released and the run counts as "not taken".
//!
//! Exit status: 1 a failure was found (FOUND.db), 0 none (the bounded space exhausted, or
//! `--max-runs` reached: the message says which), 2 the recording cannot be explored, 130
//! interrupted (Ctrl-C), 70 strobe itself failed.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use strobe_recorder::recording::Explored;
use strobe_replayer::alternatives::{
    send_token, test_alternatives, token, TestAlternative, Traffic,
};
use strobe_runtime::chaos::{
    holds_env, test_forces_env, Hold, ENV_FORCE_TEST, ENV_HOLD, ENV_RELEASE_DIR, RELEASE_ALL,
};
use strobe_runtime::descriptor::DescRef;
use strobe_runtime::engine::{SliceRecord, SliceSink, DEFAULT_DIRECT_COPY_MIN};
use strobe_runtime::sched::Decision;

use crate::JobArgs;

pub const EXIT_FOUND: i32 = 1;
pub const EXIT_NONE: i32 = 0;
pub const EXIT_CANNOT: i32 = 2;

#[derive(Args)]
pub struct ExploreArgs {
    /// The recording to explore from (typically a passing run).
    file: PathBuf,
    /// Where to keep the first failing run's recording.
    #[arg(short = 'o', long = "out", value_name = "FOUND.db")]
    out: PathBuf,
    /// Replace FOUND.db if it exists.
    #[arg(long)]
    force: bool,
    /// At most this many runs.
    #[arg(long, default_value_t = 50)]
    max_runs: u32,
    /// At most this many forced alternatives in a row (depth of the search).
    #[arg(long, default_value_t = 4)]
    max_depth: usize,
    /// Stop each run after this long.
    #[arg(long, default_value = "120s", value_parser = crate::cli_util::parse_duration)]
    timeout: Duration,
    /// Release every hold when nothing was posted or decided for this long while a hold
    /// is pending (an impossible forcing).
    #[arg(long, default_value = "2s", value_parser = crate::cli_util::parse_duration)]
    idle: Duration,
    /// Run the recording's program even if this user did not record it (as `replay --yes`).
    #[arg(long)]
    yes: bool,
}

/// One run to try: wildcard receives forced to senders (the last one is the alternative
/// being tried, the others follow the run it derives from), and the traffic of that run.
struct Try {
    parent: Rc<Traffic>,
    forced: Vec<(DescRef, u32)>,
    /// The recorded sender of the last forced receive in the parent run.
    instead_of: u32,
    slice: u64,
    depth: usize,
}

/// What a run forces: wildcard receives (holds), or one test outcome.
enum Alt {
    Wildcard(Try),
    Test(TestAlternative),
}

/// Watches a run's decisions: releases the holds of a receive once it is matched, and
/// every hold when nothing is posted or decided for `idle`.
struct Watcher {
    dir: PathBuf,
    /// A forced test outcome may be waiting (its call cannot be seen from here): an idle
    /// job releases it.
    test_forced: bool,
    /// Release files written when these receives are matched...
    tokens: BTreeMap<DescRef, String>,
    /// ...and when these sends are.
    send_tokens: BTreeMap<DescRef, String>,
    idle: Duration,
    state: Mutex<WatchState>,
}

struct WatchState {
    matched: BTreeMap<DescRef, DescRef>,
    sends_matched: usize,
    last_progress: Option<Instant>,
    released_all: bool,
}

impl SliceSink for Watcher {
    fn slice(&self, rec: &SliceRecord) {
        let mut st = self.state.lock().expect("watcher");
        // Progress: something posted or decided. The clock starts at the first slice, so
        // a slow start (a loaded machine) is never taken for a stuck forcing.
        let progress = !rec.decisions.decisions.is_empty() || !rec.descriptors.is_empty();
        if progress || st.last_progress.is_none() {
            st.last_progress = Some(Instant::now());
        }
        let idle = st.last_progress.is_some_and(|t| t.elapsed() >= self.idle);
        for d in &rec.decisions.decisions {
            if let Decision::Match(m) = d {
                if let Some(t) = self.tokens.get(&m.recv) {
                    st.matched.insert(m.recv, m.send);
                    let _ = std::fs::write(self.dir.join(t), b"");
                }
                if let Some(t) = self.send_tokens.get(&m.send) {
                    st.sends_matched += 1;
                    let _ = std::fs::write(self.dir.join(t), b"");
                }
            }
        }
        let pending = self.test_forced
            || st.matched.len() < self.tokens.len()
            || st.sends_matched < self.send_tokens.len();
        if pending && !st.released_all && idle {
            st.released_all = true;
            let _ = std::fs::write(self.dir.join(RELEASE_ALL), b"");
        }
    }
}

fn describe(t: &Try) -> String {
    let (recv, sender) = t.forced.last().expect("a try forces something");
    format!(
        "rank {}'s wildcard receive {}#{} (slice {}) takes rank {sender}'s message instead of rank {}'s",
        recv.rank, recv.rank, recv.seq, t.slice, t.instead_of
    )
}

/// The first level of tries from a run: each wildcard receive from index `from` on, each
/// alternative sender, earlier receives kept as they were.
fn children(traffic: &Rc<Traffic>, after: Option<DescRef>, depth: usize) -> Vec<Try> {
    let wild = traffic.wildcards();
    let from = after
        .and_then(|a| wild.iter().position(|w| w.recv == a))
        .map_or(0, |i| i + 1);
    let mut out = Vec::new();
    for (i, w) in wild.iter().enumerate().skip(from) {
        let prefix: Vec<(DescRef, u32)> =
            wild[..i].iter().map(|p| (p.recv, p.matched.rank)).collect();
        for alt in &w.alternatives {
            let mut forced = prefix.clone();
            forced.push((w.recv, alt.rank));
            out.push(Try {
                parent: traffic.clone(),
                forced,
                instead_of: w.matched.rank,
                slice: w.slice,
                depth,
            });
        }
    }
    out
}

fn job_args(job: &strobe_recorder::Job, timeout: Duration) -> JobArgs {
    let e = job.engine();
    JobArgs {
        ranks: e.ranks,
        nodes: e.nodes,
        slice: e.slice,
        strobe: e.policy,
        deadlock_slices: e.deadlock_slices,
        livelock_slices: strobe_runtime::engine::DEFAULT_LIVELOCK_SLICES,
        chunk_budget: e.chunk_budget,
        direct_copy_min: if e.direct_copy_min == 0 {
            DEFAULT_DIRECT_COPY_MIN
        } else {
            e.direct_copy_min
        },
        tag_output: false,
        timeout: Some(timeout),
        decision_log: None,
        summary: false,
        max_ranks: None,
        no_libc_replay: job
            .env
            .iter()
            .any(|(k, v)| k == "STROBE_LIBC_REPLAY" && v.trim() == "0"),
        // The search's runs are many and the findings the same in each: `strobe replay`
        // of FOUND.db reports them.
        no_checks: true,
    }
}

/// What a search starts from: the recorded traffic and how to launch the program.
struct Start {
    traffic: Traffic,
    tests: Vec<TestAlternative>,
    job: JobArgs,
    command: Vec<OsString>,
    cwd: PathBuf,
    exit_status: Option<i32>,
}

/// Open the recording and its launch (refused unless this user recorded it, or `--yes`);
/// `Ok(Err(why))`: it cannot be explored.
fn prepare(a: &ExploreArgs) -> Result<std::result::Result<Start, String>> {
    let rec = match strobe_replayer::Recording::open(&a.file) {
        Ok(r) => r,
        Err(e) => return Ok(Err(format!("{}: {e}", a.file.display()))),
    };
    let opts = strobe_replayer::ReplayOptions {
        recording: a.file.clone(),
        ..Default::default()
    };
    let plan = match strobe_replayer::safety::plan(&rec, &opts) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e.to_string())),
    };
    if let (Some(why), false) = (plan.needs_confirmation(), a.yes) {
        return Ok(Err(format!(
            "refusing to run the recorded program: {why} (--yes runs it)"
        )));
    }
    let reader = strobe_recorder::Recording::open(&a.file)?;
    let traffic = match Traffic::read(&reader) {
        Ok(t) => t,
        Err(e) => return Ok(Err(format!("{}: {e}", a.file.display()))),
    };
    let tests = match reader.replay_log().map(|log| test_alternatives(&log)) {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return Ok(Err(format!("{}: replay log: {e}", a.file.display()))),
        Err(e) => return Ok(Err(format!("{}: {e}", a.file.display()))),
    };
    let mut command = vec![plan.program.into_os_string()];
    command.extend(plan.args);
    Ok(Ok(Start {
        traffic,
        tests,
        job: job_args(&rec.job, a.timeout),
        command,
        cwd: plan.cwd,
        exit_status: rec.job.exit_status,
    }))
}

pub fn explore(a: &ExploreArgs) -> Result<i32> {
    if a.out.exists() && !a.force {
        bail!(crate::cli_util::UsageError(format!(
            "{} exists (--force replaces it)",
            a.out.display()
        )));
    }
    let out = std::path::absolute(&a.out)?;
    let Start {
        traffic,
        tests,
        job,
        command,
        cwd,
        exit_status,
    } = match prepare(a)? {
        Ok(v) => v,
        Err(why) => {
            eprintln!("strobe explore: {why}");
            return Ok(EXIT_CANNOT);
        }
    };
    if let Some(code) = exit_status.filter(|&c| c != 0) {
        eprintln!(
            "strobe explore: note: the recorded run itself failed (exit status {code}); \
             its alternatives are tried all the same"
        );
    }
    let root = Rc::new(traffic);
    let wild = root.wildcards();
    eprintln!(
        "strobe explore: {} wildcard receive(s) in {}, {} alternative(s) at the first level; {} test outcome alternative(s)",
        wild.len(),
        a.file.display(),
        wild.iter().map(|w| w.alternatives.len()).sum::<usize>(),
        tests.len()
    );
    // The runs start in the recorded directory, like a replay.
    std::env::set_current_dir(&cwd)
        .with_context(|| format!("entering the recorded directory {}", cwd.display()))?;
    let scratch_dir = out.parent().unwrap_or(Path::new("."));
    let scratch = tempfile::Builder::new()
        .prefix(".strobe-explore")
        .suffix(".db")
        .tempfile_in(scratch_dir)
        .with_context(|| format!("creating a scratch recording in {}", scratch_dir.display()))?
        .into_temp_path();
    let search = Search {
        job,
        command,
        scratch: scratch.to_path_buf(),
        out,
    };
    let code = search.run(a, &root, tests);
    drop(scratch);
    code
}

/// Where the runs go and what they run.
struct Search {
    job: JobArgs,
    command: Vec<OsString>,
    scratch: PathBuf,
    out: PathBuf,
}

impl Search {
    /// Depth first from the root's alternatives; returns the exit status.
    fn run(&self, a: &ExploreArgs, root: &Rc<Traffic>, tests: Vec<TestAlternative>) -> Result<i32> {
        let (job, command, scratch, out) = (&self.job, &self.command, &self.scratch, &self.out);
        let mut stack: Vec<Alt> = children(root, None, 1)
            .into_iter()
            .map(Alt::Wildcard)
            .chain(tests.into_iter().map(Alt::Test))
            .collect();
        stack.reverse();
        let mut runs = 0;
        while let Some(t) = stack.pop() {
            if runs == a.max_runs {
                let left = stack.len() + 1;
                eprintln!(
                    "strobe explore: --max-runs {runs} reached without a failure \
                     ({left} alternative(s) left untried)"
                );
                println!("runs: {runs}");
                return Ok(EXIT_NONE);
            }
            runs += 1;
            let (end, taken) = match &t {
                Alt::Wildcard(w) => run_try(w, job, command, scratch, a.idle)?,
                Alt::Test(alt) => run_test(alt, job, command, scratch, a.idle)?,
            };
            if let Some(why) = crate::hunt::not_the_programs(end.code) {
                eprintln!("strobe explore: run {runs}: {why}");
                return Ok(end.code);
            }
            let (what, never) = match &t {
                Alt::Wildcard(w) => (describe(w), "the forced sender never came first"),
                Alt::Test(alt) => (
                    alt.describe(),
                    "the request never completed while the rank waited",
                ),
            };
            let verdict = match (end.code, taken) {
                (0, true) => "passed".to_string(),
                (0, false) => format!("not taken ({never}); passed"),
                (c, _) => format!("FAILED (exit status {c})"),
            };
            eprintln!("run {runs}: {what}: {verdict}");
            if end.code != 0 {
                std::io::stdout().write_all(&end.output)?;
                std::fs::rename(scratch, out)
                    .with_context(|| format!("keeping the recording as {}", out.display()))?;
                let found = explored(&t, what, runs as u64, out)?;
                strobe_recorder::recording::store_explored(out, &found).with_context(|| {
                    format!("noting the forced alternative in {}", out.display())
                })?;
                let shown = a.out.display();
                eprintln!(
                    "strobe explore: found a failing order after {runs} run(s); its recording \
                     is {shown} (replay it: strobe replay {shown})"
                );
                println!("runs: {runs}");
                return Ok(EXIT_FOUND);
            }
            let Alt::Wildcard(t) = t else { continue };
            if taken && t.depth < a.max_depth {
                let reader = strobe_recorder::Recording::open(scratch)?;
                let traffic = Rc::new(Traffic::read(&reader)?);
                let last = t.forced.last().map(|f| f.0);
                let mut next = children(&traffic, last, t.depth + 1);
                next.reverse();
                stack.extend(next.into_iter().map(Alt::Wildcard));
            }
        }
        eprintln!(
            "strobe explore: no failure: every alternative up to depth {} tried in {runs} run(s)",
            a.max_depth
        );
        println!("runs: {runs}");
        Ok(EXIT_NONE)
    }
}

/// What was forced to get the failing recording `out`, for its `explored` row: for a
/// wildcard receive, the slice where it was matched in `out` (the slice in the report is
/// the parent run's).
fn explored(t: &Alt, what: String, runs: u64, out: &Path) -> Result<Explored> {
    Ok(match t {
        Alt::Wildcard(w) => {
            let (recv, _) = *w.forced.last().expect("a try forces something");
            let traffic = Traffic::read(&strobe_recorder::Recording::open(out)?)?;
            let slice = traffic
                .wildcards()
                .iter()
                .find(|x| x.recv == recv)
                .map(|x| x.slice);
            Explored {
                kind: "wildcard".into(),
                rank: recv.rank,
                slice,
                runs,
                detail: what,
            }
        }
        Alt::Test(alt) => Explored {
            kind: "test".into(),
            rank: alt.force.rank,
            slice: None,
            runs,
            detail: what,
        },
    })
}

/// Run one try, recorded into `scratch`; returns how it ended and whether the last forced
/// receive took the chosen sender.
fn run_try(
    t: &Try,
    job: &JobArgs,
    command: &[OsString],
    scratch: &Path,
    idle: Duration,
) -> Result<(crate::hunt::RunEnd, bool)> {
    let release = tempfile::Builder::new()
        .prefix("strobe-explore")
        .tempdir()
        .context("creating the release directory")?;
    let (last, prefix) = t.forced.split_last().expect("a try forces something");
    let mut holds: Vec<Hold> = prefix
        .iter()
        .flat_map(|(recv, sender)| t.parent.holds_for(*recv, *sender))
        .collect();
    let (ordered, release_sends) = t.parent.holds_in_order(last.0, last.1);
    holds.extend(ordered);
    let tokens: BTreeMap<DescRef, String> = t.forced.iter().map(|(r, _)| (*r, token(*r))).collect();
    let send_tokens: BTreeMap<DescRef, String> =
        release_sends.iter().map(|s| (*s, send_token(*s))).collect();
    let watcher = Arc::new(Watcher {
        dir: release.path().to_path_buf(),
        test_forced: false,
        tokens,
        send_tokens,
        idle,
        state: Mutex::new(WatchState {
            matched: BTreeMap::new(),
            sends_matched: 0,
            last_progress: None,
            released_all: false,
        }),
    });
    let env = vec![
        (ENV_HOLD.to_string(), holds_env(&holds)),
        (
            ENV_RELEASE_DIR.to_string(),
            release.path().display().to_string(),
        ),
    ];
    let end = crate::hunt::record_quietly(job, command, scratch, env, Some(watcher.clone()))?;
    let (recv, sender) = *last;
    let taken = watcher
        .state
        .lock()
        .expect("watcher")
        .matched
        .get(&recv)
        .is_some_and(|s| s.rank == sender);
    Ok((end, taken))
}

/// Run one test alternative, recorded into `scratch`; returns how it ended and whether
/// the forcing was taken (not released for want of progress).
fn run_test(
    alt: &TestAlternative,
    job: &JobArgs,
    command: &[OsString],
    scratch: &Path,
    idle: Duration,
) -> Result<(crate::hunt::RunEnd, bool)> {
    let release = tempfile::Builder::new()
        .prefix("strobe-explore")
        .tempdir()
        .context("creating the release directory")?;
    let watcher = Arc::new(Watcher {
        dir: release.path().to_path_buf(),
        test_forced: true,
        tokens: BTreeMap::new(),
        send_tokens: BTreeMap::new(),
        idle,
        state: Mutex::new(WatchState {
            matched: BTreeMap::new(),
            sends_matched: 0,
            last_progress: None,
            released_all: false,
        }),
    });
    let env = vec![
        (ENV_FORCE_TEST.to_string(), test_forces_env(&[alt.force])),
        (
            ENV_RELEASE_DIR.to_string(),
            release.path().display().to_string(),
        ),
    ];
    let end = crate::hunt::record_quietly(job, command, scratch, env, Some(watcher.clone()))?;
    let taken = !watcher.state.lock().expect("watcher").released_all;
    Ok((end, taken))
}
