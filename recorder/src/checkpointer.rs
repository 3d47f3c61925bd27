//! The checkpointer: a thread with its own connection that folds the WAL into the
//! database while a job records (PASSIVE: it never waits for the writer, nor the writer
//! for it), so the writer never pays for a checkpoint's fsync.
//!
//! When: the writer asks for a fold right after a commit, at most every [`FOLD_AFTER`], and
//! waits for it (at most [`FOLD_WAIT`]) before its next transaction; the thread also folds
//! every [`FOLD_AT_LEAST_EVERY`] on its own. SQLite rewinds the WAL to its start only at
//! the commit of a transaction that began after a fold had copied every frame; a
//! message-heavy job's writer begins its next transaction right after a commit, so with
//! folds on a timer (once a second) the WAL never rewound: it grew to 56 MB beside a
//! 16.6 MB recording (`comet_exchange`, everything on), every frame a new page for the
//! kernel to allocate and write back, and `finish` had up to a second of frames left to
//! fold and a long file to truncate (50 ms of a 1 s job). The wait costs the writer a few
//! milliseconds of idling every 100 ms, which the queue absorbs; the fold's fsync stays
//! off the writer (a fold slower than [`FOLD_WAIT`] is not waited for).
//!
//! Only a WAL of at least [`FOLD_FRAMES`] frames is worth a fold the writer waits for
//! (SQLite reports the count after each commit: [`watch_wal`]). A job that posts little
//! (the synthetic benchmarks: 285 slices in 1.6 s) still commits every 20 ms, each commit a
//! few frames rewriting the same pages; folding those every 100 ms cost 16 folds of two
//! fsyncs each, and the writer an fsync of the WAL's header at each rewind: about 9 ms of
//! CPU taken from the job's ranks on 2 cores, for a WAL that never grew past a megabyte.

use std::path::Path;
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::RecordError;

/// The writer asks for a fold at most this often.
const FOLD_AFTER: Duration = Duration::from_millis(100);
/// The thread folds at least this often without being asked.
const FOLD_AT_LEAST_EVERY: Duration = Duration::from_secs(1);
/// The writer waits at most this long for a fold it asked for.
const FOLD_WAIT: Duration = Duration::from_millis(20);
/// The writer asks for a fold only once the WAL holds this many frames (2 MiB of 4 KiB
/// pages; SQLite's own automatic checkpoint waits for 1,000).
const FOLD_FRAMES: u32 = 512;

