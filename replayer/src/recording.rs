//! What the replayer reads from a recording, through `strobe_recorder::Recording` (the one
//! reading API): the job, its replay log, and (when the schedule log covers a slice) the
//! recorded descriptors and decisions for divergence reports, as comparable text lines.

use std::path::{Path, PathBuf};

use strobe_recorder::recording::DescriptorRow;
use strobe_recorder::replay_log::ReplayLog;
use strobe_recorder::{Job, RecordError};

use crate::ReplayError;

/// An open recording, with what a replay needs loaded.
pub struct Recording {
    pub path: PathBuf,
    pub job: Job,
    pub log: ReplayLog,
    reader: strobe_recorder::Recording,
}

fn bad(what: impl Into<String>) -> ReplayError {
    ReplayError::Recording(RecordError::Corrupt(what.into()))
}

impl Recording {
    /// Open and check a recording for replay. A recording made by a scheduler of another
    /// version is refused here ([`ReplayError::SchedulerVersion`]): its decisions would
    /// differ by construction, which is not a divergence of the program.
    pub fn open(path: &Path) -> Result<Recording, ReplayError> {
        let reader = strobe_recorder::Recording::open(path)?;
        let job = reader.job().clone();
        let running = strobe_core::sched::SCHEDULER_VERSION;
        // Older versions replay with their own rules (strobe-perf: version 1 is version 2
        // without the eager protocol, see `Job::engine`).
        let oldest = strobe_core::sched::OLDEST_SCHEDULER_VERSION;
        if !(oldest..=running).contains(&job.scheduler_version) {
            return Err(ReplayError::SchedulerVersion {
                recorded: job.scheduler_version,
                running,
            });
        }
        if job.ranks == 0 || job.nodes == 0 || job.nodes > job.ranks {
            return Err(bad(format!(
                "job has {} ranks on {} nodes",
                job.ranks, job.nodes
            )));
        }
        if job.command.is_empty() {
            return Err(bad("job.command is empty"));
        }
        let log = reader.replay_log()?;
        Ok(Recording {
            path: path.to_path_buf(),
            job,
            log,
            reader,
        })
    }

    /// The reading API underneath (payloads for single-rank replay).
    pub fn reader(&self) -> &strobe_recorder::Recording {
        &self.reader
    }

    /// Whether the content checksum was verified on opening (`strobe_recorder::checksum`).
    pub fn checksum(&self) -> &strobe_recorder::recording::ChecksumState {
        self.reader.checksum()
    }

    /// The recorded descriptors of `slice` as comparable text lines `(rank, line)` (the
    /// format of `source::descriptor_text`), if the schedule log covers it.
    pub fn descriptors(&self, slice: u64) -> Option<Vec<(u32, String)>> {
        let rows = self.reader.descriptors(slice).ok()??;
        Some(rows.iter().map(|d| (d.rank, descriptor_line(d))).collect())
    }

    /// The recorded decisions of `slice` as comparable text lines (`Display` of
    /// `Decision`, as the divergence report prints replayed ones), if the schedule log covers it.
    pub fn decisions(&self, slice: u64) -> Option<Vec<String>> {
        let decisions = self.reader.decisions(slice).ok()??;
        Some(decisions.iter().map(|d| format!("{d}")).collect())
    }
}

fn descriptor_line(d: &DescriptorRow) -> String {
    format!(
        "rank {} seq {}: {} peer={} tag={} comm={} bytes={}",
        d.rank, d.seq, d.kind, d.peer, d.tag, d.comm, d.bytes
    )
}
