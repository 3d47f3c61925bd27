//! The endpoint's bookkeeping: where things live in the registered regions, the request
//! slots per peer (flow control and answer delivery), the staging chunks, and the work
//! request ids.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::transport::NodeId;

use super::wire::{slot_size, SLOTS};

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Offsets in a node's two regions.
///
/// The **global region** (remote peers write into it): `global` bytes of global memory,
/// then the request mailboxes (one slot per sender node and slot number), then the answer
/// words (one per responder node and slot number). The **staging region** (only read by the
/// NIC): the data chunks of Xfer-And-Signal, then the outgoing requests and answers (the
/// same indexing, by destination), so every byte the NIC sends comes from registered memory.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    pub nodes: u32,
    pub global: usize,
    pub slot: usize,
    pub chunk: usize,
    pub chunks: usize,
}

impl Layout {
    pub fn new(nodes: u32, global_size: usize, chunk: usize, chunks: usize) -> Layout {
        Layout {
            nodes,
            global: global_size.div_ceil(8) * 8,
            slot: slot_size(nodes),
            chunk,
            chunks,
        }
    }

    fn slot_index(&self, node: NodeId, slot: u32) -> usize {
        node as usize * SLOTS as usize + slot as usize
    }

    fn mailboxes(&self) -> usize {
        self.nodes as usize * SLOTS as usize * self.slot
    }

    fn answers(&self) -> usize {
        self.nodes as usize * SLOTS as usize * 8
    }

    pub fn region_len(&self) -> usize {
        self.global + self.mailboxes() + self.answers() + 8 * self.nodes as usize
    }

    /// Where `sender`'s notices (goodbye, failure) land: a word of their own, since a
    /// notice may be posted while every slot is in use.
    pub fn notice(&self, sender: NodeId) -> usize {
        self.global + self.mailboxes() + self.answers() + 8 * sender as usize
    }

    /// Where `sender`'s request in `slot` lands (global region).
    pub fn inbox(&self, sender: NodeId, slot: u32) -> usize {
        self.global + self.slot_index(sender, slot) * self.slot
    }

    /// Where `responder`'s answer to this node's `slot` lands (global region).
    pub fn answer(&self, responder: NodeId, slot: u32) -> usize {
        self.global + self.mailboxes() + self.slot_index(responder, slot) * 8
    }

    pub fn staging_len(&self) -> usize {
        self.chunk * self.chunks + self.mailboxes() + self.answers() + 8
    }

    /// The (never written) staged word notices are sent from.
    pub fn out_notice(&self) -> usize {
        self.chunk * self.chunks + self.mailboxes() + self.answers()
    }

    pub fn chunk_at(&self, chunk: usize) -> usize {
        chunk * self.chunk
    }

    /// The staged copy of this node's request to `dest` in `slot`.
    pub fn out_request(&self, dest: NodeId, slot: u32) -> usize {
        self.chunk * self.chunks + self.slot_index(dest, slot) * self.slot
    }

    /// The staged answer to `requester`'s `slot`.
    pub fn out_answer(&self, requester: NodeId, slot: u32) -> usize {
        self.chunk * self.chunks + self.mailboxes() + self.slot_index(requester, slot) * 8
    }
}

/// Work request ids: a tag in the top byte, details below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WrId {
    /// A receive of the queue pair to `node`.
    Recv(NodeId),
    /// A chunk write of an Xfer-And-Signal (the chunk's index).
    Chunk(usize),
    /// A request or the signal of an empty Xfer-And-Signal.
    Request,
    Answer,
    /// A goodbye or a failure notice.
    Notice,
}

impl WrId {
    pub fn encode(self) -> u64 {
        match self {
            WrId::Recv(n) => 1 << 56 | u64::from(n),
            WrId::Chunk(c) => 2 << 56 | c as u64,
            WrId::Request => 3 << 56,
            WrId::Answer => 4 << 56,
            WrId::Notice => 5 << 56,
        }
    }

    pub fn decode(id: u64) -> Option<WrId> {
        let low = id & ((1 << 56) - 1);
        Some(match id >> 56 {
            1 => WrId::Recv(u32::try_from(low).ok()?),
            2 => WrId::Chunk(usize::try_from(low).ok()?),
            3 => WrId::Request,
            4 => WrId::Answer,
            5 => WrId::Notice,
            _ => return None,
        })
    }

    /// For error reports: what the failed work request was.
    pub fn describe(self) -> &'static str {
        match self {
            WrId::Recv(_) => "a receive",
            WrId::Chunk(_) => "an Xfer-And-Signal write",
            WrId::Request => "a request",
            WrId::Answer => "an answer",
            WrId::Notice => "a notice",
        }
    }
}

/// Why a wait ended without its answer.
pub(super) enum Stop {
    Broken(String),
    TimedOut,
}

struct SlotState {
    free: Vec<u32>,
    answers: Vec<Option<u64>>,
    /// The peer said goodbye (or the endpoint broke): why nothing more can be asked.
    closed: Option<String>,
}

