//! Keys mapped to actions. [`KEYS`] is the one table: the mapping, the help screen and
//! `docs/tui.md` all come from it (a test checks the doc lists every row).

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::app::Tab;

/// Everything a key can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Quit,
    Help,
    Back,
    DrillDown,
    NextTab,
    PrevTab,
    Tab(Tab),
    Left,
    Right,
    Up,
    Down,
    HalfPageBack,
    HalfPageForward,
    First,
    Last,
    ZoomIn,
    ZoomOut,
    Search,
    SearchNext,
    SearchPrev,
    NextCollective,
    PrevCollective,
    NextBlockedChange,
    PrevBlockedChange,
    GettsPeak,
    Trouble,
    ToggleCollapse,
    SortNext,
    SortReverse,
    /// Live replay: run / pause.
    RunPause,
    /// Live replay: run one slice.
    Step,
    /// Live replay: hold before the cursor's slice.
    BreakHere,
    /// Live replay: hold after the slice that handles the selected rank's call (the call it
    /// is blocked in at the cursor).
    BreakOnCall,
    /// Live replay, held: start gdb attached to the selected rank (`crate::debugger`).
    Gdb,
    /// Live replay: list the breakpoints.
    ListBreaks,
    /// Live replay: delete the breakpoint at the cursor's slice, else the last one set.
    DeleteBreak,
    /// Live replay: time travel one slice back (the job is re-executed up to it).
    ReverseStep,
    /// Live replay: time travel to the cursor's slice, earlier or later.
    GotoCursor,
    /// `--diff`: jump to the first difference and show it.
    Mark,
}

/// (keys as shown, what they do, the action). Order is the help screen's order.
pub const KEYS: &[(&str, &str, Action)] = &[
    ("q  Ctrl-c", "quit", Action::Quit),
    (
        "?",
        "this help (j/k scroll it; any other key closes it)",
        Action::Help,
    ),
    ("Tab  Shift-Tab", "next / previous tab", Action::NextTab),
    (
        "1 2 3 4 5",
        "Overview, Timeline, Slice, Statistics, History",
        Action::Tab(Tab::Overview),
    ),
    (
        "Enter",
        "drill down: the slice under the cursor (History: the selected receive's)",
        Action::DrillDown,
    ),
    (
        "Esc",
        "back to the previous tab (or cancel search)",
        Action::Back,
    ),
    (
        "h l  Left Right",
        "cursor one column (one slice in Slice); Statistics, History: rank",
        Action::Left,
    ),
    (
        "j k  Down Up",
        "Timeline: select rank; Slice: scroll; Statistics, History: row",
        Action::Down,
    ),
    (
        "Ctrl-u Ctrl-d  PgUp PgDn",
        "half a screen back / forward",
        Action::HalfPageForward,
    ),
    ("g G  Home End", "first / last slice", Action::First),
    (
        "+ -",
        "zoom in / out on the slice axis (around the cursor)",
        Action::ZoomIn,
    ),
    (
        "/",
        "search: a slice number, rank N, a call (Barrier), both (rank=2 call=Recv); ranks=0,2-3 shows only those ranks (ranks=all)",
        Action::Search,
    ),
    (
        "n N",
        "next / previous match (live: n steps, / Enter repeats)",
        Action::SearchNext,
    ),
    (
        "] [",
        "next / previous slice that schedules a collective",
        Action::NextCollective,
    ),
    (
        "} {",
        "next / previous change in the number of blocked ranks",
        Action::NextBlockedChange,
    ),
    (
        "p",
        "the highest GETTS in the visible window",
        Action::GettsPeak,
    ),
    (
        "e",
        "where the job went wrong (deadlock cycle closed, crash)",
        Action::Trouble,
    ),
    (
        "c",
        "Timeline: collapse ranks that behave identically",
        Action::ToggleCollapse,
    ),
    (
        "s S",
        "Statistics: sort by the next column / reverse",
        Action::SortNext,
    ),
    (
        "space  n  .",
        "live replay: run / pause; step one slice",
        Action::Step,
    ),
    (
        "b  B",
        "live: break at the cursor's slice / on the rank's call",
        Action::BreakHere,
    ),
    (
        "L  D",
        "live: list the breakpoints / delete the one at the cursor's slice (else the last)",
        Action::ListBreaks,
    ),
    (
        "<  t",
        "live: back one slice / go to the cursor's slice, earlier or later (time travel)",
        Action::GotoCursor,
    ),
    (
        "x",
        "live, held: gdb on the selected rank (new tmux window, else in the foreground)",
        Action::Gdb,
    ),
    (
        "m",
        "--diff: jump to the first difference from the other recording, and show it",
        Action::Mark,
    ),
    (
        "mouse",
        "click a tab, a chart column or a rank; wheel pans",
        Action::Right,
    ),
];

