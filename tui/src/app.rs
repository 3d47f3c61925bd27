//! The application state and what each event does to it. Rendering (`ui`) only reads it.
//!
//! The slice axis is shared by every view: a [`Viewport`] (first slice shown, slices per
//! screen column, the cursor). Data for the current view is queried in [`App::prepare`],
//! before a frame is drawn, and cached until the viewport, the size or the recording
//! changes.

use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use crate::data::{BlockedGrid, Column, Notable, ProcessStats, Recording, SliceDetail};
use crate::feed::{FeedEvent, ReplayCommand};
use crate::keys::{action_for, Action};
use crate::marks::Marks;
use crate::query::Query;
use crate::theme::Theme;
use crate::ui;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Overview,
    Timeline,
    Slice,
    Statistics,
    /// The selected rank's matched receives in order (the key view for wildcard bugs).
    History,
}

impl Tab {
    pub const ALL: [Tab; 5] = [
        Tab::Overview,
        Tab::Timeline,
        Tab::Slice,
        Tab::Statistics,
        Tab::History,
    ];
    pub fn title(self) -> &'static str {
        match self {
            Tab::Overview => "Overview",
            Tab::Timeline => "Timeline",
            Tab::Slice => "Slice",
            Tab::Statistics => "Statistics",
            Tab::History => "History",
        }
    }
    fn index(self) -> usize {
        Tab::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }
}

/// Everything that reaches the app.
#[derive(Clone, Debug)]
pub enum Event {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize(u16, u16),
    Feed(FeedEvent),
    /// A History load finished (on its worker thread, [`crate::history_load`]).
    History(crate::history_load::HistoryLoaded),
}

/// The visible part of the slice axis. Screen column `c` shows slices
/// `first + c*per_col .. first + (c+1)*per_col`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Viewport {
    pub first: u64,
    pub per_col: u64,
    pub cursor: u64,
}

impl Viewport {
    /// The screen column of the cursor.
    pub fn cursor_col(&self) -> usize {
        ((self.cursor.saturating_sub(self.first)) / self.per_col) as usize
    }
    /// The slice shown in screen column `c` (its first slice).
    pub fn slice_at(&self, c: usize) -> u64 {
        self.first + c as u64 * self.per_col
    }
}

/// Columns of the statistics table, in the order `s` cycles through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    Primitive,
    Count,
    Min,
    Max,
    Avg,
    Total,
}

impl SortKey {
    pub const ALL: [SortKey; 6] = [
        SortKey::Primitive,
        SortKey::Count,
        SortKey::Min,
        SortKey::Max,
        SortKey::Avg,
        SortKey::Total,
    ];
}

/// What a view's data depends on: the tab, (first slice, slices per column, the cursor
/// or the statistics' rank where they matter), the axis width and the slice count.
type DataKey = (Tab, (u64, u64, u64), usize, u64);

/// The data the current view shows, and what it was queried for.
#[derive(Default)]
pub struct ViewData {
    key: Option<DataKey>,
    pub columns: Vec<Column>,
    pub grid: BlockedGrid,
    pub detail: SliceDetail,
    pub stats: Option<ProcessStats>,
    pub stats_ranks: Vec<u32>,
    /// History: the selected rank's matched receives (`None`: the recording cannot say).
    pub history: Option<crate::data::MatchHistory>,
}

