//! Point-to-point scheduling: the Buffer Receiver's matching (MSM) and the chunk plan the
//! DMA Helpers execute (P2P).
//!
//! **Matching rule** (model.md 4.2). Sends wait in one queue per (communicator, destination)
//! in arrival order, and arrival order is canonical order: by slice posted, then sending
//! rank, then that rank's sequence number. Each receiving rank's posted receives and probes
//! are visited in posting order; each takes the *first* send of its queue whose source and
//! tag it accepts. Hence:
//! - non-overtaking holds: two sends of one sender to one receiver on one communicator
//!   arrive in sequence order and are taken in that order;
//! - an `MPI_ANY_SOURCE` receive takes the earliest-posted eligible send, ties between
//!   ranks of one slice going to the lowest rank;
//! - a later receive never takes a message an earlier pending receive accepts, because the
//!   earlier one would have taken it.
//!
//! **Eager protocol** (scheduler version 2, [`SchedConfig::eager_max`]). A standard-mode
//! or ready send of at most `eager_max` bytes that no receive takes in the slice it is
//! exchanged in completes in that slice, with `COMPLETION_EAGER`: its node manager copies
//! the bytes into node memory during P2P, before the completion is delivered, and the
//! receive matched in a later slice is filled from there. When the copy happens and when
//! the send completes are therefore the `Complete` decision itself (digested, recorded and
//! replayed like any other). Sends considered are those of the slice, in canonical order,
//! while the job's eager bytes stay within `eager_budget`. Every other send (synchronous,
//! larger, over budget, or matched at once) moves once, from the sender's buffer to the
//! receiver's, after the match, and completes when its last chunk has moved.
//!
//! **Inline sends** (scheduler version 3, [`FLAG_INLINE`]). A send whose bytes travel in its
//! descriptor completed on the rank when it was posted; the scheduler records that as a
//! `Complete` decision flagged `COMPLETION_INLINE` in the slice the descriptor is exchanged
//! in (whatever else happens to it in that slice), and from then on treats it as an eager
//! send: matched like any send, never cancellable, never pending, completed once. Its
//! chunk is written from the descriptor. Which sends are inline is the rank's choice,
//! carried by the descriptor, so every replica decides the same.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{set_status, Chunk, CommTable, Decision, Match, Out, PendingOp, SchedConfig};
use crate::descriptor::{
    Completion, DescKind, DescRef, Descriptor, RtError, ANY_SOURCE, ANY_TAG, COMPLETION_CANCELLED,
    COMPLETION_EAGER, COMPLETION_FOUND, COMPLETION_INLINE, FLAG_INLINE, PROC_NULL, RANK_COPY_MAX,
};

struct Transfer {
    send: DescRef,
    recv: DescRef,
    total: u64,
    done: u64,
    truncated: bool,
}

pub(super) struct P2p {
    /// Unmatched sends by (communicator, destination world rank), in arrival order. A
    /// queue that empties stays (its buffer with it) while the map has at most
    /// [`KEPT_QUEUES`] queues: removed and made again, it was a map node and a queue
    /// buffer allocated and freed for every message of a ping-pong.
    unexpected: BTreeMap<(u32, u32), VecDeque<DescRef>>,
    /// Posted receives and probes by receiving world rank, in posting order.
    posted: Vec<VecDeque<DescRef>>,
    /// Receivers whose queues changed since the last matching pass (sorted and
    /// deduplicated when matched; a vector that keeps its capacity, not a set made anew
    /// each slice).
    dirty: Vec<u32>,
    /// Matched messages with bytes still to move, in match order.
    transfers: Vec<Transfer>,
    /// Sends exchanged this slice, in canonical order, each with whether no receive has
    /// taken it yet: eager candidates. A taken one is marked, not removed (found by binary
    /// search: they are pushed in canonical order).
    fresh: Vec<(DescRef, bool)>,
    /// Sends completed eagerly whose data is still in node memory (unmatched or moving).
    eager: BTreeSet<DescRef>,
    /// Bytes of the messages in `eager`.
    eager_bytes: u64,
    /// Scratch: each node's chunk budget left in the slice being scheduled.
    budget: Vec<u64>,
}

