//! The blocked set crosses from the slice path to the writer as changes: a 1,000-rank
//! job has about 1,000 blocked ranks every slice and two or three of them change. Copying
//! the whole set (and cloning each rank's call-site `Arc`, then dropping it on the writer
//! thread, an atomic on a cache line the node thread also touches) was the recorder's
//! largest cost on the slice path of a 1,000-rank token ring. Both sides keep a mirror of
//! the last set sent: the slice path compares against it (a pointer comparison per site,
//! no allocation unless something changed) and sends the changes; the writer applies
//! them, hands the changes to the blocked spans (which cost the ranks that changed) and the
//! blocked ranks, kept sorted, to the replay log.

use std::sync::Arc;

use strobe_runtime::segment::BlockedCall;
use strobe_runtime::symbolize::CallSite;

/// A blocked rank's state: its call and, when known, where it was made.
pub(crate) type Entry = (BlockedCall, Option<Arc<CallSite>>);

/// A rank's new state: blocked (in this call, at this site), or `None`: no longer blocked.
pub(crate) type Change = (u32, Option<Entry>);

/// A whole blocked set, ranks ascending, and the known call sites in the same order
/// (borrowed from the mirror).
#[cfg(test)]
pub(crate) type FullSet<'a> = (Vec<(u32, BlockedCall)>, Vec<(u32, &'a Arc<CallSite>)>);

/// The last blocked set sent, indexed by rank (ranks are dense).
#[derive(Default)]
pub(crate) struct BlockedMirror {
    by_rank: Vec<Option<Entry>>,
    /// The slice (a counter) in which each rank was last seen blocked by [`Self::diff`].
    seen: Vec<u64>,
    round: u64,
    /// The ranks blocked in the mirror: in no particular order on the slice path
    /// ([`Self::diff`]), ascending on the writer ([`Self::apply`]).
    listed: Vec<u32>,
}

