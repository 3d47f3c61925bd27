//! The global strobe and the microstrobes, built on the core primitives only.
//!
//! Node 0's thread plays the Strobe Sender. A slice starts when the Strobe Sender writes
//! the slice number into every node's global memory and signals `EV_STROBE`. Each
//! microphase ends with every node storing `slice*8 + phase` in its `VAR_DONE` and, off node
//! 0, signalling `EV_DONE` on node 0; the Strobe Sender's microstrobe opens the next
//! microphase, and `EV_MICRO` wakes the other nodes.
//!
//! **One node**: the microstrobe is the papers' Compare-And-Write "VAR_DONE >= code on all
//! nodes, then VAR_GO := code" (a failed attempt is one unsuccessful synchronization retry,
//! the USR* metrics), and the strobe a Compare-And-Write of `VAR_STROBE`.
//!
//! **Several nodes: a counting barrier.** Every other node signals `EV_DONE` on node 0
//! exactly once per microphase, after its phase's work and every transfer of it completed,
//! and node 0 consumes exactly that many before opening (the state machine never lets a
//! node run ahead of the microstrobe it waits for). So "every node signalled" already
//! says what the Compare-And-Write's compare would check, and the microstrobe is: consume
//! `nodes - 1` signals, then one `EV_MICRO` per other node, which each consumes exactly
//! once per microphase. The strobe likewise: the slice number is *data* at
//! [`STROBE_SLOT`] (written by the Xfer-And-Signal that signals `EV_STROBE`, read after
//! consuming it). The signals are sent with [`Transport::xfer_and_signal_nowait`]: the
//! sender does not wait for an acknowledgement, the per-link order is what matters. Across
//! hosts this makes a microstrobe one one-way message each way instead of a signal, a
//! compare round trip, a store round trip and an acknowledged signal (docs/multi-host.md,
//! "Where a slice across hosts spends its time"). Nothing fails and retries: USR stays 0.
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
/// Several nodes: where the strobe's slice number lands in every node's global memory
/// (data in the variables' page, away from the variables: written by Xfer-And-Signal).
pub const STROBE_SLOT: usize = 64;

/// The slice number that tells every node to leave its loop.
pub const STOP: u64 = u64::MAX;

/// Node 0: start `slice` on every node.
pub fn send_strobe(t: &dyn Transport, slice: u64) -> Result<(), TransportError> {
    if t.nodes() > 1 {
        t.store_var(VAR_STROBE, slice)?;
        return t.xfer_and_signal_nowait(
            &slice.to_le_bytes(),
            &others(t),
            STROBE_SLOT,
            Some(EV_STROBE),
        );
    }
    let all = NodeSet::all(t.nodes());
    t.compare_and_write(
        VAR_STROBE,
        CmpOp::Ne,
        slice,
        &all,
        Some((VAR_STROBE, slice)),
    )?;
    Ok(())
}

/// Every node but node 0 (this function runs on node 0).
fn others(t: &dyn Transport) -> NodeSet {
    NodeSet::from_nodes((1..t.nodes()).filter(|&n| n != t.node()))
}

/// Nodes other than 0: wait for the next strobe; returns the slice number (or `STOP`).
/// Each strobe brings one `EV_STROBE`; the slot holds the latest slice number.
pub fn await_strobe(t: &dyn Transport, last: u64) -> Result<u64, TransportError> {
    loop {
        t.test_event(EV_STROBE, Wait::Block)?;
        let mut b = [0u8; 8];
        t.read_local(STROBE_SLOT, &mut b)?;
        let s = u64::from_le_bytes(b);
        if s != last {
            t.store_var(VAR_STROBE, s)?;
            return Ok(s);
        }
    }
}

/// Mark the microphase `code` done on this node: store it in `VAR_DONE` and, off node 0,
/// signal `EV_DONE` on node 0 (exactly once per microphase).
pub fn signal_done(t: &dyn Transport, code: u64) -> Result<(), TransportError> {
    t.store_var(VAR_DONE, code)?;
    if t.node() != 0 {
        t.xfer_and_signal_nowait(&[], &NodeSet::single(0), 0, Some(EV_DONE))?;
    }
    Ok(())
}

/// Strobe Sender, one node: the microstrobe's Compare-And-Write, "`VAR_DONE >= code` on
/// all nodes, then `VAR_GO := code`". `false` is one unsuccessful synchronization retry.
pub fn try_microstrobe(t: &dyn Transport, code: u64) -> Result<bool, TransportError> {
    let all = NodeSet::all(t.nodes());
    t.compare_and_write(VAR_DONE, CmpOp::Ge, code, &all, Some((VAR_GO, code)))
}

/// Strobe Sender: consume one node's phase-done signal.
pub fn await_done_signal(t: &dyn Transport) -> Result<(), TransportError> {
    t.test_event(EV_DONE, Wait::BlockSpinning).map(drop)
}

/// Strobe Sender: the microstrobe opened. Consume the phase-done signals still owed for it
/// (so stale signals never turn into phantom retries later) and, if `wake_others`, wake
/// the other nodes.
pub fn open_microstrobe(
    t: &dyn Transport,
    owed: u32,
    code: u64,
    wake_others: bool,
) -> Result<(), TransportError> {
    for _ in 0..owed {
        await_done_signal(t)?;
    }
    if t.nodes() > 1 && wake_others {
        t.store_var(VAR_GO, code)?;
        t.xfer_and_signal_nowait(&[], &others(t), 0, Some(EV_MICRO))?;
    }
    Ok(())
}

/// Nodes other than 0: wait until the microstrobe `code` opened the next microphase (one
/// `EV_MICRO` per microstrobe: the counting barrier above).
pub fn await_microstrobe(t: &dyn Transport, code: u64) -> Result<(), TransportError> {
    t.test_event(EV_MICRO, Wait::BlockSpinning)?;
    t.store_var(VAR_GO, code)
}
