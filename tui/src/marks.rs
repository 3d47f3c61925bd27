//! What other commands found, shown on the recording: `strobe tui A.db --diff B.db` marks
//! the first slice where A and B differ (`strobe diff`'s first difference; `m` jumps there
//! and shows both sides).
//!
//! Explore results: a recording saved by `strobe explore -o FOUND.db` is an ordinary
//! recording and opens as one; the alternative that was forced (which wildcard receive got
//! which sender) is not stored in the file (explore prints it), so the TUI cannot show it.
//! Its History tab (5) shows every wildcard receive's sender, which is where the forced
//! choice is visible, and `--diff` against the passing recording marks it.

use std::path::PathBuf;

/// The first difference from another recording.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiffMark {
    /// The recording compared with.
    pub other: PathBuf,
    /// The slice of this recording where the first difference shows (`None`: this side
    /// has no such call, or the recordings do not differ when `text` is empty).
    pub slice: Option<u64>,
    /// `strobe diff`'s report of it (empty: no difference).
    pub text: String,
}

/// Everything marked on the recording.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    pub diff: Option<DiffMark>,
}

impl Marks {
    /// The status line's greeting for what is marked.
    pub fn greeting(&self) -> Option<String> {
        let d = self.diff.as_ref()?;
        let other = d
            .other
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Some(match (d.text.is_empty(), d.slice) {
            (true, _) => format!("no difference from {other}"),
            (false, Some(s)) => {
                format!("first difference from {other} in slice {s}: m jumps there")
            }
            (false, None) => {
                format!("differs from {other} (not in a slice of this file): m shows it")
            }
        })
    }
}