fn same_site(a: &Option<Arc<CallSite>>, b: Option<&Arc<CallSite>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

impl BlockedMirror {
    fn slot(&mut self, rank: u32) -> usize {
        let i = rank as usize;
        if i >= self.by_rank.len() {
            self.by_rank.resize(i + 1, None);
            self.seen.resize(i + 1, 0);
        }
        i
    }

    /// The slice path: what changed from the last set to `blocked` (each rank once) with
    /// `sites` (some of those ranks, in `blocked`'s order). Updates the mirror.
    #[cfg(test)]
    pub fn diff(
        &mut self,
        blocked: &[(u32, BlockedCall)],
        sites: &[(u32, Arc<CallSite>)],
    ) -> Vec<Change> {
        let mut out = Vec::new();
        self.diff_into(blocked, sites, &mut out);
        out
    }

    /// [`Self::diff`] into `out` (cleared first), keeping its capacity.
    pub fn diff_into(
        &mut self,
        blocked: &[(u32, BlockedCall)],
        sites: &[(u32, Arc<CallSite>)],
        out: &mut Vec<Change>,
    ) {
        self.round += 1;
        out.clear();
        let mut next_site = sites.iter().peekable();
        for &(rank, call) in blocked {
            // Sites of ranks that are not blocked come after those in `blocked`'s order
            // (`SliceRecord::sites`): they never match, and are left unread.
            let site = match next_site.peek() {
                Some((r, s)) if *r == rank => {
                    next_site.next();
                    Some(s)
                }
                _ => None,
            };
            let i = self.slot(rank);
            self.seen[i] = self.round;
            let same = self.by_rank[i]
                .as_ref()
                .is_some_and(|(c, s)| *c == call && same_site(s, site));
            if !same {
                let entry = (call, site.cloned());
                out.push((rank, Some(entry.clone())));
                if self.by_rank[i].replace(entry).is_none() {
                    self.listed.push(rank);
                }
            }
        }
        let (round, seen, by_rank) = (self.round, &self.seen, &mut self.by_rank);
        self.listed.retain(|&r| {
            let kept = seen[r as usize] == round;
            if !kept {
                by_rank[r as usize] = None;
                out.push((r, None));
            }
            kept
        });
    }

    /// The writer: apply the slice path's changes (the ranks stay sorted: a binary search
    /// per change, no pass over the whole set).
    pub fn apply(&mut self, changes: &[Change]) {
        for (rank, state) in changes {
            let i = self.slot(*rank);
            let was = std::mem::replace(&mut self.by_rank[i], state.clone());
            match (was.is_some(), state.is_some()) {
                (false, true) => {
                    let at = self.listed.partition_point(|r| r < rank);
                    self.listed.insert(at, *rank);
                }
                (true, false) => {
                    if let Ok(at) = self.listed.binary_search(rank) {
                        self.listed.remove(at);
                    }
                }
                _ => {}
            }
        }
    }

    /// The writer: the blocked ranks, ascending.
    pub fn ranks(&self) -> &[u32] {
        &self.listed
    }

    /// A rank's state: its call and site, if blocked.
    pub fn get(&self, rank: u32) -> Option<&Entry> {
        self.by_rank.get(rank as usize).and_then(Option::as_ref)
    }

    /// The writer: the whole set, ranks ascending, and the known sites in the same order.
    #[cfg(test)]
    pub fn full_set(&self) -> FullSet<'_> {
        let mut blocked = Vec::with_capacity(self.listed.len());
        let mut sites = Vec::new();
        for &r in &self.listed {
            if let Some((call, site)) = &self.by_rank[r as usize] {
                blocked.push((r, *call));
                if let Some(s) = site {
                    sites.push((r, s));
                }
            }
        }
        (blocked, sites)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_runtime::descriptor::DescKind;

    /// Random blocked sets (unsorted, each rank once, some sites shared, some replaced by
    /// an equal site in another `Arc`): the writer's mirror always rebuilds the set the
    /// slice path saw, ranks ascending, with the same site `Arc`s.
    #[test]
    fn the_writer_rebuilds_every_blocked_set_from_the_changes() {
        let sites: Vec<Arc<CallSite>> = (0..4)
            .map(|line| {
                Arc::new(CallSite {
                    object: "/bin/prog".into(),
                    offset: 0x1000,
                    function: None,
                    file: Some("x.c".into()),
                    line: Some(line % 2),
                })
            })
            .collect();
        let calls: [BlockedCall; 3] = [
            DescKind::Recv.into(),
            DescKind::Send.into(),
            DescKind::Barrier.into(),
        ];
        let (mut slice_path, mut writer) = (BlockedMirror::default(), BlockedMirror::default());
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut total_changes = 0;
        for _ in 0..500 {
            let mut blocked = Vec::new();
            let mut with_sites = Vec::new();
            for r in (0..40u32).rev() {
                if next(3) > 0 {
                    let call = calls[next(20).min(2) as usize];
                    blocked.push((r, call));
                    if next(4) > 0 {
                        with_sites.push((r, Arc::clone(&sites[next(8).min(3) as usize])));
                    }
                }
            }
            // Sites of ranks that are not blocked follow (a blocking call's site published
            // with its descriptor): they never enter the set.
            let mut all_sites = with_sites.clone();
            for r in (0..40u32).filter(|r| blocked.iter().all(|b| b.0 != *r)) {
                if next(2) == 0 {
                    all_sites.push((r, Arc::clone(&sites[next(4) as usize])));
                }
            }
            let changes = slice_path.diff(&blocked, &all_sites);
            total_changes += changes.len();
            writer.apply(&changes);
            let (got, got_sites) = writer.full_set();
            blocked.sort_unstable_by_key(|b| b.0);
            with_sites.sort_unstable_by_key(|s| s.0);
            assert_eq!(got, blocked);
            assert_eq!(got_sites.len(), with_sites.len());
            for (a, b) in got_sites.iter().zip(&with_sites) {
                assert!(a.0 == b.0 && Arc::ptr_eq(a.1, &b.1));
            }
        }
        assert!(total_changes > 0);
        // Changes, not whole sets: an unchanged set sends nothing, one rank more sends one.
        let same: Vec<_> = (0..1000).map(|r| (r, calls[0])).collect();
        slice_path.diff(&same, &[]);
        assert!(slice_path.diff(&same, &[]).is_empty());
        let mut more = same.clone();
        more.push((1000, calls[1]));
        assert_eq!(slice_path.diff(&more, &[]).len(), 1);
        assert_eq!(slice_path.diff(&same, &[]), vec![(1000, None)]);
    }
}
