//! Communicators created collectively over a *group* of the parent's members only
//! (`FLAG_GROUP` on a `CommSplit` descriptor): `MPI_Comm_create_group` and the contexts
//! of intercommunicators, whose two groups need not make up any existing communicator.
//!
//! The members cannot name each other in a descriptor (it holds no lists), so they agree
//! on a key (a hash of the member list and tag, computed identically on every member) and
//! each says its rank in the new communicator and its size. Posts are queued per key and
//! per new rank, oldest first, like a communicator's collectives; the creation is
//! scheduled in the slice that sees the last member's descriptor, with the members in new
//! rank order. Members disagreeing on the size or the intercommunicator split, or one world
//! rank at two positions, complete with `CollectiveMismatch`.

use std::collections::{BTreeMap, VecDeque};

use super::{CollectiveRun, CommTable, Decision, NewComm, Out};
use crate::descriptor::{Completion, DescKind, DescRef, Descriptor, RtError};

#[derive(Default)]
pub(super) struct Groups {
    /// (parent context, key) -> posted descriptors per new rank, oldest first.
    queues: BTreeMap<(u32, u64), Vec<VecDeque<DescRef>>>,
    /// Group creations scheduled so far (their `coll_seq`).
    next_seq: u64,
}

impl Groups {
    pub fn post(
        &mut self,
        d: &Descriptor,
        comms: &CommTable,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        if comms.get(d.comm, d.rank).is_none() {
            return out.complete(d, RtError::Comm, |_| {});
        }
        let (size, me) = (d.bytes, d.aux2);
        if size == 0 || me >= size || size > u64::from(u32::MAX) || d.peer < 0 {
            return out.complete(d, RtError::Rank, |_| {});
        }
        let q = self
            .queues
            .entry((d.comm, d.aux))
            .or_insert_with(|| vec![VecDeque::new(); size as usize]);
        if q.len() as u64 != size {
            return out.complete(d, RtError::CollectiveMismatch, |_| {});
        }
        live.insert(d.id(), *d);
        q[me as usize].push_back(d.id());
    }

    pub fn schedule_ready(
        &mut self,
        comms: &mut CommTable,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        let mut emptied = Vec::new();
        for (&(parent, key), q) in self.queues.iter_mut() {
            while q.iter().all(|m| !m.is_empty()) {
                let parts: Vec<Descriptor> = q
                    .iter_mut()
                    .map(|m| {
                        let id = m.pop_front().expect("checked non-empty");
                        live.remove(&id).expect("queued group creations are live")
                    })
                    .collect();
                let seq = self.next_seq;
                self.next_seq += 1;
                create(parent, seq, &parts, comms, out);
            }
            if q.iter().all(|m| m.is_empty()) {
                emptied.push((parent, key));
            }
        }
        for k in emptied {
            self.queues.remove(&k);
        }
    }

    /// Descriptors of `rank` still waiting for the rest of their group.
    pub fn pending_of(&self, rank: u32, live: &BTreeMap<DescRef, Descriptor>) -> Vec<DescRef> {
        self.queues
            .values()
            .flatten()
            .flatten()
            .filter(|id| live.get(id).is_some_and(|d| d.rank == rank))
            .copied()
            .collect()
    }
}

fn create(parent: u32, seq: u64, parts: &[Descriptor], comms: &mut CommTable, out: &mut Out) {
    for p in parts {
        out.cite(p);
    }
    let members: Vec<u32> = parts.iter().map(|p| p.rank).collect();
    let first = parts[0].peer;
    let mut sorted = members.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let agree = parts.iter().all(|p| p.peer == first) && (first as usize) < members.len();
    if sorted.len() != members.len() || !agree {
        for p in parts {
            out.complete(p, RtError::CollectiveMismatch, |_| {});
        }
        return;
    }
    out.push(Decision::Collective(CollectiveRun {
        comm: parent,
        coll_seq: seq,
        kind: DescKind::CommSplit,
        root: -1,
        parts: parts.iter().map(|p| p.id()).collect(),
    }));
    let id = if first > 0 {
        comms.create_inter(members.clone(), first as usize)
    } else {
        comms.create(members.clone())
    };
    out.push(Decision::NewComm(NewComm {
        parent,
        comm: id,
        members,
    }));
    let n = parts.len() as u64;
    for (r, p) in parts.iter().enumerate() {
        out.complete(p, RtError::Ok, |c: &mut Completion| {
            c.value = id as u64;
            c.value2 = ((r as u64) << 32) | n;
        });
    }
}
