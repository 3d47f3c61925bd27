//! A plain-text slice log (`strobe run --decision-log FILE`): one block per slice with its
//! start reason, metrics, digest, the calls handled (`post ...`) and every decision (its
//! one-line text, `Display` on `Decision`). It is a debugging aid and the input of
//! the determinism test; the SQLite recorder is the real artifact. Records go through a
//! bounded queue to a writer thread, so the slice path never touches the disk.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use strobe_runtime::engine::{SliceRecord, SliceSink};

pub struct DecisionLog {
    tx: Mutex<Option<SyncSender<SliceRecord>>>,
    writer: Mutex<Option<JoinHandle<std::io::Result<()>>>>,
}

impl DecisionLog {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let mut out = BufWriter::new(File::create(path)?);
        let (tx, rx) = sync_channel::<SliceRecord>(4096);
        let writer = std::thread::Builder::new()
            .name("strobe-decision-log".into())
            .spawn(move || {
                for rec in rx {
                    write_record(&mut out, &rec)?;
                }
                out.flush()
            })?;
        Ok(DecisionLog {
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Flush and close (after the job ended).
    pub fn finish(&self) -> std::io::Result<()> {
        self.tx.lock().expect("log lock").take();
        match self.writer.lock().expect("log lock").take() {
            Some(w) => w
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("log writer panicked"))),
            None => Ok(()),
        }
    }
}

impl SliceSink for DecisionLog {
    fn slice(&self, rec: &SliceRecord) {
        if let Some(tx) = self.tx.lock().expect("log lock").as_ref() {
            // A full queue blocks the slice briefly rather than losing records.
            let _ = tx.send(rec.clone());
        }
    }
}

fn write_record(out: &mut impl Write, rec: &SliceRecord) -> std::io::Result<()> {
    writeln!(
        out,
        "slice {} reason={} start_ns={} getts_us={:.1} gtts_us={:.1} usrsts={} descriptors={} decisions={} blocked={} digest={:016x}",
        rec.slice,
        rec.reason.name(),
        rec.start_ns,
        rec.global.getts.as_secs_f64() * 1e6,
        rec.global.gtts.as_secs_f64() * 1e6,
        rec.global.usrsts,
        rec.descriptors.len(),
        rec.decisions.decisions.len(),
        rec.blocked.len(),
        rec.digest
    )?;
    for d in &rec.descriptors {
        let kind = d.kind().map_or("?", |k| k.mpi_name());
        writeln!(
            out,
            "  post rank={} seq={} {} peer={} tag={} comm={} bytes={}",
            d.rank, d.seq, kind, d.peer, d.tag, d.comm, d.bytes
        )?;
    }
    for d in &rec.decisions.decisions {
        writeln!(out, "  {d}")?;
    }
    Ok(())
}
