//! Process-shared futex wait/wake on an `AtomicU32`.
//!
//! The words live in memfd-backed shared memory and waiters and wakers are different
//! processes, so these are the *shared* futex operations: never `FUTEX_PRIVATE_FLAG`,
//! which keys the wait queue on the virtual address of one process and would make a wake
//! from another process (mapping the word at a different address) miss the waiter.
//!
//! Futex waits can return spuriously; every caller must re-check its condition in a loop.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::thread::futex;
use rustix::time::{clock_gettime, ClockId, Timespec};

/// Why a wait returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitResult {
    /// Woken by [`wake`] (or spuriously: re-check the condition).
    Woken,
    /// The timeout or deadline passed.
    TimedOut,
    /// The word did not hold `expected` when the wait started, so it never slept.
    ValueChanged,
}

/// Matches every waiter in `FUTEX_WAIT_BITSET` (the kernel's `FUTEX_BITSET_MATCH_ANY`).
const BITSET_MATCH_ANY: NonZeroU32 = NonZeroU32::MAX;

/// Shared (not private) futex operations: see the module comment.
const SHARED: futex::Flags = futex::Flags::empty();

/// Sleeps while `*word == expected`, for at most `timeout` (`None`: no limit).
/// An interrupted wait (EINTR) is resumed with the remaining time.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> WaitResult {
    // A timeout too large to express as a deadline is as good as none.
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    wait_until(word, expected, deadline)
}

/// Sleeps while `*word == expected`, until `deadline` at the latest (`None`: no limit).
/// Uses `FUTEX_WAIT_BITSET` without `FUTEX_CLOCK_REALTIME`, i.e. an absolute
/// `CLOCK_MONOTONIC` deadline (the clock behind `Instant` on Linux), so retrying after
/// EINTR needs no recomputation and wall-clock jumps do not matter.
pub fn wait_until(word: &AtomicU32, expected: u32, deadline: Option<Instant>) -> WaitResult {
    wait_bits_until(word, expected, BITSET_MATCH_ANY, deadline)
}

/// [`wait_until`] as one of the waiters `bits` names: a [`wake_bits`] wakes it only if
/// its bits and the wake's share one (`FUTEX_WAIT_BITSET`). Many threads can then sleep
/// on one word and one system call wakes any set of them.
pub fn wait_bits_until(
    word: &AtomicU32,
    expected: u32,
    bits: NonZeroU32,
    deadline: Option<Instant>,
) -> WaitResult {
    // The deadline is absolute, so one conversion serves every retry after EINTR.
    let ts = match deadline {
        None => None,
        Some(d) => match monotonic_timespec(d) {
            Some(ts) => Some(ts),
            None => {
                // Already past: report a changed value in preference to a timeout, as
                // the kernel would have, so callers see the freshest information.
                return if word.load(Ordering::Acquire) != expected {
                    WaitResult::ValueChanged
                } else {
                    WaitResult::TimedOut
                };
            }
        },
    };
    loop {
        match futex::wait_bitset(word, SHARED, expected, ts.as_ref(), bits) {
            Ok(()) => return WaitResult::Woken,
            Err(Errno::AGAIN) => return WaitResult::ValueChanged,
            Err(Errno::TIMEDOUT) => return WaitResult::TimedOut,
            // A signal handler ran; the deadline is absolute, so just go back to sleep.
            Err(Errno::INTR) => continue,
            // EFAULT/EINVAL/ENOSYS mean a bug (bad address or flags), not a runtime
            // condition a caller could handle.
            Err(e) => panic!("futex wait failed: {e}"),
        }
    }
}

/// Wakes at most `n` waiters on `word`; returns how many were woken.
pub fn wake(word: &AtomicU32, n: u32) -> usize {
    let n = n.min(i32::MAX as u32);
    match futex::wake(word, SHARED, n) {
        Ok(woken) => woken,
        Err(e) => panic!("futex wake failed: {e}"),
    }
}

/// Wakes every waiter on `word`; returns how many were woken.
pub fn wake_all(word: &AtomicU32) -> usize {
    wake(word, i32::MAX as u32)
}

/// Wakes every waiter on `word` that sleeps through [`wait_bits_until`] with a bit in
/// `bits` (and every plain waiter); returns how many were woken.
pub fn wake_bits(word: &AtomicU32, bits: NonZeroU32) -> usize {
    match futex::wake_bitset(word, SHARED, i32::MAX as u32, bits) {
        Ok(woken) => woken,
        Err(e) => panic!("futex wake failed: {e}"),
    }
}

