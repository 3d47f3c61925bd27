//! Whether the Strobe Sender should poll after a delivery although every rank computes:
//! adaptive spinning, as an adaptive mutex decides whether to spin from how long the
//! lock was held the last times.
//!
//! Right after a slice's completions are delivered every woken rank counts as computing,
//! and the Strobe Sender used to sleep on its doorbell at once. In a ping-pong of 64-byte
//! messages both ranks are woken (one from its eager `MPI_Send`, one from its `MPI_Recv`)
//! and post their next call within microseconds; each post then had to wake the sleeping
//! Strobe Sender with a futex (12% of the samples, 22 us a slice). Polling for a while
//! after every delivery fixed that (12 us) but took a core from a wavefront's ranks,
//! which compute for a block after each delivery (SWEEP3D-like non-blocking +4%). So the
//! Strobe Sender polls only while the ranks it woke have been coming back quickly: it
//! keeps a moving rate of *slow* returns (a delivery whose next slice began later than
//! [`WOKEN_SPIN`]), measured when it polled, and polls while fewer than half of the
//! recent returns were slow. When they were not, every [`PROBE_EVERY`]th delivery it
//! polls anyway, to notice the job changing its pattern (a cost of at most 20 us in 64
//! deliveries).
//!
//! A rate and not an average time: an average let one outlier stop the polling. While
//! recording, the writer thread now and then takes a core for a few hundred microseconds;
//! one such return moved the average of `comet_exchange` above the bar, and the Strobe
//! Sender then slept through the next 64 deliveries until a probe (measured: 30,514 of
//! 75,367 deliveries not polled, the recording 2.0 s against 1.6 s polling always). A
//! slow return now counts as one miss.

use std::time::{Duration, Instant};

/// Longest the Strobe Sender polls after a delivery while every rank computes.
pub const WOKEN_SPIN: Duration = Duration::from_micros(20);
/// One delivery in this many polls although the ranks have been slow to come back.
pub const PROBE_EVERY: u32 = 64;
/// Fixed-point 1.0 of [`ReturnWatch`]'s slow-return rate; it polls below half of it.
const RATE_ONE: u32 = 1024;
/// The rate a quick probe leaves: polls, and one slow return brings it over half.
const PROBE_HIT: u32 = 3 * RATE_ONE / 8;

/// The adaptive-spinning state of one Strobe Sender (module docs).
#[derive(Debug, Default)]
pub struct ReturnWatch {
    /// The last delivery that woke ranks, while no slice has begun since.
    woke_at: Option<Instant>,
    /// For that delivery: `None` until the Strobe Sender first asked, then whether it polls.
    polls: Option<bool>,
    /// That poll is a probe: a quick return sets the rate to [`PROBE_HIT`] instead of
    /// moving it (polling resumes; one slow return after it stops it again).
    probe: bool,
    /// Moving rate (weight 1/4, [`RATE_ONE`] = every one) of slow returns, measured while
    /// polling. Zero at first: the first delivery polls.
    slow_rate: u32,
    /// Deliveries since the last one polled.
    since_poll: u32,
}

impl ReturnWatch {
    /// Completions were handed to ranks and woke them at `now`.
    pub fn woke(&mut self, now: Instant) {
        self.woke_at = Some(now);
        self.polls = None;
    }

    /// Whether the last delivery since a slice began woke ranks at most `within` before `now`.
    pub fn woke_within(&self, now: Instant, within: Duration) -> bool {
        self.woke_at
            .is_some_and(|at| now.saturating_duration_since(at) <= within)
    }

    /// A slice begins at `now`: if the Strobe Sender polled since the last delivery, the
    /// time since it is how quickly the woken ranks came back.
    pub fn slice_began(&mut self, now: Instant) {
        if let (Some(at), Some(true)) = (self.woke_at.take(), self.polls) {
            let slow = now.saturating_duration_since(at) > WOKEN_SPIN;
            let sample = if slow { RATE_ONE } else { 0 };
            self.slow_rate = match (self.probe, slow) {
                (true, false) => PROBE_HIT,
                _ => (3 * self.slow_rate + sample) / 4,
            };
        }
        self.polls = None;
    }

