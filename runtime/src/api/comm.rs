//! Communicators: the [`Comm`] struct, its basics, dup, split and free.

use crate::mmds::{self, Primitive};
use std::sync::Arc;

use super::types::finish;
use super::{addr_mut, ctx, nbytes, Error, Result};
use crate::descriptor::{self, Completion, DescKind, Descriptor, COMM_WORLD, SPLIT_UNDEFINED};

/// A communicator: context id, my rank, its size and its members' world ranks.
#[derive(Clone, Debug)]
pub struct Comm {
    pub(super) id: u32,
    pub(super) rank: u32,
    pub(super) size: u32,
    pub(super) members: Arc<[u32]>,
}

impl Comm {
    /// The world rank of member `rank` of this (intra)communicator; `None` for a rank it
    /// does not have (or an intercommunicator's remote group: a hint, never a decision).
    pub(super) fn world_of(&self, rank: i32) -> Option<u32> {
        if self.members.len() != self.size as usize {
            return None;
        }
        usize::try_from(rank)
            .ok()
            .and_then(|r| self.members.get(r))
            .copied()
    }

    /// My rank in this communicator.
    pub fn rank(&self) -> i32 {
        self.rank as i32
    }
    /// Number of members.
    pub fn size(&self) -> i32 {
        self.size as i32
    }
    /// Context id.
    pub fn id(&self) -> u32 {
        self.id
    }
    /// World rank of communicator rank `r`.
    pub fn world_rank_of(&self, r: i32) -> Option<u32> {
        usize::try_from(r)
            .ok()
            .and_then(|r| self.members.get(r).copied())
    }

    pub(super) fn desc(&self, kind: DescKind) -> Descriptor {
        Descriptor {
            kind: kind as u8,
            comm: self.id,
            ..Default::default()
        }
    }

    /// Post a blocking collective (or other blocking call) and map the completion.
    pub(super) fn call(&self, d: Descriptor) -> Result<Completion> {
        let c = ctx().call(d);
        finish(&c)?;
        Ok(c)
    }

    /// The communicator a dup/split completion describes; `None` for `MPI_UNDEFINED`.
    fn derived(c: &Completion, members: &[u32]) -> Option<Comm> {
        if c.value == u64::MAX {
            return None;
        }
        let rank = (c.value2 >> 32) as u32;
        let size = c.value2 as u32;
        Some(Comm {
            id: c.value as u32,
            rank,
            size,
            members: Arc::from(&members[..(size as usize).min(members.len())]),
        })
    }

    fn new_comm(&self, mut d: Descriptor) -> Result<Option<Comm>> {
        let mut members = vec![0u32; self.size as usize];
        d.rbuf = addr_mut(&mut members);
        d.rbytes = nbytes(&members);
        let c = self.call(d)?;
        let members: Vec<u32> = members.into_iter().map(u32::from_le).collect();
        Ok(Comm::derived(&c, &members))
    }