pub struct App {
    pub rec: Recording,
    pub theme: Theme,
    pub tab: Tab,
    back: Vec<Tab>,
    pub help: bool,
    /// The first line of the help shown (it scrolls when the terminal is short).
    pub help_scroll: u16,
    pub view: Viewport,
    /// Width of the slice axis on screen, from the last layout.
    pub cols: usize,
    pub size: Rect,
    /// Timeline: the selected rank (the crosshair's row) and whether identical ranks merge.
    pub rank: u32,
    pub collapse: bool,
    pub detail_scroll: u16,
    /// Statistics: None = all ranks.
    pub stats_rank: Option<u32>,
    pub sort: SortKey,
    pub descending: bool,
    pub stats_row: usize,
    /// The search being typed, if any.
    pub search_input: Option<String>,
    last_query: Option<Query>,
    /// A message for the status line: (text, is an error).
    pub message: Option<(String, bool)>,
    /// The feed's mode, shown in the status line.
    pub mode: String,
    /// A live replay is under the UI: the replay keys work and `n` steps.
    pub live: bool,
    /// Replay commands the keys asked for, forwarded to the feed by the event loop
    /// ([`crate::feed::run_commands`]).
    pub commands: Vec<ReplayCommand>,
    /// A report to read: (title, text); any key closes it.
    pub popup: Option<(String, String)>,
    /// History: the selected row (a matched receive).
    pub history_row: usize,
    /// Show only these ranks (`/ranks=0,2-3`; `None`: all): the Timeline's rows and the
    /// History's rank cycle.
    pub rank_filter: Option<std::collections::BTreeSet<u32>>,
    /// What other commands found (`--diff`).
    pub marks: Marks,
    /// A debugger `x` asked for, started by the event loop (it owns the terminal).
    pub debugger: Option<crate::debugger::DebuggerRequest>,
    pub quit: bool,
    pub data: ViewData,
    /// The slice count the viewport was last fitted to (to follow a growing recording).
    seen_slices: u64,
    /// History: the reads under way off the UI thread.
    pub(crate) loads: crate::history_load::HistoryLoads,
}

impl App {
    pub fn new(rec: Recording, theme: Theme) -> App {
        // A damaged row was refused when the file was opened; unreadable now is shown as
        // nothing rather than failing the UI.
        let explored = rec.explored().ok().flatten();
        let loader = crate::history_load::file_loader(rec.path().to_path_buf());
        App {
            rec,
            theme,
            tab: Tab::Overview,
            back: Vec::new(),
            help: false,
            help_scroll: 0,
            view: Viewport {
                first: 1,
                per_col: u64::MAX / 4,
                cursor: 1,
            },
            cols: 0,
            size: Rect::default(),
            rank: 0,
            collapse: false,
            detail_scroll: 0,
            stats_rank: None,
            sort: SortKey::Primitive,
            descending: false,
            stats_row: 0,
            search_input: None,
            last_query: None,
            message: None,
            mode: "browse".into(),
            live: false,
            commands: Vec::new(),
            popup: None,
            debugger: None,
            history_row: 0,
            rank_filter: None,
            marks: Marks {
                diff: None,
                explored,
            },
            quit: false,
            data: ViewData::default(),
            seen_slices: 0,
            loads: crate::history_load::HistoryLoads::new(loader),
        }
    }

    fn last_slice(&self) -> u64 {
        self.rec.last_slice().max(1)
    }

    /// The coarsest zoom: the whole recording fits on screen.
    fn max_per_col(&self) -> u64 {
        let cols = self.cols.max(1) as u64;
        self.last_slice().div_ceil(cols).next_power_of_two()
    }

    /// Keep the viewport inside the recording and the cursor inside the viewport. Columns
    /// are aligned to multiples of `per_col` (column k of the whole recording always holds
    /// the same slices at a zoom level), so panning never reshuffles what a column shows
    /// and the recorder's block summaries can answer coarse zooms.
    fn clamp_view(&mut self) {
        let last = self.last_slice();
        let cols = self.cols.max(1) as u64;
        let max_per_col = last.div_ceil(cols).next_power_of_two();
        let v = &mut self.view;
        v.per_col = v.per_col.clamp(1, max_per_col);
        v.cursor = v.cursor.clamp(1, last);
        let cursor_block = (v.cursor - 1) / v.per_col;
        let last_block = (last - 1) / v.per_col;
        let mut first_block = (v.first.max(1) - 1) / v.per_col;
        if cursor_block < first_block {
            first_block = cursor_block;
        } else if cursor_block >= first_block + cols {
            first_block = cursor_block + 1 - cols;
        }
        // Do not leave empty columns at the end when the recording could fill them.
        first_block = first_block.min((last_block + 1).saturating_sub(cols));
        v.first = 1 + first_block * v.per_col;
    }