/// The most queues `P2p::unexpected` holds before an emptied one is removed (a job that
/// makes communicator after communicator would otherwise keep one per communicator and
/// destination for ever).
const KEPT_QUEUES: usize = 4096;

fn tag_ok(want: i32, got: i32) -> bool {
    want == ANY_TAG || want == got
}

impl P2p {
    pub fn new(ranks: u32) -> Self {
        P2p {
            unexpected: BTreeMap::new(),
            posted: (0..ranks).map(|_| VecDeque::new()).collect(),
            dirty: Vec::new(),
            transfers: Vec::new(),
            fresh: Vec::new(),
            eager: BTreeSet::new(),
            eager_bytes: 0,
            budget: Vec::new(),
        }
    }

    pub fn in_flight(&self) -> usize {
        self.transfers.len()
    }

    pub fn post_send(
        &mut self,
        d: &Descriptor,
        comms: &CommTable,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        let inline = d.is_inline();
        // An inline send's completion is the rank's already: every answer is flagged so,
        // recorded, and never delivered (the API checked destination and tag before it
        // posted, so only a malformed descriptor meets an error here). So is a local one's
        // (`FLAG_LOCAL`: `MPI_PROC_NULL`, completed by the rank).
        let local = d.is_local();
        let mark = |c: &mut Completion| {
            if inline || local {
                c.flags |= COMPLETION_INLINE;
            }
        };
        if inline
            && (d.bytes > RANK_COPY_MAX
                || !matches!(d.kind(), Some(DescKind::Send | DescKind::Rsend)))
        {
            return out.complete(d, RtError::Arg, mark);
        }
        let Some(view) = comms.get(d.comm, d.rank) else {
            return out.complete(d, RtError::Comm, mark);
        };
        if d.peer == PROC_NULL {
            let fill = |c: &mut Completion| {
                set_status(c, PROC_NULL, ANY_TAG, 0);
                mark(c);
            };
            return match local {
                true => out.complete_quietly(d, fill),
                false => out.complete(d, RtError::Ok, fill),
            };
        }
        if local || d.tag < 0 {
            // Only a `MPI_PROC_NULL` send completes locally: a malformed descriptor.
            return out.complete(d, RtError::Arg, mark);
        }
        let Some(dest) = view.world_of(d.peer) else {
            return out.complete(d, RtError::Rank, mark);
        };
        if inline {
            self.eager.insert(d.id());
            out.complete_quietly(d, |c| {
                set_status(c, d.peer, d.tag, d.bytes);
                mark(c);
            });
        }
        live.insert(d.id(), *d);
        self.unexpected
            .entry((d.comm, dest))
            .or_default()
            .push_back(d.id());
        self.dirty.push(dest);
        if !inline && matches!(d.kind(), Some(DescKind::Send | DescKind::Rsend)) {
            debug_assert!(self.fresh.last().is_none_or(|&(last, _)| last < d.id()));
            self.fresh.push((d.id(), true));
        }
    }

    pub fn post_recv(
        &mut self,
        d: &Descriptor,
        comms: &CommTable,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        // A local receive (`FLAG_LOCAL`) completed on the rank already: see `post_send`.
        let local = d.is_local();
        let mark = |c: &mut Completion| {
            if local {
                c.flags |= COMPLETION_INLINE;
            }
        };
        let Some(view) = comms.get(d.comm, d.rank) else {
            return out.complete(d, RtError::Comm, mark);
        };
        if d.peer == PROC_NULL {
            let fill = |c: &mut Completion| {
                set_status(c, PROC_NULL, ANY_TAG, 0);
                mark(c);
            };
            return match local {
                true => out.complete_quietly(d, fill),
                false => out.complete(d, RtError::Ok, fill),
            };
        }
        if local {
            return out.complete(d, RtError::Arg, mark);
        }
        if d.peer != ANY_SOURCE && view.world_of(d.peer).is_none() {
            return out.complete(d, RtError::Rank, |_| {});
        }
        if d.tag < 0 && d.tag != ANY_TAG {
            return out.complete(d, RtError::Arg, |_| {});
        }
        live.insert(d.id(), *d);
        self.posted[d.rank as usize].push_back(d.id());
        self.dirty.push(d.rank);
    }

