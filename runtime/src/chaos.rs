//! Timing perturbation on the rank side, at the entry of every MPI call that posts a
//! descriptor (`RankCtx::post`), for the debugging tools (docs/debugging.md):
//!
//! * **Chaos** (`strobe hunt --chaos SEED`): `STROBE_CHAOS=seed=S,max_us=M,percent=P`
//!   delays P% of the calls by a random 0..M microseconds before they post. The delays of
//!   rank r are a function of (S, r, call number) only, so a seed names one perturbation
//!   (the program's own timing still varies around it).
//! * **Holds** (`strobe explore`): `STROBE_EXPLORE_HOLD=rank:seq:token;...` with
//!   `STROBE_EXPLORE_DIR=DIR` keeps rank `rank` before posting its descriptor `seq` until
//!   the file `DIR/token` (or `DIR/all`) exists; explore creates it once the receive the
//!   hold makes way for has been matched. Holding a send makes another sender's message
//!   reach a wildcard receive first, which is exactly a different timing: the run is an
//!   ordinary live run, recorded and replayed like any other.
//!
//! * **Forced test outcomes** (`strobe explore`): `STROBE_EXPLORE_TEST=rank:call:what;...`
//!   changes the outcome of rank `rank`'s test-like call number `call` (counted from 0 over
//!   the calls that record an outcome: every `MPI_Test*`, and `MPI_Waitany`/`Waitsome` over
//!   several requests). `complete`: the call first waits until what it tests is complete,
//!   so it reports success (as if the message had been faster); it gives up, and reports
//!   what it finds, when `DIR/all` appears (explore's idle release: the completion needs
//!   this rank to go on first, so the alternative is impossible). `pending`: a test
//!   reports nothing complete this once (as if the completion were seen one poll later;
//!   MPI lets a completion become visible late, never early). `index=N`: a call over a
//!   set (`Waitany`, `Testany`, `Waitsome`, `Testsome`) waits until request N of its set
//!   is complete and reports it alone. See
//!   `strobe_replayer::alternatives` for which alternatives are tried.
//!
//! While delayed or held the rank is computing, as far as the runtime can tell. Neither
//! runs in a replay: replay timing comes from the recording. A bad value is refused at
//! `MPI_Init` ([`crate::rank::InitError::BadEnv`]).

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The chaos settings variable (`seed=S,max_us=M,percent=P`).
pub const ENV_CHAOS: &str = "STROBE_CHAOS";
/// Descriptors to hold (`rank:seq:token;...`).
pub const ENV_HOLD: &str = "STROBE_EXPLORE_HOLD";
/// Where the release files of holds appear.
pub const ENV_RELEASE_DIR: &str = "STROBE_EXPLORE_DIR";
/// The release file that ends every hold.
pub const RELEASE_ALL: &str = "all";
/// A hold gives up after this long whatever happens (explore releases every hold when
/// the job stops making progress, long before).
const HOLD_LIMIT: Duration = Duration::from_secs(120);

/// `strobe hunt`'s perturbation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChaosSpec {
    pub seed: u64,
    /// The longest delay, in microseconds.
    pub max_us: u64,
    /// The share of calls delayed, 0..=100.
    pub percent: u32,
}

impl ChaosSpec {
    /// Parse `seed=S,max_us=M,percent=P` (any order; `max_us` defaults to 5000 and
    /// `percent` to 50).
    pub fn parse(s: &str) -> Result<ChaosSpec, String> {
        let mut spec = ChaosSpec {
            seed: 0,
            max_us: 5000,
            percent: 50,
        };
        let mut seed = None;
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not KEY=VALUE"))?;
            let n: u64 = v
                .parse()
                .map_err(|_| format!("{k}={v:?} is not a non-negative integer"))?;
            match k {
                "seed" => seed = Some(n),
                "max_us" => spec.max_us = n,
                "percent" if n <= 100 => spec.percent = n as u32,
                "percent" => return Err(format!("percent={n} is more than 100")),
                _ => return Err(format!("unknown key {k:?} (seed, max_us, percent)")),
            }
        }
        spec.seed = seed.ok_or("seed=S is missing")?;
        Ok(spec)
    }

    /// The variable's value for these settings.
    pub fn to_env(&self) -> String {
        format!(
            "seed={},max_us={},percent={}",
            self.seed, self.max_us, self.percent
        )
    }
}

/// One hold: descriptor `seq` of this rank waits for `DIR/token`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    pub rank: u32,
    pub seq: u64,
    pub token: String,
}

