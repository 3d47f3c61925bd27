//! A node daemon's bookkeeping of its ranks and its deadlock report (`node_host`).

use std::process::Child;

use strobe_schema::NodeOutcome;

/// A deadlock's (or livelock's) node report: its exit status and the report's text.
pub(super) fn deadlock_report(r: &crate::engine::DeadlockReport) -> (NodeOutcome, i32, String) {
    let code = if r.livelock.is_some() {
        crate::engine::EXIT_LIVELOCK
    } else {
        crate::launcher::EXIT_DEADLOCK
    };
    (NodeOutcome::Deadlock, code, r.to_string())
}

/// The ranks this daemon started.
#[derive(Default)]
pub(super) struct LocalRanks {
    pub(super) ranks: Vec<u32>,
    pub(super) children: Vec<Child>,
    pub(super) reaped: Vec<bool>,
    pub(super) forwarders: Vec<std::thread::JoinHandle<()>>,
}

impl LocalRanks {
    pub(super) fn push(&mut self, rank: u32, child: Child) {
        self.ranks.push(rank);
        self.children.push(child);
        self.reaped.push(false);
    }

    pub(super) fn pids(&self) -> Vec<i32> {
        self.children.iter().map(|c| c.id() as i32).collect()
    }

    pub(super) fn alive(&self) -> usize {
        self.reaped.iter().filter(|r| !**r).count()
    }

    /// Marks the child with `pid` reaped: its index and rank.
    pub(super) fn exited(&mut self, pid: i32) -> Option<(usize, u32)> {
        let i = self.children.iter().position(|c| c.id() as i32 == pid)?;
        self.reaped[i] = true;
        Some((i, self.ranks[i]))
    }

    /// After a failed spawn: wait for what was started (already killed).
    pub(super) fn reap_all(&mut self) {
        for c in self.children.iter_mut() {
            let _ = c.wait();
        }
    }
}