    /// `MPI_Cancel` of a send or a receive (its request id in `aux`): it succeeds if the
    /// operation is not matched yet, and the request then completes cancelled. Whether it
    /// succeeds is decided here, at the slice boundary, from the descriptors alone, so a
    /// recording's replay reaches the same decision.
    pub fn cancel(
        &mut self,
        d: &Descriptor,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        if !self.cancel_send(d, live, out) {
            self.cancel_recv(d, live, out);
        }
        if d.request != 0 {
            out.complete(d, RtError::Ok, |_| {});
        }
    }

    /// Cancel `d.rank`'s unmatched send of request `d.aux`, if there is one.
    fn cancel_send(
        &mut self,
        d: &Descriptor,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) -> bool {
        let is_send = |k| matches!(k, Some(DescKind::Send | DescKind::Ssend | DescKind::Rsend));
        let found = self.unexpected.iter().find_map(|(key, q)| {
            q.iter()
                .position(|id| {
                    // A send completed eagerly cannot be cancelled any more (its data is in
                    // node memory and will be delivered): the cancel has no effect.
                    !self.eager.contains(id)
                        && live.get(id).is_some_and(|s| {
                            s.rank == d.rank && s.request == d.aux && is_send(s.kind())
                        })
                })
                .map(|pos| (*key, pos))
        });
        let Some((key, pos)) = found else {
            return false;
        };
        let q = self.unexpected.get_mut(&key).expect("found above");
        let id = q.remove(pos).expect("position is in range");
        if q.is_empty() && self.unexpected.len() > KEPT_QUEUES {
            self.unexpected.remove(&key);
        }
        let s = live.remove(&id).expect("unmatched sends are live");
        out.complete(&s, RtError::Ok, |c| {
            c.flags |= COMPLETION_CANCELLED;
        });
        true
    }

    /// Cancel `d.rank`'s unmatched receive of request `d.aux`, if there is one.
    fn cancel_recv(
        &mut self,
        d: &Descriptor,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        let q = &mut self.posted[d.rank as usize];
        let pos = q.iter().position(|id| {
            live.get(id)
                .is_some_and(|r| r.request == d.aux && r.kind() == Some(DescKind::Recv))
        });
        if let Some(pos) = pos {
            let id = q.remove(pos).expect("position is in range");
            let r = live.remove(&id).expect("posted receives are live");
            out.complete(&r, RtError::Ok, |c| {
                c.flags |= COMPLETION_CANCELLED;
            });
        }
    }

    /// Index in `queue` of the first send `r` accepts.
    fn find(
        queue: &VecDeque<DescRef>,
        r: &Descriptor,
        comms: &CommTable,
        live: &BTreeMap<DescRef, Descriptor>,
    ) -> Option<usize> {
        let view = comms.get(r.comm, r.rank)?;
        let want_src = if r.peer == ANY_SOURCE {
            None
        } else {
            view.world_of(r.peer)
        };
        queue.iter().position(|id| {
            let s = &live[id];
            want_src.is_none_or(|w| w == s.rank) && tag_ok(r.tag, s.tag)
        })
    }