    /// Lay out for `area`, then query what the current view needs if it changed.
    pub fn prepare(&mut self, area: Rect) {
        self.size = area;
        self.cols = ui::plot_width(self, area) as usize;
        self.clamp_view();
        self.seen_slices = self.rec.last_slice();
        // What the data depends on: the axis for the charts, the cursor for the slice.
        let extra = match self.tab {
            Tab::Slice => self.view.cursor,
            Tab::Statistics => self.stats_rank.map_or(0, |r| r as u64 + 1),
            Tab::History => self.rank as u64,
            _ => 0,
        };
        let key = (
            self.tab,
            (self.view.first, self.view.per_col, extra),
            self.cols,
            self.rec.last_slice(),
        );
        if self.data.key == Some(key) {
            return;
        }
        let result = match self.tab {
            Tab::Overview => self
                .rec
                .columns(self.view.first, self.view.per_col, self.cols)
                .map(|c| self.data.columns = c),
            Tab::Timeline => self
                .rec
                .blocked_grid(self.view.first, self.view.per_col, self.cols)
                .map(|g| self.data.grid = g),
            Tab::Slice => self
                .rec
                .slice_detail(self.view.cursor)
                .map(|d| self.data.detail = d),
            Tab::History => {
                self.request_history();
                Ok(())
            }
            Tab::Statistics => self.rec.mmds_ranks().and_then(|ranks| {
                self.data.stats_ranks = ranks;
                self.rec
                    .process_stats(self.stats_rank)
                    .map(|s| self.data.stats = s)
            }),
        };
        match result {
            Ok(()) => self.data.key = Some(key),
            Err(e) => self.message = Some((format!("reading the recording: {e}"), true)),
        }
    }

    pub(crate) fn invalidate(&mut self) {
        self.data.key = None;
    }

    pub fn handle(&mut self, event: Event) {
        match event {
            Event::Key(k) => self.key(k),
            Event::Mouse(m) => self.mouse(m),
            Event::Resize(w, h) => {
                self.size = Rect::new(0, 0, w, h);
                self.invalidate();
            }
            Event::Feed(f) => self.feed(f),
            Event::History(l) => self.history_loaded(l),
        }
    }

    fn feed(&mut self, f: FeedEvent) {
        match f {
            FeedEvent::Grew { slices } => {
                // Like `tail -f`: a view showing everything keeps showing everything, a
                // cursor on the last slice stays on the last slice.
                let old = self.seen_slices.max(1);
                let cols = self.cols.max(1) as u64;
                if self.view.per_col >= old.div_ceil(cols).next_power_of_two() {
                    self.view.per_col = u64::MAX / 4;
                }
                if self.view.cursor >= old {
                    self.view.cursor = slices;
                }
                self.invalidate();
            }
            FeedEvent::Finished { outcome } => {
                self.invalidate();
                self.message = Some((format!("the job ended: {outcome}"), false));
            }
            FeedEvent::At { slice } => {
                self.view.cursor = slice;
                self.invalidate();
            }
            FeedEvent::Stopped { slice, why } => {
                self.view.cursor = slice;
                self.message = Some((format!("stopped at slice {slice}: {why}"), true));
                self.invalidate();
            }
            FeedEvent::Popup { title, text } => self.popup = Some((title, text)),
            FeedEvent::Message(m) => self.message = Some((m, false)),
            FeedEvent::Debugger(d) => self.debugger = Some(d),
        }
    }

    fn key(&mut self, k: KeyEvent) {
        if k.kind == ratatui::crossterm::event::KeyEventKind::Release {
            return;
        }
        if let Some(buf) = &mut self.search_input {
            match k.code {
                KeyCode::Enter => {
                    let q = std::mem::take(buf);
                    self.search_input = None;
                    self.start_search(&q);
                }
                KeyCode::Esc => self.search_input = None,
                KeyCode::Backspace => {
                    buf.pop();
                }
                KeyCode::Char(c) => buf.push(c),
                _ => {}
            }
            return;
        }
        if self.help && self.popup.is_none() {
            // The help scrolls (at 80x24 it did not fit and stopped after `p`: issue 12,
            // item 7): j/k, arrows, PageUp/PageDown, space, g; any other key closes it.
            // Wrapped lines can outnumber the keys; the drawing clamps to the last page.
            let max = 4 * crate::keys::KEYS.len() as u16;
            let scroll = match k.code {
                KeyCode::Char('j') | KeyCode::Down => Some(self.help_scroll.saturating_add(1)),
                KeyCode::Char('k') | KeyCode::Up => Some(self.help_scroll.saturating_sub(1)),
                KeyCode::PageDown | KeyCode::Char(' ') => Some(self.help_scroll.saturating_add(10)),
                KeyCode::PageUp => Some(self.help_scroll.saturating_sub(10)),
                KeyCode::Char('g') | KeyCode::Home => Some(0),
                _ => None,
            };
            if let Some(s) = scroll {
                self.help_scroll = s.min(max);
                return;
            }
        }
        if self.help || self.popup.is_some() {
            // Any key closes the help or a popup; q still quits.
            self.help = false;
            self.help_scroll = 0;
            self.popup = None;
            if action_for(k, self.live) == Some(Action::Quit) {
                self.quit = true;
            }
            return;
        }
        if let Some(a) = action_for(k, self.live) {
            self.message = None;
            self.act(a);
        }
    }