/// This node's request slots towards one peer: a slot is taken for a request (or an
/// Xfer-And-Signal) and given back when its answer arrives, so a peer never has more than
/// [`SLOTS`] of this node's requests to hold, which is what sizes its mailboxes, receive
/// queue and send queue.
pub(super) struct Slots {
    state: Mutex<SlotState>,
    changed: Condvar,
    /// Per slot: its answer is in `answers` (what a waiter spins on before it sleeps).
    answered: Vec<AtomicBool>,
}

/// How long a requester polls for its answer before it sleeps: a round trip over RDMA is
/// a few microseconds, a sleep/wake pair costs more.
const ANSWER_SPIN: Duration = Duration::from_micros(20);

impl Slots {
    pub fn new() -> Slots {
        Slots {
            state: Mutex::new(SlotState {
                free: (0..SLOTS).rev().collect(),
                answers: vec![None; SLOTS as usize],
                closed: None,
            }),
            changed: Condvar::new(),
            answered: (0..SLOTS).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    pub fn acquire(&self, deadline: Instant) -> Result<u32, Stop> {
        let mut s = lock(&self.state);
        loop {
            if let Some(why) = &s.closed {
                return Err(Stop::Broken(why.clone()));
            }
            if let Some(slot) = s.free.pop() {
                return Ok(slot);
            }
            s = wait_until(&self.changed, s, deadline)?;
        }
    }

    /// Gives back a slot that was taken but never used (its request was not sent).
    pub fn release(&self, slot: u32) {
        lock(&self.state).free.push(slot);
        self.changed.notify_all();
    }

    pub fn complete(&self, slot: u32, value: u64) {
        lock(&self.state).answers[slot as usize] = Some(value);
        self.answered[slot as usize].store(true, Ordering::Release);
        self.changed.notify_all();
    }

    /// Waits for `slot`'s answer (spinning briefly first) and frees the slot.
    pub fn await_answer(&self, slot: u32, deadline: Instant) -> Result<u64, Stop> {
        let flag = &self.answered[slot as usize];
        let until = Instant::now() + ANSWER_SPIN;
        while !flag.load(Ordering::Acquire) && Instant::now() < until {
            std::hint::spin_loop();
        }
        let mut s = lock(&self.state);
        loop {
            if let Some(v) = s.answers[slot as usize].take() {
                flag.store(false, Ordering::Relaxed);
                s.free.push(slot);
                drop(s);
                self.changed.notify_all();
                return Ok(v);
            }
            if let Some(why) = &s.closed {
                return Err(Stop::Broken(why.clone()));
            }
            s = wait_until(&self.changed, s, deadline)?;
        }
    }

    pub fn close(&self, why: &str) {
        lock(&self.state)
            .closed
            .get_or_insert_with(|| why.to_string());
        self.changed.notify_all();
    }
}

/// Sleeps on `cv` until notified or `deadline`; re-checks at least every 100 ms.
fn wait_until<'a, T>(
    cv: &Condvar,
    g: MutexGuard<'a, T>,
    deadline: Instant,
) -> Result<MutexGuard<'a, T>, Stop> {
    let left = deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or(Stop::TimedOut)?;
    Ok(cv
        .wait_timeout(g, left.min(Duration::from_millis(100)))
        .unwrap_or_else(|p| p.into_inner())
        .0)
}

struct ChunkState {
    free: Vec<usize>,
    /// Per chunk: writes posted from it whose completion has not been polled.
    pending: Vec<usize>,
    broken: Option<String>,
}

/// The staging chunks: a chunk is reused once every write from it has completed, so a
/// large Xfer-And-Signal streams through `chunks` buffers.
pub(super) struct Chunks {
    state: Mutex<ChunkState>,
    changed: Condvar,
}

impl Chunks {
    pub fn new(chunks: usize) -> Chunks {
        Chunks {
            state: Mutex::new(ChunkState {
                free: (0..chunks).rev().collect(),
                pending: vec![0; chunks],
                broken: None,
            }),
            changed: Condvar::new(),
        }
    }

    /// Takes a free chunk for `writes` writes.
    pub fn acquire(&self, writes: usize, deadline: Instant) -> Result<usize, Stop> {
        let mut s = lock(&self.state);
        loop {
            if let Some(why) = &s.broken {
                return Err(Stop::Broken(why.clone()));
            }
            if let Some(c) = s.free.pop() {
                s.pending[c] = writes;
                return Ok(c);
            }
            s = wait_until(&self.changed, s, deadline)?;
        }
    }

    /// One write from `chunk` completed (or was never posted).
    pub fn written(&self, chunk: usize) {
        let mut s = lock(&self.state);
        let Some(p) = s.pending.get_mut(chunk).filter(|p| **p > 0) else {
            return;
        };
        *p -= 1;
        if *p == 0 {
            s.free.push(chunk);
            drop(s);
            self.changed.notify_all();
        }
    }

    pub fn close(&self, why: &str) {
        lock(&self.state)
            .broken
            .get_or_insert_with(|| why.to_string());
        self.changed.notify_all();
    }
}
