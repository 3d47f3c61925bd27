//! Waking ranks: a rank polls its slot's `wake` word, then sleeps on its group's word.
//!
//! A delivery wakes every rank it completed a call of. When each rank slept on its own
//! word, that took one `FUTEX_WAKE` per sleeping rank, 2.5-3 us each in this VM, and the
//! first rank woken could preempt the node manager on its core before it woke the next
//! one: on 2 cores a delivery to 4 sleeping ranks took 11-25 us, and a rank left asleep
//! behind a preempted node manager waited for the woken rank's time slice (milliseconds
//! in `nas_is` on 2 ranks, where each rank computes for milliseconds after a collective).
//! Now the ranks of a group of [`GROUP`] consecutive world ranks sleep on one futex word
//! (the `group_wake` of the group's first slot), each with its own bit
//! (`FUTEX_WAIT_BITSET`), and a delivery wakes all of a group's sleepers with one
//! `FUTEX_WAKE_BITSET`: the kernel makes them all runnable before the system call returns,
//! so no preemption falls between two of them. Exact bits (32 ranks, 32 bits): a wake
//! never wakes a rank it is not for, so a 1,000-rank oversubscribed job pays nothing for
//! the shared word.
//!
//! The protocol, every access sequentially consistent: the sleeper counts itself in its
//! slot's `wake_sleepers`, reads the group word, re-reads its own `wake` and sleeps only
//! while the group word still holds what it read. The waker bumps the rank's `wake`, reads
//! `wake_sleepers`, and only if it is non-zero bumps the group word and wakes the bit.
//! Either the waker sees the count, or the sleeper sees the bump; a group word bumped
//! between the sleeper's read and its sleep makes the kernel refuse the sleep.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::futex::{self, WaitResult};
use crate::segment::JobSegment;

/// Ranks per shared futex word (the bits of a futex bitset).
pub const GROUP: u32 = 32;

fn group_of(seg: &JobSegment, rank: u32) -> (&AtomicU32, NonZeroU32) {
    let word = &seg.slot(rank - rank % GROUP).group_wake;
    let bit = NonZeroU32::new(1 << (rank % GROUP)).expect("one bit of 32");
    (word, bit)
}

impl JobSegment {
    /// Sleep while `rank`'s `wake` word still reads `seen`, at most `timeout`. Returns early
    /// only when the word changed or the time is up.
    pub fn sleep_on_wake(&self, rank: u32, seen: u32, timeout: Duration) {
        let slot = self.slot(rank);
        let (group, bit) = group_of(self, rank);
        let deadline = Instant::now().checked_add(timeout);
        slot.wake_sleepers.fetch_add(1, Ordering::SeqCst);
        loop {
            let epoch = group.load(Ordering::SeqCst);
            if slot.wake.load(Ordering::SeqCst) != seen {
                break;
            }
            // A changed group word (another rank of the group woken meanwhile) only
            // means reading it again.
            if futex::wait_bits_until(group, epoch, bit, deadline) == WaitResult::TimedOut {
                break;
            }
        }
        slot.wake_sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wake `rank` (bump its `wake` word); a system call only if it sleeps rather than polls.
    pub fn wake_rank(&self, rank: u32) {
        let mut w = WakeGroups::default();
        w.bump(self, rank);
        w.wake(self);
    }
}

/// The sleeping ranks of one delivery, woken with one system call per group.
#[derive(Debug, Default)]
pub struct WakeGroups {
    /// (first rank of the group, bits of its ranks to wake), in the order first seen.
    groups: Vec<(u32, u32)>,
}

impl WakeGroups {
    /// Bump `rank`'s `wake` word (a polling rank sees it by itself); if the rank sleeps,
    /// remember it for [`Self::wake`].
    pub fn bump(&mut self, seg: &JobSegment, rank: u32) {
        let slot = seg.slot(rank);
        slot.wake.fetch_add(1, Ordering::SeqCst);
        if slot.wake_sleepers.load(Ordering::SeqCst) == 0 {
            return;
        }
        let first = rank - rank % GROUP;
        let bit = 1u32 << (rank % GROUP);
        match self.groups.iter_mut().find(|(g, _)| *g == first) {
            Some((_, bits)) => *bits |= bit,
            None => self.groups.push((first, bit)),
        }
    }

