//! Collective scheduling (the papers' collective protocol, BBM and RM microphases).
//!
//! Every member posts a collective descriptor; a collective on a communicator is *ready*
//! once every member has posted its next one (in the papers, each node raises a readiness
//! flag and the master's Compare-And-Write over all nodes asks whether all are ready). A
//! ready collective is scheduled in the slice that sees the last descriptor, with its parts
//! in communicator rank order; the Collective Helper (BBM) and the Reduce Helper (RM) execute
//! it. Members that called different collectives, or disagree on the root, op or sizes,
//! all complete with `CollectiveMismatch`/`Count` instead of hanging.
//!
//! Buffer conventions per kind are documented on [`crate::descriptor::DescKind`]'s users in
//! `engine::collective`; the scheduler only checks what it can see without reading memory.

use std::collections::{BTreeMap, VecDeque};

use super::group::Groups;
use super::{CollectiveRun, CommTable, Decision, NewComm, Out, PendingOp};
use crate::descriptor::{
    Completion, DescKind, DescRef, Descriptor, RtError, FLAG_GROUP, SPLIT_UNDEFINED,
};

struct CollQueue {
    /// World ranks of the communicator, by communicator rank.
    members: Vec<u32>,
    /// Posted, not yet scheduled collectives of each member, oldest first.
    per_member: Vec<VecDeque<DescRef>>,
    /// Number of collectives scheduled so far on this communicator.
    next_seq: u64,
}

#[derive(Default)]
pub(super) struct Collectives {
    queues: BTreeMap<u32, CollQueue>,
    groups: Groups,
}

fn rooted(kind: DescKind) -> bool {
    matches!(
        kind,
        DescKind::Bcast
            | DescKind::Reduce
            | DescKind::Scatter
            | DescKind::Scatterv
            | DescKind::Gather
            | DescKind::Gatherv
    )
}

impl Collectives {
    pub fn post(
        &mut self,
        d: &Descriptor,
        comms: &CommTable,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        if d.flags & FLAG_GROUP != 0 && d.kind() == Some(DescKind::CommSplit) {
            return self.groups.post(d, comms, live, out);
        }
        let Some(view) = comms.get(d.comm, d.rank) else {
            return out.complete(d, RtError::Comm, |_| {});
        };
        if view.is_inter() {
            // An intercommunicator's context carries point-to-point only: the C layer runs
            // intercommunicator collectives over intracommunicators.
            return out.complete(d, RtError::Comm, |_| {});
        }
        let me = view
            .rank_of(d.rank)
            .expect("the caller is a member of its view") as usize;
        let q = self.queues.entry(d.comm).or_insert_with(|| {
            let members = view.members();
            CollQueue {
                per_member: members.iter().map(|_| VecDeque::new()).collect(),
                members,
                next_seq: 0,
            }
        });
        live.insert(d.id(), *d);
        q.per_member[me].push_back(d.id());
    }

    pub fn schedule_ready(
        &mut self,
        comms: &mut CommTable,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        let mut emptied = Vec::new();
        for (&comm, q) in self.queues.iter_mut() {
            while q.per_member.iter().all(|m| !m.is_empty()) {
                let parts: Vec<Descriptor> = q
                    .per_member
                    .iter_mut()
                    .map(|m| {
                        let id = m.pop_front().expect("checked non-empty");
                        live.remove(&id).expect("queued collectives are live")
                    })
                    .collect();
                let seq = q.next_seq;
                q.next_seq += 1;
                schedule_one(comm, seq, &parts, comms, out);
            }
            if q.per_member.iter().all(|m| m.is_empty()) && comms.get(comm, q.members[0]).is_none()
            {
                emptied.push(comm);
            }
        }
        for c in emptied {
            self.queues.remove(&c);
        }
        self.groups.schedule_ready(comms, live, out);
    }

    pub fn pending_of(
        &self,
        rank: u32,
        _comms: &CommTable,
        live: &BTreeMap<DescRef, Descriptor>,
    ) -> Vec<PendingOp> {
        let mut ops: Vec<PendingOp> = self
            .groups
            .pending_of(rank, live)
            .into_iter()
            .map(|id| {
                let d = &live[&id];
                PendingOp {
                    desc: id,
                    kind: DescKind::CommSplit,
                    comm: d.comm,
                    peer: -1,
                    tag: 0,
                    bytes: 0,
                    // The other members are not known to the scheduler.
                    waits_for: Vec::new(),
                }
            })
            .collect();
        for q in self.queues.values() {
            let Some(me) = q.members.iter().position(|&m| m == rank) else {
                continue;
            };
            for (k, id) in q.per_member[me].iter().enumerate() {
                let d = &live[id];
                let waits_for = q
                    .members
                    .iter()
                    .zip(&q.per_member)
                    .filter(|(_, pm)| pm.len() <= k)
                    .map(|(&m, _)| m)
                    .collect();
                ops.push(PendingOp {
                    desc: *id,
                    kind: d.kind().unwrap_or(DescKind::Barrier),
                    comm: d.comm,
                    peer: d.peer,
                    tag: 0,
                    bytes: d.bytes,
                    waits_for,
                });
            }
        }
        ops
    }
}

