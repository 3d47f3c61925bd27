//! The verbs transport: the BCS primitives over RDMA (InfiniBand or RoCE) through
//! libibverbs, loaded at run time. See `provider.rs` for the narrow interface between the
//! transport's protocol logic and the provider (libibverbs, or the in-process emulation).

pub mod emu;
pub mod ibverbs;
mod ibverbs_qp;
pub mod ibverbs_sys;
pub mod provider;
pub mod system;
pub mod transport;

#[cfg(test)]
mod ibverbs_layout_tests;
#[cfg(test)]
mod ibverbs_tests;

pub use provider::{Provider, VerbsError};
pub use transport::{VerbsBinding, VerbsConfig, VerbsEndpoint};

/// The provider of this machine: libibverbs loaded at run time, or why it is unavailable
/// (no rdma-core installed, no device, no active port, memlock limit too low). The
/// explanation is one line, the one `strobe run --transport verbs` prints. The checks and
/// the `STROBE_VERBS_PROVIDER=emulated` hook are in `system.rs`.
pub fn system_provider() -> Result<std::sync::Arc<dyn Provider>, VerbsError> {
    system::system_provider()
}
