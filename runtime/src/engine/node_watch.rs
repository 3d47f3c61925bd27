//! Node 0's watch over the job at the end of a slice: the blocked ranks' call sites and
//! deadlock detection (a child module of `node`, so it sees the Node Manager's fields).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::super::deadlock::DeadlockReport;
use super::super::EngineOutcome;
use super::NodeManager;
use crate::descriptor::Descriptor;
use crate::sched::SliceDecisions;
use crate::segment::{BlockedCall, RankState};
use tracing::debug;

impl NodeManager {
    /// Node 0: the call-site words of `blocked` as the ranks publish them now (two loads
    /// each), resolved at the end of the slice ([`Self::blocked_sites`]).
    pub(super) fn site_words(
        &self,
        blocked: &[(u32, BlockedCall)],
    ) -> Vec<(u32, i32, crate::callsite::SiteWords)> {
        self.site_words_into(Vec::new(), blocked)
    }

    /// [`Self::site_words`] into `words`'s vector (emptied first).
    pub(super) fn site_words_into(
        &self,
        mut words: Vec<(u32, i32, crate::callsite::SiteWords)>,
        blocked: &[(u32, BlockedCall)],
    ) -> Vec<(u32, i32, crate::callsite::SiteWords)> {
        words.clear();
        if self.node != 0 {
            return words;
        }
        let seg = &self.shared.seg;
        words.extend(
            blocked
                .iter()
                .filter(|&&(r, _)| self.may_symbolize(r))
                .map(|&(r, _)| {
                    let slot = seg.slot(r);
                    (r, slot.pid.load(Ordering::Acquire) as i32, slot.site())
                }),
        );
        words
    }

    /// Node 0: the sites of the blocking calls this slice exchanges whose ranks were not
    /// blocked when it began (they posted, then the slice started before they announced
    /// the block). A rank publishes a blocking call's site before its descriptor
    /// (`RankCtx::post`) and cannot leave the call before a slice completes it, so the
    /// word read now is that call's. They go after the blocked ranks' (whose order
    /// `SliceRecord::sites` keeps).
    ///
    /// A replay takes every rank that posted, blocking call or not (an inline send too): a
    /// replaying rank publishes its site with each post, and a divergence report names
    /// where the diverging rank was from these sites. `MPI_Sendrecv` posts a non-blocking
    /// send and receive and then waits: a recording that started the slice between the
    /// posts and the wait (timing) left the rank out of the blocked set, and the report
    /// had no place (seen once in CI, `c_replay`). The word is the rank's latest call, at
    /// most the next slice's posts ahead (`post_limit`).
    pub(super) fn add_post_sites(
        &mut self,
        words: &mut Vec<(u32, i32, crate::callsite::SiteWords)>,
        posted: &[Descriptor],
    ) {
        if self.node != 0 {
            return;
        }
        let seg = &self.shared.seg;
        let replaying = self.source.is_some();
        // The last slice's vector (one allocation a ping-pong slice otherwise).
        let mut added = super::super::spares::kept(std::mem::take(&mut self.spares.post_sites));
        added.extend(
            posted
                .iter()
                .filter(|d| {
                    (replaying || (d.blocking() && !d.is_inline())) && self.may_symbolize(d.rank)
                })
                .map(|d| {
                    let slot = seg.slot(d.rank);
                    (d.rank, slot.pid.load(Ordering::Acquire) as i32, slot.site())
                }),
        );
        if added.is_empty() {
            self.spares.post_sites = added;
            return;
        }
        added.sort_by_key(|&(r, _, _)| r);
        added.dedup_by_key(|&mut (r, _, _)| r);
        // The blocked ranks' words are ascending when taken live (no copy then).
        if words.is_sorted_by_key(|&(r, _, _)| r) {
            added.retain(|&(r, _, _)| words.binary_search_by_key(&r, |&(w, _, _)| w).is_err());
        } else {
            let mut listed: Vec<u32> = words.iter().map(|&(r, _, _)| r).collect();
            listed.sort_unstable();
            added.retain(|&(r, _, _)| listed.binary_search(&r).is_err());
        }
        words.append(&mut added);
        self.spares.post_sites = added;
    }