/// Check the members agree, then emit the schedule and the completions.
fn schedule_one(comm: u32, seq: u64, parts: &[Descriptor], comms: &mut CommTable, out: &mut Out) {
    for p in parts {
        out.cite(p);
    }
    let kind = parts[0].kind().expect("only known kinds are queued");
    let root = parts[0].peer;
    if let Err(e) = check_agreement(kind, root, parts) {
        for p in parts {
            out.complete(p, e, |_| {});
        }
        return;
    }
    out.push(Decision::Collective(CollectiveRun {
        comm,
        coll_seq: seq,
        kind,
        root: if rooted(kind) { root } else { -1 },
        parts: parts.iter().map(|p| p.id()).collect(),
    }));
    match kind {
        DescKind::CommDup => {
            let members: Vec<u32> = parts.iter().map(|p| p.rank).collect();
            let id = comms.create(members.clone());
            out.push(Decision::NewComm(NewComm {
                parent: comm,
                comm: id,
                members,
            }));
            let n = parts.len() as u64;
            for (r, p) in parts.iter().enumerate() {
                out.complete(p, RtError::Ok, |c| {
                    set_value(c, id as u64, ((r as u64) << 32) | n)
                });
            }
        }
        DescKind::CommSplit => split(comm, parts, comms, out),
        _ => {
            for p in parts {
                out.complete(p, RtError::Ok, |c| {
                    c.bytes = p.rbytes.max(p.bytes);
                });
            }
        }
    }
}

fn set_value(c: &mut Completion, v: u64, v2: u64) {
    c.value = v;
    c.value2 = v2;
}

/// `MPI_Comm_split`: groups by colour (ascending; `MPI_UNDEFINED` gets no communicator),
/// orders each group by key, then by rank in the parent. New context ids are handed out in
/// ascending colour order, so they are the same in every run.
fn split(parent: u32, parts: &[Descriptor], comms: &mut CommTable, out: &mut Out) {
    let mut by_colour: BTreeMap<i64, Vec<(i64, usize)>> = BTreeMap::new();
    for (r, p) in parts.iter().enumerate() {
        let colour = p.aux as i64;
        if colour != SPLIT_UNDEFINED {
            by_colour
                .entry(colour)
                .or_default()
                .push((p.aux2 as i64, r));
        }
    }
    let mut assigned: Vec<Option<(u32, u64, u64)>> = vec![None; parts.len()];
    for (_, mut group) in by_colour {
        group.sort();
        let members: Vec<u32> = group.iter().map(|&(_, r)| parts[r].rank).collect();
        let id = comms.create(members.clone());
        out.push(Decision::NewComm(NewComm {
            parent,
            comm: id,
            members,
        }));
        let n = group.len() as u64;
        for (new_rank, &(_, r)) in group.iter().enumerate() {
            assigned[r] = Some((id, new_rank as u64, n));
        }
    }
    for (p, a) in parts.iter().zip(assigned) {
        out.complete(p, RtError::Ok, |c| match a {
            Some((id, r, n)) => set_value(c, id as u64, (r << 32) | n),
            None => set_value(c, u64::MAX, 0),
        });
    }
}

fn check_agreement(kind: DescKind, root: i32, parts: &[Descriptor]) -> Result<(), RtError> {
    let n = parts.len() as i64;
    for p in parts {
        if p.kind() != Some(kind) {
            return Err(RtError::CollectiveMismatch);
        }
        if rooted(kind) && p.peer != root {
            return Err(RtError::CollectiveMismatch);
        }
    }
    if rooted(kind) && (root < 0 || root as i64 >= n) {
        return Err(RtError::Rank);
    }
    let first = &parts[0];
    match kind {
        DescKind::Bcast => {
            let want = parts[root as usize].bytes;
            if parts.iter().any(|p| p.bytes != want) {
                return Err(RtError::Count);
            }
        }
        k if k.is_reduction() => {
            let (Some(op), Some(elem)) = (first.reduce_op(), first.elem_type()) else {
                return Err(RtError::Op);
            };
            if parts
                .iter()
                .any(|p| p.op != first.op || p.elem != first.elem)
            {
                return Err(RtError::CollectiveMismatch);
            }
            if !crate::ops::op_defined(op, elem) {
                return Err(RtError::Op);
            }
            if matches!(
                k,
                DescKind::Allreduce | DescKind::Scan | DescKind::Exscan | DescKind::Reduce
            ) {
                let want = parts
                    .iter()
                    .find(|p| !p.in_place())
                    .map_or(first.rbytes, |p| p.bytes);
                let sizes_ok = parts.iter().all(|p| {
                    let b = if p.in_place() { p.rbytes } else { p.bytes };
                    b == want && b % elem.size() as u64 == 0
                });
                if !sizes_ok {
                    return Err(RtError::Count);
                }
            }
        }
        DescKind::Scatter | DescKind::Gather | DescKind::Allgather | DescKind::Alltoall => {
            // Every member's block must be the same size; the root's whole buffer is n blocks.
            let block = |p: &Descriptor| match kind {
                DescKind::Scatter => p.rbytes,
                DescKind::Alltoall => p.bytes / n.max(1) as u64,
                _ => p.bytes,
            };
            let want = parts.iter().find(|p| !p.in_place()).map(block);
            if let Some(want) = want {
                if parts.iter().any(|p| !p.in_place() && block(p) != want) {
                    return Err(RtError::Count);
                }
            }
        }
        _ => {}
    }
    Ok(())
}