    pub(crate) fn set_tab(&mut self, t: Tab) {
        if t != self.tab {
            self.back.push(self.tab);
            self.tab = t;
            self.invalidate();
        }
    }

    fn move_cursor(&mut self, delta: i64) {
        let c = self.view.cursor as i64 + delta;
        self.view.cursor = c.clamp(1, self.last_slice() as i64) as u64;
        self.clamp_view();
    }

    fn jump(&mut self, to: Result<Option<u64>, crate::data::DataError>, what: &str) {
        match to {
            Ok(Some(s)) => {
                self.view.cursor = s;
                self.clamp_view();
            }
            Ok(None) => self.message = Some((format!("no {what}"), false)),
            Err(e) => self.message = Some((format!("reading the recording: {e}"), true)),
        }
    }

    pub fn act(&mut self, a: Action) {
        let step = if self.tab == Tab::Slice {
            1
        } else {
            self.view.per_col as i64
        };
        let half = (self.view.per_col * (self.cols.max(2) as u64 / 2)) as i64;
        match a {
            Action::Quit => self.quit = true,
            Action::Help => self.help = true,
            Action::Back => {
                if let Some(t) = self.back.pop() {
                    self.tab = t;
                    self.invalidate();
                }
            }
            Action::DrillDown if self.tab == Tab::History => self.history_drill_down(),
            Action::DrillDown => self.set_tab(Tab::Slice),
            Action::NextTab => self.set_tab(Tab::ALL[(self.tab.index() + 1) % Tab::ALL.len()]),
            Action::PrevTab => {
                let n = Tab::ALL.len();
                self.set_tab(Tab::ALL[(self.tab.index() + n - 1) % n])
            }
            Action::Tab(t) => self.set_tab(t),
            Action::Left | Action::Right if self.tab == Tab::History => {
                self.history_rank(a == Action::Right)
            }
            Action::Up
            | Action::Down
            | Action::First
            | Action::Last
            | Action::HalfPageBack
            | Action::HalfPageForward
                if self.tab == Tab::History =>
            {
                self.history_move(a)
            }
            Action::Mark => self.jump_to_mark(),
            Action::Left | Action::Right if self.tab == Tab::Statistics => {
                let ranks = &self.data.stats_ranks;
                // Cycle: all ranks, then each rank with statistics.
                let pos = self
                    .stats_rank
                    .and_then(|r| ranks.iter().position(|x| *x == r).map(|p| p + 1))
                    .unwrap_or(0);
                let n = ranks.len() + 1;
                let next = if a == Action::Right {
                    (pos + 1) % n
                } else {
                    (pos + n - 1) % n
                };
                self.stats_rank = if next == 0 {
                    None
                } else {
                    Some(ranks[next - 1])
                };
                self.stats_row = 0;
                self.invalidate();
            }
            Action::Left => self.move_cursor(-step),
            Action::Right => self.move_cursor(step),
            Action::Up | Action::Down => {
                let down = a == Action::Down;
                match self.tab {
                    Tab::Timeline => self.rank = self.next_shown_rank(down),
                    Tab::Slice => {
                        self.detail_scroll = if down {
                            self.detail_scroll.saturating_add(1)
                        } else {
                            self.detail_scroll.saturating_sub(1)
                        };
                    }
                    Tab::Statistics => {
                        let n = self.data.stats.as_ref().map_or(0, |s| s.primitives.len());
                        self.stats_row = if down {
                            (self.stats_row + 1).min(n.saturating_sub(1))
                        } else {
                            self.stats_row.saturating_sub(1)
                        };
                    }
                    Tab::Overview | Tab::History => {}
                }
            }
            Action::HalfPageBack => self.move_cursor(-half.max(1)),
            Action::HalfPageForward => self.move_cursor(half.max(1)),
            Action::First => self.move_cursor(i64::MIN / 2),
            Action::Last => self.move_cursor(i64::MAX / 2),
            Action::ZoomIn | Action::ZoomOut => {
                let c = self.view.cursor_col() as u64;
                let per = if a == Action::ZoomIn {
                    (self.view.per_col / 2).max(1)
                } else {
                    (self.view.per_col * 2).min(self.max_per_col())
                };
                self.view.per_col = per;
                // Keep the cursor on the same screen column (as far as alignment allows).
                let block = (self.view.cursor - 1) / per;
                self.view.first = 1 + block.saturating_sub(c) * per;
                self.clamp_view();
            }
            Action::Search => self.search_input = Some(String::new()),
            Action::SearchNext | Action::SearchPrev => match self.last_query.clone() {
                Some(q) => self.run_query(&q, a == Action::SearchNext),
                None => self.message = Some(("no search yet: press /".into(), false)),
            },
            Action::NextCollective | Action::PrevCollective => {
                let fwd = a == Action::NextCollective;
                let r = self.rec.notable(Notable::Collective, self.view.cursor, fwd);
                self.jump(r, "further collective");
            }
            Action::NextBlockedChange | Action::PrevBlockedChange => {
                let fwd = a == Action::NextBlockedChange;
                let r = self
                    .rec
                    .notable(Notable::BlockedChange, self.view.cursor, fwd);
                self.jump(r, "further change in blocked ranks");
            }
            Action::GettsPeak => {
                let last = self.view.slice_at(self.cols).saturating_sub(1);
                let r = self.rec.getts_peak(self.view.first, last);
                self.jump(r, "GETTS in view");
            }
            Action::Trouble => {
                let r = self.rec.trouble_slice();
                let found = matches!(r, Ok(Some(_)));
                self.jump(r, "trouble: the job succeeded");
                if found {
                    // Say why the cursor moved there (issue 12, item 6).
                    let why = match self.rec.job().outcome.as_deref() {
                        Some("deadlock") => format!(
                            "deadlock formed in slice {} (blocked set fixed); Enter",
                            self.view.cursor
                        ),
                        o => format!(
                            "slice {}: the job ended here ({}); Enter",
                            self.view.cursor,
                            o.unwrap_or("cut short")
                        ),
                    };
                    self.message = Some((why, false));
                }
            }
            Action::ToggleCollapse => self.collapse = !self.collapse,
            Action::SortNext => {
                let i = SortKey::ALL
                    .iter()
                    .position(|k| *k == self.sort)
                    .unwrap_or(0);
                self.sort = SortKey::ALL[(i + 1) % SortKey::ALL.len()];
                // Names read best A-Z, numbers biggest first.
                self.descending = self.sort != SortKey::Primitive;
            }
            Action::SortReverse => self.descending = !self.descending,
            Action::RunPause
            | Action::Step
            | Action::BreakHere
            | Action::BreakOnCall
            | Action::Gdb
            | Action::ListBreaks
            | Action::DeleteBreak
            | Action::ReverseStep
            | Action::GotoCursor
                if !self.live =>
            {
                self.message = Some((
                    "replay keys work in a live replay: strobe replay FILE --tui".into(),
                    false,
                ));
            }
            Action::RunPause => self.commands.push(ReplayCommand::RunPause),
            Action::Step => self.commands.push(ReplayCommand::Step),
            Action::BreakHere => self
                .commands
                .push(ReplayCommand::BreakAtSlice(self.view.cursor)),
            Action::BreakOnCall => self.break_on_call(),
            Action::Gdb => self.commands.push(ReplayCommand::Gdb { rank: self.rank }),
            Action::ListBreaks => self.commands.push(ReplayCommand::ListBreaks),
            Action::DeleteBreak => self.commands.push(ReplayCommand::DeleteBreak {
                at: self.view.cursor,
            }),
            Action::ReverseStep => self.commands.push(ReplayCommand::ReverseStep),
            Action::GotoCursor => self
                .commands
                .push(ReplayCommand::Goto(self.view.cursor.max(1))),
        }
    }

