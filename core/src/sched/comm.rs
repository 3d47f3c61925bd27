//! The communicator table the scheduler keeps: context id -> members (world ranks).
//! `MPI_COMM_WORLD` and every rank's `MPI_COMM_SELF` are implicit; derived communicators
//! get context ids from a counter, in a deterministic order, when dup/split is scheduled.

use std::collections::BTreeMap;

use crate::descriptor::{COMM_FIRST_DERIVED, COMM_SELF_BASE, COMM_WORLD};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comm {
    /// World ranks, indexed by communicator rank.
    pub members: Vec<u32>,
    /// Members that have called `MPI_Comm_free`.
    pub freed: Vec<bool>,
    /// An intercommunicator's context: `members[..k]` is one group and `members[k..]` the
    /// other, and each member names the *other* group's ranks (point to point only).
    pub inter: Option<usize>,
}

impl Comm {
    fn new(members: Vec<u32>) -> Self {
        let n = members.len();
        Comm {
            members,
            freed: vec![false; n],
            inter: None,
        }
    }

    /// The communicator rank of world rank `world`, if it is a member.
    pub fn rank_of(&self, world: u32) -> Option<u32> {
        // Derived communicators are small and lookups rare enough that a scan beats
        // keeping a second index in sync.
        self.members
            .iter()
            .position(|&m| m == world)
            .map(|i| i as u32)
    }

    pub fn size(&self) -> u32 {
        self.members.len() as u32
    }
}

#[derive(Clone, Debug)]
pub struct CommTable {
    ranks: u32,
    world: Comm,
    derived: BTreeMap<u32, Comm>,
    next_id: u32,
}

impl CommTable {
    pub fn new(ranks: u32) -> Self {
        CommTable {
            ranks,
            world: Comm::new((0..ranks).collect()),
            derived: BTreeMap::new(),
            next_id: COMM_FIRST_DERIVED,
        }
    }

    /// Members of communicator `id` as seen by world rank `caller` (the caller matters only
    /// for `MPI_COMM_SELF`, whose single member is the caller itself).
    pub fn get(&self, id: u32, caller: u32) -> Option<CommView<'_>> {
        if id == COMM_WORLD {
            return Some(CommView::Shared(&self.world));
        }
        if id >= COMM_SELF_BASE {
            let owner = id - COMM_SELF_BASE;
            return (owner == caller && owner < self.ranks).then_some(CommView::SelfOf(owner));
        }
        let c = self.derived.get(&id)?;
        let me = c.rank_of(caller)? as usize;
        Some(match c.inter {
            Some(k) => CommView::Inter {
                comm: c,
                remote: if me < k { k..c.members.len() } else { 0..k },
            },
            None => CommView::Shared(c),
        })
    }

    /// Allocate a context id and register a communicator.
    pub fn create(&mut self, members: Vec<u32>) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        self.derived.insert(id, Comm::new(members));
        id
    }

    /// Register an intercommunicator context: groups `members[..first]` and
    /// `members[first..]`.
    pub fn create_inter(&mut self, members: Vec<u32>, first: usize) -> u32 {
        let id = self.create(members);
        if let Some(c) = self.derived.get_mut(&id) {
            c.inter = Some(first);
        }
        id
    }

    /// `MPI_Comm_free` by world rank `caller`; the entry is dropped when every member freed it.
    pub fn free(&mut self, id: u32, caller: u32) -> bool {
        let Some(c) = self.derived.get_mut(&id) else {
            return false;
        };
        let Some(r) = c.rank_of(caller) else {
            return false;
        };
        c.freed[r as usize] = true;
        if c.freed.iter().all(|&f| f) {
            self.derived.remove(&id);
        }
        true
    }

    /// Number of live derived communicators (for tests and reports).
    pub fn derived_count(&self) -> usize {
        self.derived.len()
    }
}

/// A communicator as one caller sees it.
#[derive(Clone, Debug)]
pub enum CommView<'a> {
    Shared(&'a Comm),
    SelfOf(u32),
    /// An intercommunicator seen from one group: ranks name the `remote` group (indices
    /// into `comm.members`).
    Inter {
        comm: &'a Comm,
        remote: std::ops::Range<usize>,
    },
}

impl CommView<'_> {
    pub fn size(&self) -> u32 {
        match self {
            CommView::Shared(c) => c.size(),
            CommView::SelfOf(_) => 1,
            CommView::Inter { remote, .. } => remote.len() as u32,
        }
    }
    /// World rank of communicator rank `r`.
    pub fn world_of(&self, r: i32) -> Option<u32> {
        if r < 0 {
            return None;
        }
        match self {
            CommView::Shared(c) => c.members.get(r as usize).copied(),
            CommView::SelfOf(w) => (r == 0).then_some(*w),
            CommView::Inter { comm, remote } => {
                comm.members[remote.clone()].get(r as usize).copied()
            }
        }
    }
    /// Communicator rank of world rank `w` (on an intercommunicator: its rank in the
    /// remote group, as a receiver names its sender).
    pub fn rank_of(&self, w: u32) -> Option<u32> {
        match self {
            CommView::Shared(c) => c.rank_of(w),
            CommView::SelfOf(o) => (*o == w).then_some(0),
            CommView::Inter { comm, remote } => comm.members[remote.clone()]
                .iter()
                .position(|&m| m == w)
                .map(|i| i as u32),
        }
    }
    /// Members by rank (on an intercommunicator: the remote group).
    pub fn members(&self) -> Vec<u32> {
        match self {
            CommView::Shared(c) => c.members.clone(),
            CommView::SelfOf(w) => vec![*w],
            CommView::Inter { comm, remote } => comm.members[remote.clone()].to_vec(),
        }
    }
    /// Whether this is an intercommunicator (no collectives on it).
    pub fn is_inter(&self) -> bool {
        matches!(self, CommView::Inter { .. })
    }
}
