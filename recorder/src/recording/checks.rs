//! The correctness checks' findings (`check_finding`, docs/recording.md), read and checked
//! like every other table: a row strobe could not have written is damage.

use rusqlite::params;
use serde::Serialize;
use strobe_runtime::checks::CheckKind;

use super::Recording;
use crate::RecordError;

/// One finding as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckRow {
    pub slice: u64,
    pub rank: u32,
    /// `type-mismatch`, `leaked-request`, `buffer-reuse`, `unsafe-send-send`.
    pub kind: String,
    pub call: String,
    pub call_site: Option<String>,
    pub detail: String,
}

impl std::fmt::Display for CheckRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: rank {}: {}", self.kind, self.rank, self.call)?;
        if let Some(site) = &self.call_site {
            write!(f, " at {site}")?;
        }
        write!(f, " (slice {}): {}", self.slice, self.detail)
    }
}

/// Longest text a finding's fields may hold (the checker writes one line).
const MAX_TEXT: usize = 4096;

impl Recording {
    /// The findings, in the order found; `None` when the file predates the checks.
    pub fn checks(&self) -> Result<Option<Vec<CheckRow>>, RecordError> {
        if self.format < crate::migrations::CHECKS_VERSION {
            return Ok(None);
        }
        let mut st = self.conn.prepare(
            "SELECT slice, rank, kind, call, call_site, detail FROM check_finding ORDER BY id",
        )?;
        let rows = st.query_map(params![], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, String>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (slice, rank, kind, call, call_site, detail) = row?;
            out.push(self.check_row(slice, rank, kind, call, call_site, detail)?);
        }
        Ok(Some(out))
    }

    fn check_row(
        &self,
        slice: i64,
        rank: i64,
        kind: String,
        call: String,
        call_site: Option<String>,
        detail: String,
    ) -> Result<CheckRow, RecordError> {
        let damaged = |what: String| Err(RecordError::Corrupt(format!("check_finding: {what}")));
        if slice < 0 || slice as u64 > super::validate::MAX_SLICES {
            return damaged(format!("slice {slice}"));
        }
        if rank < 0 || rank >= i64::from(self.job.ranks) {
            return damaged(format!(
                "rank {rank} (the job has {} ranks)",
                self.job.ranks
            ));
        }
        if CheckKind::from_name(&kind).is_none() {
            return damaged(format!("unknown kind {kind:?}"));
        }
        let texts = [Some(&call), call_site.as_ref(), Some(&detail)];
        if texts
            .into_iter()
            .flatten()
            .any(|t| t.len() > MAX_TEXT || t.chars().any(char::is_control))
        {
            return damaged("a text field is too long or holds control characters".into());
        }
        Ok(CheckRow {
            slice: slice as u64,
            rank: rank as u32,
            kind,
            call,
            call_site,
            detail,
        })
    }
}
