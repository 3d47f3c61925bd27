//! The writer's nap when its queue is empty.

use std::time::{Duration, Instant};

/// How long the writer sleeps when its queue is empty. It polls rather than blocks on
/// the queue (a blocked receiver makes every send on the slice path pay a futex wake,
/// several microseconds at up to 100k slices a second), but a fixed short nap woke it
/// 500 times a second in a job that computes, each wake taking a core from a computing
/// rank on a small machine (`synth_barrier` at 10 ms: 3,500 more context switches and
/// +2.5% wall time with only the replay log). So the nap follows the rate slices
/// arrived at since the last wake: as long as [`Nap::MESSAGES`] slices take at that rate
/// (a quarter of the queue if that is less), at most the commit interval, cut short by a
/// commit falling due. Not longer: the messages a nap leaves queued are pooled buffers the
/// slice path refills, and a message-heavy job whose writer napped a whole commit interval
/// (2,000 slices queued) filled cold buffers and ran about 2% slower (`comet_exchange`,
/// replay log only, 8 alternating rounds: 1,357 +- 11 ms against 1,332 +- 10). A sender that finds the queue full, and the recorder closing the queue, wake
/// the writer at once.
pub(crate) struct Nap {
    queue: usize,
    longest: Duration,
    last_wake: Instant,
    received: usize,
}

impl Nap {
    /// The shortest nap (over 100,000 slices a second).
    const SHORTEST: Duration = Duration::from_millis(1);
    /// How many slices a nap lets queue up, at the recent rate.
    const MESSAGES: usize = 128;

    pub(crate) fn new(queue: usize, longest: Duration, now: Instant) -> Nap {
        Nap {
            queue,
            longest: longest.max(Self::SHORTEST),
            last_wake: now,
            received: 0,
        }
    }

    pub(crate) fn received(&mut self) {
        self.received += 1;
    }

    /// The next nap, taken at `now` with the queue empty; `commit_in` is how long the
    /// open transaction may stay open, if there is one.
    pub(crate) fn length(&mut self, now: Instant, commit_in: Option<Duration>) -> Duration {
        let since = now.saturating_duration_since(self.last_wake);
        let by_rate = match self.received {
            0 => self.longest,
            n => since.mul_f64(Self::MESSAGES.min(self.queue / 4).max(1) as f64 / n as f64),
        };
        self.received = 0;
        self.last_wake = now;
        let nap = by_rate.clamp(Self::SHORTEST, self.longest);
        commit_in.map_or(nap, |c| nap.min(c.max(Self::SHORTEST)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_idle_queue_lets_the_writer_sleep_a_whole_commit_interval() {
        let t0 = Instant::now();
        let mut nap = Nap::new(8192, 20 * MS, t0);
        assert_eq!(nap.length(t0 + 20 * MS, None), 20 * MS);
        // A slice every 6 ms (synth_barrier at 10 ms): far from filling a quarter.
        nap.received();
        nap.received();
        nap.received();
        assert_eq!(nap.length(t0 + 40 * MS, None), 20 * MS);
    }

    #[test]
    fn a_fast_queue_shortens_the_nap_to_a_few_messages() {
        let t0 = Instant::now();
        let mut nap = Nap::new(8192, 20 * MS, t0);
        // 256 slices in 4 ms: 128 arrive in 2 ms.
        for _ in 0..256 {
            nap.received();
        }
        assert_eq!(nap.length(t0 + 4 * MS, None), 2 * MS);
        // A small queue: a quarter of it (64 of 256) in 4 ms at 16 a millisecond.
        let mut small = Nap::new(256, 20 * MS, t0);
        for _ in 0..64 {
            small.received();
        }
        assert_eq!(small.length(t0 + 4 * MS, None), 4 * MS);
        // Faster than the shortest nap allows: the shortest.
        for _ in 0..100_000 {
            nap.received();
        }
        assert_eq!(nap.length(t0 + 5 * MS, None), Nap::SHORTEST);
    }

    #[test]
    fn a_commit_falling_due_cuts_the_nap_short() {
        let t0 = Instant::now();
        let mut nap = Nap::new(8192, 20 * MS, t0);
        assert_eq!(nap.length(t0, Some(3 * MS)), 3 * MS);
        // Already due: the shortest nap, never a busy loop.
        assert_eq!(nap.length(t0, Some(Duration::ZERO)), Nap::SHORTEST);
    }
}