std::thread_local! {
    /// The frames in the WAL after the last commit on this thread's connection
    /// ([`watch_wal`]; the writer thread owns its connection).
    static WAL_FRAMES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Keep [`WAL_FRAMES`] current: SQLite calls the hook after every commit in WAL mode with
/// the frames now in the WAL (fewer after a rewind). Replaces `wal_autocheckpoint`, which
/// the recorder turns off anyway.
pub(crate) fn watch_wal(conn: &Connection) {
    fn frames(_: &rusqlite::hooks::Wal, n: std::ffi::c_int) -> rusqlite::Result<()> {
        WAL_FRAMES.with(|f| f.set(n.max(0) as u32));
        Ok(())
    }
    conn.wal_hook(Some(frames));
}

/// How many folds the thread has ended, for the writer to wait on.
#[derive(Default)]
struct Folds {
    ended: Mutex<u64>,
    changed: Condvar,
}

impl Folds {
    fn fold_ended(&self) {
        *self.ended.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.changed.notify_all();
    }

    /// The thread is gone: no fold will end any more, so no one waits for one (the
    /// writer still draining its queue after `finish` stopped the thread).
    fn stopped(&self) {
        *self.ended.lock().unwrap_or_else(|e| e.into_inner()) = u64::MAX;
        self.changed.notify_all();
    }
}

enum Request {
    Fold,
    Stop,
}

/// The running thread, owned by the `Recorder`.
pub(crate) struct Checkpointer {
    tx: SyncSender<Request>,
    handle: JoinHandle<()>,
}

/// The writer's side: asks for a fold after a commit, waits for it before the next.
pub(crate) struct FoldRequests {
    tx: SyncSender<Request>,
    folds: Arc<Folds>,
    last: Instant,
    /// The count of ended folds to wait for, once one is asked for.
    awaited: Option<u64>,
    /// At most this long ([`FOLD_WAIT`]).
    wait: Duration,
    /// A fold is asked for once the WAL holds this many frames ([`FOLD_FRAMES`]).
    min_frames: u32,
}

impl FoldRequests {
    /// Called after each commit.
    pub(crate) fn committed(&mut self) {
        if self.awaited.is_some()
            || self.last.elapsed() < FOLD_AFTER
            || WAL_FRAMES.with(|f| f.get()) < self.min_frames
        {
            return;
        }
        let ended = *self.folds.ended.lock().unwrap_or_else(|e| e.into_inner());
        // Full means a fold is already asked for: this one is not needed.
        if self.tx.try_send(Request::Fold).is_ok() {
            self.awaited = Some(ended.saturating_add(1));
        }
        self.last = Instant::now();
    }

    /// Called before a transaction begins: the fold asked for after the last commit ends
    /// first (or [`FOLD_WAIT`] passes), so this transaction's commit can rewind the WAL.
    pub(crate) fn before_begin(&mut self) {
        let Some(awaited) = self.awaited.take() else {
            return;
        };
        let ended = self.folds.ended.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self
            .folds
            .changed
            .wait_timeout_while(ended, self.wait, |n| *n < awaited);
    }
}

impl Checkpointer {
    /// Starts the thread. It opens its own connection there, off the job's start (opening
    /// reads the whole schema: 0.7 ms of every `strobe record`); if it cannot, it only
    /// says so and stops: nothing is folded until `finish`, which folds everything.
    pub(crate) fn start(path: &Path) -> Result<(Checkpointer, FoldRequests), RecordError> {
        let path = path.to_path_buf();
        let (tx, rx) = sync_channel::<Request>(2);
        let folds = Arc::new(Folds::default());
        let done = folds.clone();
        let handle = std::thread::Builder::new()
            .name("strobe-checkpoint".into())
            .spawn(move || {
                let conn = match Connection::open(&path) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!("{}: no checkpoints while recording: {e}", path.display());
                        done.stopped();
                        return;
                    }
                };
                while let Ok(Request::Fold) | Err(RecvTimeoutError::Timeout) =
                    rx.recv_timeout(FOLD_AT_LEAST_EVERY)
                {
                    // A failed checkpoint only leaves a longer WAL: the next one or
                    // `finish` folds it back.
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    done.fold_ended();
                }
                done.stopped();
            })
            .map_err(|e| RecordError::Writer(e.to_string()))?;
        let requests = FoldRequests {
            tx: tx.clone(),
            folds,
            last: Instant::now(),
            awaited: None,
            wait: FOLD_WAIT,
            min_frames: FOLD_FRAMES,
        };
        Ok((Checkpointer { tx, handle }, requests))
    }

    /// Stop the thread (a fold in progress finishes first).
    pub(crate) fn stop(self) {
        let _ = self.tx.send(Request::Stop);
        let _ = self.handle.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WAL file's length (a checkpoint to count its frames would fold them itself).
    fn wal_len(db: &Path) -> u64 {
        std::fs::metadata(db.with_extension("db-wal"))
            .unwrap()
            .len()
    }

    /// A database in WAL mode with a table `t`, without automatic checkpoints.
    fn wal_db() -> (tempfile::TempDir, std::path::PathBuf, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.db");
        let c = Connection::open(&p).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        c.execute_batch("CREATE TABLE t (b BLOB)").unwrap();
        (dir, p, c)
    }

    fn commit_rows(c: &Connection, n: usize) {
        c.execute_batch("BEGIN").unwrap();
        for _ in 0..n {
            c.execute("INSERT INTO t VALUES (randomblob(2000))", [])
                .unwrap();
        }
        c.execute_batch("COMMIT").unwrap();
    }

    /// The fold asked for after a commit ends before the next transaction begins, so that
    /// transaction's commit rewinds the WAL instead of appending to it.
    #[test]
    fn a_fold_asked_for_after_a_commit_lets_the_next_commit_rewind_the_wal() {
        let (_dir, p, c) = wal_db();
        let (ckpt, mut folds) = Checkpointer::start(&p).unwrap();
        // However slow the fold on a loaded machine: this test waits for it.
        folds.wait = Duration::from_secs(30);
        folds.last = Instant::now() - FOLD_AFTER;
        watch_wal(&c);
        // A few frames: not worth a fold.
        commit_rows(&c, 2);
        folds.committed();
        assert_eq!(
            folds.awaited, None,
            "a fold asked for a WAL of a few frames"
        );
        // Two rows a page: well past FOLD_FRAMES.
        commit_rows(&c, 2 * FOLD_FRAMES as usize + 200);
        let after_first = wal_len(&p);
        assert!(
            after_first >= u64::from(FOLD_FRAMES) * 4096,
            "{after_first} bytes"
        );
        folds.committed();
        assert!(folds.awaited.is_some(), "no fold asked for a long WAL");
        folds.before_begin();
        // Rewound, the commit writes its frames over the first ones: the file keeps its
        // length (without the fold's end awaited, it grew by this commit's frames).
        commit_rows(&c, 2);
        assert_eq!(wal_len(&p), after_first, "rewound");
        ckpt.stop();
    }

    /// A fold asked for as the thread stops (the writer draining after `finish` stopped
    /// it) is not waited for: the wait would be for a fold that never comes.
    #[test]
    fn no_wait_for_a_fold_once_the_thread_has_stopped() {
        let (_dir, p, _c) = wal_db();
        let (ckpt, mut folds) = Checkpointer::start(&p).unwrap();
        folds.wait = Duration::from_secs(60);
        // Asked for while the thread still runs, not yet ended when it stops.
        folds.awaited = Some(u64::MAX - 1);
        ckpt.stop();
        let t = Instant::now();
        folds.before_begin();
        // Liveness, not speed: without the stop's notice this waits the whole minute.
        assert!(t.elapsed() < Duration::from_secs(30));
        folds.last = Instant::now() - FOLD_AFTER;
        folds.min_frames = 0;
        folds.committed();
        folds.before_begin();
        assert!(t.elapsed() < Duration::from_secs(30));
    }
}