    /// MSM: match every dirty receiver's posted receives and probes, in posting order.
    pub fn match_pending(
        &mut self,
        comms: &CommTable,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for &rank in &dirty {
            let mut i = 0;
            while i < self.posted[rank as usize].len() {
                let rid = self.posted[rank as usize][i];
                let r = live[&rid];
                let Some(queue) = self.unexpected.get_mut(&(r.comm, rank)) else {
                    i += 1;
                    continue;
                };
                let Some(pos) = Self::find(queue, &r, comms, live) else {
                    i += 1;
                    continue;
                };
                let sid = queue[pos];
                let s = live[&sid];
                let src = comms
                    .get(r.comm, rank)
                    .and_then(|v| v.rank_of(s.rank))
                    .map_or(-1, |x| x as i32);
                self.posted[rank as usize].remove(i);
                if r.kind() == Some(DescKind::Probe) {
                    // A probe reports the message and leaves it for a receive.
                    live.remove(&rid);
                    out.complete(&r, RtError::Ok, |c| set_status(c, src, s.tag, s.bytes));
                    continue;
                }
                queue.remove(pos);
                if queue.is_empty() && self.unexpected.len() > KEPT_QUEUES {
                    self.unexpected.remove(&(r.comm, rank));
                }
                if let Ok(f) = self.fresh.binary_search_by_key(&sid, |&(id, _)| id) {
                    self.fresh[f].1 = false;
                }
                let truncated = s.bytes > r.bytes;
                let bytes = s.bytes.min(r.bytes);
                out.cite(&s);
                out.cite(&r);
                out.push(Decision::Match(Match {
                    send: sid,
                    recv: rid,
                    bytes,
                    truncated,
                }));
                self.transfers.push(Transfer {
                    send: sid,
                    recv: rid,
                    total: bytes,
                    done: 0,
                    truncated,
                });
            }
        }
        // Nothing above posts, so nothing was marked dirty meanwhile.
        debug_assert!(self.dirty.is_empty());
        dirty.clear();
        self.dirty = dirty;
    }

    /// Answer the `MPI_Iprobe`s of this slice from the state after matching.
    pub fn answer_iprobes(
        &self,
        iprobes: &[Descriptor],
        comms: &CommTable,
        live: &BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        for p in iprobes {
            let Some(view) = comms.get(p.comm, p.rank) else {
                out.complete(p, RtError::Comm, |_| {});
                continue;
            };
            if p.peer == PROC_NULL {
                out.complete(p, RtError::Ok, |c| {
                    set_status(c, PROC_NULL, ANY_TAG, 0);
                    c.flags |= COMPLETION_FOUND;
                });
                continue;
            }
            if p.peer != ANY_SOURCE && view.world_of(p.peer).is_none() {
                out.complete(p, RtError::Rank, |_| {});
                continue;
            }
            let hit = self
                .unexpected
                .get(&(p.comm, p.rank))
                .and_then(|q| Self::find(q, p, comms, live));
            match hit {
                Some(pos) => {
                    let s = live[&self.unexpected[&(p.comm, p.rank)][pos]];
                    let src = view.rank_of(s.rank).map_or(-1, |x| x as i32);
                    out.complete(p, RtError::Ok, |c| {
                        set_status(c, src, s.tag, s.bytes);
                        c.flags |= COMPLETION_FOUND;
                    });
                }
                None => out.complete(p, RtError::Ok, |_| {}),
            }
        }
    }

