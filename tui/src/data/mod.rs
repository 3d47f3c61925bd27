//! Data access: the terminal UI reads recordings only through the recorder's reading API
//! (`strobe_recorder::Recording`), which holds every query the views make (chart columns
//! downsampled in SQL, the blocked-process grid, jumps, one slice's detail, per-process
//! statistics). A recording still being written is followed by `Recording::refresh`.

use std::path::Path;

pub use strobe_recorder::mmds_stats::PrimitiveRow;
pub use strobe_recorder::recording::{
    BlockedGrid, BlockedRank, Check, Column, DescriptorRow, FailedRank, Job, MatchEntry,
    MatchHistory, NodeRow, Notable, ProcessStats, RankTotals, SliceDetail, SliceRow,
    FULL_CHECK_MAX_BYTES, GRID_SAMPLES,
};
pub use strobe_recorder::Recording;

/// Errors reading a recording.
pub type DataError = strobe_recorder::RecordError;

/// Open a recording for browsing: every page is checked for files up to
/// [`FULL_CHECK_MAX_BYTES`]; bigger ones only get the header, version and table checks, so
/// a huge recording opens at once (a damaged page then surfaces as a query error in the
/// status line).
pub fn open(path: &Path) -> Result<Recording, DataError> {
    Recording::open_with(path, Check::UpTo(FULL_CHECK_MAX_BYTES))
}

/// How a failed rank ended, for the overview.
pub fn failed_rank_text(f: &FailedRank) -> String {
    match (f.signal, f.exit_code) {
        (Some(s), _) => format!("killed by signal {s}"),
        (None, Some(c)) => format!("exited with {c}"),
        _ => "failed".to_string(),
    }
}
