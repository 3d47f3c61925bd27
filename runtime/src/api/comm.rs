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
    pub fn dup(&self) -> Result<Comm> {
        let _mmds = mmds::enter(Primitive::CommDup);
        self.new_comm(self.desc(DescKind::CommDup))?
            .ok_or(Error::Comm)
    }

    /// `MPI_Comm_split`: `None` colour is `MPI_UNDEFINED` (the result is `None`). Members
    /// of one colour are ordered by `key`, then by rank here.
    pub fn split(&self, colour: Option<i32>, key: i32) -> Result<Option<Comm>> {
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

    /// `MPI_Comm_free`. `MPI_COMM_WORLD` and `MPI_COMM_SELF` cannot be freed.
    pub fn free(self) -> Result<()> {
        let _mmds = mmds::enter(Primitive::CommFree);
        if self.id == COMM_WORLD || self.id >= descriptor::COMM_SELF_BASE {
            return Err(Error::Comm);
        }
        self.call(self.desc(DescKind::CommFree)).map(|_| ())
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
