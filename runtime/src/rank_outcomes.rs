//! The rank side of record and replay (a child module of `rank`, so it sees `RankCtx`'s
//! fields): capturing timing-dependent outcomes into the outcome ring, forcing recorded
//! ones in replay and under `strobe explore`, and the clock and libc values a rank reads
//! through the runtime.

use super::*;

impl RankCtx {
    /// Capture: append outcome records to the rank's outcome ring, closing the open run of
    /// failed tests first. Waits (without spinning) for the node manager when it is full.
    pub(super) fn capture(&self, recs: &[OutcomeRec]) {
        let slot = self.seg.slot(self.rank);
        // Holding the lock while waiting is fine: only the application thread takes it.
        let g = self.inner.lock().expect("rank context lock");
        let fails = slot.pending_fails.load(Ordering::Relaxed);
        let head = (fails > 0).then(|| OutcomeRec::fails(fails));
        for (i, r) in head.iter().chain(recs).enumerate() {
            while g.queues.outcomes.push(r).is_err() {
                let seen = slot.wake.load(Ordering::Acquire);
                ring_doorbell(&self.seg);
                self.seg
                    .sleep_on_wake(self.rank, seen, Duration::from_micros(200));
                if self.seg.header().shutdown.load(Ordering::Acquire) != 0 {
                    std::process::exit(1);
                }
            }
            if i == 0 && head.is_some() {
                // Pushed before cleared: a rank killed in between double-counts a run, the
                // other order would lose it; only the launcher reads the counter, after death.
                slot.pending_fails.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Capture one failed test: only a counter (the run is closed by the next outcome).
    pub(super) fn capture_fail(&self) {
        let slot = self.seg.slot(self.rank);
        let n = slot.pending_fails.load(Ordering::Relaxed) + 1;
        slot.pending_fails.store(n, Ordering::Relaxed);
        // Polling is waiting: a receive posted while every rank computed did not ring the
        // stretched strobe (`segment::post_waits_for_a_wait`); a test that finds nothing
        // does, once per batch of posts (the slice clears `posted_since`, the ring clears
        // `stretched`: one relaxed load each otherwise). Not in a replay, whose Strobe
        // Sender has no timer to stretch.
        if !self.replay_mode && crate::segment::block_wants_slice(&self.seg, self.rank).is_some() {
            ring_if_stretched(&self.seg);
        }
        // A polling rank posts nothing and never blocks: publish where it polls at the
        // first failed test of a run and every 1024th after (one stack walk each, not one
        // per test), for the livelock report.
        if n == 1 || n % 1024 == 0 {
            slot.set_site(crate::callsite::current());
        }
        if n >= 1 << 30 {
            self.capture(&[]);
        }
    }

    /// Replay: the next recorded outcome, or stop the rank as diverged.
    pub(super) fn next_recorded(&self, call: &str) -> Outcome {
        let got = {
            let mut g = self.inner.lock().expect("rank context lock");
            let cur = g.replay.as_mut().expect("replay mode");
            (cur.next_outcome(), cur.consumed)
        };
        match got {
            (Ok(Some(o)), _) => o,
            (Ok(None), n) => self.diverge(
                Divergence::LogExhausted,
                &format!(
                    "{call} is timing-dependent call number {} of this rank, but the recording \
                     holds only {n} (held here: a divergence unless the recorded run was cut \
                     before this rank made the call)",
                    n + 1
                ),
            ),
            (Err(e), _) => self.diverge(
                Divergence::BadLog,
                &format!("the recording is damaged: {e}"),
            ),
        }
    }

    /// Replay: the program left the recorded path. Say so, flag it for the replayer (which
    /// stops the job with a divergence report), and wait to be stopped.
    pub(super) fn diverge(&self, why: Divergence, what: &str) -> ! {
        let slot = self.seg.slot(self.rank);
        eprintln!(
            "strobe: replay divergence on rank {} (descriptor seq {}): {what}",
            self.rank,
            slot.posted.load(Ordering::Acquire)
        );
        slot.set_diverged(why);
        self.announce_held();
        loop {
            let seen = slot.wake.load(Ordering::Acquire);
            if self.seg.header().shutdown.load(Ordering::Acquire) != 0 {
                std::process::exit(1);
            }
            self.seg
                .sleep_on_wake(self.rank, seen, Duration::from_millis(50));
        }
    }

    pub(super) fn replaying(&self) -> bool {
        self.inner
            .lock()
            .expect("rank context lock")
            .replay
            .is_some()
    }

    /// Replay: force a recorded test/wait outcome: block until the recorded requests are
    /// complete (a recorded success waits for completion) and report exactly them.
    pub(super) fn forced_indices(
        &self,
        call: Primitive,
        ids: &[u64],
        want: Want,
        blocking: bool,
    ) -> Vec<usize> {
        let name = call.mpi_name();
        match self.next_recorded(name) {
            Outcome::Fail if !blocking => Vec::new(),
            Outcome::Indices(idx) => {
                if idx.iter().any(|&i| i >= ids.len())
                    || (want == Want::All && idx.len() != ids.len())
                    || (want == Want::Any && idx.len() != 1)
                {
                    self.diverge(
                        Divergence::BadIndex,
                        &format!(
                            "{name} over {} requests was recorded reporting {idx:?}",
                            ids.len()
                        ),
                    );
                }
                let want_ids: Vec<u64> = idx.iter().map(|&i| ids[i]).collect();
                self.block_until(call.into(), |done| {
                    want_ids.iter().all(|i| done.contains_key(i))
                });
                idx
            }
            other => self.diverge(
                Divergence::OutcomeKind,
                &format!(
                    "the program called {name}, the recording has {} here",
                    other.describe()
                ),
            ),
        }
    }

    /// `strobe explore` forces a test to succeed: wait, computing as far as the runtime can
    /// tell (so no deadlock is declared), until `want` holds over `ids` or explore released
    /// every forcing (the completion needs this rank to go on first).
    pub(super) fn await_forced(&self, ids: &[u64], want: Want) {
        loop {
            {
                let mut g = self.inner.lock().expect("rank context lock");
                g.pump(&self.seg, self.rank);
                if want.satisfied(ids, &g.done) {
                    return;
                }
            }
            if crate::chaos::released_all()
                || self.seg.header().shutdown.load(Ordering::Acquire) != 0
            {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// `strobe explore` forces a call over a set to report request `n` alone: wait for it
    /// as [`RankCtx::await_forced`] does. `None` (report as usual) when `n` is not in the
    /// set, the call wants every request, or explore released the forcing first.
    pub(super) fn forced_index(&self, ids: &[u64], want: Want, n: usize) -> Option<Vec<usize>> {
        let id = *ids.get(n)?;
        if want == Want::All {
            return None;
        }
        self.await_forced(&[id], Want::Any);
        let g = self.inner.lock().expect("rank context lock");
        g.done.contains_key(&id).then(|| vec![n])
    }

    /// `MPI_Wtime`: seconds on `CLOCK_MONOTONIC`. The only clock a rank reads through the
    /// runtime, so it is recorded (as integer nanoseconds, from which the `f64` is computed
    /// the same way in both runs) and, in replay, returns the recorded values.
    pub fn wtime(&self) -> f64 {
        if self.replaying() {
            return match self.next_recorded("MPI_Wtime") {
                Outcome::Wtime(ns) => ns_to_seconds(ns),
                other => self.diverge(
                    Divergence::OutcomeKind,
                    &format!(
                        "the program called MPI_Wtime, the recording has {} here",
                        other.describe()
                    ),
                ),
            };
        }
        let ns = monotonic_ns();
        self.capture(&[OutcomeRec::wtime(ns)]);
        ns_to_seconds(ns)
    }

    /// A libc call outside MPI (`time`, `getpid`, ...; the C library interposes them): in a
    /// recording, `real()` and capture its value; in replay, the recorded value, and a
    /// different call at this point of the rank's outcome stream is a divergence. Called
    /// only from the rank's application thread, outside any MPI call.
    pub fn libc_value(&self, call: LibcCall, real: impl FnOnce() -> u64) -> u64 {
        if self.replaying() {
            return match self.next_recorded(call.name()) {
                Outcome::Libc(c, v) if c == call => v,
                other => self.diverge(
                    Divergence::OutcomeKind,
                    &format!(
                        "the program called {} outside MPI, the recording has {} here",
                        call.name(),
                        other.describe()
                    ),
                ),
            };
        }
        let v = real();
        self.capture(&[OutcomeRec::libc(call, v)]);
        v
    }

    /// `getrandom` outside MPI: `real` fills `buf` and returns the byte count or `-errno`;
    /// recorded as that count and the bytes, eight per record (without allocating), and in
    /// replay the recorded bytes are copied into `buf`.
    pub fn libc_random(&self, buf: &mut [u8], real: impl FnOnce(&mut [u8]) -> i64) -> i64 {
        if self.replaying() {
            let ret = self.libc_value(LibcCall::Getrandom, || 0) as i64;
            if ret > buf.len() as i64 {
                self.diverge(
                    Divergence::OutcomeKind,
                    &format!(
                        "the program asked getrandom for {} bytes, the recording returned {ret}",
                        buf.len()
                    ),
                );
            }
            for c in buf[..ret.max(0) as usize].chunks_mut(8) {
                let word = self.libc_value(LibcCall::RandomBytes, || 0).to_le_bytes();
                c.copy_from_slice(&word[..c.len()]);
            }
            return ret;
        }
        let ret = real(buf);
        self.capture(&[OutcomeRec::libc(LibcCall::Getrandom, ret as u64)]);
        let got = &buf[..ret.clamp(0, buf.len() as i64) as usize];
        for group in got.chunks(8 * 32) {
            let mut recs = [OutcomeRec::default(); 32];
            let mut n = 0;
            for c in group.chunks(8) {
                let mut word = [0u8; 8];
                word[..c.len()].copy_from_slice(c);
                recs[n] = OutcomeRec::libc(LibcCall::RandomBytes, u64::from_le_bytes(word));
                n += 1;
            }
            self.capture(&recs[..n]);
        }
        ret
    }
}