    /// A breakpoint on the call the selected rank is blocked in at the cursor's slice (the
    /// cell under the Timeline's crosshair), read from the recording.
    fn break_on_call(&mut self) {
        let (rank, slice) = (self.rank, self.view.cursor);
        match self.rec.slice_detail(slice) {
            Ok(d) => match d.blocked.into_iter().find(|b| b.rank == rank) {
                Some(b) => self
                    .commands
                    .push(ReplayCommand::BreakOnCall { rank, call: b.call }),
                None => {
                    self.message = Some((
                        format!(
                            "rank {rank} is in no MPI call at slice {slice}: put the cursor on a slice where it is (Timeline)"
                        ),
                        true,
                    ))
                }
            },
            Err(e) => self.message = Some((format!("reading the recording: {e}"), true)),
        }
    }

    fn start_search(&mut self, text: &str) {
        let t = text.trim();
        if t.is_empty() {
            // An empty search repeats the last one forward (`n` steps a live replay).
            if let Some(q) = self.last_query.clone() {
                self.run_query(&q, true);
            }
            return;
        }
        match crate::query::parse(t) {
            Ok(Query::Filter(set)) => self.set_rank_filter(set),
            Ok(q) => {
                self.last_query = Some(q.clone());
                self.run_query(&q, true);
            }
            Err(e) => self.message = Some((e, true)),
        }
    }