    /// P2P: plan this slice's chunks within each receiving node's budget, completing the
    /// messages whose last byte moves.
    pub fn schedule_chunks(
        &mut self,
        cfg: &SchedConfig,
        comms: &CommTable,
        live: &mut BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        // Both vectors are the last slice's (a `vec!` and a `Vec::with_capacity` a slice
        // were two of a ping-pong slice's allocations); `retain_mut` keeps the transfers'
        // order, which is the decisions' order.
        let mut budget = std::mem::take(&mut self.budget);
        budget.clear();
        budget.resize(cfg.nodes() as usize, cfg.chunk_budget);
        let mut transfers = std::mem::take(&mut self.transfers);
        transfers.retain_mut(|t| {
            let node = cfg.node_of_rank[t.recv.rank as usize] as usize;
            let take = (t.total - t.done).min(budget[node]);
            if take > 0 {
                let (s, r) = (live[&t.send], live[&t.recv]);
                out.cite(&s);
                out.cite(&r);
                out.push(Decision::Chunk(Chunk {
                    send: t.send,
                    recv: t.recv,
                    offset: t.done,
                    len: take,
                }));
                t.done += take;
                budget[node] -= take;
            }
            if t.done < t.total {
                return true;
            }
            let s = live.remove(&t.send).expect("matched send is live");
            let r = live.remove(&t.recv).expect("matched receive is live");
            if self.eager.remove(&t.send) {
                // Completed when it was copied into node memory (that memory is free now)
                // or, inline, when it was posted.
                if s.flags & FLAG_INLINE == 0 {
                    self.eager_bytes -= s.bytes;
                }
            } else {
                out.complete(&s, RtError::Ok, |c| set_status(c, s.peer, s.tag, s.bytes));
            }
            let err = if t.truncated {
                RtError::Truncate
            } else {
                RtError::Ok
            };
            // The receive's status source is the sender's rank in the communicator.
            let src = comms
                .get(r.comm, r.rank)
                .and_then(|v| v.rank_of(s.rank))
                .map_or(-1, |x| x as i32);
            out.complete(&r, err, |c| set_status(c, src, s.tag, t.total));
            false
        });
        self.transfers = transfers;
        self.budget = budget;
    }

    /// Eager protocol: complete this slice's small standard-mode sends that no receive took,
    /// in canonical order, while node memory has room (see the module documentation).
    pub fn complete_eager(
        &mut self,
        cfg: &SchedConfig,
        live: &BTreeMap<DescRef, Descriptor>,
        out: &mut Out,
    ) {
        let mut fresh = std::mem::take(&mut self.fresh);
        for id in fresh
            .iter()
            .filter(|&&(_, untaken)| untaken)
            .map(|&(id, _)| id)
        {
            if cfg.eager_max == 0 {
                break;
            }
            // A send cancelled in the slice it was exchanged in is gone already.
            let Some(s) = live.get(&id) else {
                continue;
            };
            if s.bytes > cfg.eager_max || self.eager_bytes + s.bytes > cfg.eager_budget {
                continue;
            }
            self.eager.insert(id);
            self.eager_bytes += s.bytes;
            out.complete(s, RtError::Ok, |c| {
                set_status(c, s.peer, s.tag, s.bytes);
                c.flags |= COMPLETION_EAGER;
            });
        }
        fresh.clear();
        self.fresh = fresh;
    }

    /// Pending operations of `rank`, for deadlock reports.
    pub fn pending_of(
        &self,
        rank: u32,
        comms: &CommTable,
        live: &BTreeMap<DescRef, Descriptor>,
    ) -> Vec<PendingOp> {
        let mut ops = Vec::new();
        for id in &self.posted[rank as usize] {
            let r = &live[id];
            let waits_for = match comms.get(r.comm, rank) {
                Some(v) if r.peer == ANY_SOURCE => {
                    v.members().into_iter().filter(|&m| m != rank).collect()
                }
                Some(v) => v.world_of(r.peer).into_iter().collect(),
                None => Vec::new(),
            };
            ops.push(PendingOp {
                desc: *id,
                kind: r.kind().unwrap_or(DescKind::Recv),
                comm: r.comm,
                peer: r.peer,
                tag: r.tag,
                bytes: r.bytes,
                waits_for,
            });
        }
        for (&(_, dest), q) in &self.unexpected {
            // An eager send is complete: its sender waits for nothing.
            for id in q
                .iter()
                .filter(|id| id.rank == rank && !self.eager.contains(id))
            {
                let s = &live[id];
                ops.push(PendingOp {
                    desc: *id,
                    kind: s.kind().unwrap_or(DescKind::Send),
                    comm: s.comm,
                    peer: s.peer,
                    tag: s.tag,
                    bytes: s.bytes,
                    waits_for: vec![dest],
                });
            }
        }
        ops
    }
}