    /// `MPI_Comm_dup`.
    #[track_caller]
    pub fn dup(&self) -> Result<Comm> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter(Primitive::CommDup);
        self.new_comm(self.desc(DescKind::CommDup))?
            .ok_or(Error::Comm)
    }

    /// `MPI_Comm_idup`: post the duplication and return at once. The new communicator is
    /// decided at a slice boundary like a blocking dup's (the dup is matched with the
    /// members' other collectives on `self` in posting order); [`PendingDup::finish`]
    /// builds it from the completion that Wait/Test consume.
    ///
    /// # Safety
    /// The returned value owns the buffer the runtime writes the members into: keep it
    /// alive until the request completes.
    pub unsafe fn post_dup(&self) -> Result<PendingDup> {
        let mut members = vec![0u32; self.size as usize].into_boxed_slice();
        let mut d = self.desc(DescKind::CommDup);
        d.rbuf = addr_mut(&mut members);
        d.rbytes = nbytes(&members);
        let id = ctx().post(d);
        Ok(PendingDup { id, members })
    }

    /// `MPI_Comm_split`: `None` colour is `MPI_UNDEFINED` (the result is `None`). Members
    /// of one colour are ordered by `key`, then by rank here.
    #[track_caller]
    pub fn split(&self, colour: Option<i32>, key: i32) -> Result<Option<Comm>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter(Primitive::CommSplit);
        let mut d = self.desc(DescKind::CommSplit);
        d.aux = match colour {
            None => SPLIT_UNDEFINED as u64,
            Some(c) if c < 0 => return Err(Error::Arg),
            Some(c) => c as i64 as u64,
        };
        d.aux2 = key as i64 as u64;
        self.new_comm(d)
    }

    /// Create a communicator over `members` (world ranks, in new rank order), collectively
    /// over those members only: the others of `self` take no part (`MPI_Comm_create_group`,
    /// intercommunicators). The caller must be a member. `key` must be the same on every
    /// member, and differ from that of any other creation over the same members that may
    /// be outstanding at the same time (hash the members with the call's tag). `first`:
    /// 0 for an intracommunicator; otherwise the new context is an intercommunicator's,
    /// whose groups are `members[..first]` and `members[first..]` (see
    /// [`Comm::intercomm_view`]).
    #[track_caller]
    pub fn create_group(&self, key: u64, members: &[u32], first: usize) -> Result<Comm> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter(Primitive::CommCreateGroup);
        let me = self.world_rank_of(self.rank()).ok_or(Error::Comm)?;
        let pos = members.iter().position(|&m| m == me).ok_or(Error::Rank)?;
        if first >= members.len() {
            return Err(Error::Arg);
        }
        let mut d = self.desc(DescKind::CommSplit);
        d.flags = descriptor::FLAG_GROUP;
        d.aux = key;
        d.aux2 = pos as u64;
        d.bytes = members.len() as u64;
        d.peer = i32::try_from(first).map_err(|_| Error::Arg)?;
        let mut out = vec![0u32; members.len()];
        d.rbuf = addr_mut(&mut out);
        d.rbytes = nbytes(&out);
        let c = self.call(d)?;
        let out: Vec<u32> = out.into_iter().map(u32::from_le).collect();
        Comm::derived(&c, &out).ok_or(Error::Comm)
    }

    /// An intercommunicator as the members of one group use it for point to point: `ctx`
    /// is its context (from [`Comm::create_group`] with `first > 0`), `rank` the caller's
    /// rank in its own group, `remote` the other group's world ranks. Ranks given to and
    /// reported by point-to-point calls name the remote group; collectives are refused.
    pub fn intercomm_view(ctx: &Comm, rank: i32, remote: &[u32]) -> Comm {
        Comm {
            id: ctx.id,
            rank: rank as u32,
            size: remote.len() as u32,
            members: Arc::from(remote),
        }
    }

    /// `MPI_Comm_free`. `MPI_COMM_WORLD` and `MPI_COMM_SELF` cannot be freed.
    #[track_caller]
    pub fn free(self) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter(Primitive::CommFree);
        if self.id == COMM_WORLD || self.id >= descriptor::COMM_SELF_BASE {
            return Err(Error::Comm);
        }
        self.call(self.desc(DescKind::CommFree)).map(|_| ())
    }
}

/// A communicator duplication posted by [`Comm::post_dup`], not completed yet.
#[derive(Debug)]
pub struct PendingDup {
    id: u64,
    /// Written by the Collective Helper at completion (a boxed slice: its address is
    /// stable while this value moves).
    members: Box<[u32]>,
}

impl PendingDup {
    /// The runtime's request id (complete it with `RankCtx::wait`/`poll_completed`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The new communicator, from the request's completion.
    pub fn finish(self, c: &Completion) -> Result<Comm> {
        finish(c)?;
        let members: Vec<u32> = self.members.iter().map(|&m| u32::from_le(m)).collect();
        Comm::derived(c, &members).ok_or(Error::Comm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_comm_decoding() {
        let c = Completion {
            value: 5,
            value2: (1u64 << 32) | 2,
            ..Default::default()
        };
        let m = Comm::derived(&c, &[3, 1, 0, 0]).unwrap();
        assert_eq!((m.id(), m.rank(), m.size()), (5, 1, 2));
        assert_eq!(m.world_rank_of(0), Some(3));
        assert_eq!(m.world_rank_of(1), Some(1));
        assert_eq!(m.world_rank_of(2), None);
        assert_eq!(m.world_rank_of(-1), None);
        let none = Completion {
            value: u64::MAX,
            ..Default::default()
        };
        assert!(Comm::derived(&none, &[0]).is_none());
    }
}