    /// True when some bumped rank sleeps.
    pub fn any(&self) -> bool {
        !self.groups.is_empty()
    }

    /// Wake every sleeping rank bumped since the last call: one system call per group.
    pub fn wake(&mut self, seg: &JobSegment) {
        for (first, bits) in self.groups.drain(..) {
            let word = &seg.slot(first).group_wake;
            word.fetch_add(1, Ordering::SeqCst);
            if let Some(bits) = NonZeroU32::new(bits) {
                futex::wake_bits(word, bits);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn segment(ranks: u32) -> Arc<JobSegment> {
        Arc::new(crate::rank::create_segment(ranks, 1).expect("segment"))
    }

    /// Start a sleeper for `rank`; the flag turns true when it returns.
    fn sleeper(seg: &Arc<JobSegment>, rank: u32, timeout: Duration) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        let (shared, flag) = (Arc::clone(seg), Arc::clone(&done));
        let seen = seg.slot(rank).wake.load(Ordering::SeqCst);
        std::thread::spawn(move || {
            shared.sleep_on_wake(rank, seen, timeout);
            flag.store(true, Ordering::SeqCst);
        });
        // Until it sleeps (counted), so the wakes below take the system-call path.
        let start = Instant::now();
        while seg.slot(rank).wake_sleepers.load(Ordering::SeqCst) == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "sleeper never slept"
            );
            std::thread::yield_now();
        }
        done
    }

    fn settles(flag: &AtomicBool, want: bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(500) {
            if flag.load(Ordering::SeqCst) == want {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        flag.load(Ordering::SeqCst) == want
    }

    #[test]
    fn one_wake_per_group_wakes_exactly_the_bumped_sleepers() {
        let seg = segment(70);
        let long = Duration::from_secs(30);
        // Ranks 1 and 5 share group 0, 33 is in group 1, 2 sleeps and is not woken.
        let woken: Vec<_> = [1, 5, 33].iter().map(|&r| sleeper(&seg, r, long)).collect();
        let left = sleeper(&seg, 2, long);
        let mut w = WakeGroups::default();
        for r in [1, 5, 33] {
            w.bump(&seg, r);
        }
        assert_eq!(w.groups, vec![(0, (1 << 1) | (1 << 5)), (32, 1 << 1)]);
        w.wake(&seg);
        for f in &woken {
            assert!(settles(f, true), "a bumped sleeper was not woken");
        }
        assert!(settles(&left, false), "rank 2 was woken without its bit");
        assert!(!w.any());
        seg.wake_rank(2);
        assert!(settles(&left, true));
    }

    #[test]
    fn a_polling_rank_needs_no_system_call_and_a_sleep_times_out() {
        let seg = segment(4);
        let mut w = WakeGroups::default();
        w.bump(&seg, 3);
        assert!(!w.any(), "nobody sleeps: nothing to wake");
        assert_eq!(seg.slot(3).wake.load(Ordering::SeqCst), 1);
        // The word already moved past `seen`: no sleep at all.
        let t = Instant::now();
        seg.sleep_on_wake(3, 0, Duration::from_secs(30));
        assert!(t.elapsed() < Duration::from_secs(5));
        // Unchanged: sleeps until the timeout, not forever, and uncounts itself.
        let t = Instant::now();
        seg.sleep_on_wake(3, 1, Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!(seg.slot(3).wake_sleepers.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_group_word_changed_for_another_rank_does_not_end_a_sleep() {
        let seg = segment(8);
        let f = sleeper(&seg, 6, Duration::from_secs(30));
        // The group word bumped and every waiter on it woken, as a wake for another rank
        // of the group that raced with this sleep would: it sleeps again.
        let word = &seg.slot(0).group_wake;
        for _ in 0..50 {
            word.fetch_add(1, Ordering::SeqCst);
            futex::wake_all(word);
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(settles(&f, false), "woken by its neighbour's wakes");
        seg.wake_rank(6);
        assert!(settles(&f, true));
    }
}