/// [`wait_until`], counted in `sleepers` so that [`bump_and_wake`] can skip the system call
/// while nobody sleeps (the usual case: waiters poll first). Every sleeper on a word woken
/// by `bump_and_wake` must sleep through this.
pub fn wait_counted(
    word: &AtomicU32,
    expected: u32,
    sleepers: &AtomicU32,
    deadline: Option<Instant>,
) -> WaitResult {
    // Sequentially consistent on both sides: either the waker sees this count, or this
    // sees the waker's bump and does not sleep.
    sleepers.fetch_add(1, Ordering::SeqCst);
    let r = if word.load(Ordering::SeqCst) != expected {
        WaitResult::ValueChanged
    } else {
        wait_until(word, expected, deadline)
    };
    sleepers.fetch_sub(1, Ordering::SeqCst);
    r
}

/// Bump `word` and wake whoever sleeps on it through [`wait_counted`]; no system call when
/// nobody does (a polling waiter sees the bump by itself).
pub fn bump_and_wake(word: &AtomicU32, sleepers: &AtomicU32) {
    word.fetch_add(1, Ordering::SeqCst);
    if sleepers.load(Ordering::SeqCst) != 0 {
        wake_all(word);
    }
}

/// `deadline` as an absolute `CLOCK_MONOTONIC` timespec, or `None` if it has passed.
fn monotonic_timespec(deadline: Instant) -> Option<Timespec> {
    let remaining = deadline.checked_duration_since(Instant::now())?;
    if remaining.is_zero() {
        return None;
    }
    let now = clock_gettime(ClockId::Monotonic);
    // Saturate rather than overflow for absurd deadlines; they behave as "never".
    let mut sec = now
        .tv_sec
        .saturating_add(i64::try_from(remaining.as_secs()).unwrap_or(i64::MAX));
    let mut nsec = now.tv_nsec + i64::from(remaining.subsec_nanos());
    if nsec >= 1_000_000_000 {
        nsec -= 1_000_000_000;
        sec = sec.saturating_add(1);
    }
    Some(Timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    })
}

/// The default polling budget, in microseconds.
pub const DEFAULT_SPIN_US: u64 = 50;
/// The largest `STROBE_SPIN_US` accepted (1 s): more is a typo, not a tuning.
pub const MAX_SPIN_US: u64 = 1_000_000;

/// Parse a `STROBE_SPIN_US` value: whole microseconds, 0..=[`MAX_SPIN_US`].
pub fn parse_spin_us(v: &str) -> Result<u64, String> {
    match v.trim().parse::<u64>() {
        Ok(us) if us <= MAX_SPIN_US => Ok(us),
        Ok(us) => Err(format!(
            "STROBE_SPIN_US={us} is more than {MAX_SPIN_US} microseconds"
        )),
        Err(_) => Err(format!(
            "STROBE_SPIN_US={v:?} is not a number of microseconds (0 turns polling off; default {DEFAULT_SPIN_US})"
        )),
    }
}

/// `STROBE_SPIN_US` from the environment: `Ok(None)` when unset. The CLI calls this before
/// starting a job and refuses a bad value (exit 2, the variable named).
pub fn spin_env() -> Result<Option<u64>, String> {
    match std::env::var("STROBE_SPIN_US") {
        Ok(v) => parse_spin_us(&v).map(Some),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(format!(
            "STROBE_SPIN_US={v:?} is not a number of microseconds"
        )),
    }
}

/// `STROBE_SPIN_US` as set, or `None` for the default policy. A rank (which the CLI has
/// already checked) that still sees a bad value warns once and uses the default policy
/// rather than failing the job inside `MPI_Init`.
fn explicit_spin() -> Option<Duration> {
    static SPIN: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *SPIN.get_or_init(|| match spin_env() {
        Ok(us) => us.map(Duration::from_micros),
        Err(e) => {
            eprintln!("strobe: ignoring {e}; using the default polling policy");
            None
        }
    })
}

/// Ranks of the job this process belongs to (0: unknown). The launcher notes it; a rank
/// reads it from its environment.
static JOB_RANKS: AtomicU32 = AtomicU32::new(0);

/// Tell the spin policy how many ranks the job has (the launcher, before it starts).
pub fn note_job_ranks(ranks: u32) {
    JOB_RANKS.store(ranks, Ordering::Relaxed);
}

fn job_ranks() -> u32 {
    static FROM_ENV: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    match JOB_RANKS.load(Ordering::Relaxed) {
        0 => *FROM_ENV.get_or_init(|| {
            std::env::var(crate::segment::ENV_SIZE)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        }),
        n => n,
    }
}

