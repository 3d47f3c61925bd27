//! The History tab reads off the UI thread (issue 17, item 9): a rank's match history can
//! take seconds on a message-heavy recording, and the UI must keep drawing meanwhile. The
//! tab opens at once with "loading history of rank N…"; a worker thread reads the history
//! through its own connection and sends it back as an [`Event::History`], tagged with the
//! load's generation so that the result of a load the user has moved away from (another
//! rank, a grown recording) is dropped instead of shown.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use crate::data::{Check, MatchHistory, Recording};

use crate::app::{App, Event};

/// What a history load returns: the history (`None`: the recording cannot say) or the
/// error's text.
pub type HistoryResult = Result<Option<MatchHistory>, String>;

/// Reads `rank`'s history; called on a worker thread.
pub type HistoryLoader = Arc<dyn Fn(u32) -> HistoryResult + Send + Sync>;

/// The loader of a recording file: a connection of its own per load (a `Recording` is
/// not shareable across threads), with only the header and schema checks, since the UI's
/// connection already checked the file when it opened it.
pub fn file_loader(path: PathBuf) -> HistoryLoader {
    Arc::new(move |rank| {
        Recording::open_with(&path, Check::UpTo(0))
            .and_then(|rec| rec.match_history(rank, crate::history::LIMIT))
            .map_err(|e| e.to_string())
    })
}

/// A history load's outcome, as it reaches the app.
#[derive(Clone, Debug)]
pub struct HistoryLoaded {
    pub generation: u64,
    pub rank: u32,
    pub result: HistoryResult,
}

/// The History tab's loading state.
pub struct HistoryLoads {
    loader: HistoryLoader,
    tx: Sender<HistoryLoaded>,
    rx: Receiver<HistoryLoaded>,
    generation: u64,
    /// What `data.history` holds or the load under way is for: (rank, slice count).
    target: Option<(u32, u64)>,
    /// The rank being loaded, while a load is under way.
    loading: Option<u32>,
}

impl HistoryLoads {
    pub fn new(loader: HistoryLoader) -> HistoryLoads {
        let (tx, rx) = channel();
        HistoryLoads {
            loader,
            tx,
            rx,
            generation: 0,
            target: None,
            loading: None,
        }
    }
}

impl App {
    /// Replace how histories are read (tests: a loader that waits to be released).
    pub fn set_history_loader(&mut self, loader: HistoryLoader) {
        self.loads = HistoryLoads::new(loader);
        self.invalidate();
    }

    /// The rank whose history is being read, while a read is under way.
    pub fn history_loading(&self) -> Option<u32> {
        self.loads.loading
    }

    /// What the History tab waits for: the rank being read when no rows of it are shown.
    pub fn history_placeholder(&self) -> Option<u32> {
        let shown = self.data.history.as_ref().map(|h| h.rank);
        self.loads.loading.filter(|r| shown != Some(*r))
    }

    /// Start reading the selected rank's history unless it is shown or being read already.
    pub(crate) fn request_history(&mut self) {
        let target = (self.rank, self.rec.last_slice());
        if self.loads.target == Some(target) {
            return;
        }
        if self.loads.loading == Some(self.rank) {
            // The recording grew while this rank is being read: one read at a time per
            // rank (a live replay grows every slice), the next starts when this one ends.
            return;
        }
        self.loads.generation += 1;
        self.loads.target = Some(target);
        self.loads.loading = Some(self.rank);
        if self
            .data
            .history
            .as_ref()
            .is_some_and(|h| h.rank != self.rank)
        {
            // Another rank's rows must not stand for this one's; the same rank's (a
            // recording that grew) stay on screen until the new read replaces them.
            self.data.history = None;
        }
        let (generation, rank) = (self.loads.generation, self.rank);
        let (loader, tx) = (self.loads.loader.clone(), self.loads.tx.clone());
        // Not joined: a stale load runs to its end and its result is dropped (the send
        // fails harmlessly once the app is gone).
        std::thread::spawn(move || {
            let result = loader(rank);
            let _ = tx.send(HistoryLoaded {
                generation,
                rank,
                result,
            });
        });
    }

    /// A finished load's event, if one is waiting (the event loop polls it every turn).
    pub fn history_event(&mut self) -> Option<Event> {
        self.loads.rx.try_recv().ok().map(Event::History)
    }

    /// Wait for the load under way, if any, and take its result in; whether there was one.
    /// For tests and benchmarks, which have no event loop.
    pub fn wait_for_history(&mut self) -> bool {
        while self.loads.loading.is_some() {
            match self.loads.rx.recv() {
                Ok(l) => self.history_loaded(l),
                Err(_) => return false,
            }
        }
        true
    }

    /// A load finished: show it if it is the one the tab still wants.
    pub(crate) fn history_loaded(&mut self, l: HistoryLoaded) {
        if l.generation != self.loads.generation {
            return;
        }
        self.loads.loading = None;
        if self.loads.target != Some((self.rank, self.rec.last_slice())) {
            // The recording grew during the read: read again at the next frame.
            self.invalidate();
        }
        match l.result {
            Ok(h) => self.data.history = h,
            Err(e) => {
                // Read again when the tab is next drawn after a key.
                self.loads.target = None;
                self.message = Some((format!("reading the history of rank {}: {e}", l.rank), true));
            }
        }
    }
}
