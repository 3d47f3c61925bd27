//! The global strobe and the microstrobes, built on the core primitives only.
//!
//! Node 0's thread plays the Strobe Sender. A slice starts when the Strobe Sender writes
//! the slice number into every node's `VAR_STROBE` with Compare-And-Write and signals
//! `EV_STROBE` with a zero-length Xfer-And-Signal. Each microphase ends with every node
//! storing `slice*8 + phase` in its `VAR_DONE` and signalling `EV_DONE` on node 0; the
//! Strobe Sender's Compare-And-Write "VAR_DONE >= code on all nodes, then VAR_GO := code"
//! opens the next microphase (a failed attempt is one unsuccessful synchronization retry,
//! the papers' USR* metrics), and `EV_MICRO` wakes the other nodes.

pub use strobe_core::slice::{code, Phase};

use crate::transport::{CmpOp, EventId, NodeSet, Transport, TransportError, Wait};

pub const VAR_STROBE: usize = 0;
pub const VAR_DONE: usize = 8;
pub const VAR_GO: usize = 16;
pub const EV_STROBE: EventId = EventId(0);
pub const EV_MICRO: EventId = EventId(1);
pub const EV_DONE: EventId = EventId(2);

/// The slice number that tells every node to leave its loop.
pub const STOP: u64 = u64::MAX;

/// Node 0: start `slice` on every node.
pub fn send_strobe(t: &dyn Transport, slice: u64) -> Result<(), TransportError> {
    let all = NodeSet::all(t.nodes());
    t.compare_and_write(
        VAR_STROBE,
        CmpOp::Ne,
        slice,
        &all,
        Some((VAR_STROBE, slice)),
    )?;
    signal_others(t, EV_STROBE)
}

fn signal_others(t: &dyn Transport, ev: EventId) -> Result<(), TransportError> {
    if t.nodes() > 1 {
        let others = NodeSet::from_nodes((1..t.nodes()).filter(|&n| n != t.node()));
        t.xfer_and_signal(&[], &others, 0, None, Some(ev))?;
    }
    Ok(())
}

/// Nodes other than 0: wait for the next strobe; returns the slice number (or `STOP`).
pub fn await_strobe(t: &dyn Transport, last: u64) -> Result<u64, TransportError> {
    loop {
        let s = t.load_var(VAR_STROBE)?;
        if s != last {
            return Ok(s);
        }
        t.test_event(EV_STROBE, Wait::Block)?;
    }
}

/// Mark `phase` of `slice` done on this node and wait for the microstrobe that opens the
/// next one. On node 0 this is the Strobe Sender's side; it returns the number of
/// unsuccessful Compare-And-Write retries.
pub fn microstrobe(t: &dyn Transport, slice: u64, phase: Phase) -> Result<u32, TransportError> {
    let c = code(slice, phase);
    t.store_var(VAR_DONE, c)?;
    let nodes = t.nodes();
    if t.node() != 0 {
        t.xfer_and_signal(&[], &NodeSet::single(0), 0, None, Some(EV_DONE))?;
        while t.load_var(VAR_GO)? < c {
            t.test_event(EV_MICRO, Wait::BlockSpinning)?;
        }
        return Ok(0);
    }
    let all = NodeSet::all(nodes);
    // Every other node signals EV_DONE exactly once per phase; consume exactly that many
    // signals per phase so stale signals never turn into phantom retries later.
    let mut owed = nodes - 1;
    let mut retries = 0;
    while !t.compare_and_write(VAR_DONE, CmpOp::Ge, c, &all, Some((VAR_GO, c)))? {
        retries += 1;
        if owed > 0 {
            t.test_event(EV_DONE, Wait::BlockSpinning)?;
            owed -= 1;
        }
    }
    for _ in 0..owed {
        t.test_event(EV_DONE, Wait::BlockSpinning)?;
    }
    signal_others(t, EV_MICRO)?;
    Ok(retries)
}