fn cores() -> u32 {
    static CORES: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(u32::MAX as usize) as u32)
    })
}

/// How long a waiter polls before it sleeps in the kernel. Waking a sleeping thread on an
/// idle core costs tens of microseconds (more in a VM), while the hand-offs of a slice are
/// a few microseconds apart, so polling pays — as long as the thread polled for has a core.
///
/// Spin policy (issue 11, item 8): `STROBE_SPIN_US` when set (0 turns polling off);
/// otherwise [`DEFAULT_SPIN_US`], but 0 when the cores are oversubscribed: the job has more
/// ranks than the machine has cores, or other programs want the cores ([`contended`]). A
/// poller on an oversubscribed machine takes the core the thread it waits for needs:
/// `exchange` on 8 ranks went from about 1 s to 20 s beside two busy loops.
pub fn spin_budget() -> Duration {
    if let Some(d) = explicit_spin() {
        return d;
    }
    if job_ranks() > cores() || contended() {
        return Duration::ZERO;
    }
    Duration::from_micros(DEFAULT_SPIN_US)
}

/// How often [`contended`] looks at the machine's run queue.
const LOAD_SAMPLE: Duration = Duration::from_millis(10);

/// When [`contended`] last looked (ns since the process's first look), and what it saw.
static LOAD_SAMPLED_NS: AtomicU64 = AtomicU64::new(0);
static CONTENDED: AtomicBool = AtomicBool::new(false);

/// True when more tasks are runnable than there are cores and not all of them can be this
/// job's (ranks plus node managers): another program competes for the cores. Sampled from
/// `/proc/loadavg` (the instantaneous count of runnable tasks) at most every 10 ms per
/// process, so a wait costs an atomic load almost always.
fn contended() -> bool {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    let now = base.elapsed().as_nanos().min(u64::MAX as u128) as u64 + 1;
    let last = LOAD_SAMPLED_NS.load(Ordering::Relaxed);
    if last != 0 && now.saturating_sub(last) < LOAD_SAMPLE.as_nanos() as u64 {
        return CONTENDED.load(Ordering::Relaxed);
    }
    // One thread samples; the others use the previous answer meanwhile.
    if LOAD_SAMPLED_NS
        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return CONTENDED.load(Ordering::Relaxed);
    }
    let c = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| runnable_tasks(&l))
        .is_some_and(|running| oversubscribed(running, job_ranks(), cores()));
    CONTENDED.store(c, Ordering::Relaxed);
    c
}

/// Runnable tasks from a `/proc/loadavg` line (`0.50 0.40 0.30 3/512 12345`: the 3).
fn runnable_tasks(loadavg: &str) -> Option<u32> {
    loadavg
        .split_whitespace()
        .nth(3)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// `running` runnable tasks on `cores` cores, of which up to `ranks` + 1 (the ranks and a
/// node manager) may be this job's: oversubscribed when there are more than the cores and
/// more than this job can account for. (With an unknown job size, 0, only the cores count.)
fn oversubscribed(running: u32, ranks: u32, cores: u32) -> bool {
    running > cores && running > ranks.saturating_add(1)
}

/// How many polling rounds between two yields of the core. When the job's ranks and its
/// node manager are more threads than the machine has cores (2 ranks on 2 cores: every
/// one of them polls while it waits, and the one with work to do may be the one without a
/// core), a poller yields every 4 rounds; otherwise every 64. Measured on 2 ranks, 2 cores
/// (`bench_pingpong sizes=1,64 reps=5000`, 3 alternating rounds): one-way 1-byte latency
/// 7.6-8.9 us yielding every 64 rounds against 3.9-6.7 us every 4, 1-byte message rate
/// 0.31-0.37 against 0.38-0.40 MB/s, `comet_exchange` 1.81-1.89 s against 1.69-1.81 s;
/// every 512 rounds doubled the latency. (With more ranks than cores the spin policy does
/// not poll at all, [`spin_budget`].)
fn yield_every() -> u32 {
    static EVERY: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        if job_ranks().saturating_add(1) > cores() {
            4
        } else {
            64
        }
    })
}

/// Poll `word` for up to `budget` while it still holds `expected`, yielding the core now and
/// then so that polling never starves a runnable thread (on an oversubscribed host the
/// thread we wait for may need our core). Returns true when the word changed.
pub fn spin_while_eq(word: &AtomicU32, expected: u32, budget: Duration) -> bool {
    poll_until(budget, || word.load(Ordering::Acquire) != expected)
}