    fn run_query(&mut self, q: &Query, forward: bool) {
        match q {
            Query::Slice(s) => {
                if *s == 0 || *s > self.last_slice() {
                    self.message = Some((
                        format!("no slice {s}: slices are 1 to {}", self.last_slice()),
                        true,
                    ));
                } else {
                    self.view.cursor = *s;
                    self.clamp_view();
                }
            }
            Query::Rank(r) => {
                if *r >= self.rec.job().ranks {
                    self.message = Some((
                        format!("no rank {r}: the job has {} ranks", self.rec.job().ranks),
                        true,
                    ));
                } else {
                    self.rank = *r;
                    self.collapse = false;
                    // In History the rank's history is what was asked for.
                    if self.tab != Tab::History {
                        self.set_tab(Tab::Timeline);
                    }
                }
            }
            Query::Filter(set) => self.set_rank_filter(set.clone()),
            Query::RankCall { rank, call } => {
                if *rank >= self.rec.job().ranks {
                    self.message = Some((
                        format!("no rank {rank}: the job has {} ranks", self.rec.job().ranks),
                        true,
                    ));
                    return;
                }
                self.rank = *rank;
                let r = self.rec.search_rank_call(
                    *rank,
                    &format!("%{call}%"),
                    self.view.cursor,
                    forward,
                );
                self.jump(
                    r,
                    &format!(
                        "{} slice where rank {rank} is in {call}",
                        if forward { "later" } else { "earlier" }
                    ),
                );
            }
            Query::Call(c) => {
                let pattern = format!("%{c}%");
                let r = self.rec.search_call(&pattern, self.view.cursor, forward);
                self.jump(
                    r,
                    &format!(
                        "{} slice with {c}",
                        if forward { "later" } else { "earlier" }
                    ),
                );
            }
        }
    }

    fn mouse(&mut self, m: MouseEvent) {
        match m.kind {
            MouseEventKind::ScrollDown => self.act(Action::Right),
            MouseEventKind::ScrollUp => self.act(Action::Left),
            MouseEventKind::Down(MouseButton::Left) => {
                if self.help || self.popup.is_some() {
                    self.help = false;
                    self.popup = None;
                    return;
                }
                if let Some(t) = ui::tab_at(self, m.column, m.row) {
                    self.set_tab(t);
                } else if let Some(c) = ui::plot_column_at(self, m.column) {
                    self.view.cursor = self.view.slice_at(c).min(self.last_slice());
                    self.clamp_view();
                    if self.tab == Tab::Timeline {
                        if let Some(r) = ui::timeline::rank_at(self, m.row) {
                            self.rank = r;
                        }
                    }
                }
            }
            _ => {}
        }
    }
}
