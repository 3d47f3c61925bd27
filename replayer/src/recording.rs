//! What the replayer reads from a recording, through `strobe_recorder::Recording` (the one
//! reading API): the job, its replay log, and (when the schedule log covers a slice) the
//! recorded descriptors and decisions for divergence reports, as comparable text lines.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

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

/// The recording [`crate::plan`] opened, kept for the replay that follows it in the same
/// process (`strobe replay` shows the plan and asks for confirmation first): opening runs
/// the whole-file checks and decodes the replay log, and did it twice. Keyed by the file's
/// identity (device, inode, length, modification time), so a file replaced or rewritten in
/// between is opened again; taken by the first open that matches. What then runs is the
/// content that was checked and shown.
static PLANNED: Kept<Recording> = Kept::new();

/// One value kept for a file, as long as the file is the same.
struct Kept<T> {
    slot: Mutex<Option<(FileKey, T)>>,
}

impl<T> Kept<T> {
    const fn new() -> Self {
        Kept {
            slot: Mutex::new(None),
        }
    }

    fn keep(&self, path: &Path, value: T) {
        if let Some(key) = file_key(path) {
            *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some((key, value));
        }
    }

    /// The value kept for `path` if it is still the same file (taken: once).
    fn take(&self, path: &Path) -> Option<T> {
        let key = file_key(path)?;
        let mut kept = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if kept.as_ref().is_some_and(|(k, _)| *k == key) {
            return kept.take().map(|(_, v)| v);
        }
        None
    }
}

#[derive(PartialEq, Eq, Debug)]
struct FileKey {
    path: PathBuf,
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

fn file_key(path: &Path) -> Option<FileKey> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(path).ok()?;
    Some(FileKey {
        path: path.to_path_buf(),
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
    })
}

impl Recording {
    /// [`Recording::open`], or the recording [`Recording::keep_for_replay`] kept if `path`
    /// is still that file.
    pub fn open_planned(path: &Path) -> Result<Recording, ReplayError> {
        match PLANNED.take(path) {
            Some(rec) => Ok(rec),
            None => Recording::open(path),
        }
    }

    /// Keep this recording for the next [`Recording::open_planned`] of its file.
    pub fn keep_for_replay(self) {
        let path = self.path.clone();
        PLANNED.keep(&path, self);
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    /// What the plan opened is what the replay gets, while the file is the same: another
    /// file, or the file rewritten in between, is opened again.
    #[test]
    fn a_kept_value_is_for_its_file_only_and_once() {
        let dir = tempfile::tempdir().unwrap();
        let (p, q) = (dir.path().join("a.strobe"), dir.path().join("b.strobe"));
        std::fs::write(&p, b"first").unwrap();
        std::fs::write(&q, b"other").unwrap();
        let kept = Kept::new();
        kept.keep(&p, 1);
        assert_eq!(kept.take(&q), None, "another file");
        assert_eq!(kept.take(&p), Some(1));
        assert_eq!(kept.take(&p), None, "taken once");
        // Replaced (a new inode), or rewritten in place with another length.
        kept.keep(&p, 2);
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, b"first").unwrap();
        assert_eq!(kept.take(&p), None, "replaced");
        kept.keep(&p, 3);
        std::fs::write(&p, b"rewritten").unwrap();
        assert_eq!(kept.take(&p), None, "rewritten");
        // Gone: nothing to match.
        kept.keep(&p, 4);
        std::fs::remove_file(&p).unwrap();
        assert_eq!(kept.take(&p), None, "removed");
    }
}
