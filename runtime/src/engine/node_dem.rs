//! DEM, the descriptor exchange (a child module of `node`, so it sees `NodeManager`'s
//! fields): the Buffer Sender drains the local ranks' queues and sends the batch to every
//! node's mailbox, the Buffer Receiver collects the other nodes' batches, and every
//! replica merges them into the canonical order and schedules.

use super::*;

impl NodeManager {
    /// DEM: the Buffer Sender drains the local ranks' queues and delivers the batch, with
    /// this replica's digest of the previous slice, to every node's Buffer Receiver.
    pub(super) fn send_batch(
        &mut self,
        w: &mut SliceWork,
        replica: Option<ReplicaDigest>,
    ) -> Result<(), EngineError> {
        let batch = self.drain(w.slice);
        for d in &batch {
            match d.kind() {
                Some(k) if k.is_collective() => w.local.ncolldem += 1,
                Some(_) => w.local.np2pdem += 1,
                None => {}
            }
        }
        w.local.t_drain = w.t0.elapsed();
        if self.cfg.nodes == 1 {
            // The only mailbox is this node's own and the only replica digest ours (which
            // the cross-check never compares with itself): copying the batch into global
            // memory and back is four copies of every descriptor for nothing.
            self.own_batch = batch;
            return Ok(());
        }
        let bytes = descriptors_as_bytes(&batch);
        let mut mail = Vec::with_capacity(MAILBOX_HEADER + bytes.len());
        let (of, digest) = replica.map_or((0, 0), |r| (r.slice, r.digest));
        mail.extend_from_slice(&(batch.len() as u64).to_le_bytes());
        mail.extend_from_slice(&of.to_le_bytes());
        mail.extend_from_slice(&digest.to_le_bytes());
        mail.resize(MAILBOX_HEADER, 0);
        mail.extend_from_slice(bytes);
        let all = NodeSet::all(self.cfg.nodes);
        self.t
            .xfer_and_signal_nowait(&mail, &all, self.mailbox(self.node), Some(EV_MAIL))?;
        Ok(())
    }

    /// MSM: every node's scheduler replica schedules the global batch. Returns the digest
    /// this replica reports for the cross-check.
    pub(super) fn merge_and_schedule(&mut self, w: &mut SliceWork) -> Result<u64, EngineError> {
        let ts = Instant::now();
        w.posted = self.collect_mail()?;
        w.recorded_blocked = self
            .source
            .as_ref()
            .and_then(|s| s.blocked(w.slice, &w.posted));
        if let Some(rec) = &w.recorded_blocked {
            w.blocked = self.with_calls(rec, true, &w.calls_at_start);
            w.all_blocked =
                (self.cfg.nodes > 1).then(|| self.with_calls(rec, false, &w.calls_at_start));
            w.site_words = self.site_words(w.all_blocked.as_ref().unwrap_or(&w.blocked));
        }
        self.add_post_sites(&mut w.site_words, &w.posted);
        w.local.bpts = w.blocked.len() as u32;
        w.dec = self.sched.schedule(w.slice, &w.posted)?;
        w.local.t_schedule = ts.elapsed();
        for d in &w.dec.decisions {
            match d {
                Decision::Chunk(c) if self.is_local(c.recv.rank) => w.local.np2pmsm += 1,
                Decision::Collective(run) if run.parts.iter().any(|p| self.is_local(p.rank)) => {
                    w.local.ncollmsm += 1
                }
                _ => {}
            }
        }
        w.digest = w.dec.digest();
        let mut digest = w.digest;
        if self.diverge_at == Some(w.slice) {
            // Test hook (`JobShared::diverge_replica`): this replica disagrees.
            digest ^= 1;
        }
        Ok(digest)
    }

    pub(super) fn mailbox(&self, node: u32) -> usize {
        MAILBOX_BASE + node as usize * mailbox_size(&self.cfg)
    }