    /// The call sites of the blocked ranks (node 0), resolved while the ranks are alive.
    pub(super) fn blocked_sites_into(
        &mut self,
        mut sites: Vec<(u32, Arc<crate::symbolize::CallSite>)>,
        words: &[(u32, i32, crate::callsite::SiteWords)],
    ) -> Vec<(u32, Arc<crate::symbolize::CallSite>)> {
        sites.clear();
        sites.extend(
            words
                .iter()
                .filter_map(|&(r, pid, w)| self.sites.site(r, pid, w).map(|s| (r, s))),
        );
        sites
    }

    /// Strobe Sender: every live rank blocked, nothing posted, nothing scheduled, nothing in
    /// flight, for `deadlock_slices` slices in a row: the job can never progress.
    ///
    /// In replay `recorded` is the recorded blocked set of the slice: whether a rank was
    /// already inside its blocking call when the strobe fired is timing, and the replay must
    /// declare the deadlock in the same slice as the recording.
    pub(super) fn check_deadlock(
        &mut self,
        slice: u64,
        posted: &[Descriptor],
        dec: &SliceDecisions,
        recorded: Option<&[u32]>,
    ) {
        let seg = &self.shared.seg;
        let mut live = 0;
        let mut blocked = 0;
        for r in 0..self.cfg.ranks {
            let state = seg.slot(r).state();
            let is_live = state.is_live();
            let is_blocked = match recorded {
                Some(rec) => rec.contains(&r),
                None => state == RankState::Blocked,
            };
            if is_live || (recorded.is_some() && is_blocked) {
                live += 1;
                blocked += is_blocked as u32;
            }
        }
        let stuck = live > 0
            && blocked == live
            && posted.is_empty()
            && dec.is_empty()
            && self.sched.is_quiescent()
            && self.overflow.iter().all(|o| o.is_empty())
            && !self.shared.remote.backlog()
            && !self.a_blocked_rank_can_run(recorded);
        self.idle_slices = if stuck { self.idle_slices + 1 } else { 0 };
        if recorded.is_none() && !stuck {
            let (mirrored, node_of_rank) = (self.mirror.applier.is_some(), &self.node_of_rank);
            let sym = |r: u32| !mirrored || node_of_rank[r as usize] == 0;
            if let Some(report) =
                self.livelock
                    .after_slice(slice, seg, &self.sched, posted, dec, &sym)
            {
                debug!(slice, "livelock detected");
                *self.shared.outcome.lock().expect("outcome lock") =
                    Some(EngineOutcome::Deadlock(report));
                self.shared.stop.store(true, Ordering::Release);
                return;
            }
        }
        if self.idle_slices >= self.cfg.deadlock_slices {
            let sym = |r| self.may_symbolize(r);
            let report = DeadlockReport::build(slice, seg, &self.sched, self.cfg.ranks, &sym);
            debug!(slice, blocked = report.blocked.len(), "deadlock detected");
            *self.shared.outcome.lock().expect("outcome lock") =
                Some(EngineOutcome::Deadlock(report));
            self.shared.stop.store(true, Ordering::Release);
        }
    }

    /// Whether some rank counted as blocked has nothing left to wait for: every operation
    /// it posted is complete (its completions were delivered and it was woken), so it will
    /// run as soon as it gets a core. On a loaded machine that can take longer than
    /// `deadlock_slices` back-to-back idle slices, and without this check the job was
    /// declared deadlocked while a rank was about to run. Depends only on the scheduler and
    /// the blocked set (the recorded one in replay), so replay decides it the same way.
    fn a_blocked_rank_can_run(&self, recorded: Option<&[u32]>) -> bool {
        let seg = &self.shared.seg;
        (0..self.cfg.ranks).any(|r| {
            let blocked = match recorded {
                Some(rec) => rec.contains(&r),
                None => seg.slot(r).state() == RankState::Blocked,
            };
            blocked && self.sched.pending_of(r).is_empty()
        })
    }
}