/// Parse `rank:seq:token;...` (tokens are file names: letters, digits, `-`, `_`).
pub fn parse_holds(s: &str) -> Result<Vec<Hold>, String> {
    s.split(';')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut it = p.splitn(3, ':');
            let (Some(r), Some(q), Some(t)) = (it.next(), it.next(), it.next()) else {
                return Err(format!("{p:?} is not rank:seq:token"));
            };
            let ok = !t.is_empty()
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !ok {
                return Err(format!("token {t:?}: letters, digits, - and _ only"));
            }
            Ok(Hold {
                rank: r.parse().map_err(|_| format!("rank {r:?}"))?,
                seq: q.parse().map_err(|_| format!("seq {q:?}"))?,
                token: t.to_string(),
            })
        })
        .collect()
}

/// Format holds for [`ENV_HOLD`].
pub fn holds_env(holds: &[Hold]) -> String {
    holds
        .iter()
        .map(|h| format!("{}:{}:{}", h.rank, h.seq, h.token))
        .collect::<Vec<_>>()
        .join(";")
}

/// Forced test outcomes (`rank:call:complete|pending;...`).
pub const ENV_FORCE_TEST: &str = "STROBE_EXPLORE_TEST";

/// What a forced test-like call reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestOutcome {
    /// Wait until the call's condition holds, then report as usual: success.
    Complete,
    /// Report nothing complete (tests only; a wait is left alone).
    Pending,
    /// `Waitany`/`Testany`/`Waitsome`/`Testsome`: wait until request `n` of the set is
    /// complete and report it alone (the others' completions are seen later).
    Index(usize),
}

/// One forced outcome: rank `rank`'s test-like call number `call`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestForce {
    pub rank: u32,
    pub call: u64,
    pub outcome: TestOutcome,
}

/// Parse `rank:call:complete|pending|index=N;...`.
pub fn parse_test_forces(s: &str) -> Result<Vec<TestForce>, String> {
    s.split(';')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut it = p.splitn(3, ':');
            let (Some(r), Some(c), Some(w)) = (it.next(), it.next(), it.next()) else {
                return Err(format!("{p:?} is not rank:call:complete|pending"));
            };
            let outcome = match w {
                "complete" => TestOutcome::Complete,
                "pending" => TestOutcome::Pending,
                _ => match w.strip_prefix("index=").map(str::parse) {
                    Some(Ok(n)) => TestOutcome::Index(n),
                    _ => return Err(format!("{w:?} is not complete, pending or index=N")),
                },
            };
            Ok(TestForce {
                rank: r.parse().map_err(|_| format!("rank {r:?}"))?,
                call: c.parse().map_err(|_| format!("call {c:?}"))?,
                outcome,
            })
        })
        .collect()
}

/// Format forced outcomes for [`ENV_FORCE_TEST`].
pub fn test_forces_env(forces: &[TestForce]) -> String {
    forces
        .iter()
        .map(|f| {
            let w = match f.outcome {
                TestOutcome::Complete => "complete".to_string(),
                TestOutcome::Pending => "pending".to_string(),
                TestOutcome::Index(n) => format!("index={n}"),
            };
            format!("{}:{}:{w}", f.rank, f.call)
        })
        .collect::<Vec<_>>()
        .join(";")
}

struct Chaos {
    spec: Option<ChaosSpec>,
    /// splitmix64 state.
    rng: Mutex<u64>,
    holds: Vec<Hold>,
    dir: Option<PathBuf>,
    /// This rank's forced test outcomes, and how many test-like calls it made.
    tests: Vec<TestForce>,
    test_calls: std::sync::atomic::AtomicU64,
}

static CHAOS: OnceLock<Option<Chaos>> = OnceLock::new();

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Read the variables for `rank` (once per process, at `MPI_Init`). `Err((var, why))`.
pub(crate) fn init(rank: u32) -> Result<(), (&'static str, String)> {
    let spec = match std::env::var(ENV_CHAOS) {
        Ok(v) => Some(ChaosSpec::parse(&v).map_err(|e| (ENV_CHAOS, e))?),
        Err(_) => None,
    };
    let holds: Vec<Hold> = match std::env::var(ENV_HOLD) {
        Ok(v) => parse_holds(&v)
            .map_err(|e| (ENV_HOLD, e))?
            .into_iter()
            .filter(|h| h.rank == rank)
            .collect(),
        Err(_) => Vec::new(),
    };
    let tests: Vec<TestForce> = match std::env::var(ENV_FORCE_TEST) {
        Ok(v) => parse_test_forces(&v)
            .map_err(|e| (ENV_FORCE_TEST, e))?
            .into_iter()
            .filter(|f| f.rank == rank)
            .collect(),
        Err(_) => Vec::new(),
    };
    let dir = std::env::var_os(ENV_RELEASE_DIR).map(PathBuf::from);
    if !holds.is_empty() && dir.is_none() {
        return Err((ENV_RELEASE_DIR, "not set, but holds are".into()));
    }
    let chaos = (spec.is_some() || !holds.is_empty() || !tests.is_empty()).then(|| Chaos {
        rng: Mutex::new(spec.map_or(0, |s| {
            s.seed
                ^ u64::from(rank)
                    .wrapping_add(1)
                    .wrapping_mul(0xa076_1d64_78bd_642f)
        })),
        spec,
        holds,
        dir,
        tests,
        test_calls: std::sync::atomic::AtomicU64::new(0),
    });
    let _ = CHAOS.set(chaos);
    Ok(())
}

