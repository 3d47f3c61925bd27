//! The History tab's actions and the rank filter (issue 17, item 9): the selected rank's
//! matched receives in match order (`Recording::match_history`), a row selected with j/k,
//! the rank changed with h/l (through the ranks the filter shows), Enter opens the row's
//! slice. Also `m`: the first difference `--diff` found.

use crate::app::{App, Tab};
use crate::keys::Action;

/// At most this many matched receives are read for one rank (the view says when more
/// exist): about a second of reading (off the UI thread) on the biggest recordings, and
/// more rows than anyone scrolls through.
pub const LIMIT: usize = 200_000;

impl App {
    /// Whether the rank filter shows `rank`.
    pub fn shows_rank(&self, rank: u32) -> bool {
        self.rank_filter.as_ref().is_none_or(|f| f.contains(&rank))
    }

    /// The next (or previous) rank the filter shows after the selected one; the selected
    /// one when there is none.
    pub(crate) fn next_shown_rank(&self, down: bool) -> u32 {
        let n = self.rec.job().ranks;
        let mut candidates: Box<dyn Iterator<Item = u32>> = if down {
            Box::new(self.rank.saturating_add(1)..n)
        } else {
            Box::new((0..self.rank).rev())
        };
        candidates
            .find(|r| self.shows_rank(*r))
            .unwrap_or(self.rank)
    }

    /// `/ranks=SET`: show only those ranks (the selection moves into the set).
    pub(crate) fn set_rank_filter(&mut self, set: Option<std::collections::BTreeSet<u32>>) {
        let n = self.rec.job().ranks;
        match set {
            None => {
                self.rank_filter = None;
                self.message = Some(("showing every rank".into(), false));
            }
            Some(s) => {
                let shown: std::collections::BTreeSet<u32> =
                    s.into_iter().filter(|r| *r < n).collect();
                let Some(first) = shown.first().copied() else {
                    self.message = Some((
                        format!(
                            "no such ranks: the job has {n} (0..={})",
                            n.saturating_sub(1)
                        ),
                        true,
                    ));
                    return;
                };
                if !shown.contains(&self.rank) {
                    self.rank = first;
                }
                self.message = Some((
                    format!(
                        "showing {} of {n} ranks (/ranks=all shows every rank)",
                        shown.len()
                    ),
                    false,
                ));
                self.rank_filter = Some(shown);
                // The collapsed rows would hide the gaps.
                self.collapse = false;
            }
        }
        self.invalidate();
    }

    /// h/l in History: the previous / next rank the filter shows (wrapping).
    pub(crate) fn history_rank(&mut self, next: bool) {
        let n = self.rec.job().ranks.max(1);
        let mut r = self.rank;
        for _ in 0..n {
            r = if next { (r + 1) % n } else { (r + n - 1) % n };
            if self.shows_rank(r) {
                break;
            }
        }
        self.rank = r;
        self.history_row = 0;
        self.invalidate();
    }

    /// j/k, g/G, half pages in History: move the selected row.
    pub(crate) fn history_move(&mut self, a: Action) {
        let len = self.data.history.as_ref().map_or(0, |h| h.entries.len());
        let page = (self.size.height as usize / 2).max(1);
        let row = self.history_row;
        self.history_row = match a {
            Action::Down => row + 1,
            Action::Up => row.saturating_sub(1),
            Action::First => 0,
            Action::Last => len,
            Action::HalfPageForward => row + page,
            Action::HalfPageBack => row.saturating_sub(page),
            _ => row,
        }
        .min(len.saturating_sub(1));
    }

    /// Enter in History: the selected receive's slice, in the Slice tab.
    pub(crate) fn history_drill_down(&mut self) {
        let slice = self
            .data
            .history
            .as_ref()
            .and_then(|h| h.entries.get(self.history_row))
            .map(|e| e.slice);
        match slice {
            Some(s) => {
                self.view.cursor = s;
                self.set_tab(Tab::Slice);
            }
            None => self.message = Some(("no receive selected".into(), false)),
        }
    }

    /// `m`: the first difference `--diff` found: its slice, and the report in a popup.
    pub(crate) fn jump_to_mark(&mut self) {
        let Some(d) = self.marks.diff.clone() else {
            if let Some(s) = self.marks.explored.as_ref().and_then(|e| e.slice) {
                self.view.cursor = s.clamp(1, self.rec.last_slice().max(1));
                self.message = self.marks.greeting().map(|g| (g, false));
                self.invalidate();
                return;
            }
            self.message = Some((
                "no marks: strobe tui A.db --diff B.db marks the first difference".into(),
                false,
            ));
            return;
        };
        if d.text.is_empty() {
            self.message = Some((self.marks.greeting().unwrap_or_default(), false));
            return;
        }
        if let Some(s) = d.slice {
            self.view.cursor = s.clamp(1, self.rec.last_slice().max(1));
        }
        self.popup = Some((
            format!("First difference from {}", d.other.display()),
            d.text,
        ));
        self.invalidate();
    }
}
