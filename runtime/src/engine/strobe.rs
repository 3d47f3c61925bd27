//! The global strobe and the microstrobes, built on the core primitives only.
//!
//! Node 0's thread plays the Strobe Sender. A slice starts when the Strobe Sender writes
//! the slice number into every node's `VAR_STROBE` with Compare-And-Write and signals
//! `EV_STROBE` with a zero-length Xfer-And-Signal. Each microphase ends with every node
//! storing `slice*8 + phase` in its `VAR_DONE` and signalling `EV_DONE` on node 0; the
//! Strobe Sender's Compare-And-Write "VAR_DONE >= code on all nodes, then VAR_GO := code"
//! opens the next microphase (a failed attempt is one unsuccessful synchronization retry,
//! the papers' USR* metrics), and `EV_MICRO` wakes the other nodes.
//!
//! When to do which is decided by the slice state machine (`strobe_core::slice::machine`);
//! these functions are its commands carried out on a [`Transport`].

pub use strobe_core::slice::Phase;

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

/// Mark the microphase `code` done on this node: store it in `VAR_DONE` and, off node 0,
/// signal `EV_DONE` on node 0 (exactly once per microphase).
pub fn signal_done(t: &dyn Transport, code: u64) -> Result<(), TransportError> {
    t.store_var(VAR_DONE, code)?;
    if t.node() != 0 {
        t.xfer_and_signal(&[], &NodeSet::single(0), 0, None, Some(EV_DONE))?;
    }
    Ok(())
}

/// Strobe Sender: the microstrobe's Compare-And-Write, "`VAR_DONE >= code` on all nodes,
/// then `VAR_GO := code`". `false` is one unsuccessful synchronization retry.
pub fn try_microstrobe(t: &dyn Transport, code: u64) -> Result<bool, TransportError> {
    let all = NodeSet::all(t.nodes());
    t.compare_and_write(VAR_DONE, CmpOp::Ge, code, &all, Some((VAR_GO, code)))
}

/// Strobe Sender: consume one node's phase-done signal.
pub fn await_done_signal(t: &dyn Transport) -> Result<(), TransportError> {
    t.test_event(EV_DONE, Wait::BlockSpinning).map(drop)
}

/// Strobe Sender: the microstrobe opened. Consume the phase-done signals still owed for it
/// (so stale signals never turn into phantom retries later) and wake the other nodes.
pub fn open_microstrobe(t: &dyn Transport, owed: u32) -> Result<(), TransportError> {
    for _ in 0..owed {
        await_done_signal(t)?;
    }
    signal_others(t, EV_MICRO)
}

/// Nodes other than 0: wait until the microstrobe `code` opened the next microphase.
pub fn await_microstrobe(t: &dyn Transport, code: u64) -> Result<(), TransportError> {
    while t.load_var(VAR_GO)? < code {
        t.test_event(EV_MICRO, Wait::BlockSpinning)?;
    }
    Ok(())
}