/// Whether this rank delays or holds anything (a plain run skips the hook).
pub(crate) fn active() -> bool {
    matches!(CHAOS.get(), Some(Some(_)))
}

/// Called at each test-like call that records an outcome (never in a replay): the outcome
/// to force at this one, if any.
pub(crate) fn next_test() -> Option<TestOutcome> {
    let Some(Some(c)) = CHAOS.get() else {
        return None;
    };
    if c.tests.is_empty() {
        return None;
    }
    let n = c
        .test_calls
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    c.tests.iter().find(|f| f.call == n).map(|f| f.outcome)
}

/// Whether explore released every hold and forcing (`DIR/all` exists).
pub(crate) fn released_all() -> bool {
    match CHAOS.get() {
        Some(Some(Chaos { dir: Some(d), .. })) => d.join(RELEASE_ALL).exists(),
        _ => false,
    }
}

/// Called before `rank` posts descriptor `seq` (never in a replay): delay or hold.
pub(crate) fn before_post(seq: u64) {
    let Some(Some(c)) = CHAOS.get() else { return };
    if let Some(spec) = c.spec {
        let (roll, amount) = {
            let mut st = c.rng.lock().expect("chaos rng");
            (splitmix64(&mut st) % 100, splitmix64(&mut st))
        };
        if roll < u64::from(spec.percent) && spec.max_us > 0 {
            std::thread::sleep(Duration::from_micros(amount % (spec.max_us + 1)));
        }
    }
    let Some(dir) = &c.dir else { return };
    // A call may be held for several receives: it waits for all of their tokens.
    let start = Instant::now();
    for h in c.holds.iter().filter(|h| h.seq == seq) {
        while !dir.join(&h.token).exists()
            && !dir.join(RELEASE_ALL).exists()
            && start.elapsed() < HOLD_LIMIT
        {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chaos_settings_round_trip_and_bad_ones_are_refused() {
        let s = ChaosSpec::parse("seed=7,max_us=100,percent=25").unwrap();
        assert_eq!(
            s,
            ChaosSpec {
                seed: 7,
                max_us: 100,
                percent: 25
            }
        );
        assert_eq!(ChaosSpec::parse(&s.to_env()).unwrap(), s);
        assert_eq!(ChaosSpec::parse("seed=3").unwrap().max_us, 5000);
        for bad in [
            "",
            "max_us=4",
            "seed=x",
            "seed=1,percent=101",
            "seed=1,speed=2",
            "seed",
        ] {
            assert!(ChaosSpec::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn holds_round_trip_and_tokens_are_plain_names() {
        let h = parse_holds("1:0:r0-1;3:12:all_x").unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!((h[1].rank, h[1].seq, h[1].token.as_str()), (3, 12, "all_x"));
        assert_eq!(parse_holds(&holds_env(&h)).unwrap(), h);
        for bad in ["1:2", "1:2:../x", "a:2:t", "1:b:t", "1:2:"] {
            assert!(parse_holds(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn forced_tests_round_trip_and_bad_ones_are_refused() {
        let f = parse_test_forces("0:3:complete;2:0:pending;1:4:index=2").unwrap();
        assert_eq!(f[2].outcome, TestOutcome::Index(2));
        assert_eq!(f[0].outcome, TestOutcome::Complete);
        assert_eq!((f[1].rank, f[1].call), (2, 0));
        assert_eq!(parse_test_forces(&test_forces_env(&f)).unwrap(), f);
        for bad in [
            "0:1",
            "0:1:done",
            "x:1:pending",
            "0:y:complete",
            "0:1:index=x",
        ] {
            assert!(parse_test_forces(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_seed_names_one_sequence() {
        let draw = |seed: u64| {
            let mut st = seed;
            (0..8).map(|_| splitmix64(&mut st)).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }
}