    /// How long to poll the doorbell at `now` while every rank computes (zero: sleep).
    pub fn spin(&mut self, now: Instant) -> Duration {
        let Some(at) = self.woke_at else {
            return Duration::ZERO;
        };
        let polls = *self.polls.get_or_insert_with(|| {
            let quick = self.slow_rate < RATE_ONE / 2;
            self.since_poll += 1;
            self.probe = !quick && self.since_poll >= PROBE_EVERY;
            let polls = quick || self.probe;
            if polls {
                self.since_poll = 0;
            }
            polls
        });
        if !polls {
            return Duration::ZERO;
        }
        WOKEN_SPIN.saturating_sub(now.saturating_duration_since(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// One delivery at `t`, the Strobe Sender asking at `t`, the next slice `gap` later.
    fn round(w: &mut ReturnWatch, t: Instant, gap: Duration) -> Duration {
        w.woke(t);
        let spin = w.spin(t);
        w.slice_began(t + gap);
        spin
    }

    #[test]
    fn polls_while_woken_ranks_come_back_quickly() {
        let t = Instant::now();
        let mut w = ReturnWatch::default();
        for i in 0..100 {
            assert_eq!(round(&mut w, t + us(i * 100), us(3)), WOKEN_SPIN);
        }
        // Later asks poll only for what is left of the window.
        w.woke(t);
        assert_eq!(w.spin(t + us(15)), us(5));
        assert_eq!(w.spin(t + us(25)), Duration::ZERO);
    }

    #[test]
    fn stops_polling_for_slow_returns_and_probes_now_and_then() {
        let t = Instant::now();
        let mut w = ReturnWatch::default();
        let spins: Vec<Duration> = (0..200)
            .map(|i| round(&mut w, t + us(i * 1000), us(500)))
            .collect();
        // The first deliveries poll (nothing known), three slow returns stop it.
        let polled: Vec<usize> = (0..200).filter(|&i| !spins[i].is_zero()).collect();
        assert_eq!(
            polled,
            vec![0, 1, 2, 66, 130, 194],
            "then only the probes poll"
        );
    }

    #[test]
    fn a_quick_pattern_after_a_slow_one_is_noticed_by_the_probes() {
        let t = Instant::now();
        let mut w = ReturnWatch::default();
        for i in 0..10 {
            round(&mut w, t + us(i * 1000), us(500));
        }
        let first_poll = (10..400)
            .find(|&i| !round(&mut w, t + us(i * 1000), us(2)).is_zero())
            .expect("a probe");
        let resumed = (first_poll + 1..400)
            .filter(|&i| !round(&mut w, t + us(i * 1000), us(2)).is_zero())
            .count();
        assert!(
            first_poll <= 10 + PROBE_EVERY as u64,
            "probe at {first_poll}"
        );
        assert!(
            resumed > 300,
            "polls again once the average drops ({resumed})"
        );
    }

    #[test]
    fn an_outlier_among_quick_returns_does_not_stop_the_polling() {
        let t = Instant::now();
        let mut w = ReturnWatch::default();
        let not_polled = (0..2000)
            .filter(|&i| {
                let gap = if i % 20 == 19 { us(400) } else { us(3) };
                round(&mut w, t + us(i * 1000), gap).is_zero()
            })
            .count();
        assert_eq!(not_polled, 0);
        // Two slow returns in a row do not either; a third does.
        let mut w = ReturnWatch::default();
        round(&mut w, t, us(400));
        round(&mut w, t + us(1000), us(400));
        w.woke(t + us(2000));
        assert!(!w.spin(t + us(2000)).is_zero());
        w.slice_began(t + us(2400));
        w.woke(t + us(3000));
        assert!(w.spin(t + us(3000)).is_zero());
    }

    #[test]
    fn no_delivery_no_poll() {
        let mut w = ReturnWatch::default();
        let t = Instant::now();
        assert_eq!(w.spin(t), Duration::ZERO);
        w.woke(t);
        w.slice_began(t + us(1));
        assert_eq!(
            w.spin(t + us(2)),
            Duration::ZERO,
            "the slice consumed the delivery"
        );
    }
}