/// The action for a key press. `live`: a replay is running under the UI, where `n` steps
/// one slice (as issue 6 asks) instead of repeating the search; `N` still goes to the
/// previous match and `/` then Enter (an empty search) repeats the last search forward.
pub fn action_for(key: KeyEvent, live: bool) -> Option<Action> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    Some(match key.code {
        KeyCode::Char('c') if ctrl => Action::Quit,
        KeyCode::Char('d') if ctrl => Action::HalfPageForward,
        KeyCode::Char('u') if ctrl => Action::HalfPageBack,
        _ if ctrl => return None,
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('?') => Action::Help,
        KeyCode::Tab => Action::NextTab,
        KeyCode::BackTab => Action::PrevTab,
        KeyCode::Char('1') => Action::Tab(Tab::Overview),
        KeyCode::Char('2') => Action::Tab(Tab::Timeline),
        KeyCode::Char('3') => Action::Tab(Tab::Slice),
        KeyCode::Char('4') => Action::Tab(Tab::Statistics),
        KeyCode::Char('5') => Action::Tab(Tab::History),
        KeyCode::Enter => Action::DrillDown,
        KeyCode::Esc => Action::Back,
        KeyCode::Char('h') | KeyCode::Left => Action::Left,
        KeyCode::Char('l') | KeyCode::Right => Action::Right,
        KeyCode::Char('k') | KeyCode::Up => Action::Up,
        KeyCode::Char('j') | KeyCode::Down => Action::Down,
        KeyCode::PageUp => Action::HalfPageBack,
        KeyCode::PageDown => Action::HalfPageForward,
        KeyCode::Char('g') | KeyCode::Home => Action::First,
        KeyCode::Char('G') | KeyCode::End => Action::Last,
        KeyCode::Char('+') | KeyCode::Char('=') => Action::ZoomIn,
        KeyCode::Char('-') | KeyCode::Char('_') => Action::ZoomOut,
        KeyCode::Char('/') => Action::Search,
        KeyCode::Char('n') if live => Action::Step,
        KeyCode::Char('n') => Action::SearchNext,
        KeyCode::Char('N') => Action::SearchPrev,
        KeyCode::Char(']') => Action::NextCollective,
        KeyCode::Char('[') => Action::PrevCollective,
        KeyCode::Char('}') => Action::NextBlockedChange,
        KeyCode::Char('{') => Action::PrevBlockedChange,
        KeyCode::Char('p') => Action::GettsPeak,
        KeyCode::Char('e') => Action::Trouble,
        KeyCode::Char('c') => Action::ToggleCollapse,
        KeyCode::Char('s') => Action::SortNext,
        KeyCode::Char('S') => Action::SortReverse,
        KeyCode::Char(' ') => Action::RunPause,
        KeyCode::Char('.') => Action::Step,
        KeyCode::Char('b') => Action::BreakHere,
        KeyCode::Char('B') => Action::BreakOnCall,
        KeyCode::Char('x') => Action::Gdb,
        KeyCode::Char('L') => Action::ListBreaks,
        KeyCode::Char('D') => Action::DeleteBreak,
        KeyCode::Char('<') => Action::ReverseStep,
        KeyCode::Char('t') => Action::GotoCursor,
        KeyCode::Char('m') => Action::Mark,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/tui.md lists every key of the table.
    #[test]
    fn the_doc_lists_every_key() {
        let doc = include_str!("../../docs/tui.md");
        for (keys, _, _) in KEYS {
            assert!(
                doc.contains(&format!("`{keys}`")),
                "docs/tui.md does not list `{keys}`"
            );
        }
    }

    #[test]
    fn vim_keys_and_arrows_agree() {
        let k = |c| action_for(KeyEvent::from(c), false);
        assert_eq!(k(KeyCode::Char('h')), k(KeyCode::Left));
        assert_eq!(k(KeyCode::Char('j')), k(KeyCode::Down));
        assert_eq!(k(KeyCode::Char('G')), k(KeyCode::End));
        assert_eq!(
            action_for(
                KeyEvent::new(KeyCode::Char('d'), KeyModifiers::CONTROL),
                false
            ),
            k(KeyCode::PageDown)
        );
    }

    /// `n` searches when browsing and steps a live replay; `.` steps in both.
    #[test]
    fn n_steps_only_a_live_replay() {
        let n = KeyEvent::from(KeyCode::Char('n'));
        assert_eq!(action_for(n, false), Some(Action::SearchNext));
        assert_eq!(action_for(n, true), Some(Action::Step));
        let dot = KeyEvent::from(KeyCode::Char('.'));
        assert_eq!(action_for(dot, false), Some(Action::Step));
        assert_eq!(
            action_for(KeyEvent::from(KeyCode::Char('N')), true),
            Some(Action::SearchPrev)
        );
    }
}