/// Poll `done` for up to `budget`, yielding the core every [`yield_every`] rounds; true as
/// soon as it holds (checked once even with a zero budget). Every poll of the runtime
/// goes through here: a futex word ([`spin_while_eq`]) or a transport's event counter.
pub fn poll_until(budget: Duration, mut done: impl FnMut() -> bool) -> bool {
    if budget.is_zero() {
        return done();
    }
    let start = Instant::now();
    let mut i = 0u32;
    loop {
        if done() {
            return true;
        }
        i = i.wrapping_add(1);
        if i % yield_every() == 0 {
            if start.elapsed() >= budget {
                return false;
            }
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::thread;

    /// Wakes `word` until a waiter is actually asleep in the kernel (wake returns 1),
    /// so the waiter's result is deterministically `Woken`.
    fn wake_sleeper(word: &AtomicU32) {
        let start = Instant::now();
        while wake(word, 1) == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "waiter never slept"
            );
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn spin_us_values_are_checked() {
        assert_eq!(parse_spin_us("0"), Ok(0));
        assert_eq!(parse_spin_us(" 200 "), Ok(200));
        let e = parse_spin_us("garbage").unwrap_err();
        assert!(e.contains("STROBE_SPIN_US"), "{e}");
        assert!(parse_spin_us("-5").is_err());
        assert!(parse_spin_us("99999999").is_err());
    }

    #[test]
    fn oversubscription_is_read_from_the_run_queue() {
        assert_eq!(runnable_tasks("0.50 0.40 0.30 3/512 12345\n"), Some(3));
        assert_eq!(runnable_tasks("garbage"), None);
        // 2 ranks and their node manager on 2 cores: the job's own, keep polling.
        assert!(!oversubscribed(3, 2, 2));
        // Two busy loops beside them: stop polling.
        assert!(oversubscribed(5, 2, 2));
        // Plenty of cores: poll whatever runs.
        assert!(!oversubscribed(5, 2, 16));
        // A process that does not know its job: the cores alone decide.
        assert!(oversubscribed(3, 0, 2));
        assert!(!oversubscribed(2, 0, 2));
    }

    #[test]
    fn value_changed_when_not_expected() {
        let w = AtomicU32::new(5);
        assert_eq!(wait(&w, 4, None), WaitResult::ValueChanged);
        assert_eq!(wait(&w, 4, Some(Duration::ZERO)), WaitResult::ValueChanged);
        assert_eq!(wait_until(&w, 4, None), WaitResult::ValueChanged);
    }

    #[test]
    fn relative_timeout_elapses() {
        let w = AtomicU32::new(0);
        let t = Instant::now();
        assert_eq!(
            wait(&w, 0, Some(Duration::from_millis(30))),
            WaitResult::TimedOut
        );
        assert!(t.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn absolute_deadline_elapses_and_past_deadline_returns_at_once() {
        let w = AtomicU32::new(0);
        let d = Instant::now() + Duration::from_millis(30);
        assert_eq!(wait_until(&w, 0, Some(d)), WaitResult::TimedOut);
        assert!(Instant::now() >= d);
        assert_eq!(wait_until(&w, 0, Some(d)), WaitResult::TimedOut);
        assert_eq!(wait(&w, 0, Some(Duration::ZERO)), WaitResult::TimedOut);
    }

    #[test]
    fn wake_without_waiters_wakes_nobody() {
        let w = AtomicU32::new(0);
        assert_eq!(wake(&w, 1), 0);
        assert_eq!(wake_all(&w), 0);
    }

    #[test]
    fn waiter_woken_by_other_thread() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = Arc::clone(&w);
        let h = thread::spawn(move || wait(&w2, 0, Some(Duration::from_secs(30))));
        wake_sleeper(&w);
        assert_eq!(h.join().unwrap(), WaitResult::Woken);
    }

    #[test]
    fn waiter_with_deadline_woken_by_other_thread() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = Arc::clone(&w);
        let h = thread::spawn(move || {
            wait_until(&w2, 0, Some(Instant::now() + Duration::from_secs(30)))
        });
        wake_sleeper(&w);
        assert_eq!(h.join().unwrap(), WaitResult::Woken);
    }

    #[test]
    fn wake_all_wakes_every_waiter() {
        const N: u32 = 4;
        let w = Arc::new(AtomicU32::new(0));
        let handles: Vec<_> = (0..N)
            .map(|_| {
                let w = Arc::clone(&w);
                thread::spawn(move || {
                    // Condition loop, as real callers write it.
                    while w.load(Ordering::Acquire) == 0 {
                        wait(&w, 0, None);
                    }
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(20));
        w.store(1, Ordering::Release);
        wake_all(&w);
        for h in handles {
            h.join().unwrap();
        }
    }
}
