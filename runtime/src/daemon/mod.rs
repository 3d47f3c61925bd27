//! Jobs across hosts (issue 15): node daemons (`strobe node`, [`node_host`]) and the
//! Machine Manager that starts and watches them ([`machine`]), talking over authenticated
//! control connections ([`control`]). See docs/multi-host.md.
//!
//! [`wire_sink`]: the engine's slice sink over the control connection (recording across
//! hosts).
//!
//! [`launch`]: the launchers (local, ssh, MPICH Hydra through PMI-1, Slurm), hostfiles and
//! rank placement.

pub mod control;
pub mod launch;
mod local_ranks;
pub mod machine;
pub mod node_host;
pub mod node_replay;
pub mod ranks;
pub mod wire_sink;

/// What can go wrong in a daemon or the Machine Manager.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The daemon's environment or command line is incomplete or malformed.
    #[error("{0}")]
    Setup(String),
    /// The control connection could not be made or broke.
    #[error("control connection: {0}")]
    Control(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("fabric: {0}")]
    Transport(#[from] crate::transport::TransportError),
    #[error("cannot start the node manager: {0}")]
    Engine(#[from] crate::engine::EngineError),
    /// The daemons could not be started.
    #[error("{0}")]
    Launch(String),
    /// The launcher's program (the remote shell, `mpiexec`, `srun`) does not exist here:
    /// the text names it (exit 127, as a shell reports a command not found).
    #[error("{0}")]
    LauncherNotFound(String),
}
