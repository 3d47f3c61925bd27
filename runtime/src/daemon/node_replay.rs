//! A node daemon's share of a replay across hosts (`strobe replay FILE --hosts ...`,
//! docs/multi-host.md "Replay across hosts"): the Machine Manager sends a replay's job spec
//! (`replay` set) followed by one `replayPackage` message whose payload is this node's
//! replay package (replayer `remote.rs`). The runtime cannot read a package (the replayer
//! depends on the runtime, not the other way round), so the `strobe` binary hands the daemon
//! a [`ReplayBuilder`] that turns the bytes into a [`DaemonReplay`]: the engine's slice
//! source, node 0's sink tap, the ranks' recorded outcomes, and how the source ended.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use strobe_schema::JobSpec;
pub use strobe_schema::ReplayEnd;

use crate::engine::{SliceSink, SliceSource};

/// Node 0's tap: wraps the sink its engine writes to (the blocked-set prediction needs
/// each slice's completions).
pub type SinkTap = Box<dyn FnOnce(Arc<dyn SliceSink>) -> Arc<dyn SliceSink> + Send>;

/// This daemon's replay, built from its package.
pub struct DaemonReplay {
    pub source: Arc<dyn SliceSource>,
    /// Node 0 only.
    pub tap: Option<SinkTap>,
    /// The content of the ranks' outcome file (`outcome::ENV_REPLAY_OUTCOMES`): this
    /// node's ranks' recorded outcomes.
    pub outcomes_file: Vec<u8>,
    /// How the source ended so far (end of the recording, a rank off its path), for the
    /// Machine Manager's verdict.
    pub end: Box<dyn Fn() -> ReplayEnd + Send + Sync>,
}

/// Builds node `node`'s replay from its package bytes; `Err` says why they are refused.
pub type ReplayBuilder = fn(package: &[u8], node: u32) -> Result<DaemonReplay, String>;

/// The ranks' outcome file on this host, removed when dropped.
pub struct OutcomesFile {
    path: PathBuf,
}

impl OutcomesFile {
    /// Writes `bytes` to a new private file (0600, never an existing one) and points the
    /// spec's environment at it, replacing the Machine Manager's path (a file on its host).
    pub fn install(spec: &mut JobSpec, node: u32, bytes: &[u8]) -> std::io::Result<OutcomesFile> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::env::temp_dir().join(format!(
            "strobe-node{node}-outcomes-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        f.write_all(bytes)?;
        f.flush()?;
        let key = crate::outcome::ENV_REPLAY_OUTCOMES.as_bytes();
        spec.env.retain(|(k, _)| k != key);
        spec.env
            .push((key.to_vec(), path.as_os_str().as_bytes().to_vec()));
        Ok(OutcomesFile { path })
    }
}

impl Drop for OutcomesFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
