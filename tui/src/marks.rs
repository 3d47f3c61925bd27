//! What other commands found, shown on the recording: `strobe tui A.db --diff B.db` marks
//! the first slice where A and B differ (`strobe diff`'s first difference; `m` jumps there
//! and shows both sides).
//!
//! Explore results: a recording saved by `strobe explore -o FOUND.db` says which
//! alternative was forced (its `explored` row): the Overview shows it, the status line
//! greets with it, the History tab (5) marks the forced receive's slice, and `m` jumps
//! there when no `--diff` mark is set.

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
    /// What `strobe explore` forced to get this recording (read from the file).
    pub explored: Option<strobe_recorder::recording::Explored>,
}

impl Marks {
    /// The status line's greeting for what is marked.
    pub fn greeting(&self) -> Option<String> {
        let Some(d) = self.diff.as_ref() else {
            let e = self.explored.as_ref()?;
            return Some(match e.slice {
                Some(s) => format!("found by strobe explore, forced in slice {s}: m jumps there"),
                None => "found by strobe explore: the Overview says what was forced".into(),
            });
        };
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