    /// Buffer Sender: take what the local ranks posted (up to the replayer's quota).
    pub(super) fn drain(&mut self, slice: u64) -> Vec<Descriptor> {
        let mut batch = std::mem::take(&mut self.spares.batch);
        batch.clear();
        for (i, q) in self.queues.iter().enumerate() {
            let rank = self.local_ranks[i];
            match self.source.as_ref().and_then(|s| s.quota(slice, rank)) {
                None => {
                    q.descriptors.drain_into(&mut batch);
                }
                Some(k) => {
                    for _ in 0..k {
                        match q.descriptors.pop() {
                            Some(d) => batch.push(d),
                            None => break,
                        }
                    }
                }
            }
        }
        // Arena sends (scheduler version 5): their bytes move into node memory now, before
        // the next drain lets their ranks reuse the entries (`segment_arena.rs`).
        for d in batch.iter().filter(|d| d.in_arena()) {
            if let Some(bytes) = self.shared.seg.arena_read(d.rank, d.seq, d.bytes as usize) {
                self.shared.eager.hold(d.id(), bytes);
            }
        }
        // So do small collectives' inputs (`coll_inputs.rs`).
        for d in &batch {
            if let Some((addr, len)) = crate::rank_inline::arena_input(d) {
                if let Some(bytes) = self.shared.seg.arena_read(d.rank, d.seq, len as usize) {
                    self.shared.eager.inputs.hold(d.id(), addr, bytes);
                }
            }
        }
        batch
    }

    /// Buffer Receiver: read every node's batch and merge into canonical order; keep the
    /// replica digest each batch carried in `self.replicas`.
    /// Several nodes: wait until every node's batch of this slice is in its mailbox (one
    /// `EV_MAIL` per node and slice; this is what closes DEM, see `EV_MAIL`).
    pub(super) fn await_mailboxes(&self) -> Result<(), EngineError> {
        if self.cfg.nodes > 1 {
            for _ in 0..self.cfg.nodes {
                self.t.test_event(EV_MAIL, Wait::BlockSpinning)?;
            }
        }
        Ok(())
    }

    pub(super) fn collect_mail(&mut self) -> Result<Vec<Descriptor>, EngineError> {
        let mut all = std::mem::take(&mut self.own_batch);
        self.replicas.clear();
        for n in (0..self.cfg.nodes).filter(|_| self.cfg.nodes > 1) {
            let base = self.mailbox(n);
            // Header: descriptor count, then the slice and digest of the sender's replica.
            let mut head = [0u8; 24];
            self.t.read_local(base, &mut head)?;
            let word = |i: usize| u64::from_le_bytes(head[i * 8..i * 8 + 8].try_into().expect("8"));
            let count = word(0) as usize;
            if word(1) != 0 {
                self.replicas.push(ReplicaDigest {
                    node: n,
                    slice: word(1),
                    digest: word(2),
                });
            }
            let mut raw = vec![0u8; count * std::mem::size_of::<Descriptor>()];
            self.t.read_local(base + MAILBOX_HEADER, &mut raw)?;
            all.extend(
                raw.chunks_exact(std::mem::size_of::<Descriptor>())
                    .map(|c| {
                        // SAFETY: `c` holds the bytes of a Descriptor written by a Buffer Sender
                        // (plain data, every bit pattern valid); read_unaligned copes with alignment.
                        unsafe { std::ptr::read_unaligned(c.as_ptr() as *const Descriptor) }
                    }),
            );
        }
        // Canonical order: by rank, then sequence number.
        all.sort_unstable_by_key(|d| d.id());
        Ok(all)
    }
}

fn descriptors_as_bytes(d: &[Descriptor]) -> &[u8] {
    // SAFETY: Descriptor is repr(C) plain data without padding holes that matter (every
    // field is an integer; `_pad` fields are zeroed by Default), so viewing it as bytes is
    // sound; the length is exactly the slice's size.
    unsafe { std::slice::from_raw_parts(d.as_ptr() as *const u8, std::mem::size_of_val(d)) }
}
