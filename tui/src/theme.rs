//! Colours. Only the 16 named ANSI colours are used, so the terminal's own palette (dark or
//! light) decides the exact shades; text on a coloured cell is always black on a light
//! background colour or white on a dark one. With `NO_COLOR` set (https://no-color.org)
//! nothing is coloured: the views already carry their meaning in glyphs (each call has a
//! letter, the cursor is reversed video), so nothing is lost.

use ratatui::style::{Color, Modifier, Style};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

/// Backgrounds for calls in the blocked-process grid, with a readable foreground each.
const CALL_COLORS: [(Color, Color); 8] = [
    (Color::Cyan, Color::Black),
    (Color::Yellow, Color::Black),
    (Color::Magenta, Color::Black),
    (Color::Green, Color::Black),
    (Color::Red, Color::White),
    (Color::Blue, Color::White),
    (Color::LightRed, Color::Black),
    (Color::LightBlue, Color::Black),
];

impl Theme {
    /// Colours unless `NO_COLOR` is set to anything non-empty.
    pub fn from_env() -> Theme {
        Theme {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    pub fn title(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    pub fn dim(&self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }
    pub fn selected_tab(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
    }
    pub fn cursor(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    pub fn bad(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    pub fn good(&self) -> Style {
        self.fg(Color::Green)
    }
    pub fn series(&self, i: usize) -> Style {
        self.fg([Color::Cyan, Color::Yellow, Color::Magenta, Color::Green][i % 4])
    }
    /// A wildcard receive (`MPI_ANY_SOURCE`) in the History: the scheduler chose its sender.
    pub fn wildcard(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    pub fn status(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    /// A grid cell of the `i`th call.
    pub fn call(&self, i: usize) -> Style {
        if self.color {
            let (bg, fg) = CALL_COLORS[i % CALL_COLORS.len()];
            Style::default().bg(bg).fg(fg)
        } else {
            Style::default()
        }
    }
}
